"""Limits shared by name (issue 40): concurrency and rate, global and keyed, checked in
the claim's own transaction; slots given back by ack, release, dead letter and expiry;
changes at run time; no head-of-line blocking."""

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
    Worker,
    concurrency,
    metrics,
    rate,
)
from fdbrecipes.aio import AsyncLimits, AsyncQueue
from fdbrecipes.metrics import LIMIT_N, LIMIT_PARKED, LIMIT_RUNNING, collect
from tests.helpers import TestClock, dump, run_threads

pytestmark = pytest.mark.integration


def user(value: Any) -> Any:
    """The key of a job ``(user, n)``: its user."""
    return value[0]


@pytest.fixture
def q(fdb_subspace: Any, clock: TestClock, limits: Limits) -> Queue:
    return Queue(fdb_subspace["q"], clock=clock,
                 limits=[limits.use("per-user", key=user), limits.use("all")])


def test_global_concurrency_counts_running_jobs(db: Any, q: Queue, limits: Limits) -> None:
    limits.set(db, "all", concurrency(2))
    q.push_many(db, [("a", i) for i in range(5)])
    first = q.claim_many(db, 5, 30)
    assert [lease.value for lease in first] == [("a", 0), ("a", 1)]
    assert q.claim(db, 30) is None
    state = limits.state(db, "all")
    assert state is not None and state.running == 2 and state.parked == 3
    q.ack(db, first[0])  # a slot back: one parked job returns to its place
    again = q.claim_many(db, 5, 30)
    assert [lease.value for lease in again] == [("a", 2)]
    q.release(db, first[1])  # release gives the slot back too (and the job returns)
    got = q.claim_many(db, 5, 30)
    assert sorted(lease.value for lease in got) == [("a", 1)]
    assert q.claim(db, 30) is None


def test_keyed_concurrency_does_not_block_other_keys(db: Any, q: Queue,
                                                     limits: Limits) -> None:
    limits.set(db, "per-user", concurrency(1))
    q.push_many(db, [("hog", i) for i in range(200)] + [("b", 0), ("c", 0)])
    taken = []
    for _ in range(3):
        lease = q.claim(db, 30)
        assert lease is not None
        taken.append(lease.value)
    assert taken == [("hog", 0), ("b", 0), ("c", 0)]
    assert q.claim(db, 30) is None
    state = limits.state(db, "per-user", "hog")
    assert state is not None and state.running == 1 and state.parked == 199


def test_slot_comes_back_with_dead_letter_and_expiry(db: Any, fdb_subspace: Any,
                                                     clock: TestClock,
                                                     limits: Limits) -> None:
    q = Queue(fdb_subspace["d"], clock=clock, max_deliveries=1,
              limits=limits.use("one"))
    limits.set(db, "one", concurrency(1))
    q.push_many(db, [1, 2, 3])
    lease = q.claim(db, 30)
    assert lease is not None and lease.value == 1
    assert q.claim(db, 30) is None
    q.release(db, lease)  # its only delivery: a dead letter, and the slot back
    assert [d.value for d in q.dead(db)] == [1]
    lease = q.claim(db, 5)
    assert lease is not None and lease.value == 2
    clock.advance(6)  # the lease expires: its slot counts free at once
    lease3 = q.claim(db, 30)
    assert lease3 is not None and lease3.value == 3
    assert [d.value for d in q.dead(db)] == [1, 2]


def test_extend_keeps_the_slot(db: Any, q: Queue, limits: Limits, clock: TestClock) -> None:
    limits.set(db, "all", concurrency(1))
    q.push_many(db, [("a", 0), ("a", 1)])
    lease = q.claim(db, 5)
    assert lease is not None
    clock.advance(4)
    q.extend(db, lease, 10)
    clock.advance(4)  # past the first deadline, before the new one
    assert q.claim(db, 30) is None
    q.ack(db, lease)
    assert q.claim(db, 30) is not None


