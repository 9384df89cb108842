"""Key layout and ordering (no server needed): the order of packed keys is the order
the structures promise."""

from __future__ import annotations

import os
from typing import Any, List, Tuple

import pytest
from fdb.subspace_impl import Subspace
from hypothesis import given
from hypothesis import strategies as st

from fdbrecipes import PriorityQueue, Queue
from fdbrecipes._core import MAX, MIN, Entry, Lease, lease_parts

S = Subspace(("app", "jobs"))
priorities = st.integers(min_value=-(2**200), max_value=2**200)


def pq_item(priority: int, count: int, *meta: Any) -> Tuple[Any, ...]:
    return (priority, count, os.urandom(20), *meta)


def entries(pq: PriorityQueue, items: List[Tuple[Any, ...]]) -> List[Entry]:
    o = pq._o
    return [Entry(t, b"", bytes(o.items.pack(t))) for t in items]


@given(st.lists(st.tuples(priorities, st.integers(0, 2**40)), min_size=1, max_size=40))
def test_min_order_is_priority_then_count(pairs: List[Tuple[int, int]]) -> None:
    pq = PriorityQueue(S)
    items = [pq_item(p, c) for p, c in pairs]
    by_key = sorted(entries(pq, items), key=lambda e: e.key)
    assert [e.item[:2] for e in by_key] == sorted(pairs)


@given(st.lists(st.tuples(priorities, st.integers(0, 2**40)), min_size=1, max_size=40))
def test_max_order_is_highest_priority_then_oldest(pairs: List[Tuple[int, int]]) -> None:
    pq = PriorityQueue(S)
    items = [pq_item(p, c) for p, c in pairs]
    ordered = sorted(entries(pq, items), key=pq._o.order(MAX))
    assert [e.item[:2] for e in ordered] == sorted(pairs, key=lambda pc: (-pc[0], pc[1]))


def test_negative_zero_and_huge_priorities_order_as_ints() -> None:
    pq = PriorityQueue(S)
    ps = [-(2**100), -(2**64), -256, -1, 0, 1, 255, 2**64, 2**100]
    keys = [pq._o.items.pack((p, 0, b"r")) for p in ps]
    assert sorted(keys) == keys


def test_ties_keep_push_order_then_random() -> None:
    q = Queue(S)
    a = q._o.items.pack((7, b"\x00" * 20))
    b = q._o.items.pack((7, b"\xff" * 20))
    c = q._o.items.pack((8, b"\x00" * 20))
    assert a < b < c


def test_metadata_suffix_keeps_an_item_in_place() -> None:
    q = Queue(S)
    o = q._o
    plain = (5, b"\x10" * 20)
    redelivered = o.with_deliveries(plain, 3)
    assert o.meta(plain) == (0, None)
    assert o.meta(redelivered) == (3, None)
    before = o.items.pack((5, b"\x0f" * 20))
    after = o.items.pack((5, b"\x11" * 20))
    assert before < o.items.pack(redelivered) < after
    with_id = plain + (0, b"id-1")
    assert o.meta(with_id) == (0, b"id-1")
    assert o.meta(o.with_deliveries(with_id, 1)) == (1, b"id-1")


def test_every_key_is_inside_the_subspace() -> None:
    q = Queue(S)
    o = q._o
    keys = [
        o.items.pack((1, b"r" * 20)), o.held.pack((b"l", (1, b"r"), 5, 0)),
        o.due.pack((5, b"l", (1, b"r"), 0)), o.requests.pack((MIN, 0, b"i")),
        o.count_key, o.wake_key, o.floor_key, o.ids.key(b"x"), o.ids.gc.pack((1, b"x")),
    ]
    r = S.range()
    assert all(r.start <= k < r.stop for k in keys)
    assert len(set(keys)) == len(keys)


def test_lease_tokens() -> None:
    token = Lease(b"v", 1, 99, b"").token
    assert token == b""
    lease = Queue(S)._o.lease((3, b"r" * 20), b"\x01v\x00", b"L" * 16, 1234)
    assert lease.value == b"v" and lease.deliveries == 1 and lease.deadline == 1234
    assert lease_parts(lease) == (b"L" * 16, (3, b"r" * 20), 1234)
    assert lease_parts(lease.token) == lease_parts(lease)
    with pytest.raises(TypeError, match="^lease"):
        lease_parts("token")
    with pytest.raises(ValueError, match="^lease"):
        lease_parts(b"\x99garbage")


def test_receipts_are_shared_per_structure_and_collected_periodically() -> None:
    """Spent receipts of one subspace are cleared by any object on it, a bounded
    number per call, and the scan for old receipts runs at calls 1, 17, 33..."""
    from fdbrecipes._core import RECEIPT_CLEARS, RECEIPT_GC_EVERY, Receipts

    space = Subspace(("receipts-test", os.urandom(8)))
    first, second = Receipts(space), Receipts(space)
    other = Receipts(Subspace(("receipts-test", os.urandom(8))))
    assert first.spent is second.spent and first.spent is not other.spent
    assert first.space.key() == space["c"].key()
    keys = [first.space.pack((n, os.urandom(16))) for n in range(RECEIPT_CLEARS + 3)]
    first.give_back(keys)
    clearing, gc = second.start()
    assert clearing == keys[:RECEIPT_CLEARS] and gc
    assert other.start() == ([], True)
    looks = [second.start() for _ in range(2 * RECEIPT_GC_EVERY)]
    assert looks[0][0] == keys[RECEIPT_CLEARS:]
    assert [n + 2 for n, (_, gc) in enumerate(looks) if gc] == [
        1 + RECEIPT_GC_EVERY, 1 + 2 * RECEIPT_GC_EVERY]
