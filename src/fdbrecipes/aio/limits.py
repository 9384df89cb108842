# Generated in part by tools/unasync.py from src/fdbrecipes/limits.py: the
# public methods (signature, docstring, code), but the code of those the script
# lists in OWN_CODE.  Edit the sync module (or OWN_CODE's methods here), then run
# `python tools/unasync.py`; `--check` (in .ci/run) fails while a file is stale.
"""AsyncLimits: :class:`fdbrecipes.Limits` for asyncio code.

The same constructor arguments and keys as Limits; every method is an ``async def``
twin of the sync method of the same name, with its docstring, awaiting the same
operation (:class:`fdbrecipes._ops.limits.LimitsOps`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from .._bases import LimitsBase
from .._drivers.awaiting import drive
from .._fdb import Transactor
from .._limits.specs import Limit
from .._limits.store import LimitState

__all__ = ["AsyncLimits"]


class AsyncLimits(LimitsBase):
    """A store of named limits for asyncio code (see :class:`fdbrecipes.Limits`)."""

    async def set(self, tr: Transactor, name: str, limit: Limit) -> Optional[Limit]:
        """The async twin of :meth:`fdbrecipes.Limits.set`, awaited without blocking the event
        loop.

        Define limit ``name`` as ``limit`` (made by :func:`fdbrecipes.concurrency`
        or :func:`fdbrecipes.rate`), or change it; the definition it replaced, or None.

        Takes effect at the next claim of every structure using it.  A concurrency
        limit changed also moves back up to 1,000 jobs parked under it (claims check
        them against the new definition; jobs parked beyond those come back within
        ``PARK_SECONDS``).

        Reads the definition with a conflict (a concurrent set or delete of the name
        conflicts), writes it and adds to the change counter; claims read definitions
        by snapshot, so they conflict with it only when they park a job under it (then
        the later to commit retries: a job parked at the same time is never left
        waiting).  Moving parked jobs back, it reads the limit's parked entries with a
        conflict, and their holds.  Cost: 1 round trip, 2 more when parked jobs move
        back, and the commit.

        Raises:
            TypeError or ValueError: a bad name or limit (nothing written).
        """
        return await drive(self._ops.set(tr, name, limit))

    async def delete(self, tr: Transactor, name: str) -> Limit:
        """The async twin of :meth:`fdbrecipes.Limits.delete`, awaited without blocking the
        event loop.

        Forget limit ``name``; the definition it had.  Its jobs are no longer
        limited from the next claim on; up to 1,000 of those parked under it move back
        now (the others within ``PARK_SECONDS``), and the slots of running jobs are
        cleared as their leases end.

        Reads the definition with a conflict, clears it and adds to the change counter;
        reads the limit's parked entries with a conflict, and their holds (a claim
        parking a job under it at the same time conflicts: the later to commit
        retries).  Cost: 1 round trip, 2 more when parked jobs move back, and the
        commit.

        Raises:
            TypeError or ValueError: a bad name, or no limit is named ``name``
                (nothing written).
        """
        return await drive(self._ops.delete(tr, name))

    async def get(self, tr: Transactor, name: str) -> Optional[Limit]:
        """The async twin of :meth:`fdbrecipes.Limits.get`, awaited without blocking the event
        loop.

        Limit ``name``'s definition, or None.  One snapshot read, 1 round trip.
        """
        return await drive(self._ops.get(tr, name))

    async def list(self, tr: Transactor) -> Dict[str, Limit]:
        """The async twin of :meth:`fdbrecipes.Limits.list`, awaited without blocking the event
        loop.

        Every limit's definition, by name.  One snapshot range read, 1 round trip.
        """
        return await drive(self._ops.list(tr))

    async def state(self, tr: Transactor, name: str, key: Any = None) -> Optional[LimitState]:
        """The async twin of :meth:`fdbrecipes.Limits.state`, awaited without blocking the
        event loop.

        What key ``key`` (None: the global key) of limit ``name`` holds now: jobs
        running, cost started in the window, jobs parked; None if no limit is named
        ``name``.  Snapshot reads side by side (no conflicts), 1 round trip; reads the
        key's running jobs, starts and up to 10,000 parked entries.
        """
        return await drive(self._ops.state(tr, name, key))

    async def version(self, tr: Transactor) -> int:
        """The async twin of :meth:`fdbrecipes.Limits.version`, awaited without blocking the
        event loop.

        The change counter: every set and delete adds 1.  One snapshot read.
        """
        return await drive(self._ops.version(tr))
