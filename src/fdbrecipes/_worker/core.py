"""One worker's control flow, on an event loop (see :mod:`fdbrecipes._worker`).

* Fetching: one ``claim_many`` for all free slots (relaxed order, ``spread`` about the
  concurrency, so workers rarely collide), then, when nothing is visible, a wait on
  the structure's watch: no busy polling.  A slot is busy while its handler runs.
* Running: an ``async def`` handler is awaited in a task; a sync handler runs in one
  of ``concurrency`` daemon threads (:mod:`.threads`), awaited from the loop.
* Heartbeat: one task extends every lease held in one transaction (``extend_many``)
  about every third of ``lease_seconds``; a lease lost anyway is reported
  (``lease_lost``), never acked.
* Settling: finished jobs' acks go out together (``ack_many``) from one task, in a
  transaction for all that finished while the previous one was in flight; retries,
  snoozes and discards are a ``release`` or a ``bury`` each.
* Shutdown (:meth:`WorkerCore.stop`, or SIGTERM/SIGINT when the loop runs in the main
  thread): stop fetching, give back claimed-but-unstarted items at once, wait up to
  ``shutdown_timeout`` for running handlers, then give back the leases still running
  (no delivery counted: another worker starts them now, not after the lease) and
  return.  A second stop skips the wait.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from .._drivers.awaiting import drive
from .._fdb import check_database
from .._ordered.leases import Lease
from .._values import check_bool, check_int, check_seconds
from ..jobs import (
    LEASE_LOST,
    OK,
    SNOOZE,
    Backoff,
    EventSink,
    Job,
    JobFinished,
    JobStarted,
    WorkerStopping,
    decide,
)
from ..protocol import Workable, workable
from ..schedule import Schedule, check_retention
from .threads import HandlerThreads

__all__ = ["FETCH_BACKOFF", "IDLE_WAIT", "WorkerCore", "emit"]

log = logging.getLogger("fdbrecipes.worker")

#: Seconds an idle worker waits on its watch before it looks at its schedules and its
#: stop flag again (a wait, not a poll: a push wakes it at once).
IDLE_WAIT = 1.0
#: Seconds to wait after a failed fetch before trying again.
FETCH_BACKOFF = 1.0


def check_handler(handler: Any, asynchronous: bool) -> None:
    """Refuse a handler that is not callable, or of the other kind.

    Raises:
        TypeError: naming the worker to use instead.
    """
    if not callable(handler):
        raise TypeError("handler must be callable")
    if inspect.iscoroutinefunction(handler) != asynchronous:
        raise TypeError("an async def handler needs aio.AsyncWorker" if not asynchronous
                        else "AsyncWorker needs an async def handler; use Worker")


def idle_seconds(next_push: float) -> float:
    """How long an idle worker waits on the watch: until its schedules push next,
    at most :data:`IDLE_WAIT` (then it looks again)."""
    return max(0.0, min(IDLE_WAIT, next_push - time.time()))


def emit(on_event: Optional[EventSink], event: Any) -> None:
    """Hand ``event`` to a worker's ``on_event``, if any; what it raises is logged and
    ignored (a broken sink must not stop the worker)."""
    if on_event is None:
        return
    try:
        on_event(event)
    except Exception:
        log.exception("on_event raised; ignored")


def outcome_of(handler: Callable[[Job], Any], job: Job) -> Optional[BaseException]:
    """Run a sync handler (in a handler thread); what it raised, or None."""
    try:
        handler(job)
    except BaseException as e:  # the job's outcome, whatever it was
        return e
    return None


class Running:
    """A job the worker holds: its lease (renewed by the heartbeat), whether its
    handler began and returned, whether the lease was lost or given back meanwhile,
    and the task running it."""

    __slots__ = ("future", "given_back", "handled", "job", "lease", "lost", "started", "task")

    def __init__(self, job: Job) -> None:
        self.job = job
        self.lease: Lease[Any] = job.lease
        self.started = 0.0  # time.monotonic() when its handler began; 0: not yet
        self.handled = False
        self.lost = False
        self.given_back = False
        self.task: Optional[asyncio.Task[None]] = None
        self.future: Optional[Any] = None  # a sync handler's thread future

    def seconds(self) -> float:
        """How long its handler has run (0 if it did not start)."""
        return time.monotonic() - self.started if self.started else 0.0


class WorkerCore:
    """Runs ``handler(job)`` on the items of ``queue`` (see the module docstring and
    :class:`fdbrecipes.Worker` for the arguments); ``threaded``: the handler is a
    sync function, run in handler threads."""

    def __init__(self, db: Any, queue: Any, handler: Callable[[Job], Any], *,
                 concurrency: Any, lease_seconds: Any, backoff: Any, shutdown_timeout: Any,
                 on_event: Any, end: Any, schedules: Sequence[Schedule],
                 threaded: bool) -> None:
        self.ops: Workable[Any] = workable(queue)
        check_handler(handler, not threaded)
        check_int(concurrency, "concurrency", low=1, high=10_000)
        self.lease_seconds = check_seconds(lease_seconds, "lease_seconds")
        if backoff is not None and not isinstance(backoff, Backoff):
            raise TypeError(f"backoff must be a Backoff, not {type(backoff).__name__}")
        if not (isinstance(shutdown_timeout, (int, float))
                and not isinstance(shutdown_timeout, bool) and 0 <= shutdown_timeout < 1e9):
            raise ValueError(f"shutdown_timeout must be seconds >= 0, got {shutdown_timeout!r}")
        if on_event is not None and not callable(on_event):
            raise TypeError("on_event must be callable or None")
        self.ops.claim_many(db, 1, self.lease_seconds, spread=1, end=end).close()  # checks end
        for i, schedule in enumerate(schedules):
            if not isinstance(schedule, Schedule):
                raise TypeError(f"schedules[{i}] must be a Schedule")
        check_retention(list(schedules), time.time())
        self.db = check_database(db)
        self.queue = queue
        self.handler = handler
        self.concurrency: int = concurrency
        self.backoff: Backoff = backoff or Backoff()
        self.shutdown_timeout = float(shutdown_timeout)
        self.on_event: Optional[EventSink] = on_event
        self.end: str = end
        self.schedules = list(schedules)
        self.threaded = threaded
        self.running: Dict[bytes, Running] = {}  # by lease token
        self.acks: List[Running] = []
        self.threads: Optional[HandlerThreads] = None
        self.next_push = 0.0 if self.schedules else math.inf  # time.time() of the next push
        self.lock = threading.Lock()  # guards loop and the stops asked before it runs
        self.loop: Optional[asyncio.AbstractEventLoop] = None  # while it runs
        self.thread = 0  # the ident of the loop's thread, while it runs
        self.stops_asked = 0
        # made by run(), on its loop: stop asked, hurry asked, something changed
        self.stopping: asyncio.Event
        self.hurry: asyncio.Event
        self.changed: asyncio.Event

    # -- running and stopping ------------------------------------------------------------

    async def run(self, burst: Any) -> None:
        """Work until stopped; then drain and return (``burst``: also once nothing is
        visible and no handler runs)."""
        check_bool(burst, "burst")
        self.stopping, self.hurry, self.changed = asyncio.Event(), asyncio.Event(), asyncio.Event()
        with self.lock:
            self.loop, self.thread = asyncio.get_running_loop(), threading.get_ident()
            asked, self.stops_asked = self.stops_asked, 0
        for _ in range(asked):
            self.request_stop()
        restore = self.install_signals()
        self.threads = HandlerThreads(self.concurrency) if self.threaded else None
        beat = asyncio.ensure_future(self.beat())
        acker = asyncio.ensure_future(self.settle_acks())
        drained = False
        try:
            await self.fetch(burst)
            await self.drain()
            drained = True
        finally:
            self.stopping.set()
            self.notify()
            if not drained:  # cancelled, or failed: no wait for handlers to return
                acker.cancel()
            await asyncio.wait({acker})
            beat.cancel()
            await asyncio.wait({beat})
            if self.threads is not None:
                self.threads.shutdown()
            restore()
            with self.lock:
                self.loop = None

    def stop(self) -> None:
        """Stop (from any thread, before or while it runs): the first call drains
        gracefully, a second one skips the wait for running handlers."""
        with self.lock:
            loop, thread = self.loop, self.thread
            if loop is None:
                self.stops_asked += 1
                return
        if threading.get_ident() == thread:
            self.request_stop()
        else:
            loop.call_soon_threadsafe(self.request_stop)

    def request_stop(self) -> None:
        """:meth:`stop`, in the loop's thread."""
        if self.stopping.is_set():
            self.hurry.set()
        self.stopping.set()
        self.notify()

    def install_signals(self) -> Callable[[], None]:
        """SIGTERM and SIGINT stop the worker, when its loop runs in the main thread;
        the function that takes the handlers away again."""
        if threading.current_thread() is not threading.main_thread():
            return nothing
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT)
        try:
            for sig in signals:
                loop.add_signal_handler(sig, self.request_stop)
        except (NotImplementedError, RuntimeError):  # not a Unix loop
            return nothing

        def restore() -> None:
            for sig in signals:
                loop.remove_signal_handler(sig)
        return restore

    def notify(self) -> None:
        """Something changed (a job ended, a stop): wake what waits for it."""
        self.changed.set()

    async def changed_or(self, seconds: float) -> None:
        """Wait until something changes or ``seconds`` pass.  (Not ``wait_for``: before
        Python 3.12 it swallows a cancellation that comes as the change does.)"""
        self.changed.clear()
        changed = asyncio.ensure_future(self.changed.wait())
        try:
            await asyncio.wait({changed}, timeout=seconds)
        finally:
            changed.cancel()

    def busy(self) -> int:
        """Jobs whose handler has not returned (each holds a slot)."""
        return sum(1 for r in self.running.values() if not r.handled and not r.given_back)

    # -- fetching ------------------------------------------------------------------------

    async def fetch(self, burst: bool) -> None:
        """Claim work for free slots until stopped (``burst``: or until a claim finds
        nothing while the worker holds nothing, running or being settled); wait on the
        watch when there is none."""
        while not self.stopping.is_set():
            try:
                await self.push_schedules()
                free = self.concurrency - self.busy()
                if free <= 0:
                    await self.changed_or(IDLE_WAIT)
                    continue
                leases = await drive(self.ops.claim_many(
                    self.db, free, self.lease_seconds, spread=self.concurrency, end=self.end))
                if self.stopping.is_set():
                    await self.give_back([Running(Job.of(lease)) for lease in leases],
                                         report=False)
                    return
                for lease in leases:
                    self.start(Running(Job.of(lease)))
                if not leases:
                    if burst and not self.running:  # nothing held: none running or settling
                        return
                    await self.idle()
            except Exception:
                log.exception("fetching failed; trying again in %s s", FETCH_BACKOFF)
                await self.changed_or(FETCH_BACKOFF)

    async def idle(self) -> None:
        """Wait on the structure's watch until an item is visible, a schedule is due,
        or the worker stops."""
        waiting = asyncio.ensure_future(drive(self.ops.wait(self.db,
                                                            idle_seconds(self.next_push))))
        stopping = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiting, stopping):
                task.cancel()
        await asyncio.wait({waiting, stopping})

    async def push_schedules(self) -> None:
        """Enqueue the next slot's job of every schedule, when the slot it follows has
        begun."""
        now = time.time()
        if not self.schedules or now < self.next_push:
            return
        starts = []
        for schedule in self.schedules:
            push, slot = schedule.pushing(self.db, now)
            await drive(push)
            starts.append(slot)
        self.next_push = min(starts)

    def start(self, running: Running) -> None:
        """Hold ``running`` and start its handler."""
        self.running[running.lease.token] = running
        running.task = asyncio.ensure_future(self.work(running))

    # -- one job -------------------------------------------------------------------------

    async def work(self, running: Running) -> None:
        """Run the handler on one job and settle it (or hand its ack to the acker)."""
        running.started = time.monotonic()
        emit(self.on_event, JobStarted(running.job))
        try:
            error = await self.handle(running)
        except asyncio.CancelledError:
            if not running.given_back:
                raise
            return
        running.handled = True
        self.notify()  # a slot is free
        if running.given_back:
            return
        if running.lost:
            self.finish(running, LEASE_LOST, error)
            return
        decision = decide(running.job, error, self.backoff, self.ops.max_deliveries)
        if decision.action == "ack":
            self.acks.append(running)
            self.notify()
            return
        try:
            if decision.action == "bury":
                done = await drive(self.ops.bury(self.db, running.lease, decision.reason))
            else:
                done = await drive(self.ops.release(self.db, running.lease, decision.delay,
                                                    decision.count))
        except Exception as e:
            log.exception("settling a job failed; its lease will expire")
            done, error = False, error or e
        self.finish(running, decision.outcome if done else LEASE_LOST, error)

    async def handle(self, running: Running) -> Optional[BaseException]:
        """Run the handler; what it raised, or None."""
        if self.threads is not None:
            running.future = self.threads.submit(outcome_of, self.handler, running.job)
            found: Optional[BaseException] = await asyncio.wrap_future(running.future)
            return found
        try:
            await self.handler(running.job)
        except Exception as e:  # the job's outcome
            return e
        return None

    def finish(self, running: Running, outcome: str, error: Optional[BaseException]) -> None:
        """The job ended: forget it, and report it (once: a job given back at
        shutdown is reported then)."""
        if self.running.pop(running.lease.token, None) is None:
            return
        if outcome == LEASE_LOST:
            log.warning("a job's lease expired before it was settled: it may run again "
                        "(a lease too short for the work, or a stalled process)")
        self.notify()
        emit(self.on_event, JobFinished(running.job, outcome, running.seconds(), error))

    async def settle_acks(self) -> None:
        """Ack finished jobs together, until the worker stops and none is left."""
        while True:
            while not self.acks and not (self.stopping.is_set() and not self.busy()):
                await self.changed_or(IDLE_WAIT)
            batch, self.acks = self.acks, []
            if not batch:
                return
            try:
                acked = await drive(self.ops.ack_many(self.db, [r.lease for r in batch]))
            except Exception:
                log.exception("acking %d jobs failed; their leases will expire", len(batch))
                acked = [False] * len(batch)
            for running, ok in zip(batch, acked):
                self.finish(running, OK if ok else LEASE_LOST, None)

    # -- heartbeat ---------------------------------------------------------------------

    async def beat(self) -> None:
        """Extend every lease held, in one transaction, every third of a lease."""
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            held = [r for r in self.running.values() if not r.lost and not r.given_back]
            if not held:
                continue
            try:
                renewed = await drive(self.ops.extend_many(self.db, [r.lease for r in held],
                                                           self.lease_seconds))
            except Exception:
                log.exception("a heartbeat failed; trying again at the next one")
                continue
            for running, lease in zip(held, renewed):
                if lease is None:
                    running.lost = True
                else:
                    running.lease = lease

    # -- stopping ----------------------------------------------------------------------

    async def drain(self) -> None:
        """Give back what did not start, wait for handlers (up to the timeout), give
        back what still runs, and wait for the jobs being settled."""
        unstarted = []
        for running in self.running.values():
            if not running.started or (running.future is not None and running.future.cancel()):
                unstarted.append(running)
        emit(self.on_event, WorkerStopping(self.busy() - len(unstarted)))
        await self.give_back(unstarted, report=False)
        deadline = time.monotonic() + self.shutdown_timeout
        while self.busy() and not self.hurry.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await self.changed_or(min(left, 0.1))
        late = [r for r in self.running.values() if not r.handled and not r.given_back]
        await self.give_back(late)
        settling = {r.task for r in self.running.values() if r.task is not None}
        if settling:
            await asyncio.wait(settling)

    async def give_back(self, jobs: List[Running], report: bool = True) -> None:
        """Release ``jobs`` with no delivery counted (an async handler still running is
        cancelled, a sync one abandoned); report those whose handler started as
        snoozed."""
        for running in jobs:  # all marked before the first release waits
            running.given_back = True
            if running.task is not None and not running.task.done():
                running.task.cancel()
        for running in jobs:
            try:
                await drive(self.ops.release(self.db, running.lease, None, False))
            except Exception:
                log.exception("giving back a job failed; its lease will expire")
            if report:
                self.finish(running, SNOOZE, None)
            else:
                self.running.pop(running.lease.token, None)


def nothing() -> None:
    """What takes away the signal handlers of a worker that installed none."""
