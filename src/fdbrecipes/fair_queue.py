"""A queue shared by many groups (tenants, customers), served fairly.

One tenant that enqueues 100,000 jobs must not make every other wait behind them.  A
:class:`FairQueue` keeps a queue per group and serves the groups by weighted lottery:
among the groups that have a visible item and a free slot, a claim serves group g
with probability share_g / (sum of their shares), so no group with work waits
forever, and a group at its limit or with nothing visible is skipped without blocking
any other.  Each group may have a ``limit`` (items in flight at once, exact at every
read version, also when workers die holding leases: the slots come back with the
leases) and a ``rate`` (claims started per window).  The engine is
:mod:`fdbrecipes._fair.engine`, the checked operations behind every method
:class:`fdbrecipes._ops.fair.FairOps`; the keys are :class:`fdbrecipes._layout.FairLayout`
(drawn in docs/data-model.md).
"""

from __future__ import annotations

from typing import Any, ContextManager, Dict, Iterable, List, Optional, Tuple, Union

from ._bases import FairBase, Group
from ._drivers.blocking import drive
from ._fair.parts import FairLease, FairStats, Policy
from ._fdb import Transactor
from ._heartbeat import kept_alive
from ._jobs_face import JobMethods
from ._kinds import Kind, register
from ._layout import FAIR_FOOTPRINT
from ._ops.fair import FairOps
from ._ops.fair_group import GroupOps
from ._ordered.dead import DeadLetter
from ._ordered.listing import DelayedItem, LeaseInfo
from ._ordered.paging import PendingItem, Row
from ._records.records import JobError, JobRecord
from ._values import Value

__all__ = ["FairBase", "FairLease", "FairQueue", "FairStats", "Policy"]

