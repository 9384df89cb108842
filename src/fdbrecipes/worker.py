"""Run jobs, not just store them: a Worker over a Queue or PriorityQueue.

A :class:`Worker` fetches work, runs a handler on each job in a pool of
``concurrency`` threads, keeps every lease it holds alive, settles each job (ack,
retry with backoff, snooze, dead letter) and drains on SIGTERM.  It adds no storage:
everything it does is a call of the structure's public API that an application could
make by hand.

* Fetching: one ``claim_many`` transaction for all free slots (relaxed order,
  ``spread`` about the concurrency, so workers rarely collide), then, when nothing is
  visible, a wait on the structure's watch: no busy polling.
* Heartbeat: one thread extends every lease the worker holds in one transaction
  (``extend_many``) about every third of ``lease_seconds``; a lease lost anyway is
  reported (``lease_lost``), never acked.
* Settling: acks of finished jobs go out together (``ack_many``) from one thread;
  retries, snoozes and discards are a ``release`` or a ``bury`` each.
* Shutdown (:meth:`Worker.stop`, or SIGTERM/SIGINT when :meth:`Worker.run` runs in the
  main thread): stop fetching, give back claimed-but-unstarted items at once, wait
  up to ``shutdown_timeout`` for running handlers, then give back the leases still
  running (no delivery counted: another worker starts them now, not after the lease)
  and return.  A second signal (or :meth:`Worker.stop` again) skips the wait.
"""

from __future__ import annotations

