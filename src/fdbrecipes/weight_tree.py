"""A weighted random pool on FoundationDB: pick items with probability weight/total.

Following the ``pi_weight`` crate: every node keeps its subtree's weight sum, and a
pick skips whole subtrees whose sum is below the remaining point, so it costs
O(log n).  On FoundationDB the tree is a fixed-fanout sum tree over sequence numbers;
the keys are listed in :class:`fdbrecipes._layout.TreeLayout` and drawn in
docs/data-model.md, the engine is :mod:`fdbrecipes._tree.engine` and the checked operations
:class:`fdbrecipes._ops.tree.TreeOps`.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional, Tuple

from ._bases import TreeBase
from ._drivers.blocking import drive
from ._fdb import Transactor
from ._kinds import Kind, register
from ._layout import TREE_FOOTPRINT
from ._tree.engine import MAX_TOTAL_WEIGHT, MAX_WEIGHT
from ._values import Value

__all__ = ["MAX_TOTAL_WEIGHT", "MAX_WEIGHT", "TreeBase", "WeightTree"]


class WeightTree(TreeBase):
    """A transactional pool of weighted items; a pop removes one with probability
    weight / total weight.

    Every method takes ``tr`` first: an ``fdb.Transaction`` (part of the caller's
    transaction) or an ``fdb.Database``/``fdb.Tenant`` (own retry loop).

    Given a Database, a method that writes also writes a commit receipt (one small
    key per client thread, overwritten by its next call), which lets its retry loop settle
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
        codec: how values are stored, as for :class:`fdbrecipes.Queue`.
    """


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
            TypeError or ValueError: bad value (as for Queue), weight not an int in
                [1, 2**32], bad id, or the total weight would pass 2**62.
        """
        return drive(self._ops.push(tr, self._ops.request(value, weight, id)))[0]

    def push_many(self, tr: Transactor, items: Iterable[Tuple[Value, int]]) -> List[bytes]:
        """Add every ``(value, weight)`` pair in one transaction; return their handles.

        The batch is checked whole before anything is written.  Cost: 1 round trip;
        writes O(k log n) keys for k items (fewer when they share tree nodes).

        Raises:
            TypeError or ValueError: any pair is invalid (the message names its index), or
                the batch would exceed FoundationDB's 10 MB transaction limit.
        """
        return drive(self._ops.push(tr, self._ops.requests(items)))

    def pop(self, tr: Transactor, point: Optional[int] = None) -> Optional[Value]:
        """Remove an item, chosen with probability weight / total; None when empty.

        With ``point`` (0 <= point < total weight), remove the item whose interval
        contains it; without, draw the point from the tree's ``rng``.

        Reads the tree's nodes with snapshot reads: every node of the lowest level
        that has at most 64 (their sums add up to the total), then at most 64 sums
        per level below; then the chosen item with a normal read: the only read
        conflict is on the chosen item, so two pops conflict only when they pick the
        same item.  Writes: clears the item, one atomic add (and compare-and-clear)
        per level.  Cost: O(log n) round trips: 1 + log64(n) rounded up for n items
        pushed one after the other (more when the items left span a wider range of
        sequence numbers), i.e. 3 at a thousand items, 5 at a million; one more when
        the tree has outgrown the level this object's last pick started at.

        Raises:
            ValueError: ``point`` is outside [0, total weight) (nothing is written).
        """
        return drive(self._ops.pop(tr, point))

    def pop_many(self, tr: Transactor, n: int) -> List[Value]:
        """Remove up to ``n`` items, each chosen as :meth:`pop` chooses (without
        replacement, one after the other).

        Reads and conflicts as :meth:`pop`, each range of sums at most once per
        transaction.  Given a Database, picks at most 100 items per transaction (each
        with its own receipt), results in order; given a Transaction, at most 1,000
        (more is refused: the picks must fit in FoundationDB's 5 seconds).  Cost:
        about 2 round trips per item once the upper levels are read.

        Raises:
            TypeError or ValueError: ``n`` is not an int >= 0 (or over 1,000 given a
                Transaction).
        """
        return drive(self._ops.pop_many(tr, n))

    def peek(self, tr: Transactor, point: Optional[int] = None) -> Optional[Value]:
        """The value :meth:`pop` with this point would remove, without removing it.

        Without a point, one is drawn at random.  Reads as pop (a read conflict on the
        chosen item's value only).  Cost: as pop, without writes.
        """
        return drive(self._ops.peek(tr, point))

    def get(self, tr: Transactor, handle: bytes) -> Optional[Tuple[Value, int]]:
        """``(value, weight)`` of the item ``handle`` names, or None if it is gone.

        Reads the item's two keys (read conflicts on them).  Cost: 1 round trip.
        """
        return drive(self._ops.get(tr, handle))

    def remove(self, tr: Transactor, handle: bytes) -> Optional[Value]:
        """Remove the item ``handle`` names; return its value, or None if it is gone.

        Reads the item's keys (read conflicts: conflicts with a concurrent pop,
        remove or set_weight of the same item), clears them, updates the sums.
        Cost: 1 round trip, O(log n) writes.
        """
        return drive(self._ops.remove(tr, handle))

    def set_weight(self, tr: Transactor, handle: bytes, weight: int) -> Optional[int]:
        """Give the item ``handle`` names a new weight; return the old weight, or None
        (nothing written) if the item is gone.

        The item keeps its place (its interval moves, its neighbours' do not change
        order).  Reads the item's leaf (read conflict) and, by snapshot, the total;
        writes the leaf and one atomic add per level.  Cost: 1 round trip.

        Raises:
            TypeError or ValueError: bad weight, or the total would pass 2**62.
        """
        return drive(self._ops.set_weight(tr, handle, weight))

    def total_weight(self, tr: Transactor) -> int:
        """Sum of the weights of all items.

        Reads one counter (read conflict on it: pass ``tr.snapshot`` in a transaction
        that also writes, or it conflicts with every push and pop).  Cost: 1 round trip.
        """
        return drive(self._ops.total_weight(tr))

    def size(self, tr: Transactor) -> int:
        """Number of items.  Reads two counters ("pushed" - "taken") in parallel, with
        read conflicts, as :meth:`total_weight` reads one.  Cost: 1 round trip."""
        return drive(self._ops.size(tr))

    def is_empty(self, tr: Transactor) -> bool:
        """True when the tree holds no item.  Reads as :meth:`size`."""
        return drive(self._ops.is_empty(tr))

    def clear(self, tr: Transactor) -> None:
        """Remove every item, sum and remembered id: range clears.  The wake counter
        "pushed" is touched instead of cleared (waiters look again; "taken" is set to
        match it, so reads it: a conflict with concurrent pushes) and the receipt
        slots of calls that may be in flight stay.  Cost: 1 read, O(1) in n."""
        drive(self._ops.clear(tr))

    def items(
        self, tr: Transactor, limit: Optional[int] = None
    ) -> List[Tuple[bytes, Value, int]]:
        """``(handle, value, weight)`` for every item, in point order (up to ``limit``).

        Two range reads in parallel (read conflicts on the ranges read).  Given a
        Database, pages of 1,000 items, each in its own transaction (a huge tree is
        listed in full, though not as one snapshot).  Cost: 1 round trip per page,
        O(n) keys.
        """
        return drive(self._ops.items(tr, limit))

    def pop_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[Value]:
        """:meth:`pop`, waiting on a watch (touched by every push) until an item
        arrives; None if ``timeout`` seconds pass first.  The watch is shared and the
        wait bounded as :meth:`fdbrecipes.Queue.pop_wait` says.  Needs a Database.
        """
        return drive(self._ops.pop_wait(db, timeout))


#: What the tools know of a WeightTree (see :mod:`fdbrecipes._kinds`).
KIND = register(Kind("weight-tree", 3, WeightTree, "fdbrecipes.aio.weight_tree:AsyncWeightTree",
                     TREE_FOOTPRINT, weights=True))
