"""A priority queue on FoundationDB (the priority-queue recipe, made complete).

Items live under ``S/"i"/(priority, count, random, ...)``: ordered by priority, then by
push order within a priority (``count`` is the last count of that priority + 1, from a
snapshot read), then at random among concurrent pushes.  The lowest priority is at the
front of the range, the highest at the back.

Ties: among items of equal priority, both :meth:`PriorityQueue.pop_min` and
:meth:`PriorityQueue.pop_max` return the oldest first (the recipe's pop_max returns the
newest; we keep FIFO at both ends).  The whole key layout is
:class:`fdbrecipes._layout.OrderedLayout`; what Queue and PriorityQueue share is
:class:`fdbrecipes._ordered_face.OrderedFace`; the checked operations behind every
method are :class:`fdbrecipes._ops.kinds.PriorityQueueOps`.
"""

from __future__ import annotations

from typing import Any, ContextManager, Dict, Iterable, List, Optional, Tuple, Union

from ._drivers.blocking import drive
from ._fdb import Transactor
from ._heartbeat import kept_alive
from ._kinds import Kind, register
from ._layout import ORDERED_FOOTPRINT, OrderedLayout
from ._ops.checks import reverse_end
from ._ops.kinds import PriorityQueueOps
from ._ordered.front import MAX, MIN
from ._ordered.leases import Lease
from ._ordered.paging import PendingItem
from ._ordered.unique import Unique
from ._ordered_face import OrderedFace
from ._values import V

__all__ = ["PriorityQueue"]


