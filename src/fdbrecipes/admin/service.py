"""The long-running commands: ``fdbrecipes worker`` and ``fdbrecipes metrics``.

Usage::

    fdbrecipes worker app.jobs:handle --directory app/jobs --concurrency 16
    fdbrecipes worker app.jobs:handle --directory app/jobs --processes 4 --time-limit 60
    fdbrecipes metrics --directory app/jobs --kind queue --port 10095

``worker`` imports ``module:function`` (the current directory is on the import path)
and runs a :class:`fdbrecipes.Worker` on the structure (an
:class:`fdbrecipes.aio.AsyncWorker` for an ``async def`` function) until SIGTERM or
SIGINT, logging to stderr (a start line, each failure with its traceback, retries and
dead letters with their reasons); with ``--processes N`` it supervises N worker
processes (:mod:`.supervisor`).  On a place where nothing is stored yet it serves a
new queue (``--kind queue``).  Its ``--max-deliveries`` defaults to
:data:`WORKER_MAX_DELIVERIES`, so a failing job ends as a dead letter instead of being
retried forever.  ``metrics`` serves the structure's gauges for Prometheus (extra
``prometheus``) until then.  They name the structure and the cluster as the operator
commands do (see :mod:`fdbrecipes.admin`), and are :class:`.commands.Operation` rows,
so they check, connect and report failures the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import logging
import os
import signal
import sys
import threading
from typing import Any, Callable

from .. import _kinds
from ..protocol import Servable
from .arguments import Needs, non_negative_int, place_arguments, positive_int, seconds
from .commands import Operation, Report, Target, client_ready, read_only, say
from .logs import LOG_FORMATS, LOG_LEVELS, log_to_stderr
from .places import OperatorError, Place, UsageError

__all__ = ["METRICS", "METRICS_PORT", "WORKER", "WORKER_MAX_DELIVERIES", "load_handler"]

#: A CLI worker's ``--max-deliveries`` when none is given: a job failing this many
#: times is a dead letter (the library's default, None, retries forever).
WORKER_MAX_DELIVERIES = 5
#: ``metrics``' default port: outside the range Prometheus allocates to exporters
#: (9100-9999; 9100 is node_exporter's).
METRICS_PORT = 10095

log = logging.getLogger("fdbrecipes.worker")


def worker_arguments(parser: argparse.ArgumentParser) -> None:
    """``worker``'s options."""
    place_arguments(parser, "Run a Worker: call MODULE:FUNCTION on every job of a queue, "
                    "priority-queue or fair-queue (an async def function runs on an event "
                    "loop), until SIGTERM or SIGINT (a second one skips the wait for "
                    "running jobs).  An empty place is a new queue.  A job failing "
                    f"--max-deliveries times (default {WORKER_MAX_DELIVERIES} here) is a dead "
                    "letter, with the error as its reason.  MODULE:APP naming an app of "
                    "tasks (fdbrecipes.tasks.App) serves the app's structures and runs "
                    "their tasks: no --directory, --tuple, --kind or --history then.  Logs "
                    "to stderr.  Writes: claims, acks, releases, its own record.",
                    required=False)
    parser.set_defaults(max_deliveries=WORKER_MAX_DELIVERIES)
    parser.add_argument("handler", metavar="MODULE:FUNCTION",
                        help="the handler, e.g. app.jobs:handle, or an app of tasks, e.g. "
                        "myapp:app (imported with the current directory on the path)")
    parser.add_argument("--queue", action="append", metavar="NAME",
                        help="an app's queue to serve (repeat for several; default: all)")
    parser.add_argument("--concurrency", type=positive_int, default=8, metavar="N",
                        help="jobs running at once (default 8)")
    parser.add_argument("--prefetch", type=non_negative_int, metavar="N",
                        help="jobs claimed ahead of the free slots while jobs are short "
                        "(default: 16 x the concurrency, at most 1000; 0: none)")
    parser.add_argument("--lease", type=seconds, default=30.0, metavar="SECONDS",
                        help="lease of each job, extended while it runs (default 30)")
    parser.add_argument("--shutdown-timeout", type=seconds, default=25.0, metavar="SECONDS",
                        help="seconds a stopping worker waits for running jobs (default 25)")
    parser.add_argument("--end", choices=("min", "max"),
                        help="priority-queue: claim the lowest (default) or highest priority")
    parser.add_argument("--burst", action="store_true",
                        help="stop once nothing is visible and no job runs")
    parser.add_argument("--history", type=seconds, metavar="SECONDS",
                        help="keep each job's record (state, error, result), finished ones "
                        "SECONDS (the structure's history=; default: none)")
    parser.add_argument("--time-limit", type=seconds, metavar="SECONDS",
                        help="a job running longer is stopped and retried (default: none)")
    parser.add_argument("--processes", type=positive_int, default=1, metavar="N",
                        help="run N worker processes under a supervisor that restarts them "
                        "and kills one whose job is past --time-limit (default 1: this "
                        "process)")
    parser.add_argument("--name", help="what the worker's record says it serves")
    store = parser.add_mutually_exclusive_group()
    store.add_argument("--schedules", metavar="PATH",
                       help="carry the schedule store at this directory-layer path: fire "
                       "its schedules whose jobs go to this queue (an app's: to its "
                       "queues; see 'fdbrecipes schedules')")
    store.add_argument("--schedules-tuple", metavar="LITERAL",
                       help="the same, the store named by a subspace tuple")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="INFO",
                        help="default INFO")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text",
                        help="text lines (default) or one JSON object per line")


