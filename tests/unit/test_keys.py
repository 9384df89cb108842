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

from fdbrecipes._layout import (
    SHARDED,
    Marker,
    OrderedLayout,
    RecordLayout,
    TreeLayout,
    kept_by_clear,
    packed_bytes,
    shard_space,
)
from fdbrecipes._ordered.front import MAX, MIN, Entry, order
from fdbrecipes._ordered.leases import Lease, lease_id, token_of
from fdbrecipes._values import BATCH_ID_LEN, batch_ids, claimed_at, lease_shard

S = Subspace(("app", "jobs"))
QUEUE, PRIORITY = OrderedLayout(S, 0), OrderedLayout(S, 1)
priorities = st.integers(min_value=-(2**200), max_value=2**200)


def pq_item(priority: int, count: int) -> Tuple[Any, ...]:
    return (priority, count, os.urandom(20), 0, None, 0)


def entries(items: List[Tuple[Any, ...]]) -> List[Entry]:
    return [Entry(t, PRIORITY.item_key(t), b"") for t in items]


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


def test_metadata_keeps_an_item_in_place() -> None:
    o = QUEUE
    item = o.new_item((), 5, None, 1000)
    assert (o.seq(item), o.deliveries(item), o.item_id(item), o.since(item)) == (5, 0, None, 1000)
    redelivered = o.renewed(item, 3, 2000)
    assert (o.deliveries(redelivered), o.since(redelivered)) == (3, 2000)
    assert o.place(redelivered) == o.place(item)
    middle = (5, b"\x10" * 20, 0, None, 0)
    before = o.item_key((5, b"\x0f" * 20, 9, b"z", 10**9))
    after = o.item_key((5, b"\x11" * 20, 0, None, 0))
    assert before < o.item_key(o.renewed(middle, 7, 10**9)) < after
    with_id = o.new_item((), 5, b"id-1", 7)
    assert o.item_id(o.renewed(with_id, 1, 8)) == b"id-1"


def test_priority_items_carry_their_group() -> None:
    item = PRIORITY.new_item((9,), 3, None, 0)
    assert PRIORITY.group(item) == (9,) and PRIORITY.seq(item) == 3


def test_every_key_is_inside_the_subspace() -> None:
    o, t = QUEUE, TreeLayout(S)
    item = o.new_item((), 1, None, 0)
    keys = [
        o.item_key(item), *o.hold_keys(b"l", item, 5, 0),
        o.dead_letter_key(5, item, 1.5),
        o.pushed, o.taken, o.held_in, o.held_out, o.delayed_in, o.delayed_out, o.dead_in,
        o.dead_out, o.floor_key, PRIORITY.floor_key,
    ]
    tree = [t.leaves.pack((1, b"r")), t.values.pack((1, b"r")), t.nodes.pack((1, 0)),
            t.total_key, t.pushed, t.taken]
    r = S.range()
    assert all(r.start <= k < r.stop for k in keys + tree)
    assert len(set(keys)) == len(keys) and len(set(tree)) == len(tree)


@given(st.one_of(st.none(), st.binary(max_size=30)), st.integers(-(2**70), 2**70),
       st.integers(0, 2**62), st.integers(0, 3), st.booleans())
def test_hold_keys_are_the_packed_tuples(id_: Any, seq: int, deadline: int, kind: int,
                                         priority: bool) -> None:
    """hold_keys packs each element once and joins them, and due_key cuts the item's
    encoding from the held key: the keys stored are exactly those of packing the whole
    tuples (None and zero bytes escape alike nested)."""
    o = PRIORITY if priority else QUEUE
    item = o.new_item((seq,) if priority else (), abs(seq), id_, deadline // 2)
    hold_id = os.urandom(16) + b"\x00"
    held, due = o.hold_keys(hold_id, item, deadline, kind)
    assert (held, due) == (o.held.pack((hold_id, item, deadline, kind)),
                           o.due.pack((deadline, hold_id, item, kind)))
    assert o.due_key(held, hold_id, deadline, kind) == due


@given(st.binary(min_size=16, max_size=16), st.binary(min_size=16, max_size=20),
       st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=6, unique=True))
def test_a_span_of_a_claims_leases_is_one_range(prefix: bytes, other: bytes,
                                                indexes: List[int]) -> None:
    """Lease ids of one claim share a 16-byte prefix, then a 4-byte number;
    held_span(low, high) holds exactly the held keys whose id is from low to high
    (zero and 0xff bytes included)."""
    o = QUEUE
    item = o.new_item((), 7, None, 0)
    ids = sorted(prefix + i.to_bytes(4, "big") for i in indexes)
    low, high = ids[1], ids[-1]
    begin, end = o.held_span(low, high)
    for hold_id in ids:
        inside = begin <= o.hold_keys(hold_id, item, 10**9, 0)[0] < end
        assert inside == (low <= hold_id <= high)
    if len(other) == BATCH_ID_LEN:
        inside = begin <= o.hold_keys(other, item, 5, 0)[0] < end
        assert inside == (low <= other <= high)
    made = batch_ids(3, 123_456_789)
    assert {len(i) for i in made} == {BATCH_ID_LEN} and len({i[:16] for i in made}) == 1
    assert made == sorted(made)
    assert {claimed_at(i) for i in made} == {123_456_789}  # an id tells when it was taken
    assert claimed_at(b"L" * 16) is None  # an older id does not


