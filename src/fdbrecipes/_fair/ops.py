"""FairQueue's operations object: every call, checked, as an operation.

:class:`FairOps` holds one fair queue's configuration, its engine (:mod:`.engine`) and
its retry loop; each method checks its arguments (TypeError or ValueError, before
anything is written) and returns an operation that ``FairQueue`` drives and
``AsyncFairQueue`` awaits.  :meth:`FairOps.group_queue` is one group seen as a queue
(:class:`GroupOps`), for the tools that look into one queue at a time (the operator
commands).  What each call reads, writes, conflicts with and costs is said in
:mod:`fdbrecipes.fair_queue`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple, TypeVar, Union

from fdb.subspace_impl import Subspace

from .._clock import Clock, database_clock
from .._fdb import Gen, Transactor, check_database, check_transactor, clear_except, snap
from .._layout import FairLayout
from .._operation import Attempt, gather
from .._ops import ClaimStep, JobOps
from .._ordered.dead import DeadLetter
from .._ordered.engine import PushRequest, QueueStats
from .._ordered.front import MIN, value_of
from .._ordered.history import check_error, check_job_id, check_time_limit, made_ids
from .._ordered.leases import expired, lease_id
from .._ordered.listing import DelayedItem, LeaseInfo, Listing
from .._ordered.ops import check_end, lease_batch
from .._ordered.records import JobRecord
from .._retry import read, read_pages
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
    check_subspace,
    check_timeout,
    decode_value,
    encode_value,
    materialize,
    push_bytes,
)
from .._waiting import Wake, take_or_wait, wait_until_ready
from .engine import Fair, FairLease, Policy, check_group, fair_token, parse_fair

__all__ = ["FairOps", "FairStats", "GroupOps", "GroupPush"]

T = TypeVar("T")
#: A FairQueue lease as the calls take it: the FairLease, or its token.
FairLeaseLike = Union[FairLease, bytes]
#: Claims one transaction makes given a Database (a claim_many in a caller's
#: transaction takes at most :data:`MOST_CLAIMS`).
CLAIM_BATCH = 16
MOST_CLAIMS = 100
#: Dead letters one call of requeue_dead and purge_dead moves at most.
DEAD_CALL = 1_000
#: Groups whose stats one step reads side by side.
GATHERED = 500


class GroupPush(NamedTuple):
    """A checked push into one group: the group, and the request."""

    group: Any
    request: PushRequest


class FairStats(NamedTuple):
    """Where one group's items are, and how it is served.

    Attributes:
        visible, delayed, in_flight, dead: as in :class:`fdbrecipes.QueueStats`.
        limit: items in flight at most (None: no limit).
        share: its weight in the lottery.
    """

    visible: int
    delayed: int
    in_flight: int
    dead: int
    limit: Optional[int]
    share: int


def check_share(share: Any, name: str = "share") -> int:
    """A lottery share: an int in [1, 2**32]."""
    return check_int(share, name, low=1, high=2**32)


def check_rate(rate: Any) -> Optional[Tuple[int, float]]:
    """A rate: None, or ``(count, seconds)``."""
    if rate is None:
        return None
    if type(rate) is not tuple or len(rate) != 2:
        raise TypeError("rate must be None or a (count, seconds) tuple")
    return check_int(rate[0], "rate count", low=1, high=10_000), check_seconds(rate[1],
                                                                             "rate seconds")


class FairOps(JobOps):
    """What FairQueue runs (see the module docstring); the arguments of the
    constructor are its."""

    def __init__(self, subspace: Any, *, default_share: int = 1,
                 default_limit: Optional[int] = None, max_deliveries: Optional[int] = None,
                 id_retention: float = 3600.0, clock: Optional[Clock] = None,
                 history: Optional[float] = None) -> None:
        subspace = check_subspace(subspace)
        share = check_share(default_share, "default_share")
        limit = None if default_limit is None else check_int(default_limit, "default_limit",
                                                             low=0)
        super().__init__(subspace, id_retention, max_deliveries, history)
        self.engine = Fair(FairLayout(subspace), check_clock(clock) or database_clock,
                           Policy(share, limit, None), max_deliveries, self.id_retention,
                           self.history)

    @property
    def wake_key(self) -> bytes:
        """The key every push, ack and release touches."""
        return self.engine.keys.pushed

    # -- groups ------------------------------------------------------------------------

    def set_group(self, tr: Transactor, group: Any, share: Any, limit: Any,
                  rate: Any) -> Gen[None]:
        """Set how ``group`` is served (None: the queue's defaults; no rate)."""
        g = check_group(group)
        default = self.engine.default
        policy = Policy(default.share if share is None else check_share(share),
                        default.limit if limit is None else check_int(limit, "limit", low=0),
                        check_rate(rate))
        return self.loop(tr, self.engine.set_group, g, policy)

    def group_policy(self, tr: Transactor, group: Any) -> Gen[Policy]:
        """The policy ``group`` is served by."""
        return read(tr, self.engine.group_policy, check_group(group))

    def lottery(self, tr: Transactor) -> Gen[Dict[Any, int]]:
        """The groups a claim may pick now, with their shares."""
        rows = yield from read(tr, self.engine.tree.items, None)
        return {check_group(group): weight for _, group, weight in rows}

    def groups(self, tr: Transactor, limit: Any = None) -> Gen[List[Any]]:
        """The groups with work or a policy, in key order."""
        return read(tr, self.engine.groups, check_limit(limit))

    def group_queue(self, group: Any) -> GroupOps:
        """``group`` seen as a queue (see :class:`GroupOps`)."""
        return GroupOps(self, check_group(group))

    # -- pushing -----------------------------------------------------------------------

    def request(self, group: Any, value: Value, id_: Any, delay: Any,
                time_limit: Any = None) -> GroupPush:
        """The checked push of one value into ``group``."""
        g = check_group(group)
        return self.make_push(g, [((), encode_value(value))], check_id(id_), delay, "value",
                              time_limit)

    def requests(self, group: Any, values: Iterable[Value], delay: Any,
                 time_limit: Any = None) -> GroupPush:
        """The checked push of every value of ``values`` into ``group``, in order."""
        g = check_group(group)
        batch = [((), encode_value(v, f"values[{i}]"))
                 for i, v in enumerate(materialize(values, "values"))]
        return self.make_push(g, batch, None, delay, "values", time_limit)

    def make_push(self, g: Any, batch: List[Tuple[Any, bytes]], id_: Optional[bytes],
                  delay: Any, name: str, time_limit: Any) -> GroupPush:
        """``batch`` for group ``g``, refused if it cannot fit in a transaction (a
        structure with job records makes an id for every item pushed without one)."""
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
        yield from self.loop(tr, self.engine.push, push.group, push.request)

    def push_job(self, tr: Transactor, value: Any, *, id: Optional[bytes] = None,
                 delay: Optional[float] = None, **where: Any) -> Gen[None]:
        """Push one value into ``group=`` (required), with ``id`` and ``delay``: see
        :class:`fdbrecipes.protocol.Workable`."""
        unknown = set(where) - {"group"}
        if unknown:
            raise TypeError(f"a FairQueue takes no {', '.join(sorted(unknown))}")
        if "group" not in where:
            raise TypeError("a FairQueue job needs group=")
        return self.push(tr, self.request(where["group"], value, id, delay))

    # -- claiming ----------------------------------------------------------------------

    def claim(self, tr: Transactor, lease_seconds: Any) -> Gen[Optional[FairLease]]:
        """Claim one item of a group picked by lottery."""
        seconds = check_seconds(lease_seconds, "lease_seconds")
        return self.loop(tr, self.engine.claim, seconds)

    def claim_many(self, tr: Transactor, n: Any, lease_seconds: Any, *, spread: Any = 1,
                   end: Any = MIN, holder: Optional[str] = None) -> Gen[List[FairLease]]:
        """Up to ``n`` claims, each of a group picked by lottery (see
        :class:`fdbrecipes.protocol.Workable`: ``spread`` has no use here, and the
        only end is "min"; ``holder``: the worker, for the jobs' records)."""
        n = check_int(n, "n", low=0)
        step = self.claim_step(lease_seconds, spread, end, holder)
        return self.loop.batches(tr, step.op, n, step.args, MOST_CLAIMS, step.most,
                                 what="claims")

    def claim_step(self, lease_seconds: Any, spread: Any, end: Any,
                   holder: Optional[str]) -> ClaimStep:
        check_end(end, 0)
        check_int(spread, "spread", low=1)
        seconds = check_seconds(lease_seconds, "lease_seconds")
        return ClaimStep(self.engine.claim_many, (seconds, holder),
                         self.hooks.batch or CLAIM_BATCH)

    def wake(self) -> Wake:
        """How a waiter knows when to look again."""
        return Wake(self.wake_key, self.engine.ready, (), self.hooks)

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
        return wait_until_ready(db, timeout, self.wake())

    # -- leases ------------------------------------------------------------------------

    def ack(self, tr: Transactor, lease: FairLeaseLike) -> Gen[None]:
        """Remove a claimed item for good, freeing its slot."""
        parse_fair(lease)
        return self.loop(tr, self.engine.settle_lease, "ack", lease)

    def ack_many(self, tr: Transactor, leases: Iterable[FairLeaseLike]) -> Gen[List[bool]]:
        """Ack every lease still alive; for each, whether it was."""
        batch = lease_batch(leases, parse_fair)
        if not batch:
            check_transactor(tr)
            return []
        return (yield from self.loop(tr, self.engine.ack_many, batch))

    def extend(self, tr: Transactor, lease: FairLeaseLike, seconds: Any) -> Gen[FairLease]:
        """Move a live lease's deadline to ``seconds`` from now."""
        renewed = (yield from self.extend_many(tr, [lease], seconds))[0]
        if renewed is None:
            raise expired("extend")
        return renewed

    def extend_many(self, tr: Transactor, leases: Iterable[FairLeaseLike],
                    seconds: Any) -> Gen[List[Optional[FairLease]]]:
        """Extend every live lease; for each, the renewed lease or None."""
        seconds = check_seconds(seconds, "seconds")
        batch = lease_batch(leases, parse_fair)
        if not batch:
            check_transactor(tr)
            return []
        return (yield from self.loop(tr, self.engine.extend_many, batch, seconds))

    def release(self, tr: Transactor, lease: FairLeaseLike, delay: Any = None,
                count: Any = True, error: Any = None) -> Gen[bool]:
        """Give a claimed item back to its group, freeing its slot (``error``: a
        :class:`JobError` the job failed with)."""
        versions = check_delay(delay)
        check_bool(count, "count")
        parse_fair(lease)
        return self.loop(tr, self.engine.settle_lease, "release", lease, versions, count,
                         check_error(error))

    def bury(self, tr: Transactor, lease: FairLeaseLike, reason: Any = None,
             error: Any = None) -> Gen[bool]:
        """Move a claimed item to its group's dead letters, freeing its slot (``error``:
        a :class:`JobError` the job failed with)."""
        check_reason(reason)
        parse_fair(lease)
        return self.loop(tr, self.engine.settle_lease, "bury", lease, reason,
                         check_error(error))

    # -- job records (see JobOps) -------------------------------------------------------

    def listing_at(self, where: Tuple[Any, ...]) -> Listing:
        return self.engine.group(where[0]).listing

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

    def job(self, tr: Transactor, group: Any, id_: Any) -> Gen[Optional[JobRecord]]:
        """Job ``id_`` of ``group``: its record, as it is at the read version; None if
        unknown."""
        return self.job_at(tr, check_job_id(id_), (check_group(group),))

    def result(self, db: Any, group: Any, id_: Any, timeout: Any = None) -> Gen[Any]:
        """Wait until job ``id_`` of ``group`` is finished; its result (or raise its
        failure)."""
        return self.result_at(db, check_job_id(id_), (check_group(group),), timeout)

    def cancel(self, tr: Transactor, group: Any, id_: Any) -> Gen[Optional[str]]:
        """Cancel job ``id_`` of ``group``; what became of it."""
        return self.cancel_at(tr, check_job_id(id_), (check_group(group),))

    # -- one group's contents ------------------------------------------------------------

    def group_stats(self, tr: Transactor, group: Any) -> Gen[FairStats]:
        """``group``'s :class:`FairStats`."""
        return read(tr, self.read_group_stats, check_group(group))

    def read_group_stats(self, tr: Any, g: Any) -> Gen[FairStats]:
        """The reading operation of :meth:`group_stats`."""
        stats: QueueStats = yield from self.engine.group(g).engine.stats(tr)
        policy = yield from self.engine.group_policy(snap(tr), g)
        return FairStats(stats.visible, stats.delayed, stats.in_flight, stats.dead,
                         policy.limit, policy.share)

    def all_stats(self, tr: Transactor) -> Gen[Dict[Any, FairStats]]:
        """The :class:`FairStats` of every group in the index."""
        return read(tr, self.read_all_stats)

    def read_all_stats(self, tr: Any) -> Gen[Dict[Any, FairStats]]:
        """The reading operation of :meth:`all_stats`: the groups' reads side by side,
        :data:`GATHERED` groups at a time."""
        out: Dict[Any, FairStats] = {}
        groups = yield from self.engine.groups(tr, None)
        for at in range(0, len(groups), GATHERED):
            some = groups[at:at + GATHERED]
            out.update(zip(some, (yield from gather(
                [self.read_group_stats(tr, g) for g in some]))))
        return out

    def stats(self, tr: Transactor) -> Gen[QueueStats]:
        """Every group's items, summed (``oldest_age``: the longest a front item has
        waited); see :class:`fdbrecipes.protocol.Inspectable`."""
        return read(tr, self.read_totals)

    def read_totals(self, tr: Any) -> Gen[QueueStats]:
        """The reading operation of :meth:`stats`: each group's stats (their reads side
        by side, :data:`GATHERED` groups at a time), summed."""
        totals = [0, 0, 0, 0]
        oldest: Optional[float] = None
        groups = yield from self.engine.groups(snap(tr), None)
        for at in range(0, len(groups), GATHERED):
            found: List[QueueStats] = yield from gather(
                [self.engine.group(g).engine.stats(tr) for g in groups[at:at + GATHERED]])
            for stats in found:
                for i, count in enumerate(stats[:4]):
                    totals[i] += count
                if stats.oldest_age is not None:
                    oldest = max(oldest or 0.0, stats.oldest_age)
        visible, delayed, in_flight, dead = totals
        return QueueStats(visible, delayed, in_flight, dead, oldest)

    def peek(self, tr: Transactor, group: Any) -> Gen[Optional[Value]]:
        """The value ``group``'s next claim would take."""
        entries = yield from read(tr, self.engine.group(check_group(group)).engine.peek, MIN, 1)
        return decode_value(value_of(entries[0])) if entries else None

    def items(self, tr: Transactor, group: Any, limit: Any = None) -> Gen[List[Value]]:
        """``group``'s visible items, oldest first."""
        engine = self.engine.group(check_group(group)).engine
        entries = yield from read_pages(tr, engine.peek, (MIN,), check_limit(limit))
        return [decode_value(value_of(e)) for e in entries]

    def leases(self, tr: Transactor, group: Any, limit: Any = None) -> Gen[List[LeaseInfo]]:
        """``group``'s items in flight, oldest claim first (tokens of FairLeases)."""
        g = check_group(group)
        infos = yield from read(tr, self.engine.group(g).listing.leases, check_limit(limit))
        return [info._replace(token=fair_token(g, lease_id(info.token))) for info in infos]

    def delayed(self, tr: Transactor, group: Any, limit: Any = None) -> Gen[List[DelayedItem]]:
        """``group``'s delayed items, soonest first."""
        g = check_group(group)
        return read(tr, self.engine.group(g).listing.delayed, check_limit(limit))

    def remove(self, tr: Transactor, group: Any, id_: Any) -> Gen[Optional[Value]]:
        """Remove ``group``'s pending item pushed with ``id_``; its value, or None."""
        g = check_group(group)
        checked = check_id(id_)
        if checked is None:
            raise TypeError("id must be bytes, not NoneType")
        return self.loop(tr, self.engine.refreshing, g, self.engine.group(g).listing.remove,
                         checked)

    def dead(self, tr: Transactor, group: Any, limit: Any = None) -> Gen[List[DeadLetter]]:
        """``group``'s dead letters, oldest first."""
        g, limit = check_group(group), check_limit(limit)
        return read(tr, self.engine.group(g).dead.letters, limit)

    def requeue_dead(self, tr: Transactor, group: Any, limit: Any = None) -> Gen[int]:
        """Push ``group``'s oldest dead letters back (at most 1,000 a call)."""
        g = check_group(group)
        ask = DEAD_CALL if limit is None else min(DEAD_CALL, check_int(limit, "limit", low=0))
        return self.loop(tr, self.engine.requeue_dead, g, ask)

    def purge_dead(self, tr: Transactor, group: Any) -> Gen[int]:
        """Remove ``group``'s dead letters for good (at most 1,000 a call)."""
        g = check_group(group)
        return self.loop(tr, self.engine.refreshing, g, self.engine.group(g).dead.purge,
                         DEAD_CALL)

    def clear(self, tr: Transactor) -> Gen[None]:
        """Remove every group, item, policy and remembered id."""
        return self.loop.idempotent(tr, self.clear_all)

    def clear_all(self, tr: Any, _attempt: Attempt) -> Gen[None]:
        """The operation of :meth:`clear`: range clears, the wake counter touched."""
        yield from ()  # an operation (a generator), though it waits for nothing
        keys = self.engine.keys
        r = keys.subspace.range()
        clear_except(tr, bytes(r.start), bytes(r.stop), keys.kept_by_clear())
        self.engine.touch(tr)


class GroupOps:
    """One group of a FairQueue seen as a queue: the calls of
    :class:`fdbrecipes.protocol.Inspectable`, each that of the FairQueue's operations
    with this group (what the operator commands use for ``--group``)."""

    def __init__(self, fair: FairOps, group: Any) -> None:
        self.fair = fair
        self.group = group
        self.subspace = fair.engine.keys.groups[group]
        self.wake_key = fair.wake_key
        self.max_deliveries = fair.max_deliveries

    def __repr__(self) -> str:
        return f"GroupOps({self.fair.subspace!r}, {self.group!r})"

    def stats(self, tr: Transactor) -> Gen[QueueStats]:
        """The group's :class:`fdbrecipes.QueueStats`."""
        return read(tr, self.fair.engine.group(self.group).engine.stats)

    def items(self, tr: Transactor, limit: Any = None, end: Any = MIN) -> Gen[List[Value]]:
        check_end(end, 0)
        return self.fair.items(tr, self.group, limit)

    def leases(self, tr: Transactor, limit: Any = None) -> Gen[List[LeaseInfo]]:
        return self.fair.leases(tr, self.group, limit)

    def delayed(self, tr: Transactor, limit: Any = None) -> Gen[List[DelayedItem]]:
        return self.fair.delayed(tr, self.group, limit)

    def dead(self, tr: Transactor, limit: Any = None) -> Gen[List[DeadLetter]]:
        return self.fair.dead(tr, self.group, limit)

    def requeue_dead(self, tr: Transactor, limit: Any = None) -> Gen[int]:
        return self.fair.requeue_dead(tr, self.group, limit)

    def purge_dead(self, tr: Transactor) -> Gen[int]:
        return self.fair.purge_dead(tr, self.group)

    def remove(self, tr: Transactor, id_: Any) -> Gen[Optional[Value]]:
        return self.fair.remove(tr, self.group, id_)

    def push_job(self, tr: Transactor, value: Any, *, id: Optional[bytes] = None,
                 delay: Optional[float] = None, **where: Any) -> Gen[None]:
        if where:
            raise TypeError(f"a FairQueue group takes no {', '.join(sorted(where))}")
        return self.fair.push_job(tr, value, id=id, delay=delay, group=self.group)
