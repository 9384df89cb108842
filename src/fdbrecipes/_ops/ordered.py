"""Queue's and PriorityQueue's operations object: every call, checked, as an operation.

:class:`OrderedOps` holds one structure's configuration, its engine (:mod:`.._ordered.engine` and
the modules beside it) and its retry loop; its subclasses, :class:`.kinds.QueueOps` and
:class:`.kinds.PriorityQueueOps`, check each structure's pushes.  Each method
checks its arguments (TypeError or ValueError, before anything is written) and
returns an operation (a generator, see :mod:`.._attempt`) for the structure's
retry loop or a read: ``Queue`` drives it with the blocking driver, ``AsyncQueue``
awaits it (:mod:`.._drivers`).  What each call reads, writes, conflicts with and costs
is said once, in the public classes' docstrings (:mod:`fdbrecipes.queue`,
:mod:`fdbrecipes._ordered_face`).  Ends are :data:`.._ordered.front.MIN` and
:data:`.._ordered.front.MAX` (``"min"`` and ``"max"``).
"""

from __future__ import annotations

import functools
from typing import (
    Any,
    Callable,
    ClassVar,
    Generic,
    Iterable,
    List,
    Mapping,
    Optional,
    Tuple,
    TypeVar,
    Union,
    cast,
)

from .._attempt import Attempt
from .._clock import Clock, database_clock
from .._codec import decoded
from .._fdb import Gen, Tally, Transactor, check_database, check_transactor, is_transaction
from .._ids import Ids
from .._layout import MAX_SHARDS, OrderedLayout, RecordLayout
from .._limits.gate import Gate
from .._limits.specs import check_uses
from .._ordered.contention import Contention
from .._ordered.counts import QueueStats
from .._ordered.dead import DEAD_BATCH, DeadLetter, DeadLetters
from .._ordered.engine import Ordered
from .._ordered.front import MIN, value_of
from .._ordered.leases import Lease, Leases, lease_id
from .._ordered.listing import DelayedItem, LeaseInfo, Listing
from .._ordered.paging import PendingItem, Row, lookup, pending
from .._ordered.requests import PushRequest
from .._ordered.sequences import Sequences, SequenceState, token_of
from .._ordered.shard_listing import ShardedDeadLetters, ShardedListing
from .._ordered.shards import (
    ShardedContention,
    ShardedEngine,
    ShardedLeases,
    Shards,
    make_shards,
    shard_spaces,
)
from .._ordered.unique import Unique, UniqueKeys
from .._receipts import InterruptedCall, Outcome, UnknownResultError
from .._records.history import check_error, check_job_id
from .._records.records import JobRecord, Records
from .._records.tokens import (
    optional,
    parse_any,
    parse_dead,
    parse_delayed,
    parse_pending,
    parse_removable,
    parse_tokens,
)
from .._retry import read, read_pages
from .._store_layout import LimitLayout
from .._values import (
    BATCH_BYTES,
    MAX_TAKE,
    TAKE_BATCH,
    V,
    check_bool,
    check_clock,
    check_delay,
    check_id,
    check_int,
    check_limit,
    check_reason,
    check_seconds,
    check_shards,
    check_spread,
    check_subspace,
    check_timeout,
    decode_value,
)
from .._waiting import Wake, take_or_wait, wait_until_ready
from .base import ClaimStep, JobOps
from .checks import check_end, lease_batch
from .layout_guard import LayoutGuard
from .pushes import PushChecks

__all__ = ["LeaseLike", "OrderedOps"]

#: A lease as the calls take it: the Lease, or its token.
LeaseLike = Union[Lease[Any], bytes]
#: Expired holds one restoring transaction puts back.
RESTORE_LIMIT = 1_000

T = TypeVar("T")


