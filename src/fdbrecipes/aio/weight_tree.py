"""AsyncWeightTree: :class:`fdbrecipes.WeightTree` for asyncio code.

The same constructor arguments and the same key layout as WeightTree; every method
is an ``async def`` twin of the sync method of the same name.  Pushes given a
Database share transactions with other tasks' pushes (see ``fdbrecipes.aio``).
"""

from __future__ import annotations

import random
from typing import Any, Iterable, List, Optional, Tuple

from .._fdb import Transactor, is_transaction
from .._run import RetryStats
from .._tree import Pushed, TreeRequest
from .._values import Value
from .._wait import Clock
from ..weight_tree import WeightTree, pushed
from ._combine import Combiner
from ._driver import drive
from ._ordered import twin

__all__ = ["AsyncWeightTree"]


class AsyncWeightTree:
    """A transactional pool of weighted items for asyncio code (see
    :class:`fdbrecipes.WeightTree`, and :class:`fdbrecipes.aio.AsyncQueue` for what
    ``tr``, shared transactions and cancellation mean here)."""

    def __init__(
        self,
        subspace: Any,
        *,
        rng: Optional[random.Random] = None,
        id_retention: float = 3600.0,
        clock: Optional[Clock] = None,
    ) -> None:
        self._s = WeightTree(subspace, rng=rng, id_retention=id_retention, clock=clock)
        self._pushes: Combiner[TreeRequest, Pushed] = Combiner(self._s._loop,
                                                               self._s._tree.push)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._s.subspace!r})"

    @property
    def subspace(self) -> Any:
        """The subspace holding every key of this structure."""
        return self._s.subspace

    @property
    def retry_stats(self) -> RetryStats:
        """Retry counters of the loops this object ran (calls given a Database)."""
        return self._s.retry_stats

    async def _push(self, tr: Transactor, request: TreeRequest) -> List[bytes]:
        if is_transaction(tr) or not request.batch:
            return await drive(self._s._push(tr, request))
        size = sum(len(value) + 500 for value, _ in request.batch)
        return pushed(await self._pushes.call(tr, request, size))

    @twin(WeightTree.push)
    async def push(self, tr: Transactor, value: Value, weight: int, *,
                   id: Optional[bytes] = None) -> bytes:
        return (await self._push(tr, self._s._one(value, weight, id)))[0]

    @twin(WeightTree.push_many)
    async def push_many(self, tr: Transactor, items: Iterable[Tuple[Value, int]]) -> List[bytes]:
        return await self._push(tr, self._s._many(items))

    @twin(WeightTree.pop)
    async def pop(self, tr: Transactor, point: Optional[int] = None) -> Optional[Value]:
        return await drive(self._s._pop(tr, point))

    @twin(WeightTree.pop_many)
    async def pop_many(self, tr: Transactor, n: int) -> List[Value]:
        return await drive(self._s._pop_many(tr, n))

    @twin(WeightTree.peek)
    async def peek(self, tr: Transactor, point: Optional[int] = None) -> Optional[Value]:
        return await drive(self._s._peek(tr, point))

    @twin(WeightTree.get)
    async def get(self, tr: Transactor, handle: bytes) -> Optional[Tuple[Value, int]]:
        return await drive(self._s._get(tr, handle))

    @twin(WeightTree.remove)
    async def remove(self, tr: Transactor, handle: bytes) -> Optional[Value]:
        return await drive(self._s._remove(tr, handle))

    @twin(WeightTree.set_weight)
    async def set_weight(self, tr: Transactor, handle: bytes, weight: int) -> Optional[int]:
        return await drive(self._s._set_weight(tr, handle, weight))

    @twin(WeightTree.total_weight)
    async def total_weight(self, tr: Transactor) -> int:
        return await drive(self._s._total_weight(tr))

    @twin(WeightTree.size)
    async def size(self, tr: Transactor) -> int:
        return await drive(self._s._size(tr))

    @twin(WeightTree.is_empty)
    async def is_empty(self, tr: Transactor) -> bool:
        return await drive(self._s._is_empty(tr))

    @twin(WeightTree.clear)
    async def clear(self, tr: Transactor) -> None:
        await drive(self._s._clear(tr))

    @twin(WeightTree.items)
    async def items(self, tr: Transactor,
                    limit: Optional[int] = None) -> List[Tuple[bytes, Value, int]]:
        return await drive(self._s._items(tr, limit))

    @twin(WeightTree.pop_wait)
    async def pop_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[Value]:
        return await drive(self._s._pop_wait(db, timeout))
