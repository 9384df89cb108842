"""The engine behind WeightTree: a fixed-fanout sum tree over sequence numbers.

Following the ``pi_weight`` crate: every node keeps its subtree's weight sum, and a
pick skips whole subtrees whose sum is below the remaining point, so it costs
O(log n).  The keys are those of :class:`._layout.TreeLayout`.  Sums are maintained
with atomic ADD (conflict-free) and removed with atomic compare-and-clear when they
reach zero.  A pick reads the nodes with snapshot reads (hints, no conflicts) and
takes a read conflict only on the item it chose: two picks of the same item
conflict, picks of different items and pushes do not.

Every method here runs inside one transaction; :mod:`.._retry` decides which.
"""

from __future__ import annotations

import random
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import fdb.tuple

from .._attempt import Attempt
from .._clock import Clock
from .._fdb import (
    Gen,
    Range,
    Spans,
    Tally,
    clear_structure,
    le64,
    read,
    read_le64,
    snap,
    sum_le64,
    unpack_le64,
)
from .._ids import Ids
from .._layout import TreeLayout
from .._values import Value, decode_value, random_suffix, unpack_token
from .._waiting import Readiness
from ..errors import FdbRecipesError

#: Largest weight of one item.
MAX_WEIGHT = 2**32
#: The tree refuses pushes that would take the total weight past this.
MAX_TOTAL_WEIGHT = 2**62

BITS = 6  # fanout 64: a node sums up to 64 children
FANOUT = 1 << BITS
LEVELS = 5  # stored node levels 1..5: one level-5 node covers 2**30 sequence numbers
#: Node keys a tree object keeps packed (see :meth:`Tree.node`).
NODE_KEYS = 4096

Key = Tuple[int, bytes]  # (seq, random): names an item


class TreeRequest(NamedTuple):
    """One push call's items: ``(encoded value, weight)`` pairs, and its id (None:
    none)."""

    batch: Sequence[Tuple[bytes, int]]
    id: Optional[bytes]


#: What a push request came to: its handles, or the error that refused it.
Pushed = Union[List[bytes], ValueError]


# -- handles and leaves ----------------------------------------------------------------


def parse_handle(handle: Any) -> Key:
    """The item key a handle names.

    Raises:
        TypeError or ValueError: ``handle`` is not a handle made by ``push``.
    """
    key = unpack_token(handle, "handle", "bytes (from push)")
    if (
        key is None
        or len(key) != 2
        or type(key[0]) is not int
        or key[0] < 0
        or type(key[1]) is not bytes
        or len(key[1]) != 20
    ):
        raise ValueError("handle is not a handle returned by WeightTree.push")
    return key[0], key[1]


def make_handle(key: Key) -> bytes:
    """The handle naming item ``key``."""
    handle: bytes = fdb.tuple.pack(key)
    return handle


def check_total(total: int, delta: int) -> None:
    """Refuse a change of ``delta`` to a total weight of ``total`` past
    :data:`MAX_TOTAL_WEIGHT`."""
    if total + delta > MAX_TOTAL_WEIGHT:
        raise ValueError(f"weight: the total weight would pass 2**62 ({total} + {delta})")


def split_leaf(leaf: bytes) -> Tuple[int, Optional[bytes]]:
    """A leaf's value is the weight (int64) followed by the item's id, if any."""
    return read_le64(leaf[:8]), (leaf[8:] or None)


# -- the arithmetic of a pick (pure) ---------------------------------------------------


def node_index(level: int, seq: int) -> int:
    """Index of the level-``level`` node covering sequence number ``seq``."""
    return seq >> (BITS * level)


def _same(_level: int, name: Any) -> Any:
    return name


