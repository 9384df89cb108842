"""What a worker serves: one structure with a handler, or an app's structures.

``Worker(db, queue, handler)`` runs one :class:`.core.WorkerCore`; ``Worker(db, app)``
(an app of tasks, :class:`fdbrecipes.protocol.Servable`) runs one per structure of
the app, side by side on one event loop, each with the app's handler and the same
options, but for the schedules: the first carries them, code-defined and stored, and
fires them to any of the app's structures (:func:`cores`); SIGTERM and SIGINT stop
them all (:func:`run_all`).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, List, Optional

from ..protocol import Servable
from .core import WorkerCore
from .holding import Tell
from .options import WorkerOptions
from .presence import stop_on_signals

__all__ = ["cores", "run_all"]


def cores(db: Any, queue: Any, handler: Any, options: WorkerOptions, threaded: bool,
          queues: Optional[List[str]] = None, tell: Optional[Tell] = None) -> List[WorkerCore]:
    """The worker cores serving ``queue`` with ``handler``, or, if ``queue`` is an
    app (and ``handler`` None), every structure of the app (those ``queues`` names)
    with its handler; all with ``options`` and ``tell`` (see :class:`.core.WorkerCore`),
    but with an app only the first core gets ``schedules`` and ``schedule_store``.

    Raises:
        TypeError or ValueError: a bad argument (as :class:`fdbrecipes.Worker` says).
    """
    if isinstance(queue, Servable):
        if handler is not None:
            raise TypeError("a worker of an app takes no handler: the app runs each job")
        served = queue.served(queues)
        app_handler = queue.handler(not threaded)
        # One core carries the schedules (knowing every served structure as a target),
        # so they are read and fired once per worker, not once per structure.
        first = WorkerCore(db, served[0], app_handler, options, threaded=threaded, tell=tell,
                           beside=served[1:])
        rest = replace(options, schedules=(), schedule_store=None)
        made = [first, *(WorkerCore(db, structure, app_handler, rest, threaded=threaded,
                                    tell=tell) for structure in served[1:])]
        for core in made:
            core.judge = queue.judge
        return made
    if handler is None:
        raise TypeError("handler is missing (a worker of a structure needs one; give an "
                        "app of tasks instead of a structure to run its tasks)")
    if queues is not None:
        raise TypeError("queues= names the structures of an app")
    return [WorkerCore(db, queue, handler, options, threaded=threaded, tell=tell)]


async def run_all(workers: List[WorkerCore], burst: bool) -> None:
    """Run ``workers`` side by side until each stops; a signal (in the main thread)
    stops them all."""
    if len(workers) == 1:
        await workers[0].run(burst)
        return

    def stop() -> None:
        for worker in workers:
            worker.stop()

    for worker in workers:
        worker.signals = False
    restore = stop_on_signals(stop)
    try:
        await asyncio.gather(*(worker.run(burst) for worker in workers))
    finally:
        restore()
