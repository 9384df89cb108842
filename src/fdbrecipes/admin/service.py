"""The long-running commands: ``fdbrecipes worker`` and ``fdbrecipes metrics``.

Usage::

    fdbrecipes worker app.jobs:handle --directory app/jobs --kind queue --concurrency 16
    fdbrecipes metrics --directory app/jobs --kind queue --port 9100

``worker`` imports ``module:function`` (the current directory is on the import path)
and runs a :class:`fdbrecipes.Worker` on the structure (an
:class:`fdbrecipes.aio.AsyncWorker` for an ``async def`` function) until SIGTERM or
SIGINT; ``metrics`` serves the structure's gauges for Prometheus (extra
``prometheus``) until then.  They name the structure and the cluster as the operator
commands do (see :mod:`fdbrecipes.admin`), and are :class:`.commands.Operation` rows,
so they check, connect and report failures the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import os
import signal
import sys
import threading
from typing import Any, Callable

from .arguments import place_arguments, positive_int, seconds
from .commands import Operation, Report, Target
from .places import UsageError

__all__ = ["METRICS", "WORKER", "load_handler"]


def worker_arguments(parser: argparse.ArgumentParser) -> None:
    """``worker``'s options."""
    place_arguments(parser, "Run a Worker: call MODULE:FUNCTION on every job of a queue "
                    "or priority-queue (an async def function runs on an event loop), "
                    "until SIGTERM or SIGINT (a second one skips the wait for running "
                    "jobs).  Writes: claims, acks, releases.")
    parser.add_argument("handler", metavar="MODULE:FUNCTION",
                        help="the handler, e.g. app.jobs:handle (imported with the "
                        "current directory on the path)")
    parser.add_argument("--concurrency", type=positive_int, default=8, metavar="N",
                        help="jobs running at once (default 8)")
    parser.add_argument("--lease", type=seconds, default=30.0, metavar="SECONDS",
                        help="lease of each job, extended while it runs (default 30)")
    parser.add_argument("--shutdown-timeout", type=seconds, default=25.0, metavar="SECONDS",
                        help="seconds a stopping worker waits for running jobs (default 25)")
    parser.add_argument("--end", choices=("min", "max"),
                        help="priority-queue: claim the lowest (default) or highest priority")
    parser.add_argument("--burst", action="store_true",
                        help="stop once nothing is visible and no job runs")


def metrics_arguments(parser: argparse.ArgumentParser) -> None:
    """``metrics``' options."""
    place_arguments(parser, "Serve the structure's gauges for Prometheus "
                    "(fdbrecipes_queue_items, fdbrecipes_queue_oldest_item_age_seconds) "
                    "on http://ADDR:PORT/metrics until SIGTERM or SIGINT.  Run one per "
                    "cluster: the gauges are the database's, not one process's.  Reads "
                    "only; needs prometheus_client (pip install 'fdbrecipes[prometheus]').")
    parser.add_argument("--port", type=positive_int, default=9100, help="default 9100")
    parser.add_argument("--addr", default="0.0.0.0", help="address to listen on")
    parser.add_argument("--name", help="the queue label (default: the place's last part)")


def load_handler(text: str) -> Callable[..., Any]:
    """The function ``module:function`` names (the current directory on the path).

    Raises:
        UsageError: not of that form, or nothing callable there.
    """
    module_name, _, name = text.partition(":")
    if not module_name or not name:
        raise UsageError(f"{text!r}: give the handler as MODULE:FUNCTION, e.g. app.jobs:handle")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UsageError(f"cannot import {module_name}: {e}") from None
    found = getattr(module, name, None)
    if not callable(found):
        raise UsageError(f"{module_name} has no function {name}")
    handler: Callable[..., Any] = found
    return handler


def until_signalled() -> None:
    """Block until SIGTERM or SIGINT (in the main thread)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _signum, _frame: stop.set())
    while not stop.wait(1.0):
        pass


def label(target: Target, args: argparse.Namespace) -> str:
    """The ``queue`` label of the structure's samples."""
    if args.name:
        return str(args.name)
    place = target.place
    return place.directory[-1] if place.directory else repr(place.prefix)


def work(target: Target, args: argparse.Namespace) -> Report:
    """``worker``: run a Worker until signalled."""
    from ..aio import AsyncWorker
    from ..weight_tree import WeightTree
    from ..worker import Worker

    if isinstance(target.structure, WeightTree):
        raise UsageError("a worker needs a queue or priority-queue")
    if args.end is not None and target.kind != "priority-queue":
        raise UsageError("--end applies to --kind priority-queue only")
    handler = load_handler(args.handler)
    options = dict(concurrency=args.concurrency, lease_seconds=args.lease,
                   shutdown_timeout=args.shutdown_timeout, end=args.end or "min")
    if inspect.iscoroutinefunction(handler):
        asyncio.run(AsyncWorker(target.db, target.structure, handler, **options)
                    .run(burst=args.burst))
    else:
        Worker(target.db, target.structure, handler, **options).run(burst=args.burst)
    return Report({**target.header(), "stopped": True}, f"{target.title()}: worker stopped")


def serve_metrics(target: Target, args: argparse.Namespace) -> Report:
    """``metrics``: serve the gauges until signalled."""
    from ..prometheus import serve

    name = label(target, args)
    serve(target.db, {name: target.structure}, args.port, args.addr)
    print(f"serving metrics of {target.title()} on http://{args.addr}:{args.port}/metrics",
          file=sys.stderr, flush=True)
    until_signalled()
    return Report({**target.header(), "stopped": True}, f"{target.title()}: metrics stopped")


WORKER = Operation("worker", "run a Worker on a queue's jobs (MODULE:FUNCTION)",
                   worker_arguments, work)
METRICS = Operation("metrics", "serve a structure's gauges for Prometheus",
                    metrics_arguments, serve_metrics)
