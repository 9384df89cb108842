"""The throughput history the workers write (``throughput``): jobs done and failed per
minute, the backlog, one key per worker and minute; on a real server."""

from __future__ import annotations

import threading
import time
from typing import Any, List

import pytest

from fdbrecipes import FairQueue, Minute, Queue, Worker
from tests.helpers import eventually

pytestmark = pytest.mark.integration


def totals(minutes: List[Minute]) -> List[int]:
    return [sum(m.done for m in minutes), sum(m.failed for m in minutes)]


def run_worker(db: Any, structure: Any, handler: Any) -> Any:
    worker = Worker(db, structure, handler, concurrency=2, lease_seconds=1.5)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    return worker, thread


def fail_on_bad(job: Any) -> None:
    if job.value == "bad":
        raise ValueError("bad job")


@pytest.mark.parametrize("kind", [Queue, FairQueue])
def test_workers_write_what_they_did(db: Any, fdb_subspace: Any, kind: Any) -> None:
    q = kind(fdb_subspace, max_deliveries=1)
    assert [m.done for m in q.throughput(db, 5)] == [0] * 5
    where = {"group": "acme"} if kind is FairQueue else {}
    for value in ["a", "b", "c", "bad"]:
        q.push(db, value, **where)
    worker, thread = run_worker(db, q, fail_on_bad)
    try:
        # each heartbeat (every half second here) writes the worker's minute
        eventually(lambda: totals(q.throughput(db, 2)) == [4, 1], 20, "4 done, 1 failed")
        minutes = q.throughput(db, 3)
        assert len(minutes) == 3 and minutes[-1].start <= time.time()
        assert minutes[-1].start - minutes[0].start == 120
        assert max(m.workers for m in minutes) == 1
        if kind is Queue:
            assert any(m.backlog is not None for m in minutes)
        else:
            assert all(m.backlog is None for m in minutes)
        # later heartbeats rewrite the same counts: nothing counted twice
        beats = q.workers(db)[0].beat_at
        eventually(lambda: q.workers(db)[0].beat_at > beats + 1, 20, "two more beats")
        assert totals(q.throughput(db, 3)) == [4, 1]
    finally:
        worker.stop()
        thread.join(30)


def test_two_workers_are_summed(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, [str(i) for i in range(20)])
    started = [run_worker(db, q, fail_on_bad) for _ in range(2)]
    try:
        eventually(lambda: totals(q.throughput(db, 2))[0] == 20, 20, "20 done")
        eventually(lambda: max(m.workers for m in q.throughput(db, 2)) >= 1, 20, "workers")
    finally:
        for worker, thread in started:
            worker.stop()
            thread.join(30)


def test_bad_minutes(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    for bad in (0, 1441, "5", 2.0):
        with pytest.raises((TypeError, ValueError), match="minutes"):
            q.throughput(db, bad)


@pytest.mark.parametrize("kind", [Queue, FairQueue])
def test_a_burst_run_records_what_it_did_before_it_returns(db: Any, fdb_subspace: Any,
                                                           kind: Any) -> None:
    """A cron-style drain shorter than a heartbeat is counted too: a last beat goes
    with the worker's goodbye."""
    q = kind(fdb_subspace, max_deliveries=1)
    where = {"group": "acme"} if kind is FairQueue else {}
    for value in ["a", "b", "c", "d", "bad"]:
        q.push(db, value, **where)
    began = time.monotonic()
    Worker(db, q, fail_on_bad, concurrency=2, lease_seconds=60).run(burst=True)
    assert time.monotonic() - began < 20, "the drain took a heartbeat or more"
    assert totals(q.throughput(db, 2)) == [5, 1]
    assert q.workers(db) == []
    nothing = kind(fdb_subspace["empty"], max_deliveries=1)
    Worker(db, nothing, fail_on_bad, lease_seconds=60).run(burst=True)
    assert totals(nothing.throughput(db, 2)) == [0, 0]
