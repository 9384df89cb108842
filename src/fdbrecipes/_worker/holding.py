"""The jobs a worker holds, and the waits on them: the base of :class:`.core.WorkerCore`.

A worker holds a job from its claim to its end (:class:`.running.Running`, by lease
token): waiting for a slot (claimed ahead, see :mod:`.ahead`), running on one of the
slots, or finished and waiting for its ack (see :meth:`Holding.next_acks`, which
the acks of one transaction take).  A job ends once (:meth:`Holding.finish`): it is
forgotten, counted in the worker's record and reported (``JobFinished``).  Whatever
changes what a worker waits for (a job ends, a slot frees, a stop) wakes its waits
(:meth:`Holding.notify`, :meth:`Holding.changed_or`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Deque, Dict, List, Optional, Sequence

from .._ordered.history import Finished
from .._ordered.records import SUCCEEDED
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

__all__ = ["FAILURES", "SETTLE_BYTES", "Holding", "finishing"]

log = logging.getLogger("fdbrecipes.worker")

#: Bytes of results one settling transaction carries at most (the rest goes in the
#: next one): well under FoundationDB's 10 MB.
SETTLE_BYTES = 4_000_000
#: The outcomes that count as failures in a worker's record.
FAILURES = frozenset((RETRY, DEAD, DISCARD, LEASE_LOST))


class Holding:
    """The jobs a worker holds (see the module docstring).

    Attributes:
        running: every job held, by lease token.
        waiting: the jobs claimed ahead, not started, in the order claimed.
        acks: the jobs finished, waiting for their ack.
        slots: the jobs holding a slot (see :meth:`busy`).
    """

    def __init__(self, presence: Presence, on_event: Optional[EventSink]) -> None:
        self.presence = presence
        self.on_event = on_event
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

    def finish(self, running: Running, outcome: str, error: Optional[BaseException]) -> None:
        """The job ended: forget it, and report it (once: a job given back at
        shutdown is reported then)."""
        if self.running.pop(running.lease.token, None) is None:
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
        results), taken from those waiting."""
        size, n = 0, 0
        for running in self.acks:
            size += running.size()
            if n and size > SETTLE_BYTES:
                break
            n += 1
        batch, self.acks = self.acks[:n], self.acks[n:]
        return batch

    def acked(self, batch: List[Running], acked: Sequence[bool]) -> None:
        """The acks of ``batch`` were committed (``acked``: whether each lease was still
        alive): the jobs ended."""
        for running, ok in zip(batch, acked):
            cancelled = running.finished is not None and running.finished.state != SUCCEEDED
            self.finish(running, LEASE_LOST if not ok else CANCELLED if cancelled else OK,
                        running.job.stopped if cancelled else None)


def resolve(watcher: asyncio.Future[None]) -> None:
    """End a wait of :meth:`WorkerCore.changed_or` (unless it ended)."""
    if not watcher.done():
        watcher.set_result(None)


def finishing(batch: List[Running]) -> List[Finished]:
    """What the acks of ``batch`` carry."""
    return [r.finished for r in batch if r.finished is not None]