def descend(
    children: Callable[[int, Optional[int]], Gen[Iterable[Tuple[Any, int]]]],
    point: int,
    top: int,
    index: Callable[[int, Any], Any] = _same,
) -> Gen[Tuple[Any, int]]:
    """Walk from level ``top`` to the leaf whose interval contains ``point``.

    ``children(level, parent)`` (an operation: it may read) gives ``(name, weight
    sum)`` for the children at ``level`` of node ``parent`` (parent None: every node of
    that level; level 0 holds the leaves), in key order; ``index(level, name)`` turns
    the chosen child's name into its node index (by default the name is the index),
    so only the chosen child's name is ever decoded.  The walk starts among every
    node of level ``top``; each step skips whole children whose sum is below the
    remaining point.  Returns the leaf's name and the point's offset inside its
    interval.

    Raises:
        FdbRecipesError: the sums do not add up (never happens to a tree kept by
            this module, whose sums change only in the transactions that change items).
    """
    level, parent = top, None
    while True:
        chosen: Optional[Tuple[Any, int]] = None
        for child in (yield from children(level, parent)):
            if point < child[1]:
                chosen = child
                break
            point -= child[1]
        if chosen is None:
            raise FdbRecipesError("weight tree sums disagree with its items")
        if level == 0:
            return chosen[0], point
        level, parent = level - 1, index(level, chosen[0])


def top_level(sizes: Callable[[int], Gen[int]], start: int = 0) -> Gen[int]:
    """The level a pick starts at: the lowest from ``start`` up whose nodes (leaves at
    level 0) number at most :data:`FANOUT` (``sizes(level)``, an operation: how many,
    counted up to ``FANOUT + 1``), or :data:`LEVELS` if none does (its nodes are all
    read)."""
    level = start
    while level < LEVELS and (yield from sizes(level)) > FANOUT:
        level += 1
    return level


# -- the engine --------------------------------------------------------------------------

#: Picks one call given a Transaction makes at most; given a Database, picks per
#: transaction (each pick is a few round trips: all must fit in 5 seconds).
MAX_PICKS = 1_000
PICK_BATCH = 100