def test_a_claims_slots_kept_as_runs_stay_exact(db: Any, fdb_subspace: Any,
                                               clock: TestClock) -> None:
    """A claim keeps its slots as runs (a key a run): its leases ended one by one,
    one of them extended alone, a whole claim extended together, and expiries (slots
    of expired runs taken again by later claims) give back exactly their own slots,
    so the jobs running are always counted exactly and never exceed n."""
    limits = Limits(fdb_subspace["runs"], clock=clock)  # its state() on the test's clock
    q = Queue(fdb_subspace["r"], clock=clock, limits=limits.use("wide"))
    limits.set(db, "wide", concurrency(300))
    q.push_many(db, list(range(700)))

    def running() -> int:
        state = limits.state(db, "wide")
        assert state is not None
        return state.running

    a = q.claim_many(db, 200, 10)
    b = q.claim_many(db, 200, 10)
    assert len(a) == 200 and len(b) == 100 and running() == 300
    assert q.claim(db, 10) is None
    q.ack(db, a[0])  # two leases of a run end alone
    assert q.release(db, a[1])
    assert running() == 298
    q.extend(db, b[0], 30)  # one lease of a run moves on alone
    c = q.claim_many(db, 5, 10)
    assert len(c) == 2 and running() == 300
    assert all(q.extend_many(db, c, 30))  # a whole claim moves on together
    assert q.claim(db, 10) is None
    clock.advance(11)  # a's and b's other leases expire: 3 still run
    assert running() == 3
    got: List[Any] = []
    for _ in range(20):
        got += q.claim_many(db, 300, 10)
        assert running() == 3 + len(got) <= 300
        if len(got) == 297:
            break
    assert len(got) == 297 and q.claim(db, 10) is None
    assert all(q.ack_many(db, [b[0], *c, *got]))
    assert running() == 0


def test_rate_window_is_exact(db: Any, q: Queue, limits: Limits, clock: TestClock) -> None:
    limits.set(db, "all", rate(3, per_seconds=10))
    q.push_many(db, [("a", i) for i in range(7)])
    got = q.claim_many(db, 7, 30)
    assert len(got) == 3
    assert q.claim(db, 30) is None
    for lease in got:
        q.ack(db, lease)  # acks give no rate back: time does
    assert q.claim(db, 30) is None
    clock.advance(10.5)
    assert len(q.claim_many(db, 7, 30)) == 3


def test_rate_cost(db: Any, fdb_subspace: Any, clock: TestClock, limits: Limits) -> None:
    q = Queue(fdb_subspace["c"], clock=clock, limits=limits.use("api", cost=user))
    limits.set(db, "api", rate(10, per_seconds=60))
    q.push_many(db, [(4, "a"), (4, "b"), (4, "c")])
    assert [lease.value for lease in q.claim_many(db, 3, 30)] == [(4, "a"), (4, "b")]


def test_change_takes_effect_at_the_next_claim(db: Any, q: Queue, limits: Limits) -> None:
    limits.set(db, "all", concurrency(1))
    q.push_many(db, [("a", i) for i in range(4)])
    assert len(q.claim_many(db, 4, 30)) == 1
    assert limits.set(db, "all", concurrency(3)) == concurrency(1)
    assert len(q.claim_many(db, 4, 30)) == 2  # parked jobs moved back by the change
    limits.delete(db, "all")
    assert len(q.claim_many(db, 4, 30)) == 1
    assert limits.get(db, "all") is None and limits.list(db) == {}


def test_bad_limits_are_refused_with_nothing_written(db: Any, fdb_subspace: Any,
                                                     limits: Limits) -> None:
    before = dump(db, fdb_subspace)
    with pytest.raises(ValueError, match="n must be >= 1"):
        limits.set(db, "x", concurrency(-1))
    with pytest.raises(ValueError, match="per_seconds"):
        limits.set(db, "x", rate(5, 0))
    with pytest.raises(TypeError, match="limit must be made by"):
        limits.set(db, "x", 5)
    with pytest.raises(ValueError, match="name"):
        limits.set(db, "", concurrency(1))
    with pytest.raises(ValueError, match="no limit is named 'nope'"):
        limits.delete(db, "nope")
    with pytest.raises(TypeError, match="limits must be"):
        Queue(fdb_subspace, limits=5)
    with pytest.raises(TypeError, match="key"):
        limits.use("x", key=5)  # type: ignore[arg-type]
    assert dump(db, fdb_subspace) == before


