"""What AsyncQueue and AsyncPriorityQueue share: size, stats, leases, dead letters.

:class:`AsyncOrderedFace` is the async twin of :class:`fdbrecipes._ordered_face.OrderedFace`:
each method awaits the same operation of the structure's operations object
(:mod:`fdbrecipes._ops.ordered`) with the awaiting driver; its docstring is the sync
method's (see :func:`fdbrecipes._face.twin`).  Given a Database, pushes and acks share
transactions with those of other tasks of the event loop (:mod:`._combine`), and one
event loop runs a bounded number of takes at once (:class:`Takers`).
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from typing import Any, Dict, Iterable, List, Optional, TypeVar

from .._drivers.awaiting import drive
from .._face import twin
from .._fdb import Gen, Transactor, is_transaction
from .._ops.checks import lease_batch
from .._ops.ordered import LeaseLike, OrderedOps
from .._ordered.dead import DeadLetter
from .._ordered.engine import PushRequest, QueueStats
from .._ordered.leases import Lease, lease_id, refused
from .._ordered.listing import DelayedItem, LeaseInfo
from .._ordered.paging import Row
from .._ordered_face import OrderedBase
from .._records.records import JobError, JobRecord
from .._values import V, check_spread
from ..queue import Queue
from ._combine import Combiner
from ._jobs_face import AsyncJobMethods

__all__ = ["AsyncOrderedFace"]

T = TypeVar("T")


class Takers:
    """How many takes of one structure (pops and claims given a Database) one event
    loop runs at once: at most ``spread`` of those with that ``spread`` (one at a
    time for strict ones).  More would only conflict with each other, since they draw
    among the same ``spread`` oldest items: on a real server 64 tasks claiming batches
    of 100 moved 2,800 items a second unbounded and 12,800 bounded, 64 tasks popping
    with ``spread=16`` 1,500 and 2,300 pops a second.  A semaphore belongs to one
    event loop, hence one set per loop."""

    __slots__ = ("by_loop",)

    def __init__(self) -> None:
        self.by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, Dict[int, asyncio.Semaphore]] = weakref.WeakKeyDictionary()

    def bound(self, spread: int) -> asyncio.Semaphore:
        """The semaphore of takes with ``spread`` in the running event loop."""
        semaphores = self.by_loop.setdefault(asyncio.get_running_loop(), {})
        if spread not in semaphores:
            semaphores[spread] = asyncio.Semaphore(spread)
        return semaphores[spread]


@twin(Queue)  # the methods Queue and PriorityQueue share are documented on Queue
class AsyncOrderedFace(OrderedBase[V], AsyncJobMethods[OrderedOps[V]]):
    """The async methods AsyncQueue and AsyncPriorityQueue share (see those classes)."""

    @functools.cached_property
    def _pushes(self) -> Combiner[PushRequest, bool]:
        """The pushes of this object given a Database, in shared transactions."""
        return Combiner(self._ops.push_requests)

    @functools.cached_property
    def _acks(self) -> Combiner[List[LeaseLike], List[bool]]:
        """The acks of this object given a Database, in shared transactions."""
        return Combiner(self._ops.ack_batches)

    @functools.cached_property
    def _takers(self) -> Takers:
        """How many takes of this object an event loop runs at once."""
        return Takers()

    # -- size, stats, clear --------------------------------------------------------------

    async def size(self, tr: Transactor) -> int:
        return await drive(self._ops.size(tr))

    async def stats(self, tr: Transactor) -> QueueStats:
        return await drive(self._ops.stats(tr))

    async def is_empty(self, tr: Transactor) -> bool:
        return await drive(self._ops.is_empty(tr))

    async def clear(self, tr: Transactor) -> None:
        await drive(self._ops.clear(tr))

    # -- leases ------------------------------------------------------------------------

    async def ack(self, tr: Transactor, lease: LeaseLike) -> None:
        if is_transaction(tr):
            await drive(self._ops.ack(tr, lease))
            return
        lease_id(lease)
        done = await self._acks.call(tr, [lease], 100)
        if not done[0]:
            raise refused("ack", self._ops.subspace)

    async def ack_many(self, tr: Transactor, leases: Iterable[LeaseLike]) -> List[bool]:
        if is_transaction(tr):
            return await drive(self._ops.ack_many(tr, leases))
        batch = lease_batch(leases)
        if not batch:
            return await drive(self._ops.ack_many(tr, batch))
        return await self._acks.call(tr, batch, 100 * len(batch))

    async def extend(self, tr: Transactor, lease: LeaseLike, seconds: float) -> Lease[V]:
        return await drive(self._ops.extend(tr, lease, seconds))

    async def extend_many(self, tr: Transactor, leases: Iterable[LeaseLike],
                          seconds: float) -> List[Optional[Lease[V]]]:
        return await drive(self._ops.extend_many(tr, leases, seconds))

    async def release(self, tr: Transactor, lease: LeaseLike, *,
                      delay: Optional[float] = None, count: bool = True,
                      error: Optional[JobError] = None) -> bool:
        return await drive(self._ops.release(tr, lease, delay, count, error))

    async def bury(self, tr: Transactor, lease: LeaseLike, reason: Optional[str] = None, *,
                   error: Optional[JobError] = None) -> bool:
        return await drive(self._ops.bury(tr, lease, reason, error))

    # -- stuck work ---------------------------------------------------------------------

    async def leases(self, tr: Transactor, limit: Optional[int] = None, *,
                     after: Optional[bytes] = None) -> List[LeaseInfo]:
        return await drive(self._ops.leases(tr, limit, after))

    async def delayed(self, tr: Transactor, limit: Optional[int] = None, *,
                      after: Optional[bytes] = None) -> List[DelayedItem]:
        return await drive(self._ops.delayed(tr, limit, after))

    async def remove(self, tr: Transactor, *, id: bytes) -> Optional[V]:
        return await drive(self._ops.remove(tr, id))

    async def lookup(self, tr: Transactor, token: bytes) -> Optional[Row]:
        return await drive(self._ops.lookup(tr, token))

    async def remove_many(self, tr: Transactor, tokens: Iterable[bytes]) -> List[Optional[V]]:
        return await drive(self._ops.remove_many(tr, tokens))

    # -- job records --------------------------------------------------------------------

    async def job(self, tr: Transactor, id: bytes) -> Optional[JobRecord]:
        return await drive(self._ops.job(tr, id))

    async def result(self, db: Any, id: bytes, timeout: Optional[float] = None) -> Any:
        return await drive(self._ops.result(db, id, timeout))

    async def cancel(self, tr: Transactor, id: bytes) -> Optional[str]:
        return await drive(self._ops.cancel(tr, id))

    # -- dead letters ------------------------------------------------------------------

    async def dead(self, tr: Transactor, limit: Optional[int] = None, *,
                   after: Optional[bytes] = None) -> List[DeadLetter]:
        return await drive(self._ops.dead(tr, limit, after))

    async def requeue_dead(self, tr: Transactor, limit: Optional[int] = None, *,
                           tokens: Optional[Iterable[bytes]] = None) -> int:
        return await drive(self._ops.requeue_dead(tr, limit, tokens))

    async def purge_dead(self, tr: Transactor, *,
                         tokens: Optional[Iterable[bytes]] = None) -> int:
        return await drive(self._ops.purge_dead(tr, tokens))

    # -- waiting ------------------------------------------------------------------------

    async def wait(self, db: Any, timeout: Optional[float] = None) -> bool:
        return await drive(self._ops.wait(db, timeout))

    # -- what the public classes call --------------------------------------------------

    async def _take(self, tr: Transactor, take: Gen[T], spread: Any) -> T:
        """Run a take (a pop or a claim): in the caller's transaction, or given a
        Database once fewer than ``spread`` takes with that spread of this structure
        (times its shards, which takes share among them) run in this event loop
        (:class:`Takers`)."""
        if is_transaction(tr):
            return await drive(take)
        async with self._takers.bound(check_spread(spread) * self._ops.shards):
            return await drive(take)

    async def _push(self, tr: Transactor, request: PushRequest) -> PushRequest:
        """Push a checked request: in the caller's transaction, or given a Database
        in a transaction shared with other tasks' pushes; the request (which names
        its items' ids)."""
        if is_transaction(tr) or not request.batch:
            await drive(self._ops.push(tr, request))
        else:
            await self._pushes.call(tr, request, request.size())
        return request