class FairQueue(FairBase, JobMethods[FairOps]):
    """A transactional queue per group, served by weighted lottery (see the module
    docstring).

    Every method takes ``tr`` first, as Queue's do: an ``fdb.Transaction`` (part of
    the caller's transaction) or an ``fdb.Database``/``Tenant`` (own retry loop, with
    commit receipts).  What a Queue offers for work done outside FoundationDB is here
    too (claims with leases, heartbeats, delays, dead letters, stuck work), per group;
    a FairQueue has no plain pop.

    Args:
        subspace: where the queue keeps its keys.
        default_share: the share of a group without a policy of its own.
        default_limit: the limit of a group without a policy (None: no limit).
        max_deliveries: as for Queue: a lease that ends without ack on an item
            delivered this many times makes it a dead letter (of its group).
        id_retention: seconds an idempotency id (per group) is remembered after its
            item left.
        clock: where leases and delays read the time (default: the cluster's).
        history: keep a record of each job (per group), finished ones for this many
            seconds, as for :class:`fdbrecipes.Queue` (None: no records).
        shards: spread each group's items over this many shards (1 to 64; 1, the
            default: unsharded), as for :class:`fdbrecipes.Queue`: a push goes to a
            shard of its group drawn at random, a claim takes from one.  Groups are
            key ranges of their own already; shards spread one busy group.  A
            group's limit, rate and share hold across its shards.
        codec: how values are stored, as for :class:`fdbrecipes.Queue`.
        limits: shared limits its jobs carry, as for :class:`fdbrecipes.Queue` (a
            :meth:`fdbrecipes.Limits.use`, or a list of them, of one store): a claim
            starts a job only within its group's own limit and rate *and* every
            shared limit, checked in the claim's transaction; a job whose key is full
            is parked (out of its group's queue until the transaction that frees a
            slot of that key moves it back, with a look at its group), so it never
            holds up its group nor any other.  See docs/flow-control.md.

    Example::

        jobs = FairQueue(fdb.Subspace(("jobs",)))
        jobs.set_group(db, "acme", share=3, limit=10)
        jobs.push(db, b"report", group="acme")
        lease = jobs.claim(db, 30)           # a FairLease, with .group
        if lease is not None:
            jobs.ack(db, lease)
    """

    # -- groups --------------------------------------------------------------------------

    def set_group(self, tr: Transactor, group: Group, *, share: Optional[int] = None,
                  limit: Optional[int] = None, rate: Optional[Tuple[int, float]] = None) -> None:
        """Set how ``group`` is served: ``share`` (its weight, an int >= 1; None: the
        queue's default), ``limit`` (its items in flight at most; None: the queue's
        default limit) and ``rate`` (``(count, seconds)``: at most ``count`` claims
        started per ``seconds``; None: no rate limit).  A lowered limit takes effect
        as the items in flight finish.  A group with a policy stays in :meth:`groups`.

        Reads the group's membership in the lottery and its state (read conflicts),
        writes its policy, its entry in the index of groups and, if that changes
        whether (or how heavily) it is in the lottery, the lottery.  Cost: 1 to 3
        round trips.

        Raises:
            TypeError or ValueError: a bad group, share, limit or rate (before anything
                is written).
        """
        drive(self._ops.set_group(tr, group, share, limit, rate))

    def group_policy(self, tr: Transactor, group: Group) -> Policy:
        """The policy ``group`` is served by (its own, or the defaults).  Reads one key
        (read conflict).  Cost: 1 round trip."""
        return drive(self._ops.group_policy(tr, group))

    def lottery(self, tr: Transactor) -> Dict[Group, int]:
        """The groups a claim may pick now, with their shares: those with a visible
        item, a free slot and room under their rate (as of the last write or look that
        concerned them).  Reads the lottery's entries (read conflicts).  Cost: 1 round
        trip per 1,000 groups."""
        return drive(self._ops.lottery(tr))

    def groups(self, tr: Transactor, limit: Optional[int] = None, *,
               after: Optional[Group] = None) -> List[Group]:
        """The groups with work (visible, delayed, in flight or dead items) or a
        policy, in key order (up to ``limit``), after the group ``after`` if given
        (the last of the page before: paging by key).  A group leaves the list in the
        transaction that takes its last item, dead letter or delayed item away (an
        ack, a purge, a removal), unless it has a policy: tenants that come and go do
        not make it grow.  Reads the index of groups from there (read conflict on the
        part read).  Cost: 1 round trip per 1,000 groups.

        Raises:
            TypeError or ValueError: ``after`` is not a group name.
        """
        return drive(self._ops.groups(tr, limit, after))

    # -- pushing ---------------------------------------------------------------------------

    def push(self, tr: Transactor, value: Value, *, group: Group,
             id: Optional[bytes] = None, delay: Optional[float] = None,
             time_limit: Optional[float] = None,
             limit_keys: Optional[Dict[str, Any]] = None) -> Optional[bytes]:
        """Append ``value`` to ``group``'s queue (``id``, ``delay``, ``time_limit`` and
        ``limit_keys``, its keys under the shared limits, stored in its value, as for
        :meth:`fdbrecipes.Queue.push`; ids are per group); the item's id, as
        Queue.push returns it.

        Reads, as Queue.push, the group's last item (snapshot); then the group's
        membership in the lottery (a read conflict on it) and, when the group is not
        in it, its state (read conflicts), to add it once it can be served.  Writes the
        item, the group's counters, its entry in the index of groups and the wake
        counter (atomic).  Conflicts with: nothing while the group is in the lottery
        (a push with the same id aside); with the group's claims and acks when it is
        not.  Cost: 1 to 3 round trips.

        Raises:
            TypeError or ValueError: bad value, group, id, delay, time_limit or
                limit_keys (as for Queue.push).
        """
        request = self._ops.request(group, value, id, delay, time_limit, limit_keys)
        drive(self._ops.push(tr, request))
        return request.request.item_id(0)

    def push_many(self, tr: Transactor, values: Iterable[Value], *, group: Group,
                  delay: Optional[float] = None,
                  time_limit: Optional[float] = None,
                  limit_keys: Optional[Dict[str, Any]] = None) -> List[bytes]:
        """Append every value to ``group``'s queue, in order, in one transaction (as
        :meth:`push`; the batch is checked whole first); with ``history``, the ids
        made for them (otherwise ``[]``)."""
        request = self._ops.requests(group, values, delay, time_limit, limit_keys)
        drive(self._ops.push(tr, request))
        return list(request.request.ids)

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

        With ``limits``, it reads the picked group's first 64 visible items (read
        conflicts; sharded, 64 / shards of each shard's, at least 2), the limits'
        definitions (snapshot, beside the first reads) and the state of each limit
        key they carry (by snapshot, side by side: 1 round trip more; see
        docs/flow-control.md for the conflicts), takes the first that every limit
        lets start (its slots written with its lease; a read conflict on the slot
        drawn, or on the rate's window), and parks or delays those before it that a
        limit holds back; the group is then looked at again (1 to 2 round trips
        more).  A group whose candidates were all held back counts as a miss: the
        claim picks again, up to 4 picks.

        Raises:
            TypeError or ValueError: bad ``lease_seconds``.
        """
        return drive(self._ops.claim(tr, lease_seconds))

    def claim_many(self, tr: Transactor, n: int, lease_seconds: float) -> List[FairLease]:
        """Up to ``n`` claims, each as :meth:`claim` (a group picked by lottery each
        time, its limit and rate honoured: a group may be picked again).

        Reads and conflicts as that many claims.  Given a Database, transactions of at
        most 16 claims follow one another until ``n`` are claimed or no group can be
        served; given a Transaction, at most 100 claims in it.  Ack them together
        with :meth:`ack_many`.  Cost: a claim's round trips per claim.

        Raises:
            TypeError or ValueError: ``n`` is not an int >= 0 (or over 100 given a
                Transaction); bad ``lease_seconds``.
        """
        return drive(self._ops.claim_many(tr, n, lease_seconds))

    def claimed(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                release_delay: Optional[float] = None) -> ContextManager[Optional[FairLease]]:
        """A context manager around one claimed item, with heartbeats, as
        :meth:`fdbrecipes.Queue.claimed`: waits up to ``timeout`` for a group that can
        be served (as :meth:`claim_wait`), extends the lease while the block runs, acks
        on a normal exit, releases (after ``release_delay``) when the block raises."""
        claim, seconds = self._ops.claiming(db, lease_seconds, timeout, release_delay)
        return kept_alive(self, db, claim, seconds, release_delay)

    def claim_wait(self, db: Any, lease_seconds: float,
                   timeout: Optional[float] = None) -> Optional[FairLease]:
        """:meth:`claim`, waiting on a watch (touched by every push, ack and release)
        until a group can be served; None if ``timeout`` seconds pass first.  The
        watch is shared and the wait bounded as :meth:`fdbrecipes.Queue.pop_wait`
        says."""
        return drive(self._ops.claim_wait(db, lease_seconds, timeout))

    def wait(self, db: Any, timeout: Optional[float] = None) -> bool:
        """Wait until a group can be served, or ``timeout`` passes; True if one can.
        Blocks on a watch of the wake counter (set in a transaction that writes
        nothing), shared and bounded as :meth:`fdbrecipes.Queue.pop_wait` says; needs
        a Database.  Cost per wake-up: 1 read-only check."""
        return drive(self._ops.wait(db, timeout))

    # -- leases ---------------------------------------------------------------------------

    def ack(self, tr: Transactor, lease: Union[FairLease, bytes]) -> None:
        """Remove a claimed item for good, and free its slot in its group (which comes
        back into the lottery if that was all it lacked, or leaves the index of groups
        if that was its last item).  Reads the lease and the group's membership (read
        conflicts); when the group is not in the lottery, its state.  Cost: 1 to 3
        round trips.  With ``limits``, it also gives the lease's slots in the shared
        limits back (a compare-and-clear: no conflict) and moves back the first job
        parked under each freed key (read conflicts on the key's parked jobs and the
        job's hold: a claim parking a job of that key meanwhile conflicts), whatever
        structure or group it is in, with a look at its group: 1 round trip more,
        2 when a job is parked.  :meth:`release`, :meth:`bury` and an expired lease
        met by a claim do the same; :meth:`extend` moves the slots' deadline (no
        round trip more).

        Raises:
            LeaseExpiredError: the lease had expired (as for Queue.ack).
        """
        drive(self._ops.ack(tr, lease))

    def ack_many(self, tr: Transactor,
                 leases: Iterable[Union[FairLease, bytes]]) -> List[bool]:
        """Ack every lease still alive, group by group, in one transaction; for each,
        whether it was (see :meth:`fdbrecipes.Queue.ack_many`)."""
        return drive(self._ops.ack_many(tr, leases))

    def extend(self, tr: Transactor, lease: Union[FairLease, bytes],
               seconds: float) -> FairLease:
        """Keep working on a claimed item (see :meth:`fdbrecipes.Queue.extend`).

        Raises:
            LeaseExpiredError: the lease had expired.
        """
        return drive(self._ops.extend(tr, lease, seconds))

    def extend_many(self, tr: Transactor, leases: Iterable[Union[FairLease, bytes]],
                    seconds: float) -> List[Optional[FairLease]]:
        """Extend every lease still alive, group by group, in one transaction (see
        :meth:`fdbrecipes.Queue.extend_many`)."""
        return drive(self._ops.extend_many(tr, leases, seconds))

    def release(self, tr: Transactor, lease: Union[FairLease, bytes], *,
                delay: Optional[float] = None, count: bool = True,
                error: Optional[JobError] = None) -> bool:
        """Give a claimed item back to its group (see
        :meth:`fdbrecipes.Queue.release`), freeing its slot."""
        return drive(self._ops.release(tr, lease, delay, count, error))

    def bury(self, tr: Transactor, lease: Union[FairLease, bytes],
             reason: Optional[str] = None, *, error: Optional[JobError] = None) -> bool:
        """Move a claimed item to its group's dead letters now (see
        :meth:`fdbrecipes.Queue.bury`), freeing its slot."""
        return drive(self._ops.bury(tr, lease, reason, error))

    # -- job records ------------------------------------------------------------------------

    def job(self, tr: Transactor, id: bytes, *, group: Group) -> Optional[JobRecord]:
        """The record of ``group``'s job ``id`` (as :meth:`fdbrecipes.Queue.job`, in
        the group's queue); None if unknown."""
        return drive(self._ops.job(tr, group, id))

    def result(self, db: Any, id: bytes, *, group: Group,
               timeout: Optional[float] = None) -> Any:
        """Block until ``group``'s job ``id`` is finished; its result (as
        :meth:`fdbrecipes.Queue.result`)."""
        return drive(self._ops.result(db, group, id, timeout))

    def cancel(self, tr: Transactor, id: bytes, *, group: Group) -> Optional[str]:
        """Cancel ``group``'s job ``id`` (as :meth:`fdbrecipes.Queue.cancel`); then the
        group leaves the lottery, or the index of groups, if the job was what kept it
        there.  Cost: 2 to 5 round trips."""
        return drive(self._ops.cancel(tr, group, id))

    # -- one group's contents ---------------------------------------------------------------

    def stats(self, tr: Transactor, group: Optional[Group] = None
              ) -> Union[FairStats, Dict[Group, FairStats]]:
        """``group``'s :class:`~fdbrecipes.FairStats`; without a group, those of every group of
        :meth:`groups`.  Snapshot reads of each group's counters and front (as
        Queue.stats), and its policy; the groups' reads go out side by side.  Cost: 1
        round trip for a group, a few per 500 groups."""
        if group is not None:
            return drive(self._ops.group_stats(tr, group))
        return drive(self._ops.all_stats(tr))

    def peek(self, tr: Transactor, group: Group) -> Optional[Value]:
        """The value ``group``'s next claim would take, without taking it (as
        :meth:`fdbrecipes.Queue.peek`, in the group's queue)."""
        return drive(self._ops.peek(tr, group))

    def items(self, tr: Transactor, group: Group, limit: Optional[int] = None) -> List[Value]:
        """``group``'s visible items, oldest first (up to ``limit``), as
        :meth:`fdbrecipes.Queue.items` in the group's queue."""
        return drive(self._ops.items(tr, group, limit))

    def pending(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                after: Optional[bytes] = None) -> List[PendingItem]:
        """``group``'s visible items as rows, oldest first, after the one the token
        ``after`` names (as :meth:`fdbrecipes.Queue.pending`, in the group's queue);
        the tokens name them for :meth:`remove_many`."""
        return drive(self._ops.pending(tr, group, limit, after))

    def leases(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
               after: Optional[bytes] = None) -> List[LeaseInfo]:
        """``group``'s items in flight, oldest claim first, after the lease
        ``after`` (as :meth:`fdbrecipes.Queue.leases`); each token is a FairLease's,
        which :meth:`ack`, :meth:`extend` and :meth:`release` take."""
        return drive(self._ops.leases(tr, group, limit, after))

    def delayed(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                after: Optional[bytes] = None) -> List[DelayedItem]:
        """``group``'s delayed items, soonest first, after the one the token
        ``after`` names (as :meth:`fdbrecipes.Queue.delayed`)."""
        return drive(self._ops.delayed(tr, group, limit, after))

    def remove(self, tr: Transactor, *, group: Group, id: bytes) -> Optional[Value]:
        """Remove ``group``'s pending item pushed with ``id`` (as
        :meth:`fdbrecipes.Queue.remove`); then the group leaves the lottery, or the
        index of groups, if that was what kept it there.  Cost: 2 to 4 round trips."""
        return drive(self._ops.remove(tr, group, id))

    def lookup(self, tr: Transactor, group: Group, token: bytes) -> Optional[Row]:
        """The row of ``group``'s listings a token names, as it would be listed now,
        or None when it is gone (as :meth:`fdbrecipes.Queue.lookup`; a lease's token is
        its FairLease's)."""
        return drive(self._ops.lookup(tr, group, token))

    def remove_many(self, tr: Transactor, group: Group,
                    tokens: Iterable[bytes]) -> List[Optional[Value]]:
        """Remove ``group``'s pending items the ``tokens`` name (of :meth:`pending` or
        :meth:`delayed` rows), in one transaction, as
        :meth:`fdbrecipes.Queue.remove_many`; then the group leaves the lottery, or
        the index of groups, if that was what kept it there.  Cost: 2 to 4 round
        trips."""
        return drive(self._ops.remove_many(tr, group, tokens))

    def dead(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
             after: Optional[bytes] = None) -> List[DeadLetter]:
        """``group``'s dead letters, oldest first, after the one the token ``after``
        names (see :meth:`fdbrecipes.Queue.dead`)."""
        return drive(self._ops.dead(tr, group, limit, after))

    def requeue_dead(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                     tokens: Optional[Iterable[bytes]] = None) -> int:
        """Push ``group``'s oldest dead letters (up to ``limit``, at most 1,000 per
        call), or those the ``tokens`` name, back into its queue; how many moved (see
        :meth:`fdbrecipes.Queue.requeue_dead`)."""
        return drive(self._ops.requeue_dead(tr, group, limit, tokens))

    def purge_dead(self, tr: Transactor, group: Group, *,
                   tokens: Optional[Iterable[bytes]] = None) -> int:
        """Remove ``group``'s dead letters (at most 1,000 per call), or those the
        ``tokens`` name, for good; how many.  The group leaves the index of groups if
        they were all it had."""
        return drive(self._ops.purge_dead(tr, group, tokens))

    def clear(self, tr: Transactor) -> None:
        """Remove every group, item, policy and remembered id (range clears); the wake
        counter is touched instead (waiters look again) and the receipt slots stay.
        A workflow whose nodes were here is not told (as :meth:`fdbrecipes.Queue.clear`)."""
        drive(self._ops.clear(tr))


#: What the tools know of a FairQueue (see :mod:`fdbrecipes._kinds`): its looks lie
#: where a WeightTree's leaves would.
KIND = register(Kind("fair-queue", 2, FairQueue, "fdbrecipes.aio.fair_queue:AsyncFairQueue",
                     FAIR_FOOTPRINT, covers=("weight-tree",), jobs=True, groups=True,
                     group_ops=GroupOps))
