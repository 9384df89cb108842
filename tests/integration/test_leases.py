"""Leases (claim / ack / extend / release / expiry) on Queue and PriorityQueue."""

from __future__ import annotations

import threading
from typing import Any, List

import fdb
import pytest

from fdbrecipes import LeaseExpiredError, PriorityQueue, Queue
from tests.helpers import TestClock, dump

pytestmark = pytest.mark.integration


@pytest.fixture
def q(fdb_subspace: Any, clock: TestClock) -> Queue:
    return Queue(fdb_subspace, clock=clock)


def test_claim_hides_ack_removes(db: Any, q: Queue) -> None:
    q.push_many(db, [b"a", b"b"])
    lease = q.claim(db, 30)
    assert lease is not None
    assert lease.value == b"a" and lease.deliveries == 1
    assert q.items(db) == [b"b"] and q.peek(db) == b"b"
    assert q.size(db) == 2
    q.ack(db, lease)
    assert q.size(db) == 1 and q.items(db) == [b"b"]
    with pytest.raises(LeaseExpiredError):
        q.ack(db, lease)  # acked already


def test_claim_on_an_empty_queue(db: Any, q: Queue) -> None:
    assert q.claim(db, 30) is None
    q.push(db, 1)
    lease = q.claim(db, 30)
    assert lease is not None
    assert q.claim(db, 30) is None  # the only item is leased


def test_expired_lease_is_delivered_again_in_place(db: Any, q: Queue, clock: TestClock) -> None:
    q.push_many(db, [b"a", b"b", b"c"])
    lease = q.claim(db, 10)
    assert lease is not None and lease.value == b"a"
    clock.advance(5)
    assert q.peek(db) == b"b"  # not expired yet
    clock.advance(6)
    assert q.peek(db) == b"a"  # expired: visible again, at its original place
    assert q.items(db) == [b"a", b"b", b"c"]
    with pytest.raises(LeaseExpiredError):
        q.ack(db, lease)
    again = q.claim(db, 10)
    assert again is not None and again.value == b"a" and again.deliveries == 2
    q.ack(db, again)
    assert q.items(db) == [b"b", b"c"] and q.size(db) == 2


def test_ack_after_expiry_fails_even_before_anyone_reclaims(db: Any, q: Queue,
                                                            clock: TestClock) -> None:
    q.push(db, b"x")
    lease = q.claim(db, 1)
    assert lease is not None
    clock.advance(2)
    with pytest.raises(LeaseExpiredError, match="ack"):
        q.ack(db, lease)
    with pytest.raises(LeaseExpiredError, match="extend"):
        q.extend(db, lease, 10)
    assert q.release(db, lease) is False
    assert q.size(db) == 1
    assert q.pop(db) == b"x"


def test_extend(db: Any, q: Queue, clock: TestClock) -> None:
    q.push(db, b"x")
    lease = q.claim(db, 10)
    assert lease is not None
    clock.advance(8)
    longer = q.extend(db, lease, 10)
    assert longer.deadline > lease.deadline and longer.value == b"x"
    assert longer == lease and longer.token == lease.token  # the same lease
    clock.advance(8)  # past the first deadline, within the second
    assert q.is_empty(db)
    q.ack(db, lease)  # the original Lease object still names it
    with pytest.raises(LeaseExpiredError):
        q.ack(db, longer.token)  # acked already
    assert q.size(db) == 0


def test_release_puts_back_in_place(db: Any, q: Queue) -> None:
    q.push_many(db, [1, 2, 3])
    first, second = q.claim(db, 30), q.claim(db, 30)
    assert first is not None and second is not None
    assert q.release(db, second) is True
    assert q.release(db, second) is False
    assert q.items(db) == [2, 3]
    assert q.release(db, first) is True
    assert q.items(db) == [1, 2, 3]
    again = q.claim(db, 30)
    assert again is not None and again.value == 1 and again.deliveries == 2


def test_an_expired_item_comes_before_items_pushed_while_it_was_held(
    db: Any, q: Queue, clock: TestClock
) -> None:
    q.push(db, b"old")
    lease = q.claim(db, 10)
    assert lease is not None and q.is_empty(db)
    q.push_many(db, [b"new1", b"new2"])  # pushed into an empty-looking queue
    clock.advance(11)
    assert q.items(db) == [b"old", b"new1", b"new2"]
    assert q.pop(db) == b"old"


def test_pops_and_claims_take_expired_items_first(db: Any, q: Queue, clock: TestClock) -> None:
    q.push_many(db, range(6))
    leases = [q.claim(db, 5) for _ in range(3)]
    assert [lease.value for lease in leases if lease] == [0, 1, 2]
    clock.advance(6)
    assert q.pop(db) == 0
    lease = q.claim(db, 5)
    assert lease is not None and lease.value == 1 and lease.deliveries == 2
    assert q.pop_many(db, 3) == [2, 3, 4]
    assert q.size(db) == 2


def test_claims_of_different_items_do_not_conflict(db: Any, q: Queue) -> None:
    """Claims of the same item conflict (one retries); two consumers that claim in
    turn under contention each get their own item."""
    q.push_many(db, range(50))
    got: List[Any] = []
    lock = threading.Lock()

    def consumer() -> None:
        mine = Queue(q.subspace)
        while (lease := mine.claim(db, 60)) is not None:
            with lock:
                got.append(lease.value)
            mine.ack(db, lease)

    threads = [threading.Thread(target=consumer) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(50))
    assert q.size(db) == 0


