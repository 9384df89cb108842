"""A worker as operators see it: its record, what they ask of it, and its housekeeping.

* Its record (:mod:`fdbrecipes._records.registry`): written when it starts and at each
  heartbeat (with the progress its handlers reported since the last one, and its
  bucket of the structure's throughput history), cleared when it stops, after a last
  beat if it finished jobs since the one before (a burst run that drains in less
  than a heartbeat is counted too); a worker that misses
  :data:`fdbrecipes._records.registry.MISSED_BEATS` beats counts as gone.
* What operators ask (``command``: quiet, stop; ``cancel`` of a job it runs): a task
  waits on a watch of the worker's own key and hands each order to the worker.
* Pruning: with job records, a task forgets the finished records whose time is up,
  every :data:`PRUNE_EVERY` seconds, in bounded transactions (see ``Queue.prune``).
* Signals: SIGTERM and SIGINT stop a worker whose loop runs in the main thread
  (:func:`stop_on_signals`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .._drivers.awaiting import drive
from .._records.records import Progress
from .._records.registry import MISSED_BEATS, Orders, RunningJob, WorkerInfo
from ..jobs import Job
from ..protocol import Workable

__all__ = ["PRUNE_EVERY", "Presence", "stop_on_signals", "worker_id"]

log = logging.getLogger("fdbrecipes.worker")

#: Seconds between two prunings of a worker's structure's finished job records.
PRUNE_EVERY = 60.0
#: Seconds a wait for orders lasts before it is set again (a wait, not a poll: an
#: order wakes it at once).
ORDERS_WAIT = 30.0
#: Seconds to wait after a failed look for orders or a failed pruning.
RETRY_AFTER = 1.0


def worker_id() -> str:
    """A new worker's id: ``host-pid-xxxx`` (four random hex digits)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


class Presence:
    """One worker's record, orders and housekeeping (see the module docstring).

    Attributes:
        id: the worker's id.
        state: ``running``, ``quiet`` or ``stopping``, as its record says.
        processed, failed: jobs it finished, and those of them that failed.
    """

    def __init__(self, ops: Workable[Any], db: Any, label: str, interval: float) -> None:
        self.ops = ops
        self.db = db
        self.label = label
        self.interval = interval
        self.id = worker_id()
        self.started_at = time.time()
        self.state = "running"
        self.processed = 0
        self.failed = 0
        self.beaten = (0, 0)  # processed and failed, as the last beat wrote them
        self.reported: Dict[int, Progress] = {}  # by id(job): the progress last written

    def info(self, jobs: Iterable[Tuple[Job, float]]) -> WorkerInfo:
        """The worker's record now (``jobs``: those it runs, with when each began)."""
        now = time.time()
        running = tuple(RunningJob(job.id, job.lease.token, getattr(job.lease, "group", None),
                                   began, job.time_limit) for job, began in jobs)
        return WorkerInfo(self.id, socket.gethostname(), os.getpid(), self.label,
                          self.started_at, now, now + MISSED_BEATS * self.interval + 1.0,
                          self.state, self.processed, self.failed, running)

    async def beat(self, jobs: List[Tuple[Job, float]]) -> None:
        """Write the worker's record, and the progress of its jobs that changed since
        the last beat (a structure with job records)."""
        info = self.info(jobs)
        await drive(self.ops.beat(self.db, info))
        self.beaten = (info.processed, info.failed)
        if self.ops.history is None:
            return
        reports: List[Tuple[Any, Progress]] = []
        for job, _ in jobs:
            progress = job.reported()[0]
            if progress is not None and self.reported.get(id(job)) != progress:
                reports.append((job.lease, progress))
                self.reported[id(job)] = progress
        if reports:
            await drive(self.ops.report(self.db, reports))

    def forget(self, job: Job) -> None:
        """``job`` ended: its progress goes with its ack."""
        self.reported.pop(id(job), None)

    async def leave(self) -> None:
        """Clear the worker's record: it stopped.  First, if it finished jobs since its
        last beat, a last beat writes them to the throughput history."""
        try:
            if (self.processed, self.failed) != self.beaten:
                await self.beat([])
        except Exception:
            log.exception("writing worker %s's last counts failed", self.id)
        try:
            await drive(self.ops.leave(self.db, self.id))
        except Exception:
            log.exception("clearing worker %s's record failed; it goes when its time is up",
                          self.id)

    async def listen(self, apply: Callable[[Orders], None]) -> None:
        """Hand each order operators give this worker to ``apply``, until cancelled."""
        while True:
            try:
                orders = await drive(self.ops.orders(self.db, self.id, ORDERS_WAIT))
            except Exception:
                log.exception("looking for orders failed; trying again in %s s", RETRY_AFTER)
                await asyncio.sleep(RETRY_AFTER)
                continue
            if orders.command is not None or orders.cancels:
                apply(orders)

    async def prune(self) -> None:
        """Forget the finished job records whose time is up, every
        :data:`PRUNE_EVERY` seconds, until cancelled (nothing without records)."""
        if self.ops.history is None:
            return
        while True:
            try:
                pruned = await drive(self.ops.prune(self.db, None))
                if pruned:
                    log.debug("worker %s pruned %d job records", self.id, pruned)
            except Exception:
                log.exception("pruning job records failed; trying again later")
            await asyncio.sleep(PRUNE_EVERY)

    def count(self, failed: bool) -> None:
        """One more job finished (``failed``: it failed)."""
        self.processed += 1
        self.failed += failed

    def quiet(self, why: Optional[str] = None) -> None:
        """The worker takes no more jobs."""
        if self.state == "running":
            self.state = "quiet"
            log.info("worker %s is quiet%s: it takes no more jobs", self.id,
                     f" ({why})" if why else "")


def stop_on_signals(stop: Callable[[], None]) -> Callable[[], None]:
    """Make SIGTERM and SIGINT call ``stop`` (in the running loop), when that loop runs
    in the main thread; the function that takes the handlers away again."""
    if threading.current_thread() is not threading.main_thread():
        return nothing
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)
    try:
        for sig in signals:
            loop.add_signal_handler(sig, stop)
    except (NotImplementedError, RuntimeError):  # not a Unix loop
        return nothing

    def restore() -> None:
        for sig in signals:
            loop.remove_signal_handler(sig)
    return restore


def nothing() -> None:
    """What takes away the signal handlers of a worker that installed none."""
