"""How a worker gets its jobs (:class:`Fetching`): claims, the waits between them,
its schedules' pushes, and the start of each job claimed on a free slot.

One ``finish_and_claim`` claims for all free slots and the jobs held ahead (see
:mod:`.ahead`) and carries the acks waiting, in one transaction (relaxed order: see
:func:`.ahead.claim_spread`); when nothing is visible, the worker waits on the
structure's watch: no busy polling.  While handlers run, a claim waits a moment for
more slots to free (:meth:`Fetching.gather`).  With job records, the claim also
reads each job's own time limit and whether a cancel is pending.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any, Awaitable, Callable, List, Optional, Sequence

from .._drivers.awaiting import drive
from .._ordered.leases import Lease
from ..jobs import Job, JobCancelled
from ..protocol import Claimed, Workable
from ..schedule import Schedule
from .ahead import Ahead, claim_spread
from .holding import Holding, finishing
from .options import WorkerOptions
from .running import IDLE_WAIT, Running, idle_seconds
from .stopping import Stops

__all__ = ["FETCH_BACKOFF", "GATHER_MAX", "Fetching"]

log = logging.getLogger("fdbrecipes.worker")

#: Seconds to wait after a failed fetch before trying again.
FETCH_BACKOFF = 1.0
#: Seconds a fetch waits at most for more slots to free before it claims (see
#: :meth:`Fetching.gather`).
GATHER_MAX = 0.01


class Fetching:
    """The claims of the worker holding ``held``, on ``ops`` of ``db``.

    Args:
        held: the jobs the worker holds (the worker itself).
        options: its options (``concurrency``, ``lease_seconds``, ``end``, its time
            limit).
        schedules: the schedules it pushes itself (see :meth:`push_schedules`).
        stops: its stops (no claim once one was asked).
        work: runs one job, started on a free slot, to its end.
        ack_alone: acks each of a batch of jobs alone (their claim failed).
        holder: the worker's id, for the jobs' records.

    Attributes:
        claiming: a claim is about to go, or in flight.
        idling: waiting for work on the structure's watch.
    """

    def __init__(self, held: Holding, ops: Workable[Any], db: Any, options: WorkerOptions,
                 schedules: Sequence[Schedule], stops: Stops,
                 work: Callable[[Running], Awaitable[None]],
                 ack_alone: Callable[[List[Running]], Awaitable[None]], holder: str) -> None:
        self.held = held
        self.ops = ops
        self.db = db
        self.options = options
        self.schedules = list(schedules)
        self.stops = stops
        self.work = work
        self.ack_alone = ack_alone
        self.holder = holder
        self.ahead = Ahead(options.concurrency, options.prefetch,
                           options.time_limit is not None)
        self.next_push = 0.0 if self.schedules else math.inf  # time.time() of the next push
        self.claim_seconds = 0.0  # how long the last claim took
        self.claiming = False
        self.idling = False

    async def fetch(self, burst: bool) -> None:
        """Claim work for free slots until stopped (``burst``: or until a claim finds
        nothing while the worker holds nothing, running or being settled); wait on the
        watch when there is none."""
        held = self.held
        while not self.stops.stopping.is_set():
            try:
                await self.push_schedules()
                if self.wanted() <= 0 or held.presence.state != "running":
                    await held.changed_or(IDLE_WAIT)
                    continue
                claimed = await self.claim()
                if self.stops.stopping.is_set():
                    await held.give_back([Running(job) for job in self.jobs_of(claimed)],
                                         report=False)
                    return
                self.hold(claimed)
                if not claimed.leases:
                    # nothing held, running or settling (what this claim acked was held
                    # until it committed: a retry it may have been racing is awaited)
                    if burst and not held.running and not claimed.acked:
                        return
                    await self.idle()
            except Exception:
                log.exception("fetching failed; trying again in %s s", FETCH_BACKOFF)
                await held.changed_or(FETCH_BACKOFF)

    async def claim(self) -> Claimed:
        """Claim what :meth:`wanted` says (first, while handlers run, waiting a moment
        for more slots: :meth:`gather`), in one transaction with the acks waiting (at
        most :data:`.holding.SETTLE_BYTES` of results): what it acked and claimed.  A
        supervisor is told what it claimed."""
        held = self.held
        self.claiming = True
        if not held.waiting:
            await self.gather()
        began = time.monotonic()
        acks = held.next_acks()
        n = self.wanted()
        options = self.options
        try:
            claimed = await drive(self.ops.finish_and_claim(
                self.db, finishing(acks), n, options.lease_seconds,
                spread=claim_spread(n, options.concurrency, options.end), end=options.end,
                holder=self.holder))
        except Exception as e:
            self.claimed()
            if acks:
                log.warning("acking %d jobs with a claim failed (%s: %r); each is acked "
                            "alone now", len(acks), type(e).__name__, str(e))
                await self.ack_alone(acks)
            raise
        finally:
            self.claimed()
        self.claim_seconds = time.monotonic() - began
        held.acked(acks, claimed.acked)
        if held.tell is not None and claimed.leases:
            held.tell.held(claimed.leases)
        return claimed

    def claimed(self) -> None:
        """The claim returned (or failed): what waits for it may go on."""
        self.claiming = False
        self.held.notify()

    def wanted(self) -> int:
        """How many jobs to claim now: for the free slots and the jobs to hold ahead
        (see :mod:`.ahead`), once those waiting fell to half of these; 0: none now."""
        ahead = self.ahead.jobs()
        waiting = len(self.held.waiting)
        if waiting > ahead // 2:
            return 0
        return max(0, self.options.concurrency - self.held.busy() + ahead - waiting)

    async def gather(self) -> None:
        """While handlers run, wait up to one claim's duration (at most
        :data:`GATHER_MAX`) for their slots to free: slots that free meanwhile are
        claimed in the same transaction rather than one each, which halves the
        transactions per job when handlers are short, and delays a long handler's
        successor by less than the claim itself takes."""
        deadline = time.monotonic() + min(self.claim_seconds, GATHER_MAX)
        while self.held.busy():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await self.held.changed_or(left)

    def jobs_of(self, claimed: Claimed) -> List[Job]:
        """The jobs of the leases ``claimed``, each with its time limit (its own,
        which the claim read from its record, or the worker's), stopped if a cancel is
        pending."""
        return [job_of(lease, self.options.time_limit) for lease in claimed.leases]

    def hold(self, claimed: Claimed) -> None:
        """Hold the jobs ``claimed``, waiting for a slot, and start those the free
        slots take."""
        runs = [Running(job) for job in self.jobs_of(claimed)]
        for running in runs:
            self.held.running[running.lease.token] = running
        self.held.waiting.extend(runs)
        self.start_waiting()

    def freed(self, running: Running) -> None:
        """The handler of ``running`` returned (or was abandoned): unless the job was
        given back, its time is measured (see :mod:`.ahead`) and the slot it freed
        starts the next job waiting; what waits for a free slot is woken."""
        if not running.given_back:
            self.ahead.ran(running.seconds())
            self.start_waiting()
        self.held.notify()

    async def idle(self) -> None:
        """Wait on the structure's watch until an item is visible, a schedule is due,
        or the worker stops."""
        waiting = asyncio.ensure_future(drive(self.ops.wait(self.db,
                                                            idle_seconds(self.next_push))))
        stopping = asyncio.ensure_future(self.stops.stopping.wait())
        self.idling = True
        self.held.notify()  # the acks waiting for a claim go on their own
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
        held = self.held
        if self.stops.stopping.is_set() or not held.waiting:
            return
        free = self.options.concurrency - held.busy()
        starting = [held.waiting.popleft() for _ in range(min(free, len(held.waiting)))]
        if not starting:
            return
        now = time.time()
        for running in starting:
            running.began_at = now
        if held.tell is not None:
            held.tell.started([(r.lease.token, now, r.job.time_limit) for r in starting])
        for running in starting:
            running.slot = True
            held.slots += 1
            running.task = asyncio.ensure_future(self.work(running))


def job_of(lease: Lease[Any], time_limit: Optional[float]) -> Job:
    """The job of ``lease``, with its own time limit (read by its claim) or else
    ``time_limit``; stopped if a cancel is pending."""
    job = Job.of(lease, lease.time_limit if lease.time_limit is not None else time_limit)
    if lease.cancel_requested:
        job.stop(JobCancelled(f"job {lease.id!r} was cancelled"))
    return job
