"""The jobs a worker holds, and the waits on them: the base of :class:`.core.WorkerCore`.

A worker holds a job from its claim to its end (:class:`.running.Running`, by lease
token): waiting for a slot (claimed ahead, see :mod:`.ahead`), running on one of the
slots, or finished and waiting for its ack (see :meth:`Holding.next_acks`, which
the acks of one transaction take).  A job ends once (:meth:`Holding.finish`): it is
forgotten, counted in the worker's record and reported (``JobFinished``).  Whatever
changes what a worker waits for (a job ends, a slot frees, a stop) wakes its waits
(:meth:`Holding.notify`, :meth:`Holding.changed_or`).  A heartbeat keeps the leases
of the jobs held alive (:meth:`Holding.beat`); a stopping worker gives back what it
holds (:meth:`Holding.give_back`).

A worker process under a supervisor (``fdbrecipes worker --processes``) also tells
it what it holds, as that changes (:class:`Tell`): so the supervisor knows each
process's jobs without its heartbeats, which a handler holding the GIL stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Deque, Dict, List, Optional, Protocol, Sequence, Tuple

from .._drivers.awaiting import drive
from .._ordered.leases import Lease
from .._records.history import Finished
from .._records.records import SUCCEEDED
from .._workflow.steps import is_expander
from ..jobs import (
    CANCELLED,
    DEAD,
    DISCARD,
    LEASE_LOST,
    OK,
    RETRY,
    SNOOZE,
    EventSink,
    JobFinished,
)
from .presence import Presence
from .running import Running, emit, named

__all__ = ["ALIVE_EVERY", "FAILURES", "SETTLE_BYTES", "Holding", "Tell", "finishing"]

log = logging.getLogger("fdbrecipes.worker")

#: Bytes of results one settling transaction carries at most (the rest goes in the
#: next one): well under FoundationDB's 10 MB.
SETTLE_BYTES = 4_000_000
#: The outcomes that count as failures in a worker's record.
FAILURES = frozenset((RETRY, DEAD, DISCARD, LEASE_LOST))
#: Seconds between two words of a worker to its supervisor that its loop runs.
ALIVE_EVERY = 1.0


class Tell(Protocol):
    """Who learns, as it happens, what a worker holds (its supervisor, see
    :mod:`fdbrecipes.admin.pipe`).  Called in the worker's loop: :meth:`held` and
    :meth:`started` before they return (a job's handler begins only once its start
    was told), :meth:`returned` and :meth:`ended` at the next :meth:`flush`, which
    the worker calls in the same turn of its loop."""

    def hello(self, worker: str) -> None:
        """The worker ``worker`` (its id) runs."""

    def held(self, leases: Sequence[Lease[Any]]) -> None:
        """The worker claimed these jobs (they may wait for a slot)."""

    def started(self, jobs: Sequence[Tuple[bytes, float, Optional[float]]]) -> None:
        """Handlers begin now: each job's lease token, when (wall-clock seconds) and
        its time limit (seconds, or None)."""

    def returned(self, token: bytes) -> None:
        """The handler of the job of lease ``token`` returned (or was abandoned)."""

    def ended(self, token: bytes) -> None:
        """The worker holds the job of lease ``token`` no more (settled, given back,
        or its lease lost)."""

    def alive(self) -> None:
        """The worker's loop runs (told every second or so)."""

    def flush(self) -> None:
        """Tell what waits to be told."""


