"""A queue shared by many groups (tenants, customers), served fairly.

One tenant that enqueues 100,000 jobs must not make every other wait behind them.  A
:class:`FairQueue` keeps a queue per group and serves the groups by weighted lottery:
among the groups that have a visible item and a free slot, a claim serves group g
with probability share_g / (sum of their shares), so no group with work waits
forever, and a group at its limit or with nothing visible is skipped without blocking
any other.  Each group may have a ``limit`` (items in flight at once, exact at every
read version, also when workers die holding leases: the slots come back with the
leases) and a ``rate`` (claims started per window).  The engine is
:mod:`fdbrecipes._fair`; the keys are :class:`fdbrecipes._layout.FairLayout`.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple, Union

from ._fair import Fair, FairLease, Policy, check_group, parse_fair
from ._fdb import Gen, Transactor, check_transactor, clear_except, snap
from ._front import MIN
from ._ids import Ids
from ._layout import FairLayout
from ._ordered import PushRequest, QueueStats
from ._run import Structure, read
from ._values import (
    MAX_TAKE,
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
    encode_value,
    materialize,
    push_bytes,
)
from ._wait import Clock, Wake, database_clock, drive, take_or_wait, wait_until_ready

__all__ = ["FairLease", "FairQueue", "FairStats", "Policy"]


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


def _check_share(share: Any, name: str = "share") -> int:
    return check_int(share, name, low=1, high=2**32)


def _check_rate(rate: Any) -> Optional[Tuple[int, float]]:
    if rate is None:
        return None
    if type(rate) is not tuple or len(rate) != 2:
        raise TypeError("rate must be None or a (count, seconds) tuple")
    return check_int(rate[0], "rate count", low=1, high=10_000), check_seconds(rate[1],
                                                                             "rate seconds")


class FairQueue(Structure):
    """A transactional queue per group, served by weighted lottery (see the module
    docstring).

    Every method takes ``tr`` first, as Queue's do: an ``fdb.Transaction`` (part of
    the caller's transaction) or an ``fdb.Database``/``Tenant`` (own retry loop, with
    commit receipts).

    Args:
        subspace: where the queue keeps its keys.
        default_share: the share of a group without a policy of its own.
        default_limit: the limit of a group without a policy (None: no limit).
        max_deliveries: as for Queue: a lease that ends without ack on an item
            delivered this many times makes it a dead letter (of its group).
        id_retention: seconds an idempotency id (per group) is remembered after its
            item left.
        clock: where leases and delays read the time (default: the cluster's).

    Example::

        jobs = FairQueue(fdb.Subspace(("jobs",)))
        jobs.set_group(db, "acme", share=3, limit=10)
        jobs.push(db, b"report", group="acme")
        lease = jobs.claim(db, 30)           # a FairLease, with .group
        if lease is not None:
            jobs.ack(db, lease)
    """

    def __init__(self, subspace: Any, *, default_share: int = 1,
                 default_limit: Optional[int] = None, max_deliveries: Optional[int] = None,
                 id_retention: float = 3600.0, clock: Optional[Clock] = None) -> None:
        subspace = check_subspace(subspace)
        share = _check_share(default_share, "default_share")
        limit = None if default_limit is None else check_int(default_limit, "default_limit",
                                                             low=0)
        if max_deliveries is not None:
            check_int(max_deliveries, "max_deliveries", low=1)
        retention = check_seconds(id_retention, "id_retention")
        Ids(subspace, retention)  # checks it as Queue does
        super().__init__(subspace)
        self._fair = Fair(FairLayout(subspace), check_clock(clock) or database_clock,
                          Policy(share, limit, None), max_deliveries, retention)
        self._retention = retention
        self._max_deliveries = max_deliveries

    @property
    def id_retention(self) -> float:
        """Seconds an idempotency id is remembered after its item left."""
        return self._retention

    @property
    def max_deliveries(self) -> Optional[int]:
        """Deliveries after which a lease ending without ack buries its item."""
        return self._max_deliveries

    # -- groups --------------------------------------------------------------------------

    def set_group(self, tr: Transactor, group: Union[str, bytes], *,
                  share: Optional[int] = None, limit: Optional[int] = None,
                  rate: Optional[Tuple[int, float]] = None) -> None:
        """Set how ``group`` is served: ``share`` (its weight, an int >= 1; None: the
        queue's default), ``limit`` (its items in flight at most; None: the queue's
        default limit) and ``rate`` (``(count, seconds)``: at most ``count`` claims
        started per ``seconds``; None: no rate limit).  A lowered limit takes effect
        as the items in flight finish.

        Reads the group's membership in the lottery and its state (read conflicts),
        writes its policy and, if that changes whether (or how heavily) it is in the
        lottery, the lottery.  Cost: 1 to 3 round trips.

        Raises:
            TypeError or ValueError: a bad group, share, limit or rate (before anything
                is written).
        """
        drive(self._set_group(tr, group, share, limit, rate))

    def _set_group(self, tr: Transactor, group: Any, share: Any, limit: Any,
                   rate: Any) -> Gen[None]:
        g = check_group(group)
        default = self._fair.default
        policy = Policy(default.share if share is None else _check_share(share),
                        default.limit if limit is None else check_int(limit, "limit", low=0),
                        _check_rate(rate))
        return self._loop(tr, self._fair.set_group, g, policy)

    def group_policy(self, tr: Transactor, group: Union[str, bytes]) -> Policy:
        """The policy ``group`` is served by (its own, or the defaults).  Reads one key
        (read conflict).  Cost: 1 round trip."""
        return drive(read(tr, self._fair.group_policy, check_group(group)))

    def lottery(self, tr: Transactor) -> Dict[Union[str, bytes], int]:
        """The groups a claim may pick now, with their shares: those with a visible
        item, a free slot and room under their rate (as of the last write or look that
        concerned them).  Reads the lottery's entries (read conflicts).  Cost: 1 round
        trip per 1,000 groups."""
        rows = drive(read(tr, self._fair.tree.items, None))
        return {check_group(group): weight for _, group, weight in rows}

    def groups(self, tr: Transactor, limit: Optional[int] = None) -> List[Union[str, bytes]]:
        """The groups that were given work (and were not cleared since), in key order.
        Reads their index (read conflict on the part read).  Cost: 1 round trip."""
        return drive(read(tr, self._fair.groups, check_limit(limit)))

    # -- pushing ---------------------------------------------------------------------------

    def push(self, tr: Transactor, value: Value, *, group: Union[str, bytes],
             id: Optional[bytes] = None, delay: Optional[float] = None) -> None:
        """Append ``value`` to ``group``'s queue (``id`` and ``delay`` as for
        :meth:`fdbrecipes.Queue.push`; ids are per group).

        Reads, as Queue.push, the group's last item (snapshot); then the group's
        membership in the lottery (a read conflict on it) and, when the group is not
        in it, its state (read conflicts), to add it once it can be served.  Writes the
        item, the group's counters and the wake counter (atomic).  Conflicts with:
        nothing while the group is in the lottery (a push with the same id aside);
        with the group's claims and acks when it is not.  Cost: 1 to 3 round trips.

        Raises:
            TypeError or ValueError: bad value, group, id or delay.
        """
        g = check_group(group)
        batch = [((), encode_value(value))]
        drive(self._push(tr, g, self._request(g, batch, check_id(id), delay, "value")))

    def push_many(self, tr: Transactor, values: Iterable[Value], *,
                  group: Union[str, bytes], delay: Optional[float] = None) -> None:
        """Append every value to ``group``'s queue, in order, in one transaction (as
        :meth:`push`; the batch is checked whole first)."""
        g = check_group(group)
        batch = [((), encode_value(v, f"values[{i}]"))
                 for i, v in enumerate(materialize(values, "values"))]
        drive(self._push(tr, g, self._request(g, batch, None, delay, "values")))

    def _request(self, g: Any, batch: List[Tuple[Any, bytes]], id_: Optional[bytes],
                 delay: Any, name: str) -> PushRequest:
        prefix = len(self.subspace.key()) + len(encode_value(g)) + 2
        check_batch_bytes(sum(push_bytes(prefix, (), value, id_) for _, value in batch),
                          len(batch), name)
        return PushRequest(batch, id_, check_delay(delay))

    def _push(self, tr: Transactor, g: Any, request: PushRequest) -> Gen[None]:
        if not request.batch:
            check_transactor(tr)
            return
        yield from self._loop(tr, self._fair.push, g, request)

    # -- claiming -------------------------------------------------------------------------

    def claim(self, tr: Transactor, lease_seconds: float) -> Optional[FairLease]:
        """Pick a group by lottery among those that can be served, and claim its
        oldest visible item under a lease (see :meth:`fdbrecipes.Queue.claim`);
        None when no group can be served.

        Reads a few groups due for a look (snapshot), the lottery's sums (snapshot),
        the picked group's entry (a read conflict) and state: its policy, counters,
        claim times and front (read conflicts); moves the item under the lease and,
        when the group can no longer be served, takes it out of the lottery.
        Conflicts with: claims, acks and pushes of the same group only (and, by
        chance, a claim looking at the same due group).  Cost: a small constant
        number of round trips, 1 + log64(groups) for the lottery; more when a picked
        group turns out unservable (it is taken out, and the claim picks again).

        Raises:
            TypeError or ValueError: bad ``lease_seconds``.
        """
        return drive(self._claim(tr, lease_seconds))

    def _claim(self, tr: Transactor, lease_seconds: Any) -> Gen[Optional[FairLease]]:
        seconds = check_seconds(lease_seconds, "lease_seconds")
        return self._loop(tr, self._fair.claim, seconds)

    def _claim_many(self, tr: Transactor, end: int, n: Any, lease_seconds: Any,
                    spread: Any) -> Gen[List[FairLease]]:
        """Up to ``n`` claims, one transaction each (what a Worker asks for)."""
        assert end == MIN
        out: List[FairLease] = []
        for _ in range(check_int(n, "n", low=0)):
            lease = yield from self._claim(tr, lease_seconds)
            if lease is None:
                break
            out.append(lease)
        return out

    def claim_wait(self, db: Any, lease_seconds: float,
                   timeout: Optional[float] = None) -> Optional[FairLease]:
        """:meth:`claim`, waiting on a watch (touched by every push, ack and release)
        until a group can be served; None if ``timeout`` seconds pass first."""
        return drive(self._claim_wait(db, lease_seconds, timeout))

    def _claim_wait(self, db: Any, lease_seconds: Any,
                    timeout: Any) -> Gen[Optional[FairLease]]:
        check_seconds(lease_seconds, "lease_seconds")
        return take_or_wait(db, timeout, self._claim, (lease_seconds,), self._wake())

    def wait(self, db: Any, timeout: Optional[float] = None) -> bool:
        """Wait until a group can be served, or ``timeout`` passes; True if one can."""
        return drive(wait_until_ready(db, timeout, self._wake()))

    def _wait(self, db: Any, timeout: Optional[float]) -> Gen[bool]:
        return wait_until_ready(db, timeout, self._wake())

    def _wake(self) -> Wake:
        return Wake(self._fair.k.pushed, self._fair.ready, (), self._hooks)

    # -- leases ---------------------------------------------------------------------------

    def ack(self, tr: Transactor, lease: Union[FairLease, bytes]) -> None:
        """Remove a claimed item for good, and free its slot in its group (which comes
        back into the lottery if that was all it lacked).  Reads the lease and the
        group's membership (read conflicts); when the group is not in the lottery,
        its state.  Cost: 1 to 3 round trips.

        Raises:
            LeaseExpiredError: the lease had expired (as for Queue.ack).
        """
        parse_fair(lease)
        drive(self._loop(tr, self._fair.settle_lease, "ack", lease))

    def ack_many(self, tr: Transactor,
                 leases: Iterable[Union[FairLease, bytes]]) -> List[bool]:
        """Ack every lease still alive, group by group, in one transaction; for each,
        whether it was (see :meth:`fdbrecipes.Queue.ack_many`)."""
        return drive(self._ack_many(tr, leases))

    def _ack_many(self, tr: Transactor, leases: Iterable[Any]) -> Gen[List[bool]]:
        batch = self._leases(leases)
        if not batch:
            check_transactor(tr)
            return []
        return (yield from self._loop(tr, self._fair.ack_many, batch))

    def extend(self, tr: Transactor, lease: Union[FairLease, bytes],
               seconds: float) -> FairLease:
        """Keep working on a claimed item (see :meth:`fdbrecipes.Queue.extend`).

        Raises:
            LeaseExpiredError: the lease had expired.
        """
        renewed = self.extend_many(tr, [lease], seconds)[0]
        if renewed is None:
            from ._leases import expired
            raise expired("extend")
        return renewed

    def extend_many(self, tr: Transactor, leases: Iterable[Union[FairLease, bytes]],
                    seconds: float) -> List[Optional[FairLease]]:
        """Extend every lease still alive, group by group, in one transaction (see
        :meth:`fdbrecipes.Queue.extend_many`)."""
        return drive(self._extend_many(tr, leases, seconds))

    def _extend_many(self, tr: Transactor, leases: Iterable[Any],
                     seconds: float) -> Gen[List[Optional[FairLease]]]:
        seconds = check_seconds(seconds, "seconds")
        batch = self._leases(leases)
        if not batch:
            check_transactor(tr)
            return []
        return (yield from self._loop(tr, self._fair.extend_many, batch, seconds))

    def release(self, tr: Transactor, lease: Union[FairLease, bytes], *,
                delay: Optional[float] = None, count: bool = True) -> bool:
        """Give a claimed item back to its group (see
        :meth:`fdbrecipes.Queue.release`), freeing its slot."""
        versions = check_delay(delay)
        check_bool(count, "count")
        parse_fair(lease)
        released: bool = drive(self._loop(tr, self._fair.settle_lease, "release", lease,
                                          versions, count))
        return released

    def bury(self, tr: Transactor, lease: Union[FairLease, bytes],
             reason: Optional[str] = None) -> bool:
        """Move a claimed item to its group's dead letters now (see
        :meth:`fdbrecipes.Queue.bury`), freeing its slot."""
        check_reason(reason)
        parse_fair(lease)
        buried: bool = drive(self._loop(tr, self._fair.settle_lease, "bury", lease, reason))
        return buried

    @staticmethod
    def _leases(leases: Iterable[Any]) -> List[Any]:
        batch = materialize(leases, "leases")
        for i, lease in enumerate(batch):
            parse_fair(lease, f"leases[{i}]")
        if len(batch) > MAX_TAKE:
            raise ValueError(f"leases: at most {MAX_TAKE:,} per call, got {len(batch):,}")
        return batch

    # -- stats, dead letters, clear ---------------------------------------------------------

    def stats(self, tr: Transactor, group: Optional[Union[str, bytes]] = None
              ) -> Union[FairStats, Dict[Any, FairStats]]:
        """``group``'s :class:`FairStats`; without a group, those of every group that
        was given work (see :meth:`groups`).  Snapshot reads of each group's counters
        and front (as Queue.stats), and its policy.  Cost: 1 round trip per group."""
        if group is not None:
            return drive(read(tr, self._group_stats, check_group(group)))
        return {g: drive(read(tr, self._group_stats, g)) for g in self.groups(tr)}

    def _group_stats(self, tr: Any, g: Any) -> Gen[FairStats]:
        stats: QueueStats = yield from self._fair.group(g).o.stats(tr)
        policy = yield from self._fair.group_policy(snap(tr), g)
        return FairStats(stats.visible, stats.delayed, stats.in_flight, stats.dead,
                         policy.limit, policy.share)

    def dead(self, tr: Transactor, group: Union[str, bytes],
             limit: Optional[int] = None) -> List[Any]:
        """``group``'s dead letters, oldest first (see :meth:`fdbrecipes.Queue.dead`)."""
        g, limit = check_group(group), check_limit(limit)
        return drive(read(tr, self._fair.group(g).dead.letters, limit))

    def requeue_dead(self, tr: Transactor, group: Union[str, bytes],
                     limit: Optional[int] = None) -> int:
        """Push ``group``'s oldest dead letters (up to ``limit``, at most 1,000 per
        call) back into its queue; how many moved."""
        g = check_group(group)
        ask = 1_000 if limit is None else min(1_000, check_int(limit, "limit", low=0))
        return drive(self._loop(tr, self._fair.requeue_dead, g, ask))

    def purge_dead(self, tr: Transactor, group: Union[str, bytes]) -> int:
        """Remove ``group``'s dead letters for good (at most 1,000 per call); how many."""
        g = check_group(group)
        return drive(self._loop(tr, self._fair.group(g).dead.purge, 1_000))

    def clear(self, tr: Transactor) -> None:
        """Remove every group, item, policy and remembered id (range clears); the wake
        counter is touched instead (waiters look again) and the receipt slots stay."""
        drive(self._loop.idempotent(tr, self._clear_all))

    def _clear_all(self, tr: Any, _attempt: Any) -> Gen[None]:
        yield from ()  # an operation (a generator), though it waits for nothing
        k = self._fair.k
        r = k.subspace.range()
        clear_except(tr, bytes(r.start), bytes(r.stop), k.kept_by_clear())
        self._fair.touch(tr)

