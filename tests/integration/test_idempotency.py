"""Pushes with an id store one item however often they are retried."""

from __future__ import annotations

from typing import Any

import fdb
import pytest

from fdbrecipes import PriorityQueue, Queue, WeightTree
from tests.helpers import TestClock, dump

pytestmark = pytest.mark.integration


def test_same_id_stores_one_item(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push(db, b"charge card 17", id=b"order-17")
    q.push(db, b"charge card 17", id=b"order-17")
    q.push(db, b"other", id=b"order-18")
    assert q.items(db) == [b"charge card 17", b"other"]
    assert q.size(db) == 2


def test_a_retried_transaction_does_not_duplicate(db: Any, fdb_subspace: Any) -> None:
    """What a retry after commit_unknown_result does: run the same push again."""
    q = Queue(fdb_subspace)
    calls = []

    @fdb.transactional
    def push_and_record(tr: Any) -> None:
        q.push(tr, b"payload", id=b"req-1")
        calls.append(1)

    push_and_record(db)
    push_and_record(db)  # the body runs again, as after an unknown result
    assert len(calls) == 2
    assert q.items(db) == [b"payload"]


def test_ids_are_remembered_after_the_item_left(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push(db, 1, id=b"a")
    assert q.pop(db) == 1
    q.push(db, 1, id=b"a")  # a late retry of the same push
    assert q.items(db) == []
    lease_q = Queue(fdb_subspace)
    lease_q.push(db, 2, id=b"b")
    lease = lease_q.claim(db, 30)
    assert lease is not None
    lease_q.ack(db, lease)
    lease_q.push(db, 2, id=b"b")
    assert lease_q.items(db) == []


def test_ids_are_forgotten_after_the_retention(db: Any, fdb_subspace: Any,
                                               clock: TestClock) -> None:
    q = Queue(fdb_subspace, clock=clock, id_retention=60)
    q.push(db, b"first", id=b"x")
    clock.advance(3600)  # a live item's id is never forgotten
    q.push(db, b"first again", id=b"x")
    assert q.items(db) == [b"first"]
    assert q.pop(db) == b"first"
    clock.advance(30)
    q.push(db, b"too soon", id=b"x")
    assert q.items(db) == []
    clock.advance(31)
    q.push(db, b"trigger", id=b"y")  # pushes with ids collect expired ids
    q.push(db, b"new life", id=b"x")
    assert q.items(db) == [b"trigger", b"new life"]


def test_a_push_after_the_retention_is_a_new_push(db: Any, fdb_subspace: Any,
                                                 clock: TestClock) -> None:
    """Issue 21, 5: no push with a new id has collected the old one, yet a push that
    reuses an id whose retention has passed stores its item; and the id, live again,
    is not forgotten when the old retention's collection comes due."""
    q = Queue(fdb_subspace, clock=clock, id_retention=1)
    q.push(db, b"first", id=b"x")
    assert q.pop(db) == b"first"
    clock.advance(0.5)
    q.push(db, b"too soon", id=b"x")
    assert q.items(db) == []
    clock.advance(2)
    q.push(db, b"again", id=b"x")
    assert q.items(db) == [b"again"]
    clock.advance(5)
    q.push(db, b"collector", id=b"y")  # collects expired ids: not x, which is live
    q.push(db, b"again, twice", id=b"x")
    assert q.items(db) == [b"again", b"collector"]


def test_a_weight_tree_push_after_the_retention_is_a_new_push(db: Any, fdb_subspace: Any,
                                                              clock: TestClock) -> None:
    """Issue 21, 5, for a WeightTree: within the retention the removed item's handle
    comes back and nothing is stored; after it, a new item and handle."""
    tree = WeightTree(fdb_subspace, clock=clock, id_retention=1)
    first = tree.push(db, b"first", 3, id=b"x")
    assert tree.pop(db) == b"first"
    assert tree.push(db, b"too soon", 3, id=b"x") == first and tree.size(db) == 0
    clock.advance(2)
    second = tree.push(db, b"again", 3, id=b"x")
    assert second != first and tree.items(db) == [(second, b"again", 3)]
    assert tree.push(db, b"again, twice", 3, id=b"x") == second and tree.size(db) == 1


def test_ids_do_not_pile_up(db: Any, fdb_subspace: Any, clock: TestClock) -> None:
    q = Queue(fdb_subspace, clock=clock, id_retention=1)
    for i in range(20):
        q.push(db, i, id=b"id%d" % i)
        q.pop(db)
        clock.advance(2)
    remembered = [k for k in dump(db, fdb_subspace) if fdb_subspace["k"].contains(k)]
    assert len(remembered) <= 5


def test_priority_queue_ids(db: Any, fdb_subspace: Any) -> None:
    pq = PriorityQueue(fdb_subspace)
    pq.push(db, b"x", 5, id=b"job")
    pq.push(db, b"x", 7, id=b"job")  # same id: ignored, even with another priority
    assert pq.items(db) == [b"x"]
    assert pq.pop_max(db) == b"x"


def test_pushes_with_different_ids_do_not_conflict(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    trs = [db.create_transaction() for _ in range(5)]
    for n, tr in enumerate(trs):
        q.push(tr, n, id=b"id-%d" % n)
    for tr in trs:
        tr.commit().wait()
    assert sorted(q.items(db)) == [0, 1, 2, 3, 4]


def test_pushes_with_the_same_id_conflict(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    t1, t2 = db.create_transaction(), db.create_transaction()
    q.push(t1, b"a", id=b"same")
    q.push(t2, b"a", id=b"same")
    t1.commit().wait()
    with pytest.raises(fdb.FDBError) as e:
        t2.commit().wait()
    assert e.value.code == 1020
    assert q.items(db) == [b"a"]
