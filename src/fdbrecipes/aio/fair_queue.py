# Generated in part by tools/unasync.py from src/fdbrecipes/fair_queue.py: the
# public methods (signature, docstring, code), but the code of those the script
# lists in OWN_CODE.  Edit the sync module (or OWN_CODE's methods here), then run
# `python tools/unasync.py`; `--check` (in .ci/run) fails while a file is stale.
"""AsyncFairQueue: :class:`fdbrecipes.FairQueue` for asyncio code.

The same constructor arguments and the same key layout as FairQueue; every method is
an ``async def`` twin of the sync method of the same name, with its docstring, awaiting
the same operation (:class:`fdbrecipes._ops.fair.FairOps`).
"""

from __future__ import annotations

from typing import Any, AsyncContextManager, Dict, Iterable, List, Optional, Tuple, Union

from .._bases import FairBase, Group
from .._drivers.awaiting import drive
from .._fair.parts import FairLease, FairStats, Policy
from .._fdb import Transactor
from .._ops.fair import FairOps
from .._ordered.dead import DeadLetter
from .._ordered.listing import DelayedItem, LeaseInfo
from .._ordered.paging import PendingItem, Row
from .._records.records import JobError, JobRecord
from .._values import Value
from ._heartbeat import kept_alive
from ._jobs_face import AsyncJobMethods

__all__ = ["AsyncFairQueue"]


