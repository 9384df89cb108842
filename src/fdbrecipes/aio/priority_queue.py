# Generated in part by tools/unasync.py from src/fdbrecipes/priority_queue.py: the
# public methods (signature, docstring, code), but the code of those the script
# lists in OWN_CODE.  Edit the sync module (or OWN_CODE's methods here), then run
# `python tools/unasync.py`; `--check` (in .ci/run) fails while a file is stale.
"""AsyncPriorityQueue: :class:`fdbrecipes.PriorityQueue` for asyncio code.

The same constructor arguments and the same key layout as PriorityQueue; every
method is an ``async def`` twin of the sync method of the same name, with its
docstring, awaiting the same operation
(:class:`fdbrecipes._ops.kinds.PriorityQueueOps`).
"""

from __future__ import annotations

from typing import Any, AsyncContextManager, Dict, Iterable, List, Optional, Tuple, Union

from .._drivers.awaiting import drive
from .._fdb import Transactor
from .._ops.checks import reverse_end
from .._ops.kinds import PriorityQueueOps
from .._ordered.front import MAX, MIN
from .._ordered.leases import Lease
from .._ordered.paging import PendingItem
from .._ordered.unique import Unique
from .._values import V
from ._heartbeat import kept_alive
from ._ordered_face import AsyncOrderedFace

__all__ = ["AsyncPriorityQueue"]


