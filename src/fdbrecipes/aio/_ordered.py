"""What AsyncQueue and AsyncPriorityQueue share: size, stats, leases, dead letters.

Each method is the async twin of the sync method of the same name: it runs the same
operation (the sync structure's), awaited by :func:`._driver.drive` instead of
blocked on.  Pushes and acks given a Database share transactions with those of other
tasks of the event loop (:mod:`._combine`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import weakref
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Dict,
    Generic,
    Iterable,
    List,
    Optional,
    Sequence,
    TypeVar,
    Union,
)

from .._dead import DeadLetter
from .._fdb import Gen, Transactor, is_transaction
from .._heartbeat import LOST
from .._leases import Lease, Leases, expired, lease_id
from .._listing import DelayedItem, LeaseInfo
from .._ordered import PushRequest, QueueStats
from .._ordered_api import OrderedAPI
from .._run import RetryStats, read
from .._values import V, check_limit, check_spread
from ..errors import LeaseExpiredError
from ._combine import Combiner, joined, split
from ._driver import drive
from ._heartbeat import Heartbeat

__all__ = ["AsyncOrderedAPI", "twin"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def twin(sync: Callable[..., Any]) -> Callable[[F], F]:
    """Give an async method the docstring of its sync twin ``sync``."""
    def document(method: F) -> F:
        # methods the two ordered structures share are documented on Queue
        name = sync.__qualname__.replace("OrderedAPI.", "Queue.")
        method.__doc__ = (f"The async twin of :meth:`fdbrecipes.{name}`, awaited without "
                          "blocking the event loop.\n\n" + inspect.cleandoc(sync.__doc__ or ""))
        return method
    return document


class AckCalls:
    """The operation behind shared acks: every call's leases acked in one transaction
    (:meth:`fdbrecipes._leases.Leases.ack_many`), the answers split per call."""

    __slots__ = ("leases",)

    def __init__(self, leases: Leases) -> None:
        self.leases = leases

    def __call__(self, tr: Any, attempt: Any, calls: Sequence[List[Any]]) -> Gen[List[List[bool]]]:
        flat, lengths = joined(calls)
        done = yield from self.leases.ack_many(tr, attempt, flat)
        return split(done, lengths)


def push_size(request: PushRequest) -> int:
    """About how many bytes of writes a push request makes (for the shared window)."""
    return sum(len(value) + 100 for _, value in request.batch)


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


class AsyncOrderedAPI(Generic[V]):
    """The async methods AsyncQueue and AsyncPriorityQueue share (see those classes)."""

    _s: OrderedAPI[V]

    def __init__(self, sync: OrderedAPI[V]) -> None:
        self._s = sync
        self._pushes: Combiner[PushRequest, bool] = Combiner(sync._loop, sync._engine.push)
        self._acks: Combiner[List[Any], List[bool]] = Combiner(sync._loop,
                                                               AckCalls(sync._leases))
        self._takers = Takers()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._s.subspace!r})"

    @property
    def subspace(self) -> Any:
        """The subspace holding every key of this structure."""
        return self._s.subspace

    @property
    def id_retention(self) -> float:
        """Seconds an idempotency id is remembered after its item left."""
        return self._s.id_retention

    @property
    def max_deliveries(self) -> Optional[int]:
        """Deliveries after which a lease that ends without ack makes its item a dead
        letter (None: never)."""
        return self._s.max_deliveries

    @property
    def retry_stats(self) -> RetryStats:
        """Retry counters of the loops this object ran (calls given a Database)."""
        return self._s.retry_stats

    # -- size, stats, clear --------------------------------------------------------------

    @twin(OrderedAPI.size)
    async def size(self, tr: Transactor) -> int:
        return await drive(self._s._size(tr))

    @twin(OrderedAPI.stats)
    async def stats(self, tr: Transactor) -> QueueStats:
        return await drive(self._s._stats(tr))

    @twin(OrderedAPI.is_empty)
    async def is_empty(self, tr: Transactor) -> bool:
        return await drive(self._s._is_empty(tr))

    @twin(OrderedAPI.clear)
    async def clear(self, tr: Transactor) -> None:
        await drive(self._s._clear(tr))

    # -- leases ------------------------------------------------------------------------

    @twin(OrderedAPI.ack)
    async def ack(self, tr: Transactor, lease: Union[Lease[Any], bytes]) -> None:
        if is_transaction(tr):
            await drive(self._s._ack(tr, lease))
            return
        lease_id(lease)
        done = await self._acks.call(tr, [lease], 100)
        if not done[0]:
            raise expired("ack")

    @twin(OrderedAPI.ack_many)
    async def ack_many(self, tr: Transactor,
                       leases: Iterable[Union[Lease[Any], bytes]]) -> List[bool]:
        if is_transaction(tr):
            return await drive(self._s._ack_many(tr, leases))
        batch = self._s._lease_batch(leases)
        if not batch:
            return await drive(self._s._ack_many(tr, batch))
        return await self._acks.call(tr, batch, 100 * len(batch))

    @twin(OrderedAPI.extend)
    async def extend(self, tr: Transactor, lease: Union[Lease[Any], bytes],
                     seconds: float) -> Lease[V]:
        return await drive(self._s._extend(tr, lease, seconds))

    @twin(OrderedAPI.extend_many)
    async def extend_many(self, tr: Transactor, leases: Iterable[Union[Lease[Any], bytes]],
                          seconds: float) -> List[Optional[Lease[V]]]:
        return await drive(self._s._extend_many(tr, leases, seconds))

    @twin(OrderedAPI.release)
    async def release(self, tr: Transactor, lease: Union[Lease[Any], bytes], *,
                      delay: Optional[float] = None, count: bool = True) -> bool:
        return await drive(self._s._release(tr, lease, delay, count))

    @twin(OrderedAPI.bury)
    async def bury(self, tr: Transactor, lease: Union[Lease[Any], bytes],
                   reason: Optional[str] = None) -> bool:
        return await drive(self._s._bury(tr, lease, reason))

    # -- stuck work ---------------------------------------------------------------------

    @twin(OrderedAPI.leases)
    async def leases(self, tr: Transactor, limit: Optional[int] = None) -> List[LeaseInfo]:
        return await drive(read(tr, self._s._listing.leases, check_limit(limit)))

    @twin(OrderedAPI.delayed)
    async def delayed(self, tr: Transactor, limit: Optional[int] = None) -> List[DelayedItem]:
        return await drive(read(tr, self._s._listing.delayed, check_limit(limit)))

    @twin(OrderedAPI.remove)
    async def remove(self, tr: Transactor, *, id: bytes) -> Optional[V]:
        return await drive(self._s._remove(tr, id))

    # -- dead letters ------------------------------------------------------------------

    @twin(OrderedAPI.dead)
    async def dead(self, tr: Transactor, limit: Optional[int] = None) -> List[DeadLetter]:
        return await drive(self._s._dead_letters(tr, limit))

    @twin(OrderedAPI.requeue_dead)
    async def requeue_dead(self, tr: Transactor, limit: Optional[int] = None) -> int:
        return await drive(self._s._requeue_dead(tr, limit))

    @twin(OrderedAPI.purge_dead)
    async def purge_dead(self, tr: Transactor) -> int:
        return await drive(self._s._purge_dead(tr))

    # -- waiting ------------------------------------------------------------------------

    @twin(OrderedAPI.wait)
    async def wait(self, db: Any, timeout: Optional[float] = None) -> bool:
        return await drive(self._s._wait(db, timeout))

    # -- what the public classes call --------------------------------------------------

    async def _take(self, tr: Transactor, take: Gen[T], spread: Any) -> T:
        """Run a take (a pop or a claim): in the caller's transaction, or given a
        Database once fewer than ``spread`` takes with that spread of this structure
        run in this event loop (:class:`Takers`)."""
        if is_transaction(tr):
            return await drive(take)
        async with self._takers.bound(check_spread(spread)):
            return await drive(take)

    async def _push(self, tr: Transactor, request: PushRequest) -> None:
        """Push a validated request: in the caller's transaction, or given a Database
        in a transaction shared with other tasks' pushes."""
        if is_transaction(tr) or not request.batch:
            await drive(self._s._push(tr, request))
        else:
            await self._pushes.call(tr, request, push_size(request))

    @contextlib.asynccontextmanager
    async def _claimed(self, db: Any, claim: Gen[Optional[Lease[V]]], seconds: float,
                       release_delay: Optional[float]) -> AsyncIterator[Optional[Lease[V]]]:
        """The async twin of ``_heartbeat.claimed``: the heartbeat is a task."""
        lease = await drive(claim)
        if lease is None:
            yield None
            return
        beat = Heartbeat(self.extend, db, lease, seconds)
        try:
            yield lease
        except BaseException:
            await beat.stop()
            if not beat.lost:
                with contextlib.suppress(Exception):
                    await self.release(db, lease, delay=release_delay)
            raise
        await beat.stop()
        if beat.lost:
            raise LeaseExpiredError(LOST)
        await self.ack(db, lease)
