"""Stored schedules on a real server: the store's calls (in a caller's transaction and
in their own), bad input refused with nothing written, workers firing each slot once,
pause, resume and run-now taking effect within a second of their commit, missed slots
skipped or caught up, code-defined schedules kept in the store, a worker of an app of
tasks firing into each of its queues, the async twin."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

import fdb
import pytest

from fdbrecipes import (
    FairQueue,
    Job,
    Limits,
    PriorityQueue,
    Queue,
    Schedule,
    Schedules,
    UnknownScheduleError,
    Worker,
    aio,
    catch_up,
    concurrency,
)
from tests.helpers import dump, eventually

pytestmark = pytest.mark.integration
pytest.importorskip("cronsim")


def spaces(subspace: Any) -> Tuple[Any, Any, Any]:
    """The store's, the jobs' and the worker's own subspaces."""
    return (fdb.Subspace(rawPrefix=subspace.key() + b"s"),
            fdb.Subspace(rawPrefix=subspace.key() + b"j"),
            fdb.Subspace(rawPrefix=subspace.key() + b"w"))


class Seen:
    """A handler recording when each job id arrived (thread-safe)."""

    def __init__(self) -> None:
        self.at: Dict[bytes, float] = {}
        self.order: List[bytes] = []
        self.lock = threading.Lock()

    def __call__(self, job: Job) -> None:
        with self.lock:
            self.order.append(job.id)
            self.at.setdefault(job.id, time.time())

    def got(self, id_: bytes) -> bool:
        with self.lock:
            return id_ in self.at


def test_the_store_keeps_schedules_and_refuses_bad_input_writing_nothing(
        db: Any, fdb_subspace: Any) -> None:
    store_space, jobs_space, _ = spaces(fdb_subspace)
    store, jobs = Schedules(store_space), PriorityQueue(jobs_space)
    store.add(db, "nightly", target=jobs, cron="30 2 * * *", tz="Europe/Berlin",
              value=("report", 1), priority=3, misfire=catch_up(2), jitter=5.0)
    store.add(db, "often", target=jobs, every=60.0, paused=True)
    before = dump(db, store_space)
    bad = [
        (ValueError, "cron", dict(cron="61 * * * *")),
        (ValueError, "unknown time zone 'Mars/Olympus'", dict(cron="@daily", tz="Mars/Olympus")),
        (ValueError, "'nightly' exists", dict(cron="@daily")),
        (TypeError, "exactly one of cron= and every=", dict(cron="@daily", every=5.0)),
        (ValueError, "tz applies to cron", dict(every=5.0, tz="UTC")),
        (TypeError, "misfire", dict(every=5.0, misfire="catch up")),
        (ValueError, "jitter", dict(every=5.0, jitter=-1)),
        (TypeError, "priority", dict(every=5.0, priority="high")),
        (TypeError, "target", dict(every=5.0, target=object())),
    ]
    for error, message, kwargs in bad:
        name = "nightly" if "exists" in message else "new"
        arguments: Dict[str, Any] = {"target": jobs, **kwargs}
        with pytest.raises(error, match=message):
            store.add(db, name, **arguments)
        tr = db.create_transaction()  # and in a caller's transaction: nothing written there
        with pytest.raises(error, match=message):
            store.add(tr, name, **arguments)
        tr.commit().wait()
    assert dump(db, store_space) == before
    listed = store.list(db)
    assert [s.name for s in listed] == ["nightly", "often"]
    nightly, often = listed
    assert (nightly.cron, nightly.tz, nightly.every, nightly.value, nightly.where) == (
        "30 2 * * *", "Europe/Berlin", None, ("report", 1), {"priority": 3})
    assert (nightly.misfire, nightly.jitter, nightly.paused_at, nightly.target) == (
        catch_up(2), 5.0, None, jobs.subspace.key())
    assert nightly.next_at is not None and nightly.next_at > time.time() and nightly.lag == 0
    assert often.paused_at is not None and often.next_at is None and often.misfire == "skip"
    assert store.list(db, limit=1) == listed[:1]
    assert [s.name for s in store.list(db, after="nightly")] == ["often"]
    # in a caller's transaction: part of it, or nothing
    tr = db.create_transaction()
    store.add(tr, "later", target=jobs, every=10.0)
    assert store.pause(tr, "later") and store.get(tr, "later").paused_at is not None
    assert store.get(db, "later") is None  # not committed yet
    tr.cancel()
    assert store.get(db, "later") is None
    assert store.resume(db, "often") and not store.resume(db, "often")
    assert store.pause(db, "often") and not store.pause(db, "often")
    assert store.remove(db, "often") and not store.remove(db, "often")
    with pytest.raises(UnknownScheduleError, match="'often'"):
        store.pause(db, "often")
    with pytest.raises(UnknownScheduleError):
        store.run_now(db, "often")
    assert [s.name for s in store.list(db)] == ["nightly"]


