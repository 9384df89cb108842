"""PriorityQueue against a real FoundationDB server."""

from __future__ import annotations

from typing import Any

import fdb
import pytest

from fdbrecipes import PriorityQueue
from tests.helpers import dump

pytestmark = pytest.mark.integration


@pytest.fixture
def pq(fdb_subspace: Any) -> PriorityQueue:
    return PriorityQueue(fdb_subspace)


def test_min_and_max_order(db: Any, pq: PriorityQueue) -> None:
    pq.push_many(db, [("c", 3), ("a", 1), ("e", 5), ("b", 2), ("d", 4)])
    assert pq.peek_min(db) == "a" and pq.peek_max(db) == "e"
    assert pq.pop_min(db) == "a"
    assert pq.pop_max(db) == "e"
    assert pq.pop_min(db) == "b"
    assert pq.pop_max(db) == "d"
    assert pq.pop_max(db) == "c"
    assert pq.pop_min(db) is None and pq.pop_max(db) is None
    assert pq.peek_min(db) is None and pq.peek_max(db) is None


def test_ties_are_fifo_at_both_ends(db: Any, pq: PriorityQueue) -> None:
    for i in range(4):
        pq.push(db, f"high{i}", 9)
        pq.push(db, f"low{i}", 1)
    pq.push(db, "mid", 5)
    assert [pq.pop_max(db) for _ in range(4)] == ["high0", "high1", "high2", "high3"]
    assert [pq.pop_min(db) for _ in range(2)] == ["low0", "low1"]
    assert pq.pop_max(db) == "mid"
    assert pq.pop_max(db) == "low2"  # oldest of the (now highest) priority 1
    assert pq.pop_min(db) == "low3"


def test_pop_max_finds_the_oldest_of_a_long_run(db: Any, pq: PriorityQueue) -> None:
    pq.push_many(db, [(i, 7) for i in range(300)] + [("below", 6)])
    assert pq.pop_max(db) == 0
    assert pq.items(db, limit=3, reverse=True) == [1, 2, 3]
    assert pq.items(db, limit=2) == ["below", 1]


def test_negative_zero_and_huge_priorities(db: Any, pq: PriorityQueue) -> None:
    ps = [2**200, -(2**200), 0, -1, 1, 2**64, -(2**64), 255, -256]
    pq.push_many(db, [(p, p) for p in ps])
    assert pq.items(db) == sorted(ps)
    assert pq.items(db, reverse=True) == sorted(ps, reverse=True)
    assert [pq.pop_max(db) for _ in range(3)] == sorted(ps, reverse=True)[:3]
    assert [pq.pop_min(db) for _ in range(3)] == sorted(ps)[:3]


def test_items_in_both_orders(db: Any, pq: PriorityQueue) -> None:
    pq.push_many(db, [("x1", 2), ("y1", 1), ("x2", 2), ("y2", 1), ("z", 3)])
    assert pq.items(db) == ["y1", "y2", "x1", "x2", "z"]
    assert pq.items(db, reverse=True) == ["z", "x1", "x2", "y1", "y2"]
    assert pq.items(db, limit=2, reverse=True) == ["z", "x1"]


def test_size_and_emptiness(db: Any, pq: PriorityQueue) -> None:
    assert pq.is_empty(db) and pq.size(db) == 0
    pq.push(db, b"a", 1)
    pq.push_many(db, [(b"b", 2), (b"c", 0)])
    assert pq.size(db) == 3 and not pq.is_empty(db)
    pq.pop_max(db)
    pq.pop_min(db)
    assert pq.size(db) == 1
    lease = pq.claim_max(db, 60)
    assert lease is not None and lease.value == b"a"
    assert pq.is_empty(db) and pq.size(db) == 1
    pq.ack(db, lease)
    assert pq.size(db) == 0


def test_pop_max_conflicts_with_a_higher_push(db: Any, pq: PriorityQueue) -> None:
    """A pop_max whose transaction saw priority 5 as the highest must not commit if a
    higher priority was pushed concurrently: the order stays serializable."""
    pq.push(db, b"five", 5)
    tr = db.create_transaction()
    assert pq.pop_max(tr) == b"five"
    pq.push(db, b"nine", 9)  # commits first
    with pytest.raises(fdb.FDBError) as e:
        tr.commit().wait()
    assert e.value.code == 1020
    assert pq.pop_max(db) == b"nine"


def test_concurrent_pushes_of_one_priority_do_not_conflict(db: Any, pq: PriorityQueue) -> None:
    t1, t2 = db.create_transaction(), db.create_transaction()
    pq.push(t1, b"one", 4)
    pq.push(t2, b"two", 4)
    t1.commit().wait()
    t2.commit().wait()  # would raise not_committed if pushes read with conflicts
    assert sorted(pq.items(db)) == [b"one", b"two"]


def test_bad_inputs_leave_the_subspace_unchanged(db: Any, pq: PriorityQueue,
                                                 fdb_subspace: Any) -> None:
    pq.push(db, b"a", 1)
    before = dump(db, fdb_subspace)
    for call in [
        lambda: pq.push(db, b"x", 1.5),
        lambda: pq.push(db, b"x", True),
        lambda: pq.push(db, None, 1),
        lambda: pq.push_many(db, [(b"ok", 1), (b"bad", None)]),
        lambda: pq.push_many(db, [(b"ok", 1), b"bad"]),
        lambda: pq.items(db, reverse="yes"),
        lambda: pq.claim_min(db, 0),
    ]:
        with pytest.raises((TypeError, ValueError)):
            call()
    assert dump(db, fdb_subspace) == before


def test_items_given_a_database_run_across_pages_in_both_orders(
    db: Any, pq: PriorityQueue
) -> None:
    """Given a Database, items() reads pages of 1,000, each in its own transaction;
    the pages join up: every item once, in order, at both ends, with a limit too."""
    pairs = [(f"p{p}-{i:04}", p) for p in range(3) for i in range(900)]
    for start in range(0, len(pairs), 500):
        pq.push_many(db, pairs[start:start + 500])
    in_order = [v for v, _ in pairs]
    reverse = [v for p in (2, 1, 0) for v, q in pairs if q == p]
    assert pq.items(db) == in_order
    assert pq.items(db, reverse=True) == reverse
    assert pq.items(db, limit=1_500, reverse=True) == reverse[:1_500]
    assert pq.items(db, limit=2_000) == in_order[:2_000]
