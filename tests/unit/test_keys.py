"""Key layout and ordering (no server needed): the order of packed keys is the order
the structures promise.  The layout is :mod:`fdbrecipes._layout`."""

from __future__ import annotations

import os
from typing import Any, List, Tuple

import fdb.tuple
import pytest
from fdb.subspace_impl import Subspace
from hypothesis import given
from hypothesis import strategies as st

from fdbrecipes._layout import OrderedLayout, TreeLayout
from fdbrecipes._leases import Lease, lease_parts
from fdbrecipes._ordered import MAX, MIN, Entry, order

S = Subspace(("app", "jobs"))
QUEUE, PRIORITY = OrderedLayout(S, 0), OrderedLayout(S, 1)
priorities = st.integers(min_value=-(2**200), max_value=2**200)


def pq_item(priority: int, count: int, *meta: Any) -> Tuple[Any, ...]:
    return (priority, count, os.urandom(20), *meta)


def entries(items: List[Tuple[Any, ...]]) -> List[Entry]:
    return [Entry(t, b"", PRIORITY.item_key(t)) for t in items]


@given(st.lists(st.tuples(priorities, st.integers(0, 2**40)), min_size=1, max_size=40))
def test_min_order_is_priority_then_count(pairs: List[Tuple[int, int]]) -> None:
    items = [pq_item(p, c) for p, c in pairs]
    by_key = sorted(entries(items), key=order(MIN))
    assert [e.item[:2] for e in by_key] == sorted(pairs)


@given(st.lists(st.tuples(priorities, st.integers(0, 2**40)), min_size=1, max_size=40))
def test_max_order_is_highest_priority_then_oldest(pairs: List[Tuple[int, int]]) -> None:
    items = [pq_item(p, c) for p, c in pairs]
    ordered = sorted(entries(items), key=order(MAX))
    assert [e.item[:2] for e in ordered] == sorted(pairs, key=lambda pc: (-pc[0], pc[1]))


def test_negative_zero_and_huge_priorities_order_as_ints() -> None:
    ps = [-(2**100), -(2**64), -256, -1, 0, 1, 255, 2**64, 2**100]
    keys = [PRIORITY.item_key((p, 0, b"r")) for p in ps]
    assert sorted(keys) == keys


def test_ties_keep_push_order_then_random() -> None:
    a = QUEUE.item_key((7, b"\x00" * 20))
    b = QUEUE.item_key((7, b"\xff" * 20))
    c = QUEUE.item_key((8, b"\x00" * 20))
    assert a < b < c


def test_metadata_suffix_keeps_an_item_in_place() -> None:
    o = QUEUE
    plain = (5, b"\x10" * 20)
    redelivered = o.with_deliveries(plain, 3)
    assert o.meta(plain) == (0, None)
    assert o.meta(redelivered) == (3, None)
    before = o.item_key((5, b"\x0f" * 20))
    after = o.item_key((5, b"\x11" * 20))
    assert before < o.item_key(redelivered) < after
    with_id = plain + (0, b"id-1")
    assert o.meta(with_id) == (0, b"id-1")
    assert o.meta(o.with_deliveries(with_id, 1)) == (1, b"id-1")


def test_every_key_is_inside_the_subspace() -> None:
    o, t = QUEUE, TreeLayout(S)
    keys = [
        o.item_key((1, b"r" * 20)), o.held_key(b"l", (1, b"r"), 5, 0),
        o.due_key(b"l", (1, b"r"), 5, 0), o.request_key(MIN, 0, b"i"),
        o.count_key, o.wake_key, o.floor_key,
    ]
    tree = [t.leaves.pack((1, b"r")), t.values.pack((1, b"r")), t.nodes.pack((1, 0)),
            t.total_key, t.count_key, t.wake_key]
    r = S.range()
    assert all(r.start <= k < r.stop for k in keys + tree)
    assert len(set(keys)) == len(keys) and len(set(tree)) == len(tree)


def test_lease_tokens() -> None:
    token = fdb.tuple.pack((b"L" * 16, (3, b"r" * 20), 1234))
    lease = Lease(b"v", 1, 1234, token)
    assert lease_parts(lease) == (b"L" * 16, (3, b"r" * 20), 1234)
    assert lease_parts(lease.token) == lease_parts(lease)
    assert lease == Lease(b"other", 2, 99, token) and hash(lease) == hash(token)
    with pytest.raises(TypeError, match="^lease"):
        lease_parts("token")
    with pytest.raises(ValueError, match="^lease"):
        lease_parts(b"\x99garbage")