def test_workers_fire_each_slot_once_and_pause_resume_run_now_within_a_second(
        db: Any, fdb_subspace: Any) -> None:
    store_space, jobs_space, own_space = spaces(fdb_subspace)
    jobs = Queue(jobs_space)
    store = Schedules(store_space, targets=[jobs], recent=1_000)
    store.add(db, "tick", target=jobs, every=0.2, value="tick")
    seen = Seen()
    # three workers carrying the store, serving the jobs' queue (one) or their own
    workers = [Worker(db, jobs, seen, schedule_store=store),
               Worker(db, Queue(own_space), seen, schedule_store=store),
               Worker(db, Queue(own_space), seen, schedule_store=store)]
    with workers[0], workers[1], workers[2]:
        eventually(lambda: len(store.get(db, "tick").fires) >= 10, 30, "10 fires")
        paused = store.pause(db, "tick")
        paused_at = time.time()
        time.sleep(1.5)  # a second and a half of slots that must not fire
        info = store.get(db, "tick")
        assert paused and info.paused_at is not None
        assert all(f.slot <= paused_at for f in info.fires), "a slot fired after the pause"
        assert store.resume(db, "tick")
        resumed_at = time.time()
        after = eventually(lambda: [f for f in store.get(db, "tick").fires
                                    if f.slot > resumed_at], 5, "a fire after the resume")
        assert after[0].fired_at - resumed_at < 1.0
        assert store.pause(db, "tick")
        id_ = store.run_now(db, "tick")
        asked_at = time.time()
        eventually(lambda: seen.got(id_), 5, "the run-now job")
        assert seen.at[id_] - asked_at < 1.0
        fires = store.get(db, "tick").fires
        ran = eventually(lambda: len(seen.order) >= len(fires) and list(seen.order), 10,
                         "every job ran")
    assert sorted(ran) == sorted(f.job_id for f in fires)
    slots = [f.slot for f in fires if f.how == "slot"]
    assert len(slots) == len(set(slots)), "a slot fired twice"
    assert slots == sorted(slots)
    # every slot between the first and the pause fired (0.2 s apart), none twice
    before_pause = [s for s in slots if s <= paused_at]
    assert [round((b - a) / 0.2) for a, b in zip(before_pause, before_pause[1:])] == \
        [1] * (len(before_pause) - 1)
    assert [f.how for f in fires if f.job_id == id_] == ["run now"]


def test_missed_slots_are_skipped_or_caught_up_after_a_downtime(
        db: Any, fdb_subspace: Any) -> None:
    store_space, jobs_space, _ = spaces(fdb_subspace)
    jobs = Queue(jobs_space)
    store = Schedules(store_space)
    store.add(db, "skip", target=jobs, every=0.5, grace=0.3)
    store.add(db, "catch", target=jobs, every=0.5, grace=0.3, misfire=catch_up(3))
    time.sleep(2.5)  # no worker: 5 slots of each go by
    started = time.time()
    with Worker(db, jobs, Seen(), schedule_store=store):
        eventually(lambda: store.get(db, "skip").fires and store.get(db, "catch").fires,
                   10, "fires")
    first_skip = store.get(db, "skip").fires[0]
    caught = store.get(db, "catch").fires
    assert first_skip.slot > started - 0.3  # the missed ones were skipped
    assert [f.how for f in caught][:3] == ["caught up"] * 3
    assert all(f.fired_at - f.slot > 0.3 for f in caught[:3])


