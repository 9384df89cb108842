"""Dramatiq on FdbBroker, with real ``dramatiq`` worker processes on a real server:
messages, delays, retries ending in dead letters with their reason, ``join``; a worker
SIGKILLed in the middle of a message (it runs once more, after the lease); a delay far
past the lease (runs once); messages that are not Dramatiq messages, claimed with good
ones (dead at once, the good ones run).  Every wait has a deadline; workers are killed
at the end."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from .frameworks import Setup, crash_run, run_example, settled, wait_until

dramatiq = pytest.importorskip("dramatiq", reason="the dramatiq extra needs Python >= 3.10")

pytestmark = pytest.mark.integration

APP = '''
import os, time
import fdb
fdb.api_version(730)
import dramatiq
from fdbrecipes.contrib.dramatiq import FdbBroker

broker = FdbBroker(cluster_file=os.environ["FDB_CLUSTER_FILE"],
                   directory=os.environ["FDBRECIPES_TEST_DIRECTORY"] + "/broker",
                   lease_seconds=float(os.environ.get("FDBRECIPES_TEST_LEASE", "30")))
dramatiq.set_broker(broker)
WORKER = os.environ.get("FDBRECIPES_TEST_WORKER", "sender")


def _record(*args, **kwargs):
    from effects import record
    return record(*args, **kwargs)


@dramatiq.actor(max_retries=0, time_limit=600_000)
def work(key, seconds=0.0, first_only=False):
    from effects import seen
    slow = seconds and not (first_only and seen(key))
    run = _record(key, "start", WORKER)
    if slow:
        time.sleep(seconds)   # the work itself
    _record(key, "end", WORKER, run)


@dramatiq.actor(max_retries=1, min_backoff=100, max_backoff=200)
def fail(key):
    _record(key, "start", WORKER)
    raise ValueError("boom " + key)
'''


class Dramatiq(Setup):
    """One test's Dramatiq (see :class:`Setup`): the actors, the broker, the workers."""

    def __init__(self, db: Any, cluster_file: str, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch, lease: float) -> None:
        super().__init__(db, cluster_file, tmp_path, monkeypatch, "dramaapp", APP,
                         {"FDBRECIPES_TEST_LEASE": str(lease)})
        self.lease = lease
        self.broker = self.module.broker

    def worker(self, name: str, processes: int = 1, threads: int = 4) -> Any:
        """Start ``dramatiq`` (``processes`` x ``threads``), wait until it is ready."""
        w = self.workers.start([sys.executable, "-m", "dramatiq", self.name, "-p",
                                str(processes), "-t", str(threads)], name,
                               FDBRECIPES_TEST_WORKER=name)
        w.wait_for("is ready for action", 120)
        return w

    def settled(self) -> bool:
        return settled(self.db, self.broker.store.structure("default"))

    def close(self) -> None:
        self.broker.close()
        super().close()