def test_shared_by_two_structures(db: Any, fdb_subspace: Any, clock: TestClock,
                                  limits: Limits) -> None:
    a = Queue(fdb_subspace["a"], clock=clock, limits=limits.use("shared"))
    b = PriorityQueue(fdb_subspace["b"], clock=clock, limits=limits.use("shared"))
    limits.set(db, "shared", concurrency(1))
    a.push(db, "a1")
    b.push(db, "b1", priority=1)
    lease = a.claim(db, 30)
    assert lease is not None
    assert b.claim_min(db, 30) is None  # parked under the shared key
    a.ack(db, lease)  # moves b's parked job back, in b
    got = b.claim_min(db, 30)
    assert got is not None and got.value == "b1"


def test_concurrency_never_exceeded_by_threads(db: Any, fdb_subspace: Any,
                                               limits: Limits) -> None:
    q = Queue(fdb_subspace["t"], limits=[limits.use("per-user", key=user),
                                         limits.use("all")])
    limits.set(db, "all", concurrency(4))
    limits.set(db, "per-user", concurrency(2))
    q.push_many(db, [(f"u{i % 3}", i) for i in range(60)])
    lock = threading.Lock()
    running: Dict[str, int] = {}
    peak: List[Tuple[str, int]] = []
    done: List[int] = []
    errors: List[BaseException] = []

    def consume() -> None:
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                lease = q.claim_wait(db, 30, timeout=0.5)
                if lease is None:
                    with lock:
                        if len(done) == 60:
                            return
                    continue
                u = lease.value[0]
                with lock:
                    running[u] = running.get(u, 0) + 1
                    peak.append((u, running[u]))
                    peak.append(("all", sum(running.values())))
                time.sleep(0.005)  # the work, holding its slots
                with lock:
                    running[u] -= 1
                q.ack(db, lease)
                with lock:
                    done.append(lease.value[1])
        except BaseException as e:
            errors.append(e)

    run_threads([threading.Thread(target=consume) for _ in range(8)], errors, 90)
    assert sorted(done) == list(range(60))
    assert max(n for k, n in peak if k == "all") <= 4
    assert max(n for k, n in peak if k != "all") <= 2


def test_async_twin(db: Any, fdb_subspace: Any) -> None:
    limits = AsyncLimits(fdb_subspace["al"])
    q: AsyncQueue[Any] = AsyncQueue(fdb_subspace["aq"], limits=limits.use("g"))

    async def main() -> None:
        await limits.set(db, "g", concurrency(1))
        await q.push_many(db, [1, 2])
        lease = await q.claim(db, 30)
        assert lease is not None and await q.claim(db, 30) is None
        await q.ack(db, lease)
        assert (await q.claim(db, 30)) is not None
        assert await limits.list(db) == {"g": concurrency(1)}

    asyncio.run(main())


def cli(cluster_file: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fdbrecipes", *args, "--cluster-file",
                           cluster_file], capture_output=True, text=True, timeout=120)


def test_the_command_line_lists_sets_reads_and_deletes(db: Any, fdb_subspace: Any,
                                                       fdb_cluster_file: str) -> None:
    space = fdb_subspace["cli-limits"]
    place = ["--tuple", repr(fdb.tuple.unpack(space.key()))]
    assert "(no limits)" in cli(fdb_cluster_file, "limits", "list", *place).stdout
    made = cli(fdb_cluster_file, "limits", "set", *place, "per-user", "--concurrency", "2")
    assert made.returncode == 0, made.stderr
    made = cli(fdb_cluster_file, "limits", "set", *place, "api", "--rate", "10", "--per", "60")
    assert made.returncode == 0, made.stderr
    assert Limits(space).list(db) == {"per-user": concurrency(2), "api": rate(10, 60)}
    listed = json.loads(cli(fdb_cluster_file, "limits", "list", *place, "--json").stdout)
    assert [row["name"] for row in listed["limits"]] == ["api", "per-user"]
    bad = cli(fdb_cluster_file, "limits", "set", *place, "api", "--rate", "10")
    assert bad.returncode != 0 and "--per" in bad.stderr
    state = json.loads(cli(fdb_cluster_file, "limits", "state", *place, "per-user", "--key",
                           "'alice'", "--json").stdout)
    assert state["running"] == 0 and state["parked"] == 0
    refused = cli(fdb_cluster_file, "limits", "delete", *place, "api")
    assert refused.returncode != 0 and "--yes" in refused.stderr
    gone = cli(fdb_cluster_file, "limits", "delete", *place, "api", "--yes")
    assert gone.returncode == 0, gone.stderr
    unknown = cli(fdb_cluster_file, "limits", "delete", *place, "api", "--yes")
    assert unknown.returncode != 0 and "no limit is named 'api'" in unknown.stderr
    assert Limits(space).list(db) == {"per-user": concurrency(2)}


