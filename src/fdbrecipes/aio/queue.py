"""AsyncQueue: :class:`fdbrecipes.Queue` for asyncio code.

The same constructor arguments and the same key layout as Queue: a sync and an async
client work on one subspace at once.  Every method is an ``async def`` twin of the
sync method of the same name, with its docstring, awaiting the same operation of the
structure's operations object (:class:`fdbrecipes._ops.kinds.QueueOps`).
"""

from __future__ import annotations

from typing import Any, AsyncContextManager, Iterable, List, Optional

from .._drivers.awaiting import drive
from .._face import twin
from .._fdb import Transactor
from .._ops.kinds import QueueOps
from .._ordered.front import MIN
from .._ordered.leases import Lease
from .._ordered.paging import PendingItem
from .._values import V
from ..queue import Queue
from ._heartbeat import kept_alive
from ._ordered_face import AsyncOrderedFace

__all__ = ["AsyncQueue"]


@twin(Queue)
class AsyncQueue(AsyncOrderedFace[V]):
    """A transactional FIFO queue for asyncio code (see :class:`fdbrecipes.Queue`).

    ``tr`` is an ``fdb.Transaction`` (the operation joins the caller's transaction;
    its reads are awaited without blocking the event loop) or an ``fdb.Database``
    (the library's own retry loop, with the same receipts and guarantees as the sync
    API).  Given a Database, pushes and acks of the loop's tasks share transactions
    (see ``fdbrecipes.aio``).  Cancelled while a commit is in flight, a call settles
    it first: a pop or claim that landed gives its item back, a push that landed
    stays pushed; then it raises ``CancelledError``.

    The constructor takes the arguments of :class:`fdbrecipes.Queue` (``subspace``,
    ``high_contention``, ``clock``, ``id_retention``, ``result_timeout``,
    ``max_deliveries``, ``history``), with the same meaning.
    """

    _ops: QueueOps[V]
    _ops_class = QueueOps

    async def push(self, tr: Transactor, value: V, *, id: Optional[bytes] = None,
                   delay: Optional[float] = None,
                   time_limit: Optional[float] = None) -> Optional[bytes]:
        return (await self._push(tr, self._ops.request(value, id, delay, time_limit))).item_id(0)

    async def push_many(self, tr: Transactor, values: Iterable[V], *,
                        delay: Optional[float] = None,
                        time_limit: Optional[float] = None) -> List[bytes]:
        return list((await self._push(tr, self._ops.requests(values, delay, time_limit))).ids)

    async def pop(self, tr: Transactor, *, spread: int = 1) -> Optional[V]:
        return await self._take(tr, self._ops.pop(tr, MIN, spread), spread)

    async def pop_many(self, tr: Transactor, n: int, *, spread: int = 1) -> List[V]:
        return await self._take(tr, self._ops.pop_many(tr, MIN, n, spread), spread)

    async def peek(self, tr: Transactor) -> Optional[V]:
        return await drive(self._ops.peek(tr, MIN))

    async def items(self, tr: Transactor, limit: Optional[int] = None) -> List[V]:
        return await drive(self._ops.items(tr, limit))

    async def pending(self, tr: Transactor, limit: Optional[int] = None, *,
                      after: Optional[bytes] = None) -> List[PendingItem]:
        return await drive(self._ops.pending(tr, limit, MIN, after))

    async def claim(self, tr: Transactor, lease_seconds: float, *,
                    spread: int = 1) -> Optional[Lease[V]]:
        return await self._take(tr, self._ops.claim(tr, MIN, lease_seconds, spread), spread)

    async def claim_many(self, tr: Transactor, n: int, lease_seconds: float, *,
                         spread: int = 1) -> List[Lease[V]]:
        return await self._take(tr, self._ops.claim_many(tr, n, lease_seconds, spread=spread),
                                spread)

    def claimed(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                release_delay: Optional[float] = None
                ) -> AsyncContextManager[Optional[Lease[V]]]:
        claim, seconds = self._ops.claiming(db, MIN, lease_seconds, timeout, release_delay)
        return kept_alive(self, db, claim, seconds, release_delay)

    async def pop_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[V]:
        return await drive(self._ops.pop_wait(db, MIN, timeout))

    async def claim_wait(self, db: Any, lease_seconds: float,
                         timeout: Optional[float] = None) -> Optional[Lease[V]]:
        return await drive(self._ops.claim_wait(db, MIN, lease_seconds, timeout))
