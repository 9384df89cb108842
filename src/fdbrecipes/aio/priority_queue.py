"""AsyncPriorityQueue: :class:`fdbrecipes.PriorityQueue` for asyncio code.

The same constructor arguments and the same key layout as PriorityQueue; every
method is an ``async def`` twin of the sync method of the same name, with its
docstring, awaiting the same operation
(:class:`fdbrecipes._ops.kinds.PriorityQueueOps`).
"""

from __future__ import annotations

from typing import Any, AsyncContextManager, Iterable, List, Optional, Tuple

from .._drivers.awaiting import drive
from .._face import twin
from .._fdb import Transactor
from .._ops.checks import reverse_end
from .._ops.kinds import PriorityQueueOps
from .._ordered.front import MAX, MIN
from .._ordered.leases import Lease
from .._ordered.paging import PendingItem
from .._values import V
from ..priority_queue import PriorityQueue
from ._heartbeat import kept_alive
from ._ordered_face import AsyncOrderedFace

__all__ = ["AsyncPriorityQueue"]


@twin(PriorityQueue)
class AsyncPriorityQueue(AsyncOrderedFace[V]):
    """A transactional double-ended priority queue for asyncio code (see
    :class:`fdbrecipes.PriorityQueue`, and :class:`fdbrecipes.aio.AsyncQueue` for what
    ``tr``, shared transactions and cancellation mean here)."""

    _ops: PriorityQueueOps[V]
    _ops_class = PriorityQueueOps

    async def push(self, tr: Transactor, value: V, priority: int, *,
                   id: Optional[bytes] = None, delay: Optional[float] = None,
                   time_limit: Optional[float] = None) -> Optional[bytes]:
        request = self._ops.request(value, priority, id, delay, time_limit)
        return (await self._push(tr, request)).item_id(0)

    async def push_many(self, tr: Transactor, items: Iterable[Tuple[V, int]], *,
                        delay: Optional[float] = None,
                        time_limit: Optional[float] = None) -> List[bytes]:
        return list((await self._push(tr, self._ops.requests(items, delay, time_limit))).ids)

    async def pop_min(self, tr: Transactor, *, spread: int = 1) -> Optional[V]:
        return await self._take(tr, self._ops.pop(tr, MIN, spread), spread)

    async def pop_max(self, tr: Transactor, *, spread: int = 1) -> Optional[V]:
        return await self._take(tr, self._ops.pop(tr, MAX, spread), spread)

    async def pop_min_many(self, tr: Transactor, n: int, *, spread: int = 1) -> List[V]:
        return await self._take(tr, self._ops.pop_many(tr, MIN, n, spread), spread)

    async def pop_max_many(self, tr: Transactor, n: int, *, spread: int = 1) -> List[V]:
        return await self._take(tr, self._ops.pop_many(tr, MAX, n, spread), spread)

    async def peek_min(self, tr: Transactor) -> Optional[V]:
        return await drive(self._ops.peek(tr, MIN))

    async def peek_max(self, tr: Transactor) -> Optional[V]:
        return await drive(self._ops.peek(tr, MAX))

    async def items(self, tr: Transactor, limit: Optional[int] = None,
                    reverse: bool = False) -> List[V]:
        return await drive(self._ops.items(tr, limit, reverse_end(reverse)))

    async def pending(self, tr: Transactor, limit: Optional[int] = None, *,
                      reverse: bool = False,
                      after: Optional[bytes] = None) -> List[PendingItem]:
        return await drive(self._ops.pending(tr, limit, reverse_end(reverse), after))

    async def claim_min(self, tr: Transactor, lease_seconds: float, *,
                        spread: int = 1) -> Optional[Lease[V]]:
        return await self._take(tr, self._ops.claim(tr, MIN, lease_seconds, spread), spread)

    async def claim_max(self, tr: Transactor, lease_seconds: float, *,
                        spread: int = 1) -> Optional[Lease[V]]:
        return await self._take(tr, self._ops.claim(tr, MAX, lease_seconds, spread), spread)

    async def claim_min_many(self, tr: Transactor, n: int, lease_seconds: float, *,
                             spread: int = 1) -> List[Lease[V]]:
        return await self._take(
            tr, self._ops.claim_many(tr, n, lease_seconds, spread=spread, end=MIN), spread)

    async def claim_max_many(self, tr: Transactor, n: int, lease_seconds: float, *,
                             spread: int = 1) -> List[Lease[V]]:
        return await self._take(
            tr, self._ops.claim_many(tr, n, lease_seconds, spread=spread, end=MAX), spread)

    def claimed_min(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                    release_delay: Optional[float] = None
                    ) -> AsyncContextManager[Optional[Lease[V]]]:
        claim, seconds = self._ops.claiming(db, MIN, lease_seconds, timeout, release_delay)
        return kept_alive(self, db, claim, seconds, release_delay)

    def claimed_max(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                    release_delay: Optional[float] = None
                    ) -> AsyncContextManager[Optional[Lease[V]]]:
        claim, seconds = self._ops.claiming(db, MAX, lease_seconds, timeout, release_delay)
        return kept_alive(self, db, claim, seconds, release_delay)

    async def pop_min_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[V]:
        return await drive(self._ops.pop_wait(db, MIN, timeout))

    async def pop_max_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[V]:
        return await drive(self._ops.pop_wait(db, MAX, timeout))

    async def claim_min_wait(self, db: Any, lease_seconds: float,
                             timeout: Optional[float] = None) -> Optional[Lease[V]]:
        return await drive(self._ops.claim_wait(db, MIN, lease_seconds, timeout))

    async def claim_max_wait(self, db: Any, lease_seconds: float,
                             timeout: Optional[float] = None) -> Optional[Lease[V]]:
        return await drive(self._ops.claim_wait(db, MAX, lease_seconds, timeout))
