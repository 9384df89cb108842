"""The client processes, and the recipe baseline they are compared with.

Clients are separate processes (``multiprocessing`` with ``spawn``): each has its own
FoundationDB network thread, as separate application servers would.  Each runs
:func:`client_main`: it connects, waits at a barrier so that all start together, runs
its operation (a :class:`Client` made by one of :data:`FACTORIES`) and reports
(count, seconds, retries) through a queue, which :func:`collect` reads in the parent.
"""

from __future__ import annotations

import itertools
import os
import queue as queue_module
import time
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)

import fdb

from .. import Queue, Stats
from .._cluster import open_database
from .results import Report

if TYPE_CHECKING:
    from multiprocessing.context import SpawnContext, SpawnProcess
    from multiprocessing.queues import Queue as ProcessQueue
    from multiprocessing.synchronize import Barrier

T = TypeVar("T")

#: Items per push_many when pre-filling a queue.
QUEUE_FILL_BATCH = 1_000
#: Tiny value every write, push and fill stores.
VALUE = b"x"
#: Seconds a client waits at the start barrier for the others to connect.
BARRIER_TIMEOUT = 300.0
#: Seconds the parent waits for a finished client process to exit.
JOIN_TIMEOUT = 30.0


class BenchError(RuntimeError):
    """A measurement could not be made (a client failed); the run stops."""


# --------------------------------------------------------------------------------------
# The recipe baseline
# --------------------------------------------------------------------------------------


def transact(db: Any, body: Callable[[Any], T], stats: Stats) -> T:
    """Run ``body(tr)`` in a new transaction and commit it; on an FDBError, let
    ``on_error`` decide (back off and retry, or raise) and count the retry."""
    tr = db.create_transaction()
    while True:
        try:
            result = body(tr)
            tr.commit().wait()
            return result
        except fdb.FDBError as e:
            stats.retries += 1
            tr.on_error(e).wait()


def _recipe_push(tr: Any, subspace: Any, value: bytes) -> None:
    """The recipe's push: index = last index + 1 (snapshot read), random suffix."""
    r = subspace.range()
    last = list(tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True))
    index = subspace.unpack(last[0].key)[0] + 1 if last else 0
    tr[subspace.pack((index, os.urandom(20)))] = value


class RecipeQueue:
    """The queue recipe of FoundationDB's documentation, written here independently of
    the library, as the baseline.

    Items are ``subspace/(index, random 20 bytes) = value``.  A push reads the last key
    with a snapshot read and writes at its index + 1 (``@fdb.transactional``).  A pop reads
    the first key (a normal read: read conflict), clears it and commits, in a retry loop
    that counts its retries in :attr:`stats`.  Needs the API version selected.
    """

    def __init__(self, subspace: Any) -> None:
        self.subspace = subspace
        self.stats = Stats()
        self._push: Callable[[Any, Any, bytes], None] = fdb.transactional(_recipe_push)

    def push(self, db: Any, value: bytes) -> None:
        """The recipe's push of ``value`` (``@fdb.transactional``)."""
        self._push(db, self.subspace, value)

    def pop(self, db: Any) -> Optional[bytes]:
        """The recipe's pop: the first value, or None when the queue is empty."""
        return transact(db, self._pop, self.stats)

    def _pop(self, tr: Any) -> Optional[bytes]:
        """One pop attempt in ``tr``: read the first key (conflicting) and clear it."""
        r = self.subspace.range()
        for kv in tr.get_range(r.start, r.stop, limit=1):
            tr.clear(kv.key)
            return bytes(kv.value)
        return None

    def fill(self, db: Any, items: int) -> None:
        """Store ``items`` values at indexes 0, 1, ..., in transactions of 1,000."""

        def write(chunk: range) -> Callable[[Any], None]:
            def body(tr: Any) -> None:
                for i in chunk:
                    tr[self.subspace.pack((i, os.urandom(20)))] = VALUE

            return body

        for chunk in chunks(0, items, QUEUE_FILL_BATCH):
            transact(db, write(chunk), Stats())


def chunks(start: int, stop: int, size: int) -> Iterator[range]:
    """``range(start, stop)`` in consecutive pieces of at most ``size``."""
    for low in range(start, stop, size):
        yield range(low, min(low + size, stop))


# --------------------------------------------------------------------------------------
# Client processes
# --------------------------------------------------------------------------------------


