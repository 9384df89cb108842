"""Pausing a structure (``pause``, ``resume``, ``paused``): nothing is taken while it
is paused, by any way of taking, waiters sleep and wake on resume, a take racing the
pause conflicts, and a worker stops taking; on a real server."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, List

import pytest

from fdbrecipes import FairQueue, PriorityQueue, Queue, Worker
from fdbrecipes.aio import AsyncQueue
from tests.helpers import eventually

pytestmark = pytest.mark.integration


def test_nothing_is_taken_while_paused(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"])
    hc = Queue(fdb_subspace["q"], high_contention=True)
    pq = PriorityQueue(fdb_subspace["p"])
    fair = FairQueue(fdb_subspace["f"])
    q.push_many(db, ["a", "b", "c"])
    pq.push(db, "p", priority=1)
    fair.push(db, "f", group="acme")
    before = time.time()
    assert q.paused(db) is None
    assert q.pause(db) and pq.pause(db) and fair.pause(db)
    assert not q.pause(db)  # already paused: nothing written
    paused_at = q.paused(db)
    assert paused_at is not None and before - 1 < paused_at <= time.time() + 1
    assert q.pop(db) is None and q.claim(db, 30) is None and q.claim_many(db, 5, 30) == []
    assert q.pop(db, spread=4) is None and q.pop_many(db, 3) == []
    assert hc.pop(db) is None
    assert pq.pop_min(db) is None and pq.claim_max(db, 30) is None
    assert fair.claim(db, 30) is None and fair.claim_many(db, 3, 30) == []
    assert not q.wait(db, timeout=0.2) and not fair.wait(db, timeout=0.2)
    # pushes and looks go on
    q.push(db, "d")
    assert q.stats(db).visible == 4 and q.items(db) == ["a", "b", "c", "d"]
    assert q.peek(db) == "a"
    assert q.resume(db) and not q.resume(db) and q.paused(db) is None
    assert q.pop(db) == "a" and hc.pop(db) == "b"
    assert pq.resume(db) and pq.pop_min(db) == "p"
    assert fair.resume(db) and fair.claim(db, 30) is not None


def test_a_take_racing_the_pause_conflicts(db: Any, fdb_subspace: Any) -> None:
    import fdb

    q = Queue(fdb_subspace)
    q.push(db, "x")
    tr = db.create_transaction()
    assert q.claim(tr, 30) is not None  # read the flag: not paused yet
    assert q.pause(db)
    with pytest.raises(fdb.FDBError) as raised:
        tr.commit().wait()
    assert raised.value.code == 1020  # not_committed: the take retries and finds the pause
    assert q.stats(db).visible == 1


@pytest.mark.parametrize("take", ["spread pop", "pop_many", "claim_many", "pop_max"])
def test_every_take_racing_the_pause_conflicts(db: Any, fdb_subspace: Any, take: str) -> None:
    import fdb

    pq = PriorityQueue(fdb_subspace)
    pq.push_many(db, [("a", 1), ("b", 2)])
    tr = db.create_transaction()
    takes = {"spread pop": lambda: pq.pop_min(tr, spread=4),
             "pop_many": lambda: pq.pop_min_many(tr, 2),
             "claim_many": lambda: pq.claim_min_many(tr, 2, 30, spread=2),
             "pop_max": lambda: pq.pop_max(tr)}
    assert takes[take]()  # read the flag (with the deadlines): not paused yet
    assert pq.pause(db)
    with pytest.raises(fdb.FDBError) as raised:
        tr.commit().wait()
    assert raised.value.code == 1020  # not_committed: the take retries and finds the pause
    assert pq.stats(db).visible == 2 and pq.pop_min(db) is None


def test_a_pause_holds_expired_holds_back_too(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push(db, "late", delay=0.05)
    q.push(db, "now")
    lease = q.claim(db, 0.05)
    assert lease is not None and lease.value == "now"
    assert q.pause(db)
    # the delay and the lease end: two holds in the deadline index, after the flag
    eventually(lambda: q.stats(db).visible == 2, 20, "the holds to expire")
    assert q.pop(db) is None and q.pop(db, spread=3) is None and q.claim_many(db, 5, 30) == []
    assert not q.wait(db, timeout=0.2)
    assert q.resume(db)
    assert sorted([q.pop(db), q.pop(db, spread=3)]) == ["late", "now"] and q.pop(db) is None


def test_a_paused_empty_queue_is_still_a_queue(db: Any, fdb_subspace: Any) -> None:
    from fdbrecipes.admin.places import ANY_QUEUE, stored

    q = Queue(fdb_subspace)
    tr = db.create_transaction()  # no receipt: the flag is the place's only key
    assert q.pause(tr)
    tr.commit().wait()
    assert [kv.key for kv in db.get_range_startswith(fdb_subspace.key())] == [
        q.ops.pause_key]
    assert stored(db.create_transaction(), fdb_subspace) == (ANY_QUEUE, None)
    assert q.paused(db) is not None and q.clear(db) is None and q.paused(db) is None


def test_a_waiter_wakes_on_resume(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.pause(db)
    q.push(db, "x")
    got: List[Any] = []
    waiter = threading.Thread(target=lambda: got.append(q.pop_wait(db, timeout=20)))
    waiter.start()
    assert not q.wait(db, timeout=0.3) and waiter.is_alive()
    q.resume(db)
    waiter.join(20)
    assert got == ["x"]


def test_the_async_twin(db: Any, fdb_subspace: Any) -> None:
    async def main() -> None:
        q = AsyncQueue(fdb_subspace)
        await q.push(db, "x")
        assert await q.pause(db) and await q.paused(db) is not None
        assert await q.pop(db) is None
        assert await q.resume(db) and await q.pop(db) == "x"
    asyncio.run(main())


def test_a_worker_stops_taking(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    done: List[Any] = []
    handled = threading.Event()

    def handle(job: Any) -> None:
        done.append(job.value)
        handled.set()

    worker = Worker(db, q, handle, concurrency=2, lease_seconds=5)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        q.push(db, "before")
        assert handled.wait(20)
        handled.clear()
        q.pause(db)
        q.push_many(db, ["during 1", "during 2"])
        assert not handled.wait(1.0)  # nothing taken in a second while paused
        assert q.stats(db).visible == 2 and done == ["before"]
        q.resume(db)
        deadline = time.monotonic() + 20
        while len(done) < 3:
            assert time.monotonic() < deadline, "the worker did not resume"
            handled.wait(1)
            handled.clear()
        assert sorted(done) == ["before", "during 1", "during 2"]
    finally:
        worker.stop()
        thread.join(30)


def test_the_commands(db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    from tests.integration.test_operator_cli import answer, fdbrecipes, ok, place

    q = Queue(fdb_subspace)
    q.push(db, "x")
    assert "paused" in ok(fdbrecipes(fdb_cluster_file, "pause", *place(fdb_subspace)))
    assert q.paused(db) is not None and q.pop(db) is None
    stats = answer(fdbrecipes(fdb_cluster_file, "stats", *place(fdb_subspace), "--json"))
    assert stats["paused"] is not None and stats["visible"] == 1
    assert "already paused" in ok(fdbrecipes(fdb_cluster_file, "pause", *place(fdb_subspace)))
    assert "resumed" in ok(fdbrecipes(fdb_cluster_file, "resume", *place(fdb_subspace)))
    stats = answer(fdbrecipes(fdb_cluster_file, "stats", *place(fdb_subspace), "--json"))
    assert stats["paused"] is None and q.pop(db) == "x"
