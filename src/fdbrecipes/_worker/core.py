"""One worker's control flow, on an event loop (see :mod:`fdbrecipes._worker`).

* Fetching: one ``claim_many`` for all free slots (relaxed order: a block of ``n``
  among the first ``n`` times the concurrency, so workers rarely collide; at a
  PriorityQueue's MAX end, ``n`` among the first ``n`` + the concurrency), then,
  when nothing is visible, a wait on the structure's watch: no busy polling.  A slot
  is busy while its handler runs.  While jobs are short, a claim also takes jobs
  ahead of the free slots (:mod:`.ahead`): they wait in the worker, under leases
  the heartbeat extends, and start the moment a slot frees; the next claim goes out
  once half of them started.  With job records, the claim also reads each job's own
  time limit and whether a cancel is pending (``Lease.time_limit``,
  ``Lease.cancel_requested``).
* Running: an ``async def`` handler is awaited in a task; a sync handler runs in one
  of ``concurrency`` daemon threads (:mod:`.threads`), awaited from the loop.  Past
  its time limit, an async handler's task is cancelled, a sync handler abandoned (its
  thread replaced); either way the job is released as failed.  A cancel (operators,
  through :mod:`.presence`) cancels an async handler's task, and a sync handler sees
  ``job.cancelled``.
* Heartbeat: one task extends every lease held in one transaction (``extend_many``)
  about every third of ``lease_seconds``, then writes the worker's record and its
  jobs' progress (:mod:`.presence`); a lease lost anyway is reported
  (``lease_lost``), never acked.
* Settling: the acks of finished jobs (with their results and follow-up work) ride
  on the next claim, in its transaction (``finish_and_claim``); those no claim takes
  within :data:`ACK_RIDE` (the queue is empty, the slots are full) go out together
  from one task (``finish_many``), in a transaction for all that finished while the
  previous one was in flight.  When such a transaction fails, each of its acks goes
  alone (:meth:`WorkerCore.ack_alone`): one job's data fails only its own ack, and
  that job is released as failed with the error.  Retries, snoozes and discards are
  a ``release`` or a ``bury`` each, with the error the job failed with.  Whatever
  happens, a job the worker started ends (:meth:`WorkerCore.work`).
* Shutdown (:meth:`WorkerCore.stop`, an operator's ``stop``, or SIGTERM/SIGINT when
  the loop runs in the main thread): stop fetching, give back claimed-but-unstarted
  items at once, wait up to ``shutdown_timeout`` for running handlers, then give back
  the leases still running (no delivery counted: another worker starts them now, not
  after the lease) and return.  A second stop skips the wait.

Every job that fails is logged (``fdbrecipes.worker``) with its traceback, every
retry and dead letter with its reason.  Under a supervisor (``tell``, see
:class:`.holding.Tell`), the worker tells it each job it claims, starts and ends,
and that its loop runs.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from typing import Any, Callable, List, Optional, Sequence

from .._drivers.awaiting import drive
from .._fdb import check_database
from .._ordered.leases import Lease
from .._records.registry import STOP, Orders
from .._schedules.firing import firing_of
from .._values import check_bool, check_int, check_seconds
from ..jobs import (
    DEAD,
    DISCARD,
    LEASE_LOST,
    RETRY,
    SNOOZE,
    Backoff,
    Decision,
    Job,
    JobCancelled,
    JobStarted,
    Retry,
    TimeLimitExceeded,
    WorkerStopping,
    decide,
)
from ..protocol import Claimed, Workable, workable
from ..schedule import Schedule
from .ahead import Ahead, check_prefetch, claim_spread
from .holding import Holding, Tell, finishing
from .presence import Presence, nothing, stop_on_signals
from .running import (
    IDLE_WAIT,
    Running,
    ack_of,
    call_handler,
    check_handler,
    emit,
    idle_seconds,
    job_error,
    named,
)
from .threads import Completions, HandlerThreads

__all__ = ["FETCH_BACKOFF", "IDLE_WAIT", "WorkerCore", "emit"]

log = logging.getLogger("fdbrecipes.worker")

#: Seconds to wait after a failed fetch before trying again.
FETCH_BACKOFF = 1.0
#: Seconds a fetch waits at most for more slots to free before it claims (see
#: :meth:`WorkerCore.gather`).
GATHER_MAX = 0.01
#: Seconds acks wait at most for a claim to carry them (see :meth:`WorkerCore.ride`).
ACK_RIDE = 0.05


class WorkerCore(Holding):
    """Runs ``handler(job)`` on the items of ``queue`` (see the module docstring and
    :class:`fdbrecipes.Worker` for the arguments); ``threaded``: the handler is a
    sync function, run in handler threads; ``tell``: who learns what it holds (a
    supervisor's pipe, see :class:`.holding.Tell`), or None; ``beside``: the other
    structures of its app, targets its stored schedules may fire to."""

    def __init__(self, db: Any, queue: Any, handler: Callable[[Job], Any], *,
                 concurrency: Any, lease_seconds: Any, backoff: Any, shutdown_timeout: Any,
                 on_event: Any, end: Any, schedules: Sequence[Schedule], time_limit: Any,
                 name: Any, threaded: bool, prefetch: Any = None,
                 schedule_store: Any = None, tell: Optional[Tell] = None,
                 beside: Sequence[Any] = ()) -> None:
        self.ops: Workable[Any] = workable(queue)
        check_handler(handler, not threaded)
        check_int(concurrency, "concurrency", low=1, high=10_000)
        lease = check_seconds(lease_seconds, "lease_seconds")
        if backoff is not None and not isinstance(backoff, Backoff):
            raise TypeError(f"backoff must be a Backoff, not {type(backoff).__name__}")
        if not (isinstance(shutdown_timeout, (int, float))
                and not isinstance(shutdown_timeout, bool) and 0 <= shutdown_timeout < 1e9):
            raise ValueError(f"shutdown_timeout must be seconds >= 0, got {shutdown_timeout!r}")
        if on_event is not None and not callable(on_event):
            raise TypeError("on_event must be callable or None")
        self.time_limit = None if time_limit is None else check_seconds(time_limit,
                                                                        "time_limit")
        self.ahead = Ahead(concurrency, check_prefetch(prefetch, concurrency),
                           self.time_limit is not None)
        if name is not None and not (isinstance(name, str) and 0 < len(name) <= 200):
            raise TypeError(f"name must be a str of 1 to 200 characters, not {name!r}")
        self.ops.claim_many(db, 1, lease, spread=1, end=end).close()  # checks end
        self.db = check_database(db)
        self.firing, schedules = firing_of(
            db, [self.ops, *(workable(structure) for structure in beside)], schedules,
            schedule_store)
        self.queue = queue
        self.handler = handler
        self.concurrency: int = concurrency
        self.backoff: Backoff = backoff or Backoff()
        self.shutdown_timeout = float(shutdown_timeout)
        self.end: str = end
        self.schedules = list(schedules)
        self.threaded = threaded
        self.signals = True  # SIGTERM and SIGINT stop it (see serving.run_all)
        self.judge: Optional[Callable[[Job, BaseException], BaseException]] = None  # an app's
        super().__init__(Presence(self.ops, self.db, name or repr(queue), lease / 3),
                         on_event, tell, lease)
        self.threads: Optional[HandlerThreads] = None
        self.completions: Optional[Completions] = None
        self.next_push = 0.0 if self.schedules else math.inf  # time.time() of the next push
        self.claim_seconds = 0.0  # how long the last claim took
        self.claiming = False  # a claim is about to go, or in flight
        self.idling = False  # waiting for work on the structure's watch
        self.lock = threading.Lock()  # guards loop and the stops asked before it runs
        self.loop: Optional[asyncio.AbstractEventLoop] = None  # while it runs
        self.thread = 0  # the ident of the loop's thread, while it runs
        self.stops_asked = 0
        # made by run(), on its loop: stop asked, hurry asked
        self.stopping: asyncio.Event
        self.hurry: asyncio.Event

    @property
    def id(self) -> str:
        """The worker's id, as its record names it."""
        return self.presence.id

    # -- running and stopping ------------------------------------------------------------

    async def run(self, burst: Any) -> None:
        """Work until stopped; then drain and return (``burst``: also once nothing is
        visible and no handler runs)."""
        check_bool(burst, "burst")
        self.stopping, self.hurry = asyncio.Event(), asyncio.Event()
        with self.lock:
            self.loop, self.thread = asyncio.get_running_loop(), threading.get_ident()
            asked, self.stops_asked = self.stops_asked, 0
        for _ in range(asked):
            self.request_stop()
        restore = stop_on_signals(self.request_stop) if self.signals else nothing
        self.threads = HandlerThreads(self.concurrency) if self.threaded else None
        self.completions = Completions(asyncio.get_running_loop()) if self.threaded else None
        log.info("worker %s started: %s, concurrency %d, lease %g s%s", self.id,
                 self.presence.label, self.concurrency, self.lease_seconds,
                 "" if self.time_limit is None else f", time limit {self.time_limit:g} s")
        if self.tell is not None:
            self.tell.hello(self.id)
        helpers = [asyncio.ensure_future(self.beat()),
                   asyncio.ensure_future(self.presence.listen(self.apply)),
                   asyncio.ensure_future(self.presence.prune())]
        if self.firing is not None:  # the stored schedules (see _schedules.firing)
            helpers.append(asyncio.ensure_future(self.firing.run()))
        if self.tell is not None:
            helpers.append(asyncio.ensure_future(self.tell_alive(self.tell)))
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
            for task in helpers:
                task.cancel()
            await asyncio.wait(helpers)
            await self.presence.leave()
            self.flush()  # what a supervisor was not told yet
            if self.threads is not None:
                self.threads.shutdown()
            restore()
            with self.lock:
                self.loop = None
            log.info("worker %s stopped: %d jobs, %d failed", self.id,
                     self.presence.processed, self.presence.failed)

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
        else:
            log.info("worker %s stopping: %d jobs running", self.id, self.busy())
        self.stopping.set()
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

    # -- fetching ------------------------------------------------------------------------

    async def fetch(self, burst: bool) -> None:
        """Claim work for free slots until stopped (``burst``: or until a claim finds
        nothing while the worker holds nothing, running or being settled); wait on the
        watch when there is none."""
        while not self.stopping.is_set():
            try:
                await self.push_schedules()
                if self.wanted() <= 0 or self.presence.state != "running":
                    await self.changed_or(IDLE_WAIT)
                    continue
                self.claiming = True
                if not self.waiting:
                    await self.gather()
                claimed = await self.claim()
                if self.tell is not None and claimed.leases:
                    self.tell.held(claimed.leases)
                runs = [Running(job) for job in self.jobs_of(claimed.leases)]
                if self.stopping.is_set():
                    await self.give_back(runs, report=False)
                    return
                for running in runs:
                    self.running[running.lease.token] = running
                self.waiting.extend(runs)
                self.start_waiting()
                if not claimed.leases:
                    # nothing held, running or settling (what this claim acked was held
                    # until it committed: a retry it may have been racing is awaited)
                    if burst and not self.running and not claimed.acked:
                        return
                    await self.idle()
            except Exception:
                log.exception("fetching failed; trying again in %s s", FETCH_BACKOFF)
                await self.changed_or(FETCH_BACKOFF)

    async def claim(self) -> Claimed:
        """Claim what :meth:`wanted` says, in one transaction with the acks waiting
        (at most :data:`SETTLE_BYTES` of results): what it acked and claimed."""
        began = time.monotonic()
        acks = self.next_acks()
        n = self.wanted()
        try:
            claimed = await drive(self.ops.finish_and_claim(
                self.db, finishing(acks), n, self.lease_seconds,
                spread=claim_spread(n, self.concurrency, self.end), end=self.end,
                holder=self.id))
        except Exception as e:
            self.claiming = False
            self.notify()
            if acks:
                log.warning("acking %d jobs with a claim failed (%s: %r); each is acked "
                            "alone now", len(acks), type(e).__name__, str(e))
                await self.ack_alone(acks)
            raise
        finally:
            self.claiming = False
            self.notify()
        self.claim_seconds = time.monotonic() - began
        self.acked(acks, claimed.acked)
        return claimed

    def wanted(self) -> int:
        """How many jobs to claim now: for the free slots and the jobs to hold ahead
        (see :mod:`.ahead`), once those waiting fell to half of these; 0: none now."""
        ahead = self.ahead.jobs()
        if len(self.waiting) > ahead // 2:
            return 0
        return max(0, self.concurrency - self.busy() + ahead - len(self.waiting))

    async def gather(self) -> None:
        """While handlers run, wait up to one claim's duration (at most
        :data:`GATHER_MAX`) for their slots to free: slots that free meanwhile are
        claimed in the same transaction rather than one each, which halves the
        transactions per job when handlers are short, and delays a long handler's
        successor by less than the claim itself takes."""
        deadline = time.monotonic() + min(self.claim_seconds, GATHER_MAX)
        while self.busy():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await self.changed_or(left)

    def jobs_of(self, leases: List[Lease[Any]]) -> List[Job]:
        """The jobs of ``leases``, each with its time limit (its own, which the claim
        read from its record, or the worker's), stopped if a cancel is pending."""
        jobs = []
        for lease in leases:
            job = Job.of(lease, lease.time_limit if lease.time_limit is not None
                         else self.time_limit)
            if lease.cancel_requested:
                job.stop(JobCancelled(f"job {lease.id!r} was cancelled"))
            jobs.append(job)
        return jobs

    async def idle(self) -> None:
        """Wait on the structure's watch until an item is visible, a schedule is due,
        or the worker stops."""
        waiting = asyncio.ensure_future(drive(self.ops.wait(self.db,
                                                            idle_seconds(self.next_push))))
        stopping = asyncio.ensure_future(self.stopping.wait())
        self.idling = True
        self.notify()  # the acks waiting for a claim go on their own
        try:
            await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.idling = False
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

    def start_waiting(self) -> None:
        """Start waiting jobs on the free slots, in the order they were claimed (not
        once the worker stops: it gives them back); a supervisor is told before
        their handlers begin."""
        if self.stopping.is_set() or not self.waiting:
            return
        free = self.concurrency - self.busy()
        starting = [self.waiting.popleft() for _ in range(min(free, len(self.waiting)))]
        if not starting:
            return
        now = time.time()
        for running in starting:
            running.began_at = now
        if self.tell is not None:
            self.tell.started([(r.lease.token, now, r.job.time_limit) for r in starting])
        for running in starting:
            running.slot = True
            self.slots += 1
            running.task = asyncio.ensure_future(self.work(running))

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
            if not running.given_back:
                self.ahead.ran(running.seconds())
                self.start_waiting()  # on the slot just freed
            self.notify()  # a slot is free
            if running.given_back:
                return
            if running.lost:
                self.finish(running, LEASE_LOST, error)
                return
            if self.judge is not None and job.stopped is not None and error is job.stopped:
                error = self.judge(job, job.stopped)  # a task's retries count a time limit
            decision = decide(job, error, self.backoff, self.ops.max_deliveries)
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
            if decision.action == "bury":
                reason = decision.reason if decision.outcome == DISCARD or recorded is None \
                    else recorded.reason()
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
            while not self.acks and not (self.stopping.is_set() and not self.busy()):
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
                await self.settle(running, decide(running.job, e, self.backoff,
                                                  self.ops.max_deliveries), e)
                continue
            self.acked([running], acked)

    async def ride(self) -> None:
        """Let the acks waiting ride on a claim, in its transaction: wait while one is
        in flight or about to go (at most :data:`ACK_RIDE`)."""
        deadline = time.monotonic() + ACK_RIDE
        while self.acks and not self.stopping.is_set() and (
                self.claiming or (not self.idling and self.presence.state == "running"
                                  and self.wanted() > 0)):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await self.changed_or(left)

    # -- stopping ----------------------------------------------------------------------

    async def drain(self) -> None:
        """Give back what did not start, wait for handlers (up to the timeout), give
        back what still runs, and wait for the jobs being settled."""
        self.waiting.clear()  # held in self.running: given back below
        unstarted = [r for r in self.running.values()
                     if not r.started or (r.future is not None and r.future.cancel())]
        given = {id(r) for r in unstarted}
        emit(self.on_event, WorkerStopping(sum(
            1 for r in self.running.values()
            if r.started and not r.handled and not r.given_back and id(r) not in given)))
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
