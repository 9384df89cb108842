"""The constructor both schedule stores inherit, :class:`fdbrecipes.Schedules` and
:class:`fdbrecipes.aio.AsyncSchedules` (as :mod:`fdbrecipes._bases` holds the
structures'): neither face's module imports the other.
"""

from __future__ import annotations

from typing import Any, Iterable

from .._face import Face
from .ops import DEFAULT_RECENT, ScheduleOps

__all__ = ["SchedulesBase"]


class SchedulesBase(Face[ScheduleOps]):
    """The constructor of Schedules and its async twin: the arguments of
    :class:`fdbrecipes.Schedules`, handed to its operations object
    (``_schedules.ops.ScheduleOps``)."""

    def __init__(self, subspace: Any, *, targets: Iterable[Any] = (),
                 recent: int = DEFAULT_RECENT) -> None:
        super().__init__(ScheduleOps(subspace, targets, recent))
