"""AsyncWeightTree: :class:`fdbrecipes.WeightTree` for asyncio code.

The same constructor arguments and the same key layout as WeightTree; every method
is an ``async def`` twin of the sync method of the same name, with its docstring,
awaiting the same operation (:class:`fdbrecipes._ops.tree.TreeOps`).  Pushes given a
Database share transactions with other tasks' pushes (see ``fdbrecipes.aio``).
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, List, Optional, Tuple

from .._drivers.awaiting import drive
from .._face import twin
from .._fdb import Transactor, is_transaction
from .._ops.tree import pushed
from .._tree.engine import Pushed, TreeRequest
from .._values import Value
from ..weight_tree import TreeBase, WeightTree
from ._combine import Combiner

__all__ = ["AsyncWeightTree"]


@twin(WeightTree)
class AsyncWeightTree(TreeBase):
    """A transactional pool of weighted items for asyncio code (see
    :class:`fdbrecipes.WeightTree`, and :class:`fdbrecipes.aio.AsyncQueue` for what
    ``tr``, shared transactions and cancellation mean here)."""

    @functools.cached_property
    def _pushes(self) -> Combiner[TreeRequest, Pushed]:
        """The pushes of this object given a Database, in shared transactions."""
        return Combiner(self._ops.push_requests)

    async def _push(self, tr: Transactor, request: TreeRequest) -> List[bytes]:
        if is_transaction(tr) or not request.batch:
            return await drive(self._ops.push(tr, request))
        size = sum(len(value) + 500 for value, _ in request.batch)
        return pushed(await self._pushes.call(tr, request, size))

    async def push(self, tr: Transactor, value: Value, weight: int, *,
                   id: Optional[bytes] = None) -> bytes:
        return (await self._push(tr, self._ops.request(value, weight, id)))[0]

    async def push_many(self, tr: Transactor, items: Iterable[Tuple[Value, int]]) -> List[bytes]:
        return await self._push(tr, self._ops.requests(items))

    async def pop(self, tr: Transactor, point: Optional[int] = None) -> Optional[Value]:
        return await drive(self._ops.pop(tr, point))

    async def pop_many(self, tr: Transactor, n: int) -> List[Value]:
        return await drive(self._ops.pop_many(tr, n))

    async def peek(self, tr: Transactor, point: Optional[int] = None) -> Optional[Value]:
        return await drive(self._ops.peek(tr, point))

    async def get(self, tr: Transactor, handle: bytes) -> Optional[Tuple[Value, int]]:
        return await drive(self._ops.get(tr, handle))

    async def remove(self, tr: Transactor, handle: bytes) -> Optional[Value]:
        return await drive(self._ops.remove(tr, handle))

    async def set_weight(self, tr: Transactor, handle: bytes, weight: int) -> Optional[int]:
        return await drive(self._ops.set_weight(tr, handle, weight))

    async def total_weight(self, tr: Transactor) -> int:
        return await drive(self._ops.total_weight(tr))

    async def size(self, tr: Transactor) -> int:
        return await drive(self._ops.size(tr))

    async def is_empty(self, tr: Transactor) -> bool:
        return await drive(self._ops.is_empty(tr))

    async def clear(self, tr: Transactor) -> None:
        await drive(self._ops.clear(tr))

    async def items(self, tr: Transactor,
                    limit: Optional[int] = None) -> List[Tuple[bytes, Value, int]]:
        return await drive(self._ops.items(tr, limit))

    async def pop_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[Value]:
        return await drive(self._ops.pop_wait(db, timeout))