class View:
    """What one operation has read of the tree (snapshot reads, hints without
    conflicts), with the operation's own removals applied, so that several picks in
    one transaction read each range of sums at most once.  The sums are read as
    :class:`.._fdb.Spans`: only the chosen child's key is ever copied out.

    A pick starts among every node of the lowest level that has at most
    :data:`FANOUT` of them (see :func:`top_level`): their sums add up to the total,
    so neither the total nor the last sequence number is read.  That level is read
    whole, :data:`FANOUT` + 1 keys at most; the tree remembers it for the next
    operation, and when it has grown past it the levels above are read in parallel.
    Made by :meth:`read`.
    """

    __slots__ = ("_levels", "adjust", "cache", "top", "total", "tr", "tree", "walked")

    def __init__(self, tree: Tree, tr: Any) -> None:
        self.tree = tree
        self.tr = tr
        #: (level, parent) -> the children read (in key order); parent None: every
        #: node of the level.
        self.cache: Dict[Tuple[int, Optional[int]], Spans] = {}
        #: key -> change of its weight by this operation's removals.
        self.adjust: Dict[bytes, int] = {}
        #: The children :meth:`children` gave last: a walk's names are positions in it.
        self.walked = Spans(None)
        hint = tree.level_hint
        levels = range(0, LEVELS + 1) if hint is None else (hint,)
        #: level -> the read of every node of it, started (see :meth:`_size`).
        self._levels: Dict[int, Range] = {level: self._start(level, None)[1]
                                          for level in levels}
        self.top = 0
        self.total = 0

    @classmethod
    def read(cls, tree: Tree, tr: Any) -> Gen[View]:
        """A view of the tree in ``tr``: its top level found, its total known."""
        view = cls(tree, tr)
        hint = tree.level_hint
        view.top = yield from top_level(view._size, 0 if hint is None else hint)
        if (view.top, None) not in view.cache:  # the top level: never counted
            yield from view._size(view.top)
        nodes = view.cache[(view.top, None)]
        view.total = sum_le64(nodes.values)  # a leaf's first 8 bytes
        # One node (or none) at this level: the next operation can start lower.
        tree.level_hint = view.top - 1 if len(nodes) <= 1 and view.top else view.top
        return view

    def _size(self, level: int) -> Gen[int]:
        """How many nodes level ``level`` has, up to ``FANOUT + 1`` (reads the level,
        in parallel with every level above it if it was not started)."""
        if level not in self._levels:
            for above in range(level, LEVELS + 1):
                self._levels[above] = self._start(above, None)[1]
        nodes = self.cache[(level, None)] = yield from self._levels[level].spans()
        return len(nodes)

    def _start(self, level: int, parent: Optional[int]) -> Tuple[Any, Range]:
        if parent is None:  # every node of the level: FANOUT + 1 at most, but the top
            begin, end = self.tree.level_ranges[level]
            limit = 0 if level == LEVELS else FANOUT + 1
        else:
            begin, end = self.tree.children_range(level, parent)
            limit = 0
        return (level, parent), Range(snap(self.tr), begin, end, limit)

    def children(self, level: int, parent: Optional[int]
                 ) -> Gen[Iterator[Tuple[int, int]]]:
        """``(position, weight)`` of each child, for :func:`descend` (a position in
        :attr:`walked`, which this sets), this operation's removals applied."""
        spans = self.cache.get((level, parent))
        if spans is None:
            where, started = self._start(level, parent)
            spans = self.cache[where] = yield from started.spans()
        self.walked = spans
        unpack = unpack_le64
        # (read_le64's decoding, without a call per child)
        weights = [unpack(v)[0] if len(v) >= 8 else read_le64(v) for v in spans.values]
        if self.adjust:
            adjust, key = self.adjust, spans.key
            weights = [w + adjust.get(key(i), 0) for i, w in enumerate(weights)]
        return enumerate(weights)

    def index(self, level: int, position: int) -> int:
        """The node index the chosen child stands for."""
        index: int = self.tree.keys.nodes.unpack(self.walked.key(position))[1]
        return index

    def pick(self, point: int) -> Gen[Tuple[Key, bytes]]:
        """(key, leaf value) of the item whose interval contains ``point``."""
        position, _ = yield from descend(self.children, point, self.top, self.index)
        leaves = self.walked
        seq, suffix = self.tree.keys.leaves.unpack(leaves.key(position))
        return (seq, suffix), leaves.values[position]

    def removed(self, key: Key, weight: int) -> None:
        """Apply the removal of item ``key`` (of ``weight``) to what was read."""
        self.total -= weight
        leaf = bytes(self.tree.keys.leaves.pack(key))
        for node in [leaf] + [self.tree.node(level, key[0]) for level in range(1, LEVELS + 1)]:
            self.adjust[node] = self.adjust.get(node, 0) - weight