def test_workers_share_the_limits(db: Any, fdb_subspace: Any, limits: Limits) -> None:
    """Three Workers (8, 8 and 4 threads) on three structures (a Queue, a PriorityQueue,
    a FairQueue of three groups) sharing a keyed limit and a global one: the handlers
    never see more jobs at once than the limits allow, and every job runs once (the
    workers' acks and claims share transactions; a slot freed in one structure moves
    back a job parked in another)."""
    uses = [limits.use("per-user", key=user), limits.use("all")]
    a: Queue[Any] = Queue(fdb_subspace["wa"], limits=uses, history=600)
    b: PriorityQueue[Any] = PriorityQueue(fdb_subspace["wb"], limits=uses)
    c = FairQueue(fdb_subspace["wc"], limits=uses, history=600)
    limits.set(db, "all", concurrency(5))
    limits.set(db, "per-user", concurrency(2))
    a.push_many(db, [(f"u{i % 4}", i) for i in range(80)])
    b.push_many(db, [((f"u{i % 4}", i), 0) for i in range(80, 160)])
    for i in range(160, 190):
        c.push(db, (f"u{i % 4}", i), group=f"g{i % 3}")
    lock = threading.Lock()
    running: Dict[str, int] = {}
    peaks = {"all": 0, "user": 0}
    done: List[int] = []
    finished = threading.Event()

    def handler(job: Job) -> None:
        u = job.value[0]
        with lock:
            running[u] = running.get(u, 0) + 1
            peaks["user"] = max(peaks["user"], running[u])
            peaks["all"] = max(peaks["all"], sum(running.values()))
        time.sleep(0.005)  # the work, holding its slots
        with lock:
            running[u] -= 1
            done.append(job.value[1])
            if len(done) == 190:
                finished.set()

    with Worker(db, a, handler, concurrency=8, lease_seconds=30), \
            Worker(db, b, handler, concurrency=8, lease_seconds=30), \
            Worker(db, c, handler, concurrency=4, lease_seconds=30):
        assert finished.wait(120), f"only {len(done)} of 190 jobs ran"
    assert sorted(done) == list(range(190))
    assert peaks["all"] <= 5 and peaks["user"] <= 2, peaks
    assert a.size(db) == 0 and b.size(db) == 0 and c.groups(db) == []


def test_a_sharded_queue_parks_and_moves_back_in_its_shards(db: Any, fdb_subspace: Any,
                                                             limits: Limits) -> None:
    q: Queue[Any] = Queue(fdb_subspace["s"], shards=3,
                          limits=limits.use("per-user", key=user))
    limits.set(db, "per-user", concurrency(1))
    q.push_many(db, [("a", i) for i in range(6)])
    for _ in range(5):
        q.push(db, ("b", 0))  # each push to a shard drawn at random
    seen: List[Any] = []
    for _ in range(40):
        got = q.claim_many(db, 4, 30)
        assert len({lease.value[0] for lease in got}) == len(got)  # one per user at most
        for lease in got:
            seen.append(lease.value)
            q.ack(db, lease)
        if len(seen) == 11:
            break
    assert sorted(seen) == sorted([("a", i) for i in range(6)] + [("b", 0)] * 5)
    assert q.size(db) == 0