def test_a_queue_floor_sorts_after_every_item() -> None:
    items = [QUEUE.new_item((), seq, b"i" * 100, 2**60) for seq in (0, 2**40, 2**2000)]
    assert all(QUEUE.item_key(i) < QUEUE.floor_key == QUEUE.items_end for i in items)
    assert PRIORITY.items_end == PRIORITY.items.range().stop


def test_clear_keeps_the_wake_key_and_receipts_only() -> None:
    kept = QUEUE.kept_by_clear()
    receipt = S["c"].pack((1, b"x"))
    inside = [k for k in (QUEUE.wake_key, receipt) if any(b <= k < e for b, e in kept)]
    assert inside == [QUEUE.wake_key, receipt]
    others = [QUEUE.taken, QUEUE.floor_key, QUEUE.item_key(QUEUE.new_item((), 1, None, 0))]
    assert not [k for k in others if any(b <= k < e for b, e in kept)]


def test_lease_tokens_name_the_lease_not_its_deadline() -> None:
    token = token_of(b"L" * 16)
    lease = Lease(b"v", 1, 1234, token)
    assert lease_id(lease) == b"L" * 16 == lease_id(token)
    assert lease == Lease(b"other", 2, 99, token) and hash(lease) == hash(token)
    with pytest.raises(TypeError, match="^lease"):
        lease_id("token")
    with pytest.raises(ValueError, match="^lease"):
        lease_id(b"\x99garbage")
    with pytest.raises(ValueError, match="^leases.3."):
        lease_id(fdb.tuple.pack((b"L", (3, b"r"), 5)), "leases[3]")


@given(st.binary(min_size=1, max_size=40), st.sampled_from(sorted(RecordLayout.PARTS)),
       st.sampled_from([(), ("group",), (7,)]))
def test_record_keys_are_the_tuple_encoding(id_: bytes, part: str, where: Tuple[Any, ...]) -> None:
    """A record's key, built by concatenating encodings, is ``jobs.pack((id, part))``,
    so a range read of ``jobs.range((id,))`` finds every part of one record."""
    queue = S["q"][where] if where else S
    keys = RecordLayout(queue, S["o"], where)
    assert keys.key(id_, part) == queue["j"].pack((id_, part))
    assert queue["j"].range((id_,)).start < keys.key(id_, part) < queue["j"].range((id_,)).stop
    assert keys.chunk(id_, 3) == queue["j"].pack((id_, "r", 3))
    assert keys.entry(id_) == fdb.tuple.pack((*where, id_))
    assert packed_bytes(id_) == fdb.tuple.pack((id_,))


def test_shards_live_under_the_marker_shard_0_is_the_structure() -> None:
    assert shard_space(S, 0) is S
    shard = shard_space(S, 3)
    assert shard.key() == S.pack(("l", 3)) and Marker.key(S) == S.pack(("l",))
    assert Marker.key(S) < shard.key() < S.range(("m",)).start  # after the marker
    marker = Marker(SHARDED, "queue", 4)
    assert Marker.unpack(marker.pack()) == marker == (2, "queue", 4)
    assert Marker.unpack(fdb.tuple.pack((3, "queue", 4, "later"))) == (3, "", 0)
    # each shard has its pause flag, read with its own deadlines (pausing writes all)
    assert OrderedLayout(shard, 0).paused == shard.pack(("d",)) != QUEUE.paused
    assert OrderedLayout(shard, 0).pushed == shard.pack(("n", "pushed"))


def test_a_sharded_lease_id_names_its_shard() -> None:
    for shard in (0, 1, 63):
        ids = batch_ids(3, 12345, shard)
        assert [lease_shard(i) for i in ids] == [shard] * 3
        assert [claimed_at(i) for i in ids] == [12345] * 3 and len(ids[0]) == BATCH_ID_LEN
    assert len({i[:16] for i in batch_ids(2, 1)}) == 1  # one claim: one range of ids


def test_clear_keeps_a_sharded_structure_s_marker_and_wake_keys() -> None:
    wakes = [OrderedLayout(shard_space(S, k), 0).wake_key for k in range(3)]
    kept = kept_by_clear(S, Marker.key(S), *wakes)
    assert len(kept) == 5 and kept == sorted(kept)
    for key in (Marker.key(S), *wakes):
        assert any(b <= key < e for b, e in kept)


@given(st.one_of(st.none(), st.just(True), st.binary(max_size=30)),
       st.integers(0, 2**64 + 5), st.binary(max_size=24), st.integers(0, 2**64 + 5),
       st.integers(0, 2**70), priorities, st.booleans())
def test_item_keys_are_the_packed_tuples(id_: Any, seq: int, random: bytes,
                                         deliveries: int, since: int, priority: int,
                                         grouped: bool) -> None:
    """item_key writes out the ints, bytes and None of an item itself: the key is
    exactly that of packing the tuple (zero bytes escaped, ints of 0 to 8 bytes and
    beyond), and seq_of reads the sequence number back from it."""
    o = PRIORITY if grouped else QUEUE
    item = ((priority,) if grouped else ()) + (seq, random, deliveries, id_, since)
    key = o.item_key(item)
    assert key == o.items.pack(item)
    assert o.seq_of(key) == seq
    assert o.item_key(item[:-1]) == o.items.pack(item[:-1])  # not an item's shape
