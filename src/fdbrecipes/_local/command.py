"""``fdbrecipes cluster``: a throwaway local cluster for development, until Ctrl-C.

It starts a :class:`~fdbrecipes._local.cluster.LocalCluster`, prints its cluster file
(and the ``export FDB_CLUSTER_FILE=...`` line to use it) and which process holds which
role, then waits.  Ctrl-C or SIGTERM kills every process and removes the temporary
directory.  Nothing here loads ``libfdb_c``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from typing import Any, Callable, Iterator, List, Optional, Sequence

from .cluster import LocalCluster
from .plan import CLASSES, MAX_PROCESSES, REPLICAS, ServerProcess
from .programs import ServerNotFoundError
from .status import ROLES, ClusterRoles


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``fdbrecipes cluster``'s options."""
    parser.add_argument("--processes", type=int, default=1,
                        help=f"fdbserver processes, 1 to {MAX_PROCESSES} (default 1)")
    parser.add_argument("--redundancy", choices=list(REPLICAS), default="single",
                        help="copies of the data: single, double or triple (default single)")
    parser.add_argument("--engine", default="memory",
                        help="storage engine: memory (default), ssd, ssd-redwood-1, ...")
    parser.add_argument("--classes", default=None,
                        help="one process class per process, comma-separated (from "
                        f"{', '.join(CLASSES)}); default: all unset")
    parser.add_argument("--directory", default=None,
                        help="keep data, logs and the cluster file there (default: a "
                        "temporary directory, removed on exit)")
    parser.add_argument("--startup-timeout", type=float, default=120.0,
                        help="seconds to wait for the cluster to be healthy (default 120)")


def describe(processes: Sequence[ServerProcess], roles: ClusterRoles) -> List[str]:
    """A table of the processes: index, address, class, roles."""
    lines = [f"{'process':<8} {'address':<16} {'class':<12} roles"]
    for process in processes:
        held = roles.of(process.address)
        names = ", ".join(r for r in ROLES if r in held) or "-"
        if process.address in roles.excluded:
            names += " (excluded)"
        lines.append(f"{process.index:<8} {process.address:<16} {process.process_class:<12} "
                     f"{names}")
    return lines


def run(args: argparse.Namespace, stop: Optional[threading.Event] = None) -> int:
    """Start the cluster, print how to use it, wait for Ctrl-C/SIGTERM (or ``stop``),
    clean up.  Exit status 1, with one line on stderr, when it cannot start."""
    stop = stop or threading.Event()
    classes = None if args.classes is None else [c.strip() for c in args.classes.split(",")]
    try:
        cluster = LocalCluster(processes=args.processes, redundancy=args.redundancy,
                               engine=args.engine, classes=classes, directory=args.directory,
                               startup_timeout=args.startup_timeout)
    except (ServerNotFoundError, TypeError, ValueError) as e:
        print(f"fdbrecipes cluster: cannot run: {e}", file=sys.stderr)
        return 1
    restore = _stop_on_sigterm(stop)
    try:
        began = time.monotonic()
        cluster.start()
        ready = time.monotonic() - began
        print(f"fdbrecipes cluster: {args.processes} process(es), redundancy "
              f"{args.redundancy}, engine {args.engine}: ready in {ready:.1f} s")
        print(f"cluster file: {cluster.cluster_file}")
        print(f"  export FDB_CLUSTER_FILE={cluster.cluster_file}")
        print("\n".join(describe(cluster.processes, cluster.roles())))
        kept = ("removes " if args.directory is None else "keeps the data in ")
        print(f"Ctrl-C (or SIGTERM) stops every process and {kept}{cluster.directory}.",
              flush=True)
        while not stop.wait(1.0):  # Ctrl-C interrupts it between two waits
            pass
    except KeyboardInterrupt:
        pass
    except (RuntimeError, TimeoutError) as e:
        print(f"fdbrecipes cluster: cannot run: {e}", file=sys.stderr)
        return 1
    finally:
        with _uninterrupted():  # a second Ctrl-C must not leave servers behind
            cluster.cleanup()
        restore()
    print("fdbrecipes cluster: stopped", flush=True)
    return 0


def _stop_on_sigterm(stop: threading.Event) -> Callable[[], None]:
    """Make SIGTERM set ``stop`` (in the main thread); the function that puts the
    previous handler back."""
    if threading.current_thread() is not threading.main_thread():
        return _nothing
    before = signal.getsignal(signal.SIGTERM)

    def stopped(_signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, stopped)

    def restore() -> None:
        signal.signal(signal.SIGTERM, before)
    return restore


def _nothing() -> None:
    """Nothing to restore."""


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ignore SIGINT (Ctrl-C) in the block, when in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
