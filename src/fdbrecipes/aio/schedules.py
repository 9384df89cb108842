"""AsyncSchedules: :class:`fdbrecipes.Schedules` for asyncio code.

The same constructor arguments and the same keys as Schedules; every method is an
``async def`` twin of the sync method of the same name, with its docstring, awaiting
the same operation (:class:`fdbrecipes._schedules.ops.ScheduleOps`).
"""

from __future__ import annotations

from typing import Any, List, Optional

from .._drivers.awaiting import drive
from .._face import twin
from .._fdb import Transactor
from .._schedules.ops import DEFAULT_GRACE, Stored
from .._schedules.records import SKIP, Misfire, ScheduleInfo
from .._values import Value
from ..schedules import Schedules, SchedulesBase

__all__ = ["AsyncSchedules"]


@twin(Schedules)
class AsyncSchedules(SchedulesBase):
    """A store of schedules for asyncio code (see :class:`fdbrecipes.Schedules`)."""

    async def add(self, tr: Transactor, name: str, *, target: Any, cron: Optional[str] = None,
                  tz: Optional[str] = None, every: Optional[float] = None, value: Value = b"",
                  priority: Optional[int] = None, group: Any = None, misfire: Misfire = SKIP,
                  grace: float = DEFAULT_GRACE, jitter: float = 0.0,
                  paused: bool = False) -> None:
        await drive(self._ops.add(tr, Stored(name, cron=cron, tz=tz, every=every,
                                             target=target, value=value, priority=priority,
                                             group=group, misfire=misfire, grace=grace,
                                             jitter=jitter, paused=paused)))

    async def upsert(self, tr: Transactor, schedule: Any) -> bool:
        from ..schedule import Schedule

        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedule must be a Schedule, not {type(schedule).__name__}")
        return await drive(self._ops.upsert(tr, schedule.stored()))

    async def pause(self, tr: Transactor, name: str) -> bool:
        return await drive(self._ops.pause(tr, name, True))

    async def resume(self, tr: Transactor, name: str) -> bool:
        return await drive(self._ops.pause(tr, name, False))

    async def run_now(self, tr: Transactor, name: str) -> bytes:
        return await drive(self._ops.run_now(tr, name))

    async def remove(self, tr: Transactor, name: str) -> bool:
        return await drive(self._ops.remove(tr, name))

    async def list(self, tr: Transactor, limit: Optional[int] = None,
                   after: Optional[str] = None) -> List[ScheduleInfo]:
        return await drive(self._ops.list(tr, limit, after))

    async def get(self, tr: Transactor, name: str) -> Optional[ScheduleInfo]:
        return await drive(self._ops.get(tr, name))