@pytest.fixture
def make_dramatiq(db: Any, fdb_cluster_file: str, tmp_path: Path,
                  monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    made: List[Dramatiq] = []

    def make(lease: float = 30.0) -> Dramatiq:
        made.append(Dramatiq(db, fdb_cluster_file, tmp_path, monkeypatch, lease))
        return made[-1]

    yield make
    for d in made:
        d.close()


def test_dramatiq_workers_run_messages_delays_and_dead_letters(make_dramatiq: Any) -> None:
    d = make_dramatiq()
    m = d.module
    d.worker("w1", processes=2, threads=4)
    for i in range(50):
        m.work.send(f"m{i}")
    sent = time.time()
    m.work.send_with_options(args=("later",), delay=3000)
    m.fail.send("bad")
    d.broker.join("default", timeout=60_000)
    done = d.runs()
    assert all(len(done[f"m{i}"]) == 1 and done[f"m{i}"][0].ended for i in range(50))
    assert done["later"][0].started >= sent + 3 - 2.0  # the cluster's clock (see docs)
    assert len(done["bad"]) == 2                       # one retry, then dead
    (letter,) = d.broker.dead_letters("default")
    assert dramatiq.Message.decode(letter.value).args == ("bad",)
    assert letter.reason == "ValueError: boom bad"


def test_undecodable_messages_die_at_once_and_the_rest_of_their_claim_runs(
        make_dramatiq: Any) -> None:
    """Bytes that are not JSON, JSON that is not a message, and a message for an actor
    nobody defined, claimed in one claim with good messages by a real worker: no
    consumer crashes or restarts, every good message runs once, and the bad ones are
    dead letters after one delivery, their reasons naming the problem."""
    d = make_dramatiq(lease=4.0)
    structure = d.broker.store.structure("default")
    d.module.work.send("m0")
    structure.push(d.db, b"\x80 not json")
    structure.push(d.db, b"[1,2,3]")
    d.broker.enqueue(dramatiq.Message(queue_name="default", actor_name="nobody", args=(),
                                      kwargs={}, options={}))
    for i in range(1, 5):
        d.module.work.send(f"m{i}")
    w = d.worker("w1", processes=1, threads=4)          # a prefetch of 8: one claim
    d.broker.join("default", timeout=30_000)            # before the fix: never
    done = d.runs()
    assert sorted(done) == [f"m{i}" for i in range(5)]
    assert all(len(rs) == 1 and rs[0].ended for rs in done.values()), done
    letters = {letter.value: letter for letter in d.broker.dead_letters("default")}
    assert len(letters) == 3 and {x.deliveries for x in letters.values()} == {1}
    assert letters[b"\x80 not json"].reason.startswith(
        "DecodeError: UnicodeDecodeError: 'utf-8' codec can't decode byte 0x80")
    assert letters[b"[1,2,3]"].reason.startswith(
        "DecodeError: TypeError: list indices must be integers")
    (unknown,) = (x for v, x in letters.items() if v not in (b"\x80 not json", b"[1,2,3]"))
    assert dramatiq.Message.decode(unknown.value).actor_name == "nobody"
    assert unknown.reason.startswith("ActorNotFound: "), unknown.reason
    out = w.output()
    assert "Consumer encountered" not in out and "Restarting consumer" not in out, out


def test_flush_drops_waiting_delayed_and_dead_messages(make_dramatiq: Any) -> None:
    d = make_dramatiq()
    for i in range(5):
        d.module.work.send(f"m{i}")
    d.module.work.send_with_options(args=("later",), delay=60_000)
    stats = d.broker.store.structure("default").stats(d.db)
    assert (stats.visible, stats.delayed) == (5, 1)
    with pytest.raises(dramatiq.errors.QueueJoinTimeout):
        d.broker.join("default", timeout=200)
    d.broker.flush_all()
    d.broker.join("default", timeout=10_000)          # nothing left to wait for
    d.module.work.send("after")                       # the queue works on
    assert d.broker.store.structure("default").stats(d.db).visible == 1
    d.broker.flush("default")
    assert d.settled()


def test_a_message_killed_mid_run_runs_again_after_its_lease_and_only_once(
        make_dramatiq: Any) -> None:
    lease = 6.0
    d = make_dramatiq(lease=lease)
    workers = {"w1": d.worker("w1"), "w2": d.worker("w2")}
    d.module.work.send("long", 4 * lease, True)
    first = wait_until(lambda: d.runs().get("long"), 60, "the message to start")[0]
    wait_until(lambda: time.time() > first.started + 2 * lease, 3 * lease,
               "two lease lengths of work")
    assert len(d.runs()["long"]) == 1 and first.ended is None   # the heartbeat held it
    killed_at = time.time()
    workers[first.worker].kill()
    wait_until(lambda: any(r.ended for r in d.runs()["long"]), 60, "the second run")
    d.broker.join("default", timeout=30_000)
    first, second = d.runs()["long"]
    assert second.worker != first.worker
    assert second.started >= killed_at + lease - lease / 3 - 1.0, second.started - killed_at


def dramatiq_crash_run(d: Dramatiq, n: int, workers: int, kills: int) -> None:
    def start(name: str) -> Any:
        return d.worker(name, 1, 4)

    def send(key: str) -> None:
        d.module.work.send(key, 0.2)

    crash_run(d, start, send, n, workers, kills, d.settled)


def test_workers_killed_at_random_lose_nothing(make_dramatiq: Any) -> None:
    dramatiq_crash_run(make_dramatiq(lease=3.0), 200, 3, 3)


@pytest.mark.soak
@pytest.mark.slow
def test_1000_messages_with_workers_killed_at_random(make_dramatiq: Any) -> None:
    dramatiq_crash_run(make_dramatiq(lease=3.0), 1_000, 4, 8)


def test_a_delay_far_past_the_lease_runs_exactly_once(make_dramatiq: Any) -> None:
    lease = 2.0
    d = make_dramatiq(lease=lease)
    d.worker("w1")
    d.worker("w2")
    delays = {f"late{i}": (3 + i / 2) * lease for i in range(5)}
    sent = time.time()
    for key, seconds in delays.items():
        d.module.work.send_with_options(args=(key,), delay=int(seconds * 1000))
    stats = d.broker.store.structure("default").stats(d.db)
    assert (stats.delayed, stats.in_flight, stats.visible) == (5, 0, 0)
    wait_until(lambda: len(d.runs()) == 5 and all(r.ended for rs in d.runs().values()
                                                  for r in rs), 60, "every delayed message")
    d.broker.join("default", timeout=30_000)
    for key, rs in d.runs().items():
        assert len(rs) == 1, (key, rs)
        assert rs[0].started >= sent + delays[key] - 2.0


def test_the_documented_actors_run(db: Any, fdb_cluster_file: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/examples/dramatiq_app.py, as docs/celery-dramatiq.md shows it."""
    def use(app: Any, worker: Any) -> None:
        app.add.send(2, 3)
        app.remind.send("ada")
        app.broker.join("default", timeout=60_000)
        wait_until(lambda: "reminding ada" in worker.output() and "5" in worker.output(), 30,
                   "the actors' lines")

    run_example(db, fdb_cluster_file, monkeypatch, "dramatiq_app",
                ["dramatiq", "dramatiq_app", "-p", "1", "-t", "2"], "is ready for action", use)


def test_a_consumer_claims_ahead_within_dramatiqs_prefetch_and_gives_back_on_close(
        fdb_cluster_file: str, fdb_subspace: Any) -> None:
    """Through Dramatiq's consumer API: at most ``prefetch`` messages are delivered
    unsettled; once messages proved short, a claim takes ``claim_ahead`` more, held
    under leases; closing gives them back at once, no delivery counted."""
    from fdbrecipes.contrib.dramatiq import FdbBroker

    broker = FdbBroker(cluster_file=fdb_cluster_file,
                       directory=("fdbrecipes-tests", fdb_subspace.key().hex()),
                       claim_ahead=10)
    try:
        broker.declare_queue("q")
        for i in range(30):
            broker.enqueue(dramatiq.Message(queue_name="q", actor_name="a", args=(i,),
                                            kwargs={}, options={}))
        structure = broker.store.structure("q")
        consumer = broker.consume("q", prefetch=2, timeout=100)
        first = next(consumer)
        assert first is not None
        consumer.ack(first)                    # a short message: claims go ahead now
        second, third = next(consumer), next(consumer)
        assert second is not None and third is not None
        assert next(consumer) is None          # two unsettled: the prefetch is full
        stats = structure.stats(broker.store.db)
        assert (stats.visible, stats.in_flight) == (30 - 1 - 12, 12)  # 2 delivered, 10 ahead
        consumer.requeue([second, third])      # what a stopping Dramatiq worker does
        consumer.close()
        stats = structure.stats(broker.store.db)
        assert (stats.visible, stats.in_flight) == (29, 0)
        back = structure.claim_many(broker.store.db, 30, 30)
        assert len(back) == 29 and {lease.deliveries for lease in back} == {1}
    finally:
        broker.close()