class Client:
    """One client process's operation.

    ``step()`` runs one operation and returns the items it moved (keys written, items
    pushed, 1 or 0 for a pop: 0 means the queue was empty); ``retries()`` is the number
    of retried transactions so far (None when the operation cannot count them).
    """

    __slots__ = ("retries", "step")

    def __init__(self, step: Callable[[], int], retries: Callable[[], Optional[int]]) -> None:
        self.step = step
        self.retries = retries


Factory = Callable[[Any, Any, int, int], Client]


def _write_client(db: Any, subspace: Any, index: int, batch: int) -> Client:
    """The limit: each transaction writes ``batch`` tiny values under fresh keys."""
    stats = Stats()
    steps = itertools.count()

    def body(tr: Any) -> None:
        step = next(steps)
        for j in range(batch):
            tr[subspace.pack((index, step, j))] = VALUE

    def step() -> int:
        transact(db, body, stats)
        return batch

    return Client(step, lambda: stats.retries)


def _push_client(db: Any, subspace: Any, _index: int, batch: int) -> Client:
    """``Queue.push`` (batch 1) or ``Queue.push_many`` of ``batch`` values."""
    queue = Queue(subspace)
    values = [VALUE] * batch

    def step() -> int:
        if batch == 1:
            queue.push(db, VALUE)
        else:
            queue.push_many(db, values)
        return batch

    return Client(step, lambda: queue.stats.retries)


def _pop_client(db: Any, subspace: Any, high_contention: bool) -> Client:
    """``Queue.pop`` given the Database (plain or high-contention)."""
    queue = Queue(subspace, high_contention=high_contention)
    return Client(lambda: int(queue.pop(db) is not None), lambda: queue.stats.retries)


def _plain_pop_client(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The plain ``Queue.pop``."""
    return _pop_client(db, subspace, high_contention=False)


def _hc_pop_client(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The high-contention ``Queue.pop``."""
    return _pop_client(db, subspace, high_contention=True)


def _recipe_push_client(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The recipe's push (``@fdb.transactional`` hides its retries: not counted)."""
    recipe = RecipeQueue(subspace)

    def step() -> int:
        recipe.push(db, VALUE)
        return 1

    return Client(step, lambda: None)


def _recipe_pop_client(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The recipe's pop, counting its own retries."""
    recipe = RecipeQueue(subspace)
    return Client(lambda: int(recipe.pop(db) is not None), lambda: recipe.stats.retries)


#: The client operations, by :attr:`Kind.op`.
FACTORIES: Dict[str, Factory] = {
    "write": _write_client,
    "push": _push_client,
    "recipe-push": _recipe_push_client,
    "pop": _plain_pop_client,
    "hc-pop": _hc_pop_client,
    "recipe-pop": _recipe_pop_client,
}


@dataclass(frozen=True)
class Job:
    """What every client process of one measurement is told (picklable)."""

    op: str
    batch: int
    cluster_file: str
    prefix: Tuple[str, ...]
    duration: Optional[float]  # None: run until a step moves nothing (drain)


def run_loop(client: Client, duration: Optional[float]) -> Tuple[int, float]:
    """Step ``client`` for ``duration`` seconds, or until a step moves nothing when
    ``duration`` is None; return (items moved, seconds)."""
    start = time.perf_counter()
    count = 0
    while duration is None or time.perf_counter() - start < duration:
        moved = client.step()
        if moved == 0 and duration is None:
            break
        count += moved
    return count, time.perf_counter() - start


def client_main(
    job: Job,
    index: int,
    barrier: Barrier,
    results: ProcessQueue[Report],
    connect: Callable[[str], Any] = open_database,
) -> None:
    """Entry point of one client process: connect, wait for the others, run, report.

    The connection is warmed up (one read) before the barrier, so the measured time
    holds operations only.  On any failure the barrier is broken, so the other clients
    stop waiting, and the error is reported.  ``connect`` opens the database from the
    cluster file (default: select the tools' API version and open); tests pass their
    own to make connecting fail.
    """
    try:
        db = connect(job.cluster_file)
        subspace = fdb.Subspace(job.prefix)
        client = FACTORIES[job.op](db, subspace, index, job.batch)
        db.get(subspace.pack(("warm-up",)))  # connect before the clock starts
        barrier.wait(BARRIER_TIMEOUT)
        count, seconds = run_loop(client, job.duration)
        report = Report(index, count, seconds, client.retries())
    except Exception as e:  # reported to the parent, which stops the run
        barrier.abort()
        report = Report(index, 0, 0.0, None, f"client {index}: {type(e).__name__}: {e}")
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

