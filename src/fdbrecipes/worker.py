"""Run jobs, not just store them: a Worker over a Queue, PriorityQueue or FairQueue.

A :class:`Worker` fetches work, runs a sync handler on each job in a pool of
``concurrency`` threads, keeps every lease it holds alive, settles each job (ack,
retry with backoff, snooze, dead letter) and drains on SIGTERM.  It adds no storage:
everything it does is a call of the structure's operations
(:class:`fdbrecipes.protocol.Workable`) that an application could make by hand.  Its
control flow is that of :class:`fdbrecipes.aio.AsyncWorker`, written once in
:mod:`fdbrecipes._worker.core` (fetching, heartbeats, batched acks, shutdown), which it
runs on an event loop of its own.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, List, Optional, Sequence

from ._schedules.base import SchedulesBase
from ._worker.options import WorkerOptions
from ._worker.serving import cores, run_all
from .jobs import Backoff, EventSink, Job
from .schedule import Schedule

__all__ = ["Worker"]


class Worker:
    """Runs ``handler(job)`` on the items of ``queue``.

    * Fetching: one ``claim_many`` for all free slots (relaxed order: a block of ``n``
      among the first ``n`` times the concurrency, so workers rarely collide; at a
      PriorityQueue's MAX end, ``n`` among the first ``n`` + the concurrency), then,
      when nothing is visible, a wait on the structure's watch: no busy polling.
      While jobs are short it claims ahead of its free slots (``prefetch``): a slot
      is refilled the moment its handler returns, and the next claim is in flight
      meanwhile.
    * Heartbeat: every lease the worker holds is extended in one transaction
      (``extend_many``) about every third of ``lease_seconds``; a lease lost anyway is
      reported (``lease_lost``), never acked.
    * Settling: acks of finished jobs go out together, in the transaction of the
      next claim (``finish_and_claim``) or on their own (``finish_many``): with a
      structure made with ``history``, each job's result and last progress too, and
      the follow-up work of :meth:`fdbrecipes.Job.then` pushed in the same
      transaction; retries, snoozes and discards are a ``release`` or a ``bury``
      each, with the error the job failed with (its traceback kept in its record,
      ``Type: message`` as a dead letter's reason).
    * Time limits: a handler that runs past ``time_limit`` (or the job's own, given
      to ``push``) is abandoned: its thread is replaced, its lease no longer
      extended, and the job released as failed with :class:`TimeLimitExceeded`
      (retried, or a dead letter); what the abandoned thread does later is ignored.
      ``job.check()`` raises in that thread, for a handler that looks.  A thread
      stuck in C code keeps running: ``fdbrecipes worker --processes N`` kills such
      a process (see docs/workers.md).
    * Operators: the worker keeps a record (:meth:`fdbrecipes.Queue.workers`),
      refreshed at each heartbeat, and watches a key of its own: ``command(...,
      "quiet")`` stops its claims, ``"stop"`` drains it as SIGTERM does, and
      ``cancel(id)`` of a job it runs sets ``job.cancelled`` (an async handler's task
      is cancelled); the job then ends as cancelled, not retried.  With job records,
      it also prunes those whose ``history`` has passed.
    * Shutdown (:meth:`stop`, or SIGTERM/SIGINT when :meth:`run` runs in the main
      thread): stop fetching, give back claimed-but-unstarted items at once, wait up to
      ``shutdown_timeout`` for running handlers, then give back the leases still
      running (no delivery counted: another worker starts them now, not after the
      lease) and return.  A second signal (or :meth:`stop` again) skips the wait.

    Args:
        db: the ``fdb.Database`` (or Tenant) to work on.
        queue: a Queue, PriorityQueue or FairQueue, sync or async (or any structure
            whose ``ops`` is :class:`fdbrecipes.protocol.Workable`); ``end``: which
            end of a PriorityQueue it claims from, ``"min"`` or ``"max"``.
            Or an app of tasks (:class:`fdbrecipes.tasks.App`), without
            ``handler``: the worker serves every structure of the app (those
            ``queues`` names), one worker each with these options, side by side,
            and runs each job's task (see docs/tasks.md); ``id`` is the first's.
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
            :class:`WorkerStopping` (from the worker's event loop thread; exceptions it
            raises are logged and ignored).
        schedules: periodic jobs this worker enqueues (see
            :class:`fdbrecipes.Schedule`).
        schedule_store: a :class:`fdbrecipes.Schedules` (or ``AsyncSchedules``) whose
            schedules this worker fires, with the others carrying it: each slot
            exactly once, leaderless (see :class:`fdbrecipes.Schedules`).  It fires
            those whose target it knows (this queue, its ``schedules``' queues, the
            store's ``targets``), and writes its ``schedules`` given by ``every`` or
            ``cron`` into the store when it starts (``Schedules.upsert``), to be
            fired from there.  A worker of an app serving several queues fires its
            ``schedules`` and the store's from one of them (the first), which knows
            every queue it serves as a target: each schedule is read and fired once
            per worker, not once per queue.
        time_limit: seconds a handler may run on one job (None: no limit); a job
            pushed with a ``time_limit`` of its own has that one.
        name: what its record says it serves (default: the structure's repr).
        prefetch: jobs the worker may hold claimed beyond its free slots, waiting for
            one (None: 16 times ``concurrency``, at most 1,000; 0: it claims for free
            slots only).  It claims
            ahead only while its jobs are short: as many as would wait about 0.1 s
            at most for a slot, judged by how long its recent handlers took, and
            none when ``time_limit`` is set.  Jobs claimed ahead are held under
            leases the heartbeat extends, and given back at once when it stops.
        queues: with an app, the names of the queues to serve (default: all).

    :meth:`run` runs an event loop of its own in the calling thread (which must not be
    running one).  Usable as a context manager (for tests): ``with Worker(...) as w:``
    runs it in a thread, and leaving the block stops it (gracefully) and waits for it.

    Raises:
        TypeError or ValueError: a bad argument (an ``async def`` handler needs
            :class:`fdbrecipes.aio.AsyncWorker`).
    """

    def __init__(self, db: Any, queue: Any, handler: Optional[Callable[[Job], Any]] = None, *,
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
            schedule_store=schedule_store), True, queues)
        self._core = self._cores[0]
        self._thread: Optional[threading.Thread] = None

    def __repr__(self) -> str:
        return f"Worker({self._core.queue!r}, concurrency={self._core.concurrency})"

    @property
    def id(self) -> str:
        """The worker's id (``host-pid-xxxx``), as :meth:`fdbrecipes.Queue.workers`
        lists it and ``command`` takes it."""
        return self._core.id

    def run(self, *, burst: bool = False) -> None:
        """Work until stopped (:meth:`stop`, SIGTERM, SIGINT); then drain and return.

        ``burst=True``: also stop once a fetch finds nothing to claim while the worker
        holds no job (none running, none being settled): items delayed into the
        future, retries included, stay queued, and so do items of a FairQueue's groups
        at their limits because of other consumers' leases.  A drain for scripts,
        cron jobs and examples.
        """
        asyncio.run(run_all(self._cores, burst))

    def stop(self) -> None:
        """Stop (from any thread): the first call drains gracefully, a second one
        skips the wait for running handlers."""
        for core in self._cores:
            core.stop()

    def __enter__(self) -> Worker:
        self._thread = threading.Thread(target=self.run, name="fdbrecipes-worker", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.stop()
        assert self._thread is not None
        self._thread.join()
