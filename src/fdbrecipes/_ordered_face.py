"""What Queue and PriorityQueue share: size, stats, leases, stuck work, dead letters.

:class:`OrderedFace` is the sync base of :class:`fdbrecipes.Queue` and
:class:`fdbrecipes.PriorityQueue`: each method drives one operation of the structure's
operations object (:mod:`._ops.ordered`) with the blocking driver.  Its async twin is
:mod:`fdbrecipes.aio._ordered_face`; :class:`fdbrecipes._bases.OrderedBase`, the
constructor, is both faces' base.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, List, Optional, Union

from ._bases import OrderedBase
from ._drivers.blocking import drive
from ._drivers.sharing import Sharing
from ._fdb import Transactor, is_database
from ._jobs_face import JobMethods
from ._ops.ordered import LeaseLike, OrderedOps
from ._ordered.counts import QueueStats
from ._ordered.dead import DeadLetter
from ._ordered.leases import Lease
from ._ordered.listing import DelayedItem, LeaseInfo
from ._ordered.paging import Row
from ._ordered.requests import PushRequest
from ._ordered.sequences import SequenceState
from ._records.records import JobError, JobRecord
from ._values import V

__all__ = ["OrderedFace"]


class OrderedFace(OrderedBase[V], JobMethods[OrderedOps[V]]):
    """The sync methods Queue and PriorityQueue share (see those classes)."""

    @functools.cached_property
    def _pushes(self) -> Sharing[PushRequest, bool]:
        """The pushes of this object given a Database, in transactions shared by
        the threads of this process."""
        return Sharing(self._ops.push_requests)

    def _push(self, tr: Transactor, request: PushRequest) -> PushRequest:
        """Push a checked request: in the caller's transaction, or given a Database
        in a transaction shared with other threads' pushes; the request (which names
        its items' ids)."""
        if request.batch and is_database(tr):
            self._pushes.call(tr, request, request.size())
        else:
            drive(self._ops.push(tr, request))
        return request

    # -- size, stats, clear ----------------------------------------------------------

    def size(self, tr: Transactor) -> int:
        """Number of items: visible, delayed and in flight (dead letters are not
        counted; see :meth:`stats`).

        Reads two counters ("pushed" and "taken", kept with atomic adds), in
        parallel.  The reads take conflicts on them, so a transaction that calls
        ``size`` and also writes conflicts with every concurrent push, pop and ack; pass
        ``tr.snapshot`` to avoid that.  With ``max_deliveries``, it also reads the
        expired holds by snapshot (leases that ended on their last delivery are dead
        letters, not counted).  Cost: 2 reads, 1 round trip, O(1) in n.
        """
        return drive(self._ops.size(tr))

    def stats(self, tr: Transactor) -> QueueStats:
        """Where the items are: visible, delayed, in flight, dead, and how long the
        front item has waited (see :class:`fdbrecipes.QueueStats`).

        Exact at the transaction's read version, also under concurrency and faults:
        the counters change in the same transactions as the items, and holds whose
        deadline passed without a write are counted where they now are.  Snapshot
        reads only (no conflicts): the counters (one range read), the front item and
        the expired holds.  Cost: 1 round trip, O(1) in n (plus the expired holds
        not yet put back).
        """
        return drive(self._ops.stats(tr))

    def is_empty(self, tr: Transactor) -> bool:
        """True when no item is visible: a pop now would return None.

        Items under a live lease or a delay are not visible (they still count in
        :meth:`size`).  Reads the first item (read conflict on the front of the
        order) and, by snapshot, the expired holds.  Cost: 1 round trip, O(1) in n.
        """
        return drive(self._ops.is_empty(tr))

    def clear(self, tr: Transactor) -> None:
        """Remove every item (visible, delayed, in flight, dead), waiting pops and
        remembered ids.

        Clears the subspace with range clears, except the wake counter "pushed"
        (touched instead, so waiters look again; "taken" is set to match it) and
        the receipt slots of calls that may be in flight.  Reads "pushed" (a conflict
        with concurrent pushes, so the count restarts exactly at 0); conflicts with
        every transaction that read a cleared key.  Cost: 1 read, O(1) in n.  A
        consumer holding a lease from before the clear gets LeaseExpiredError on ack.
        It reads none of what it removes: a workflow whose nodes were here is not
        told (cancel it: see docs/workflows.md).
        """
        drive(self._ops.clear(tr))

    # -- leases --------------------------------------------------------------------

    def ack(self, tr: Transactor, lease: LeaseLike) -> None:
        """Remove a claimed item for good: the work it stood for is done.

        Reads the lease (read conflict on it: an ack racing the item's redelivery
        conflicts), clears it and its deadline entry, decrements the counters.
        Cost: 1 read, 1 round trip, O(1) in n.  With ``limits`` (so also
        :meth:`ack_many`, :meth:`release` and :meth:`bury`), it reads what the lease
        holds beside it, clears its slots (atomic compare-and-clear: no conflict) and
        moves back the first job parked under each freed key (read conflicts on the
        key's parked jobs and on the job's hold: a claim parking a job of that key
        meanwhile conflicts): 1 round trip more, 2 when a job is parked (see
        docs/flow-control.md).
        A unique job's key is cleared (or marked finished) blind; a sequence's job
        lets its next one in, in the same transaction (its sequence's head and first
        waiting job read with read conflicts: 1 round trip more, conflicting with
        pushes of that sequence), and so does every call that ends a job (``pop``,
        ``ack_many``, ``cancel``, ``remove``; a death blocks the sequence instead:
        ``unblock``).

        Raises:
            LeaseExpiredError: the lease's deadline has passed (even if nobody took the
                item back yet) or the item is no longer held under it.
            TypeError or ValueError: ``lease`` is not a Lease or a lease token.
        """
        drive(self._ops.ack(tr, lease))

    def ack_many(self, tr: Transactor, leases: Iterable[LeaseLike]) -> List[bool]:
        """Ack every lease still alive, in one transaction; for each, whether it was
        acked (False: expired, or named earlier in ``leases``, as :meth:`ack` would
        have raised).

        Reads the leases in parallel: those of one claim (``claim_many``) with one
        range read from the first of them asked for to the last, when at most half of
        that span is left out, which takes a read conflict on the whole span (a
        concurrent change to a lease of the claim inside it conflicts); any other
        lease with a read of its own (a read conflict on it).  One counter update for
        all.  Cost: 1 round trip, O(k) keys for k leases, one read per claim acked
        whole.

        Raises:
            TypeError or ValueError: any lease is not a Lease or a token (named by index).
        """
        return drive(self._ops.ack_many(tr, leases))

    def extend(self, tr: Transactor, lease: LeaseLike, seconds: float) -> Lease[V]:
        """Keep working on a claimed item: its lease now ends ``seconds`` from now.

        Returns the lease with its new deadline; the lease keeps its identity, so the
        original Lease object and its token stay valid.  Reads the lease (read
        conflict), rewrites it and its deadline entry; a deadline moved earlier also
        touches the wake key (atomic), so waiters sleeping until the old deadline
        look again.  Cost: 1 read, 1 round trip, O(1) in n.

        Raises:
            LeaseExpiredError: the lease had already expired.
        """
        return drive(self._ops.extend(tr, lease, seconds))

    def extend_many(self, tr: Transactor, leases: Iterable[LeaseLike],
                    seconds: float) -> List[Optional[Lease[V]]]:
        """Keep working on many claimed items: each lease still alive now ends
        ``seconds`` from now, in one transaction; for each, the renewed lease, or None
        if it had expired (or was named earlier in ``leases``).

        A worker's heartbeat: one transaction for all its leases.  Reads the leases
        in parallel (those of one claim with one range read, as :meth:`ack_many`
        does: a read conflict on the span), rewrites each live one and its deadline
        entry.  Cost: 1 round trip, O(k) keys for k leases.

        Raises:
            TypeError or ValueError: any lease is not a Lease or a token (named by
                index), more than 10,000 leases, or bad ``seconds``.
        """
        return drive(self._ops.extend_many(tr, leases, seconds))

    def release(self, tr: Transactor, lease: LeaseLike, *,
                delay: Optional[float] = None, count: bool = True,
                error: Optional[JobError] = None) -> bool:
        """Give a claimed item back, at its original place in the order: visible at
        once, or ``delay`` seconds from now (retry with backoff).

        Its delivery count goes up by one; once it has been delivered
        ``max_deliveries`` times it goes to the dead letters instead.  With
        ``count=False`` no delivery is counted (the item was not worked on: a
        worker shutting down, a job snoozed) and it never dies of this.  Returns
        False (and changes nothing) when the lease had already expired.  With
        ``error`` (a :class:`fdbrecipes.JobError`, what the job failed with), a
        structure with ``history`` records it in the job's record, and a job that dies
        of this release gets ``Type: message`` as its dead letter's reason.  Reads the
        lease (read conflict), moves the item (and its record), touches the wake key.
        Cost: 1 read, 1 round trip, O(1) in n.
        """
        return drive(self._ops.release(tr, lease, delay, count, error))

    def bury(self, tr: Transactor, lease: LeaseLike, reason: Optional[str] = None, *,
             error: Optional[JobError] = None) -> bool:
        """Move a claimed item to the dead letters now, whatever its deliveries, with
        ``reason`` (see :attr:`fdbrecipes.DeadLetter.reason`): work that must not be
        tried again (``error``: as for :meth:`release`, kept in the job's record).
        Returns False (and changes nothing) when the lease had already expired.  Reads
        the lease (read conflict), moves the item (and its record).  Cost: 1 read, 1
        round trip, O(1) in n.

        Raises:
            TypeError or ValueError: ``lease`` is not a Lease or a token; ``reason`` is
                not None or a str of at most 1,000 characters; ``error`` is not a
                JobError.
        """
        return drive(self._ops.bury(tr, lease, reason, error))

    # -- stuck work ----------------------------------------------------------------

    def leases(self, tr: Transactor, limit: Optional[int] = None, *,
               after: Optional[bytes] = None) -> List[LeaseInfo]:
        """The items in flight, oldest claim first (up to ``limit``): value,
        deliveries, deadline, when claimed, the lease's token (which ``ack``,
        ``extend`` and ``release`` take: an operator can finish or give back work a
        consumer holds) and the item's id.  ``after``: a token of the page before
        (its last row's), to list those after it (paging by key, as every listing
        pages: rows that come and go meanwhile neither repeat nor shift the pages).

        Snapshot reads of the held range (no conflicts), 1,000 keys a round trip, in
        one transaction.  Cost: O(leases + delayed items) keys.

        Raises:
            TypeError or ValueError: ``after`` is not a lease token of this structure.
        """
        return drive(self._ops.leases(tr, limit, after))

    def delayed(self, tr: Transactor, limit: Optional[int] = None, *,
                after: Optional[bytes] = None) -> List[DelayedItem]:
        """The delayed items, soonest first (up to ``limit``): value, when it becomes
        visible (a clock reading), deliveries so far, id and token (``after=`` of the
        next page, :meth:`remove_many`).  ``after``: the token of the last row of the
        page before.

        Snapshot reads of the deadline index and of each item (no conflicts), 1,000
        keys a round trip, in one transaction.  Cost: O(delayed items + leases) keys
        (those due after ``after``).

        Raises:
            TypeError or ValueError: ``after`` is not a delayed item's token of a
                structure of this kind.
        """
        return drive(self._ops.delayed(tr, limit, after))

    def remove(self, tr: Transactor, *, id: bytes) -> Optional[V]:
        """Remove the pending item pushed with ``id`` (visible, or still delayed: this
        cancels a delayed push); its value, or None (nothing written) when there is
        none pending: never pushed, in flight (ack or release its lease), a dead
        letter, already gone.  The id is then forgotten after ``id_retention``, as
        when an item is popped.  A workflow's node removed ends ``cancelled`` in its
        workflow, in this transaction (as :meth:`cancel`; see docs/workflows.md).

        Reads the id's key (and, for a unique job's id, its unique entry beside it)
        and the item (read conflicts on all); clears the item, one counter update.
        Conflicts with a concurrent take of the same item.
        Cost: 2 round trips, O(1) in n.

        Raises:
            TypeError or ValueError: ``id`` is not 1 to 1,000 bytes.
            UnknownWorkflowStoreError: the job is a workflow's node of a store this
                structure object was not made with (nothing written).
        """
        return drive(self._ops.remove(tr, id))

    def lookup(self, tr: Transactor, token: bytes) -> Optional[Row]:
        """The row a token names (a :class:`fdbrecipes.PendingItem`'s,
        :class:`fdbrecipes.DelayedItem`'s, :class:`fdbrecipes.LeaseInfo`'s,
        :class:`fdbrecipes.DeadLetter`'s, or a job's :attr:`fdbrecipes.JobRecord.token`),
        as its listing would list it now: a delayed item whose delay passed as a
        pending one; None when it is no longer there (taken, moved, its lease ended).
        What a job's page shows of its item: its value, deliveries, deadline.

        Reads the one key the token names (a range read of one key, a read conflict
        on it) and the clock.  Cost: 1 round trip, O(1) in n.

        Raises:
            TypeError or ValueError: ``token`` is not such a token of a structure of
                this kind.
        """
        return drive(self._ops.lookup(tr, token))

    def remove_many(self, tr: Transactor, tokens: Iterable[bytes]) -> List[Optional[V]]:
        """Remove the pending items the ``tokens`` name (those of ``pending`` or
        :meth:`delayed` rows: items pushed with or without an id), in one
        transaction; for each token, the item's value, or None when it is no longer
        pending there (taken, in flight, dead, gone, or named earlier in
        ``tokens``).  Their job records say cancelled; their ids are forgotten after
        ``id_retention``.  A workflow's node removed ends ``cancelled`` in its
        workflow, in this transaction (as :meth:`cancel`).

        Reads each item where its token says (visible, or under its delay: read
        conflicts), in parallel; clears those found, one counter update.  Conflicts
        with a concurrent take of the same items.  Cost: 1 to 2 round trips, O(k)
        keys for k tokens.

        Raises:
            TypeError or ValueError: a token is not a pending or delayed item's of a
                structure of this kind (named by index), or more than 1,000 tokens
                (nothing written).
            UnknownWorkflowStoreError: one is a workflow's node of a store this
                structure object was not made with (nothing written).
        """
        return drive(self._ops.remove_many(tr, tokens))

    # -- job records -----------------------------------------------------------------

    def sequence(self, tr: Transactor, key: Union[str, bytes]) -> SequenceState:
        """Sequence ``key``'s state (see ``push(sequence=...)``): the id of its job in
        the queue (its head), whether that job died and blocks it, and how many of its
        jobs wait (see :class:`fdbrecipes.SequenceState`).

        Reads the head (a read conflict on it, unless ``tr`` is a snapshot) and the
        waiting jobs' keys (a range read).  Cost: 1 round trip, O(waiting jobs).

        Raises:
            TypeError or ValueError: ``key`` is not str or bytes of 1 to 200 bytes, or
                the structure has ``shards`` > 1.
        """
        return drive(self._ops.sequence(tr, key))

    def unblock(self, tr: Transactor, key: Union[str, bytes]) -> Optional[bytes]:
        """Move sequence ``key`` on past its job that died (a dead letter, which stays
        where it is: :meth:`dead`): its next job goes in at the tail.  Returns the dead
        job's id; None, writing nothing, if the sequence was not blocked.  (To run the
        dead job again instead, and keep the order, :meth:`requeue_dead` it: it is
        still the head, and the sequence goes on when it ends.)

        Reads the head (a read conflict on it) and the first waiting job (a read
        conflict on the range read) and, by snapshot, the tail of the queue; writes
        the job at the tail, the head, clears the waiting entry.  Conflicts with
        pushes of the sequence.  Cost: 2 round trips, O(1) in n.

        Raises:
            TypeError or ValueError: ``key`` is not str or bytes of 1 to 200 bytes, or
                the structure has ``shards`` > 1.
        """
        return drive(self._ops.unblock(tr, key))

    def unique_job(self, tr: Transactor, key: Union[str, bytes]) -> Optional[bytes]:
        """The id of the job holding unique key ``key`` (see ``push(unique=...)``):
        one pushed with it and still in the states the key covers (or finished less
        than its ``window`` ago); None when the key is free, and a push with it would
        push.

        Reads the key's entry (a read conflict on it, unless ``tr`` is a snapshot)
        and, for a finished holder, the clock.  Cost: 1 round trip, O(1) in n.

        Raises:
            TypeError or ValueError: ``key`` is not str or bytes of 1 to 200 bytes, or
                the structure has ``shards`` > 1.
        """
        return drive(self._ops.unique_job(tr, key))

    def job(self, tr: Transactor, id: bytes) -> Optional[JobRecord]:
        """The record of job ``id`` (the id given to, or returned by, ``push``) as it is
        at the transaction's read version: its state, attempts, times, worker, last
        error, progress and result (see :class:`fdbrecipes.JobRecord`); None if no
        record has that id (never pushed, pushed without ``history``, or pruned).  A
        running job whose lease has expired reads as ``retrying`` (``dead`` on its
        last delivery), a delayed one whose delay has passed as ``pending``, before
        any write says so.

        Reads the record (one range read, a read conflict on it), the clock and, while
        the job runs, its lease (a read conflict).  Cost: 1 to 2 round trips, O(1) in
        n (plus the result's size).

        Raises:
            TypeError or ValueError: ``id`` is not 1 to 1,000 bytes.
        """
        return drive(self._ops.job(tr, id))

    def result(self, db: Any, id: bytes, timeout: Optional[float] = None) -> Any:
        """Block until job ``id`` is finished (or ``timeout`` seconds pass); its result:
        what its handler returned (None if nothing).

        Waits on watches of the record's state and end keys (woken by the
        transaction that finishes the job, or when its lease or delay ends), then
        reads the record.
        Needs a Database.  Cost per wake-up: 1 to 2 round trips.

        Raises:
            UnknownJobError: no record has that id.
            JobFailedError: the job is dead (``.record`` holds its last error).
            JobCancelledError: the job was cancelled.
            ResultTooLargeError: it succeeded, but its result was not kept.
            TimeoutError: ``timeout`` passed first.
        """
        return drive(self._ops.result(db, id, timeout))

    def cancel(self, tr: Transactor, id: bytes) -> Optional[str]:
        """Cancel job ``id``; what became of it: ``"cancelled"`` (it was pending,
        delayed or retrying: removed, its record cancelled), ``"cancelling"`` (it runs:
        its worker is told through the key it watches, stops it and settles its lease
        as cancelled, not retried), its finished state (``"succeeded"``, ``"dead"``,
        ``"cancelled"``: nothing changed), or None (no such job).

        Reads the record and the job's place as :meth:`job` does, and the item (read
        conflicts); removes it, or writes the cancel request and touches the worker's
        key (atomic).  Conflicts with a concurrent take or settle of the same job.
        Cost: 2 to 3 round trips, O(1) in n.

        Raises:
            TypeError or ValueError: ``id`` is not 1 to 1,000 bytes.
            UnknownWorkflowStoreError: the job is a waiting workflow node of a
                store this structure object was not made with (nothing written).
        """
        return drive(self._ops.cancel(tr, id))

    # -- dead letters --------------------------------------------------------------

    def dead(self, tr: Transactor, limit: Optional[int] = None, *,
             after: Optional[bytes] = None) -> List[DeadLetter]:
        """The dead letters, oldest first (up to ``limit``), after the one the token
        ``after`` names (the last row of the page before).

        Reads the dead-letter range from there (read conflict on the part read).
        Cost: 1 round trip, O(k) keys for k dead letters listed.

        Raises:
            TypeError or ValueError: ``after`` is not a dead letter's token of a
                structure of this kind.
        """
        return drive(self._ops.dead(tr, limit, after))

    def requeue_dead(self, tr: Transactor, limit: Optional[int] = None, *,
                     tokens: Optional[Iterable[bytes]] = None) -> int:
        """Push the oldest dead letters (up to ``limit``; all when None), or with
        ``tokens`` those the tokens name (:attr:`fdbrecipes.DeadLetter.token`), back at
        the tail, delivery count reset, ids kept; return how many moved.

        Reads them (read conflict), the tail position by snapshot, writes each item
        and one counter update.  Given a Database, moves at most 1,000 per
        transaction, in as many transactions as needed; given a Transaction, at most
        1,000 (a larger ``limit``, or None with more dead letters, is refused).  With
        ``tokens`` (at most 1,000): one transaction, reading each named letter (a
        range read of one key, in parallel); those no longer there are skipped.
        A unique job (``push(..., unique=...)``) takes its key back if the key is
        free or still names it, else runs beside the job holding it, without it
        (its ack then leaves that job's entry alone): a read of each such key's entry
        (in parallel, beside the tail's read; a read conflict on each, so a push of
        that key conflicts).  Cost: O(k) keys, O(k / 1,000) transactions.

        Raises:
            TypeError or ValueError: both ``limit`` and ``tokens``, or a token that is
                not a dead letter's of a structure of this kind (nothing written).
        """
        return drive(self._ops.requeue_dead(tr, limit, tokens))

    def purge_dead(self, tr: Transactor, *, tokens: Optional[Iterable[bytes]] = None) -> int:
        """Remove every dead letter (or, with ``tokens``, those the tokens name) for
        good; return how many.

        Reads them (their ids are forgotten after ``id_retention``), clears each,
        one counter update.  Given a Database, in transactions of 1,000; given a
        Transaction, refused when there are more than 1,000.  With ``tokens`` (at
        most 1,000): one transaction, as :meth:`requeue_dead`.  Cost: O(k) keys.

        Raises:
            TypeError or ValueError: a token that is not a dead letter's of a
                structure of this kind (nothing written).
        """
        return drive(self._ops.purge_dead(tr, tokens))

    # -- waiting -------------------------------------------------------------------

    def wait(self, db: Any, timeout: Optional[float] = None) -> bool:
        """Block until an item is visible, or ``timeout`` seconds pass; True if one is.

        For consumers that pop in their own transactions: wait, then pop.  Blocks on a
        watch of the key every push touches, set in a transaction that writes nothing,
        and wakes when a lease or a delay ends; the watch is shared and the wait
        bounded as :meth:`fdbrecipes.Queue.pop_wait` says (it looks again at least
        every 10 seconds).  Needs a Database.  Cost per wake-up: 1 read-only check.
        """
        return drive(self._ops.wait(db, timeout))