class Tree:
    """A weight tree's transactional operations (see the module docstring)."""

    __slots__ = ("clock", "ids", "keys", "level_hint", "level_ranges", "node_keys", "rng")

    def __init__(self, layout: TreeLayout, rng: random.Random, clock: Clock,
                 ids: Ids) -> None:
        self.keys = layout
        self.rng = rng
        self.clock = clock
        self.ids = ids
        #: The level the last operation's picks started at (see :class:`View`):
        #: where the next one looks first.  None: look at every level at once.
        self.level_hint: Optional[int] = None
        #: The key range of each level (0: the leaves), packed once.
        self.level_ranges: List[Tuple[bytes, bytes]] = [
            (bytes(r.start), bytes(r.stop))
            for r in (self.level_space(level).range() for level in range(LEVELS + 1))]
        #: Node keys packed so far, by (level, index): every pop changes the same few
        #: nodes near the top (at most :data:`NODE_KEYS` kept).
        self.node_keys: Dict[Tuple[int, int], bytes] = {}

    def level_space(self, level: int) -> Any:
        """The subspace of the nodes of ``level`` (0: the leaves)."""
        return self.keys.leaves if level == 0 else self.keys.nodes.subspace((level,))

    def node(self, level: int, seq: int) -> bytes:
        """Key of the level-``level`` node covering sequence number ``seq``."""
        where = (level, node_index(level, seq))
        key = self.node_keys.get(where)
        if key is None:
            if len(self.node_keys) >= NODE_KEYS:
                self.node_keys.clear()
            key = self.node_keys[where] = bytes(self.keys.nodes.pack(where))
        return key

    def head(self, tr: Any) -> Gen[Tuple[int, int]]:
        """(total weight, largest sequence number or -1), by snapshot, in parallel."""
        total = snap(tr).get(self.keys.total_key)
        r = self.keys.leaves.range()
        last = yield from Range(snap(tr), r.start, r.stop, 1, reverse=True).first()
        max_seq = -1 if last is None else int(self.keys.leaves.unpack(last.key)[0])
        return read_le64((yield from read(total))), max_seq

    def children_range(self, level: int, parent: int) -> Tuple[bytes, bytes]:
        """Key range of the children of node ``parent`` one level above ``level``."""
        lo, hi = parent * FANOUT, (parent + 1) * FANOUT
        space = self.level_space(level)
        return bytes(space.pack((lo,))), bytes(space.pack((hi,)))

    def adjust(self, seq: int, delta: int, tally: Tally) -> None:
        """Add ``delta`` to every node above item ``seq`` and to the total."""
        for level in range(1, LEVELS + 1):
            tally.add_sum(self.node(level, seq), delta)
        tally.add_sum(self.keys.total_key, delta)

    def pick(self, tr: Any, view: View, point: Optional[int]
             ) -> Gen[Optional[Tuple[Key, bytes, bytes]]]:
        """(key, leaf, encoded value) of the item for ``point``, or None when empty.

        The sums are snapshot reads; the chosen value is a normal read: the pick's
        only read conflict.

        Raises:
            ValueError: ``point`` is not below the total weight.
            FdbRecipesError: the chosen item is gone from this transaction's own view
                (the transaction disabled snapshot read-your-writes, which the tree
                needs), or the sums disagree with the items.
        """
        if point is None:
            if view.total <= 0:
                return None
            point = self.rng.randrange(view.total)
        elif point >= view.total:
            raise ValueError(f"point must be < the total weight {view.total}, got {point}")
        key, leaf = yield from view.pick(point)
        encoded = yield from read(tr.get(self.keys.values.pack(key)))
        if encoded is None:
            raise FdbRecipesError(
                "weight tree: the chosen item is gone from this transaction's own view; "
                "the tree needs snapshot reads that see the transaction's writes (do "
                "not set snapshot_ryw_disable on transactions given to it)")
        return key, leaf, encoded

    def unlink(self, tr: Any, key: Key, leaf: bytes, now: int, tally: Tally) -> int:
        """Remove an item whose leaf was read in this transaction; its weight."""
        weight, id_ = split_leaf(leaf)
        leaf_key = self.keys.leaves.pack(key)
        tr.add_read_conflict_key(leaf_key)
        tr.clear(leaf_key)
        tr.clear(self.keys.values.pack(key))
        self.adjust(key[0], -weight, tally)
        tally.add(self.keys.taken)
        self.ids.retire(tr, id_, now, make_handle(key))
        return weight

    def relink(self, tr: Any, attempt: Attempt, items: List[Tuple[Key, bytes, bytes]],
               unlinked_at: int) -> Gen[None]:
        """Give removed items back, each under its old key with its weight and id (the
        undo of a pop whose caller was cancelled)."""
        yield from ()  # an operation (a generator), though it waits for nothing
        tally = Tally()
        for key, leaf, encoded in items:
            weight, id_ = split_leaf(leaf)
            tr.set(self.keys.leaves.pack(key), leaf)
            tr.set(self.keys.values.pack(key), encoded)
            self.adjust(key[0], weight, tally)
            tally.add(self.keys.pushed)
            self.ids.unretire(tr, id_, unlinked_at, make_handle(key))
        tally.write(tr, attempt)

    # -- operations -------------------------------------------------------------------

    def push(self, tr: Any, attempt: Attempt,
             requests: Sequence[TreeRequest]) -> Gen[List[Pushed]]:
        """Store each request's ``(encoded value, weight)`` pairs after the last item;
        for each request, its handles, or (its id remembered) the first push's
        handle, or the ValueError that refused it (the total weight would pass
        :data:`MAX_TOTAL_WEIGHT`; nothing of it written).  The reads of every
        request go out together."""
        checks = self.ids.check(tr, (r.id for r in requests))
        total, max_seq = yield from self.head(tr)
        now = yield from attempt.now(tr, self.clock)
        tally = Tally()
        out: List[Pushed] = []
        seq = max_seq + 1
        for r in requests:
            if checks is not None and r.id is not None:
                known = yield from self.ids.known(checks, r.id, now)
                if known is not None:
                    out.append([known])
                    continue
            weight = sum(w for _, w in r.batch)
            try:
                check_total(total, weight)
            except ValueError as e:
                out.append(e)
                continue
            total += weight
            handles = []
            for encoded, w in r.batch:
                key = (seq, random_suffix())
                tr.set(self.keys.leaves.pack(key), le64(w) + (r.id or b""))
                tr.set(self.keys.values.pack(key), encoded)
                self.adjust(seq, w, tally)
                handles.append(make_handle(key))
                seq += 1
            tally.add(self.keys.pushed, len(r.batch))
            if checks is not None and r.id is not None:
                yield from self.ids.remember(tr, checks, r.id, handles[0])
            out.append(handles)
        if checks is not None:
            yield from self.ids.collect(tr, checks, now)
        tally.write(tr, attempt)
        attempt.idle = seq == max_seq + 1
        return out

    def pop(self, tr: Any, attempt: Attempt, point: Optional[int]) -> Gen[Optional[Value]]:
        """Remove the item ``point`` picks (a random one when None)."""
        taken = yield from self.take(tr, attempt, 1, point)
        return taken[0] if taken else None

    def pop_many(self, tr: Any, attempt: Attempt, n: int) -> Gen[List[Value]]:
        """Remove up to ``n`` random picks, one after the other (without replacement)."""
        return (yield from self.take(tr, attempt, n, None))

    def take(self, tr: Any, attempt: Attempt, n: int,
             point: Optional[int]) -> Gen[List[Value]]:
        """Remove up to ``n`` picks (the first at ``point``, if given)."""
        view = yield from View.read(self, tr)
        now = yield from attempt.now(tr, self.clock)
        tally = Tally()
        picks = []
        for _ in range(n):
            picked = yield from self.pick(tr, view, point)
            if picked is None:
                break
            key, leaf, _ = picked
            weight = self.unlink(tr, key, leaf, now, tally)
            picks.append(picked)
            if len(picks) < n:  # a pick follows: it must see this removal
                view.removed(key, weight)
        tally.write(tr, attempt)
        attempt.idle = not picks
        if picks:
            attempt.undo = (self.relink, (picks, now))
        return [decode_value(encoded) for _, _, encoded in picks]

    def peek(self, tr: Any, point: Optional[int]) -> Gen[Optional[Value]]:
        """The value ``pop`` with ``point`` would remove."""
        view = yield from View.read(self, tr)
        picked = yield from self.pick(tr, view, point)
        return None if picked is None else decode_value(picked[2])

    def read_item(self, tr: Any, key: Key) -> Gen[Optional[Tuple[bytes, bytes]]]:
        """(leaf, encoded value) of item ``key``, read in parallel (read conflicts on
        both), or None if it is gone."""
        leaf_f, value_f = tr.get(self.keys.leaves.pack(key)), tr.get(self.keys.values.pack(key))
        leaf, encoded = (yield from read(leaf_f)), (yield from read(value_f))
        return None if leaf is None or encoded is None else (leaf, encoded)

    def get(self, tr: Any, key: Key) -> Gen[Optional[Tuple[Value, int]]]:
        """(value, weight) of item ``key``, or None."""
        found = yield from self.read_item(tr, key)
        if found is None:
            return None
        leaf, encoded = found
        return decode_value(encoded), split_leaf(leaf)[0]

    def remove(self, tr: Any, attempt: Attempt, key: Key) -> Gen[Optional[Value]]:
        """Remove item ``key``; its value, or None if it is gone."""
        found = yield from self.read_item(tr, key)
        if found is None:
            attempt.idle = True
            return None
        leaf, encoded = found
        tally = Tally()
        self.unlink(tr, key, leaf, (yield from attempt.now(tr, self.clock)), tally)
        tally.write(tr, attempt)
        return decode_value(encoded)

    def set_weight(self, tr: Any, attempt: Attempt, key: Key,
                   weight: int) -> Gen[Optional[int]]:
        """Give item ``key`` a new weight; the old one, or None if it is gone."""
        leaf_key = self.keys.leaves.pack(key)
        leaf_f, total_f = tr.get(leaf_key), tr.snapshot.get(self.keys.total_key)
        leaf = yield from read(leaf_f)
        if leaf is None:
            attempt.idle = True
            return None
        old, id_ = split_leaf(leaf)
        delta = weight - old
        check_total(read_le64((yield from read(total_f))), delta)
        tr.set(leaf_key, le64(weight) + (id_ or b""))
        tally = Tally()
        self.adjust(key[0], delta, tally)
        tally.write(tr, attempt)
        return old

    def counter(self, tr: Any, key: bytes) -> Gen[int]:
        """One counter's value (read conflict on it)."""
        return read_le64((yield from read(tr.get(key))))

    def clear(self, tr: Any, _attempt: Attempt) -> Gen[None]:
        """Remove every key of the tree except the wake counter "pushed" (touched,
        and "taken" set to match it, so the size is 0: see ``Ordered.clear``) and the
        receipt slots.  Reads "pushed"."""
        yield from clear_structure(tr, self.keys.subspace, self.keys.kept_by_clear(),
                                   [(self.keys.pushed, self.keys.taken)])

    def size(self, tr: Any) -> Gen[int]:
        """Items in the tree: "pushed" - "taken" (read conflicts on both)."""
        pushed, taken = tr.get(self.keys.pushed), tr.get(self.keys.taken)
        return read_le64((yield from read(pushed))) - read_le64((yield from read(taken)))

    def items(self, tr: Any, limit: Optional[int],
              after: Optional[Tuple[bytes, Value, int]] = None
              ) -> Gen[List[Tuple[bytes, Value, int]]]:
        """(handle, value, weight) of the first ``limit`` items (all when None), after
        the item ``after`` (a row of an earlier page) when given."""
        lr, vr = self.keys.leaves.range(), self.keys.values.range()
        lb, vb = lr.start, vr.start
        if after is not None:
            key = parse_handle(after[0])
            lb = self.keys.leaves.pack(key) + b"\x00"
            vb = self.keys.values.pack(key) + b"\x00"
        leaves = Range(tr, lb, lr.stop, limit or 0)
        values = Range(tr, vb, vr.stop, limit or 0)
        out = []
        for leaf, value in zip((yield from leaves.read()), (yield from values.read())):
            key = self.keys.leaves.unpack(leaf.key)
            if key != self.keys.values.unpack(value.key):
                raise FdbRecipesError("weight tree leaves and values disagree")
            out.append((make_handle(key), decode_value(value.value), split_leaf(leaf.value)[0]))
        return out

    def ready(self, tr: Any) -> Gen[Readiness]:
        """Whether the tree holds an item (no expiry makes one appear)."""
        return (yield from self.size(tr)) > 0, None
