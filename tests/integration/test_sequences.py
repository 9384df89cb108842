"""Sequences (issue 40) on a real server: the jobs of a sequence key run one at a time
in push order, also when each fails once first; a dead job blocks its sequence until
the operator unblocks it (or requeues it)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List

import pytest

from fdbrecipes import PriorityQueue, Queue
from fdbrecipes.aio import AsyncQueue
from tests.helpers import run_threads

pytestmark = pytest.mark.integration


def test_one_at_a_time_in_push_order(db: Any, fdb_subspace: Any) -> None:
    q: Queue[Any] = Queue(fdb_subspace, history=3600)
    ids = [q.push(db, ("a", n), sequence="a") for n in range(3)]
    q.push(db, ("free", 0))
    assert all(i is not None and i.startswith(b"seq:") for i in ids)
    state = q.sequence(db, "a")
    assert (state.head, state.blocked, state.waiting) == (ids[0], False, 2)
    assert q.items(db) == [("a", 0), ("free", 0)]
    first = q.claim(db, 30)
    assert first is not None and first.value == ("a", 0)
    other = q.claim(db, 30)
    assert other is not None and other.value == ("free", 0)
    assert q.claim(db, 30) is None  # ("a", 1) waits for ("a", 0)
    q.ack(db, first)
    assert q.items(db) == [("a", 1)]
    record = q.job(db, ids[1])
    assert record is not None and record.state == "pending"
    assert q.pop(db) == ("a", 1)
    assert q.pop(db) == ("a", 2)
    assert q.sequence(db, "a") == (None, False, 0)


def test_a_retried_job_keeps_its_successors_waiting(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace)
    q.push(db, 1, sequence=b"k")
    q.push(db, 2, sequence=b"k")
    lease = q.claim(db, 30)
    assert lease is not None
    q.release(db, lease)
    again = q.claim(db, 30)
    assert again is not None and again.value == 1 and q.claim(db, 30) is None
    q.ack(db, again)
    assert q.pop(db) == 2


def test_jobs_complete_in_push_order_when_each_fails_once(db: Any, fdb_subspace: Any) -> None:
    """Four consumers, ten sequences of twenty jobs pushed interleaved; every job fails
    its first delivery.  Each sequence completes in push order, never two of its jobs
    leased at once."""
    q: Queue[Any] = Queue(fdb_subspace)
    for n in range(20):
        for s in range(10):
            q.push(db, (s, n), sequence=f"s{s}")
    done: Dict[int, List[int]] = {s: [] for s in range(10)}
    running: Dict[int, int] = {}
    failed = set()
    lock = threading.Lock()
    errors: List[BaseException] = []

    def consume() -> None:
        try:
            while True:
                lease = q.claim_wait(db, 30, timeout=2)
                if lease is None:
                    return
                s, n = lease.value
                with lock:
                    assert s not in running, f"two jobs of sequence {s} at once"
                    running[s] = n
                    first = (s, n) not in failed
                    failed.add((s, n))
                with lock:
                    del running[s]
                    if not first:
                        done[s].append(n)
                if first:
                    q.release(db, lease)
                else:
                    q.ack(db, lease)
        except BaseException as e:  # reported by run_threads
            errors.append(e)

    run_threads([threading.Thread(target=consume) for _ in range(4)], errors, 120)
    assert done == {s: list(range(20)) for s in range(10)}
    assert q.size(db) == 0


def test_a_dead_job_blocks_its_sequence_until_unblocked(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, max_deliveries=1)
    dead = q.push(db, 1, sequence="k")
    q.push(db, 2, sequence="k")
    q.push(db, 3, sequence="k")
    assert q.unblock(db, "k") is None  # not blocked: nothing written
    lease = q.claim(db, 30)
    assert lease is not None
    q.release(db, lease)  # its last delivery: a dead letter
    assert [d.value for d in q.dead(db)] == [1]
    assert q.claim(db, 30) is None
    assert q.sequence(db, "k") == (dead, True, 2)
    assert q.unblock(db, "k") == dead
    assert q.sequence(db, "k").blocked is False
    assert q.pop(db) == 2
    assert [d.value for d in q.dead(db)] == [1]  # the dead letter stays


def test_a_requeued_dead_head_runs_again_before_its_successors(
        db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, max_deliveries=1)
    q.push(db, 1, sequence="k")
    q.push(db, 2, sequence="k")
    lease = q.claim(db, 30)
    assert lease is not None
    q.bury(db, lease, "broken")
    assert q.claim(db, 30) is None
    assert q.requeue_dead(db) == 1
    assert q.sequence(db, "k").blocked is False  # it runs again
    assert q.unblock(db, "k") is None  # so nothing to move on from
    assert q.pop(db) == 1
    assert q.pop(db) == 2 and q.sequence(db, "k") == (None, False, 0)


def test_a_delayed_job_keeps_its_delay_while_it_waits(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace)
    q.push(db, 1, sequence="k")
    q.push(db, 2, sequence="k", delay=60)
    assert q.pop(db) == 1
    assert q.pop(db) is None and q.stats(db).delayed == 1


def test_a_cancelled_pending_head_lets_the_next_in(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, history=3600)
    head = q.push(db, 1, sequence="k")
    q.push(db, 2, sequence="k")
    assert head is not None and q.remove(db, id=head) == 1
    assert q.items(db) == [2]


def test_priority_queue_jobs_go_in_at_their_priority(db: Any, fdb_subspace: Any) -> None:
    q: PriorityQueue[str] = PriorityQueue(fdb_subspace)
    q.push(db, "first", 5, sequence="k")
    q.push(db, "second", 1, sequence="k")
    q.push(db, "other", 3)
    assert q.pop_min(db) == "other"
    assert q.pop_min(db) == "first"
    assert q.pop_min(db) == "second"


def test_the_async_twin(db: Any, fdb_subspace: Any) -> None:
    async def main() -> None:
        q: AsyncQueue[int] = AsyncQueue(fdb_subspace, max_deliveries=1)
        await q.push(db, 1, sequence="k")
        await q.push(db, 2, sequence="k")
        lease = await q.claim(db, 30)
        assert lease is not None
        await q.bury(db, lease)
        assert (await q.sequence(db, "k")).blocked
        assert await q.unblock(db, "k") == lease.id
        assert await q.pop(db) == 2

    asyncio.run(main())


def test_bad_arguments_write_nothing(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace)
    with pytest.raises(TypeError, match="sequence"):
        q.push(db, 1, sequence=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sequence"):
        q.push(db, 1, sequence="")
    with pytest.raises(ValueError, match="unique and sequence"):
        q.push(db, 1, sequence="k", unique="k")
    with pytest.raises(ValueError, match="must not begin"):
        q.push(db, 1, id=b"seq:0123456789abcdef:sk")
    with pytest.raises(ValueError, match="unsharded"):
        Queue(fdb_subspace, shards=2).push(db, 1, sequence="k")
    with pytest.raises(TypeError, match="sequence"):
        q.unblock(db, 3)  # type: ignore[arg-type]
    assert q.size(db) == 0


def test_the_operator_unblocks_from_the_command_line(db: Any, fdb_subspace: Any,
                                                     fdb_cluster_file: str) -> None:
    from tests.integration.test_operator_cli import answer, failed, fdbrecipes, place

    q: Queue[int] = Queue(fdb_subspace, max_deliveries=1)
    dead = q.push(db, 1, sequence="orders-17")
    q.push(db, 2, sequence="orders-17")
    lease = q.claim(db, 30)
    assert lease is not None
    q.bury(db, lease, "broken")
    where = [*place(fdb_subspace), "--kind", "queue", "--sequence", "orders-17"]
    assert "--yes" in failed(fdbrecipes(fdb_cluster_file, "unblock", *where), 2)
    assert q.sequence(db, "orders-17").blocked
    done = answer(fdbrecipes(fdb_cluster_file, "unblock", *where, "--yes", "--json"))
    assert done["unblocked"] is True and dead is not None
    assert q.pop(db) == 2
    again = answer(fdbrecipes(fdb_cluster_file, "unblock", *where, "--yes", "--json"))
    assert again["unblocked"] is False and again["dead_job"] is None


def test_a_waiting_job_can_be_cancelled_or_removed(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, history=3600)
    q.push(db, 1, sequence="k")
    second = q.push(db, 2, sequence="k")
    third = q.push(db, 3, sequence="k")
    assert second is not None and third is not None
    assert q.cancel(db, second) == "cancelled"
    record = q.job(db, second)
    assert record is not None and record.state == "cancelled"
    assert q.remove(db, id=third) == 3
    assert q.sequence(db, "k").waiting == 0
    assert q.pop(db) == 1 and q.pop(db) is None
    assert q.sequence(db, "k") == (None, False, 0)
