"""A weighted random pool on FoundationDB: pick items with probability weight/total.

Following the ``pi_weight`` crate: every node keeps its subtree's weight sum, and a
pick skips whole subtrees whose sum is below the remaining point, so it costs
O(log n).  On FoundationDB the tree is a fixed-fanout sum tree over sequence numbers
(see docs/design for the picture)::

    S/"w"/(seq, random)  = int64 weight [+ id]   one per item: the leaves
    S/"v"/(seq, random)  = value                 the item's value
    S/"s"/(level, index) = int64 sum             node ``index`` at ``level`` covers
                                                 seq in [index*64**level, (index+1)*64**level)
    S/"t" = int64 total weight, S/"n" = int64 item count, S/"z" = wake counter
    S/"k"/(id,), S/"g"/(expiry, id)              idempotency ids
    S/"c"/(version, call id) = int               commit receipts (see _core.Receipts)

Sums are maintained with atomic ADD (conflict-free) and removed with atomic
compare-and-clear when they reach zero.  A pick reads the nodes with snapshot reads
(hints, no conflicts) and takes a read conflict only on the item it chose: two picks
of the same item conflict, picks of different items and pushes do not.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import fdb.tuple

from ._core import (
    MUTATION_OVERHEAD,
    WANT_ALL,
    Attempt,
    Clock,
    FdbRecipesError,
    Ids,
    Transactor,
    Value,
    Writes,
    add,
    check_batch_bytes,
    check_database,
    check_id,
    check_int,
    check_retention,
    check_subspace,
    check_timeout,
    check_transactor,
    database_clock,
    decode_value,
    encode_value,
    first,
    get_value,
    le64,
    materialize,
    random_suffix,
    read_le64,
    run,
    snap,
    wait_for_wake,
)

__all__ = ["MAX_TOTAL_WEIGHT", "MAX_WEIGHT", "WeightTree"]

#: Largest weight of one item.
MAX_WEIGHT = 2**32
#: The tree refuses pushes that would take the total weight past this.
MAX_TOTAL_WEIGHT = 2**62

BITS = 6  # fanout 64: a node sums up to 64 children
FANOUT = 1 << BITS
LEVELS = 5  # stored node levels 1..5: one level-5 node covers 2**30 sequence numbers

Key = Tuple[int, bytes]  # (seq, random): names an item


def _check_weight(weight: Any, name: str = "weight") -> int:
    return check_int(weight, name, low=1, high=MAX_WEIGHT)


def _check_handle(handle: Any) -> Key:
    if type(handle) is not bytes:
        raise TypeError(f"handle must be bytes (from push), not {type(handle).__name__}")
    try:
        key = fdb.tuple.unpack(handle)
    except Exception:
        key = None
    if (
        type(key) is not tuple
        or len(key) != 2
        or type(key[0]) is not int
        or key[0] < 0
        or type(key[1]) is not bytes
        or len(key[1]) != 20
    ):
        raise ValueError("handle is not a handle returned by WeightTree.push")
    return key[0], key[1]


def _handle(key: Key) -> bytes:
    handle: bytes = fdb.tuple.pack(key)
    return handle


def _split(leaf: bytes) -> Tuple[int, Optional[bytes]]:
    """A leaf's value is the weight (int64) followed by the item's id, if any."""
    return read_le64(leaf[:8]), (leaf[8:] or None)


def node_index(level: int, seq: int) -> int:
    """Index of the level-``level`` node covering sequence number ``seq``."""
    return seq >> (BITS * level)


def start_level(max_seq: int) -> int:
    """The lowest level whose node 0 covers every sequence number up to ``max_seq``.

    A pick starts by reading that node's children (its sum is the total), so a small
    tree is shallow: 2 levels below 4,096 sequence numbers, 4 below 16.7 million.
    Returns ``LEVELS + 1`` when even the top level needs several nodes.
    """
    level = 1
    while level <= LEVELS and node_index(level, max(max_seq, 0)):
        level += 1
    return level


def descend(
    children: Callable[[int, Optional[int]], Iterable[Tuple[Any, int]]],
    point: int,
    max_seq: int,
) -> Tuple[Any, int]:
    """Walk from the top to the leaf whose interval contains ``point``.

    ``children(level, parent)`` yields ``(name, weight sum)`` for the children at
    ``level`` of node ``parent`` (parent None: every node of that level), in key
    order; names are node indexes above level 0 and leaf names at level 0.  Each
    step skips whole children whose sum is below the remaining point.  Returns the
    leaf's name and the point's offset inside its interval.

    Raises:
        FdbRecipesError: the sums do not add up (never happens to a tree kept by
            this module, whose sums change only in the transactions that change items).
    """
    top = start_level(max_seq)
    level, parent = (LEVELS, None) if top > LEVELS else (top - 1, 0)
    while True:
        chosen: Optional[Tuple[Any, int]] = None
        for child in children(level, parent):
            if point < child[1]:
                chosen = child
                break
            point -= child[1]
        if chosen is None:
            raise FdbRecipesError("weight tree sums disagree with its items")
        if level == 0:
            return chosen[0], point
        level, parent = level - 1, chosen[0]


class WeightTree:
    """A transactional pool of weighted items; a pop removes one with probability
    weight / total weight.

    Every method takes ``tr`` first: an ``fdb.Transaction`` (part of the caller's
    transaction) or an ``fdb.Database``/``fdb.Tenant`` (own retry loop).

    Given a Database, a method that writes also writes a commit receipt (one small
    key in the subspace, cleared by a later call), which lets its retry loop settle
    ``commit_unknown_result`` exactly: the docstrings below leave it out.

    Points: the items, in :meth:`items` order, split [0, total) into contiguous
    intervals whose lengths are their weights; ``pop(tr, point=p)`` removes the item
    whose interval contains ``p``.  The pick is a pure function of the tree's contents
    at the transaction's read version and the point.

    Args:
        subspace: where the tree keeps its keys (any ``fdb.Subspace``).
        rng: where pops without a point draw it; default ``random.SystemRandom()``.
            Pass ``random.Random(seed)`` for reproducible runs.
        id_retention: seconds an idempotency id is remembered after its item left.
        clock: where id retention reads the time (default: the read version).
    """

    def __init__(
        self,
        subspace: Any,
        *,
        rng: Optional[random.Random] = None,
        id_retention: float = 3600.0,
        clock: Optional[Clock] = None,
    ) -> None:
        self.subspace = check_subspace(subspace)
        if rng is not None and not isinstance(rng, random.Random):
            raise TypeError(f"rng must be a random.Random, not {type(rng).__name__}")
        if clock is not None and not callable(clock):
            raise TypeError("clock must be a callable taking a transaction")
        self._rng = rng if rng is not None else random.SystemRandom()
        self._clock: Clock = clock if clock is not None else database_clock
        self._ids = Ids(self.subspace, check_retention(id_retention))
        self._leaves = self.subspace["w"]
        self._values = self.subspace["v"]
        self._nodes = self.subspace["s"]
        self._total_key = bytes(self.subspace.pack(("t",)))
        self._count_key = bytes(self.subspace.pack(("n",)))
        self._wake_key = bytes(self.subspace.pack(("z",)))
        self._write = Writes(self.subspace)
        self.stats = self._write.stats

    def __repr__(self) -> str:
        return f"WeightTree({self.subspace!r})"

    # -- public API ------------------------------------------------------------------------

    def push(
        self, tr: Transactor, value: Value, weight: int, *, id: Optional[bytes] = None
    ) -> bytes:
        """Add ``value`` with ``weight``; return a handle (bytes) naming the item.

        With ``id``, pushing again with the same id stores nothing and returns the
        first push's handle (safe to retry after ``commit_unknown_result``).

        Reads (snapshot, no conflicts) the total weight and the last sequence number;
        with ``id`` also the id's key.  Writes the leaf, the value, one atomic add per
        tree level (5), the total, the count.  Conflicts with: nothing, except a
        concurrent push of the same ``id``.  Cost: 1 round trip, O(log n) writes.

        Raises:
            TypeError/ValueError: bad value (as for Queue), weight not an int in
                [1, 2**32], bad id, or the total weight would pass 2**62.
        """
        encoded = encode_value(value)
        weight = _check_weight(weight)
        id_ = check_id(id)
        return self._write(tr, lambda t, a: self._push(t, a, [(encoded, weight)], id_)[0])

    def push_many(self, tr: Transactor, items: Iterable[Tuple[Value, int]]) -> List[bytes]:
        """Add every ``(value, weight)`` pair in one transaction; return their handles.

        The batch is checked whole before anything is written.  Cost: 1 round trip;
        writes O(k log n) keys for k items (fewer when they share tree nodes).

        Raises:
            TypeError/ValueError: any pair is invalid (the message names its index), or
                the batch would exceed FoundationDB's 10 MB transaction limit.
        """
        batch = []
        for i, pair in enumerate(materialize(items, "items")):
            if type(pair) is not tuple or len(pair) != 2:
                raise TypeError(f"items[{i}] must be a (value, weight) tuple")
            batch.append((encode_value(pair[0], f"items[{i}] value"),
                          _check_weight(pair[1], f"items[{i}] weight")))
        total = sum(len(v) + 2 * (60 + MUTATION_OVERHEAD) + LEVELS * 40 for v, _ in batch)
        check_batch_bytes(total, len(batch), "items")
        if not batch:
            check_transactor(tr)
            return []
        return self._write(tr, lambda t, a: self._push(t, a, batch, None))

    def pop(self, tr: Transactor, point: Optional[int] = None) -> Optional[Value]:
        """Remove an item, chosen with probability weight / total; None when empty.

        With ``point`` (0 <= point < total weight), remove the item whose interval
        contains it; without, draw the point from the tree's ``rng``.

        Reads the total and the tree's nodes with snapshot reads (one range read of at
        most 64 sums per level), then the chosen item with a normal read: the only
        read conflict is on the chosen item, so two pops conflict only when they pick
        the same item.  Writes: clears the item, one atomic add (and compare-and-clear)
        per level.  Cost: O(log n) round trips: 3 + log64(max sequence number),
        i.e. 4 at a thousand items, 6 at a million.

        Raises:
            ValueError: ``point`` is outside [0, total weight) (nothing is written).
        """
        point = self._check_point(point)
        return self._write(tr, lambda t, a: self._pop(t, a, point))

    def pop_many(self, tr: Transactor, n: int) -> List[Value]:
        """Remove up to ``n`` items, each chosen as :meth:`pop` chooses (without
        replacement), in one transaction.  Cost: n pops' round trips.
        """
        n = check_int(n, "n", low=0)
        if n == 0:
            check_transactor(tr)
            return []
        return self._write(tr, lambda t, a: self._pop_many(t, a, n))

    def peek(self, tr: Transactor, point: Optional[int] = None) -> Optional[Value]:
        """The value :meth:`pop` with this point would remove, without removing it.

        Without a point, one is drawn at random.  Reads as pop (a read conflict on the
        chosen item's value only).  Cost: as pop, without writes.
        """
        point = self._check_point(point)
        return run(tr, lambda t, _a: self._peek(t, point), writes=False)

    def get(self, tr: Transactor, handle: bytes) -> Optional[Tuple[Value, int]]:
        """``(value, weight)`` of the item ``handle`` names, or None if it is gone.

        Reads the item's two keys (read conflicts on them).  Cost: 1 round trip.
        """
        key = _check_handle(handle)

        def body(t: Any, _a: Attempt) -> Optional[Tuple[Value, int]]:
            leaf, value = t.get(self._leaves.pack(key)), t.get(self._values.pack(key))
            leaf_bytes, encoded = get_value(leaf), get_value(value)
            if leaf_bytes is None or encoded is None:
                return None
            return decode_value(encoded), _split(leaf_bytes)[0]

        return run(tr, body, writes=False)

    def remove(self, tr: Transactor, handle: bytes) -> Optional[Value]:
        """Remove the item ``handle`` names; return its value, or None if it is gone.

        Reads the item's keys (read conflicts: conflicts with a concurrent pop,
        remove or set_weight of the same item), clears them, updates the sums.
        Cost: 1 round trip, O(log n) writes.
        """
        key = _check_handle(handle)
        return self._write(tr, lambda t, a: self._remove(t, a, key))

    def set_weight(self, tr: Transactor, handle: bytes, weight: int) -> Optional[int]:
        """Give the item ``handle`` names a new weight; return the old weight, or None
        (nothing written) if the item is gone.

        The item keeps its place (its interval moves, its neighbours' do not change
        order).  Reads the item's leaf (read conflict) and, by snapshot, the total;
        writes the leaf and one atomic add per level.  Cost: 1 round trip.

        Raises:
            TypeError/ValueError: bad weight, or the total would pass 2**62.
        """
        key = _check_handle(handle)
        weight = _check_weight(weight)
        return self._write(tr, lambda t, a: self._set_weight(t, a, key, weight))

    def total_weight(self, tr: Transactor) -> int:
        """Sum of the weights of all items.

        Reads one counter (read conflict on it: pass ``tr.snapshot`` in a transaction
        that also writes, or it conflicts with every push and pop).  Cost: 1 round trip.
        """
        return run(tr, lambda t, _a: read_le64(get_value(t.get(self._total_key))),
                   writes=False)

    def size(self, tr: Transactor) -> int:
        """Number of items.  Reads one counter, as :meth:`total_weight`."""
        return run(tr, lambda t, _a: read_le64(get_value(t.get(self._count_key))),
                   writes=False)

    def is_empty(self, tr: Transactor) -> bool:
        """True when the tree holds no item.  Reads one counter, as :meth:`size`."""
        return self.size(tr) == 0

    def clear(self, tr: Transactor) -> None:
        """Remove every item, sum and remembered id: one range clear, no reads."""

        def body(t: Any, _a: Attempt) -> None:
            r = self.subspace.range()
            t.clear_range(r.start, r.stop)

        run(tr, body, stats=self.stats)

    def items(
        self, tr: Transactor, limit: Optional[int] = None
    ) -> List[Tuple[bytes, Value, int]]:
        """``(handle, value, weight)`` for every item, in point order (up to ``limit``).

        Two range reads in parallel (read conflicts on the ranges read).  Cost: 1 round
        trip, O(n) keys.
        """
        if limit is not None:
            limit = check_int(limit, "limit", low=0)
            if limit == 0:
                check_transactor(tr, writes=False)
                return []

        def body(t: Any, _a: Attempt) -> List[Tuple[bytes, Value, int]]:
            lr, vr = self._leaves.range(), self._values.range()
            leaves = t.get_range(lr.start, lr.stop, limit=limit or 0, streaming_mode=WANT_ALL)
            values = t.get_range(vr.start, vr.stop, limit=limit or 0, streaming_mode=WANT_ALL)
            out = []
            for leaf, value in zip(list(leaves), list(values)):
                key = self._leaves.unpack(leaf.key)
                if key != self._values.unpack(value.key):
                    raise FdbRecipesError("weight tree leaves and values disagree")
                out.append((_handle(key), decode_value(value.value), _split(leaf.value)[0]))
            return out

        return run(tr, body, writes=False)

    def pop_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[Value]:
        """:meth:`pop`, waiting on a watch (touched by every push) until an item
        arrives; None if ``timeout`` seconds pass first.  Needs a Database.
        """
        timeout = check_timeout(timeout)
        check_database(db)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            value = self.pop(db)
            if value is not None or (deadline is not None and time.monotonic() >= deadline):
                return value
            wait_for_wake(
                db,
                self._wake_key,
                lambda t: (read_le64(get_value(t.get(self._count_key))) > 0, None),
                deadline,
            )

    # -- the tree ------------------------------------------------------------------------

    def _check_point(self, point: Any) -> Optional[int]:
        return None if point is None else check_int(point, "point", low=0)

    def _node(self, level: int, seq: int) -> bytes:
        """Key of the level-``level`` node covering sequence number ``seq``."""
        return bytes(self._nodes.pack((level, node_index(level, seq))))

    def _head(self, tr: Any) -> Tuple[int, int]:
        """(total weight, largest sequence number or -1), by snapshot, in parallel."""
        total = snap(tr).get(self._total_key)
        r = self._leaves.range()
        last = first(snap(tr).get_range(r.start, r.stop, limit=1, reverse=True))
        max_seq = -1 if last is None else int(self._leaves.unpack(last.key)[0])
        return read_le64(get_value(total)), max_seq

    def _children(self, level: int, parent: int) -> Tuple[bytes, bytes]:
        """Key range of the children of node ``parent`` one level above ``level``."""
        lo, hi = parent * FANOUT, (parent + 1) * FANOUT
        space = self._leaves if level == 0 else self._nodes.subspace((level,))
        return bytes(space.pack((lo,))), bytes(space.pack((hi,)))

    def _descend(self, tr: Any, point: int, max_seq: int) -> Tuple[Key, bytes]:
        """Find the item whose interval contains ``point``: (key, leaf value).

        Reads one range of at most 64 sums per level, by snapshot (see :func:`descend`).
        """
        snapshot = snap(tr)

        def children(level: int, parent: Optional[int]) -> Iterator[Tuple[Any, int]]:
            if parent is None:  # every node of the top level
                r = self._nodes.range((level,))
                begin, end = bytes(r.start), bytes(r.stop)
            else:
                begin, end = self._children(level, parent)
            for kv in snapshot.get_range(begin, end, streaming_mode=WANT_ALL):
                if level == 0:
                    seq, suffix = self._leaves.unpack(kv.key)
                    yield ((seq, suffix), bytes(kv.value)), _split(kv.value)[0]
                else:
                    yield self._nodes.unpack(kv.key)[1], read_le64(kv.value)

        (key, leaf), _ = descend(children, point, max_seq)
        return key, leaf

    def _adjust(self, tr: Any, seq: int, delta: int) -> None:
        for level in range(1, LEVELS + 1):
            add(tr, self._node(level, seq), delta)
        add(tr, self._total_key, delta)

    def _pick(self, tr: Any, point: Optional[int]) -> Optional[Tuple[Key, bytes, bytes]]:
        """(key, leaf, encoded value) of the item for ``point``, or None when empty."""
        total, max_seq = self._head(tr)
        if point is None:
            if total == 0:
                return None
            point = self._rng.randrange(total)
        elif point >= total:
            raise ValueError(f"point must be < the total weight {total}, got {point}")
        key, leaf = self._descend(tr, point, max_seq)
        encoded = get_value(tr.get(self._values.pack(key)))  # read conflict: our pick
        if encoded is None:
            raise FdbRecipesError("weight tree leaf without a value")
        return key, leaf, encoded

    def _unlink(self, tr: Any, key: Key, leaf: bytes) -> None:
        """Remove an item whose leaf was read in this transaction."""
        weight, id_ = _split(leaf)
        leaf_key = self._leaves.pack(key)
        tr.add_read_conflict_key(leaf_key)
        tr.clear(leaf_key)
        tr.clear(self._values.pack(key))
        self._adjust(tr, key[0], -weight)
        add(tr, self._count_key, -1)
        if id_ is not None:
            self._ids.retire(tr, id_, self._clock(tr))

    def _pop(self, tr: Any, attempt: Attempt, point: Optional[int]) -> Optional[Value]:
        picked = self._pick(tr, point)
        if picked is None:
            attempt.idle = True
            return None
        key, leaf, encoded = picked
        self._unlink(tr, key, leaf)
        return decode_value(encoded)

    def _pop_many(self, tr: Any, attempt: Attempt, n: int) -> List[Value]:
        taken = []
        for _ in range(n):
            picked = self._pick(tr, None)
            if picked is None:
                break
            key, leaf, encoded = picked
            self._unlink(tr, key, leaf)
            taken.append(decode_value(encoded))
        attempt.idle = not taken
        return taken

    def _peek(self, tr: Any, point: Optional[int]) -> Optional[Value]:
        picked = self._pick(tr, point)
        return None if picked is None else decode_value(picked[2])

    def _remove(self, tr: Any, attempt: Attempt, key: Key) -> Optional[Value]:
        leaf_f, value_f = tr.get(self._leaves.pack(key)), tr.get(self._values.pack(key))
        leaf, encoded = get_value(leaf_f), get_value(value_f)
        if leaf is None or encoded is None:
            attempt.idle = True
            return None
        self._unlink(tr, key, leaf)
        return decode_value(encoded)

    def _set_weight(self, tr: Any, attempt: Attempt, key: Key, weight: int) -> Optional[int]:
        leaf_key = self._leaves.pack(key)
        leaf_f, total_f = tr.get(leaf_key), tr.snapshot.get(self._total_key)
        leaf = get_value(leaf_f)
        if leaf is None:
            attempt.idle = True
            return None
        old, id_ = _split(leaf)
        delta = weight - old
        total = read_le64(get_value(total_f))
        if total + delta > MAX_TOTAL_WEIGHT:
            raise ValueError(
                f"weight: the total weight would pass 2**62 ({total} + {delta})"
            )
        tr.set(leaf_key, le64(weight) + (id_ or b""))
        self._adjust(tr, key[0], delta)
        return old

    def _push(
        self,
        tr: Any,
        attempt: Attempt,
        batch: List[Tuple[bytes, int]],
        id_: Optional[bytes],
    ) -> List[bytes]:
        if id_ is not None:
            id_key = self._ids.key(id_)
            known_f = tr.get(id_key)
            gc = self._ids.start_collect(tr)
        total, max_seq = self._head(tr)
        if id_ is not None:
            known = get_value(known_f)
            if known is not None:
                attempt.idle = True
                return [known]
            self._ids.collect(tr, gc, self._clock(tr))
        added = sum(w for _, w in batch)
        if total + added > MAX_TOTAL_WEIGHT:
            raise ValueError(
                f"weight: the total weight would pass 2**62 ({total} + {added})"
            )
        sums: Dict[bytes, int] = {}
        handles = []
        seq = max_seq + 1
        for encoded, weight in batch:
            key = (seq, random_suffix())
            tr.set(self._leaves.pack(key), le64(weight) + (id_ or b""))
            tr.set(self._values.pack(key), encoded)
            for level in range(1, LEVELS + 1):
                node = self._node(level, seq)
                sums[node] = sums.get(node, 0) + weight
            handles.append(_handle(key))
            seq += 1
        for node, delta in sums.items():
            add(tr, node, delta)
        add(tr, self._total_key, added)
        add(tr, self._count_key, len(batch))
        add(tr, self._wake_key, 1)
        if id_ is not None:
            tr.set(id_key, handles[0])
        return handles