def metrics_arguments(parser: argparse.ArgumentParser) -> None:
    """``metrics``' options."""
    place_arguments(parser, "Serve the structure's gauges for Prometheus "
                    "(fdbrecipes_queue_items, fdbrecipes_queue_oldest_item_age_seconds; "
                    "for a schedule store fdbrecipes_schedule_lag_seconds and "
                    "fdbrecipes_schedule_paused) "
                    "on http://HOST:PORT/metrics until SIGTERM or SIGINT.  Run one per "
                    "cluster: the gauges are the database's, not one process's.  Reads "
                    "only; needs prometheus_client (pip install 'fdbrecipes[prometheus]').")
    parser.add_argument("--port", type=positive_int, default=METRICS_PORT,
                        help=f"default {METRICS_PORT} (outside the exporters' 9100-9999)")
    parser.add_argument("--host", "--addr", dest="addr", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only; "
                        "0.0.0.0 for a Prometheus on another)")
    parser.add_argument("--name", help="the queue label (default: the place's last part)")


def load_handler(text: str) -> Any:
    """The function (or the app of tasks, :class:`fdbrecipes.protocol.Servable`)
    ``module:function`` names (the current directory on the path).

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
    if isinstance(found, Servable):
        return found
    if not callable(found):
        raise UsageError(f"{module_name} has no function (or app of tasks) {name}")
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


def store_of(db: Any, args: argparse.Namespace) -> Any:
    """The schedule store ``--schedules`` (or ``--schedules-tuple``) names in ``db``, or
    None.

    Raises:
        OperatorError: no such directory, or something else than a store is there.
    """
    if args.schedules is None and args.schedules_tuple is None:
        return None
    from ..schedules import Schedules
    from .stores import place_of, store_at

    place = place_of(args.schedules, args.schedules_tuple)
    return Schedules(read_only(db, store_at, place))


def work(target: Target, args: argparse.Namespace) -> Report:
    """``worker``: run a Worker (or, with ``--processes``, supervise several) until
    signalled.  A supervisor's child tells it what it holds, over the pipe its
    environment names (:mod:`.pipe`)."""
    from .._worker.core import WorkerCore
    from .._worker.options import WorkerOptions
    from .pipe import pipe_from_env
    from .supervisor import supervise, watch_parent

    if args.end is not None and not _kinds.of(target.structure).priorities:
        raise UsageError("--end applies to --kind priority-queue only")
    handler = load_handler(args.handler)
    log_to_stderr(args.log_level, args.log_format)
    log.info("fdbrecipes worker: %s, cluster file %s, handler %s, concurrency %d, "
             "processes %d, max deliveries %d, history %s, time limit %s", target.title(),
             args.cluster_file or os.environ.get("FDB_CLUSTER_FILE") or "(default)",
             args.handler, args.concurrency, args.processes, args.max_deliveries,
             "none" if args.history is None else f"{args.history:g} s",
             "none" if args.time_limit is None else f"{args.time_limit:g} s")
    if args.processes > 1:
        supervise(target, args)
        return Report({**target.header(), "stopped": True},
                      f"{target.title()}: workers stopped")
    # What fdbrecipes.Worker (a sync handler) or aio.AsyncWorker runs, and a pipe.
    options = WorkerOptions.check(
        concurrency=args.concurrency, lease_seconds=args.lease, backoff=None,
        shutdown_timeout=args.shutdown_timeout, on_event=None, end=args.end or "min",
        schedules=(), time_limit=args.time_limit, name=args.name or target.title(),
        prefetch=args.prefetch, schedule_store=store_of(target.db, args))
    worker = WorkerCore(target.db, target.structure, handler, options,
                        threaded=not inspect.iscoroutinefunction(handler),
                        tell=pipe_from_env())
    watch_parent(worker.stop)
    asyncio.run(worker.run(args.burst))
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


def serve_app(app: Any, args: argparse.Namespace) -> int:
    """``worker`` of an app of tasks: run a Worker (an AsyncWorker when every task is
    ``async def``) on the app's structures (or those ``--queue`` names) until
    signalled, carrying the ``--schedules`` store as a handler's worker does (fired
    once per worker, as ``Worker(db, app)`` does); with
    ``--processes`` (an app of one queue, or one ``--queue``), supervise several."""
    from .._worker.options import WorkerOptions
    from .._worker.serving import cores, run_all
    from .commands import connect
    from .pipe import pipe_from_env
    from .supervisor import supervise, watch_parent

    for option in ("directory", "tuple_literal", "kind", "group", "history", "end"):
        if getattr(args, option, None) is not None:
            flag = "--tuple" if option == "tuple_literal" else "--" + option
            raise UsageError(f"{args.handler} is an app of tasks: it names its structures "
                             f"(no {flag})")
    try:
        served = app.served(args.queue)
    except ValueError as e:
        raise UsageError(f"{args.handler}: {e}") from None
    if args.processes > 1 and len(served) > 1:
        raise UsageError("--processes supervises the workers of one queue: name one with "
                         "--queue (and run one supervisor per queue)")
    log_to_stderr(args.log_level, args.log_format)
    db = connect(args)
    log.info("fdbrecipes worker: app %s (%s), cluster file %s, concurrency %d, processes %d, "
             "time limit %s", args.handler, ", ".join(map(repr, served)),
             args.cluster_file or os.environ.get("FDB_CLUSTER_FILE") or "(default)",
             args.concurrency, args.processes,
             "none" if args.time_limit is None else f"{args.time_limit:g} s")
    if args.processes > 1:
        structure = served[0]
        supervise(Target(db, Place(None, ()), "queue", structure), args)
        return 0
    tell = pipe_from_env()
    workers = cores(db, app, None, WorkerOptions.check(
        concurrency=args.concurrency, lease_seconds=args.lease, backoff=None,
        shutdown_timeout=args.shutdown_timeout, on_event=None, end="min", schedules=(),
        time_limit=args.time_limit, name=args.name, prefetch=args.prefetch,
        schedule_store=store_of(db, args)), not app.asynchronous, args.queue, tell)
    if tell is not None and len(workers) > 1:
        raise UsageError("a supervised worker serves one queue")

    def stop() -> None:
        for worker in workers:
            worker.stop()
    watch_parent(stop)
    asyncio.run(run_all(workers, args.burst))
    return 0


class WorkerOperation(Operation):
    """``worker``: an :class:`Operation` on a structure for a handler, or the app's own
    run for an app of tasks (:func:`serve_app`)."""

    def main(self, args: argparse.Namespace) -> int:
        try:
            client_ready()  # the handler's module may use fdb as it is imported
            found = load_handler(args.handler)
            if isinstance(found, Servable):
                return serve_app(found, args)
            if args.directory is None and args.tuple_literal is None:
                raise UsageError("name the structure: --directory PATH or --tuple LITERAL "
                                 "(or give an app of tasks, MODULE:APP)")
            if args.queue:
                raise UsageError("--queue names the queues of an app of tasks")
        except UsageError as e:
            say(f"fdbrecipes {self.name}: error:", e)
            return e.status
        except OperatorError as e:
            say(f"fdbrecipes {self.name}:", e)
            return e.status
        return super().main(args)


WORKER = WorkerOperation("worker", "run a Worker on a queue's jobs (MODULE:FUNCTION), or "
                         "on an app's tasks (MODULE:APP)", worker_arguments, work,
                         Needs(dead_letters=True, default_kind="queue"))
METRICS = Operation("metrics", "serve a structure's gauges for Prometheus",
                    metrics_arguments, serve_metrics, Needs(stores=True))
