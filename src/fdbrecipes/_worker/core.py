"""One worker's control flow, on an event loop (see :mod:`fdbrecipes._worker`).

* Fetching (:mod:`.fetching`): one ``claim_many`` for all free slots (relaxed order: a
  block of ``n`` among the first ``n`` times the concurrency, so workers rarely collide;
  at a PriorityQueue's MAX end, ``n`` among the first ``n`` + the concurrency), then,
  when nothing is visible, a wait on the structure's watch: no busy polling.  A slot is
  busy while its handler runs.  While jobs are short, a claim also takes jobs ahead of
  the free slots (:mod:`.ahead`): they wait in the worker, under leases the heartbeat
  extends, and start the moment a slot frees; the next claim goes out once half of them
  started.  With job records, the claim also reads each job's own time limit and whether
  a cancel is pending (``Lease.time_limit``, ``Lease.cancel_requested``).
* Running: an ``async def`` handler is awaited in a task; a sync handler runs in one of
  ``concurrency`` daemon threads (:mod:`.threads`), awaited from the event loop.  Past
  its time limit, an async handler's task is cancelled, a sync handler abandoned (its
  thread replaced); either way the job is released as failed.  A cancel (operators,
  through :mod:`.presence`) cancels an async handler's task, and a sync handler sees
  ``job.cancelled``.
* Heartbeat: one task extends every lease held in one transaction (``extend_many``)
  about every third of ``lease_seconds``, then writes the worker's record and its jobs'
  progress (:mod:`.presence`); a lease lost anyway is reported (``lease_lost``), never
  acked.
* Settling: the acks of finished jobs (with their results and follow-up work) ride on
  the next claim, in its transaction (``finish_and_claim``); those no claim takes within
  :data:`ACK_RIDE` (the queue is empty, the slots are full) go out together from one
  task (``finish_many``), in a transaction for all that finished while the previous one
  was in flight.  When such a transaction fails, each of its acks goes alone
  (:meth:`WorkerCore.ack_alone`): one job's data fails only its own ack, and that job is
  released as failed with the error.  Retries, snoozes and discards are a ``release`` or
  a ``bury`` each, with the error the job failed with.  Whatever happens, a job the
  worker started ends (:meth:`WorkerCore.work`).
* Shutdown (:mod:`.stopping`; :meth:`WorkerCore.stop`, an operator's ``stop``, or
  SIGTERM/SIGINT when the event loop runs in the main thread): stop fetching, give back
  claimed-but-unstarted items at once, wait up to ``shutdown_timeout`` for running
  handlers, then give back the leases still running (no delivery counted: another worker
  starts them now, not after the lease) and return.  A second stop skips the wait.

Every job that fails is logged (``fdbrecipes.worker``) with its traceback, every
retry and dead letter with its reason.  Under a supervisor (``tell``, see
:class:`.holding.Tell`), the worker tells it each job it claims, starts and ends,
and that its event loop runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, List, Optional, Sequence

from .._drivers.awaiting import drive
from .._fdb import check_database
from .._ops.checks import check_end
from .._ops.kinds import PriorityQueueOps
from .._records.registry import STOP, Orders
from .._schedules.firing import firing_of
from .._values import check_bool
from .._workflow.steps import node_store
from ..jobs import (
    DEAD,
    DISCARD,
    LEASE_LOST,
    RETRY,
    SNOOZE,
    Decision,
    Job,
    JobCancelled,
    JobStarted,
    Retry,
    TimeLimitExceeded,
    decide,
)
from ..protocol import Workable, workable
from .fetching import FETCH_BACKOFF, Fetching
from .holding import Holding, Tell, finishing
from .options import WorkerOptions
from .presence import Presence, nothing, stop_on_signals
from .running import (
    IDLE_WAIT,
    Running,
    ack_of,
    call_handler,
    check_handler,
    emit,
    job_error,
    named,
)
from .stopping import Stops, drain
from .threads import Completions, HandlerThreads

__all__ = ["FETCH_BACKOFF", "IDLE_WAIT", "WorkerCore", "emit"]

log = logging.getLogger("fdbrecipes.worker")

#: Seconds acks wait at most for a claim to carry them (see :meth:`WorkerCore.ride`).
ACK_RIDE = 0.05


class WorkerCore(Holding):
    """Runs ``handler(job)`` on the items of ``queue`` with ``options`` (see the
    module docstring and :class:`fdbrecipes.Worker` for the arguments); ``threaded``:
    the handler is a sync function, run in handler threads; ``tell``: who learns what
    it holds (a supervisor's pipe, see :class:`.holding.Tell`), or None; ``beside``:
    the other structures of its app, targets its stored schedules may fire to.

    Raises:
        TypeError or ValueError: ``queue`` is not a structure a worker serves,
            ``handler`` not a handler of the kind ``threaded`` says, ``options.end``
            not an end of ``queue``, ``db`` not a Database, or a schedule is bad (see
            :func:`.._schedules.firing.firing_of`).
    """

    def __init__(self, db: Any, queue: Any, handler: Callable[[Job], Any],
                 options: WorkerOptions, *, threaded: bool, tell: Optional[Tell] = None,
                 beside: Sequence[Any] = ()) -> None:
        self.ops: Workable[Any] = workable(queue)
        check_handler(handler, not threaded)
        check_end_of(self.ops, options.end)
        self.db = check_database(db)
        self.firing, schedules = firing_of(
            db, [self.ops, *(workable(structure) for structure in beside)], options.schedules,
            options.schedule_store)
        self.queue = queue
        self.handler = handler
        self.options = options
        self.threaded = threaded
        self.signals = True  # SIGTERM and SIGINT stop it (see serving.run_all)
        self.judge: Optional[Callable[[Job, BaseException], BaseException]] = None  # an app's
        super().__init__(Presence(self.ops, self.db, options.name or repr(queue),
                                  options.lease_seconds / 3),
                         options.on_event, tell, options.lease_seconds)
        self.stops = Stops()
        self.fetching = Fetching(self, self.ops, self.db, options, schedules, self.stops,
                                 self.work, self.ack_alone, self.presence.id)
        self.threads: Optional[HandlerThreads] = None
        self.completions: Optional[Completions] = None

    @property
    def id(self) -> str:
        """The worker's id, as its record names it."""
        return self.presence.id

    @property
    def concurrency(self) -> int:
        """Handlers running at once at most."""
        return self.options.concurrency

    # -- running and stopping ------------------------------------------------------------

    async def run(self, burst: Any) -> None:
        """Work until stopped; then drain and return (``burst``: also once nothing is
        visible and no handler runs)."""
        check_bool(burst, "burst")
        self.stops.begin(self.request_stop)
        restore = stop_on_signals(self.request_stop) if self.signals else nothing
        self.threads = HandlerThreads(self.concurrency) if self.threaded else None
        self.completions = Completions(asyncio.get_running_loop()) if self.threaded else None
        self.hello()
        helpers = self.helpers()
        acker = asyncio.ensure_future(self.settle_acks())
        drained = False
        try:
            await self.fetching.fetch(burst)
            await drain(self, self.options.shutdown_timeout, self.stops.hurry)
            drained = True
        finally:
            self.stops.stopping.set()
            self.notify()
            if not drained:  # cancelled, or failed: no wait for handlers to return
                acker.cancel()
            await asyncio.wait({acker})
            for task in helpers:
                task.cancel()
            await asyncio.wait(helpers)
            await self.presence.leave()
            self.flush()  # what a supervisor was not told yet
            if self.threads is not None:
                self.threads.shutdown()
            restore()
            self.stops.end()
            log.info("worker %s stopped: %d jobs, %d failed", self.id,
                     self.presence.processed, self.presence.failed)

    def hello(self) -> None:
        """Say the worker started (in its log, and to a supervisor)."""
        limit = self.options.time_limit
        log.info("worker %s started: %s, concurrency %d, lease %g s%s", self.id,
                 self.presence.label, self.concurrency, self.lease_seconds,
                 "" if limit is None else f", time limit {limit:g} s")
        if self.tell is not None:
            self.tell.hello(self.id)

    def helpers(self) -> List[asyncio.Future[None]]:
        """Start the tasks that run beside the fetching until the worker stops: the
        heartbeat, the wait for orders, the pruning, the stored schedules' firing, and
        the word to a supervisor that the event loop runs."""
        helpers: List[asyncio.Future[None]] = [
                   asyncio.ensure_future(self.beat()),
                   asyncio.ensure_future(self.presence.listen(self.apply)),
                   asyncio.ensure_future(self.presence.prune())]
        if self.firing is not None:  # the stored schedules (see _schedules.firing)
            helpers.append(asyncio.ensure_future(self.firing.run()))
        if self.tell is not None:
            helpers.append(asyncio.ensure_future(self.tell_alive(self.tell)))
        return helpers

    def stop(self) -> None:
        """Stop (from any thread, before or while it runs): the first call drains
        gracefully, a second one skips the wait for running handlers."""
        self.stops.ask(self.request_stop)

    def request_stop(self) -> None:
        """:meth:`stop`, in the event loop's thread."""
        if self.stops.heard():
            log.info("worker %s stopping: %d jobs running", self.id, self.busy())
        self.presence.state = "stopping"
        self.notify()

    # -- what operators ask --------------------------------------------------------------

    def apply(self, orders: Orders) -> None:
        """Follow what operators asked: quiet (claim no more), stop, cancel jobs."""
        if orders.command == STOP:
            log.info("worker %s: an operator asked it to stop", self.id)
            self.request_stop()
        elif orders.command is not None:
            self.presence.quiet("an operator asked")
            self.notify()
        for group, id_ in orders.cancels:
            for running in list(self.running.values()):
                lease = running.lease
                if lease.id == id_ and getattr(lease, "group", None) == group:
                    self.stop_job(running, JobCancelled(f"job {id_!r} was cancelled"))

    def stop_job(self, running: Running, reason: Exception) -> None:
        """Stop a job whose handler has not returned, for ``reason`` (a cancel, a time
        limit): an async handler's task is cancelled; a sync handler sees it through
        ``job.cancelled``/``job.check()``, and, past its time limit, is abandoned."""
        if running.handled or running.given_back or running.job.stopped is not None:
            return
        running.job.stop(reason)
        if not running.started:
            return  # work() sees it before the handler begins
        abandon = isinstance(reason, TimeLimitExceeded)
        if self.threads is not None and running.future is not None and abandon:
            self.threads.abandon(running.future)
        if running.task is not None and (abandon or self.threads is None):
            running.task.cancel()

    # -- one job -------------------------------------------------------------------------

    async def work(self, running: Running) -> None:
        """Run the handler on one job and settle it (or hand its ack to the acker).
        The job always ends: should the worker itself fail on the way (a bug), that
        is logged and the job ends as ``lease_lost`` (its lease, no longer extended,
        expires)."""
        job = running.job
        error: Optional[BaseException] = None
        try:
            running.started = time.monotonic()
            emit(self.on_event, JobStarted(job))
            if job.time_limit is not None:
                running.timer = asyncio.get_running_loop().call_later(
                    job.time_limit, self.stop_job, running, TimeLimitExceeded(
                        f"the job ran past its time limit of {job.time_limit:g} s"))
            try:
                result, error = await call_handler(running, self.handler, self.threads,
                                                   self.completions)
            except asyncio.CancelledError:
                if running.given_back or job.stopped is None:
                    raise
                result, error = None, job.stopped
            finally:
                if running.timer is not None:
                    running.timer.cancel()
                running.handled = True
                self.free_slot(running)
                self.returned(running)
            self.fetching.freed(running)
            if running.given_back:
                return
            if running.lost:
                self.finish(running, LEASE_LOST, error)
                return
            if self.judge is not None and job.stopped is not None and error is job.stopped:
                error = self.judge(job, job.stopped)  # a task's retries count a time limit
            decision = decide(job, error, self.options.backoff, self.ops.max_deliveries)
            if decision.action in ("ack", "cancel"):
                running.finished = ack_of(running, decision, result, self.ops)
                self.acks.append(running)
                self.notify()
                return
            await self.settle(running, decision, error)
        except Exception as e:
            log.exception("job %s: the worker failed to settle it; its lease will expire",
                          named(job))
            self.finish(running, LEASE_LOST, error or e)

    async def settle(self, running: Running, decision: Decision,
                     error: Optional[BaseException]) -> None:
        """Release or bury a job that failed, snoozed or was discarded, with the error
        it failed with; the progress its handler last set is written first (one more
        transaction), as an ack writes it."""
        job = running.job
        if isinstance(error, Retry):  # what the handler failed with
            error = error.error
        if decision.outcome in (RETRY, DEAD) and error is not None:
            log.error("job %s failed (delivery %d)%s", named(job), job.deliveries,
                      f"; retry in {decision.delay:.1f} s" if decision.outcome == RETRY
                      else "; it is a dead letter now", exc_info=error)
        elif decision.outcome == DISCARD:
            log.warning("job %s discarded: %r", named(job), decision.reason)
        try:
            recorded = None if error is None or decision.outcome == SNOOZE else \
                job_error(error)
            progress, _ = job.reported()
            if progress is not None and self.ops.history is not None:  # as an ack keeps it
                await drive(self.ops.report(self.db, [(running.lease, progress)]))
            reason = decision.reason if decision.outcome == DISCARD or recorded is None \
                else recorded.reason()
            node_store(self.ops, job.id)  # a node's burial runs its step: its store known?
            if decision.action == "bury":
                done = await drive(self.ops.bury(self.db, running.lease, reason, recorded))
            else:
                done = await drive(self.ops.release(self.db, running.lease, decision.delay,
                                                    decision.count, recorded))
        except Exception as e:
            log.exception("settling job %s failed; its lease will expire", named(job))
            done, error = False, error or e
        self.finish(running, decision.outcome if done else LEASE_LOST, error)

    async def settle_acks(self) -> None:
        """Ack finished jobs together (at most :data:`SETTLE_BYTES` of results a
        transaction), until the worker stops and none is left: those no claim
        carries (see :meth:`ride`)."""
        while True:
            while not self.acks and not (self.stops.stopping.is_set() and not self.busy()):
                await self.changed_or(IDLE_WAIT)
            if not self.acks:
                return
            await self.ride()
            batch = self.next_acks()
            if not batch:
                continue
            try:
                acked = await drive(self.ops.finish_many(self.db, finishing(batch)))
            except Exception as e:
                log.warning("acking %d jobs together failed (%s: %r); each is acked alone "
                            "now", len(batch), type(e).__name__, str(e))
                await self.ack_alone(batch)
                continue
            self.acked(batch, acked)

    async def ack_alone(self, batch: List[Running]) -> None:
        """Ack each job of ``batch`` in a transaction of its own (their transaction
        together failed): one job's data, follow-up work over FoundationDB's 10 MB
        say, fails its own ack only.  A job whose ack fails alone too is released as
        failed, with that error (retried, or a dead letter with it as its reason),
        rather than left to expire."""
        for running in batch:
            assert running.finished is not None
            try:
                acked = await drive(self.ops.finish_many(self.db, [running.finished]))
            except Exception as e:
                await self.settle(running, decide(running.job, e, self.options.backoff,
                                                  self.ops.max_deliveries), e)
                continue
            self.acked([running], acked)

    async def ride(self) -> None:
        """Let the acks waiting ride on a claim, in its transaction: wait while one is
        in flight or about to go (at most :data:`ACK_RIDE`)."""
        deadline = time.monotonic() + ACK_RIDE
        fetching = self.fetching
        while self.acks and not self.stops.stopping.is_set() and (
                fetching.claiming or (not fetching.idling and self.presence.state == "running"
                                      and fetching.wanted() > 0)):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await self.changed_or(left)


def check_end_of(ops: Workable[Any], end: str) -> None:
    """Refuse an ``end`` the structure of ``ops`` does not claim from: "max" is a
    PriorityQueue's only (the options checked that ``end`` is "min" or "max").

    Raises:
        ValueError: ``end`` is "max" and ``ops`` not a PriorityQueue's.
    """
    check_end(end, 1 if isinstance(ops, PriorityQueueOps) else 0)