@pytest.mark.parametrize("limit", [concurrency(1), rate(1, 60)], ids=["concurrency", "rate"])
def test_two_claims_racing_for_the_last_slot_conflict(db: Any, fdb_subspace: Any,
                                                      limits: Limits, limit: Any) -> None:
    """Two claims in concurrent transactions, of two structures sharing a limit with
    room for one job: the second to commit conflicts (and, retried, finds none)."""
    a: Queue[Any] = Queue(fdb_subspace["ra"], limits=limits.use("one"))
    b: Queue[Any] = Queue(fdb_subspace["rb"], limits=limits.use("one"))
    limits.set(db, "one", limit)
    a.push(db, "a")
    b.push(db, "b")
    first, second = db.create_transaction(), db.create_transaction()
    assert a.claim(first, 30) is not None
    assert b.claim(second, 30) is not None  # neither sees the other yet
    second_conflicts(first, second)
    assert b.claim(db, 30) is None  # retried: the limit is full


def second_conflicts(first: Any, second: Any) -> None:
    """Commit transaction ``first``, then ``second``, which conflicts."""
    first.commit().wait()
    with pytest.raises(fdb.FDBError) as raised:
        second.commit().wait()
    assert raised.value.code == 1020  # not_committed: a conflict


def test_a_claim_of_a_run_of_slots_conflicts_with_one_taking_any_slot_of_it(
        db: Any, fdb_subspace: Any) -> None:
    """A claim taking a run of slots (one key, at its first slot) and a concurrent
    claim taking one slot, any of the run: the second to commit conflicts."""
    for round_ in range(4):  # the slot the second claim draws is random
        limits = Limits(fdb_subspace["l", round_])
        a: Queue[Any] = Queue(fdb_subspace["a", round_], limits=limits.use("three"))
        b: Queue[Any] = Queue(fdb_subspace["b", round_], limits=limits.use("three"))
        limits.set(db, "three", concurrency(3))
        a.push_many(db, [1, 2, 3])
        b.push(db, 4)
        first, second = db.create_transaction(), db.create_transaction()
        assert len(a.claim_many(first, 3, 30)) == 3
        assert b.claim(second, 30) is not None  # neither sees the other yet
        second_conflicts(first, second)
        assert b.claim(db, 30) is None  # retried: the limit is full


def test_extending_a_whole_claim_conflicts_with_a_claim_taking_its_slots_as_expired(
        db: Any, fdb_subspace: Any, clock: TestClock) -> None:
    """A claim's leases extended together (their run's key rewritten) while another
    claim, whose clock reads past their old deadline, takes one of their slots (any
    of the run, not only its first): the second to commit conflicts, so no slot is
    held twice."""
    for round_ in range(4):  # the slot the second claim draws is random
        limits = Limits(fdb_subspace["l", round_], clock=clock)
        a: Queue[Any] = Queue(fdb_subspace["a", round_], clock=clock,
                              limits=limits.use("three"))
        b: Queue[Any] = Queue(fdb_subspace["b", round_], clock=clock,
                              limits=limits.use("three"))
        limits.set(db, "three", concurrency(3))
        a.push_many(db, [1, 2, 3])
        b.push(db, 4)
        held = a.claim_many(db, 3, 10)
        assert len(held) == 3
        first, second = db.create_transaction(), db.create_transaction()
        assert all(a.extend_many(first, held, 30))  # alive by first's clock
        clock.advance(11)
        assert b.claim(second, 10) is not None  # expired by second's
        second_conflicts(first, second)
        assert b.claim(db, 10) is None  # retried: the three run still


def change_limit(tr: Any, limits: Limits, change: str) -> None:
    """Raise limit "one" to 2, or delete it, in ``tr``."""
    if change == "set":
        limits.set(tr, "one", concurrency(2))
    else:
        limits.delete(tr, "one")


def one_running_one_waiting(db: Any, fdb_subspace: Any, limits: Limits) -> Queue[Any]:
    """A queue under limit "one" (concurrency 1), "a" claimed, "b" pushed."""
    q: Queue[Any] = Queue(fdb_subspace["p"], limits=limits.use("one"))
    limits.set(db, "one", concurrency(1))
    q.push_many(db, ["a", "b"])
    lease = q.claim(db, 30)
    assert lease is not None and lease.value == "a"  # it holds the only slot
    return q


