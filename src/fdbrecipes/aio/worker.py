"""AsyncWorker: :class:`fdbrecipes.Worker` for ``async def`` handlers.

The same options and the same behaviour as the sync worker (see
``fdbrecipes.worker``), on an event loop: each job is a task (at most
``concurrency`` at once), the heartbeat is a task, a waiting worker awaits the
structure's watch, and acks of finished jobs share transactions by themselves (see
``fdbrecipes.aio``).  ``await worker.run()`` works until :meth:`AsyncWorker.stop`
(or SIGTERM/SIGINT, when the loop runs in the main thread); ``async with`` runs it
as a task and stops it on leaving the block.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Set

from .._fdb import check_database
from ..jobs import (
    LEASE_LOST,
    SNOOZE,
    Backoff,
    EventSink,
    Job,
    JobFinished,
    JobStarted,
    WorkerStopping,
    decide,
)
from ..schedule import Schedule, sync_twin
from ..worker import (
    FETCH_BACKOFF,
    IDLE_WAIT,
    Running,
    emit,
    first_push,
    idle_seconds,
    nothing,
    worker_args,
)
from ._driver import drive
from ._ordered import AsyncOrderedAPI

__all__ = ["AsyncWorker"]

log = logging.getLogger("fdbrecipes.worker")


class AsyncWorker:
    """Runs ``await handler(job)`` on the items of ``queue``; the arguments are those
    of :class:`fdbrecipes.Worker` (``queue`` sync or async)."""

    def __init__(self, db: Any, queue: Any, handler: Callable[[Job], Awaitable[Any]], *,
                 concurrency: int = 8, lease_seconds: float = 30.0,
                 backoff: Optional[Backoff] = None, shutdown_timeout: float = 25.0,
                 on_event: Optional[EventSink] = None, end: str = "min",
                 schedules: Sequence[Schedule] = ()) -> None:
        self._end = worker_args(queue, handler, concurrency, lease_seconds, backoff,
                                shutdown_timeout, on_event, end, schedules, True)
        self.db = check_database(db)
        self.queue = queue if isinstance(queue, AsyncOrderedAPI) else \
            AsyncOrderedAPI(sync_twin(queue))
        self.handler = handler
        self.concurrency = concurrency
        self.lease_seconds = float(lease_seconds)
        self.backoff = backoff or Backoff()
        self.shutdown_timeout = float(shutdown_timeout)
        self.on_event = on_event
        self.schedules = list(schedules)
        self._running: Dict[bytes, Running] = {}
        self._tasks: Set[asyncio.Task[None]] = set()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stopping: Optional[asyncio.Event] = None
        self._hurry: Optional[asyncio.Event] = None
        self._changed: Optional[asyncio.Event] = None
        self._runner: Optional[asyncio.Task[None]] = None
        self._next_push = first_push(self.schedules)

    # -- running -----------------------------------------------------------------------

    async def run(self, *, burst: bool = False) -> None:
        """Work until stopped; then drain and return (``burst``: as for
        :meth:`fdbrecipes.Worker.run`)."""
        if not isinstance(burst, bool):
            raise TypeError(f"burst must be a bool, got {type(burst).__name__}")
        self._loop = asyncio.get_running_loop()
        self._stopping, self._hurry = asyncio.Event(), asyncio.Event()
        self._changed = asyncio.Event()
        restore = self._install_signals()
        beat = asyncio.ensure_future(self._beat())
        try:
            await self._fetch(burst)
            await self._drain()
        finally:
            self._stopping.set()
            beat.cancel()
            await asyncio.wait({beat})
            restore()

    def stop(self) -> None:
        """Stop (from any thread): the first call drains gracefully, a second one
        skips the wait for running handlers."""
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == getattr(loop, "_thread_id", None):
            self._request_stop()
        else:
            loop.call_soon_threadsafe(self._request_stop)

    def _request_stop(self) -> None:
        assert self._stopping is not None and self._hurry is not None
        if self._stopping.is_set():
            self._hurry.set()
        self._stopping.set()
        self._notify()

    async def __aenter__(self) -> AsyncWorker:
        self._runner = asyncio.ensure_future(self.run())
        while self._stopping is None:  # until run() has set itself up
            await asyncio.sleep(0)
        return self

    async def __aexit__(self, *_exc: Any) -> None:
        self.stop()
        assert self._runner is not None
        await self._runner

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return nothing
        loop = asyncio.get_running_loop()
        sigs = (signal.SIGTERM, signal.SIGINT)
        try:
            for sig in sigs:
                loop.add_signal_handler(sig, self._request_stop)
        except (NotImplementedError, RuntimeError):  # not a Unix loop
            return nothing

        def restore() -> None:
            for sig in sigs:
                loop.remove_signal_handler(sig)
        return restore

    def _notify(self) -> None:
        assert self._changed is not None
        self._changed.set()

    async def _changed_or(self, seconds: float) -> None:
        """Wait until something changes (a job ends, a stop) or ``seconds`` pass."""
        assert self._changed is not None
        self._changed.clear()
        changed = asyncio.ensure_future(self._changed.wait())
        await asyncio.wait({changed}, timeout=seconds)
        changed.cancel()

    # -- fetching ------------------------------------------------------------------------

    async def _fetch(self, burst: bool) -> None:
        assert self._stopping is not None
        while not self._stopping.is_set():
            try:
                await self._push_schedules()
                free = self.concurrency - self._busy()
                if free <= 0:
                    await self._changed_or(IDLE_WAIT)
                    continue
                leases = await drive(self.queue._s._claim_many(
                    self.db, self._end, free, self.lease_seconds, self.concurrency))
                if self._stopping.is_set():
                    await self._give_back([Running(Job.of(lease)) for lease in leases],
                                          report=False)
                    return
                for lease in leases:
                    self._start(Running(Job.of(lease)))
                if not leases:
                    if burst and not self._busy():
                        return
                    await self._idle()
            except Exception:
                log.exception("fetching failed; trying again in %s s", FETCH_BACKOFF)
                await self._changed_or(FETCH_BACKOFF)

    async def _idle(self) -> None:
        """Wait on the structure's watch until an item is visible, a schedule is due,
        or the worker stops."""
        assert self._stopping is not None
        waiting = asyncio.ensure_future(self.queue.wait(self.db,
                                                        timeout=idle_seconds(self._next_push)))
        stopping = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        for task in (waiting, stopping):
            task.cancel()
        await asyncio.wait({waiting, stopping})

    async def _push_schedules(self) -> None:
        now = time.time()
        if not self.schedules or now < self._next_push:
            return
        starts = []
        for schedule in self.schedules:
            push, slot = schedule.pushing(self.db, now)
            await drive(push)
            starts.append(slot)
        self._next_push = min(starts)

    def _busy(self) -> int:
        """Jobs in their handlers or being settled: one task each."""
        return len(self._tasks)

    def _start(self, running: Running) -> None:
        self._running[running.lease.token] = running
        task = asyncio.ensure_future(self._work(running))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- one job -------------------------------------------------------------------------

    async def _work(self, running: Running) -> None:
        running.started = time.monotonic()
        self._emit(JobStarted(running.job))
        error: Optional[BaseException] = None
        try:
            await self.handler(running.job)
        except asyncio.CancelledError:
            if not running.given_back:
                raise
            return
        except Exception as e:  # the job's outcome
            error = e
        duration = time.monotonic() - running.started
        if running.given_back:
            return
        if running.lost:
            self._finish(running, LEASE_LOST, duration, error)
            return
        decision = decide(running.job, error, self.backoff, self.queue.max_deliveries)
        try:
            if decision.action == "ack":
                await self.queue.ack(self.db, running.lease)
                done = True
            elif decision.action == "bury":
                done = await self.queue.bury(self.db, running.lease, decision.reason)
            else:
                done = await self.queue.release(self.db, running.lease, delay=decision.delay,
                                                count=decision.count)
        except Exception as e:
            log.debug("settling a job failed: %s", e)
            done, error = False, error or e
        self._finish(running, decision.outcome if done else LEASE_LOST, duration, error)

    def _finish(self, running: Running, outcome: str, duration: float,
                error: Optional[BaseException]) -> None:
        """The job ended: forget it, and report it (once: a job given back at
        shutdown is reported then)."""
        if self._running.pop(running.lease.token, None) is None:
            return
        self._notify()
        self._emit(JobFinished(running.job, outcome, duration, error))

    # -- heartbeat ---------------------------------------------------------------------

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            held = [r for r in self._running.values() if not r.lost and not r.given_back]
            if not held:
                continue
            try:
                renewed = await self.queue.extend_many(self.db, [r.lease for r in held],
                                                       self.lease_seconds)
            except Exception:
                log.exception("a heartbeat failed; trying again at the next one")
                continue
            for running, lease in zip(held, renewed):
                if lease is None:
                    running.lost = True
                else:
                    running.lease = lease

    # -- stopping ----------------------------------------------------------------------

    async def _drain(self) -> None:
        assert self._hurry is not None
        self._emit(WorkerStopping(len(self._tasks)))
        deadline = time.monotonic() + self.shutdown_timeout
        while self._tasks and not self._hurry.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await self._changed_or(min(left, 0.1))
        late = [r for r in self._running.values() if not r.given_back and r.started]
        await self._give_back(late)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks))

    async def _give_back(self, jobs: List[Running], report: bool = True) -> None:
        for running in jobs:
            running.given_back = True
            try:
                await self.queue.release(self.db, running.lease, count=False)
            except Exception:
                log.exception("giving back a job failed; its lease will expire")
            if report:
                duration = time.monotonic() - running.started if running.started else 0.0
                self._finish(running, SNOOZE, duration, None)
            else:
                self._running.pop(running.lease.token, None)

    def _emit(self, event: Any) -> None:
        emit(self.on_event, event)