class Holding:
    """The jobs a worker holds (see the module docstring), under leases of
    ``lease_seconds``.

    Attributes:
        running: every job held, by lease token.
        waiting: the jobs claimed ahead, not started, in the order claimed.
        acks: the jobs finished, waiting for their ack.
        slots: the jobs holding a slot (see :meth:`busy`).
    """

    def __init__(self, presence: Presence, on_event: Optional[EventSink],
                 tell: Optional[Tell], lease_seconds: float) -> None:
        self.presence = presence
        self.lease_seconds = lease_seconds
        self.on_event = on_event
        self.tell = tell
        self.telling = False  # a flush of what was told is due in this turn of the loop
        self.running: Dict[bytes, Running] = {}
        self.waiting: Deque[Running] = deque()
        self.acks: List[Running] = []
        self.slots = 0
        self.watchers: List[asyncio.Future[None]] = []  # waiting in changed_or

    def notify(self) -> None:
        """Something changed (a job ended, a stop): wake what waits for it."""
        watchers, self.watchers = self.watchers, []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_result(None)

    async def changed_or(self, seconds: float) -> None:
        """Wait until something changes or ``seconds`` pass (a future of its own,
        resolved by :meth:`notify` or a timer: no task made per wait)."""
        loop = asyncio.get_running_loop()
        watcher: asyncio.Future[None] = loop.create_future()
        self.watchers.append(watcher)
        timer = loop.call_later(seconds, resolve, watcher)
        try:
            await watcher
        finally:
            timer.cancel()
            if watcher in self.watchers:
                self.watchers.remove(watcher)

    def busy(self) -> int:
        """Jobs started whose handler has not returned, nor was given back: each
        holds a slot."""
        return self.slots

    def free_slot(self, running: Running) -> None:
        """``running`` no longer holds a slot (its handler returned, or it was given
        back)."""
        if running.slot:
            running.slot = False
            self.slots -= 1

    def returned(self, running: Running) -> None:
        """The job's handler returned (or was abandoned, or never began)."""
        if self.tell is not None:
            self.tell.returned(running.lease.token)
            self.flush_soon()

    def drop(self, running: Running) -> bool:
        """Hold the job no more; whether it was held."""
        if self.running.pop(running.lease.token, None) is None:
            return False
        if self.tell is not None:
            self.tell.ended(running.lease.token)
            self.flush_soon()
        return True

    def flush_soon(self) -> None:
        """Have what was told go out at the end of this turn of the loop: in one
        write, for all the jobs that returned or ended in it."""
        if not self.telling:
            self.telling = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self.telling = False
        if self.tell is not None:
            self.tell.flush()

    def finish(self, running: Running, outcome: str, error: Optional[BaseException]) -> None:
        """The job ended: forget it, and report it (once: a job given back at
        shutdown is reported then)."""
        if not self.drop(running):
            return
        if outcome == LEASE_LOST:
            log.warning("job %s: its lease expired before it was settled: it may run "
                        "again (a lease too short for the work, or a stalled process)",
                        named(running.job))
        elif outcome == CANCELLED:
            log.info("job %s cancelled", named(running.job))
        if outcome != SNOOZE:
            self.presence.count(outcome in FAILURES)
        self.presence.forget(running.job)
        self.notify()
        emit(self.on_event, JobFinished(running.job, outcome, running.seconds(), error))

    def next_acks(self) -> List[Running]:
        """The acks one transaction carries next (at most :data:`SETTLE_BYTES` of
        results), taken from those waiting; a workflow's expander alone (its ack
        counts down and pushes hundreds of nodes: several in one transaction would
        outlast its five seconds)."""
        size, n = 0, 0
        for running in self.acks:
            size += running.size()
            alone = is_expander(running.job.id)
            if n and (size > SETTLE_BYTES or alone):
                break
            n += 1
            if alone:
                break
        batch, self.acks = self.acks[:n], self.acks[n:]
        return batch

    def acked(self, batch: List[Running], acked: Sequence[bool]) -> None:
        """The acks of ``batch`` were committed (``acked``: whether each lease was still
        alive): the jobs ended."""
        for running, ok in zip(batch, acked):
            cancelled = running.finished is not None and running.finished.state != SUCCEEDED
            self.finish(running, LEASE_LOST if not ok else CANCELLED if cancelled else OK,
                        running.job.stopped if cancelled else None)

    # -- heartbeat ---------------------------------------------------------------------

    async def tell_alive(self, tell: Tell) -> None:
        """Tell the supervisor every :data:`ALIVE_EVERY` seconds that the loop runs (a
        handler holding the GIL, or blocking the loop, stops these), until cancelled."""
        while True:
            tell.alive()
            await asyncio.sleep(ALIVE_EVERY)

    async def beat(self) -> None:
        """Every third of a lease: extend every lease held, in one transaction; then
        write the worker's record (first when it starts)."""
        while True:
            held = [r for r in self.running.values() if not r.lost and not r.given_back]
            if held:
                try:
                    renewed = await drive(self.presence.ops.extend_many(
                        self.presence.db, [r.lease for r in held], self.lease_seconds))
                except Exception:
                    log.exception("a heartbeat failed; trying again at the next one")
                    renewed = [r.lease for r in held]
                for running, lease in zip(held, renewed):
                    if lease is None:
                        running.lost = True
                    else:
                        running.lease = lease
            await self.write_record()
            await asyncio.sleep(self.lease_seconds / 3)

    async def write_record(self) -> None:
        """Write the worker's record, with the jobs it runs (see :mod:`.presence`)."""
        try:
            await self.presence.beat([(r.job, r.began_at) for r in self.running.values()
                                      if r.began_at and not r.handled and not r.given_back])
        except Exception:
            log.exception("writing worker %s's record failed; trying again at the next "
                          "heartbeat", self.presence.id)

    # -- giving back ------------------------------------------------------------------

    async def give_back(self, jobs: List[Running], report: bool = True) -> None:
        """Release ``jobs`` with no delivery counted (an async handler still running is
        cancelled, a sync one abandoned); report those whose handler started as
        snoozed."""
        for running in jobs:  # all marked before the first release waits
            running.given_back = True
            self.free_slot(running)
            if running.task is not None and not running.task.done():
                running.task.cancel()
        for running in jobs:
            try:
                await drive(self.presence.ops.release(self.presence.db, running.lease,
                                                      None, False))
            except Exception:
                log.exception("giving back job %s failed; its lease will expire",
                              named(running.job))
            if report:
                self.finish(running, SNOOZE, None)
            else:
                self.drop(running)


def resolve(watcher: asyncio.Future[None]) -> None:
    """End a wait of :meth:`WorkerCore.changed_or` (unless it ended)."""
    if not watcher.done():
        watcher.set_result(None)


def finishing(batch: List[Running]) -> List[Finished]:
    """What the acks of ``batch`` carry."""
    return [r.finished for r in batch if r.finished is not None]
