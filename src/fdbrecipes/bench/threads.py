"""The threads rows: pushes from the threads of one process, as a web application's
request threads make them.

* ``Queue.push(db)`` from :data:`.settings.THREADS` threads: given a Database, the
  pushes of the threads share transactions (:mod:`fdbrecipes._drivers.sharing`);
* beside it, the baseline: the same threads each pushing given a Database as before
  they shared (:class:`UnsharedPusher`: a transaction of its own, in the library's
  retry loop, with its receipt);
* the same threads each pushing in a transaction of its own without a receipt
  (``Queue.push(tr)`` in the benchmark's retry loop, committed per push: what an
  application's own transaction holding one push costs);
* and the floor of one commit per call from those threads: a 1-key write
  transaction each (the limit's, from threads).

Clients (:data:`THREAD_FACTORIES`) join the suite's own (:mod:`.clients`).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional

from .. import Queue, RetryStats
from .._drivers.blocking import drive
from .operations import Client, Factory, Looping, Pusher, TxPusher, Writer
from .recipe import VALUE

__all__ = ["THREAD_FACTORIES", "Threads", "UnsharedPusher"]

#: Seconds the threads may overrun their measurement before the run fails.
OVERRUN = 60.0


class Threads(Looping):
    """``threads`` threads of this process, each repeating ``step`` for the
    measurement's duration (timed rows only)."""

    def __init__(self, stats: Optional[RetryStats], threads: int,
                 step: Callable[[], int]) -> None:
        super().__init__(stats)
        self.threads, self.each = threads, step

    def loop(self, duration: Optional[float]) -> int:
        """Run the threads for ``duration`` seconds; the items they moved.

        Raises:
            TypeError: no duration (these rows are timed, not drained).
            Whatever a thread's step raised; RuntimeError if one overran.
        """
        if duration is None:
            raise TypeError("the threads rows are timed: give a duration")
        end = time.perf_counter() + duration
        counts = [0] * self.threads
        errors: List[BaseException] = []
        workers = [threading.Thread(target=self.repeat, args=(end, counts, i, errors),
                                    daemon=True) for i in range(self.threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=max(0.0, end + OVERRUN - time.perf_counter()))
        if errors:
            raise errors[0]
        if any(worker.is_alive() for worker in workers):
            raise RuntimeError(f"a thread ran {OVERRUN:g} s past the measurement")
        return sum(counts)

    def repeat(self, end: float, counts: List[int], i: int,
               errors: List[BaseException]) -> None:
        """Thread ``i``: steps until ``end``, counted in ``counts[i]``."""
        try:
            while time.perf_counter() < end:
                counts[i] += self.each()
        except BaseException as e:  # reported by loop()
            errors.append(e)


class UnsharedPusher(Client):
    """``Queue.push(db, value)`` as it ran before the threads of a process shared
    transactions: each push in a transaction of its own, in the library's retry loop
    with its receipt.  It runs the push through the structure's operations object
    (``queue.ops.push_job``, the protocol's push, which never shares), the call
    ``Queue.push`` made given a Database before."""

    def __init__(self, db: Any, queue: Queue[Any]) -> None:
        super().__init__(queue.retry_stats)
        self.db, self.queue = db, queue

    def step(self) -> int:
        """One push, alone, given the Database."""
        drive(self.queue.ops.push_job(self.db, VALUE))
        return 1


def thread_pushes(db: Any, subspace: Any, _index: int, threads: int) -> Client:
    """``Queue.push(db)`` from ``threads`` threads (shared transactions)."""
    queue: Queue[Any] = Queue(subspace)
    return Threads(queue.retry_stats, threads, Pusher(db, queue, 1).step)


def thread_pushes_unshared(db: Any, subspace: Any, _index: int, threads: int) -> Client:
    """``Queue.push(db)`` as before sharing from ``threads`` threads (the baseline)."""
    pusher = UnsharedPusher(db, Queue(subspace))
    return Threads(pusher.stats, threads, pusher.step)


def thread_pushes_alone(db: Any, subspace: Any, _index: int, threads: int) -> Client:
    """``Queue.push(tr)`` from ``threads`` threads, a transaction each."""
    pusher = TxPusher(db, Queue(subspace))
    return Threads(pusher.loop_stats, threads, pusher.step)


def thread_writes(db: Any, subspace: Any, index: int, threads: int) -> Client:
    """1-key write transactions from ``threads`` threads (keys none other writes)."""
    writer = Writer(db, subspace, index, 1)
    return Threads(writer.loop_stats, threads, writer.step)


#: The clients of the threads rows, by op.
THREAD_FACTORIES: Dict[str, Factory] = {
    "thread-write": thread_writes,
    "thread-push": thread_pushes,
    "thread-push-unshared": thread_pushes_unshared,
    "thread-push-alone": thread_pushes_alone,
}
