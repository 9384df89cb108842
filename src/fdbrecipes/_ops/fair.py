"""FairQueue's operations object: every call, checked, as an operation.

:class:`FairOps` holds one fair queue's configuration, its engine (:mod:`.._fair.engine`) and
its retry loop; each method checks its arguments (TypeError or ValueError, before
anything is written) and returns an operation that ``FairQueue`` drives and
``AsyncFairQueue`` awaits (one group seen as a queue, for the tools that look into one
queue at a time, is :class:`~.fair_group.GroupOps`, above this module).  What each call
reads, writes, conflicts with and costs is said in :mod:`fdbrecipes.fair_queue`.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple, TypeVar, Union

from fdb.subspace_impl import Subspace

from .._attempt import Attempt
from .._clock import Clock, database_clock
from .._codec import decoded
from .._fair.engine import Fair
from .._fair.parts import (
    FairLease,
    FairStats,
    GroupView,
    Policy,
    check_group,
    check_rate,
    check_share,
    fair_token,
    parse_fair,
)
from .._fair.stats import GATHERED, read_all_stats, read_group_stats, read_totals, read_views
from .._fdb import Gen, Transactor, check_database, check_transactor
from .._layout import MAX_SHARDS, FairLayout
from .._limits.gate import Gate
from .._limits.specs import check_limit_keys, check_uses, with_limit_keys
from .._ordered.counts import QueueStats
from .._ordered.dead import DeadLetter
from .._ordered.front import MIN, value_of
from .._ordered.leases import expired, lease_id
from .._ordered.listing import DelayedItem, LeaseInfo
from .._ordered.paging import PendingItem, Row, lookup, pending
from .._ordered.requests import PushRequest
from .._ordered.shard_listing import ShardedListing
from .._records.history import check_error, check_job_id, check_time_limit, made_ids
from .._records.records import RUNNING, JobRecord, Records
from .._records.tokens import (
    Named,
    TimedPlace,
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
    Value,
    check_batch_bytes,
    check_bool,
    check_clock,
    check_delay,
    check_id,
    check_int,
    check_limit,
    check_reason,
    check_seconds,
    check_shards,
    check_subspace,
    check_timeout,
    decode_value,
    encode_value,
    materialize,
    push_bytes,
    unpack_token,
)
from .._waiting import Wake, take_or_wait, wait_until_ready
from .base import ClaimStep, JobOps
from .checks import check_end, lease_batch
from .layout_guard import LayoutGuard

__all__ = ["FairOps", "GroupPush"]

T = TypeVar("T")
U = TypeVar("U")
#: A FairQueue lease as the calls take it: the FairLease, or its token.
FairLeaseLike = Union[FairLease, bytes]
#: Claims one transaction makes given a Database (a claim_many in a caller's
#: transaction takes at most :data:`MOST_CLAIMS`).
CLAIM_BATCH = 16
MOST_CLAIMS = 100
#: Dead letters one call of requeue_dead and purge_dead moves at most.
DEAD_CALL = 1_000


class GroupPush(NamedTuple):
    """A checked push into one group: the group, and the request."""

    group: Any
    request: PushRequest


class FairOps(JobOps):
    """What FairQueue runs (see the module docstring); the arguments of the
    constructor are its."""

    where_len = 1  # finished records are indexed with their group

    def __init__(self, subspace: Any, *, default_share: int = 1,
                 default_limit: Optional[int] = None, max_deliveries: Optional[int] = None,
                 id_retention: float = 3600.0, clock: Optional[Clock] = None,
                 history: Optional[float] = None, shards: int = 1, codec: Any = None,
                 limits: Any = None) -> None:
        subspace = check_subspace(subspace)
        uses = check_uses(limits)
        share = check_share(default_share, "default_share")
        limit = None if default_limit is None else check_int(default_limit, "default_limit",
                                                             low=0)
        self.shards = check_shards(shards, MAX_SHARDS)
        super().__init__(subspace, id_retention, max_deliveries, history, codec)
        #: the shared limits its jobs carry (see fdbrecipes.Limits.use)
        self.limits = uses
        layout = FairLayout(subspace)
        self.engine = Fair(layout, check_clock(clock) or database_clock,
                           Policy(share, limit, None), max_deliveries, self.id_retention,
                           self.history, self.shards, self.workflows,
                           Gate(LimitLayout(uses[0].space), uses, self.values) if uses else None)
        self.guard = LayoutGuard(subspace, "fair-queue", self.shards, layout.pushed)

    @property
    def wake_key(self) -> bytes:
        """The key every push, ack and release touches; in a sharded FairQueue, shard
        0's (see :attr:`wake_keys`)."""
        return self.engine.keys.pushed

    @property
    def wake_keys(self) -> Tuple[bytes, ...]:
        """Every shard's wake key: each push, ack and release touches one."""
        return tuple(keys.pushed for keys in self.engine.shard_keys)

    @property
    def pause_keys(self) -> Tuple[bytes, ...]:
        """The pause flag (``S/"z"``: one for every shard, read by each claim)."""
        return (self.engine.keys.paused,)

    # -- groups ------------------------------------------------------------------------

    def set_group(self, tr: Transactor, group: Any, share: Any, limit: Any,
                  rate: Any) -> Gen[None]:
        """Set how ``group`` is served (None: the queue's defaults; no rate)."""
        g = check_group(group)
        default = self.engine.default
        policy = Policy(default.share if share is None else check_share(share),
                        default.limit if limit is None else check_int(limit, "limit", low=0),
                        check_rate(rate))
        return self.guarded(tr, self.loop(tr, self.engine.set_group, g, policy), True)

    def group_policy(self, tr: Transactor, group: Any) -> Gen[Policy]:
        """The policy ``group`` is served by."""
        return self.guarded(tr, read(tr, self.engine.group_policy, check_group(group)))

    def lottery(self, tr: Transactor) -> Gen[Dict[Any, int]]:
        """The groups a claim may pick now, with their shares."""
        rows = yield from self.guarded(tr, read(tr, self.engine.tree.items, None))
        return {check_group(group): weight for _, group, weight in rows}

    def groups(self, tr: Transactor, limit: Any = None, after: Any = None) -> Gen[List[Any]]:
        """The groups with work or a policy, in key order, after the group ``after``."""
        first = None if after is None else check_group(after, "after")
        return self.guarded(tr, read(tr, self.engine.groups, check_limit(limit), first))

    # -- pushing -----------------------------------------------------------------------

    def request(self, group: Any, value: Value, id_: Any, delay: Any,
                time_limit: Any = None, limit_keys: Any = None) -> GroupPush:
        """The checked push of one value into ``group``."""
        g = check_group(group)
        return self.make_push(g, [((), self.values.encoded(value))], check_id(id_), delay, "value",
                              time_limit, limit_keys)

    def requests(self, group: Any, values: Iterable[Value], delay: Any,
                 time_limit: Any = None, limit_keys: Any = None) -> GroupPush:
        """The checked push of every value of ``values`` into ``group``, in order."""
        g = check_group(group)
        batch = [((), self.values.encoded(v, f"values[{i}]"))
                 for i, v in enumerate(materialize(values, "values"))]
        return self.make_push(g, batch, None, delay, "values", time_limit, limit_keys)

    def make_push(self, g: Any, batch: List[Tuple[Any, bytes]], id_: Optional[bytes],
                  delay: Any, name: str, time_limit: Any,
                  limit_keys: Any = None) -> GroupPush:
        """``batch`` for group ``g``, refused if it cannot fit in a transaction (a
        structure with job records makes an id for every item pushed without one;
        ``limit_keys``: the jobs' keys under the shared limits, stored after each
        value, see :func:`.._limits.specs.with_limit_keys`)."""
        keyed = check_limit_keys(limit_keys, self.limits)
        batch = [(group, with_limit_keys(value, keyed, name)) for group, value in batch]
        versions = check_delay(delay)
        limit = check_time_limit(time_limit, self.history)
        made = made_ids(len(batch), id_, self.history)
        sample = id_ if id_ is not None else (made[0] if made else None)
        prefix = len(self.subspace.key()) + len(encode_value(g)) + 2
        check_batch_bytes(sum(push_bytes(prefix, (), value, sample) for _, value in batch),
                          len(batch), name)
        return GroupPush(g, PushRequest(batch, id_, versions, made, limit))

    def push(self, tr: Transactor, push: GroupPush) -> Gen[None]:
        """Push a checked request into its group."""
        if not push.request.batch:
            check_transactor(tr)
            return
        yield from self.guarded(tr, self.loop(tr, self.engine.push, push.group, push.request),
                                True)

    def push_job(self, tr: Transactor, value: Any, *, id: Optional[bytes] = None,
                 delay: Optional[float] = None, time_limit: Optional[float] = None,
                 limit_keys: Any = None, **where: Any) -> Gen[Optional[bytes]]:
        """Push one value into ``group=`` (required), with ``id``, ``delay``,
        ``time_limit`` and ``limit_keys``: see :class:`fdbrecipes.protocol.Workable`;
        the item's id."""
        unknown = set(where) - {"group"}
        if unknown:
            raise TypeError(f"a FairQueue takes no {', '.join(sorted(unknown))}")
        if "group" not in where:
            raise TypeError("a FairQueue job needs group=")
        return self.pushed(tr, self.request(where["group"], value, id, delay, time_limit,
                                            limit_keys))

    def pushed(self, tr: Transactor, push: GroupPush) -> Gen[Optional[bytes]]:
        """Push a checked request of one item; its id."""
        yield from self.push(tr, push)
        return push.request.item_id(0)

    # -- claiming ----------------------------------------------------------------------

    @decoded()
    def claim(self, tr: Transactor, lease_seconds: Any) -> Gen[Optional[FairLease]]:
        """Claim one item of a group picked by lottery."""
        seconds = check_seconds(lease_seconds, "lease_seconds")
        return self.guarded(tr, self.loop(tr, self.engine.claim, seconds), True)

    @decoded()
    def claim_many(self, tr: Transactor, n: Any, lease_seconds: Any, *, spread: Any = 1,
                   end: Any = MIN, holder: Optional[str] = None) -> Gen[List[FairLease]]:
        """Up to ``n`` claims, each of a group picked by lottery (see
        :class:`fdbrecipes.protocol.Workable`: ``spread`` has no use here, and the
        only end is "min"; ``holder``: the worker, for the jobs' records)."""
        n = check_int(n, "n", low=0)
        step = self.claim_step(lease_seconds, spread, end, holder)
        return self.guarded(tr, self.loop.batches(tr, step.claim, n, (), MOST_CLAIMS,
                                                  step.most, what="claims"), True)

    def claim_step(self, lease_seconds: Any, spread: Any, end: Any,
                   holder: Optional[str]) -> ClaimStep:
        check_end(end, 0)
        check_int(spread, "spread", low=1)
        seconds = check_seconds(lease_seconds, "lease_seconds")
        return ClaimStep(self.engine.claim_many, dict(seconds=seconds, holder=holder),
                         self.hooks.batch or CLAIM_BATCH)

    def wake(self) -> Wake:
        """How a waiter knows when to look again."""
        return Wake(self.wake_keys, self.engine.ready, (), self.hooks)

    def claim_wait(self, db: Any, lease_seconds: Any, timeout: Any) -> Gen[Optional[FairLease]]:
        """Claim, waiting on the watch until a group can be served."""
        check_seconds(lease_seconds, "lease_seconds")
        return take_or_wait(db, timeout, self.claim, (lease_seconds,), self.wake())

    def claiming(self, db: Any, lease_seconds: Any, timeout: Any,
                 release_delay: Any) -> Tuple[Gen[Optional[FairLease]], float]:
        """What ``claimed`` runs, its arguments checked: the claim (waiting), and the
        lease's length in seconds."""
        seconds = check_seconds(lease_seconds, "lease_seconds")
        check_delay(release_delay, "release_delay")
        check_timeout(timeout)
        check_database(db)
        return self.claim_wait(db, seconds, timeout), seconds

    def wait(self, db: Any, timeout: Optional[float] = None) -> Gen[bool]:
        """Wait until a group can be served (True) or ``timeout`` passes (False)."""
        check_timeout(timeout)
        return self.guarded(db, wait_until_ready(db, timeout, self.wake()))

    # -- leases ------------------------------------------------------------------------

    def ack(self, tr: Transactor, lease: FairLeaseLike) -> Gen[None]:
        """Remove a claimed item for good, freeing its slot."""
        parse_fair(lease)
        return self.guarded(tr, self.loop(tr, self.engine.settle_lease, "ack", lease), True)

    def ack_many(self, tr: Transactor, leases: Iterable[FairLeaseLike]) -> Gen[List[bool]]:
        """Ack every lease still alive; for each, whether it was."""
        batch = lease_batch(leases, parse_fair)
        if not batch:
            check_transactor(tr)
            return []
        return (yield from self.guarded(tr, self.loop(tr, self.engine.ack_many, batch), True))

    @decoded()
    def extend(self, tr: Transactor, lease: FairLeaseLike, seconds: Any) -> Gen[FairLease]:
        """Move a live lease's deadline to ``seconds`` from now."""
        renewed = (yield from self.extend_many(tr, [lease], seconds))[0]
        if renewed is None:
            raise expired("extend")
        return renewed

    @decoded()
    def extend_many(self, tr: Transactor, leases: Iterable[FairLeaseLike],
                    seconds: Any) -> Gen[List[Optional[FairLease]]]:
        """Extend every live lease; for each, the renewed lease or None."""
        seconds = check_seconds(seconds, "seconds")
        batch = lease_batch(leases, parse_fair)
        if not batch:
            check_transactor(tr)
            return []
        return (yield from self.guarded(
            tr, self.loop(tr, self.engine.extend_many, batch, seconds), True))

    def release(self, tr: Transactor, lease: FairLeaseLike, delay: Any = None,
                count: Any = True, error: Any = None) -> Gen[bool]:
        """Give a claimed item back to its group, freeing its slot (``error``: a
        :class:`JobError` the job failed with)."""
        versions = check_delay(delay)
        check_bool(count, "count")
        parse_fair(lease)
        return self.guarded(tr, self.loop(tr, self.engine.settle_lease, "release", lease,
                                          versions, count, check_error(error)), True)

    def bury(self, tr: Transactor, lease: FairLeaseLike, reason: Any = None,
             error: Any = None) -> Gen[bool]:
        """Move a claimed item to its group's dead letters, freeing its slot (``error``:
        a :class:`JobError` the job failed with)."""
        check_reason(reason)
        parse_fair(lease)
        return self.guarded(tr, self.loop(tr, self.engine.settle_lease, "bury", lease, reason,
                                          check_error(error)), True)

    # -- job records (see JobOps) -------------------------------------------------------

    def listing_at(self, where: Tuple[Any, ...]) -> Any:
        return self.engine.group(where[0]).listing

    def records_at(self, where: Tuple[Any, ...]) -> Records:
        return self.engine.group(where[0]).records

    def lease_where(self, lease: Any) -> Tuple[Any, ...]:
        return (parse_fair(lease)[0],)

    def check_lease(self, lease: Any, name: str) -> Any:
        return parse_fair(lease, name)

    def wake_waiters(self, tr: Any, attempt: Attempt) -> None:
        self.engine.touch(tr)

    def ack_results(self, tr: Any, attempt: Attempt, leases: List[Any],
                    results: List[Optional[bytes]], states: List[str]) -> Gen[List[bool]]:
        return self.engine.ack_many(tr, attempt, leases, results, states)

    def removing(self, tr: Any, attempt: Attempt, where: Tuple[Any, ...],
                 op: Callable[..., Gen[T]], *args: Any) -> Gen[T]:
        done = yield from op(tr, attempt, *args)
        if not attempt.idle:  # it wrote: the group may be less eligible
            yield from self.engine.refresh(tr, attempt, where[0])
            attempt.idle = False
        return done

    @property
    def expiry(self) -> Subspace:
        return self.engine.keys.expiry

    @decoded()
    def job(self, tr: Transactor, group: Any, id_: Any) -> Gen[Optional[JobRecord]]:
        """Job ``id_`` of ``group``: its record, as it is at the read version; None if
        unknown.  A running job's token is its FairLease's."""
        g = check_group(group)
        return self.guarded(tr, self.group_job(tr, g, check_job_id(id_)))

    def group_job(self, tr: Transactor, g: Any, id_: bytes) -> Gen[Optional[JobRecord]]:
        """The operation of :meth:`job`, its arguments checked."""
        record = yield from self.job_at(tr, id_, (g,))
        if record is not None and record.state == RUNNING and record.token is not None:
            return record._replace(token=fair_token(g, lease_id(record.token)))
        return record

    @decoded()
    def result(self, db: Any, group: Any, id_: Any, timeout: Any = None) -> Gen[Any]:
        """Wait until job ``id_`` of ``group`` is finished; its result (or raise its
        failure)."""
        return self.guarded(db, self.result_at(db, check_job_id(id_), (check_group(group),),
                                               timeout))

    def cancel(self, tr: Transactor, group: Any, id_: Any) -> Gen[Optional[str]]:
        """Cancel job ``id_`` of ``group``; what became of it."""
        return self.guarded(tr, self.cancel_at(tr, check_job_id(id_), (check_group(group),)),
                            True)

    # -- one group's contents ------------------------------------------------------------

    def group_stats(self, tr: Transactor, group: Any) -> Gen[FairStats]:
        """``group``'s :class:`FairStats`."""
        return self.guarded(tr, read(tr, read_group_stats, self.engine, check_group(group)))

    def stats_of(self, tr: Transactor, groups: Any) -> Gen[Dict[Any, GroupView]]:
        """The stats and policy of each of ``groups`` (at most 1,000), read side by
        side: a few round trips in all, not a few per group."""
        batch = [check_group(g, f"groups[{i}]")
                 for i, g in enumerate(materialize(groups, "groups"))]
        if len(batch) > 2 * GATHERED:
            raise ValueError(f"groups: at most {2 * GATHERED:,} per call, got {len(batch):,}")
        return read(tr, read_views, self.engine, batch)

    def all_stats(self, tr: Transactor) -> Gen[Dict[Any, FairStats]]:
        """The :class:`FairStats` of every group in the index."""
        return self.guarded(tr, read(tr, read_all_stats, self.engine))

    def stats(self, tr: Transactor) -> Gen[QueueStats]:
        """Every group's items, summed (``oldest_age``: the longest a front item has
        waited); see :class:`fdbrecipes.protocol.Inspectable`."""
        return self.guarded(tr, read(tr, read_totals, self.engine))

    @decoded()
    def peek(self, tr: Transactor, group: Any) -> Gen[Optional[Value]]:
        """The value ``group``'s next claim would take."""
        engine = self.engine.group(check_group(group)).engine
        entries = yield from self.guarded(tr, read(tr, engine.peek, MIN, 1))
        return decode_value(value_of(entries[0])) if entries else None

    @decoded()
    def items(self, tr: Transactor, group: Any, limit: Any = None) -> Gen[List[Value]]:
        """``group``'s visible items, oldest first."""
        engine = self.engine.group(check_group(group)).engine
        limit = check_limit(limit)
        entries = yield from self.guarded(tr, read_pages(tr, engine.peek, (MIN,), limit))
        return [decode_value(value_of(e)) for e in entries]

    @decoded()
    def pending(self, tr: Transactor, group: Any, limit: Any = None,
                after: Any = None) -> Gen[List[PendingItem]]:
        """``group``'s visible items with their tokens, oldest first, after the item
        the token ``after`` names."""
        found = self.engine.group(check_group(group))
        first = optional(parse_pending, after, 0)
        if isinstance(found.listing, ShardedListing):
            return self.guarded(tr, read_pages(tr, found.listing.pending, (MIN, first),
                                               check_limit(limit)))
        return self.guarded(tr, read_pages(tr, pending, (found.engine, MIN, first),
                                           check_limit(limit)))

    @decoded()
    def leases(self, tr: Transactor, group: Any, limit: Any = None,
               after: Any = None) -> Gen[List[LeaseInfo]]:
        """``group``'s items in flight, oldest claim first (tokens of FairLeases),
        after the lease ``after``."""
        g = check_group(group)
        hold_id = None
        if after is not None:
            of, token = parse_fair(after, "after")
            if of != g:
                raise ValueError("after is a lease of another group")
            hold_id = lease_id(token)
        infos = yield from self.guarded(tr, read(tr, self.engine.group(g).listing.leases,
                                                 check_limit(limit), hold_id))
        return [info._replace(token=fair_token(g, lease_id(info.token))) for info in infos]

    @decoded()
    def delayed(self, tr: Transactor, group: Any, limit: Any = None,
                after: Any = None) -> Gen[List[DelayedItem]]:
        """``group``'s delayed items, soonest first, after the one ``after`` names."""
        g = check_group(group)
        return self.guarded(tr, read(tr, self.engine.group(g).listing.delayed,
                                     check_limit(limit), optional(parse_delayed, after, 0)))

    @decoded()
    def remove(self, tr: Transactor, group: Any, id_: Any) -> Gen[Optional[Value]]:
        """Remove ``group``'s pending item pushed with ``id_``; its value, or None."""
        g = check_group(group)
        checked = check_id(id_)
        if checked is None:
            raise TypeError("id must be bytes, not NoneType")
        return self.guarded(tr, self.loop(tr, self.engine.refreshing, g,
                                          partial(self.engine.group(g).listing.remove,
                                                  tell=True), checked), True)

    @decoded()
    def lookup(self, tr: Transactor, group: Any, token: Any) -> Gen[Optional[Row]]:
        """The row of ``group``'s listings ``token`` names now; None if gone (a lease's
        token is its FairLease's)."""
        g = check_group(group)
        named = None
        parts = unpack_token(token, "token", "a token of a listed row (bytes)") or ()
        if parts[:1] == ("fair",):
            of, plain = parse_fair(token, "token")
            if of != g:
                raise ValueError("token is a lease of another group")
            named = Named("lease", lease_id(plain))
        return self.guarded(tr, self.fair_row(tr, g, named or parse_any(token, 0)))

    def fair_row(self, tr: Transactor, g: Any, named: Named) -> Gen[Optional[Row]]:
        """The operation of :meth:`lookup`: a lease's row carries its FairLease's
        token."""
        found = self.engine.group(g)
        if isinstance(found.listing, ShardedListing):
            row = yield from read(tr, found.listing.lookup, named)
        else:
            row = yield from read(tr, lookup, found.listing, found.dead, named)
        if isinstance(row, LeaseInfo):
            return row._replace(token=fair_token(g, lease_id(row.token)))
        return row

    @decoded()
    def remove_many(self, tr: Transactor, group: Any, tokens: Any) -> Gen[List[Optional[Value]]]:
        """Remove ``group``'s pending items the tokens name, in one transaction; for
        each, its value or None."""
        g = check_group(group)
        places = parse_tokens(tokens, parse_removable, 0)
        if not places:
            check_transactor(tr)
            return []
        removed: List[Optional[Value]] = yield from self.guarded(tr, self.loop(
            tr, self.engine.refreshing, g,
            partial(self.engine.group(g).listing.remove_at, tell=True), places),
            True)
        return removed

    @decoded()
    def dead(self, tr: Transactor, group: Any, limit: Any = None,
             after: Any = None) -> Gen[List[DeadLetter]]:
        """``group``'s dead letters, oldest first, after the one ``after`` names."""
        g, limit = check_group(group), check_limit(limit)
        return self.guarded(tr, read(tr, self.engine.group(g).dead.letters, limit,
                                     optional(parse_dead, after, 0)))

    def requeue_dead(self, tr: Transactor, group: Any, limit: Any = None,
                     tokens: Any = None) -> Gen[int]:
        """Push ``group``'s oldest dead letters (or those ``tokens`` name) back (at
        most 1,000 a call)."""
        g = check_group(group)
        at = self.dead_named(limit, tokens)
        ask = DEAD_CALL if limit is None else min(DEAD_CALL, check_int(limit, "limit", low=0))
        return self.guarded(tr, self.loop(tr, self.engine.requeue_dead, g, ask, at), True)

    def purge_dead(self, tr: Transactor, group: Any, tokens: Any = None) -> Gen[int]:
        """Remove ``group``'s dead letters (or those ``tokens`` name) for good (at
        most 1,000 a call)."""
        g = check_group(group)
        return self.guarded(tr, self.loop(tr, self.engine.refreshing, g,
                                          self.engine.group(g).dead.purge, DEAD_CALL,
                                          self.dead_named(None, tokens)), True)

    @staticmethod
    def dead_named(limit: Any, tokens: Any) -> Optional[List[TimedPlace]]:
        """The dead letters ``tokens`` name (None: the oldest)."""
        if tokens is None:
            return None
        if limit is not None:
            raise TypeError("give limit or tokens, not both")
        return parse_tokens(tokens, parse_dead, 0)

    def clear(self, tr: Transactor) -> Gen[None]:
        """Remove every group, item, policy and remembered id."""
        return self.guarded(tr, self.loop.idempotent(tr, self.clear_all), True)

    def clear_all(self, tr: Any, _attempt: Attempt) -> Gen[None]:
        """The operation of :meth:`clear`: range clears, the wake counter touched."""
        yield from ()  # an operation (a generator), though it waits for nothing
        self.engine.clear(tr)
