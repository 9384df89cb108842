# Generated in part by tools/unasync.py from src/fdbrecipes/worker.py: the
# public methods (signature, docstring, code), but the code of those the script
# lists in OWN_CODE.  Edit the sync module (or OWN_CODE's methods here), then run
# `python tools/unasync.py`; `--check` (in .ci/run) fails while a file is stale.
"""AsyncWorker: :class:`fdbrecipes.Worker` for ``async def`` handlers.

The same options and the same behaviour as the sync worker, from the same control
flow (:mod:`fdbrecipes._worker.core`), on the caller's event loop: each job is a task
(at most ``concurrency`` at once), the heartbeat and the acks are tasks, a waiting
worker awaits the structure's watch.  ``await worker.run()`` works until
:meth:`AsyncWorker.stop` (or SIGTERM/SIGINT, when the loop runs in the main thread);
``async with`` runs it as a task and stops it on leaving the block.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, List, Optional, Sequence

from .._schedules.base import SchedulesBase
from .._worker.options import WorkerOptions
from .._worker.serving import cores, run_all
from ..jobs import Backoff, EventSink, Job
from ..schedule import Schedule

__all__ = ["AsyncWorker"]


class AsyncWorker:
    """Runs ``await handler(job)`` on the items of ``queue``; the arguments are those
    of :class:`fdbrecipes.Worker` (``queue`` sync or async), and so is the behaviour:
    an async handler still running when the shutdown wait ends is cancelled."""

    def __init__(self, db: Any, queue: Any,
                 handler: Optional[Callable[[Job], Awaitable[Any]]] = None, *,
                 concurrency: int = 8, lease_seconds: float = 30.0,
                 backoff: Optional[Backoff] = None, shutdown_timeout: float = 25.0,
                 on_event: Optional[EventSink] = None, end: str = "min",
                 schedules: Sequence[Schedule] = (), time_limit: Optional[float] = None,
                 name: Optional[str] = None, prefetch: Optional[int] = None,
                 schedule_store: Optional[SchedulesBase] = None,
                 queues: Optional[List[str]] = None) -> None:
        self._cores = cores(db, queue, handler, WorkerOptions.check(
            concurrency=concurrency, lease_seconds=lease_seconds, backoff=backoff,
            shutdown_timeout=shutdown_timeout, on_event=on_event, end=end,
            schedules=schedules, time_limit=time_limit, name=name, prefetch=prefetch,
            schedule_store=schedule_store), False, queues)
        self._core = self._cores[0]
        self._runner: Optional[asyncio.Task[None]] = None

    def __repr__(self) -> str:
        return f"AsyncWorker({self._core.queue!r}, concurrency={self._core.concurrency})"

    @property
    def id(self) -> str:
        """The worker's id (``host-pid-xxxx``), as :meth:`fdbrecipes.Queue.workers`
        lists it and ``command`` takes it.
        """
        return self._core.id

    async def run(self, *, burst: bool = False) -> None:
        """The async twin of :meth:`fdbrecipes.Worker.run`, awaited without blocking the event
        loop.

        Work until stopped (:meth:`stop`, SIGTERM, SIGINT); then drain and return.

        ``burst=True``: also stop once a fetch finds nothing to claim while the worker
        holds no job (none running, none being settled): items delayed into the
        future, retries included, stay queued, and so do items of a FairQueue's groups
        at their limits because of other consumers' leases.  A drain for scripts,
        cron jobs and examples.
        """
        await run_all(self._cores, burst)

    def stop(self) -> None:
        """The twin of :meth:`fdbrecipes.Worker.stop` (a plain call, not awaited).

        Stop (from any thread): the first call drains gracefully, a second one
        skips the wait for running handlers.
        """
        for core in self._cores:
            core.stop()

    async def __aenter__(self) -> AsyncWorker:
        self._runner = asyncio.ensure_future(self.run())
        return self

    async def __aexit__(self, *_exc: Any) -> None:
        self.stop()
        assert self._runner is not None
        await self._runner