def an_hour_later(after: float) -> float:
    return after + 3600


def test_code_defined_schedules_are_kept_in_the_store_and_keep_their_pause(
        db: Any, fdb_subspace: Any) -> None:
    store_space, jobs_space, _ = spaces(fdb_subspace)
    jobs = FairQueue(jobs_space)
    store = Schedules(store_space)
    daily = Schedule(jobs, "daily", cron="0 3 * * *", tz="America/New_York", group="acme",
                     value=b"x")
    local = Schedule(jobs, "local", at=an_hour_later, group="acme")
    with Worker(db, jobs, Seen(), schedules=[daily, local], schedule_store=store):
        eventually(lambda: store.get(db, "daily"), 10, "the upsert")
    info = store.get(db, "daily")
    assert (info.cron, info.tz, info.where) == ("0 3 * * *", "America/New_York",
                                                {"group": "acme"})
    assert store.get(db, "local") is None  # a function stays in code
    assert store.pause(db, "daily")
    assert not store.upsert(db, daily)  # says the same: nothing written, still paused
    assert store.get(db, "daily").paused_at is not None
    changed = Schedule(jobs, "daily", cron="0 4 * * *", tz="America/New_York", group="acme")
    assert store.upsert(db, changed)
    info = store.get(db, "daily")
    assert info.cron == "0 4 * * *" and info.paused_at is not None and info.value == b""
    with pytest.raises(TypeError, match="at="):
        store.upsert(db, local)


def test_a_worker_fires_only_what_it_can_push_into(db: Any, fdb_subspace: Any) -> None:
    store_space, jobs_space, own_space = spaces(fdb_subspace)
    jobs = Queue(jobs_space)
    Schedules(store_space).add(db, "elsewhere", target=jobs, every=0.2)
    blind = Schedules(store_space)  # knows no target: its worker fires nothing
    with Worker(db, Queue(own_space), Seen(), schedule_store=blind):
        time.sleep(1.0)  # slots come and go; none may fire
    assert blind.get(db, "elsewhere").fires == ()
    assert jobs.size(db) == 0


def test_the_async_twin(db: Any, fdb_subspace: Any) -> None:
    store_space, jobs_space, _ = spaces(fdb_subspace)

    async def main() -> None:
        jobs = aio.AsyncQueue(jobs_space)
        store = aio.AsyncSchedules(store_space)
        await store.add(db, "a", target=jobs, cron="*/1 * * * * *")
        seen: List[bytes] = []

        async def handle(job: Job) -> None:
            seen.append(job.id)

        async with aio.AsyncWorker(db, jobs, handle, schedule_store=store):
            id_ = await store.run_now(db, "a")
            deadline = time.monotonic() + 10
            while id_ not in seen or len(seen) < 3:
                assert time.monotonic() < deadline, seen
                await asyncio.sleep(0.05)
        assert [s.name for s in await store.list(db)] == ["a"]
        assert await store.remove(db, "a")

    asyncio.run(main())


def cli(cluster_file: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fdbrecipes", *args, "--cluster-file",
                           cluster_file], capture_output=True, text=True, timeout=120)


