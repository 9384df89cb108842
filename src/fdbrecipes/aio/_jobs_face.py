# Generated in part by tools/unasync.py from src/fdbrecipes/_jobs_face.py: the
# public methods (signature, docstring, code), but the code of those the script
# lists in OWN_CODE.  Edit the sync module (or OWN_CODE's methods here), then run
# `python tools/unasync.py`; `--check` (in .ci/run) fails while a file is stale.
"""The async twin of :mod:`fdbrecipes._jobs_face`: pruning job records, the live
workers and commands to one of them, for AsyncQueue, AsyncPriorityQueue and
AsyncFairQueue."""

from __future__ import annotations

from typing import List, Optional

from .._drivers.awaiting import drive
from .._face import JobFace, JobOpsT
from .._fdb import Transactor
from .._records.finished import FinishedJob
from .._records.registry import WorkerInfo
from .._records.series import Minute

__all__ = ["AsyncJobMethods"]


class AsyncJobMethods(JobFace[JobOpsT]):
    """Async methods about a job structure's records and workers."""

    async def prune(self, tr: Transactor, limit: Optional[int] = None) -> int:
        """The async twin of :meth:`fdbrecipes.Queue.prune`, awaited without blocking the event
        loop.

        Forget the finished job records whose ``history`` has passed (up to
        ``limit``; all when None); how many entries of the index of finished records
        it took away (a record revived by ``requeue_dead`` and finished again keeps
        its later entry).  Workers prune as they go: this is for a structure no worker
        serves.

        Reads, by snapshot, the index of finished records up to now, and each named
        record's state and end (read conflicts: a revival meanwhile conflicts); clears
        the entries and the records.  Nothing pending, delayed or running is touched.
        Given a Database, in transactions of 1,000 entries; given a Transaction, at
        most 1,000 (a larger ``limit``, or None with more due, is refused).  Cost:
        O(k) keys, O(k / 1,000) transactions for k records due.
        """
        return await drive(self._ops.prune(tr, limit))

    async def finished(self, tr: Transactor, limit: Optional[int] = None, *,
                       after: Optional[bytes] = None) -> List[FinishedJob]:
        """The async twin of :meth:`fdbrecipes.Queue.finished`, awaited without blocking the
        event loop.

        The finished jobs whose records are kept (a structure made with
        ``history``), the latest to be pruned first (the latest finished, when every
        record is kept as long), up to ``limit``: each :class:`fdbrecipes.FinishedJob`
        has the id, group (a FairQueue's; every group's are listed), state
        (succeeded, dead, cancelled), attempts, when it finished and is pruned, its
        last error and a token which, given as ``after``, starts the next page just
        after it (paging by key).  ``job`` gives a whole record, its result too.

        Snapshot reads (no conflicts): the index of finished records backwards from
        ``after``, 1,000 entries a round trip, and three keys of each record named
        (in parallel; never its result).  An entry whose job was revived since
        (``requeue_dead``) is skipped.  Cost: 2 round trips per 1,000 jobs, O(limit)
        keys.

        Raises:
            TypeError or ValueError: ``after`` is not a finished job's token of a
                structure of this kind.
        """
        return await drive(self._ops.finished(tr, limit, after))

    async def workers(self, tr: Transactor) -> List[WorkerInfo]:
        """The async twin of :meth:`fdbrecipes.Queue.workers`, awaited without blocking the
        event loop.

        The live workers serving this structure (each :class:`fdbrecipes.WorkerInfo`:
        id, host, pid, what it serves, when it started and last beat, its state, its
        counts and the jobs it runs, as of its last heartbeat).  A worker that missed
        three heartbeats counts as gone and is left out.

        Snapshot reads of the workers' records (no conflicts).  Cost: 1 round trip,
        O(workers).
        """
        return await drive(self._ops.workers(tr))

    async def command(self, tr: Transactor, worker: str, command: str) -> bool:
        """The async twin of :meth:`fdbrecipes.Queue.command`, awaited without blocking the
        event loop.

        Ask the live worker ``worker`` (its id, see :meth:`workers`) to ``"quiet"``
        (claim no more jobs; those it runs finish) or ``"stop"`` (finish the jobs it
        runs, then exit, as on SIGTERM); False (nothing written) when no live worker
        has that id.  The worker watches a key of its own: it learns within a round
        trip.

        Reads the worker's record (read conflict), writes the command and touches the
        worker's key (atomic).  Cost: 1 round trip.

        Raises:
            TypeError or ValueError: ``worker`` is not a str, ``command`` neither
                "quiet" nor "stop".
        """
        return await drive(self._ops.command(tr, worker, command))

    async def pause(self, tr: Transactor) -> bool:
        """The async twin of :meth:`fdbrecipes.Queue.pause`, awaited without blocking the event
        loop.

        Pause the structure: from the commit on, no pop, claim or worker takes
        anything from it (``pop`` and ``claim`` return None, ``claim_many`` nothing,
        ``wait`` and ``pop_wait`` wait), until :meth:`resume`.  Pushes, acks, releases,
        listings and the operator's actions go on; leases already taken stay theirs
        (a high-contention popper may still collect the few items it set aside
        before).  True if it was running, False if already paused (nothing written).

        Reads the pause flag (read conflict), writes it (one key).  Every take reads
        the flag beside its own reads (a read conflict on it, no extra round trip), so
        a take that read it before the pause committed conflicts and retries: none
        commits after the pause.  Cost: 1 round trip.
        """
        return await drive(self._ops.pause(tr, True))

    async def resume(self, tr: Transactor) -> bool:
        """The async twin of :meth:`fdbrecipes.Queue.resume`, awaited without blocking the
        event loop.

        Resume a paused structure: takes go on, and waiters wake (it touches the
        wake key).  True if it was paused, False if not (nothing written).  Reads and
        writes the flag as :meth:`pause`.  Cost: 1 round trip.
        """
        return await drive(self._ops.pause(tr, False))

    async def paused(self, tr: Transactor) -> Optional[float]:
        """The async twin of :meth:`fdbrecipes.Queue.paused`, awaited without blocking the
        event loop.

        When the structure was paused (wall-clock seconds, ``time.time()`` of the
        client that paused it), or None if it is not paused.  Reads the flag (one key,
        a read conflict).  Cost: 1 round trip.
        """
        return await drive(self._ops.paused(tr))

    async def throughput(self, tr: Transactor, minutes: int = 60) -> List[Minute]:
        """The async twin of :meth:`fdbrecipes.Queue.throughput`, awaited without blocking the
        event loop.

        The structure's last ``minutes`` minutes (at most 1,440), oldest first, the
        current one last: for each (a :class:`fdbrecipes.Minute`) the jobs its workers
        finished and failed in it, the largest backlog (items visible) they saw, and
        how many wrote.  Workers write it at each heartbeat, one key per worker and
        minute (no hot key), kept 7 days (``structure.ops.series.retention``), so it
        survives restarts and every reader sees the same; minutes without a worker
        read as zeros.  A FairQueue's backlog is not sampled (None).

        One snapshot range read of ``minutes`` x workers keys (no conflicts).  Cost:
        1 round trip per 1,000 keys.

        Raises:
            TypeError or ValueError: ``minutes`` is not an int from 1 to 1,440.
        """
        return await drive(self._ops.throughput(tr, minutes))