class AsyncFairQueue(FairBase, AsyncJobMethods[FairOps]):
    """A queue per group, served by weighted lottery, for asyncio code (see
    :class:`fdbrecipes.FairQueue`, and :class:`fdbrecipes.aio.AsyncQueue` for what
    ``tr`` and cancellation mean here: a claim cancelled while its commit is in flight
    gives its items back once it landed)."""

    async def set_group(self, tr: Transactor, group: Group, *, share: Optional[int] = None,
                        limit: Optional[int] = None, rate: Optional[Tuple[int, float]] = None
                        ) -> None:
        """The async twin of :meth:`fdbrecipes.FairQueue.set_group`, awaited without blocking
        the event loop.

        Set how ``group`` is served: ``share`` (its weight, an int >= 1; None: the
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
        await drive(self._ops.set_group(tr, group, share, limit, rate))

    async def group_policy(self, tr: Transactor, group: Group) -> Policy:
        """The async twin of :meth:`fdbrecipes.FairQueue.group_policy`, awaited without
        blocking the event loop.

        The policy ``group`` is served by (its own, or the defaults).  Reads one key
        (read conflict).  Cost: 1 round trip.
        """
        return await drive(self._ops.group_policy(tr, group))

    async def lottery(self, tr: Transactor) -> Dict[Group, int]:
        """The async twin of :meth:`fdbrecipes.FairQueue.lottery`, awaited without blocking the
        event loop.

        The groups a claim may pick now, with their shares: those with a visible
        item, a free slot and room under their rate (as of the last write or look that
        concerned them).  Reads the lottery's entries (read conflicts).  Cost: 1 round
        trip per 1,000 groups.
        """
        return await drive(self._ops.lottery(tr))

    async def groups(self, tr: Transactor, limit: Optional[int] = None, *,
                     after: Optional[Group] = None) -> List[Group]:
        """The async twin of :meth:`fdbrecipes.FairQueue.groups`, awaited without blocking the
        event loop.

        The groups with work (visible, delayed, in flight or dead items) or a
        policy, in key order (up to ``limit``), after the group ``after`` if given
        (the last of the page before: paging by key).  A group leaves the list in the
        transaction that takes its last item, dead letter or delayed item away (an
        ack, a purge, a removal), unless it has a policy: tenants that come and go do
        not make it grow.  Reads the index of groups from there (read conflict on the
        part read).  Cost: 1 round trip per 1,000 groups.

        Raises:
            TypeError or ValueError: ``after`` is not a group name.
        """
        return await drive(self._ops.groups(tr, limit, after))

    async def push(self, tr: Transactor, value: Value, *, group: Group,
                   id: Optional[bytes] = None, delay: Optional[float] = None,
                   time_limit: Optional[float] = None,
                   limit_keys: Optional[Dict[str, Any]] = None) -> Optional[bytes]:
        """The async twin of :meth:`fdbrecipes.FairQueue.push`, awaited without blocking the
        event loop.

        Append ``value`` to ``group``'s queue (``id``, ``delay``, ``time_limit`` and
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
        await drive(self._ops.push(tr, request))
        return request.request.item_id(0)

    async def push_many(self, tr: Transactor, values: Iterable[Value], *, group: Group,
                        delay: Optional[float] = None,
                        time_limit: Optional[float] = None,
                        limit_keys: Optional[Dict[str, Any]] = None) -> List[bytes]:
        """The async twin of :meth:`fdbrecipes.FairQueue.push_many`, awaited without blocking
        the event loop.

        Append every value to ``group``'s queue, in order, in one transaction (as
        :meth:`push`; the batch is checked whole first); with ``history``, the ids
        made for them (otherwise ``[]``).
        """
        request = self._ops.requests(group, values, delay, time_limit, limit_keys)
        await drive(self._ops.push(tr, request))
        return list(request.request.ids)

    async def claim(self, tr: Transactor, lease_seconds: float) -> Optional[FairLease]:
        """The async twin of :meth:`fdbrecipes.FairQueue.claim`, awaited without blocking the
        event loop.

        Pick a group by lottery among those that can be served, and claim its
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
        return await drive(self._ops.claim(tr, lease_seconds))

    async def claim_many(self, tr: Transactor, n: int, lease_seconds: float) -> List[FairLease]:
        """The async twin of :meth:`fdbrecipes.FairQueue.claim_many`, awaited without blocking
        the event loop.

        Up to ``n`` claims, each as :meth:`claim` (a group picked by lottery each
        time, its limit and rate honoured: a group may be picked again).

        Reads and conflicts as that many claims.  Given a Database, transactions of at
        most 16 claims follow one another until ``n`` are claimed or no group can be
        served; given a Transaction, at most 100 claims in it.  Ack them together
        with :meth:`ack_many`.  Cost: a claim's round trips per claim.

        Raises:
            TypeError or ValueError: ``n`` is not an int >= 0 (or over 100 given a
                Transaction); bad ``lease_seconds``.
        """
        return await drive(self._ops.claim_many(tr, n, lease_seconds))

    def claimed(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                release_delay: Optional[float] = None) -> AsyncContextManager[Optional[FairLease]]:
        """The async twin of :meth:`fdbrecipes.FairQueue.claimed`, used with ``async with``
        (its heartbeat is a task).

        A context manager around one claimed item, with heartbeats, as
        :meth:`fdbrecipes.Queue.claimed`: waits up to ``timeout`` for a group that can
        be served (as :meth:`claim_wait`), extends the lease while the block runs, acks
        on a normal exit, releases (after ``release_delay``) when the block raises.
        """
        claim, seconds = self._ops.claiming(db, lease_seconds, timeout, release_delay)
        return kept_alive(self, db, claim, seconds, release_delay)

    async def claim_wait(self, db: Any, lease_seconds: float,
                         timeout: Optional[float] = None) -> Optional[FairLease]:
        """The async twin of :meth:`fdbrecipes.FairQueue.claim_wait`, awaited without blocking
        the event loop.

        :meth:`claim`, waiting on a watch (touched by every push, ack and release)
        until a group can be served; None if ``timeout`` seconds pass first.  The
        watch is shared and the wait bounded as :meth:`fdbrecipes.Queue.pop_wait`
        says.
        """
        return await drive(self._ops.claim_wait(db, lease_seconds, timeout))

    async def wait(self, db: Any, timeout: Optional[float] = None) -> bool:
        """The async twin of :meth:`fdbrecipes.FairQueue.wait`, awaited without blocking the
        event loop.

        Wait until a group can be served, or ``timeout`` passes; True if one can.
        Awaits a watch of the wake counter (set in a transaction that writes
        nothing), shared and bounded as :meth:`fdbrecipes.Queue.pop_wait` says; needs
        a Database.  Cost per wake-up: 1 read-only check.
        """
        return await drive(self._ops.wait(db, timeout))

    async def ack(self, tr: Transactor, lease: Union[FairLease, bytes]) -> None:
        """The async twin of :meth:`fdbrecipes.FairQueue.ack`, awaited without blocking the
        event loop.

        Remove a claimed item for good, and free its slot in its group (which comes
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
        await drive(self._ops.ack(tr, lease))

    async def ack_many(self, tr: Transactor,
                       leases: Iterable[Union[FairLease, bytes]]) -> List[bool]:
        """The async twin of :meth:`fdbrecipes.FairQueue.ack_many`, awaited without blocking
        the event loop.

        Ack every lease still alive, group by group, in one transaction; for each,
        whether it was (see :meth:`fdbrecipes.Queue.ack_many`).
        """
        return await drive(self._ops.ack_many(tr, leases))

    async def extend(self, tr: Transactor, lease: Union[FairLease, bytes],
                     seconds: float) -> FairLease:
        """The async twin of :meth:`fdbrecipes.FairQueue.extend`, awaited without blocking the
        event loop.

        Keep working on a claimed item (see :meth:`fdbrecipes.Queue.extend`).

        Raises:
            LeaseExpiredError: the lease had expired.
        """
        return await drive(self._ops.extend(tr, lease, seconds))

    async def extend_many(self, tr: Transactor, leases: Iterable[Union[FairLease, bytes]],
                          seconds: float) -> List[Optional[FairLease]]:
        """The async twin of :meth:`fdbrecipes.FairQueue.extend_many`, awaited without blocking
        the event loop.

        Extend every lease still alive, group by group, in one transaction (see
        :meth:`fdbrecipes.Queue.extend_many`).
        """
        return await drive(self._ops.extend_many(tr, leases, seconds))

    async def release(self, tr: Transactor, lease: Union[FairLease, bytes], *,
                      delay: Optional[float] = None, count: bool = True,
                      error: Optional[JobError] = None) -> bool:
        """The async twin of :meth:`fdbrecipes.FairQueue.release`, awaited without blocking the
        event loop.

        Give a claimed item back to its group (see
        :meth:`fdbrecipes.Queue.release`), freeing its slot.
        """
        return await drive(self._ops.release(tr, lease, delay, count, error))

    async def bury(self, tr: Transactor, lease: Union[FairLease, bytes],
                   reason: Optional[str] = None, *, error: Optional[JobError] = None) -> bool:
        """The async twin of :meth:`fdbrecipes.FairQueue.bury`, awaited without blocking the
        event loop.

        Move a claimed item to its group's dead letters now (see
        :meth:`fdbrecipes.Queue.bury`), freeing its slot.
        """
        return await drive(self._ops.bury(tr, lease, reason, error))

    async def job(self, tr: Transactor, id: bytes, *, group: Group) -> Optional[JobRecord]:
        """The async twin of :meth:`fdbrecipes.FairQueue.job`, awaited without blocking the
        event loop.

        The record of ``group``'s job ``id`` (as :meth:`fdbrecipes.Queue.job`, in
        the group's queue); None if unknown.
        """
        return await drive(self._ops.job(tr, group, id))

    async def result(self, db: Any, id: bytes, *, group: Group,
                     timeout: Optional[float] = None) -> Any:
        """The async twin of :meth:`fdbrecipes.FairQueue.result`, awaited without blocking the
        event loop.

        Wait until ``group``'s job ``id`` is finished; its result (as
        :meth:`fdbrecipes.Queue.result`).
        """
        return await drive(self._ops.result(db, group, id, timeout))

    async def cancel(self, tr: Transactor, id: bytes, *, group: Group) -> Optional[str]:
        """The async twin of :meth:`fdbrecipes.FairQueue.cancel`, awaited without blocking the
        event loop.

        Cancel ``group``'s job ``id`` (as :meth:`fdbrecipes.Queue.cancel`); then the
        group leaves the lottery, or the index of groups, if the job was what kept it
        there.  Cost: 2 to 5 round trips.
        """
        return await drive(self._ops.cancel(tr, group, id))

    async def stats(self, tr: Transactor, group: Optional[Group] = None
                    ) -> Union[FairStats, Dict[Group, FairStats]]:
        """The async twin of :meth:`fdbrecipes.FairQueue.stats`, awaited without blocking the
        event loop.

        ``group``'s :class:`~fdbrecipes.FairStats`; without a group, those of every group of
        :meth:`groups`.  Snapshot reads of each group's counters and front (as
        Queue.stats), and its policy; the groups' reads go out side by side.  Cost: 1
        round trip for a group, a few per 500 groups.
        """
        if group is not None:
            return await drive(self._ops.group_stats(tr, group))
        return await drive(self._ops.all_stats(tr))

    async def peek(self, tr: Transactor, group: Group) -> Optional[Value]:
        """The async twin of :meth:`fdbrecipes.FairQueue.peek`, awaited without blocking the
        event loop.

        The value ``group``'s next claim would take, without taking it (as
        :meth:`fdbrecipes.Queue.peek`, in the group's queue).
        """
        return await drive(self._ops.peek(tr, group))

    async def items(self, tr: Transactor, group: Group, limit: Optional[int] = None) -> List[Value]:
        """The async twin of :meth:`fdbrecipes.FairQueue.items`, awaited without blocking the
        event loop.

        ``group``'s visible items, oldest first (up to ``limit``), as
        :meth:`fdbrecipes.Queue.items` in the group's queue.
        """
        return await drive(self._ops.items(tr, group, limit))

    async def pending(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                      after: Optional[bytes] = None) -> List[PendingItem]:
        """The async twin of :meth:`fdbrecipes.FairQueue.pending`, awaited without blocking the
        event loop.

        ``group``'s visible items as rows, oldest first, after the one the token
        ``after`` names (as :meth:`fdbrecipes.Queue.pending`, in the group's queue);
        the tokens name them for :meth:`remove_many`.
        """
        return await drive(self._ops.pending(tr, group, limit, after))

    async def leases(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                     after: Optional[bytes] = None) -> List[LeaseInfo]:
        """The async twin of :meth:`fdbrecipes.FairQueue.leases`, awaited without blocking the
        event loop.

        ``group``'s items in flight, oldest claim first, after the lease
        ``after`` (as :meth:`fdbrecipes.Queue.leases`); each token is a FairLease's,
        which :meth:`ack`, :meth:`extend` and :meth:`release` take.
        """
        return await drive(self._ops.leases(tr, group, limit, after))

    async def delayed(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                      after: Optional[bytes] = None) -> List[DelayedItem]:
        """The async twin of :meth:`fdbrecipes.FairQueue.delayed`, awaited without blocking the
        event loop.

        ``group``'s delayed items, soonest first, after the one the token
        ``after`` names (as :meth:`fdbrecipes.Queue.delayed`).
        """
        return await drive(self._ops.delayed(tr, group, limit, after))

    async def remove(self, tr: Transactor, *, group: Group, id: bytes) -> Optional[Value]:
        """The async twin of :meth:`fdbrecipes.FairQueue.remove`, awaited without blocking the
        event loop.

        Remove ``group``'s pending item pushed with ``id`` (as
        :meth:`fdbrecipes.Queue.remove`); then the group leaves the lottery, or the
        index of groups, if that was what kept it there.  Cost: 2 to 4 round trips.
        """
        return await drive(self._ops.remove(tr, group, id))

    async def lookup(self, tr: Transactor, group: Group, token: bytes) -> Optional[Row]:
        """The async twin of :meth:`fdbrecipes.FairQueue.lookup`, awaited without blocking the
        event loop.

        The row of ``group``'s listings a token names, as it would be listed now,
        or None when it is gone (as :meth:`fdbrecipes.Queue.lookup`; a lease's token is
        its FairLease's).
        """
        return await drive(self._ops.lookup(tr, group, token))

    async def remove_many(self, tr: Transactor, group: Group,
                          tokens: Iterable[bytes]) -> List[Optional[Value]]:
        """The async twin of :meth:`fdbrecipes.FairQueue.remove_many`, awaited without blocking
        the event loop.

        Remove ``group``'s pending items the ``tokens`` name (of :meth:`pending` or
        :meth:`delayed` rows), in one transaction, as
        :meth:`fdbrecipes.Queue.remove_many`; then the group leaves the lottery, or
        the index of groups, if that was what kept it there.  Cost: 2 to 4 round
        trips.
        """
        return await drive(self._ops.remove_many(tr, group, tokens))

    async def dead(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                   after: Optional[bytes] = None) -> List[DeadLetter]:
        """The async twin of :meth:`fdbrecipes.FairQueue.dead`, awaited without blocking the
        event loop.

        ``group``'s dead letters, oldest first, after the one the token ``after``
        names (see :meth:`fdbrecipes.Queue.dead`).
        """
        return await drive(self._ops.dead(tr, group, limit, after))

    async def requeue_dead(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                           tokens: Optional[Iterable[bytes]] = None) -> int:
        """The async twin of :meth:`fdbrecipes.FairQueue.requeue_dead`, awaited without
        blocking the event loop.

        Push ``group``'s oldest dead letters (up to ``limit``, at most 1,000 per
        call), or those the ``tokens`` name, back into its queue; how many moved (see
        :meth:`fdbrecipes.Queue.requeue_dead`).
        """
        return await drive(self._ops.requeue_dead(tr, group, limit, tokens))

    async def purge_dead(self, tr: Transactor, group: Group, *,
                         tokens: Optional[Iterable[bytes]] = None) -> int:
        """The async twin of :meth:`fdbrecipes.FairQueue.purge_dead`, awaited without blocking
        the event loop.

        Remove ``group``'s dead letters (at most 1,000 per call), or those the
        ``tokens`` name, for good; how many.  The group leaves the index of groups if
        they were all it had.
        """
        return await drive(self._ops.purge_dead(tr, group, tokens))

    async def clear(self, tr: Transactor) -> None:
        """The async twin of :meth:`fdbrecipes.FairQueue.clear`, awaited without blocking the
        event loop.

        Remove every group, item, policy and remembered id (range clears); the wake
        counter is touched instead (waiters look again) and the receipt slots stay.
        A workflow whose nodes were here is not told (as :meth:`fdbrecipes.Queue.clear`).
        """
        await drive(self._ops.clear(tr))
