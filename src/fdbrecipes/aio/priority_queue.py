"""AsyncPriorityQueue: :class:`fdbrecipes.PriorityQueue` for asyncio code.

The same constructor arguments and the same key layout as PriorityQueue; every
method is an ``async def`` twin of the sync method of the same name.
"""

from __future__ import annotations

from typing import Any, AsyncContextManager, Iterable, List, Optional, Tuple

from .._fdb import Transactor
from .._front import MAX, MIN
from .._leases import Lease
from .._values import V
from .._wait import Clock
from ..priority_queue import PriorityQueue, _end
from ._driver import drive
from ._ordered import AsyncOrderedAPI, twin

__all__ = ["AsyncPriorityQueue"]


class AsyncPriorityQueue(AsyncOrderedAPI[V]):
    """A transactional double-ended priority queue for asyncio code (see
    :class:`fdbrecipes.PriorityQueue`, and :class:`fdbrecipes.aio.AsyncQueue` for
    what ``tr``, shared transactions and cancellation mean here)."""

    _s: PriorityQueue[V]

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
        super().__init__(PriorityQueue(
            subspace, high_contention=high_contention, clock=clock,
            id_retention=id_retention, result_timeout=result_timeout,
            max_deliveries=max_deliveries))

    @twin(PriorityQueue.push)
    async def push(self, tr: Transactor, value: V, priority: int, *,
                   id: Optional[bytes] = None, delay: Optional[float] = None) -> None:
        await self._push(tr, self._s._one(value, priority, id, delay))

    @twin(PriorityQueue.push_many)
    async def push_many(self, tr: Transactor, items: Iterable[Tuple[V, int]], *,
                        delay: Optional[float] = None) -> None:
        await self._push(tr, self._s._many(items, delay))

    @twin(PriorityQueue.pop_min)
    async def pop_min(self, tr: Transactor, *, spread: int = 1) -> Optional[V]:
        return await self._take(tr, self._s._pop(tr, MIN, spread), spread)

    @twin(PriorityQueue.pop_max)
    async def pop_max(self, tr: Transactor, *, spread: int = 1) -> Optional[V]:
        return await self._take(tr, self._s._pop(tr, MAX, spread), spread)

    @twin(PriorityQueue.pop_min_many)
    async def pop_min_many(self, tr: Transactor, n: int, *, spread: int = 1) -> List[V]:
        return await self._take(tr, self._s._pop_many(tr, MIN, n, spread), spread)

    @twin(PriorityQueue.pop_max_many)
    async def pop_max_many(self, tr: Transactor, n: int, *, spread: int = 1) -> List[V]:
        return await self._take(tr, self._s._pop_many(tr, MAX, n, spread), spread)

    @twin(PriorityQueue.peek_min)
    async def peek_min(self, tr: Transactor) -> Optional[V]:
        return await drive(self._s._peek(tr, MIN))

    @twin(PriorityQueue.peek_max)
    async def peek_max(self, tr: Transactor) -> Optional[V]:
        return await drive(self._s._peek(tr, MAX))

    @twin(PriorityQueue.items)
    async def items(self, tr: Transactor, limit: Optional[int] = None,
                    reverse: bool = False) -> List[V]:
        return await drive(self._s._items(tr, _end(reverse), limit))

    @twin(PriorityQueue.claim_min)
    async def claim_min(self, tr: Transactor, lease_seconds: float, *,
                        spread: int = 1) -> Optional[Lease[V]]:
        return await self._take(tr, self._s._claim(tr, MIN, lease_seconds, spread), spread)

    @twin(PriorityQueue.claim_max)
    async def claim_max(self, tr: Transactor, lease_seconds: float, *,
                        spread: int = 1) -> Optional[Lease[V]]:
        return await self._take(tr, self._s._claim(tr, MAX, lease_seconds, spread), spread)

    @twin(PriorityQueue.claim_min_many)
    async def claim_min_many(self, tr: Transactor, n: int, lease_seconds: float, *,
                             spread: int = 1) -> List[Lease[V]]:
        return await self._take(tr, self._s._claim_many(tr, MIN, n, lease_seconds, spread), spread)

    @twin(PriorityQueue.claim_max_many)
    async def claim_max_many(self, tr: Transactor, n: int, lease_seconds: float, *,
                             spread: int = 1) -> List[Lease[V]]:
        return await self._take(tr, self._s._claim_many(tr, MAX, n, lease_seconds, spread), spread)

    @twin(PriorityQueue.claimed_min)
    def claimed_min(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                    release_delay: Optional[float] = None
                    ) -> AsyncContextManager[Optional[Lease[V]]]:
        claim, seconds = self._s._claiming(db, MIN, lease_seconds, timeout, release_delay)
        return self._claimed(db, claim, seconds, release_delay)

    @twin(PriorityQueue.claimed_max)
    def claimed_max(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                    release_delay: Optional[float] = None
                    ) -> AsyncContextManager[Optional[Lease[V]]]:
        claim, seconds = self._s._claiming(db, MAX, lease_seconds, timeout, release_delay)
        return self._claimed(db, claim, seconds, release_delay)

    @twin(PriorityQueue.pop_min_wait)
    async def pop_min_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[V]:
        return await drive(self._s._pop_wait(db, MIN, timeout))

    @twin(PriorityQueue.pop_max_wait)
    async def pop_max_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[V]:
        return await drive(self._s._pop_wait(db, MAX, timeout))

    @twin(PriorityQueue.claim_min_wait)
    async def claim_min_wait(self, db: Any, lease_seconds: float,
                             timeout: Optional[float] = None) -> Optional[Lease[V]]:
        return await drive(self._s._claim_wait(db, MIN, lease_seconds, timeout))

    @twin(PriorityQueue.claim_max_wait)
    async def claim_max_wait(self, db: Any, lease_seconds: float,
                             timeout: Optional[float] = None) -> Optional[Lease[V]]:
        return await drive(self._s._claim_wait(db, MAX, lease_seconds, timeout))