class OrderedOps(JobOps, Generic[V]):
    """What Queue and PriorityQueue run (see the module docstring); the arguments of
    the constructor are theirs.

    Unsharded (``shards`` 1), the engine and its leases, dead letters, listings and
    high-contention popper are one engine's (:mod:`.._ordered.engine` and the modules
    beside it); sharded, they are the classes of :mod:`.._ordered.shards` and
    :mod:`.._ordered.shard_listing`, which do the same over the shards.  Every call
    checks the stored layout first, once (:mod:`.layout_guard`).
    """

    group_len: ClassVar[int]  # key elements before the sequence number: 0 Queue, 1 priority
    kind: ClassVar[str]  # the kind a sharded structure's marker names

    engine: Union[Ordered, ShardedEngine]
    leasing: Union[Leases, ShardedLeases]
    dead_letters: Union[DeadLetters, ShardedDeadLetters]
    listing: Union[Listing, ShardedListing]
    contention: Union[Contention, ShardedContention]

    def __init__(self, subspace: Any, *, high_contention: bool = False,
                 clock: Optional[Clock] = None, id_retention: float = 3600.0,
                 result_timeout: float = 10.0, max_deliveries: Optional[int] = None,
                 history: Optional[float] = None, shards: int = 1, codec: Any = None,
                 limits: Any = None) -> None:
        subspace = check_subspace(subspace)
        uses = check_uses(limits)
        self.high_contention = check_bool(high_contention, "high_contention")
        timeout = check_seconds(result_timeout, "result_timeout")
        self.shards = check_shards(shards, MAX_SHARDS)
        super().__init__(subspace, id_retention, max_deliveries, history, codec)
        self.records = Records(RecordLayout(subspace, subspace["o"]), self.history)
        parts = make_shards(shard_spaces(subspace, self.shards), self.group_len,
                            check_clock(clock) or database_clock,
                            Ids(subspace, self.id_retention), max_deliveries, self.records,
                            Gate(LimitLayout(uses[0].space), uses, self.values) if uses else None,
                            self.workflows)
        #: the limits its jobs carry (see fdbrecipes.Limits.use)
        self.limits = uses
        self.layouts: List[OrderedLayout] = [part.engine.keys for part in parts]
        self.guard = LayoutGuard(subspace, self.kind, self.shards, self.layouts[0].pushed)
        #: the checks that make each push call's request (see :mod:`.pushes`)
        self.pushes = PushChecks(uses, self.history, self.shards, len(subspace.key()),
                                 self.layouts[-1])
        if self.shards == 1:
            self.engine, self.leasing, self.dead_letters, self.listing = parts[0]
            self.engine.unique = UniqueKeys(subspace)
            self.engine.sequences = Sequences(subspace)
            self.contention = Contention(parts[0].engine, self.loop, self.hooks, timeout)
        else:
            spread = Shards(parts, self.group_len)
            self.engine, self.leasing = ShardedEngine(spread), ShardedLeases(spread)
            self.dead_letters, self.listing = ShardedDeadLetters(spread), ShardedListing(spread)
            self.contention = ShardedContention(spread, self.loop, self.hooks, timeout)

    @property
    def wake_key(self) -> bytes:
        """The key every push (and every write that makes an item visible) touches; in
        a sharded structure, shard 0's (see :attr:`wake_keys`)."""
        return self.layouts[0].wake_key

    @property
    def wake_keys(self) -> Tuple[bytes, ...]:
        """The wake keys of every shard: each push (and each write that makes an item
        visible) touches its shard's."""
        return tuple(layout.wake_key for layout in self.layouts)

    @property
    def pause_keys(self) -> Tuple[bytes, ...]:
        """The pause flag of every shard (``S/"d"``: read with the earliest deadlines;
        a shard's, with its own)."""
        return tuple(layout.paused for layout in self.layouts)

    # -- pushing ---------------------------------------------------------------------

    def push(self, tr: Transactor, request: PushRequest) -> Gen[None]:
        """Push a checked request."""
        if not request.batch:
            check_transactor(tr)
            return
        yield from self.push_requests(tr, [request])

    def push_requests(self, tr: Transactor, requests: List[PushRequest]) -> Gen[List[bool]]:
        """Push checked requests in one transaction (a shared one: see :mod:`.._drivers.sharing`);
        for each, whether it stored its items.  Unsharded, those with no ids (the common
        push) go to :meth:`.._ordered.engine.Ordered.push_plain`: it reads only the tail."""
        engine = self.engine
        op: Callable[..., Gen[List[bool]]] = engine.push
        if isinstance(engine, Ordered) and all(r.plain() for r in requests):
            op = engine.push_plain
        return self.guarded(tr, self.loop(tr, op, requests), True)

    def job_request(self, value: Any, id_: Optional[bytes], delay: Optional[float],
                    where: Mapping[str, Any], time_limit: Optional[float] = None,
                    limit_keys: Any = None) -> PushRequest:
        """The request of :meth:`push_job` (see the subclasses)."""
        raise NotImplementedError

    def push_job(self, tr: Transactor, value: Any, *, id: Optional[bytes] = None,
                 delay: Optional[float] = None, time_limit: Optional[float] = None,
                 limit_keys: Any = None, **where: Any) -> Gen[Optional[bytes]]:
        """Push one value with ``id``, ``delay``, ``time_limit`` and ``limit_keys``
        (and, for a PriorityQueue, ``priority=``, default 0), as the structure's
        ``push``: see :class:`fdbrecipes.protocol.Workable`; the item's id (given, or
        made by a structure with ``history``)."""
        return self.pushed(tr, self.job_request(value, id, delay, where, time_limit,
                                                limit_keys))

    def pushed(self, tr: Transactor, request: PushRequest) -> Gen[Optional[bytes]]:
        """Push a checked request of one item; its id (see :meth:`PushRequest.answer`)."""
        yield from self.push(tr, request)
        return request.answer()

    def unblock(self, tr: Transactor, key: Any) -> Gen[Optional[bytes]]:
        """Move sequence ``key`` on past its dead head; the dead head's id, or None."""
        engine, token = self.unsharded("sequence"), token_of(key)
        assert engine.sequences is not None
        return (yield from self.loop(tr, engine.sequences.unblock, engine, token))

    def sequence(self, tr: Transactor, key: Any) -> Gen[SequenceState]:
        """Sequence ``key``'s state (a read)."""
        engine, token = self.unsharded("sequence"), token_of(key)
        assert engine.sequences is not None
        return (yield from read(tr, engine.sequences.state, token))

    def unsharded(self, what: str) -> Ordered:
        """The engine of an unsharded structure.

        Raises:
            ValueError: the structure has shards (``what`` needs none).
        """
        if not isinstance(self.engine, Ordered):
            raise ValueError(f"{what} needs an unsharded structure (shards=1)")
        return self.engine

    def unique_job(self, tr: Transactor, key: Any) -> Gen[Optional[bytes]]:
        """The id of the job holding unique key ``key``, or None (a read)."""
        token = Unique(key).token
        engine = self.unsharded("unique")
        assert engine.unique is not None
        return (yield from read(tr, engine.unique.holding, token, engine.clock))

    # -- taking ------------------------------------------------------------------------

    def restore(self, tr: Transactor) -> Gen[None]:
        """Given a Database: put back (or bury) a backlog of expired holds, if a reader
        saw one, in transactions of their own.  Pops and claims run it before their
        take (never after: what stopped it then would hide what the take took), so a
        mass expiry is dealt with in O(backlog) work in all.

        Housekeeping, not the caller's work: stopped by Ctrl-C it raises
        :class:`InterruptedCall` saying the call committed nothing of its own; an
        unknown outcome leaves the backlog to a later call (expired holds count as
        visible at their places meanwhile).
        """
        engine = self.engine
        while engine.restore_pending and not is_transaction(tr, writes=False):
            check_database(tr, "tr")
            engine.restore_pending = False
            try:
                restored = yield from self.loop(tr, engine.restore, RESTORE_LIMIT)
            except KeyboardInterrupt as e:
                engine.restore_pending = True
                raise InterruptedCall(Outcome(False, None)) from e
            except UnknownResultError:
                engine.restore_pending = True
                return
            if restored >= RESTORE_LIMIT:
                engine.restore_pending = True

    @decoded()
    def pop(self, tr: Transactor, end: str, spread: Any) -> Gen[Optional[V]]:
        """Pop one value at ``end`` (high-contention given a Database, if configured)."""
        spread = check_spread(spread)
        yield from self.guarded(tr, self.restore(tr), True)
        if self.high_contention and spread == 1 and not is_transaction(tr, writes=False):
            check_database(tr, "tr")
            popped = yield from self.contention.pop(tr, end)
        else:
            popped = yield from self.loop(tr, self.engine.pop_one, end, spread)
        return cast("Optional[V]", popped)  # a V went in: the caller's promise

    @decoded()
    def pop_many(self, tr: Transactor, end: str, n: Any, spread: Any) -> Gen[List[V]]:
        """Pop up to ``n`` values at ``end``, in batches."""
        n, spread = check_int(n, "n", low=0), check_spread(spread)
        return self.take_many(tr, n, False, self.engine.pop, end, spread)

    @decoded()
    def claim(self, tr: Transactor, end: str, lease_seconds: Any,
              spread: Any) -> Gen[Optional[Lease[V]]]:
        """Claim one item at ``end``."""
        spread = check_spread(spread)
        seconds = check_seconds(lease_seconds, "lease_seconds")
        yield from self.guarded(tr, self.restore(tr), True)
        lease = yield from self.loop(tr, self.leasing.claim_one, end, seconds, spread)
        return cast("Optional[Lease[V]]", lease)

    @decoded()
    def claim_many(self, tr: Transactor, n: Any, lease_seconds: Any, *, spread: Any = 1,
                   end: Any = MIN, holder: Optional[str] = None) -> Gen[List[Lease[V]]]:
        """Claim up to ``n`` items at ``end``, in batches (see
        :class:`fdbrecipes.protocol.Workable`; ``holder``: the worker, for the jobs'
        records)."""
        n = check_int(n, "n", low=0)
        step = self.claim_step(lease_seconds, spread, end, holder)
        return self.take_many(tr, n, True, step.claim)

    def claim_step(self, lease_seconds: Any, spread: Any, end: Any,
                   holder: Optional[str]) -> ClaimStep:
        end = check_end(end, self.group_len)
        spread = check_spread(spread)
        seconds = check_seconds(lease_seconds, "lease_seconds")
        return ClaimStep(self.leasing.claim, dict(end=end, seconds=seconds, spread=spread,
                                                  budget=BATCH_BYTES, holder=holder),
                         self.hooks.batch or TAKE_BATCH)

    def before_claim(self, tr: Transactor) -> Gen[None]:
        return self.restore(tr)

    def take_many(self, tr: Transactor, n: int, budgeted: bool, op: Any,
                  *args: Any) -> Gen[List[Any]]:
        """``op(tr, attempt, k, *args)`` for ``n`` items in all, in batches
        (:meth:`.._retry.RetryLoop.batches`: at most :data:`MAX_TAKE` given a
        Transaction, transactions of :data:`TAKE_BATCH` given a Database), putting
        back a backlog of expired holds first."""
        yield from self.guarded(tr, self.restore(tr), True)
        batch = self.hooks.batch or TAKE_BATCH
        return (yield from self.loop.batches(tr, op, n, args, MAX_TAKE, batch, budgeted))

    def wake(self, end: str) -> Wake:
        """How a waiter at ``end`` knows when to look again."""
        return Wake(self.wake_keys, self.engine.ready, (end,), self.hooks)

    def pop_wait(self, db: Any, end: str, timeout: Any) -> Gen[Optional[V]]:
        """Pop at ``end``, waiting on the watch until an item is visible."""
        return take_or_wait(db, timeout, self.pop, (end, 1), self.wake(end))

    def claim_wait(self, db: Any, end: str, lease_seconds: Any,
                   timeout: Any) -> Gen[Optional[Lease[V]]]:
        """Claim at ``end``, waiting on the watch until an item is visible."""
        check_seconds(lease_seconds, "lease_seconds")
        claim = functools.partial(self.claim, end=end, lease_seconds=lease_seconds, spread=1)
        return take_or_wait(db, timeout, claim, (), self.wake(end))

    def claiming(self, db: Any, end: str, lease_seconds: Any, timeout: Any,
                 release_delay: Any) -> Tuple[Gen[Optional[Lease[V]]], float]:
        """What ``claimed`` runs, its arguments checked: the claim (waiting), and the
        lease's length in seconds."""
        seconds = check_seconds(lease_seconds, "lease_seconds")
        check_delay(release_delay, "release_delay")
        check_timeout(timeout)
        check_database(db)
        return self.claim_wait(db, end, seconds, timeout), seconds

    def wait(self, db: Any, timeout: Optional[float] = None) -> Gen[bool]:
        """Wait until an item is visible (True) or ``timeout`` passes (False)."""
        check_timeout(timeout)
        return self.guarded(db, wait_until_ready(db, timeout, self.wake(MIN)))

    # -- reading -----------------------------------------------------------------------

    @decoded()
    def peek(self, tr: Transactor, end: str) -> Gen[Optional[V]]:
        """The value a pop at ``end`` would take now."""
        entries = yield from self.guarded(tr, read(tr, self.engine.peek, end, 1))
        return cast("Optional[V]", decode_value(value_of(entries[0])) if entries else None)

    @decoded()
    def items(self, tr: Transactor, limit: Any, end: Any = MIN) -> Gen[List[V]]:
        """The visible items in ``end`` order; given a Database, in pages, each its
        own transaction (not one snapshot: see :func:`.._retry.read_pages`)."""
        end = check_end(end, self.group_len)
        limit = check_limit(limit)
        entries = yield from self.guarded(tr, read_pages(tr, self.engine.peek, (end,), limit))
        return cast("List[V]", [decode_value(value_of(e)) for e in entries])

    def is_empty(self, tr: Transactor) -> Gen[bool]:
        """Whether no item is visible."""
        return not (yield from self.guarded(tr, read(tr, self.engine.peek, MIN, 1)))

    def size(self, tr: Transactor) -> Gen[int]:
        """Items visible, delayed and in flight."""
        return self.guarded(tr, read(tr, self.engine.size))

    def stats(self, tr: Transactor) -> Gen[QueueStats]:
        """Where the items are."""
        return self.guarded(tr, read(tr, self.engine.stats))

    @decoded()
    def pending(self, tr: Transactor, limit: Any = None, end: Any = MIN,
                after: Any = None) -> Gen[List[PendingItem]]:
        """The visible items in ``end`` order with their tokens, after the item the
        token ``after`` names; given a Database, in pages (see :meth:`items`); a
        sharded structure's, every shard's merged by place."""
        end = check_end(end, self.group_len)
        first = optional(parse_pending, after, self.group_len)
        limit = check_limit(limit)
        if isinstance(self.listing, ShardedListing):
            return self.guarded(tr, read_pages(tr, self.listing.pending, (end, first), limit))
        return self.guarded(tr, read_pages(tr, pending, (self.engine, end, first), limit))

    @decoded()
    def leases(self, tr: Transactor, limit: Any = None,
               after: Any = None) -> Gen[List[LeaseInfo]]:
        """The items in flight, oldest claim first, after the lease ``after``."""
        hold_id = None if after is None else lease_id(after, "after")
        return self.guarded(tr, read(tr, self.listing.leases, check_limit(limit), hold_id))

    @decoded()
    def delayed(self, tr: Transactor, limit: Any = None,
                after: Any = None) -> Gen[List[DelayedItem]]:
        """The delayed items, soonest first, after the one the token ``after`` names."""
        return self.guarded(tr, read(tr, self.listing.delayed, check_limit(limit),
                                     optional(parse_delayed, after, self.group_len)))

    @decoded()
    def dead(self, tr: Transactor, limit: Any = None,
             after: Any = None) -> Gen[List[DeadLetter]]:
        """The dead letters, oldest first, after the one the token ``after`` names."""
        limit = check_limit(limit)
        at = optional(parse_dead, after, self.group_len)
        if limit == 0:
            check_transactor(tr, writes=False)
            return []
        return (yield from self.guarded(tr, read(tr, self.dead_letters.letters, limit, at)))

    # -- changing ----------------------------------------------------------------------

    def clear(self, tr: Transactor) -> Gen[None]:
        """Remove every item, waiting pop and remembered id."""
        return self.guarded(tr, self.loop.idempotent(tr, self.engine.clear), True)

    @decoded()
    def remove(self, tr: Transactor, id_: Any) -> Gen[Optional[V]]:
        """Remove the pending item pushed with ``id_``; its value, or None."""
        checked = check_id(id_)
        if checked is None:
            raise TypeError("id must be bytes, not NoneType")
        removing = functools.partial(self.listing.remove, tell=True)  # a node: its step
        return cast("Gen[Optional[V]]", self.guarded(tr, self.loop(tr, removing, checked), True))

    @decoded()
    def lookup(self, tr: Transactor, token: Any) -> Gen[Optional[Row]]:
        """The row ``token`` names, as its listing would list it now; None if gone."""
        named = parse_any(token, self.group_len)
        if isinstance(self.listing, ShardedListing):
            return self.guarded(tr, read(tr, self.listing.lookup, named))
        return self.guarded(tr, read(tr, lookup, self.listing, self.dead_letters, named))

    @decoded()
    def remove_many(self, tr: Transactor, tokens: Any) -> Gen[List[Optional[V]]]:
        """Remove the pending items the tokens name (of ``pending`` or ``delayed``
        rows), in one transaction; for each, its value or None."""
        places = parse_tokens(tokens, parse_removable, self.group_len)
        if not places:
            check_transactor(tr)
            return []
        removed = yield from self.guarded(
            tr, self.loop(tr, functools.partial(self.listing.remove_at, tell=True), places), True)
        return cast("List[Optional[V]]", removed)

    def requeue_dead(self, tr: Transactor, limit: Any = None,
                     tokens: Any = None) -> Gen[int]:
        """Push the oldest dead letters (or those ``tokens`` name) back; how many
        moved."""
        if tokens is not None:
            return self.dead_named(tr, self.dead_letters.requeue, limit, tokens)
        return self.guarded(tr, self.loop.counted(
            tr, self.dead_letters.requeue, check_limit(limit), DEAD_BATCH, "requeue_dead",
            "dead letters", self.dead_letters.count), True)

    def purge_dead(self, tr: Transactor, tokens: Any = None) -> Gen[int]:
        """Remove every dead letter (or those ``tokens`` name); how many."""
        if tokens is not None:
            return self.dead_named(tr, self.dead_letters.purge, None, tokens)
        return self.guarded(tr, self.loop.counted(
            tr, self.dead_letters.purge, None, DEAD_BATCH, "purge_dead", "dead letters",
            self.dead_letters.count), True)

    def dead_named(self, tr: Transactor, op: Callable[..., Gen[int]], limit: Any,
                   tokens: Any) -> Gen[int]:
        """``op`` (a requeue or purge) on the dead letters ``tokens`` name, in one
        transaction."""
        if limit is not None:
            raise TypeError("give limit or tokens, not both")
        places = parse_tokens(tokens, parse_dead, self.group_len)
        if not places:
            check_transactor(tr)
            return 0
        return (yield from self.guarded(tr, self.loop(tr, op, DEAD_BATCH, places), True))

    # -- leases ------------------------------------------------------------------------

    def ack(self, tr: Transactor, lease: LeaseLike) -> Gen[None]:
        """Remove a claimed item for good."""
        lease_id(lease)
        return self.guarded(tr, self.loop(tr, self.leasing.ack, lease), True)

    def ack_many(self, tr: Transactor, leases: Iterable[LeaseLike]) -> Gen[List[bool]]:
        """Ack every lease still alive; for each, whether it was acked."""
        batch = lease_batch(leases)
        if not batch:
            check_transactor(tr)
            return []
        return (yield from self.guarded(tr, self.loop(tr, self.leasing.ack_many, batch), True))

    def ack_batches(self, tr: Transactor, batches: List[List[LeaseLike]]) -> Gen[List[List[bool]]]:
        """Ack the checked leases of several calls in one transaction (a shared one:
        see :mod:`fdbrecipes.aio._combine`); each call's answers."""
        return self.guarded(tr, self.loop(tr, self.leasing.ack_batches, batches), True)

    @decoded()
    def extend(self, tr: Transactor, lease: LeaseLike, seconds: Any) -> Gen[Lease[V]]:
        """Move a live lease's deadline to ``seconds`` from now."""
        seconds = check_seconds(seconds, "seconds")
        lease_id(lease)
        return cast("Gen[Lease[V]]",
                    self.guarded(tr, self.loop(tr, self.leasing.extend, lease, seconds), True))

    @decoded()
    def extend_many(self, tr: Transactor, leases: Iterable[LeaseLike],
                    seconds: Any) -> Gen[List[Optional[Lease[V]]]]:
        """Extend every live lease; for each, the renewed lease or None."""
        seconds = check_seconds(seconds, "seconds")
        batch = lease_batch(leases)
        if not batch:
            check_transactor(tr)
            return []
        extended = yield from self.guarded(
            tr, self.loop(tr, self.leasing.extend_many, batch, seconds), True)
        return cast("List[Optional[Lease[V]]]", extended)

    def release(self, tr: Transactor, lease: LeaseLike, delay: Any = None,
                count: Any = True, error: Any = None) -> Gen[bool]:
        """Give a claimed item back (after ``delay``; ``count``: a delivery; ``error``:
        a :class:`JobError` the job failed with)."""
        versions = check_delay(delay)
        check_bool(count, "count")
        lease_id(lease)
        return self.guarded(tr, self.loop(tr, self.leasing.release, lease, versions, count,
                                          check_error(error)), True)

    def bury(self, tr: Transactor, lease: LeaseLike, reason: Any = None,
             error: Any = None) -> Gen[bool]:
        """Move a claimed item to the dead letters now, with ``reason`` (``error``: a
        :class:`JobError` the job failed with)."""
        check_reason(reason)
        lease_id(lease)
        return self.guarded(tr, self.loop(tr, self.leasing.bury, lease, reason,
                                          check_error(error)), True)

    # -- job records (see JobOps) -------------------------------------------------------

    def listing_at(self, where: Tuple[Any, ...]) -> Any:
        return self.listing

    def records_at(self, where: Tuple[Any, ...]) -> Records:
        return self.records

    def lease_where(self, lease: Any) -> Tuple[Any, ...]:
        return ()

    def check_lease(self, lease: Any, name: str) -> Any:
        return lease_id(lease, name)

    def backlog(self, tr: Any) -> Gen[Optional[int]]:
        stats = yield from self.engine.stats(tr)
        return stats.visible

    def wake_waiters(self, tr: Any, attempt: Attempt) -> None:
        tally = Tally()
        self.engine.wake(tally)
        tally.write(tr, attempt)

    def ack_results(self, tr: Any, attempt: Attempt, leases: List[Any],
                    results: List[Optional[bytes]], states: List[str]) -> Gen[List[bool]]:
        return self.leasing.ack_many(tr, attempt, leases, results, states)

    @decoded()
    def job(self, tr: Transactor, id_: Any) -> Gen[Optional[JobRecord]]:
        """Job ``id_``'s record, as it is at the read version; None if unknown."""
        return self.guarded(tr, self.job_at(tr, check_job_id(id_), ()))

    @decoded()
    def result(self, db: Any, id_: Any, timeout: Any = None) -> Gen[Any]:
        """Wait until job ``id_`` is finished; its result (or raise its failure)."""
        return self.guarded(db, self.result_at(db, check_job_id(id_), (), timeout))

    def cancel(self, tr: Transactor, id_: Any) -> Gen[Optional[str]]:
        """Cancel job ``id_``; what became of it (see ``Queue.cancel``)."""
        return self.guarded(tr, self.cancel_at(tr, check_job_id(id_), ()), True)