import inspect
import logging
import math
import queue
import signal
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ._fdb import check_database
from ._front import MAX, MIN
from ._values import check_int, check_seconds
from ._wait import Interrupt, Interrupted, drive
from .jobs import (
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
from .priority_queue import PriorityQueue
from .schedule import Schedule, check_retention, sync_twin

__all__ = ["Worker"]

log = logging.getLogger("fdbrecipes.worker")

#: Seconds an idle worker waits on its watch before it looks at its schedules and its
#: stop flag again (a wait, not a poll: a push wakes it at once).
IDLE_WAIT = 1.0
#: Seconds to wait after a failed fetch before trying again.
FETCH_BACKOFF = 1.0


def worker_args(queue: Any, handler: Any, concurrency: Any, lease_seconds: Any,
                backoff: Any, shutdown_timeout: Any, on_event: Any, end: Any,
                schedules: Any, asynchronous: bool) -> int:
    """Check a worker's arguments (sync or async); the end it claims from."""
    structure = sync_twin(queue)
    if not callable(handler):
        raise TypeError("handler must be callable")
    if inspect.iscoroutinefunction(handler) != asynchronous:
        raise TypeError("an async def handler needs aio.AsyncWorker" if not asynchronous
                        else "AsyncWorker needs an async def handler; use Worker")
    check_int(concurrency, "concurrency", low=1, high=10_000)
    check_seconds(lease_seconds, "lease_seconds")
    if backoff is not None and not isinstance(backoff, Backoff):
        raise TypeError(f"backoff must be a Backoff, not {type(backoff).__name__}")
    if not (isinstance(shutdown_timeout, (int, float)) and not isinstance(shutdown_timeout, bool)
            and 0 <= shutdown_timeout < 1e9):
        raise ValueError(f"shutdown_timeout must be seconds >= 0, got {shutdown_timeout!r}")
    if on_event is not None and not callable(on_event):
        raise TypeError("on_event must be callable or None")
    if end not in ("min", "max"):
        raise ValueError(f"end must be 'min' or 'max', got {end!r}")
    if end == "max" and not isinstance(structure, PriorityQueue):
        raise ValueError("end='max' needs a PriorityQueue")
    for i, schedule in enumerate(schedules):
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedules[{i}] must be a Schedule")
    check_retention(list(schedules), time.time())
    return MAX if end == "max" else MIN


def first_push(schedules: Sequence[Schedule]) -> float:
    """When a worker first pushes its schedules' jobs: at once, or never without
    any."""
    return 0.0 if schedules else math.inf


def idle_seconds(next_push: float) -> float:
    """How long an idle worker waits on the watch: until its schedules push next,
    at most :data:`IDLE_WAIT` (then it looks again)."""
    return max(0.0, min(IDLE_WAIT, next_push - time.time()))


class Running:
    """A job the worker holds: its lease (renewed by the heartbeat), its handler's
    future, whether its handler has returned (its slot is free while it is acked), and
    whether the lease was lost or given back meanwhile."""

    __slots__ = ("future", "given_back", "handled", "job", "lease", "lost", "started")

    def __init__(self, job: Job) -> None:
        self.job = job
        self.lease = job.lease
        self.future: Optional[Future[None]] = None
        self.started = 0.0  # time.monotonic() when its handler began; 0: not yet
        self.handled = False
        self.lost = False
        self.given_back = False


#: A call for :class:`HandlerThreads`: its future, the function, its arguments.
_Call = Tuple["Future[Any]", Callable[..., Any], Tuple[Any, ...]]


class HandlerThreads:
    """``n`` daemon threads running the calls submitted, in order.  Unlike a
    ThreadPoolExecutor's threads, they do not hold the process at exit: a handler
    that never returns (its job given back when the worker stopped) cannot keep a
    stopped worker's process alive."""

    def __init__(self, n: int) -> None:
        self._calls: queue.SimpleQueue[Optional[_Call]] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._serve, name=f"fdbrecipes-job-{i}",
                                          daemon=True) for i in range(n)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` on a free thread; its future (cancellable until then)."""
        future: Future[Any] = Future()
        self._calls.put((future, fn, args))
        return future

    def shutdown(self) -> None:
        """Let each thread end once it is free (a blocked one never is)."""
        for _ in self._threads:
            self._calls.put(None)

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            future, fn, args = call
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as e:
                future.set_exception(e)


class Worker:
    """Runs ``handler(job)`` on the items of ``queue`` (see the module docstring).

    Args:
        db: the ``fdb.Database`` (or Tenant) to work on.
        queue: a Queue or PriorityQueue (``end``: which end of a PriorityQueue it
            claims from, ``"min"`` or ``"max"``).
        handler: ``handler(job)`` with a :class:`fdbrecipes.jobs.Job`; return: ack;
            raise: retry after ``backoff.delay(job.deliveries)`` (the queue's
            ``max_deliveries`` move it to the dead letters); raise ``Snooze(s)``:
            back after ``s`` seconds with no delivery counted; raise
            ``Discard(reason)``: to the dead letters now.
        concurrency: handlers running at once (threads).
        lease_seconds: the lease each job is claimed under (extended while it runs).
        backoff: the retry delays (default ``Backoff()``).
        shutdown_timeout: seconds a stopping worker waits for running handlers.
        on_event: called with every :class:`JobStarted`, :class:`JobFinished` and
            :class:`WorkerStopping` (from the worker's threads; exceptions it raises
            are logged and ignored).
        schedules: periodic jobs this worker enqueues (see
            :class:`fdbrecipes.Schedule`).

    Usable as a context manager (for tests): ``with Worker(...) as w:`` runs it in a
    thread, and leaving the block stops it (gracefully) and waits for it.
    """

    def __init__(self, db: Any, queue: Any, handler: Callable[[Job], Any], *,
                 concurrency: int = 8, lease_seconds: float = 30.0,
                 backoff: Optional[Backoff] = None, shutdown_timeout: float = 25.0,
                 on_event: Optional[EventSink] = None, end: str = "min",
                 schedules: Sequence[Schedule] = ()) -> None:
        self._end = worker_args(queue, handler, concurrency, lease_seconds, backoff,
                                shutdown_timeout, on_event, end, schedules, False)
        self.db = check_database(db)
        self.queue = sync_twin(queue)
        self.handler = handler
        self.concurrency = concurrency
        self.lease_seconds = float(lease_seconds)
        self.backoff = backoff or Backoff()
        self.shutdown_timeout = float(shutdown_timeout)
        self.on_event = on_event
        self.schedules = list(schedules)
        self._lock = threading.Condition()
        self._running: Dict[bytes, Running] = {}  # by lease token
        self._acks: List[Running] = []
        self._stopping = threading.Event()
        self._interrupt = Interrupt()  # set with _stopping: ends the fetcher's wait
        self._hurry = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._next_push = first_push(self.schedules)  # time.time() of the next push

    # -- running -----------------------------------------------------------------------

    def run(self, *, burst: bool = False) -> None:
        """Work until stopped (:meth:`stop`, SIGTERM, SIGINT); then drain and return.

        ``burst=True``: also stop once a fetch finds nothing visible and no handler
        is running (items delayed into the future, retries included, stay queued):
        a drain for scripts, cron jobs and examples.
        """
        if not isinstance(burst, bool):
            raise TypeError(f"burst must be a bool, got {type(burst).__name__}")
        restore = self._install_signals()
        pool = HandlerThreads(self.concurrency)
        helpers = [threading.Thread(target=self._beat, name="fdbrecipes-heartbeat",
                                    daemon=True),
                   threading.Thread(target=self._settle_acks, name="fdbrecipes-acks",
                                    daemon=True)]
        for helper in helpers:
            helper.start()
        try:
            self._fetch(pool, burst)
            self._drain()
        finally:
            self._stopping.set()
            with self._lock:
                self._lock.notify_all()
            for helper in helpers:
                helper.join()
            pool.shutdown()
            restore()

    def stop(self) -> None:
        """Stop (from any thread): the first call drains gracefully, a second one
        skips the wait for running handlers."""
        if self._stopping.is_set():
            self._hurry.set()
        self._stopping.set()
        self._interrupt.set()  # the fetching thread stops waiting on the watch
        with self._lock:
            self._lock.notify_all()

    def __enter__(self) -> Worker:
        self._thread = threading.Thread(target=self.run, name="fdbrecipes-worker", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.stop()
        assert self._thread is not None
        self._thread.join()

    def _install_signals(self) -> Callable[[], None]:
        """SIGTERM and SIGINT stop the worker, when it runs in the main thread; the
        function that puts the previous handlers back."""
        if threading.current_thread() is not threading.main_thread():
            return nothing
        before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig in before:
            signal.signal(sig, self._signalled)

        def restore() -> None:
            for sig, handler in before.items():
                signal.signal(sig, handler)
        return restore

    def _signalled(self, _signum: int, _frame: Any) -> None:
        self.stop()

    # -- fetching ------------------------------------------------------------------------

    def _fetch(self, pool: HandlerThreads, burst: bool) -> None:
        """Claim work for free slots until stopped (``burst``: or until nothing is
        visible nor running); wait on the watch when there is none."""
        while not self._stopping.is_set():
            try:
                self._push_schedules()
                free = self._free_slots()
                if free == 0:
                    continue
                leases = drive(self.queue._claim_many(self.db, self._end, free,
                                                      self.lease_seconds, self.concurrency))
                if self._stopping.is_set():
                    self._give_back([Running(Job.of(lease)) for lease in leases], report=False)
                    return
                for lease in leases:
                    self._start(pool, Running(Job.of(lease)))
                if not leases:
                    if burst and not self._busy_locked():
                        return
                    try:
                        drive(self.queue._wait(self.db, idle_seconds(self._next_push)),
                              self._interrupt)
                    except Interrupted:
                        return
            except Exception:
                log.exception("fetching failed; trying again in %s s", FETCH_BACKOFF)
                self._stopping.wait(FETCH_BACKOFF)

    def _free_slots(self) -> int:
        """Slots free now (a job holds one until its handler returns: its ack, batched
        by the acker, does not); waits (up to a second) for one when none is."""
        with self._lock:
            busy = sum(1 for r in self._running.values() if r.future is not None
                       and not r.handled and not r.given_back)
            if busy >= self.concurrency:
                self._lock.wait(IDLE_WAIT)
                return 0
            return self.concurrency - busy

    def _push_schedules(self) -> None:
        """Enqueue the next slot's job of every schedule, when the slot it follows has
        begun."""
        now = time.time()
        if not self.schedules or now < self._next_push:
            return
        starts = []
        for schedule in self.schedules:
            push, slot = schedule.pushing(self.db, now)
            drive(push)
            starts.append(slot)
        self._next_push = min(starts)

    def _start(self, pool: HandlerThreads, running: Running) -> None:
        with self._lock:
            self._running[running.lease.token] = running
            running.future = pool.submit(self._work, running)

    # -- one job -------------------------------------------------------------------------

    def _work(self, running: Running) -> None:
        """Run the handler on one job and settle it (or hand its ack to the acker)."""
        if running.given_back:
            return
        running.started = time.monotonic()
        self._emit(JobStarted(running.job))
        error: Optional[BaseException] = None
        try:
            self.handler(running.job)
        except BaseException as e:  # the job's outcome, whatever it was
            error = e
        duration = time.monotonic() - running.started
        with self._lock:
            running.handled = True
            self._lock.notify_all()  # a slot is free
            if running.given_back:
                return
            lost = running.lost
            decision = decide(running.job, error, self.backoff, self.queue.max_deliveries)
            if decision.action == "ack" and not lost:
                self._acks.append(running)
                self._lock.notify_all()
                return
        if lost:
            self._finish(running, LEASE_LOST, duration, error)
            return
        try:
            if decision.action == "bury":
                done = self.queue.bury(self.db, running.lease, decision.reason)
            else:
                done = self.queue.release(self.db, running.lease, delay=decision.delay,
                                          count=decision.count)
        except Exception as e:
            log.exception("settling a job failed; its lease will expire")
            done, error = False, error or e
        self._finish(running, decision.outcome if done else LEASE_LOST, duration, error)

    def _finish(self, running: Running, outcome: str, duration: float,
                error: Optional[BaseException]) -> None:
        """The job ended: forget it, and report it (once: a job given back at
        shutdown is reported then)."""
        with self._lock:
            if self._running.pop(running.lease.token, None) is None:
                return
            self._lock.notify_all()
        self._emit(JobFinished(running.job, outcome, duration, error))

    def _settle_acks(self) -> None:
        """Ack finished jobs together, until the worker stops and none is left."""
        while True:
            with self._lock:
                while not self._acks and not (self._stopping.is_set() and not self._busy()):
                    self._lock.wait(IDLE_WAIT)
                batch, self._acks = self._acks, []
                if not batch:
                    return
            try:
                acked = self.queue.ack_many(self.db, [r.lease for r in batch])
            except Exception:
                log.exception("acking %d jobs failed; their leases will expire", len(batch))
                acked = [False] * len(batch)
            for running, ok in zip(batch, acked):
                duration = time.monotonic() - running.started
                self._finish(running, OK if ok else LEASE_LOST, duration, None)

    def _busy(self) -> bool:
        """Whether a handler still runs (under the lock)."""
        return any(r.future is not None and not r.future.done() and not r.given_back
                   for r in self._running.values())

    # -- heartbeat ---------------------------------------------------------------------

    def _beat(self) -> None:
        """Extend every lease held, in one transaction, every third of a lease."""
        while not self._stopping.wait(self.lease_seconds / 3) or self._busy_locked():
            with self._lock:
                held = [r for r in self._running.values() if not r.lost and not r.given_back]
            if not held:
                continue
            try:
                renewed = self.queue.extend_many(self.db, [r.lease for r in held],
                                                 self.lease_seconds)
            except Exception:
                log.exception("a heartbeat failed; trying again at the next one")
                continue
            with self._lock:
                for running, lease in zip(held, renewed):
                    if lease is None:
                        running.lost = True
                    else:
                        running.lease = lease

    def _busy_locked(self) -> bool:
        with self._lock:
            return self._busy() or bool(self._acks)

    # -- stopping ----------------------------------------------------------------------

    def _drain(self) -> None:
        """Give back what did not start, wait for handlers (up to the timeout), give
        back what still runs."""
        with self._lock:
            unstarted = [r for r in self._running.values()
                         if r.future is not None and r.future.cancel()]
            running = sum(1 for r in self._running.values() if r.started and not r.given_back)
        self._emit(WorkerStopping(running))
        self._give_back(unstarted, report=False)
        deadline = time.monotonic() + self.shutdown_timeout
        with self._lock:
            while self._busy() and not self._hurry.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._lock.wait(min(left, 0.1))
            late = [r for r in self._running.values()
                    if r.future is not None and not r.future.done() and not r.given_back]
        self._give_back(late)

    def _give_back(self, jobs: List[Running], report: bool = True) -> None:
        """Release ``jobs`` with no delivery counted; report them as snoozed (those
        whose handler started)."""
        for running in jobs:
            with self._lock:
                running.given_back = True
            try:
                self.queue.release(self.db, running.lease, count=False)
            except Exception:
                log.exception("giving back a job failed; its lease will expire")
            duration = time.monotonic() - running.started if running.started else 0.0
            if report:
                self._finish(running, SNOOZE, duration, None)
            else:
                with self._lock:
                    self._running.pop(running.lease.token, None)

    def _emit(self, event: Any) -> None:
        emit(self.on_event, event)


def emit(on_event: Optional[EventSink], event: Any) -> None:
    """Hand ``event`` to a worker's ``on_event``, if any; what it raises is logged and
    ignored (a broken sink must not stop the worker)."""
    if on_event is None:
        return
    try:
        on_event(event)
    except Exception:
        log.exception("on_event raised; ignored")


def nothing() -> None:
    """What restores the signal handlers of a worker that installed none."""
