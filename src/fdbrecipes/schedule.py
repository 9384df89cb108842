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
from typing import Any, Callable, List, Optional, Tuple

import fdb.tuple

from ._fdb import Gen
from ._ordered_api import OrderedAPI
from ._values import Value, check_seconds, encode_value
from .priority_queue import PriorityQueue

__all__ = ["Schedule"]


class Schedule:
    """A job to enqueue once per time slot.

    Args:
        queue: where the jobs go (a Queue or PriorityQueue; for a PriorityQueue,
            ``priority`` is the jobs' priority).
        name: the schedule's name (part of every job's id: keep it stable).
        every: the period in seconds; slots start at the multiples of it (wall-clock
            seconds since the epoch).  Give this or ``at``.
        at: ``next_time(after: float) -> float``: the start of the first slot after
            ``after`` (seconds since the epoch).
        value: the job's value.
        priority: for a PriorityQueue, the jobs' priority (default 0).

    Raises:
        TypeError or ValueError: neither or both of ``every`` and ``at``, a bad period,
            name or value.
    """

    def __init__(self, queue: Any, name: str, *, every: Optional[float] = None,
                 at: Optional[Callable[[float], float]] = None, value: Value = b"",
                 priority: int = 0) -> None:
        if (every is None) == (at is None):
            raise TypeError("Schedule needs exactly one of every= and at=")
        if type(name) is not str or not name:
            raise TypeError("name must be a non-empty str")
        if at is not None and not callable(at):
            raise TypeError("at must be a callable next_time(after) -> float")
        if not isinstance(sync_twin(queue), OrderedAPI):
            raise TypeError("a Schedule's queue is a Queue or PriorityQueue (or an async one)")
        self.queue = queue
        self.name = name
        self.every = None if every is None else check_seconds(every, "every")
        self.at = at
        encode_value(value)
        self.value = value
        self.priority = priority

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

    def pushing(self, db: Any, now: Optional[float] = None) -> Tuple[Gen[None], float]:
        """The push of the next slot's job (it stores nothing if a worker pushed it
        already), to run, and when that slot starts."""
        now = time.time() if now is None else now
        slot = self.next_slot(now)
        delay = max(0.0, slot - now)
        queue = sync_twin(self.queue)
        if isinstance(queue, PriorityQueue):
            request = queue._one(self.value, self.priority, self.slot_id(slot), delay)
        else:
            request = queue._one(self.value, self.slot_id(slot), delay)
        return queue._push(db, request), slot


def sync_twin(queue: Any) -> Any:
    """The sync structure behind ``queue`` (itself, or an async twin's).

    Raises:
        TypeError: ``queue`` is not a Queue or PriorityQueue, nor an async one.
    """
    from .fair_queue import FairQueue

    queue = getattr(queue, "_s", queue)
    if not isinstance(queue, (OrderedAPI, FairQueue)):
        raise TypeError(f"queue must be a Queue, PriorityQueue or FairQueue (or an async "
                        f"one), not {type(queue).__name__}")
    return queue


def check_retention(schedules: List[Schedule], now: float) -> None:
    """Refuse schedules whose queue forgets ids sooner than a period: a worker late by
    more than that would enqueue a slot's job again."""
    for schedule in schedules:
        period = schedule.period(now)
        retention = sync_twin(schedule.queue).id_retention
        if retention < period:
            raise ValueError(
                f"schedule {schedule.name!r}: its queue remembers ids for {retention} s, "
                f"less than its period of {period} s; make id_retention at least that")
