"""What Queue and PriorityQueue share: construction, size, stats, leases, dead letters.

The public classes (:mod:`.queue`, :mod:`.priority_queue`) inherit from
:class:`OrderedAPI`; each method validates its arguments, then hands one operation of
the engine (:mod:`._ordered`, :mod:`._leases`, :mod:`._dead`, :mod:`._contention`)
to the structure's retry loop (:mod:`._run`).
"""

from __future__ import annotations

from typing import Any, ContextManager, Generic, Iterable, List, Optional, Tuple, Union, cast

from ._contention import Contention
from ._dead import DEAD_BATCH, DeadLetter, DeadLetters
from ._fdb import Gen, Transactor, check_database, check_transactor, is_transaction
from ._front import MIN, value_of
from ._heartbeat import claimed
from ._ids import Ids
from ._layout import Item, OrderedLayout
from ._leases import Lease, Leases, lease_id
from ._listing import DelayedItem, LeaseInfo, Listing
from ._ordered import Ordered, PushRequest, QueueStats
from ._receipts import InterruptedCall, Outcome, UnknownResultError
from ._run import Structure, read, read_pages, too_many
from ._values import (
    BATCH_BYTES,
    MAX_TAKE,
    TAKE_BATCH,
    V,
    check_batch_bytes,
    check_bool,
    check_clock,
    check_delay,
    check_id,
    check_int,
    check_key,
    check_limit,
    check_reason,
    check_seconds,
    check_spread,
    check_subspace,
    check_timeout,
    decode_value,
    materialize,
    push_bytes,
)
from ._wait import Clock, Wake, database_clock, drive, take_or_wait, wait_until_ready

#: A validated batch to push: (group, encoded value) pairs.
Batch = List[Tuple[Item, bytes]]
#: Expired holds one restoring transaction puts back.
RESTORE_LIMIT = 1_000


