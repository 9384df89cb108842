"""Producers and consumers of every structure, for the fault tests on a multi-process
cluster (``tests/integration/test_cluster_faults.py``).

Each :class:`Load` owns one structure in a subspace of its own and the values
``0 .. total - 1``.  Its producer pushes them with ids in three parts (see
:class:`Phases`): the first half at once, the third quarter once the driver has
struck the fault, the last quarter once it has healed it; its consumers take values
through the public API until every value is taken.
A load records what its consumers *certainly* took (a pop's or claim-and-ack's
result, a Worker's ``JobFinished(outcome="ok")``) and when, and at the end checks:
nothing lost, nothing taken twice, and the structure's counters exact (what is left,
nothing, in ``size``/``stats`` and the listings); the Worker's queue keeps job records,
and each says ``succeeded`` with its handler's result.

Only the public API is used.  Every wait has a deadline (:data:`WAIT`, and the
driver's).
"""

from __future__ import annotations

import asyncio
import functools
import random
import threading
import time
from collections import Counter
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple

from fdbrecipes import FairQueue, Job, JobFinished, LeaseExpiredError, Queue, WeightTree, Worker
from fdbrecipes.aio import AsyncQueue

#: Seconds of each lease (a recovery moves the cluster's clock forward, which can end
#: leases early: the item is then delivered again, and its late ack refused).
LEASE = 30.0
#: Seconds a consumer waits on a watch before it looks again (whether it is done).
WAIT = 0.5
#: Seconds a producer waits for each of the driver's signals at most.
PHASE = 300.0
#: Seconds the Worker load's job records are kept (past any run: none is pruned).
HISTORY = 3600.0


class Phases:
    """The driver's signals to the producers: ``struck`` (the fault is in place: push
    the third quarter), ``healed`` (it is healed: push the last quarter), ``stop``
    (the run is over: give up)."""

    def __init__(self) -> None:
        self.struck, self.healed, self.stop = (threading.Event(), threading.Event(),
                                               threading.Event())

    def end(self) -> None:
        """Release every producer and consumer (the run is over)."""
        for event in (self.struck, self.healed, self.stop):
            event.set()

    def parts(self, total: int) -> List[Tuple[range, Optional[threading.Event]]]:
        """The values in the order they are pushed, each part with the signal it
        waits for first (None: none)."""
        half, three_quarters = total // 2, total * 3 // 4
        return [(range(half), None), (range(half, three_quarters), self.struck),
                (range(three_quarters, total), self.healed)]


class Progress:
    """What the driver waits on: every take notifies it."""

    def __init__(self) -> None:
        self.changed = threading.Condition()

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(predicate, timeout)

    def notify(self) -> None:
        with self.changed:
            self.changed.notify_all()


class Load:
    """One structure under producers and consumers (see the module docstring)."""

    name: ClassVar[str]
    #: Consumer threads (the Worker and the asyncio load run their own).
    consumers: ClassVar[int] = 2

    def __init__(self, db: Any, space: Any, total: int, seed: int, progress: Progress) -> None:
        self.db, self.space, self.total = db, space, total
        self.rng = random.Random(seed)
        self.progress = progress
        self.lock = threading.Lock()
        self.taken: List[Any] = []
        self.times: List[float] = []
        self.expired = 0  # acks refused: the lease had ended (the item came back)
        self.errors: List[str] = []

    # -- what each structure does --------------------------------------------------------

    def push(self, value: int) -> None:
        """Push ``value`` once, with an id (a retried push stores one item)."""
        raise NotImplementedError

    def take(self) -> Optional[Any]:
        """One attempt to consume: the value certainly taken, or None."""
        raise NotImplementedError

    def left(self) -> List[str]:
        """What the structure's counters and listings say is still there, where
        that is not nothing."""
        raise NotImplementedError

    def claim_and_ack(self, q: Any) -> Optional[Any]:
        """Claim from ``q`` (a Queue or FairQueue), then ack: the value, or None when
        nothing was visible or the ack came after the lease had ended (the item is
        then delivered again)."""
        lease = q.claim_wait(self.db, LEASE, timeout=WAIT)
        if lease is None:
            return None
        try:
            q.ack(self.db, lease)
        except LeaseExpiredError:
            with self.lock:
                self.expired += 1
            return None
        return lease.value

    # -- the threads ---------------------------------------------------------------------

    def threads(self, phases: Phases) -> List[threading.Thread]:
        """The producer and consumer threads of this load (not started)."""
        made = [threading.Thread(target=self.produce, args=(phases,),
                                 name=f"{self.name}-producer", daemon=True)]
        made += [threading.Thread(target=self.consume, args=(phases.stop,),
                                  name=f"{self.name}-consumer-{i}", daemon=True)
                 for i in range(self.consumers)]
        return made

    def produce(self, phases: Phases) -> None:
        for values, signal in phases.parts(self.total):
            if signal is not None and not signal.wait(PHASE):
                return
            self.push_all(values, phases.stop)

    def push_all(self, values: Sequence[int], stop: threading.Event) -> None:
        for value in values:
            while not stop.is_set():
                try:
                    self.push(value)
                    break
                except Exception as e:  # the library's loop gave up: a finding; retry
                    self.error(f"push {value} raised {e!r}")

    def consume(self, stop: threading.Event) -> None:
        while not stop.is_set() and not self.done():
            try:
                value = self.take()
            except Exception as e:  # a finding: recorded, reported by the test
                self.error(f"a take raised {e!r}")
                continue
            if value is not None:
                self.took(value)

    # -- the ledger ----------------------------------------------------------------------

    def took(self, value: Any) -> None:
        with self.lock:
            self.taken.append(value)
            self.times.append(time.monotonic())
        self.progress.notify()

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)

    def done(self) -> bool:
        return len(self.taken) >= self.total

    def count(self) -> int:
        return len(self.taken)

    def longest_wait(self, *moments: float) -> Optional[float]:
        """The longest time, from the first of ``moments`` (the fault struck, it was
        healed) to this load's last take, that passed without a take, not counting
        the time before a moment while consumers waited for the values the producer
        pushes after it: the longest of each moment's wait for the next take and
        the gaps between takes with no moment between them.  None: nothing was taken
        after some moment."""
        with self.lock:
            later = sorted(t for t in self.times if t > moments[0])
        waits = []
        for moment in moments:
            first = next((t for t in later if t > moment), None)
            if first is None:
                return None
            waits.append(first - moment)
        waits += [b - a for a, b in zip(later, later[1:])
                  if not any(a < moment <= b for moment in moments)]
        return max(waits)

    def problems(self) -> List[str]:
        """Everything wrong at the end: lost, doubled, counters not exact, errors."""
        found = [f"{self.name}: {e}" for e in self.errors[:5]]
        counts = Counter(self.taken)
        doubled = sorted(v for v, n in counts.items() if n > 1)
        lost = sorted(set(range(self.total)) - set(counts))
        if doubled:
            found.append(f"{self.name}: taken twice: {doubled[:10]}")
        if lost:
            found.append(f"{self.name}: lost (never taken): {lost[:10]} of {len(lost)}")
        found += [f"{self.name}: {what}" for what in self.left()]
        return found