def test_claims_take_no_conflict_on_the_deadlines(db: Any, q: Queue) -> None:
    q.push_many(db, [b"a", b"b"])
    t1 = db.create_transaction()
    lease = q.claim(t1, 30)
    assert lease is not None
    other = q.claim(db, 30)  # commits a different claim first
    assert other is not None and other.value == b"a"
    with pytest.raises(fdb.FDBError):
        t1.commit().wait()  # same item: conflict, as it must
    t2 = db.create_transaction()
    assert q.claim(t2, 30) is not None  # takes b"b"
    q.push(db, b"c")
    q.ack(db, other)
    t2.commit().wait()  # the other consumer's ack and a push do not conflict with it


def test_priority_queue_leases(db: Any, fdb_subspace: Any, clock: TestClock) -> None:
    pq = PriorityQueue(fdb_subspace, clock=clock)
    pq.push_many(db, [("lo", 1), ("hi", 9), ("hi2", 9), ("mid", 5)])
    top = pq.claim_max(db, 10)
    low = pq.claim_min(db, 10)
    assert top is not None and top.value == "hi"
    assert low is not None and low.value == "lo"
    assert pq.items(db, reverse=True) == ["hi2", "mid"]
    clock.advance(11)
    assert pq.items(db, reverse=True) == ["hi", "hi2", "mid", "lo"]
    assert pq.pop_max(db) == "hi"
    assert pq.pop_min(db) == "lo"
    again = pq.claim_max(db, 10)
    assert again is not None and again.value == "hi2" and again.deliveries == 1
    pq.ack(db, again)
    assert pq.items(db) == ["mid"]


def test_lease_records_live_inside_the_subspace(db: Any, q: Queue, fdb_subspace: Any) -> None:
    q.push(db, b"x")
    lease = q.claim(db, 30)
    assert lease is not None
    assert all(fdb_subspace.contains(k) for k in dump(db, fdb_subspace))
    q.ack(db, lease)
    keys = dump(db, fdb_subspace)
    assert not any(fdb_subspace["h"].contains(k) or fdb_subspace["d"].contains(k) for k in keys)


def test_ack_many_acks_a_lease_named_twice_once(db: Any, q: Queue) -> None:
    """Acking the same lease twice in one call acks it once (False the second time, as
    a second ack would raise): the size and the in-flight count stay exact."""
    q.push_many(db, [b"a", b"b"])
    lease = q.claim(db, 30)
    assert lease is not None
    assert q.ack_many(db, [lease, lease, lease.token]) == [True, False, False]
    assert q.size(db) == 1 and q.items(db) == [b"b"]
    stats = q.stats(db)
    assert (stats.visible, stats.in_flight) == (1, 0)


def test_ack_many_over_several_claims(db: Any, q: Queue, clock: TestClock) -> None:
    """Leases of one claim are read together (one range of keys): a part of a claim,
    several claims, single claims and expired leases, in any order, each get their
    own answer, and the leases not named stay leased."""
    q.push_many(db, list(range(12)))
    first = q.claim_many(db, 5, 30)
    short = q.claim_many(db, 2, 1)
    second = q.claim_many(db, 4, 30)
    single = q.claim(db, 30)
    assert single is not None
    clock.advance(2)  # the two short leases expire
    q.ack(db, first[4])
    asked = [second[3], first[0], short[0], single, first[2], second[0], first[4],
             second[2], short[1].token, second[1]]
    assert q.ack_many(db, asked) == [True, True, False, True, True, True, False,
                                     True, False, True]
    assert sorted(q.items(db)) == [5, 6]  # the expired leases' items, visible again
    assert q.ack_many(db, [first[3], first[1]]) == [True, True]
    assert q.size(db) == 2 and q.stats(db).in_flight == 0


def test_ack_many_conflicts_with_a_change_to_a_lease_in_the_span_it_read(
    db: Any, q: Queue
) -> None:
    """The leases of one claim are read as one range, from the first asked for to the
    last, with a read conflict on it: an ack_many of leases 0 and 2 conflicts with a
    concurrent release of lease 1, not with one of lease 3 (outside the span)."""
    q.push_many(db, [b"a", b"b", b"c", b"d"])
    leases = q.claim_many(db, 4, 30)
    t1, t2 = db.create_transaction(), db.create_transaction()
    assert q.ack_many(t1, [leases[0], leases[2]]) == [True, True]
    assert q.ack_many(t2, [leases[0], leases[2]]) == [True, True]
    assert q.release(db, leases[3]) is True
    t2.commit().wait()  # lease 3 is outside the span t2 read
    assert q.release(db, leases[1]) is True
    with pytest.raises(fdb.FDBError) as conflict:
        t1.commit().wait()  # and t2's acks, too, changed what t1 read
    assert conflict.value.code == 1020
    assert sorted(q.items(db)) == [b"b", b"d"]
    assert q.size(db) == 2 and q.stats(db).in_flight == 0
    assert q.ack_many(db, leases) == [False, False, False, False]


def test_ack_many_of_a_few_leases_of_a_large_claim(db: Any, q: Queue) -> None:
    """Leases far apart in one claim are read one by one, not with the whole span."""
    q.push_many(db, list(range(300)))
    leases = q.claim_many(db, 300, 30)
    assert q.ack_many(db, [leases[299], leases[0], leases[150]]) == [True, True, True]
    assert q.ack_many(db, leases[1:150]) == [True] * 149
    assert q.ack_many(db, leases) == [False] + [False] * 149 + [False] + [True] * 148 + [False]
    assert q.size(db) == 0