def test_the_command_line_adds_lists_pauses_runs_and_removes(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    store_space, jobs_space = fdb_subspace["schedules"], fdb_subspace["jobs"]  # as tuples
    jobs = Queue(jobs_space)
    jobs.push(db, "something")  # the target is recognised as a queue
    place = ["--tuple", repr(fdb.tuple.unpack(store_space.key()))]
    target = ["--target-tuple", repr(fdb.tuple.unpack(jobs_space.key()))]
    added = cli(fdb_cluster_file, "schedules", "add", *place, "nightly", "--cron",
                "0 3 * * *", "--tz", "Europe/Berlin", *target, "--value", "[1, \"a\"]",
                "--type", "json", "--catch-up", "2")
    assert added.returncode == 0, added.stderr
    bad = cli(fdb_cluster_file, "schedules", "add", *place, "other", "--cron", "0 3 * *",
              "--tz", "Europe/Berlin", *target)
    assert bad.returncode == 1 and "cron: '0 3 * *' is not a cron expression" in bad.stderr
    zone = cli(fdb_cluster_file, "schedules", "add", *place, "other", "--cron", "@daily",
               "--tz", "Europe/Paname", *target)
    assert zone.returncode == 1 and "unknown time zone 'Europe/Paname'" in zone.stderr
    twice = cli(fdb_cluster_file, "schedules", "add", *place, "nightly", "--every", "5", *target)
    assert twice.returncode == 1 and "'nightly' exists" in twice.stderr
    listed = json.loads(cli(fdb_cluster_file, "schedules", "list", *place, "--json").stdout)
    [row] = listed["schedules"]
    assert (row["name"], row["cron"], row["tz"], row["misfire"], row["value"]) == (
        "nightly", "0 3 * * *", "Europe/Berlin", "catch_up(2)", {"tuple": [1, "a"]})
    assert row["target"] == jobs_space.key().hex()
    for action, said in (("pause", "paused"), ("pause", "already paused"),
                         ("resume", "resumed"), ("run-now", "asked the workers")):
        done = cli(fdb_cluster_file, "schedules", action, *place, "nightly")
        assert done.returncode == 0 and said in done.stdout, done.stderr
    table = cli(fdb_cluster_file, "schedules", "list", *place).stdout
    assert "nightly" in table and "0 3 * * * Europe/Berlin" in table
    refused = cli(fdb_cluster_file, "schedules", "remove", *place, "nightly")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    removed = cli(fdb_cluster_file, "schedules", "remove", *place, "nightly", "--yes")
    assert removed.returncode == 0 and "removed" in removed.stdout
    unknown = cli(fdb_cluster_file, "schedules", "pause", *place, "nightly")
    assert unknown.returncode == 1 and "no schedule named 'nightly'" in unknown.stderr
    wrong = cli(fdb_cluster_file, "schedules", "list", "--tuple",
                repr(fdb.tuple.unpack(jobs_space.key())))
    assert wrong.returncode == 1 and "no schedule store" in wrong.stderr
    stats = cli(fdb_cluster_file, "stats", *place)
    assert stats.returncode == 1 and "a schedule store is at" in stats.stderr


def test_the_command_line_adds_a_schedule_with_limit_keys(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    """``schedules add --limit-key NAME KEY`` stores the jobs' keys as
    ``Schedules.add(..., limit_keys=...)`` does, each KEY read as ``--limit-key-type``
    says, checked against the limit store named; a NAME it does not define, or a key
    without a store, is refused with nothing written."""
    store_space, jobs_space = fdb_subspace["schedules"], fdb_subspace["jobs"]
    limits_space = fdb_subspace["limits"]
    limits = Limits(limits_space)
    limits.set(db, "per-customer", concurrency(1))
    limits.set(db, "per-shard", concurrency(4))
    Queue(jobs_space).push(db, "something")
    place = ["--tuple", repr(fdb.tuple.unpack(store_space.key()))]
    target = ["--target-tuple", repr(fdb.tuple.unpack(jobs_space.key()))]
    store = ["--limits-tuple", repr(fdb.tuple.unpack(limits_space.key()))]
    added = cli(fdb_cluster_file, "schedules", "add", *place, "acme", "--every", "60", *target,
                "--limit-key", "per-customer", "acme", *store, "--paused")
    assert added.returncode == 0, added.stderr
    typed = cli(fdb_cluster_file, "schedules", "add", *place, "shards", "--every", "60",
                *target, "--limit-key", "per-shard", "[3, \"eu\"]", "--limit-key-type", "json",
                *store, "--paused")
    assert typed.returncode == 0, typed.stderr
    schedules = Schedules(store_space)
    assert schedules.get(db, "acme").limit_keys == {"per-customer": "acme"}
    assert schedules.get(db, "shards").limit_keys == {"per-shard": (3, "eu")}
    listed = json.loads(cli(fdb_cluster_file, "schedules", "list", *place, "--json").stdout)
    assert {row["name"]: row["limit_keys"] for row in listed["schedules"]} == {
        "acme": {"per-customer": "acme"}, "shards": {"per-shard": {"tuple": [3, "eu"]}}}
    unknown = cli(fdb_cluster_file, "schedules", "add", *place, "typo", "--every", "60",
                  *target, "--limit-key", "per-custmer", "acme", *store)
    assert unknown.returncode == 1
    assert "defines no limit named 'per-custmer'" in unknown.stderr, unknown.stderr
    storeless = cli(fdb_cluster_file, "schedules", "add", *place, "typo", "--every", "60",
                    *target, "--limit-key", "per-customer", "acme")
    assert storeless.returncode == 2 and "--limits-directory" in storeless.stderr
    too_long = cli(fdb_cluster_file, "schedules", "add", *place, "typo", "--every", "60",
                   *target, "--limit-key", "per-customer", "x" * 2_000, *store)
    assert too_long.returncode == 1 and "limit_keys['per-customer']" in too_long.stderr
    assert schedules.get(db, "typo") is None


def test_a_schedules_lag_is_a_metric(db: Any, fdb_subspace: Any) -> None:
    from fdbrecipes.metrics import SCHEDULE_LAG, SCHEDULE_PAUSED, collect

    store_space, jobs_space, _ = spaces(fdb_subspace)
    jobs = Queue(jobs_space)
    store = Schedules(store_space)
    store.add(db, "late", target=jobs, every=0.5)
    store.add(db, "held", target=jobs, every=0.5, paused=True)
    time.sleep(1.6)  # no worker: "late" falls behind by a second or more
    samples = {(s.name, s.label_dict["schedule"]): s.value
               for s in collect(db, {"jobs": jobs, "cron": store})
               if s.name in (SCHEDULE_LAG, SCHEDULE_PAUSED)}
    assert samples[(SCHEDULE_LAG, "late")] >= 1.0
    assert samples[(SCHEDULE_LAG, "held")] == 0.0
    assert samples[(SCHEDULE_PAUSED, "held")] == 1.0 and samples[(SCHEDULE_PAUSED, "late")] == 0
    with Worker(db, jobs, Seen(), schedule_store=store):
        eventually(lambda: store.get(db, "late").lag < 0.5, 10, "the worker catching up")


def test_a_worker_of_an_app_fires_the_stores_schedules_into_each_of_its_queues(
        db: Any, fdb_subspace: Any) -> None:
    from fdbrecipes.tasks import App, current_job
    from fdbrecipes.tasks.envelope import seal

    store_space, app_space, _ = spaces(fdb_subspace)
    app = App(app_space)
    ran: Dict[str, List[bytes]] = {"a": [], "b": []}
    lock = threading.Lock()

    @app.task(name="tick-a", queue="a")
    def tick_a() -> None:
        with lock:
            ran["a"].append(current_job().id)

    @app.task(name="tick-b", queue="b")
    def tick_b() -> None:
        with lock:
            ran["b"].append(current_job().id)

    store = Schedules(store_space)  # no targets: the worker knows its app's queues
    for queue in ("a", "b"):
        store.add(db, f"every-{queue}", target=app.structure(queue), every=0.2,
                  value=seal(f"tick-{queue}", app.codec.encode({}), None))
    with Worker(db, app, schedule_store=store):
        eventually(lambda: all(len(store.get(db, f"every-{q}").fires) >= 3 for q in "ab")
                   and all(len(ran[q]) >= 3 for q in "ab"), 30, "both queues' schedules")
    with lock:
        for queue in "ab":  # each slot's job ran once
            assert len(ran[queue]) == len(set(ran[queue]))
    for queue in "ab":
        assert app.structure(queue).dead(db) == []
