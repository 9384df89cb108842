"""AsyncLimits: :class:`fdbrecipes.Limits` for asyncio code.

The same constructor arguments and keys as Limits; every method is an ``async def``
twin of the sync method of the same name, with its docstring, awaiting the same
operation (:class:`fdbrecipes._limits.ops.LimitsOps`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from .._drivers.awaiting import drive
from .._face import twin
from .._fdb import Transactor
from ..limits import Limit, Limits, LimitsBase, LimitState

__all__ = ["AsyncLimits"]


@twin(Limits)
class AsyncLimits(LimitsBase):
    """A store of named limits for asyncio code (see :class:`fdbrecipes.Limits`)."""

    async def set(self, tr: Transactor, name: str, limit: Limit) -> Optional[Limit]:
        return await drive(self._ops.set(tr, name, limit))

    async def delete(self, tr: Transactor, name: str) -> Limit:
        return await drive(self._ops.delete(tr, name))

    async def get(self, tr: Transactor, name: str) -> Optional[Limit]:
        return await drive(self._ops.get(tr, name))

    async def list(self, tr: Transactor) -> Dict[str, Limit]:
        return await drive(self._ops.list(tr))

    async def state(self, tr: Transactor, name: str, key: Any = None) -> Optional[LimitState]:
        return await drive(self._ops.state(tr, name, key))

    async def version(self, tr: Transactor) -> int:
        return await drive(self._ops.version(tr))