class PriorityQueue(OrderedFace[V]):
    """A transactional double-ended priority queue stored in one subspace.

    Priorities are ints (any size the tuple layer encodes, negative included; not
    bool, not float: the tuple encoding orders every int before every float).
    Every method takes ``tr`` first: a Transaction or a Database/Tenant, as for
    :class:`fdbrecipes.Queue`; the constructor's arguments are those of Queue
    (``high_contention`` applies to pop_min and pop_max).  Given a Database, writing
    methods also write a commit receipt, as Queue's do.

    Both ends take the oldest item first among equal priorities; ``spread``, leases,
    delays and dead letters work as for Queue, at either end.  Sharded (``shards`` >
    1), a pop or claim reads the front of every shard, side by side, and takes the
    best priority there (a strict pop: exactly the best at its commit, with read
    conflicts on every front; among shards tied on it, one drawn at random); the rest
    is as for a sharded Queue.
    """

    _ops: PriorityQueueOps[V]
    _ops_class = PriorityQueueOps

    def push(self, tr: Transactor, value: V, priority: int, *,
             id: Optional[bytes] = None, delay: Optional[float] = None,
             time_limit: Optional[float] = None,
             unique: Union[Unique, str, bytes, None] = None,
             sequence: Union[str, bytes, None] = None,
             limit_keys: Optional[Dict[str, Any]] = None) -> Optional[bytes]:
        """Add ``value`` with ``priority``, after the items already at that priority;
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

        Given a Database, pushes that threads of this process make while one is in
        flight share the next transaction (one commit, one receipt: each stored
        exactly once; a thread alone runs its own at once; see
        ``docs/guarantees.md``).  Each push keeps its own id, options and error: one
        refused in it (a unique key held) raises in its own thread, and a shared
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
        return self._push(tr, self._ops.request(value, priority, id, delay,
                                                time_limit, unique, sequence,
                                                limit_keys)).answer()

    def push_many(self, tr: Transactor, items: Iterable[Tuple[V, int]], *,
                  delay: Optional[float] = None,
                  time_limit: Optional[float] = None,
                  limit_keys: Optional[Dict[str, Any]] = None) -> List[bytes]:
        """Add every ``(value, priority)`` pair in one transaction; the ids made for
        them with ``history`` (see :meth:`fdbrecipes.Queue.push_many`; ``delay``,
        ``time_limit`` and ``limit_keys`` apply to each).

        The batch is checked whole before anything is written.  One snapshot read per
        distinct priority, issued in parallel.  Cost: 1 round trip.

        Raises:
            TypeError or ValueError: any pair is invalid (the message names its index),
                bad ``limit_keys`` (as for :meth:`push`), or the batch would exceed
                FoundationDB's 10 MB transaction limit.
        """
        return list(self._push(tr, self._ops.requests(items, delay, time_limit,
                                                      limit_keys)).ids)

    def pop_min(self, tr: Transactor, *, spread: int = 1) -> Optional[V]:
        """Remove and return the oldest item of the lowest priority; None when empty.

        Reads the first item (read conflict on it), clears it.  Conflicts with
        concurrent pop_min calls (unless ``high_contention``; see Queue.pop).  With
        ``spread=k``, takes one of the first ``k`` at random, with a conflict on it
        only (see Queue.pop).  Cost: 1 round trip, O(1) in n.
        """
        return drive(self._ops.pop(tr, MIN, spread))

    def pop_max(self, tr: Transactor, *, spread: int = 1) -> Optional[V]:
        """Remove and return the oldest item of the highest priority; None when empty.

        Reads the last key (to learn the highest priority), then the first key of
        that priority; read conflicts from the highest priority's oldest item to the
        end.  Conflicts with concurrent pop_max calls and with pushes of a priority at
        least as high.  ``spread`` as for :meth:`pop_min`.  Cost: 2 round trips, O(1)
        in n.
        """
        return drive(self._ops.pop(tr, MAX, spread))

    def pop_min_many(self, tr: Transactor, n: int, *, spread: int = 1) -> List[V]:
        """Remove up to ``n`` items in pop_min order (see Queue.pop_many)."""
        return drive(self._ops.pop_many(tr, MIN, n, spread))

    def pop_max_many(self, tr: Transactor, n: int, *, spread: int = 1) -> List[V]:
        """Remove up to ``n`` items in pop_max order (see Queue.pop_many)."""
        return drive(self._ops.pop_many(tr, MAX, n, spread))

    def peek_min(self, tr: Transactor) -> Optional[V]:
        """The value pop_min would return, without removing it.  Cost: 1 round trip."""
        return drive(self._ops.peek(tr, MIN))

    def peek_max(self, tr: Transactor) -> Optional[V]:
        """The value pop_max would return, without removing it.  Cost: 2 round trips."""
        return drive(self._ops.peek(tr, MAX))

    def items(
        self, tr: Transactor, limit: Optional[int] = None, reverse: bool = False
    ) -> List[V]:
        """Visible values in priority order, without removing them.

        ``reverse=False``: lowest priority first (pop_min order); ``reverse=True``:
        highest priority first (pop_max order), oldest first within a priority.
        Reads the item range (read conflict on the part read); given a Database, in
        pages of 1,000, each its own transaction.  Cost: 1 to 3 round trips per page,
        O(n) keys (O(limit) with a limit).
        """
        return drive(self._ops.items(tr, limit, reverse_end(reverse)))

    def pending(self, tr: Transactor, limit: Optional[int] = None, *, reverse: bool = False,
                after: Optional[bytes] = None) -> List[PendingItem]:
        """The visible items in priority order as rows (as :meth:`items` orders them;
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
        return drive(self._ops.pending(tr, limit, reverse_end(reverse), after))

    def claim_min(self, tr: Transactor, lease_seconds: float, *,
                  spread: int = 1) -> Optional[Lease[V]]:
        """Take the pop_min item under a lease (see :meth:`fdbrecipes.Queue.claim`)."""
        return drive(self._ops.claim(tr, MIN, lease_seconds, spread))

    def claim_max(self, tr: Transactor, lease_seconds: float, *,
                  spread: int = 1) -> Optional[Lease[V]]:
        """Take the pop_max item under a lease (see :meth:`fdbrecipes.Queue.claim`)."""
        return drive(self._ops.claim(tr, MAX, lease_seconds, spread))

    def claim_min_many(self, tr: Transactor, n: int, lease_seconds: float, *,
                       spread: int = 1) -> List[Lease[V]]:
        """Up to ``n`` leases in pop_min order (see Queue.claim_many)."""
        return drive(self._ops.claim_many(tr, n, lease_seconds, spread=spread, end=MIN))

    def claim_max_many(self, tr: Transactor, n: int, lease_seconds: float, *,
                       spread: int = 1) -> List[Lease[V]]:
        """Up to ``n`` leases in pop_max order (see Queue.claim_many)."""
        return drive(self._ops.claim_many(tr, n, lease_seconds, spread=spread, end=MAX))

    def claimed_min(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                    release_delay: Optional[float] = None) -> ContextManager[Optional[Lease[V]]]:
        """:meth:`fdbrecipes.Queue.claimed` at the pop_min end."""
        claim, seconds = self._ops.claiming(db, MIN, lease_seconds, timeout, release_delay)
        return kept_alive(self, db, claim, seconds, release_delay)

    def claimed_max(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                    release_delay: Optional[float] = None) -> ContextManager[Optional[Lease[V]]]:
        """:meth:`fdbrecipes.Queue.claimed` at the pop_max end."""
        claim, seconds = self._ops.claiming(db, MAX, lease_seconds, timeout, release_delay)
        return kept_alive(self, db, claim, seconds, release_delay)

    def pop_min_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[V]:
        """pop_min, waiting on a watch until an item arrives (see Queue.pop_wait)."""
        return drive(self._ops.pop_wait(db, MIN, timeout))

    def pop_max_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[V]:
        """pop_max, waiting on a watch until an item arrives (see Queue.pop_wait)."""
        return drive(self._ops.pop_wait(db, MAX, timeout))

    def claim_min_wait(
        self, db: Any, lease_seconds: float, timeout: Optional[float] = None
    ) -> Optional[Lease[V]]:
        """claim_min, waiting on a watch until an item is visible."""
        return drive(self._ops.claim_wait(db, MIN, lease_seconds, timeout))

    def claim_max_wait(
        self, db: Any, lease_seconds: float, timeout: Optional[float] = None
    ) -> Optional[Lease[V]]:
        """claim_max, waiting on a watch until an item is visible."""
        return drive(self._ops.claim_wait(db, MAX, lease_seconds, timeout))


#: What the tools know of a PriorityQueue (see :mod:`fdbrecipes._kinds`): its items'
#: tuples hold their priority too.
KIND = register(Kind("priority-queue", 1, PriorityQueue,
                     "fdbrecipes.aio.priority_queue:AsyncPriorityQueue", ORDERED_FOOTPRINT,
                     item_len=OrderedLayout.ITEM_LEN + 1, jobs=True, priorities=True,
                     sequences=True))