class OrderedAPI(Structure, Generic[V]):
    """The public methods Queue and PriorityQueue share (see those classes)."""

    _group_len: int  # key elements before the sequence number: 0 Queue, 1 priority

    def __init__(
        self,
        subspace: Any,
        *,
        high_contention: bool = False,
        clock: Optional[Clock] = None,
        id_retention: float = 3600.0,
        result_timeout: float = 10.0,
        max_deliveries: Optional[int] = None,
    ) -> None:
        subspace = check_subspace(subspace)
        self._high_contention = check_bool(high_contention, "high_contention")
        if max_deliveries is not None:
            check_int(max_deliveries, "max_deliveries", low=1)
        layout = OrderedLayout(subspace, self._group_len)
        timeout = check_seconds(result_timeout, "result_timeout")
        super().__init__(subspace)
        self._engine = Ordered(layout, check_clock(clock) or database_clock,
                               Ids(subspace, id_retention), max_deliveries)
        self._retention = id_retention
        self._max_deliveries = max_deliveries
        self._leases = Leases(self._engine)
        self._dead = DeadLetters(self._engine)
        self._listing = Listing(self._engine)
        self._contention = Contention(self._engine, self._loop, self._hooks, timeout)

    @property
    def id_retention(self) -> float:
        """Seconds an idempotency id is remembered after its item left."""
        return float(self._retention)

    @property
    def max_deliveries(self) -> Optional[int]:
        """Deliveries after which a lease that ends without ack makes its item a dead
        letter (None: never)."""
        return self._max_deliveries

    # -- size, stats, clear --------------------------------------------------------------

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
        return drive(self._size(tr))

    def _size(self, tr: Transactor) -> Gen[int]:
        return read(tr, self._engine.size)

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
        return drive(self._stats(tr))

    def _stats(self, tr: Transactor) -> Gen[QueueStats]:
        return read(tr, self._engine.stats)

    def is_empty(self, tr: Transactor) -> bool:
        """True when no item is visible: a pop now would return None.

        Items under a live lease or a delay are not visible (they still count in
        :meth:`size`).  Reads the first item (read conflict on the front of the
        order) and, by snapshot, the expired holds.  Cost: 1 round trip, O(1) in n.
        """
        return drive(self._is_empty(tr))

    def _is_empty(self, tr: Transactor) -> Gen[bool]:
        return not (yield from read(tr, self._engine.peek, MIN, 1))

    def clear(self, tr: Transactor) -> None:
        """Remove every item (visible, delayed, in flight, dead), waiting pops and
        remembered ids.

        Clears the subspace with range clears, except the wake counter "pushed"
        (touched instead, so waiters look again; "taken" is set to match it) and
        the receipt slots of calls that may be in flight.  Reads "pushed" (a conflict
        with concurrent pushes, so the count restarts exactly at 0); conflicts with
        every transaction that read a cleared key.  Cost: 1 read, O(1) in n.  A
        consumer holding a lease from before the clear gets LeaseExpiredError on ack.
        """
        drive(self._clear(tr))

    def _clear(self, tr: Transactor) -> Gen[None]:
        return self._loop.idempotent(tr, self._engine.clear)

    # -- leases ------------------------------------------------------------------------

    def ack(self, tr: Transactor, lease: Union[Lease[Any], bytes]) -> None:
        """Remove a claimed item for good: the work it stood for is done.

        Reads the lease (read conflict on it: an ack racing the item's redelivery
        conflicts), clears it and its deadline entry, decrements the counters.
        Cost: 1 read, 1 round trip, O(1) in n.

        Raises:
            LeaseExpiredError: the lease's deadline has passed (even if nobody took the
                item back yet) or the item is no longer held under it.
            TypeError or ValueError: ``lease`` is not a Lease or a lease token.
        """
        drive(self._ack(tr, lease))

    def _ack(self, tr: Transactor, lease: Union[Lease[Any], bytes]) -> Gen[None]:
        lease_id(lease)
        return self._loop(tr, self._leases.ack, lease)

    def ack_many(self, tr: Transactor, leases: Iterable[Union[Lease[Any], bytes]]) -> List[bool]:
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
        return drive(self._ack_many(tr, leases))

    def _ack_many(self, tr: Transactor, leases: Iterable[Union[Lease[Any], bytes]]
                  ) -> Gen[List[bool]]:
        batch = self._lease_batch(leases)
        if not batch:
            check_transactor(tr)
            return []
        return (yield from self._loop(tr, self._leases.ack_many, batch))

    def extend(self, tr: Transactor, lease: Union[Lease[Any], bytes], seconds: float) -> Lease[V]:
        """Keep working on a claimed item: its lease now ends ``seconds`` from now.

        Returns the lease with its new deadline; the lease keeps its identity, so the
        original Lease object and its token stay valid.  Reads the lease (read
        conflict), rewrites it and its deadline entry; a deadline moved earlier also
        touches the wake key (atomic), so waiters sleeping until the old deadline
        look again.  Cost: 1 read, 1 round trip, O(1) in n.

        Raises:
            LeaseExpiredError: the lease had already expired.
        """
        return drive(self._extend(tr, lease, seconds))

    def _extend(self, tr: Transactor, lease: Union[Lease[Any], bytes],
                seconds: float) -> Gen[Lease[V]]:
        seconds = check_seconds(seconds, "seconds")
        lease_id(lease)
        return cast("Gen[Lease[V]]", self._loop(tr, self._leases.extend, lease, seconds))

    def extend_many(self, tr: Transactor, leases: Iterable[Union[Lease[Any], bytes]],
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
        return drive(self._extend_many(tr, leases, seconds))

    def _extend_many(self, tr: Transactor, leases: Iterable[Union[Lease[Any], bytes]],
                     seconds: float) -> Gen[List[Optional[Lease[V]]]]:
        seconds = check_seconds(seconds, "seconds")
        batch = self._lease_batch(leases)
        if not batch:
            check_transactor(tr)
            return []
        extended = yield from self._loop(tr, self._leases.extend_many, batch, seconds)
        return cast("List[Optional[Lease[V]]]", extended)

    def release(self, tr: Transactor, lease: Union[Lease[Any], bytes], *,
                delay: Optional[float] = None, count: bool = True) -> bool:
        """Give a claimed item back, at its original place in the order: visible at
        once, or ``delay`` seconds from now (retry with backoff).

        Its delivery count goes up by one; once it has been delivered
        ``max_deliveries`` times it goes to the dead letters instead.  With
        ``count=False`` no delivery is counted (the item was not worked on: a
        worker shutting down, a job snoozed) and it never dies of this.  Returns
        False (and changes nothing) when the lease had already expired.  Reads the
        lease (read conflict), moves the item, touches the wake key.  Cost: 1 read,
        1 round trip, O(1) in n.
        """
        return drive(self._release(tr, lease, delay, count))

    def _release(self, tr: Transactor, lease: Union[Lease[Any], bytes],
                 delay: Optional[float], count: bool = True) -> Gen[bool]:
        versions = check_delay(delay)
        check_bool(count, "count")
        lease_id(lease)
        return self._loop(tr, self._leases.release, lease, versions, count)

    def bury(self, tr: Transactor, lease: Union[Lease[Any], bytes],
             reason: Optional[str] = None) -> bool:
        """Move a claimed item to the dead letters now, whatever its deliveries, with
        ``reason`` (see :attr:`fdbrecipes.DeadLetter.reason`): work that must not be
        tried again.  Returns False (and changes nothing) when the lease had already
        expired.  Reads the lease (read conflict), moves the item.  Cost: 1 read, 1
        round trip, O(1) in n.

        Raises:
            TypeError or ValueError: ``lease`` is not a Lease or a token; ``reason`` is
                not None or a str of at most 1,000 characters.
        """
        return drive(self._bury(tr, lease, reason))

    def _bury(self, tr: Transactor, lease: Union[Lease[Any], bytes],
              reason: Optional[str]) -> Gen[bool]:
        check_reason(reason)
        lease_id(lease)
        return self._loop(tr, self._leases.bury, lease, reason)

    # -- stuck work -----------------------------------------------------------------------

    def leases(self, tr: Transactor, limit: Optional[int] = None) -> List[LeaseInfo]:
        """The items in flight, oldest claim first (up to ``limit``): value,
        deliveries, deadline, when claimed, and the lease's token (which ``ack``,
        ``extend`` and ``release`` take: an operator can finish or give back work a
        consumer holds).

        Snapshot reads of the held range (no conflicts), 1,000 keys a round trip, in
        one transaction.  Cost: O(leases + delayed items) keys.
        """
        return drive(read(tr, self._listing.leases, check_limit(limit)))

    def delayed(self, tr: Transactor, limit: Optional[int] = None) -> List[DelayedItem]:
        """The delayed items, soonest first (up to ``limit``): value, when it becomes
        visible (a clock reading), deliveries so far.

        Snapshot reads of the deadline index and of each item (no conflicts), 1,000
        keys a round trip, in one transaction.  Cost: O(delayed items + leases) keys.
        """
        return drive(read(tr, self._listing.delayed, check_limit(limit)))

    def remove(self, tr: Transactor, *, id: bytes) -> Optional[V]:
        """Remove the pending item pushed with ``id`` (visible, or still delayed: this
        cancels a delayed push); its value, or None (nothing written) when there is
        none pending: never pushed, in flight (ack or release its lease), a dead
        letter, already gone.  The id is then forgotten after ``id_retention``, as
        when an item is popped.

        Reads the id's key and the item (read conflicts on both); clears the item,
        one counter update.  Conflicts with a concurrent take of the same item.
        Cost: 2 round trips, O(1) in n.

        Raises:
            TypeError or ValueError: ``id`` is not 1 to 1,000 bytes.
        """
        return drive(self._remove(tr, id))

    def _remove(self, tr: Transactor, id_: Any) -> Gen[Optional[V]]:
        checked = check_id(id_)
        if checked is None:
            raise TypeError("id must be bytes, not NoneType")
        return cast("Gen[Optional[V]]", self._loop(tr, self._listing.remove, checked))

    # -- dead letters --------------------------------------------------------------------

    def dead(self, tr: Transactor, limit: Optional[int] = None) -> List[DeadLetter]:
        """The dead letters, oldest first (up to ``limit``).

        Reads the dead-letter range (read conflict on the part read).  Cost: 1 round
        trip, O(k) keys for k dead letters.
        """
        return drive(self._dead_letters(tr, limit))

    def _dead_letters(self, tr: Transactor, limit: Optional[int]) -> Gen[List[DeadLetter]]:
        limit = check_limit(limit)
        if limit == 0:
            check_transactor(tr, writes=False)
            return []
        return (yield from read(tr, self._dead.letters, limit))

    def requeue_dead(self, tr: Transactor, limit: Optional[int] = None) -> int:
        """Push the oldest dead letters (up to ``limit``; all when None) back at the
        tail, delivery count reset, ids kept; return how many moved.

        Reads them (read conflict), the tail position by snapshot, writes each item
        and one counter update.  Given a Database, moves at most 1,000 per
        transaction, in as many transactions as needed; given a Transaction, at most
        1,000 (a larger ``limit``, or None with more dead letters, is refused).
        Cost: O(k) keys, O(k / 1,000) transactions.
        """
        return drive(self._requeue_dead(tr, limit))

    def _requeue_dead(self, tr: Transactor, limit: Optional[int]) -> Gen[int]:
        return self._dead_batches(tr, self._dead.requeue, check_limit(limit), "requeue_dead")

    def purge_dead(self, tr: Transactor) -> int:
        """Remove every dead letter for good; return how many.

        Reads them (their ids are forgotten after ``id_retention``), clears each,
        one counter update.  Given a Database, in transactions of 1,000; given a
        Transaction, refused when there are more than 1,000.  Cost: O(k) keys.
        """
        return drive(self._purge_dead(tr))

    def _purge_dead(self, tr: Transactor) -> Gen[int]:
        return self._dead_batches(tr, self._dead.purge, None, "purge_dead")

    def _dead_batches(self, tr: Transactor, op: Any, limit: Optional[int],
                      name: str) -> Gen[int]:
        """``op(tr, attempt, k)`` over the dead letters: given a Transaction once (at
        most :data:`DEAD_BATCH`), given a Database until ``limit`` (or all) are done."""
        if limit == 0:
            check_transactor(tr)
            return 0
        if is_transaction(tr):
            if limit is None:
                if (yield from read(tr, self._dead.count)) > DEAD_BATCH:
                    raise ValueError(f"{name}: more than {DEAD_BATCH:,} dead letters for "
                                     "one transaction; pass a Database (it splits the work)")
                limit = DEAD_BATCH
            elif limit > DEAD_BATCH:
                raise too_many("limit", DEAD_BATCH, limit)
            count: int = yield from self._loop(tr, op, limit)
            return count
        total = 0
        while limit is None or total < limit:
            ask = DEAD_BATCH if limit is None else min(DEAD_BATCH, limit - total)
            moved: int = yield from self._loop(tr, op, ask)
            total += moved
            if moved == 0:
                break
        return total

    # -- waiting ------------------------------------------------------------------------

    def wait(self, db: Any, timeout: Optional[float] = None) -> bool:
        """Block until an item is visible, or ``timeout`` seconds pass; True if one is.

        For consumers that pop in their own transactions: wait, then pop.  Blocks on a
        watch of the key every push touches, set in a transaction that writes nothing,
        and wakes when a lease or a delay ends.  Needs a Database.  Cost per wake-up:
        1 read-only check.
        """
        return drive(self._wait(db, timeout))

    def _wait(self, db: Any, timeout: Optional[float]) -> Gen[bool]:
        return wait_until_ready(db, timeout, self._wake(MIN))

    # -- what the public classes call --------------------------------------------------

    @staticmethod
    def _lease_batch(leases: Iterable[Union[Lease[Any], bytes]]) -> List[Union[Lease[Any], bytes]]:
        """``leases``, checked: each a Lease or token, at most :data:`MAX_TAKE`."""
        batch = materialize(leases, "leases")
        for i, lease in enumerate(batch):
            lease_id(lease, f"leases[{i}]")
        if len(batch) > MAX_TAKE:
            raise ValueError(f"leases: at most {MAX_TAKE:,} per call, got {len(batch):,}")
        return batch

    def _wake(self, end: int) -> Wake:
        return Wake(self._engine.k.wake_key, self._engine.ready, (end,), self._hooks)

    def _request(self, batch: Batch, id_: Optional[bytes], delay: Any,
                 name: str) -> PushRequest:
        """A validated push of ``batch`` (``name``: the argument it came from),
        refused if it cannot fit in a transaction."""
        versions = check_delay(delay)
        prefix = len(self.subspace.key())
        check_batch_bytes(sum(push_bytes(prefix, group, value, id_) for group, value in batch),
                          len(batch), name)
        if id_ is not None:  # the id becomes part of the item's key
            group = batch[0][0]
            check_key(self._engine.k.item_key(group + (2**64, bytes(20), 2**32, id_, 2**64)),
                      "id")
        return PushRequest(batch, id_, versions)

    def _push(self, tr: Transactor, request: PushRequest) -> Gen[None]:
        """Push a validated request."""
        if not request.batch:
            check_transactor(tr)
            return
        yield from self._loop(tr, self._engine.push, [request])

    def _restore(self, tr: Transactor) -> Gen[None]:
        """Given a Database: put back (or bury) a backlog of expired holds, if a reader
        saw one, in transactions of their own.  Pops and claims run it before their
        take (never after: what stopped it then would hide what the take took), so a
        mass expiry is dealt with in O(backlog) work in all.

        Housekeeping, not the caller's work: stopped by Ctrl-C it raises
        :class:`InterruptedCall` saying the call committed nothing of its own; an
        unknown outcome leaves the backlog to a later call (expired holds count as
        visible at their places meanwhile).
        """
        while self._engine.restore_pending and not is_transaction(tr, writes=False):
            check_database(tr, "tr")
            self._engine.restore_pending = False
            try:
                restored = yield from self._loop(tr, self._engine.restore, RESTORE_LIMIT)
            except KeyboardInterrupt as e:
                self._engine.restore_pending = True
                raise InterruptedCall(Outcome(False, None)) from e
            except UnknownResultError:
                self._engine.restore_pending = True
                return
            if restored >= RESTORE_LIMIT:
                self._engine.restore_pending = True

    def _pop(self, tr: Transactor, end: int, spread: Any) -> Gen[Optional[V]]:
        spread = check_spread(spread)
        yield from self._restore(tr)
        if self._high_contention and spread == 1 and not is_transaction(tr, writes=False):
            check_database(tr, "tr")
            popped = yield from self._contention.pop(tr, end)
        else:
            popped = yield from self._loop(tr, self._engine.pop_one, end, spread)
        return cast("Optional[V]", popped)  # a V went in: the caller's promise

    def _pop_many(self, tr: Transactor, end: int, n: Any, spread: Any) -> Gen[List[V]]:
        n, spread = check_int(n, "n", low=0), check_spread(spread)
        return self._take_many(tr, n, False, self._engine.pop, end, spread)

    def _claim_many(self, tr: Transactor, end: int, n: Any, lease_seconds: Any,
                    spread: Any) -> Gen[List[Lease[V]]]:
        n, spread = check_int(n, "n", low=0), check_spread(spread)
        seconds = check_seconds(lease_seconds, "lease_seconds")
        return self._take_many(tr, n, True, self._leases.claim, end, seconds, spread,
                               BATCH_BYTES)

    def _take_many(self, tr: Transactor, n: int, budgeted: bool, op: Any,
                   *args: Any) -> Gen[List[Any]]:
        """``op(tr, attempt, k, *args)`` for ``n`` items in all, in batches
        (:meth:`._run.Loop.batches`: at most :data:`MAX_TAKE` given a Transaction,
        transactions of :data:`TAKE_BATCH` given a Database), putting back a backlog
        of expired holds first."""
        yield from self._restore(tr)
        batch = self._hooks.batch or TAKE_BATCH
        return (yield from self._loop.batches(tr, op, n, args, MAX_TAKE, batch, budgeted))

    def _claim(self, tr: Transactor, end: int, lease_seconds: Any,
               spread: Any) -> Gen[Optional[Lease[V]]]:
        spread = check_spread(spread)
        seconds = check_seconds(lease_seconds, "lease_seconds")
        yield from self._restore(tr)
        lease = yield from self._loop(tr, self._leases.claim_one, end, seconds, spread)
        return cast("Optional[Lease[V]]", lease)

    def _peek(self, tr: Transactor, end: int) -> Gen[Optional[V]]:
        entries = yield from read(tr, self._engine.peek, end, 1)
        return cast("Optional[V]", decode_value(value_of(entries[0])) if entries else None)

    def _items(self, tr: Transactor, end: int, limit: Any) -> Gen[List[V]]:
        """The visible items in ``end`` order; given a Database, in pages, each its
        own transaction (not one snapshot: see :func:`._run.read_pages`)."""
        entries = yield from read_pages(tr, self._engine.peek, (end,), check_limit(limit))
        return cast("List[V]", [decode_value(value_of(e)) for e in entries])

    def _pop_wait(self, db: Any, end: int, timeout: Any) -> Gen[Optional[V]]:
        return take_or_wait(db, timeout, self._pop, (end, 1), self._wake(end))

    def _claim_wait(self, db: Any, end: int, lease_seconds: Any,
                    timeout: Any) -> Gen[Optional[Lease[V]]]:
        check_seconds(lease_seconds, "lease_seconds")
        return take_or_wait(db, timeout, self._claim, (end, lease_seconds, 1), self._wake(end))

    def _claiming(self, db: Any, end: int, lease_seconds: Any, timeout: Any,
                  release_delay: Any) -> Tuple[Gen[Optional[Lease[V]]], float]:
        """What ``claimed`` runs, its arguments checked: the claim (waiting), and the
        lease's length in seconds."""
        seconds = check_seconds(lease_seconds, "lease_seconds")
        check_delay(release_delay, "release_delay")
        check_timeout(timeout)
        check_database(db)
        return self._claim_wait(db, end, seconds, timeout), seconds

    def _claimed(self, db: Any, end: int, lease_seconds: Any, timeout: Any,
                 release_delay: Any) -> ContextManager[Optional[Lease[V]]]:
        claim, seconds = self._claiming(db, end, lease_seconds, timeout, release_delay)
        return claimed(self, db, claim, seconds, release_delay)
