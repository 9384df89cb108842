"""The client processes: starting them together, running them, collecting their reports.

Clients are separate processes (``multiprocessing`` with ``spawn``): each has its own
FoundationDB network thread, as separate application servers would.  Each runs
:func:`client_main`: it connects, waits at a barrier so that all start together, runs
its operation (a :class:`~fdbrecipes.bench.operations.Client` made by one of
:data:`~fdbrecipes.bench.operations.FACTORIES`), measuring its own CPU time and, when
the servers run on this machine, theirs, and reports through a queue, which
:func:`collect` reads in the parent.
"""

from __future__ import annotations

import queue as queue_module
import time
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from fdb.subspace_impl import Subspace

from .._cluster import open_database
from .cpu import server_cpu
from .flow import FLOW_FACTORIES
from .operations import FACTORIES, Client, Factory, Looping
from .results import Report
from .tasks import TASK_FACTORIES
from .threads import THREAD_FACTORIES
from .workflows import WORKFLOW_FACTORIES

if TYPE_CHECKING:
    from multiprocessing.context import SpawnContext, SpawnProcess
    from multiprocessing.queues import Queue as ProcessQueue
    from multiprocessing.synchronize import Barrier

#: Seconds a client waits at the start barrier for the others to connect.
BARRIER_TIMEOUT = 300.0
#: Seconds the parent waits for a finished client process to exit.
JOIN_TIMEOUT = 30.0


class BenchError(RuntimeError):
    """A measurement could not be made (a client failed); the run stops."""


@dataclass(frozen=True)
class Job:
    """What every client process of one measurement is told (picklable)."""

    op: str
    batch: int
    cluster_file: str
    prefix: Tuple[str, ...]
    duration: Optional[float]  # None: run until a step moves nothing (drain)
    server_pids: Tuple[int, ...] = ()  # fdbserver processes whose CPU time is read


class Loop(NamedTuple):
    """What :func:`run_loop` measured: items moved, wall seconds, process CPU seconds."""

    items: int
    seconds: float
    cpu_seconds: float


def run_loop(client: Client, duration: Optional[float]) -> Loop:
    """Step ``client`` for ``duration`` seconds, or until a step moves nothing when
    ``duration`` is None (a :class:`~fdbrecipes.bench.operations.Looping` client runs
    its own loop); return the items moved, the seconds and the process CPU seconds
    (:func:`time.process_time`: all threads) it took."""
    cpu = time.process_time()
    start = time.perf_counter()
    if isinstance(client, Looping):
        count = client.loop(duration)
    else:
        count = 0
        while duration is None or time.perf_counter() - start < duration:
            moved = client.step()
            if moved == 0 and duration is None:
                break
            count += moved
    seconds = time.perf_counter() - start
    return Loop(count, seconds, time.process_time() - cpu)


def _server_window(before: Optional[float], after: Optional[float]
                   ) -> Optional[Tuple[float, float]]:
    """The servers' CPU seconds at the start and end of the loop, if both were read."""
    return None if before is None or after is None else (before, after)


def client_main(
    job: Job,
    index: int,
    barrier: Barrier,
    results: ProcessQueue[Report],
    connect: Callable[[str], Any] = open_database,
    factories: Optional[Mapping[str, Factory]] = None,
) -> None:
    """Entry point of one client process: connect, wait for the others, run, report.

    The connection is warmed up (one read), and the client prepared
    (:meth:`~fdbrecipes.bench.operations.Client.prepare`), before the barrier, so the
    measured time holds operations only.  The process's CPU time is measured over its loop, and the
    servers' (``job.server_pids``) read just before and after it.  On any failure the
    barrier is broken, so the other clients stop waiting, and the error is reported.
    ``connect`` opens the database from the cluster file (default: select the tools'
    API version and open) and ``factories`` makes the client for ``job.op`` (default:
    :data:`~fdbrecipes.bench.operations.FACTORIES`); tests pass their own.
    """
    try:
        db = connect(job.cluster_file)
        subspace = Subspace(job.prefix)
        client = (factories or {**FACTORIES, **TASK_FACTORIES, **THREAD_FACTORIES,
                                  **FLOW_FACTORIES, **WORKFLOW_FACTORIES})[job.op](
            db, subspace, index, job.batch)
        db.get(subspace.pack(("warm-up",)))  # connect before the clock starts
        client.prepare()
        barrier.wait(BARRIER_TIMEOUT)
        before = server_cpu(job.server_pids)
        loop = run_loop(client, job.duration)
        window = _server_window(before, server_cpu(job.server_pids))
        report = Report(index, loop.items, loop.seconds, client.retries(), loop.cpu_seconds,
                        window)
    except Exception as e:  # reported to the parent, which stops the run
        barrier.abort()
        report = Report(index, 0, 0.0, None, error=f"client {index}: {type(e).__name__}: {e}")
    results.put(report)


def collect(
    results: ProcessQueue[Report], processes: Sequence[SpawnProcess]
) -> List[Report]:
    """One report per process; BenchError if a client failed or died silently."""
    reports: List[Report] = []
    while len(reports) < len(processes):
        try:
            reports.append(results.get(timeout=1.0))
        except queue_module.Empty:
            dead = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
            if dead:
                raise BenchError(f"a client process died (exit code {dead[0]})") from None
    errors = [r.error for r in reports if r.error]
    if errors:
        raise BenchError(errors[0])
    return reports


def run_clients(context: SpawnContext, job: Job, clients: int) -> List[Report]:
    """Start ``clients`` processes running ``job`` together; return their reports."""
    barrier = context.Barrier(clients)
    results: ProcessQueue[Report] = context.Queue()
    processes = [
        context.Process(target=client_main, args=(job, i, barrier, results), daemon=True)
        for i in range(clients)
    ]
    for process in processes:
        process.start()
    try:
        return collect(results, processes)
    finally:
        for process in processes:
            process.join(JOIN_TIMEOUT)
            if process.is_alive():
                process.terminate()
                process.join()
