"""Limits stored in the cluster and shared by name: concurrency and rate, global or
keyed, checked in the claim's own transaction (see docs/flow-control.md).

:class:`Limits` is a store of named limits in one subspace; ``limits.use(name, ...)``
makes what a Queue or PriorityQueue (or their async twins) is given as ``limits=``:
every consumer of every structure using a name shares the limit.  The transactions are
in :mod:`fdbrecipes._limits` (``store.py`` for the store's calls, ``gate.py`` for what a
claim checks and what the end of a lease gives back).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ._bases import LimitsBase
from ._drivers.blocking import drive
from ._fdb import Transactor
from ._limits.admission import PARK_SECONDS
from ._limits.specs import Limit, LimitUse, concurrency, rate
from ._limits.store import LimitState

__all__ = ["PARK_SECONDS", "Limit", "LimitState", "LimitUse", "Limits", "LimitsBase",
           "concurrency", "rate"]


class Limits(LimitsBase):
    """A store of named limits in one subspace, shared by every structure given
    ``limits=`` uses of it and by all their consumers.

    A limit is ``concurrency(n)`` (at most ``n`` jobs running at once: claimed, and
    not yet acked, released, buried or expired) or ``rate(n, per_seconds)`` (at most
    ``n`` starts, weighed by cost, in any window of ``per_seconds``), each global or
    keyed (see :meth:`use`).  A claim checks every limit its candidates carry in its
    own transaction; a job that cannot start is parked (concurrency: until a slot of
    its key frees, which moves it back in the freeing transaction) or delayed (rate:
    until its window has room), so it never blocks other keys.  See
    docs/flow-control.md.

    Every method takes ``tr`` first: an ``fdb.Transaction`` (the call becomes part of
    the caller's transaction) or an ``fdb.Database``/``fdb.Tenant`` (its own retry
    loop, with a commit receipt: see :class:`fdbrecipes.Queue`).

    Args:
        subspace: where the store keeps its keys (an ``fdb.Subspace`` or a
            DirectorySubspace); it never writes outside it.
        clock: where :meth:`state` reads the time (the structures' claims use their
            own clock: give both the same); the cluster's by default.

    Raises:
        TypeError: ``subspace`` is not a Subspace.
    """

    def set(self, tr: Transactor, name: str, limit: Limit) -> Optional[Limit]:
        """Define limit ``name`` as ``limit`` (made by :func:`fdbrecipes.concurrency`
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
        return drive(self._ops.set(tr, name, limit))

    def delete(self, tr: Transactor, name: str) -> Limit:
        """Forget limit ``name``; the definition it had.  Its jobs are no longer
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
        return drive(self._ops.delete(tr, name))

    def get(self, tr: Transactor, name: str) -> Optional[Limit]:
        """Limit ``name``'s definition, or None.  One snapshot read, 1 round trip."""
        return drive(self._ops.get(tr, name))

    def list(self, tr: Transactor) -> Dict[str, Limit]:
        """Every limit's definition, by name.  One snapshot range read, 1 round trip."""
        return drive(self._ops.list(tr))

    def state(self, tr: Transactor, name: str, key: Any = None) -> Optional[LimitState]:
        """What key ``key`` (None: the global key) of limit ``name`` holds now: jobs
        running, cost started in the window, jobs parked; None if no limit is named
        ``name``.  Snapshot reads side by side (no conflicts), 1 round trip; reads the
        key's running jobs, starts and up to 10,000 parked entries.
        """
        return drive(self._ops.state(tr, name, key))

    def version(self, tr: Transactor) -> int:
        """The change counter: every set and delete adds 1.  One snapshot read."""
        return drive(self._ops.version(tr))