@pytest.mark.parametrize("change", ["set", "delete"])
def test_a_change_racing_a_claim_that_parks_conflicts(db: Any, fdb_subspace: Any,
                                                      limits: Limits, change: str) -> None:
    """A set (or delete) whose read version comes before a claim that parks a job
    under the limit, and which commits after it: it conflicts, and retried it finds
    the job and moves it back (not left parked until PARK_SECONDS)."""
    q = one_running_one_waiting(db, fdb_subspace, limits)
    changing = db.create_transaction()
    changing.get_read_version().wait()
    assert q.claim(db, 30) is None  # "b" parked: the only slot is taken
    assert limits.state(db, "one", None).parked == 1
    change_limit(changing, limits, change)  # read before the park: sees none parked
    with pytest.raises(fdb.FDBError) as raised:
        changing.commit().wait()
    assert raised.value.code == 1020  # not_committed: a conflict
    changing.on_error(raised.value).wait()
    change_limit(changing, limits, change)  # retried: moves "b" back
    changing.commit().wait()
    lease = q.claim(db, 30)
    assert lease is not None and lease.value == "b"


@pytest.mark.parametrize("change", ["set", "delete"])
def test_a_claim_parking_under_a_limit_changed_meanwhile_conflicts(
        db: Any, fdb_subspace: Any, limits: Limits, change: str) -> None:
    """A claim whose read version comes before a set (or delete) committed, and which
    parks a job under the old definition: it conflicts, and retried it reads the new
    one (the job runs instead of waiting until PARK_SECONDS)."""
    q = one_running_one_waiting(db, fdb_subspace, limits)
    claiming = db.create_transaction()
    claiming.get_read_version().wait()
    change_limit(db, limits, change)  # room for "b" now
    assert q.claim(claiming, 30) is None  # read the old definition: "b" parked
    with pytest.raises(fdb.FDBError) as raised:
        claiming.commit().wait()
    assert raised.value.code == 1020
    lease = q.claim(db, 30)  # retried
    assert lease is not None and lease.value == "b"


def test_claims_under_a_roomy_limit_do_not_conflict(db: Any, fdb_subspace: Any,
                                                    limits: Limits) -> None:
    """Two concurrent claims of two structures under a global concurrency limit with
    room to spare both commit: each takes a slot of its own, drawn at random among
    100,000 (a conflict only if both drew the same one)."""
    a: Queue[Any] = Queue(fdb_subspace["na"], limits=limits.use("roomy"))
    b: Queue[Any] = Queue(fdb_subspace["nb"], limits=limits.use("roomy"))
    limits.set(db, "roomy", concurrency(100_000))
    a.push(db, "a")
    b.push(db, "b")
    first, second = db.create_transaction(), db.create_transaction()
    assert a.claim(first, 30) is not None and b.claim(second, 30) is not None
    first.commit().wait()
    second.commit().wait()
    state = limits.state(db, "roomy")
    assert state is not None and state.running == 2


def test_a_roomy_limit_read_by_blocks_stays_exact(db: Any, fdb_subspace: Any,
                                                 limits: Limits) -> None:
    """Claims of 10 under concurrency(100) read blocks of 16 slots drawn at random,
    not all 100: they still start exactly 100 jobs (a block short of free slots makes
    the claim read the key whole, the only read that can tell it is full), and after
    ``n`` is lowered below what runs, the jobs running above it are all counted."""
    q: Queue[Any] = Queue(fdb_subspace["blocks"], limits=limits.use("roomy"))
    limits.set(db, "roomy", concurrency(100))
    q.push_many(db, list(range(150)))
    running: List[Any] = []
    for _ in range(20):
        running += q.claim_many(db, 10, 30)
    assert len(running) == 100
    state = limits.state(db, "roomy")
    assert state is not None and state.running == 100 and state.parked == 50
    limits.set(db, "roomy", concurrency(64))
    q.ack_many(db, running[:30])
    assert q.claim_many(db, 10, 30) == []  # 70 run, above the new 64
    q.ack_many(db, running[30:40])
    assert len(q.claim_many(db, 10, 30)) == 4  # 60 run: room for 4
    state = limits.state(db, "roomy")
    assert state is not None and state.running == 64


def test_metrics_count_running_and_parked_jobs(db: Any, q: Queue, limits: Limits) -> None:
    limits.set(db, "all", concurrency(2))
    q.push_many(db, [("a", i) for i in range(5)])
    assert len(q.claim_many(db, 5, 30)) == 2
    samples = {(s.name, s.label_dict["limit"]): s for s in collect(db, {"lim": limits,
                                                                          "q": q})
               if "limit" in s.label_dict}
    assert samples[(LIMIT_N, "all")].value == 2
    assert samples[(LIMIT_N, "all")].label_dict == {"kind": "concurrency", "limit": "all",
                                                   "store": "lim"}
    assert samples[(LIMIT_RUNNING, "all")].value == 2
    assert samples[(LIMIT_PARKED, "all")].value == 3