def queue_left(q: Any, db: Any) -> List[str]:
    """A Queue's (or AsyncQueue's sync twin's) leftovers, where not nothing."""
    stats, size, items, dead = q.stats(db), q.size(db), q.items(db), q.dead(db)
    wrong = []
    if size != 0 or tuple(stats[:4]) != (0, 0, 0, 0):
        wrong.append(f"counters not exact: size {size}, stats {stats}")
    if items or dead:
        wrong.append(f"left: items {items[:10]}, dead {dead[:10]}")
    return wrong


class QueueClaims(Load):
    """Queue: claim, then ack."""

    name = "queue-claim-ack"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.q: Queue[int] = Queue(self.space)

    def push(self, value: int) -> None:
        self.q.push(self.db, value, id=b"%d" % value)

    def take(self) -> Optional[Any]:
        return self.claim_and_ack(self.q)

    def left(self) -> List[str]:
        return queue_left(self.q, self.db)


class HighContentionPops(Load):
    """Queue(high_contention=True): pops given a Database, three poppers."""

    name = "high-contention-pop"
    consumers = 3

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.q: Queue[int] = Queue(self.space, high_contention=True)

    def push(self, value: int) -> None:
        self.q.push(self.db, value, id=b"%d" % value)

    def take(self) -> Optional[Any]:
        value = self.q.pop(self.db)
        if value is None:
            self.q.wait(self.db, timeout=WAIT)
        return value

    def left(self) -> List[str]:
        return queue_left(self.q, self.db)


class FairClaims(Load):
    """FairQueue: three groups of different shares, claim then ack."""

    name = "fair-queue"
    GROUPS = ("acme", "globex", "initech")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.q = FairQueue(self.space)
        for share, group in enumerate(self.GROUPS, start=1):
            self.q.set_group(self.db, group, share=share, limit=4)

    def push(self, value: int) -> None:
        self.q.push(self.db, value, group=self.GROUPS[value % 3], id=b"%d" % value)

    def take(self) -> Optional[Any]:
        return self.claim_and_ack(self.q)

    def left(self) -> List[str]:
        stats = self.q.stats(self.db)
        assert isinstance(stats, dict)
        wrong = {g: s for g, s in stats.items() if tuple(s[:4]) != (0, 0, 0, 0)}
        dead = {g: self.q.dead(self.db, g) for g in self.GROUPS}
        return ([f"counters not exact: {wrong}"] if wrong else []) + (
            [f"dead letters: {dead}"] if any(dead.values()) else [])


