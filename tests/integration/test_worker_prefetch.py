"""A worker claiming ahead of its free slots (``prefetch``), on a real server: the jobs
it holds ahead keep their leases while they wait, run once each, and go back at once,
with no delivery counted, when it stops; with long jobs or a time limit it holds
nothing ahead."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, List

import pytest

from fdbrecipes import FairQueue, Job, JobFinished, JobStarted, Queue, Worker, drive
from fdbrecipes.protocol import Finished
from tests.helpers import eventually

pytestmark = pytest.mark.integration


class Gate:
    """A handler recording the values it runs; the value ``"block"`` waits until the
    test opens the gate (30 s at most)."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.blocking = threading.Event()
        self.events: List[Any] = []
        self.lock = threading.Lock()

    def __call__(self, job: Job) -> None:
        if job.value == "block":
            self.blocking.set()
            assert self.opened.wait(30), "the test never opened the gate"

    def on_event(self, event: Any) -> None:
        with self.lock:
            self.events.append(event)

    def of(self, kind: type) -> List[Any]:
        with self.lock:
            return [e for e in self.events if isinstance(e, kind)]


def queue_with_a_block(db: Any, subspace: Any) -> Queue:
    """40 quick jobs (the worker learns its jobs are short), one that blocks, 6 after."""
    q = Queue(subspace)
    q.push_many(db, [f"quick-{i}" for i in range(40)] + ["block"]
                + [f"after-{i}" for i in range(6)])
    return q


def test_jobs_claimed_ahead_keep_their_leases_and_run_once(db: Any, fdb_subspace: Any) -> None:
    """One slot, prefetch 4, two-second leases: while the blocking job runs 6 s the
    worker holds 4 jobs ahead (no more), whose leases the heartbeat extends; then
    every job runs once, at its first delivery.  (Leases of 2 s, not 1: the heartbeat
    extends them every third of that, and a loaded machine can stall a process for
    more than the 0.67 s a one-second lease would leave.)"""
    q = queue_with_a_block(db, fdb_subspace)
    gate = Gate()
    worker = Worker(db, q, gate, concurrency=1, prefetch=4, lease_seconds=2,
                    on_event=gate.on_event)
    with worker:
        assert gate.blocking.wait(60)
        eventually(lambda: q.stats(db).in_flight == 5, 30, "4 jobs claimed ahead")
        time.sleep(6)  # three leases long: the waiting jobs' leases must be extended
        assert q.stats(db).in_flight == 5  # none taken back, none more claimed
        gate.opened.set()
        eventually(lambda: len(gate.of(JobFinished)) == 47, 60, "every job finished")
    finished = gate.of(JobFinished)
    assert Counter(e.outcome for e in finished) == {"ok": 47}
    assert Counter(e.job.value for e in gate.of(JobStarted)) == Counter(
        [f"quick-{i}" for i in range(40)] + ["block"] + [f"after-{i}" for i in range(6)])
    assert {e.job.deliveries for e in finished} == {1}
    assert q.stats(db) == (0, 0, 0, 0, None)


def test_a_stopping_worker_gives_back_what_it_claimed_ahead(db: Any, fdb_subspace: Any) -> None:
    """Stopped while it holds 4 jobs ahead and one runs past the shutdown wait: all 5
    are visible again at once, with no delivery counted, and none of the 4 started."""
    q = queue_with_a_block(db, fdb_subspace)
    gate = Gate()
    worker = Worker(db, q, gate, concurrency=1, prefetch=4, lease_seconds=60,
                    shutdown_timeout=0.2, on_event=gate.on_event)
    try:
        with worker:
            assert gate.blocking.wait(60)
            eventually(lambda: q.stats(db).in_flight == 5, 30, "4 jobs claimed ahead")
    finally:
        gate.opened.set()
    stats = q.stats(db)
    assert (stats.visible, stats.in_flight) == (7, 0)
    assert not [e for e in gate.of(JobStarted) if e.job.value.startswith("after")]
    back = q.claim_many(db, 10, 30)
    assert sorted(lease.value for lease in back) == sorted(
        ["block"] + [f"after-{i}" for i in range(6)])
    assert {lease.deliveries for lease in back} == {1}


@pytest.mark.parametrize("case", ["long jobs", "a time limit"])
def test_nothing_is_claimed_ahead_of_long_jobs_or_with_a_time_limit(
        db: Any, fdb_subspace: Any, case: str) -> None:
    """Jobs of 0.3 s on 2 slots (each would wait longer than the 0.1 s a job claimed
    ahead may), or quick jobs under a time limit: the worker never holds more jobs
    than it runs."""
    q = Queue(fdb_subspace)
    q.push_many(db, list(range(8 if case == "long jobs" else 40)))
    held: List[int] = []

    def handler(job: Job) -> None:
        held.append(q.stats(db).in_flight)
        if case == "long jobs":
            time.sleep(0.3)  # the work itself

    worker = Worker(db, q, handler, concurrency=2, prefetch=8,
                    time_limit=60 if case == "a time limit" else None)
    thread = threading.Thread(target=worker.run, kwargs={"burst": True}, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the worker did not finish"
    assert len(held) == (8 if case == "long jobs" else 40) and max(held) <= 2


def test_prefetch_is_checked(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    with pytest.raises(ValueError, match="prefetch"):
        Worker(db, q, print, prefetch=-1)
    with pytest.raises(TypeError, match="prefetch"):
        Worker(db, q, print, prefetch=2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["queue", "fair-queue"])
def test_acks_ride_on_a_claim_in_one_transaction(db: Any, fdb_subspace: Any, kind: str) -> None:
    """``finish_and_claim`` (what a worker's claims carry its acks with): the acks and
    the claim commit together, or not at all; a job acked twice is acked once."""
    if kind == "queue":
        q: Any = Queue(fdb_subspace)
        q.push_many(db, list(range(6)))
        push = {}
    else:
        q = FairQueue(fdb_subspace)
        for i in range(6):
            q.push(db, i, group="acme")
        push = {"group": "acme"}
    first = q.claim_many(db, 2, 30)
    assert len(first) == 2
    tr = db.create_transaction()
    claimed = drive(q.ops.finish_and_claim(tr, [Finished(lease) for lease in first], 3, 30))
    assert claimed.acked == [True, True] and len(claimed.leases) == 3
    assert drive(q.ops.stats(db)).in_flight == 2  # nothing committed yet
    tr.commit().wait()
    stats = drive(q.ops.stats(db))
    assert (stats.visible, stats.in_flight) == (1, 3)
    again = drive(q.ops.finish_and_claim(db, [Finished(first[0])] + [
        Finished(lease) for lease in claimed.leases], 10, 30))
    assert again.acked == [False, True, True, True] and len(again.leases) == 1
    assert not drive(q.ops.finish_and_claim(db, [], 0, 30)).leases
    q.push(db, 9, **push)
    assert len(drive(q.ops.finish_and_claim(db, [], 5, 30)).leases) == 1
