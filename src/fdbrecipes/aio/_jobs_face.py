"""The async twin of :mod:`fdbrecipes._jobs_face`: pruning job records, the live
workers and commands to one of them, for AsyncQueue, AsyncPriorityQueue and
AsyncFairQueue."""

from __future__ import annotations

from typing import List, Optional

from .._drivers.awaiting import drive
from .._face import JobFace, JobOpsT, twin
from .._fdb import Transactor
from .._jobs_face import JobMethods
from .._records.finished import FinishedJob
from .._records.registry import WorkerInfo
from .._records.series import Minute

__all__ = ["AsyncJobMethods"]


@twin(JobMethods, "Queue")  # documented on Queue, as the other shared methods
class AsyncJobMethods(JobFace[JobOpsT]):
    """Async methods about a job structure's records and workers."""

    async def prune(self, tr: Transactor, limit: Optional[int] = None) -> int:
        return await drive(self._ops.prune(tr, limit))

    async def finished(self, tr: Transactor, limit: Optional[int] = None, *,
                       after: Optional[bytes] = None) -> List[FinishedJob]:
        return await drive(self._ops.finished(tr, limit, after))

    async def workers(self, tr: Transactor) -> List[WorkerInfo]:
        return await drive(self._ops.workers(tr))

    async def command(self, tr: Transactor, worker: str, command: str) -> bool:
        return await drive(self._ops.command(tr, worker, command))

    async def pause(self, tr: Transactor) -> bool:
        return await drive(self._ops.pause(tr, True))

    async def resume(self, tr: Transactor) -> bool:
        return await drive(self._ops.pause(tr, False))

    async def paused(self, tr: Transactor) -> Optional[float]:
        return await drive(self._ops.paused(tr))

    async def throughput(self, tr: Transactor, minutes: int = 60) -> List[Minute]:
        return await drive(self._ops.throughput(tr, minutes))