def test_metrics_read_a_limits_counts_from_a_bounded_number_of_keys(
        db: Any, q: Queue, limits: Limits, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each count of a limit reads at most ``LIMIT_KEYS_READ`` keys (a documented
    bound, lowered here so that a few leases pass it): a count that stops there is a
    floor."""
    limits.set(db, "all", concurrency(6))
    q.push_many(db, [("a", i) for i in range(10)])
    for _ in range(6):  # six claims, six keys of slots
        assert q.claim(db, 30) is not None
    assert q.claim(db, 30) is None  # the other four parked
    monkeypatch.setattr(metrics, "LIMIT_KEYS_READ", 3)
    samples = {s.name: s.value for s in collect(db, {"lim": limits})
               if s.label_dict.get("limit") == "all"}
    assert (samples[LIMIT_RUNNING], samples[LIMIT_PARKED]) == (3, 3)
    monkeypatch.setattr(metrics, "LIMIT_KEYS_READ", 10)  # past them all: exact
    samples = {s.name: s.value for s in collect(db, {"lim": limits})
               if s.label_dict.get("limit") == "all"}
    assert (samples[LIMIT_RUNNING], samples[LIMIT_PARKED]) == (6, 4)


def strict_user(value: Any) -> Any:
    """A key function that refuses values it does not know."""
    if not isinstance(value, tuple):
        raise ValueError(f"no user in {value!r}")
    return value[0]


def test_a_key_function_that_raises_makes_the_claim_raise(db: Any, fdb_subspace: Any,
                                                          limits: Limits) -> None:
    q: Queue[Any] = Queue(fdb_subspace["k"], limits=limits.use("per-user", key=strict_user))
    limits.set(db, "per-user", concurrency(1))
    q.push(db, "no user")
    before = dump(db, fdb_subspace)
    with pytest.raises(ValueError, match="no user in 'no user'"):
        q.claim(db, 30)
    assert dump(db, fdb_subspace) == before
    limits.delete(db, "per-user")  # not limited any more: the key is not asked for
    lease = q.claim(db, 30)
    assert lease is not None and lease.value == "no user"


def test_the_leases_of_one_claim_end_one_by_one(db: Any, fdb_subspace: Any, clock: TestClock,
                                               limits: Limits) -> None:
    """The leases of one claim share one record of what they hold: ended one at a time,
    in separate transactions (an ack, expiries a claim meets, an extend between, a dead
    letter), each gives back its own slot, never another's; once all ended the store
    holds what it held before the claims."""
    q: Queue[Any] = Queue(fdb_subspace["q"], clock=clock, limits=limits.use("all"))
    limits.set(db, "all", concurrency(5))
    before = dump(db, fdb_subspace["limits"])
    q.push_many(db, list(range(10)))
    leases = q.claim_many(db, 5, 30)
    assert len(leases) == 5 and q.claim(db, 30) is None
    q.ack(db, leases[0])
    assert q.claim(db, 30) is not None and q.claim(db, 30) is None
    q.extend(db, leases[1], 60)
    clock.advance(31)  # leases 2 to 4 and the last claim's expired; lease 1 runs
    again = q.claim_many(db, 5, 30)
    assert len(again) == 4 and q.claim(db, 30) is None
    assert q.bury(db, leases[1], "broken")
    last = q.claim(db, 30)
    assert last is not None and q.claim(db, 30) is None
    assert q.ack_many(db, again[:2]) == [True, True]
    done = 3  # lease 0, and two of again
    for lease in [*again[2:], last]:
        q.ack(db, lease)
        done += 1
    while True:
        rest = q.claim_many(db, 5, 30)
        if not rest:
            break
        q.ack_many(db, rest)
        done += len(rest)
    assert done == 9 and q.size(db) == 0 and len(q.dead(db)) == 1
    assert dump(db, fdb_subspace["limits"]) == before
