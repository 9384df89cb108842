# Generated in part by tools/unasync.py from src/fdbrecipes/weight_tree.py: the
# public methods (signature, docstring, code), but the code of those the script
# lists in OWN_CODE.  Edit the sync module (or OWN_CODE's methods here), then run
# `python tools/unasync.py`; `--check` (in .ci/run) fails while a file is stale.
"""AsyncWeightTree: :class:`fdbrecipes.WeightTree` for asyncio code.

The same constructor arguments and the same key layout as WeightTree; every method
is an ``async def`` twin of the sync method of the same name, with its docstring,
awaiting the same operation (:class:`fdbrecipes._ops.tree.TreeOps`).  Pushes given a
Database share transactions with other tasks' pushes (see ``fdbrecipes.aio``).
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, List, Optional, Tuple

from .._bases import TreeBase
from .._drivers.awaiting import drive
from .._fdb import Transactor, is_transaction
from .._ops.tree import pushed
from .._tree.engine import Pushed, TreeRequest
from .._values import Value
from ._combine import Combiner

__all__ = ["AsyncWeightTree"]


class AsyncWeightTree(TreeBase):
    """A transactional pool of weighted items for asyncio code (see
    :class:`fdbrecipes.WeightTree`, and :class:`fdbrecipes.aio.AsyncQueue` for what
    ``tr``, shared transactions and cancellation mean here)."""

    @functools.cached_property
    def _pushes(self) -> Combiner[TreeRequest, Pushed]:
        """The pushes of this object given a Database, in shared transactions."""
        return Combiner(self._ops.push_requests)

    async def _push(self, tr: Transactor, request: TreeRequest) -> List[bytes]:
        """Push a checked request: in the caller's transaction, or given a Database
        in a transaction shared with other tasks' pushes; the handles, in order."""
        if is_transaction(tr) or not request.batch:
            return await drive(self._ops.push(tr, request))
        size = sum(len(value) + 500 for value, _ in request.batch)
        return pushed(await self._pushes.call(tr, request, size))

    async def push(
        self, tr: Transactor, value: Value, weight: int, *, id: Optional[bytes] = None
    ) -> bytes:
        """The async twin of :meth:`fdbrecipes.WeightTree.push`, awaited without blocking the
        event loop.

        Add ``value`` with ``weight``; return a handle (bytes) naming the item.

        With ``id``, pushing again with the same id stores nothing and returns the
        first push's handle (safe to retry after ``commit_unknown_result``).

        Reads (snapshot, no conflicts) the total weight and the last sequence number;
        with ``id`` also the id's key.  Writes the leaf, the value, one atomic add per
        tree level (5), the total, the count.  Conflicts with: nothing, except a
        concurrent push of the same ``id``.  Cost: 1 round trip, O(log n) writes.

        Given a Database, pushes that tasks of this event loop make within about a
        millisecond share one transaction (one commit, one receipt: each stored exactly
        once; at most 256 calls or 2 MB; see ``docs/asyncio.md``).  The sync WeightTree runs
        each push in a transaction of its own.

        Raises:
            TypeError or ValueError: bad value (as for Queue), weight not an int in
                [1, 2**32], bad id, or the total weight would pass 2**62.
        """
        return (await self._push(tr, self._ops.request(value, weight, id)))[0]

    async def push_many(self, tr: Transactor, items: Iterable[Tuple[Value, int]]) -> List[bytes]:
        """The async twin of :meth:`fdbrecipes.WeightTree.push_many`, awaited without blocking
        the event loop.

        Add every ``(value, weight)`` pair in one transaction; return their handles.

        The batch is checked whole before anything is written.  Cost: 1 round trip;
        writes O(k log n) keys for k items (fewer when they share tree nodes).

        Given a Database, pushes that tasks of this event loop make within about a
        millisecond share one transaction (one commit, one receipt: each stored exactly
        once; at most 256 calls or 2 MB; see ``docs/asyncio.md``).  The sync WeightTree runs
        each push in a transaction of its own.

        Raises:
            TypeError or ValueError: any pair is invalid (the message names its index), or
                the batch would exceed FoundationDB's 10 MB transaction limit.
        """
        return await self._push(tr, self._ops.requests(items))

    async def pop(self, tr: Transactor, point: Optional[int] = None) -> Optional[Value]:
        """The async twin of :meth:`fdbrecipes.WeightTree.pop`, awaited without blocking the
        event loop.

        Remove an item, chosen with probability weight / total; None when empty.

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
        return await drive(self._ops.pop(tr, point))

    async def pop_many(self, tr: Transactor, n: int) -> List[Value]:
        """The async twin of :meth:`fdbrecipes.WeightTree.pop_many`, awaited without blocking
        the event loop.

        Remove up to ``n`` items, each chosen as :meth:`pop` chooses (without
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
        return await drive(self._ops.pop_many(tr, n))

    async def peek(self, tr: Transactor, point: Optional[int] = None) -> Optional[Value]:
        """The async twin of :meth:`fdbrecipes.WeightTree.peek`, awaited without blocking the
        event loop.

        The value :meth:`pop` with this point would remove, without removing it.

        Without a point, one is drawn at random.  Reads as pop (a read conflict on the
        chosen item's value only).  Cost: as pop, without writes.
        """
        return await drive(self._ops.peek(tr, point))

    async def get(self, tr: Transactor, handle: bytes) -> Optional[Tuple[Value, int]]:
        """The async twin of :meth:`fdbrecipes.WeightTree.get`, awaited without blocking the
        event loop.

        ``(value, weight)`` of the item ``handle`` names, or None if it is gone.

        Reads the item's two keys (read conflicts on them).  Cost: 1 round trip.
        """
        return await drive(self._ops.get(tr, handle))

    async def remove(self, tr: Transactor, handle: bytes) -> Optional[Value]:
        """The async twin of :meth:`fdbrecipes.WeightTree.remove`, awaited without blocking the
        event loop.

        Remove the item ``handle`` names; return its value, or None if it is gone.

        Reads the item's keys (read conflicts: conflicts with a concurrent pop,
        remove or set_weight of the same item), clears them, updates the sums.
        Cost: 1 round trip, O(log n) writes.
        """
        return await drive(self._ops.remove(tr, handle))

    async def set_weight(self, tr: Transactor, handle: bytes, weight: int) -> Optional[int]:
        """The async twin of :meth:`fdbrecipes.WeightTree.set_weight`, awaited without blocking
        the event loop.

        Give the item ``handle`` names a new weight; return the old weight, or None
        (nothing written) if the item is gone.

        The item keeps its place (its interval moves, its neighbours' do not change
        order).  Reads the item's leaf (read conflict) and, by snapshot, the total;
        writes the leaf and one atomic add per level.  Cost: 1 round trip.

        Raises:
            TypeError or ValueError: bad weight, or the total would pass 2**62.
        """
        return await drive(self._ops.set_weight(tr, handle, weight))

    async def total_weight(self, tr: Transactor) -> int:
        """The async twin of :meth:`fdbrecipes.WeightTree.total_weight`, awaited without
        blocking the event loop.

        Sum of the weights of all items.

        Reads one counter (read conflict on it: pass ``tr.snapshot`` in a transaction
        that also writes, or it conflicts with every push and pop).  Cost: 1 round trip.
        """
        return await drive(self._ops.total_weight(tr))

    async def size(self, tr: Transactor) -> int:
        """The async twin of :meth:`fdbrecipes.WeightTree.size`, awaited without blocking the
        event loop.

        Number of items.  Reads two counters ("pushed" - "taken") in parallel, with
        read conflicts, as :meth:`total_weight` reads one.  Cost: 1 round trip.
        """
        return await drive(self._ops.size(tr))

    async def is_empty(self, tr: Transactor) -> bool:
        """The async twin of :meth:`fdbrecipes.WeightTree.is_empty`, awaited without blocking
        the event loop.

        True when the tree holds no item.  Reads as :meth:`size`.
        """
        return await drive(self._ops.is_empty(tr))

    async def clear(self, tr: Transactor) -> None:
        """The async twin of :meth:`fdbrecipes.WeightTree.clear`, awaited without blocking the
        event loop.

        Remove every item, sum and remembered id: range clears.  The wake counter
        "pushed" is touched instead of cleared (waiters look again; "taken" is set to
        match it, so reads it: a conflict with concurrent pushes) and the receipt
        slots of calls that may be in flight stay.  Cost: 1 read, O(1) in n.
        """
        await drive(self._ops.clear(tr))

    async def items(
        self, tr: Transactor, limit: Optional[int] = None
    ) -> List[Tuple[bytes, Value, int]]:
        """The async twin of :meth:`fdbrecipes.WeightTree.items`, awaited without blocking the
        event loop.

        ``(handle, value, weight)`` for every item, in point order (up to ``limit``).

        Two range reads in parallel (read conflicts on the ranges read).  Given a
        Database, pages of 1,000 items, each in its own transaction (a huge tree is
        listed in full, though not as one snapshot).  Cost: 1 round trip per page,
        O(n) keys.
        """
        return await drive(self._ops.items(tr, limit))

    async def pop_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[Value]:
        """The async twin of :meth:`fdbrecipes.WeightTree.pop_wait`, awaited without blocking
        the event loop.

        :meth:`pop`, waiting on a watch (touched by every push) until an item
        arrives; None if ``timeout`` seconds pass first.  The watch is shared and the
        wait bounded as :meth:`fdbrecipes.Queue.pop_wait` says.  Needs a Database.
        """
        return await drive(self._ops.pop_wait(db, timeout))
