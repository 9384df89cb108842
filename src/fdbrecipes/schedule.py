"""Periodic jobs without a leader: every worker enqueues the next slot's job, once.

A :class:`Schedule` names a job that should run once per time slot: ``every`` N
seconds, at the times a cron expression matches in a time zone (``cron=``, ``tz=``;
extra ``fdbrecipes[cron]``), or at the times a ``next_time`` function gives (``at=``,
so any library can drive it).  A worker carries it in one of two ways:

* alone (``Worker(..., schedules=[...])``): every worker that carries the schedule
  pushes the job of the next slot, with a delay to the slot's start and an
  idempotency id made from the schedule's name and the slot: however many workers
  run, exactly one job per slot is enqueued, as long as the queue remembers ids for
  at least a period (``id_retention``; checked when a worker starts);
* with a schedule store (``Worker(..., schedules=[...], schedule_store=store)``): a
  schedule given by ``every=`` or ``cron=`` is written into the store when the worker
  starts (:meth:`fdbrecipes.Schedules.upsert`: its pause and its fires are kept) and
  fired from there, like every stored schedule (see :mod:`fdbrecipes.schedules`);
  pauses, run-now requests, missed slots (``misfire``, ``grace``) and the latest fires
  then apply to it too.  An ``at=`` schedule stays as above.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._schedules.cron import Cron, Every, Rule
from ._schedules.ops import DEFAULT_GRACE, Stored, check_rule, check_timing
from ._schedules.records import SKIP, jitter_of, slot_job_id
from ._values import Value
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
            seconds since the epoch).
        cron: a cron expression (5 fields, 6 with seconds first, or a nickname such as
            ``@daily``), evaluated in the time zone ``tz`` (an IANA name, default
            ``"UTC"``); see docs/scheduler.md for what happens at daylight-saving
            changes.  Needs the extra ``fdbrecipes[cron]``.
        at: ``next_time(after: float) -> float``: the start of the first slot after
            ``after`` (seconds since the epoch).  Give exactly one of ``every``,
            ``cron`` and ``at``.
        value: the job's value.
        priority: for a PriorityQueue, the jobs' priority (default 0).
        group: for a FairQueue, the jobs' group (required there).
        misfire, grace: for a stored schedule, what happens to slots missed while no
            worker ran: ``"skip"`` (default) or :func:`fdbrecipes.catch_up` ``(n)``;
            a slot fired at most ``grace`` seconds late (default 60) is on time.
        jitter: the jobs are delayed by up to this many seconds (drawn from the slot,
            the same for every worker; default 0).
        limit_keys: the jobs' keys under ``queue``'s limits, a dict from limit names
            to keys, as ``push`` takes them (see docs/flow-control.md, "Keys given at
            push"); kept with the schedule in a store.

    Raises:
        TypeError or ValueError: not exactly one of ``every``, ``cron`` and ``at``, a
            bad period, expression, time zone, name, value, priority, group, misfire,
            grace, jitter or ``limit_keys`` (as ``push`` refuses it).
        ImportError: ``cron`` without the extra.
    """

    def __init__(self, queue: Any, name: str, *, every: Optional[float] = None,
                 at: Optional[Callable[[float], float]] = None, value: Value = b"",
                 priority: Optional[int] = None, group: Any = None,
                 cron: Optional[str] = None, tz: Optional[str] = None,
                 misfire: Any = SKIP, grace: float = DEFAULT_GRACE,
                 jitter: float = 0.0, limit_keys: Optional[Dict[str, Any]] = None) -> None:
        if sum(given is not None for given in (every, at, cron)) != 1:
            raise TypeError("Schedule needs exactly one of every=, cron= and at=")
        if type(name) is not str or not name:
            raise TypeError("name must be a non-empty str")
        if at is not None and not callable(at):
            raise TypeError("at must be a callable next_time(after) -> float")
        if at is not None and tz is not None:
            raise ValueError("tz applies to cron= only")
        self.rule: Optional[Rule] = None if at is not None else check_rule(cron, tz, every)
        self.ops: Workable[Any] = workable(queue)
        self.queue = queue
        self.name = name
        self.every = self.rule.seconds if isinstance(self.rule, Every) else None
        self.cron = cron
        self.tz = self.rule.tz if isinstance(self.rule, Cron) else None
        self.at = at
        self.value = value
        self.priority = priority
        self.group = group
        self.misfire = misfire
        _, self.grace, self.jitter = check_timing(misfire, grace, jitter)
        self.where: Dict[str, Any] = {key: given for key, given in
                                      (("priority", priority), ("group", group))
                                      if given is not None}
        self.ops.push_job(None, value, id=self.slot_id(0.0), delay=self.jitter or None,
                          limit_keys=limit_keys, **self.where).close()  # checks the job
        self.limit_keys = None if limit_keys is None else dict(limit_keys)

    def __repr__(self) -> str:
        when = (f"every={self.every}" if self.every is not None
                else f"cron={self.cron!r}, tz={self.tz!r}" if self.cron is not None
                else f"at={self.at!r}")
        return f"Schedule({self.name!r}, {when})"

    @property
    def storable(self) -> bool:
        """Whether it can be kept in a schedule store (``every`` or ``cron``, not a
        function)."""
        return self.rule is not None

    def stored(self) -> Stored:
        """The schedule as a store keeps it (see :meth:`fdbrecipes.Schedules.upsert`).

        Raises:
            TypeError: an ``at=`` schedule (a function cannot be stored).
        """
        if self.rule is None:
            raise TypeError(f"schedule {self.name!r} is given by at=, a function: it "
                            "cannot be stored")
        return Stored(self.name, cron=self.cron, tz=self.tz, every=self.every,
                      target=self.queue, value=self.value, priority=self.priority,
                      group=self.group, misfire=self.misfire, grace=self.grace,
                      jitter=self.jitter, paused=False, limit_keys=self.limit_keys)

    def next_slot(self, after: float) -> float:
        """The start of the first slot strictly after ``after`` (epoch seconds)."""
        if self.rule is not None:
            return self.rule.next_slot(after)
        assert self.at is not None
        start = float(self.at(after))
        if not start > after:
            raise ValueError(f"schedule {self.name!r}: next_time({after}) gave {start}, "
                             "not a later time")
        return start

    def period(self, now: float) -> float:
        """The time between two slots (for ``at`` and ``cron``: the two after
        ``now``)."""
        if self.every is not None:
            return self.every
        first = self.next_slot(now)
        return self.next_slot(first) - first

    def slot_id(self, slot: float) -> bytes:
        """The idempotency id of the job of the slot starting at ``slot``."""
        return slot_job_id(self.name, slot)

    def pushing(self, db: Any, now: Optional[float] = None
                ) -> Tuple[Operation[Optional[bytes]], float]:
        """The push of the next slot's job (it stores nothing if a worker pushed it
        already), to run, and when that slot starts."""
        now = time.time() if now is None else now
        slot = self.next_slot(now)
        id_ = self.slot_id(slot)
        delay = max(0.0, slot - now) + jitter_of(id_, self.jitter)
        return self.ops.push_job(db, self.value, id=id_, delay=delay,
                                 limit_keys=self.limit_keys, **self.where), slot


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
