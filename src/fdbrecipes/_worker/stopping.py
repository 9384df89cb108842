"""How a worker stops: asked to (:class:`Stops`), then drained (:func:`drain`).

A stop may be asked from any thread, before the worker runs or while it does: the
worker's event loop then hears it in its own thread (:meth:`Stops.ask`).  The first
stop drains gracefully; a second one hurries the drain (no wait for running
handlers).  The drain gives back what did not start, waits for the handlers up to
``shutdown_timeout``, gives back what still runs (no delivery counted: another worker
starts them now, not after the lease) and waits for the jobs being settled.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, List, Optional

from ..jobs import WorkerStopping
from .holding import Holding
from .running import Running, emit

__all__ = ["Stops", "drain"]

#: Seconds a drain waits at most between two looks at the handlers still running.
DRAIN_LOOK = 0.1


class Stops:
    """The stops asked of one worker, from any thread.

    Attributes:
        stopping: set once a stop was asked (made by :meth:`begin`, on the worker's
            event loop).
        hurry: set once a second stop was asked: the drain waits for no handler.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()  # guards event_loop, thread and asked
        self.event_loop: Optional[asyncio.AbstractEventLoop] = None  # while it runs
        self.thread = 0  # the ident of the event loop's thread, while it runs
        self.asked = 0  # stops asked before it runs
        self.stopping: asyncio.Event
        self.hurry: asyncio.Event

    def begin(self, request: Callable[[], None]) -> None:
        """The worker runs, on the running event loop: stops asked from now on go to
        ``request`` (in the event loop's thread), and so do those asked before."""
        self.stopping, self.hurry = asyncio.Event(), asyncio.Event()
        with self.lock:
            self.event_loop, self.thread = asyncio.get_running_loop(), threading.get_ident()
            asked, self.asked = self.asked, 0
        for _ in range(asked):
            request()

    def end(self) -> None:
        """The worker stopped: stops asked from now on wait for its next run."""
        with self.lock:
            self.event_loop = None

    def ask(self, request: Callable[[], None]) -> None:
        """A stop, from any thread: ``request`` in the event loop's thread while the
        worker runs, else counted for its next run."""
        with self.lock:
            event_loop, thread = self.event_loop, self.thread
            if event_loop is None:
                self.asked += 1
                return
        if threading.get_ident() == thread:
            request()
        else:
            event_loop.call_soon_threadsafe(request)

    def heard(self) -> bool:
        """A stop, heard in the event loop's thread: whether it is the first (the
        second one hurries the drain)."""
        first = not self.stopping.is_set()
        if not first:
            self.hurry.set()
        self.stopping.set()
        return first


async def drain(held: Holding, shutdown_timeout: float, hurry: asyncio.Event) -> None:
    """Give back what did not start, wait for the handlers (up to
    ``shutdown_timeout``, unless ``hurry`` is set), give back what still runs, and
    wait for the jobs being settled."""
    held.waiting.clear()  # held in held.running: given back below
    unstarted = [r for r in held.running.values()
                 if not r.started or (r.future is not None and r.future.cancel())]
    emit(held.on_event, WorkerStopping(len(running(held, unstarted))))
    await held.give_back(unstarted, report=False)
    deadline = time.monotonic() + shutdown_timeout
    while held.busy() and not hurry.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            break
        await held.changed_or(min(left, DRAIN_LOOK))
    await held.give_back(running(held, []))
    settling = {r.task for r in held.running.values() if r.task is not None}
    if settling:
        await asyncio.wait(settling)


def running(held: Holding, but: List[Running]) -> List[Running]:
    """The jobs of ``held`` whose handler has not returned nor was given back (a job
    not started counts), but those of ``but``."""
    given = {id(r) for r in but}
    return [r for r in held.running.values()
            if not r.handled and not r.given_back and id(r) not in given]