class TreePops(Load):
    """WeightTree: weighted pushes, pops."""

    name = "weight-tree-pop"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.tree = WeightTree(self.space)
        self.weights = [self.rng.randrange(1, 1_000) for _ in range(self.total)]

    def push(self, value: int) -> None:
        self.tree.push(self.db, value, self.weights[value], id=b"%d" % value)

    def take(self) -> Optional[Any]:
        return self.tree.pop_wait(self.db, timeout=WAIT)

    def left(self) -> List[str]:
        size, weight, items = (self.tree.size(self.db), self.tree.total_weight(self.db),
                               self.tree.items(self.db))
        if size or weight or items:
            return [f"counters not exact: size {size}, total weight {weight}, items "
                    f"{items[:10]}"]
        return []


class WorkerJobs(Load):
    """A Worker (4 handler threads) over a Queue with job records (``history``); a
    job is taken when its ``JobFinished`` says ``ok`` (acked).  At the end every
    job's record says ``succeeded``, with the handler's result, once per job: each
    id has one record and one ``ok``."""

    name = "worker"
    consumers = 1

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.q: Queue[int] = Queue(self.space, history=HISTORY)
        self.handled: Counter[Any] = Counter()
        self.outcomes: Counter[str] = Counter()

    def push(self, value: int) -> None:
        self.q.push(self.db, value, id=b"%d" % value)

    def handle(self, job: Job) -> int:
        with self.lock:
            self.handled[job.value] += 1
        return job.value * 2

    def event(self, event: Any) -> None:
        if isinstance(event, JobFinished):
            with self.lock:
                self.outcomes[event.outcome] += 1
            if event.outcome == "ok":
                self.took(event.job.value)
            elif event.outcome not in ("lease_lost", "retry"):
                self.error(f"job {event.job.value} ended {event.outcome}: {event.error!r}")

    def consume(self, stop: threading.Event) -> None:
        with Worker(self.db, self.q, self.handle, concurrency=4, lease_seconds=LEASE,
                    on_event=self.event, shutdown_timeout=5):
            self.progress.wait_for(functools.partial(self.ended, stop), PHASE)

    def ended(self, stop: threading.Event) -> bool:
        return self.done() or stop.is_set()

    def problems(self) -> List[str]:
        """Also: every handler call ended in exactly one JobFinished."""
        found = super().problems()
        calls, finished = sum(self.handled.values()), sum(self.outcomes.values())
        if calls != finished:
            found.append(f"{self.name}: {calls} handler calls but {finished} JobFinished")
        return found + self.records_wrong()

    def records_wrong(self) -> List[str]:
        """Every job whose record does not say it succeeded with its result."""
        wrong = []
        for value in range(self.total):
            record = self.q.job(self.db, b"%d" % value)
            if record is None or record.state != "succeeded" or record.result != value * 2:
                wrong.append(f"{value}: {record}")
        return [f"{self.name}: job records not succeeded: {wrong[:5]} of {len(wrong)}"
                ] if wrong else []

    def left(self) -> List[str]:
        return queue_left(self.q, self.db)


class AsyncPops(Load):
    """aio.AsyncQueue: a producer task and three popping tasks on one event loop."""

    name = "asyncio-pop"
    consumers = 0

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.q: AsyncQueue[int] = AsyncQueue(self.space)

    def threads(self, phases: Phases) -> List[threading.Thread]:
        return [threading.Thread(target=asyncio.run, args=(self.main(phases),),
                                 name=f"{self.name}-loop", daemon=True)]

    async def main(self, phases: Phases) -> None:
        consumers = [asyncio.ensure_future(self.apop(phases.stop)) for _ in range(3)]
        for values, signal in phases.parts(self.total):
            if signal is not None and not await asyncio.to_thread(signal.wait, PHASE):
                break
            await self.apush(values, phases.stop)
        await asyncio.gather(*consumers)

    async def apush(self, values: Sequence[int], stop: threading.Event) -> None:
        for value in values:
            while not stop.is_set():
                try:
                    await self.q.push(self.db, value, id=b"%d" % value)
                    break
                except Exception as e:
                    self.error(f"push {value} raised {e!r}")

    async def apop(self, stop: threading.Event) -> None:
        while not stop.is_set() and not self.done():
            try:
                value = await self.q.pop_wait(self.db, timeout=WAIT)
            except Exception as e:
                self.error(f"a pop raised {e!r}")
                continue
            if value is not None:
                self.took(value)

    def left(self) -> List[str]:
        return queue_left(Queue(self.space), self.db)


#: Every load, in the order they are started.
LOADS = (QueueClaims, HighContentionPops, FairClaims, TreePops, WorkerJobs, AsyncPops)


def make_loads(db: Any, space: Any, total: int, seed: int, progress: Progress) -> List[Load]:
    """One of each :data:`LOADS`, each in ``space[name]``, seeded from ``seed``."""
    return [cls(db, space[cls.name], total, seed * 100 + i, progress)
            for i, cls in enumerate(LOADS)]


def summary(loads: Sequence[Load]) -> Dict[str, Any]:
    """Each load's counts, for the test's printed report."""
    return {load.name: dict(taken=load.count(), expired_acks=load.expired,
                            errors=len(load.errors)) for load in loads}
