# Generated in part by tools/unasync.py from src/fdbrecipes/schedules.py: the
# public methods (signature, docstring, code), but the code of those the script
# lists in OWN_CODE.  Edit the sync module (or OWN_CODE's methods here), then run
# `python tools/unasync.py`; `--check` (in .ci/run) fails while a file is stale.
"""AsyncSchedules: :class:`fdbrecipes.Schedules` for asyncio code.

The same constructor arguments and the same keys as Schedules; every method is an
``async def`` twin of the sync method of the same name, with its docstring, awaiting
the same operation (:class:`fdbrecipes._schedules.ops.ScheduleOps`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .._drivers.awaiting import drive
from .._fdb import Transactor
from .._schedules.base import SchedulesBase
from .._schedules.ops import DEFAULT_GRACE, Stored
from .._schedules.records import SKIP, Misfire, ScheduleInfo
from .._values import Value

__all__ = ["AsyncSchedules"]


class AsyncSchedules(SchedulesBase):
    """A store of schedules for asyncio code (see :class:`fdbrecipes.Schedules`)."""

    async def add(self, tr: Transactor, name: str, *, target: Any, cron: Optional[str] = None,
                  tz: Optional[str] = None, every: Optional[float] = None, value: Value = b"",
                  priority: Optional[int] = None, group: Any = None, misfire: Misfire = SKIP,
                  grace: float = DEFAULT_GRACE, jitter: float = 0.0, paused: bool = False,
                  limit_keys: Optional[Dict[str, Any]] = None) -> None:
        """The async twin of :meth:`fdbrecipes.Schedules.add`, awaited without blocking the
        event loop.

        Add the schedule ``name``: jobs of ``value`` pushed into ``target`` at each
        slot of ``cron`` in ``tz``, or of ``every``.

        Args:
            name: the schedule's name (1 to 200 characters; part of its jobs' ids).
            target: where its jobs go: a Queue, PriorityQueue or FairQueue (sync or
                async); it is kept as the key of its subspace.
            cron: a cron expression: 5 fields (minute hour day month weekday), 6 with
                a seconds field first, or a nickname (``@yearly``, ``@annually``,
                ``@monthly``, ``@weekly``, ``@daily``, ``@midnight``, ``@hourly``).
                Needs the extra ``fdbrecipes[cron]``.
            tz: the IANA time zone ``cron`` is read in (default ``"UTC"``); at a
                daylight-saving change a skipped time fires once at the shift and a
                repeated time once, at its first occurrence.
            every: instead of ``cron``: a period in seconds; slots at its multiples
                since the epoch.
            value, priority, group: the jobs' value, and a PriorityQueue's priority
                (default 0) or a FairQueue's group (required there).
            misfire: what a worker does with slots missed while none fired the
                schedule (a slot more than ``grace`` seconds late is missed):
                ``"skip"`` them, or :func:`fdbrecipes.catch_up` ``(n)``: fire the latest ``n``.
            grace: seconds a slot may be late and still fire as on time (every such
                slot fires).
            jitter: delay each slot's job by up to this many seconds (drawn from its
                slot; a run-now job is not delayed).
            paused: add it paused.
            limit_keys: the jobs' keys under ``target``'s limits, a dict from limit
                names to keys, as its ``push`` takes them (docs/flow-control.md, "Keys
                given at push"); kept in the schedule's definition, so a worker that
                fires it must serve ``target`` with those limits (a structure without
                them refuses the push: the fire fails, and is tried again).

        Its slots count from now.  Reads the schedule's two keys (conflicts with a
        concurrent add of the same name) and writes them and the change counter (an
        atomic add).  Cost: 1 round trip, and the commit.

        Raises:
            TypeError or ValueError: a bad argument, an invalid expression, an unknown
                time zone, bad ``limit_keys`` (as ``push`` refuses them; named in
                the message), before anything is read; a name
                taken already, read in the transaction, before anything is written.
            ImportError: ``cron`` without the extra ``fdbrecipes[cron]``.
        """
        await drive(self._ops.add(tr, Stored(name, cron=cron, tz=tz, every=every, target=target,
                                             value=value, priority=priority, group=group,
                                             misfire=misfire, grace=grace, jitter=jitter,
                                             paused=paused, limit_keys=limit_keys)))

    async def upsert(self, tr: Transactor, schedule: Any) -> bool:
        """The async twin of :meth:`fdbrecipes.Schedules.upsert`, awaited without blocking the
        event loop.

        Keep the code-defined ``schedule`` (a :class:`fdbrecipes.Schedule` given by
        ``every`` or ``cron``) in the store: add it, or change the stored schedule of
        its name to say the same (its slots then count from now; whether it is paused,
        its last slot and its fires are kept).  Whether it wrote anything (False: the
        store says the same already).  What a worker does at its start with its
        ``schedules`` when given a ``schedule_store``.

        Reads and writes what :meth:`add` does (nothing is written when the store says
        the same).  Cost: 1 round trip, and the commit.

        Raises:
            TypeError: not a Schedule, or one given by ``at=`` (a function).
        """
        from ..schedule import Schedule

        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedule must be a Schedule, not {type(schedule).__name__}")
        return await drive(self._ops.upsert(tr, schedule.stored()))

    async def pause(self, tr: Transactor, name: str) -> bool:
        """The async twin of :meth:`fdbrecipes.Schedules.pause`, awaited without blocking the
        event loop.

        Pause schedule ``name``: from this transaction's commit on, no slot of it
        fires (a fire in flight conflicts with it); run-now requests still do.
        Whether it was running.

        Reads its state with a conflict, writes it and the change counter.  Cost: 1
        round trip, and the commit.

        Raises:
            UnknownScheduleError: no schedule has that name.
        """
        return await drive(self._ops.pause(tr, name, True))

    async def resume(self, tr: Transactor, name: str) -> bool:
        """The async twin of :meth:`fdbrecipes.Schedules.resume`, awaited without blocking the
        event loop.

        Resume schedule ``name``: its next slot after now fires (the slots it
        missed while paused never do).  Whether it was paused.

        Reads its state with a conflict, writes it and the change counter.  Cost: 1
        round trip, and the commit.

        Raises:
            UnknownScheduleError: no schedule has that name.
        """
        return await drive(self._ops.pause(tr, name, False))

    async def run_now(self, tr: Transactor, name: str) -> bytes:
        """The async twin of :meth:`fdbrecipes.Schedules.run_now`, awaited without blocking the
        event loop.

        Ask for one job of schedule ``name`` now, paused or not: the first worker
        carrying the store to see the request (at once: it watches the store) pushes
        it.  The id the job will have (``Queue.job`` finds it, with ``history``).

        Reads its state with a conflict, writes it and the change counter.  Cost: 1
        round trip, and the commit.

        Raises:
            UnknownScheduleError: no schedule has that name.
            ValueError: 100 requests of it are waiting already (no worker fires it).
        """
        return await drive(self._ops.run_now(tr, name))

    async def remove(self, tr: Transactor, name: str) -> bool:
        """The async twin of :meth:`fdbrecipes.Schedules.remove`, awaited without blocking the
        event loop.

        Forget schedule ``name`` (its jobs pushed already stay); whether it existed.

        Reads its state with a conflict (a fire in flight conflicts), clears its two
        keys, adds to the change counter.  Cost: 1 round trip, and the commit.
        """
        return await drive(self._ops.remove(tr, name))

    async def list(self, tr: Transactor, limit: Optional[int] = None,
                   after: Optional[str] = None) -> List[ScheduleInfo]:
        """The async twin of :meth:`fdbrecipes.Schedules.list`, awaited without blocking the
        event loop.

        The schedules, by name, after the name ``after`` (None: from the first), up
        to ``limit`` (None: all), as :class:`fdbrecipes.ScheduleInfo` (next slot and lag as of
        now).

        Snapshot reads (no conflicts) of two key ranges side by side.  Given a
        Transaction, one read of ``limit``; given a Database, pages of 1,000, each in a
        transaction of its own.  Cost: 1 round trip per page.
        """
        return await drive(self._ops.list(tr, limit, after))

    async def get(self, tr: Transactor, name: str) -> Optional[ScheduleInfo]:
        """The async twin of :meth:`fdbrecipes.Schedules.get`, awaited without blocking the
        event loop.

        Schedule ``name`` as :class:`fdbrecipes.ScheduleInfo`, or None.  Two snapshot reads,
        1 round trip.
        """
        return await drive(self._ops.get(tr, name))