class AsyncPriorityQueue(AsyncOrderedFace[V]):
    """A transactional double-ended priority queue for asyncio code (see
    :class:`fdbrecipes.PriorityQueue`, and :class:`fdbrecipes.aio.AsyncQueue` for what
    ``tr``, shared transactions and cancellation mean here)."""

    _ops: PriorityQueueOps[V]
    _ops_class = PriorityQueueOps

    async def push(self, tr: Transactor, value: V, priority: int, *,
                   id: Optional[bytes] = None, delay: Optional[float] = None,
                   time_limit: Optional[float] = None,
                   unique: Union[Unique, str, bytes, None] = None,
                   sequence: Union[str, bytes, None] = None,
                   limit_keys: Optional[Dict[str, Any]] = None) -> Optional[bytes]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.push`, awaited without blocking
        the event loop.

        Add ``value`` with ``priority``, after the items already at that priority;
        the item's id (see :meth:`fdbrecipes.Queue.push`).

        ``id`` makes the push idempotent, ``delay`` hides the item for that many
        seconds, ``time_limit`` limits the job, ``unique`` pushes it only if no
        other job holds its key, ``sequence`` runs it after the earlier jobs of
        its sequence and ``limit_keys`` gives its keys under the structure's
        limits (stored in its value, after it), as for :meth:`fdbrecipes.Queue.push`
        (a replaced job keeps its priority; a job of a sequence goes in at its own
        priority when its turn comes).  Reads the last key of that priority and the
        floor with snapshot reads (no read conflict); writes the item (and, with
        ``history``, its job record) and the counters.  Conflicts with: nothing,
        except a concurrent push of the same ``id``.  Cost: 1 round trip, O(1) in n.

        Given a Database, pushes that tasks of this event loop make within about a
        millisecond share one transaction (one commit, one receipt: each stored
        exactly once; at most 256 calls or 2 MB; acks share theirs likewise; see
        ``docs/asyncio.md``).  Each push keeps its own id, options and error: one
        refused in it (a unique key held) raises in its own task, and a shared
        transaction that fails having written nothing runs each push again alone,
        so only a push whose own transaction fails raises.

        Raises:
            TypeError or ValueError: bad ``value`` (as for Queue), ``priority`` not an int
                (bools and floats are refused), bad ``id``, ``delay`` or
                ``time_limit``, bad ``unique`` (see :class:`fdbrecipes.Unique`), or
                ``unique`` with ``id`` or ``shards`` > 1, bad ``sequence`` or
                ``limit_keys`` (as for Queue).
            UniqueConflictError: the key is held and ``on_conflict`` is "raise".
        """
        request = self._ops.request(value, priority, id, delay, time_limit, unique,
                                    sequence, limit_keys)
        return (await self._push(tr, request)).answer()

    async def push_many(self, tr: Transactor, items: Iterable[Tuple[V, int]], *,
                        delay: Optional[float] = None,
                        time_limit: Optional[float] = None,
                        limit_keys: Optional[Dict[str, Any]] = None) -> List[bytes]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.push_many`, awaited without
        blocking the event loop.

        Add every ``(value, priority)`` pair in one transaction; the ids made for
        them with ``history`` (see :meth:`fdbrecipes.Queue.push_many`; ``delay``,
        ``time_limit`` and ``limit_keys`` apply to each).

        The batch is checked whole before anything is written.  One snapshot read per
        distinct priority, issued in parallel.  Cost: 1 round trip.

        Raises:
            TypeError or ValueError: any pair is invalid (the message names its index),
                bad ``limit_keys`` (as for :meth:`push`), or the batch would exceed
                FoundationDB's 10 MB transaction limit.
        """
        return list((await self._push(tr, self._ops.requests(items, delay, time_limit,
                                                             limit_keys))).ids)

    async def pop_min(self, tr: Transactor, *, spread: int = 1) -> Optional[V]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.pop_min`, awaited without blocking
        the event loop.

        Remove and return the oldest item of the lowest priority; None when empty.

        Reads the first item (read conflict on it), clears it.  Conflicts with
        concurrent pop_min calls (unless ``high_contention``; see Queue.pop).  With
        ``spread=k``, takes one of the first ``k`` at random, with a conflict on it
        only (see Queue.pop).  Cost: 1 round trip, O(1) in n.

        Given a Database, one event loop runs at most ``spread`` takes (pops and claims)
        with that ``spread`` of this structure at once, times its shards (one at a time for
        ``spread=1`` unsharded); the others wait for a turn (see ``docs/asyncio.md``).
        """
        return await self._take(tr, self._ops.pop(tr, MIN, spread), spread)

    async def pop_max(self, tr: Transactor, *, spread: int = 1) -> Optional[V]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.pop_max`, awaited without blocking
        the event loop.

        Remove and return the oldest item of the highest priority; None when empty.

        Reads the last key (to learn the highest priority), then the first key of
        that priority; read conflicts from the highest priority's oldest item to the
        end.  Conflicts with concurrent pop_max calls and with pushes of a priority at
        least as high.  ``spread`` as for :meth:`pop_min`.  Cost: 2 round trips, O(1)
        in n.

        Given a Database, one event loop runs at most ``spread`` takes (pops and claims)
        with that ``spread`` of this structure at once, times its shards (one at a time for
        ``spread=1`` unsharded); the others wait for a turn (see ``docs/asyncio.md``).
        """
        return await self._take(tr, self._ops.pop(tr, MAX, spread), spread)

    async def pop_min_many(self, tr: Transactor, n: int, *, spread: int = 1) -> List[V]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.pop_min_many`, awaited without
        blocking the event loop.

        Remove up to ``n`` items in pop_min order (see Queue.pop_many).

        Given a Database, one event loop runs at most ``spread`` takes (pops and claims)
        with that ``spread`` of this structure at once, times its shards (one at a time for
        ``spread=1`` unsharded); the others wait for a turn (see ``docs/asyncio.md``).
        """
        return await self._take(tr, self._ops.pop_many(tr, MIN, n, spread), spread)

    async def pop_max_many(self, tr: Transactor, n: int, *, spread: int = 1) -> List[V]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.pop_max_many`, awaited without
        blocking the event loop.

        Remove up to ``n`` items in pop_max order (see Queue.pop_many).

        Given a Database, one event loop runs at most ``spread`` takes (pops and claims)
        with that ``spread`` of this structure at once, times its shards (one at a time for
        ``spread=1`` unsharded); the others wait for a turn (see ``docs/asyncio.md``).
        """
        return await self._take(tr, self._ops.pop_many(tr, MAX, n, spread), spread)

    async def peek_min(self, tr: Transactor) -> Optional[V]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.peek_min`, awaited without
        blocking the event loop.

        The value pop_min would return, without removing it.  Cost: 1 round trip.
        """
        return await drive(self._ops.peek(tr, MIN))

    async def peek_max(self, tr: Transactor) -> Optional[V]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.peek_max`, awaited without
        blocking the event loop.

        The value pop_max would return, without removing it.  Cost: 2 round trips.
        """
        return await drive(self._ops.peek(tr, MAX))

    async def items(
        self, tr: Transactor, limit: Optional[int] = None, reverse: bool = False
    ) -> List[V]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.items`, awaited without blocking
        the event loop.

        Visible values in priority order, without removing them.

        ``reverse=False``: lowest priority first (pop_min order); ``reverse=True``:
        highest priority first (pop_max order), oldest first within a priority.
        Reads the item range (read conflict on the part read); given a Database, in
        pages of 1,000, each its own transaction.  Cost: 1 to 3 round trips per page,
        O(n) keys (O(limit) with a limit).
        """
        return await drive(self._ops.items(tr, limit, reverse_end(reverse)))

    async def pending(self, tr: Transactor, limit: Optional[int] = None, *, reverse: bool = False,
                      after: Optional[bytes] = None) -> List[PendingItem]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.pending`, awaited without blocking
        the event loop.

        The visible items in priority order as rows (as :meth:`items` orders them;
        up to ``limit``): each :class:`fdbrecipes.PendingItem` with its priority, id,
        deliveries, since when it is visible and its token, which names it for
        :meth:`remove_many` and, given as ``after``, starts the next page just after
        it (in the same order: give the same ``reverse``).  Paging by key, never by
        offset.

        Snapshot reads (no conflicts) of the item range and of the expired holds.
        Given a Database, pages of 1,000, each its own transaction.  Cost: 1 to 3
        round trips per page, O(limit) keys.

        Raises:
            TypeError or ValueError: ``after`` is not a pending item's token of a
                PriorityQueue.
        """
        return await drive(self._ops.pending(tr, limit, reverse_end(reverse), after))

    async def claim_min(self, tr: Transactor, lease_seconds: float, *,
                        spread: int = 1) -> Optional[Lease[V]]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.claim_min`, awaited without
        blocking the event loop.

        Take the pop_min item under a lease (see :meth:`fdbrecipes.Queue.claim`).

        Given a Database, one event loop runs at most ``spread`` takes (pops and claims)
        with that ``spread`` of this structure at once, times its shards (one at a time for
        ``spread=1`` unsharded); the others wait for a turn (see ``docs/asyncio.md``).
        """
        return await self._take(tr, self._ops.claim(tr, MIN, lease_seconds, spread), spread)

    async def claim_max(self, tr: Transactor, lease_seconds: float, *,
                        spread: int = 1) -> Optional[Lease[V]]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.claim_max`, awaited without
        blocking the event loop.

        Take the pop_max item under a lease (see :meth:`fdbrecipes.Queue.claim`).

        Given a Database, one event loop runs at most ``spread`` takes (pops and claims)
        with that ``spread`` of this structure at once, times its shards (one at a time for
        ``spread=1`` unsharded); the others wait for a turn (see ``docs/asyncio.md``).
        """
        return await self._take(tr, self._ops.claim(tr, MAX, lease_seconds, spread), spread)

    async def claim_min_many(self, tr: Transactor, n: int, lease_seconds: float, *,
                             spread: int = 1) -> List[Lease[V]]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.claim_min_many`, awaited without
        blocking the event loop.

        Up to ``n`` leases in pop_min order (see Queue.claim_many).

        Given a Database, one event loop runs at most ``spread`` takes (pops and claims)
        with that ``spread`` of this structure at once, times its shards (one at a time for
        ``spread=1`` unsharded); the others wait for a turn (see ``docs/asyncio.md``).
        """
        return await self._take(
            tr, self._ops.claim_many(tr, n, lease_seconds, spread=spread, end=MIN), spread)

    async def claim_max_many(self, tr: Transactor, n: int, lease_seconds: float, *,
                             spread: int = 1) -> List[Lease[V]]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.claim_max_many`, awaited without
        blocking the event loop.

        Up to ``n`` leases in pop_max order (see Queue.claim_many).

        Given a Database, one event loop runs at most ``spread`` takes (pops and claims)
        with that ``spread`` of this structure at once, times its shards (one at a time for
        ``spread=1`` unsharded); the others wait for a turn (see ``docs/asyncio.md``).
        """
        return await self._take(
            tr, self._ops.claim_many(tr, n, lease_seconds, spread=spread, end=MAX), spread)

    def claimed_min(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                    release_delay: Optional[float] = None
                    ) -> AsyncContextManager[Optional[Lease[V]]]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.claimed_min`, used with
        ``async with`` (its heartbeat is a task).

        :meth:`fdbrecipes.Queue.claimed` at the pop_min end.
        """
        claim, seconds = self._ops.claiming(db, MIN, lease_seconds, timeout, release_delay)
        return kept_alive(self, db, claim, seconds, release_delay)

    def claimed_max(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                    release_delay: Optional[float] = None
                    ) -> AsyncContextManager[Optional[Lease[V]]]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.claimed_max`, used with
        ``async with`` (its heartbeat is a task).

        :meth:`fdbrecipes.Queue.claimed` at the pop_max end.
        """
        claim, seconds = self._ops.claiming(db, MAX, lease_seconds, timeout, release_delay)
        return kept_alive(self, db, claim, seconds, release_delay)

    async def pop_min_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[V]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.pop_min_wait`, awaited without
        blocking the event loop.

        pop_min, waiting on a watch until an item arrives (see Queue.pop_wait).
        """
        return await drive(self._ops.pop_wait(db, MIN, timeout))

    async def pop_max_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[V]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.pop_max_wait`, awaited without
        blocking the event loop.

        pop_max, waiting on a watch until an item arrives (see Queue.pop_wait).
        """
        return await drive(self._ops.pop_wait(db, MAX, timeout))

    async def claim_min_wait(
        self, db: Any, lease_seconds: float, timeout: Optional[float] = None
    ) -> Optional[Lease[V]]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.claim_min_wait`, awaited without
        blocking the event loop.

        claim_min, waiting on a watch until an item is visible.
        """
        return await drive(self._ops.claim_wait(db, MIN, lease_seconds, timeout))

    async def claim_max_wait(
        self, db: Any, lease_seconds: float, timeout: Optional[float] = None
    ) -> Optional[Lease[V]]:
        """The async twin of :meth:`fdbrecipes.PriorityQueue.claim_max_wait`, awaited without
        blocking the event loop.

        claim_max, waiting on a watch until an item is visible.
        """
        return await drive(self._ops.claim_wait(db, MAX, lease_seconds, timeout))
