"""What one client process does: a :class:`Client` per kind of measurement.

:data:`FACTORIES` maps each :attr:`Kind.op <fdbrecipes.bench.settings.Kind.op>` to a
function making its client from the database, the measurement's subspace, the client's
index and the kind's batch.  A client's :meth:`~Client.step` runs one operation; its
:meth:`~Client.retries` reads the :class:`~fdbrecipes.RetryStats` that the operation's
retry loop counts in: the structure's own (``retry_stats``) for calls given a
Database, the benchmark's for loops it runs itself.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
import time
from typing import Any, Awaitable, Callable, Dict, Optional

from .. import (
    FairQueue,
    JobFinished,
    PriorityQueue,
    Queue,
    RetryStats,
    Schedules,
    WeightTree,
    Worker,
)
from .._fdb import fdb_impl
from ..aio import AsyncQueue, wait
from .recipe import VALUE, RecipeQueue, transact
from .settings import (
    BENCH_SHARDS,
    CLAIM_BATCH,
    HISTORY_SECONDS,
    IDLE_SCHEDULES,
    LEASE_SECONDS,
    SPREAD,
    WARM_UP,
)

#: The key the read rows read (never written).
READ_KEY = b"fdbrecipes-bench-read"
#: A pop given the Database: a value, or None when the structure is empty.
PopFunction = Callable[[Any], Optional[object]]


class Client:
    """One client process's operation (subclasses define :meth:`step`).

    Args:
        stats: the retry counters of the operation's loop; None when it cannot count
            them (the recipe's push runs in ``@fdb.transactional``).
    """

    def __init__(self, stats: Optional[RetryStats]) -> None:
        self.stats = stats

    def prepare(self) -> None:
        """What the client does before the clock starts (by default nothing)."""

    def step(self) -> int:
        """Run one operation; return the items it moved (keys written, items pushed,
        items popped or claimed and acked: 0 means the structure was empty)."""
        raise NotImplementedError

    def retries(self) -> Optional[int]:
        """Retried transactions so far (None when not counted)."""
        return None if self.stats is None else self.stats.retries


class Writer(Client):
    """The limit: each transaction writes ``batch`` tiny values under fresh keys."""

    def __init__(self, db: Any, subspace: Any, index: int, batch: int) -> None:
        self.loop_stats = RetryStats()
        super().__init__(self.loop_stats)
        self.db, self.subspace, self.index, self.batch = db, subspace, index, batch
        self.steps = itertools.count()

    def step(self) -> int:
        """Commit one transaction of ``batch`` writes."""
        transact(self.db, self._write, self.loop_stats)
        return self.batch

    def _write(self, tr: Any) -> None:
        """Set ``batch`` keys no other client or step writes."""
        step = next(self.steps)
        for j in range(self.batch):
            tr[self.subspace.pack((self.index, step, j))] = VALUE


class Pusher(Client):
    """``Queue.push(db, value)`` (batch 1) or ``Queue.push_many(db, values)``: the
    library's own retry loop."""

    def __init__(self, db: Any, queue: Queue, batch: int) -> None:
        super().__init__(queue.retry_stats)
        self.db, self.queue, self.batch = db, queue, batch
        self.values = [VALUE] * batch

    def step(self) -> int:
        """One push (or push_many) given the Database."""
        if self.batch == 1:
            self.queue.push(self.db, VALUE)
        else:
            self.queue.push_many(self.db, self.values)
        return self.batch


class TxPusher(Client):
    """``Queue.push(tr, value)`` inside the caller's transaction, committed by the
    benchmark's own loop (:func:`~fdbrecipes.bench.recipe.transact`): no commit
    receipt, as an application's transaction would run it."""

    def __init__(self, db: Any, queue: Queue) -> None:
        self.loop_stats = RetryStats()
        super().__init__(self.loop_stats)
        self.db, self.queue = db, queue

    def step(self) -> int:
        """One transaction holding one push."""
        transact(self.db, self._push, self.loop_stats)
        return 1

    def _push(self, tr: Any) -> None:
        """The push, joining ``tr``."""
        self.queue.push(tr, VALUE)


class RecipePusher(Client):
    """The recipe's push (``@fdb.transactional`` hides its retries: not counted)."""

    def __init__(self, db: Any, recipe: RecipeQueue) -> None:
        super().__init__(None)
        self.db, self.recipe = db, recipe

    def step(self) -> int:
        """One recipe push."""
        self.recipe.push(self.db, VALUE)
        return 1


class Popper(Client):
    """A pop given the Database, until it returns None (any structure's pop)."""

    def __init__(self, db: Any, pop: PopFunction, stats: RetryStats) -> None:
        super().__init__(stats)
        self.db, self.pop = db, pop

    def step(self) -> int:
        """One pop: 1 if it took an item, 0 if the structure was empty."""
        return int(self.pop(self.db) is not None)


class ClaimAcker(Client):
    """``claim_many(db, 100, 30)`` then ``ack_many(db, leases)``, both given the Database:
    a consumer that takes work in batches and acknowledges it in one transaction
    (``batch`` and ``spread``: other batches, in relaxed order)."""

    def __init__(self, db: Any, queue: Queue, batch: int = CLAIM_BATCH,
                 spread: int = 1) -> None:
        super().__init__(queue.retry_stats)
        self.db, self.queue, self.batch, self.spread = db, queue, batch, spread

    def step(self) -> int:
        """One claim of up to ``batch`` items and its ack; the items claimed (0: empty)."""
        leases = self.queue.claim_many(self.db, self.batch, LEASE_SECONDS, spread=self.spread)
        if leases:
            self.queue.ack_many(self.db, leases)
        return len(leases)


class OneClaimer(Client):
    """``claim(db, 30)`` then ``ack(db, lease)``, one item at a time: a Queue's, or a
    FairQueue's (which picks a group first)."""

    def __init__(self, db: Any, queue: Any) -> None:
        super().__init__(queue.retry_stats)
        self.db, self.queue = db, queue

    def step(self) -> int:
        """One claim and its ack; 1, or 0 when nothing could be claimed."""
        lease = self.queue.claim(self.db, LEASE_SECONDS)
        if lease is None:
            return 0
        self.queue.ack(self.db, lease)
        return 1


class Looping(Client):
    """A client that runs a loop of its own (an event loop's tasks, a worker) instead
    of single steps: :func:`~fdbrecipes.bench.clients.run_loop` calls :meth:`loop`."""

    def step(self) -> int:
        raise TypeError(f"{type(self).__name__} runs its own loop")

    def loop(self, duration: Optional[float]) -> int:
        """Work for ``duration`` seconds, or until drained when None; the items moved."""
        raise NotImplementedError


#: One awaited operation of an async client: the items it moved (0: empty).
AsyncOp = Callable[[], Awaitable[int]]


class AsyncTasks(Looping):
    """``tasks`` tasks of one event loop, each repeating ``op`` (fdbrecipes.aio)."""

    def __init__(self, stats: RetryStats, tasks: int, op: AsyncOp) -> None:
        super().__init__(stats)
        self.tasks, self.op = tasks, op

    def loop(self, duration: Optional[float]) -> int:
        """Run the tasks until ``duration`` passes, or until each finds nothing."""
        return asyncio.run(self._all(duration))

    async def _all(self, duration: Optional[float]) -> int:
        end = None if duration is None else time.perf_counter() + duration
        counts = await asyncio.gather(*(self._one(end) for _ in range(self.tasks)))
        return sum(counts)

    async def _one(self, end: Optional[float]) -> int:
        count = 0
        while end is None or time.perf_counter() < end:
            moved = await self.op()
            if moved == 0 and end is None:
                break
            count += moved
        return count


class AsyncQueueOps:
    """The awaited operations of the ``aio`` rows, on one AsyncQueue."""

    def __init__(self, db: Any, queue: AsyncQueue) -> None:
        self.db, self.queue = db, queue

    async def push(self) -> int:
        await self.queue.push(self.db, VALUE)
        return 1

    async def spread_pop(self) -> int:
        return int(await self.queue.pop(self.db, spread=SPREAD) is not None)

    async def claim_ack(self) -> int:
        leases = await self.queue.claim_many(self.db, CLAIM_BATCH, LEASE_SECONDS)
        if leases:
            await self.queue.ack_many(self.db, leases)
        return len(leases)

    async def read(self) -> int:
        tr = self.db.create_transaction()  # kept: a transaction's futures die with it
        await wait(tr.get(READ_KEY))
        return 1


class BlockingReader(Client):
    """The awaited read's comparison: the same read, blocked on."""

    def __init__(self, db: Any) -> None:
        super().__init__(None)
        self.db = db

    def step(self) -> int:
        tr = self.db.create_transaction()  # kept: a transaction's futures die with it
        tr.get(READ_KEY).wait()
        return 1


def ignore(_job: Any) -> None:
    """A worker's handler that does nothing (the worker's own cost is measured)."""


class WorkerDrain(Looping):
    """A :class:`fdbrecipes.Worker` with a handler that returns at once, until the
    queue is drained (or, idle, for ``duration`` seconds on an empty one).  With an
    app of tasks as ``served`` (and no handler), ``Worker(db, app)`` draining its
    ``queue``."""

    def __init__(self, db: Any, queue: Queue, concurrency: int, served: Any = None,
                 handler: Any = ignore) -> None:
        super().__init__(queue.retry_stats)
        self.db, self.queue, self.concurrency = db, queue, concurrency
        self.served, self.handler = (queue if served is None else served), handler
        self.done = 0
        self.lock = threading.Lock()

    def finished(self, event: Any) -> None:
        """The worker's on_event: count the acked jobs."""
        if isinstance(event, JobFinished) and event.outcome == "ok":
            with self.lock:
                self.done += 1

    def loop(self, duration: Optional[float]) -> int:
        worker = Worker(self.db, self.served, self.handler, concurrency=self.concurrency,
                        lease_seconds=LEASE_SECONDS, on_event=self.finished)
        with worker:
            if duration is not None:
                time.sleep(duration)
            else:
                while not drained(self.queue.stats(self.db)):
                    time.sleep(0.02)
        return self.done


class StartedWorker(Looping):
    """A :class:`fdbrecipes.Worker` on an empty queue (carrying ``store``, filled with
    :data:`IDLE_SCHEDULES` daily schedules, if given), started in a thread and run
    :data:`WARM_UP` seconds before the clock starts (:meth:`prepare`): its loop only
    lets it idle ``duration`` seconds, so the CPU measured is the idle worker's, not its
    start's (the process ends with it)."""

    def __init__(self, db: Any, queue: Queue, concurrency: int,
                 store: Optional[Schedules] = None) -> None:
        super().__init__(queue.retry_stats)
        self.db, self.queue, self.store = db, queue, store
        self.concurrency = concurrency

    def prepare(self) -> None:
        if self.store is not None:
            daily_schedules(self.db, self.store, self.queue, IDLE_SCHEDULES)
        Worker(self.db, self.queue, ignore, concurrency=self.concurrency,
               lease_seconds=LEASE_SECONDS, schedule_store=self.store).__enter__()
        time.sleep(WARM_UP)  # the worker starts: not measured

    def loop(self, duration: Optional[float]) -> int:
        time.sleep(duration or 0.0)  # the measured idle time
        return 0


def daily_schedules(db: Any, store: Schedules, queue: Queue, n: int) -> None:
    """Add ``n`` schedules to ``store``, each firing once a day into ``queue`` (cron
    expressions in Europe/Berlin where ``cronsim`` is installed, else periods of a
    day), in transactions of 100."""
    try:
        import cronsim  # noqa: F401
    except ImportError:
        cron = False
    else:
        cron = True
    for start in range(0, n, 100):
        tr = db.create_transaction()
        while True:
            try:
                for i in range(start, min(n, start + 100)):
                    when = (dict(cron=f"{i % 60} {i // 60 % 24} * * *", tz="Europe/Berlin")
                            if cron else dict(every=86_400.0))
                    store.add(tr, f"daily-{i:05d}", target=queue, value=i, **when)
                tr.commit().wait()
                break
            except fdb_impl().FDBError as e:
                tr.on_error(e).wait()


def drained(stats: Any) -> bool:
    """Whether nothing is visible or in flight any more."""
    return bool(stats.visible + stats.in_flight == 0)


# --------------------------------------------------------------------------------------
# Factories: (db, subspace, client index, batch) -> Client
# --------------------------------------------------------------------------------------

Factory = Callable[[Any, Any, int, int], Client]


def writes(db: Any, subspace: Any, index: int, batch: int) -> Client:
    """The limit's write transactions."""
    return Writer(db, subspace, index, batch)


def pushes(db: Any, subspace: Any, _index: int, batch: int) -> Client:
    """``Queue.push(db)`` or ``Queue.push_many(db)``."""
    return Pusher(db, Queue(subspace), batch)


def tx_pushes(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``Queue.push(tr)`` in the benchmark's transactions."""
    return TxPusher(db, Queue(subspace))


def recipe_pushes(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The recipe's push."""
    return RecipePusher(db, RecipeQueue(subspace))


def recipe_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The recipe's pop, counting its own retries."""
    recipe = RecipeQueue(subspace)
    return Popper(db, recipe.pop, recipe.stats)


def probe_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The bare probe pop (:meth:`~fdbrecipes.bench.recipe.RecipeQueue.probe_pop`),
    counting its own retries."""
    recipe = RecipeQueue(subspace)
    return Popper(db, recipe.probe_pop, recipe.stats)


def plain_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The plain ``Queue.pop(db)``."""
    queue = Queue(subspace)
    return Popper(db, queue.pop, queue.retry_stats)


def spread_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The relaxed-order ``Queue.pop(db, spread=16)``."""
    queue = Queue(subspace)
    return Popper(db, functools.partial(queue.pop, spread=SPREAD), queue.retry_stats)


def hc_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The high-contention ``Queue.pop(db)``."""
    queue = Queue(subspace, high_contention=True)
    return Popper(db, queue.pop, queue.retry_stats)


def claims(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``claim_many(100)`` and ``ack_many``."""
    return ClaimAcker(db, Queue(subspace))


def tree_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``WeightTree.pop(db)``."""
    tree = WeightTree(subspace)
    return Popper(db, tree.pop, tree.retry_stats)


def pq_min_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``PriorityQueue.pop_min(db)``."""
    pq = PriorityQueue(subspace)
    return Popper(db, pq.pop_min, pq.retry_stats)


def pq_max_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``PriorityQueue.pop_max(db)``."""
    pq = PriorityQueue(subspace)
    return Popper(db, pq.pop_max, pq.retry_stats)


def aio_ops(db: Any, subspace: Any) -> AsyncQueueOps:
    return AsyncQueueOps(db, AsyncQueue(subspace))


def aio_pushes(db: Any, subspace: Any, _index: int, tasks: int) -> Client:
    """``tasks`` tasks pushing with ``AsyncQueue.push(db)`` (shared transactions)."""
    ops = aio_ops(db, subspace)
    return AsyncTasks(ops.queue.retry_stats, tasks, ops.push)


def aio_spread_pops(db: Any, subspace: Any, _index: int, tasks: int) -> Client:
    """``tasks`` tasks popping with ``AsyncQueue.pop(db, spread=16)``."""
    ops = aio_ops(db, subspace)
    return AsyncTasks(ops.queue.retry_stats, tasks, ops.spread_pop)


def aio_claims(db: Any, subspace: Any, _index: int, tasks: int) -> Client:
    """``tasks`` tasks claiming 100 and acking them (acks share transactions)."""
    ops = aio_ops(db, subspace)
    return AsyncTasks(ops.queue.retry_stats, tasks, ops.claim_ack)


def awaited_reads(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """One task awaiting one read after the other."""
    ops = aio_ops(db, subspace)
    return AsyncTasks(RetryStats(), 1, ops.read)


def blocking_reads(db: Any, _subspace: Any, _index: int, _batch: int) -> Client:
    """One read after the other, blocked on."""
    return BlockingReader(db)


def workers(db: Any, subspace: Any, _index: int, concurrency: int) -> Client:
    """A Worker draining the queue (or, timed, idling on an empty one)."""
    return WorkerDrain(db, Queue(subspace), concurrency)


def started_workers(db: Any, subspace: Any, _index: int, concurrency: int) -> Client:
    """A Worker idling on an empty queue, measured once started."""
    return StartedWorker(db, Queue(subspace["q"]), concurrency)


def scheduled_workers(db: Any, subspace: Any, _index: int, concurrency: int) -> Client:
    """A Worker idling on an empty queue, carrying a store of
    :data:`IDLE_SCHEDULES` daily schedules into it, measured once started."""
    return StartedWorker(db, Queue(subspace["q"]), concurrency, Schedules(subspace["s"]))


def history_workers(db: Any, subspace: Any, _index: int, concurrency: int) -> Client:
    """A Worker draining a queue made with ``history`` (each job's record kept)."""
    return WorkerDrain(db, Queue(subspace, history=HISTORY_SECONDS), concurrency)


def spread_claims(db: Any, subspace: Any, _index: int, batch: int) -> Client:
    """``claim_many(batch, spread=batch)`` and ``ack_many``: a worker's calls, bare."""
    return ClaimAcker(db, Queue(subspace), batch, batch)


def one_claims(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``Queue.claim`` and ``ack``, one at a time."""
    return OneClaimer(db, Queue(subspace))


def fair_claims(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``FairQueue.claim`` and ``ack``, one at a time."""
    return OneClaimer(db, FairQueue(subspace))


def sharded(subspace: Any) -> Queue:
    """The sharded rows' queue: :data:`BENCH_SHARDS` shards."""
    return Queue(subspace, shards=BENCH_SHARDS)


def sharded_pushes(db: Any, subspace: Any, _index: int, batch: int) -> Client:
    """``Queue.push(db)`` into a sharded queue."""
    return Pusher(db, sharded(subspace), batch)


def sharded_claims(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``claim_many(100)`` and ``ack_many`` on a sharded queue."""
    return ClaimAcker(db, sharded(subspace))


def sharded_one_claims(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``Queue.claim`` and ``ack``, one at a time, on a sharded queue."""
    return OneClaimer(db, sharded(subspace))


#: The client operations, by :attr:`Kind.op <fdbrecipes.bench.settings.Kind.op>`.
FACTORIES: Dict[str, Factory] = {
    "write": writes,
    "push": pushes,
    "push-tr": tx_pushes,
    "recipe-push": recipe_pushes,
    "recipe-pop": recipe_pops,
    "probe-pop": probe_pops,
    "pop": plain_pops,
    "spread-pop": spread_pops,
    "hc-pop": hc_pops,
    "claim-ack": claims,
    "tree-pop": tree_pops,
    "pq-pop-min": pq_min_pops,
    "pq-pop-max": pq_max_pops,
    "aio-push": aio_pushes,
    "aio-spread-pop": aio_spread_pops,
    "aio-claim-ack": aio_claims,
    "awaited-read": awaited_reads,
    "blocking-read": blocking_reads,
    "worker": workers,
    "history-worker": history_workers,
    "idle-worker": workers,
    "idle-started": started_workers,
    "idle-schedules": scheduled_workers,
    "spread-claim-ack": spread_claims,
    "claim-one": one_claims,
    "fair-claim-one": fair_claims,
    "sharded-push": sharded_pushes,
    "sharded-claim-ack": sharded_claims,
    "sharded-claim-one": sharded_one_claims,
}
