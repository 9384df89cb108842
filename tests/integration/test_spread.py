"""Relaxed-order pops (``spread``) and batch consumption (``claim_many``,
``pop_many``, ``ack_many``): nothing lost or doubled under concurrent consumers, and
the reordering bound holds (issue 12)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, List, Tuple

import fdb
import pytest

from fdbrecipes import PriorityQueue, Queue
from tests.helpers import run_threads

pytestmark = pytest.mark.integration


def test_spread_1_is_strict_order(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, range(20))
    assert [q.pop(db, spread=1) for _ in range(20)] == list(range(20))


@pytest.mark.parametrize("k", [2, 5, 16])
def test_a_pop_takes_one_of_the_k_oldest(db: Any, fdb_subspace: Any, k: int) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, range(60))
    taken = []
    while True:
        waiting = q.items(db)
        value = q.pop(db, spread=k)
        if value is None:
            break
        assert waiting.index(value) < k, f"took {value} with {waiting[:k]} oldest"
        taken.append(value)
    assert sorted(taken) == list(range(60)) and taken != list(range(60))


def test_spread_at_both_ends_of_a_priority_queue(db: Any, fdb_subspace: Any) -> None:
    pq = PriorityQueue(fdb_subspace)
    pq.push_many(db, [(i, i % 3) for i in range(30)])
    for end, reverse in (("min", False), ("max", True)):
        for _ in range(5):
            waiting = pq.items(db, reverse=reverse)
            pop = pq.pop_min if end == "min" else pq.pop_max
            value = pop(db, spread=4)
            assert waiting.index(value) < 4
    assert pq.size(db) == 20


def test_pop_many_with_spread_keeps_the_bound(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, range(50))
    waiting = q.items(db)
    got = q.pop_many(db, 10, spread=5)
    assert len(got) == 10 and all(waiting.index(v) < 14 for v in got)
    assert got == sorted(got, key=waiting.index)  # returned oldest first


def pop_in_transaction(db: Any, q: Queue, k: int) -> Tuple[Any, List[Any]]:
    """Pop with spread=k in our own transaction; return the value and the order of the
    visible items at that transaction's read version (by snapshot)."""
    tr = db.create_transaction()
    while True:
        try:
            waiting = q.items(tr.snapshot, limit=k + 5)
            value = q.pop(tr, spread=k)
            tr.commit().wait()
            return value, waiting
        except fdb.FDBError as e:
            tr.on_error(e).wait()


def test_concurrent_spread_poppers_deliver_everything_once_within_the_bound(
    db: Any, fdb_subspace: Any
) -> None:
    k, total, poppers = 8, 1_200, 8
    Queue(fdb_subspace).push_many(db, range(total))
    got: List[Any] = []
    lock = threading.Lock()
    errors: List[BaseException] = []

    def popper() -> None:
        try:
            q = Queue(fdb_subspace)
            while True:
                value, waiting = pop_in_transaction(db, q, k)
                if value is None:
                    return
                assert waiting.index(value) < k
                with lock:
                    got.append(value)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    run_threads([threading.Thread(target=popper) for _ in range(poppers)], errors, 600)
    assert sorted(got) == list(range(total))


def test_concurrent_claim_many_and_ack_many(db: Any, fdb_subspace: Any) -> None:
    total, consumers = 3_000, 6
    Queue(fdb_subspace).push_many(db, range(total))
    acked: List[Any] = []
    lock = threading.Lock()
    errors: List[BaseException] = []

    def consumer(spread: int) -> None:
        try:
            q = Queue(fdb_subspace)
            while True:
                leases = q.claim_many(db, 50, 60, spread=spread)
                if not leases:
                    return
                assert all(lease.deliveries == 1 for lease in leases)
                assert q.ack_many(db, leases) == [True] * len(leases)
                with lock:
                    acked.extend(lease.value for lease in leases)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    # strict, a spread under n (the first block), and 8 blocks of 50 (as a worker's)
    threads = [threading.Thread(target=consumer, args=((1, 8, 400)[c % 3],))
               for c in range(consumers)]
    run_threads(threads, errors, 600)
    counts = Counter(acked)
    assert len(counts) == total and max(counts.values()) == 1
    assert Queue(fdb_subspace).size(db) == 0


def claimed_block(db: Any, q: Queue, n: int, spread: int) -> Tuple[int, List[Any]]:
    """Claim ``n`` with ``spread`` in a transaction never committed: where the block
    taken starts in the order of the visible items (read at its read version), and
    those items."""
    tr = db.create_transaction()
    waiting = q.items(tr.snapshot)
    values = [lease.value for lease in q.claim_many(tr, n, 30, spread=spread)]
    start = waiting.index(values[0])
    assert values == waiting[start: start + len(values)]  # in a row, in order
    return start, values


@pytest.mark.parametrize(("length", "starts"), [(100, {0, 10, 20, 30}), (25, {0, 10, 15})])
def test_a_claim_with_a_spread_of_blocks_takes_a_whole_block(
        db: Any, fdb_subspace: Any, length: int, starts: set[int]) -> None:
    """A claim of 10 with a spread of 40 takes 10 in a row starting at 0, 10, 20 or
    30; on a queue of 25 (a block drawn past its end is drawn again among those
    before the end, the last ending with the queue) still 10, at 0, 10 or 15."""
    q = Queue(fdb_subspace)
    q.push_many(db, range(length))
    found = set()
    for _ in range(80):
        start, values = claimed_block(db, q, 10, 40)
        assert len(values) == 10
        found.add(start)
    assert found == starts


def test_ack_many_reports_each_lease(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, [b"a", b"b", b"c"])
    leases = q.claim_many(db, 3, 30)
    q.ack(db, leases[1])
    assert q.ack_many(db, [leases[0], leases[1].token, leases[2]]) == [True, False, True]
    assert q.size(db) == 0
    assert q.ack_many(db, []) == []
