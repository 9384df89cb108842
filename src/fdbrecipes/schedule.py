"""Periodic jobs without a leader: every worker enqueues the next slot's job, once.

A :class:`Schedule` names a job that should run once per time slot (``every`` N
seconds, or at the times a ``next_time`` function gives, so a cron library can drive
it without becoming a dependency).  Every worker that carries the schedule pushes the
job of the next slot, with a delay to the slot's start and an idempotency id made
from the schedule's name and the slot: however many workers run, exactly one job per
slot is enqueued, as long as the queue remembers ids for at least a period
(``id_retention``; checked when a worker starts).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import fdb.tuple

from ._values import Value, check_seconds
from .protocol import Operation, Workable, workable

__all__ = ["Schedule"]


class Schedule:
    """A job to enqueue once per time slot.

    Args:
        queue: where the jobs go: a Queue, PriorityQueue or FairQueue (or an async
            one, or any structure whose operations are
            :class:`fdbrecipes.protocol.Workable`).
        name: the schedule's name (part of every job's id: keep it stable).
        every: the period in seconds; slots start at the multiples of it (wall-clock
            seconds since the epoch).  Give this or ``at``.
        at: ``next_time(after: float) -> float``: the start of the first slot after
            ``after`` (seconds since the epoch).
        value: the job's value.
        priority: for a PriorityQueue, the jobs' priority (default 0).
        group: for a FairQueue, the jobs' group (required there).

    Raises:
        TypeError or ValueError: neither or both of ``every`` and ``at``, a bad period,
            name, value, priority or group.
    """

    def __init__(self, queue: Any, name: str, *, every: Optional[float] = None,
                 at: Optional[Callable[[float], float]] = None, value: Value = b"",
                 priority: Optional[int] = None, group: Any = None) -> None:
        if (every is None) == (at is None):
            raise TypeError("Schedule needs exactly one of every= and at=")
        if type(name) is not str or not name:
            raise TypeError("name must be a non-empty str")
        if at is not None and not callable(at):
            raise TypeError("at must be a callable next_time(after) -> float")
        self.ops: Workable[Any] = workable(queue)
        self.queue = queue
        self.name = name
        self.every = None if every is None else check_seconds(every, "every")
        self.at = at
        self.value = value
        self.priority = priority
        self.group = group
        self.where: Dict[str, Any] = {key: given for key, given in
                                      (("priority", priority), ("group", group))
                                      if given is not None}
        self.ops.push_job(None, value, id=self.slot_id(0.0), delay=0.0,
                          **self.where).close()  # checks the job's arguments

    def __repr__(self) -> str:
        when = f"every={self.every}" if self.every is not None else f"at={self.at!r}"
        return f"Schedule({self.name!r}, {when})"

    def next_slot(self, after: float) -> float:
        """The start of the first slot strictly after ``after`` (epoch seconds)."""
        if self.every is not None:
            return (math.floor(after / self.every) + 1) * self.every
        assert self.at is not None
        start = float(self.at(after))
        if not start > after:
            raise ValueError(f"schedule {self.name!r}: next_time({after}) gave {start}, "
                             "not a later time")
        return start

    def period(self, now: float) -> float:
        """The time between two slots (for ``at``: the two after ``now``)."""
        if self.every is not None:
            return self.every
        first = self.next_slot(now)
        return self.next_slot(first) - first

    def slot_id(self, slot: float) -> bytes:
        """The idempotency id of the job of the slot starting at ``slot``."""
        packed: bytes = fdb.tuple.pack(("fdbrecipes-schedule", self.name, repr(slot)))
        return packed

    def pushing(self, db: Any, now: Optional[float] = None
                ) -> Tuple[Operation[Optional[bytes]], float]:
        """The push of the next slot's job (it stores nothing if a worker pushed it
        already), to run, and when that slot starts."""
        now = time.time() if now is None else now
        slot = self.next_slot(now)
        delay = max(0.0, slot - now)
        return self.ops.push_job(db, self.value, id=self.slot_id(slot), delay=delay,
                                 **self.where), slot


def check_retention(schedules: List[Schedule], now: float) -> None:
    """Refuse schedules whose queue forgets ids sooner than a period: a worker late by
    more than that would enqueue a slot's job again."""
    for schedule in schedules:
        period = schedule.period(now)
        retention = schedule.ops.id_retention
        if retention < period:
            raise ValueError(
                f"schedule {schedule.name!r}: its queue remembers ids for {retention} s, "
                f"less than its period of {period} s; make id_retention at least that")
