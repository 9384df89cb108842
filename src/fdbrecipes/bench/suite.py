"""The suite: every measurement, in order, against one cluster (the parent process);
``run_bench`` and ``main``, the commands that run it."""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from fdb.subspace_impl import Subspace

from .. import FairQueue, Queue, WeightTree
from .._cluster import open_database, with_cluster
from .clients import BenchError, Job, run_clients
from .cpu import server_pids
from .fair import noisy_neighbour, time_claims
from .fill import FILLS as STRUCTURE_FILLS
from .fill import MAX_WEIGHT, TREE_FILL_BATCH, Filler, fill_fair_groups, group_name
from .flow import FLOW_FILLS
from .keyed import claim_latencies
from .machine import format_machine, machine_info
from .recipe import QUEUE_FILL_BATCH, chunks
from .report import publish
from .results import (
    Latency,
    NoisyNeighbour,
    Report,
    Results,
    Row,
    Tail,
    combined,
    latency,
    plural,
    summarize,
    with_ratios,
)
from .settings import (
    AIO_KINDS,
    AWAITED_READ,
    BLOCKING_READ,
    CLAIM_ACK,
    CODEC_KINDS,
    FAIR_KINDS,
    FANIN_CHILDREN,
    FLOW_KEYS,
    FLOW_PUSH_PROCESSES,
    FLOW_PUSHES,
    HISTORY_SECONDS,
    HOT_KINDS,
    HOT_ROUNDS,
    IDLE_PAIR,
    IDLE_SECONDS,
    IDLE_WORKER,
    JOB_RECORDS,
    JOB_SAMPLES,
    LIMIT,
    LIMIT_BATCH,
    LIMITED_CLAIMS,
    PLAIN_CLAIMS,
    POP_KINDS,
    PQ_KINDS,
    PUSH_KINDS,
    RAW_PUSH,
    RAW_WORKER,
    RECIPE_POP,
    SHARD_PAIRS,
    TASK_PROCESSES,
    TASK_PUSH,
    TASK_WORKER,
    THREAD_PUSH,
    THREAD_PUSH_ALONE,
    THREAD_PUSH_UNSHARED,
    THREAD_WRITE,
    TREE_POP,
    WORKER_KINDS,
    WORKFLOW_CREATE,
    WORKFLOW_FANIN,
    WORKFLOW_JOBS,
    WORKFLOW_PROCESSES,
    WORKFLOW_PUSH_MANY,
    Kind,
    Settings,
    add_arguments,
    settings_from_args,
)
from .tasks import TASK_FILLS
from .workflows import WORKFLOW_FILLS

#: How each draining op's structure is pre-filled: the structures' fills, the tasks',
#: the flow group's and the workflow group's.
FILLS: Dict[str, Filler] = {**STRUCTURE_FILLS, **TASK_FILLS, **FLOW_FILLS, **WORKFLOW_FILLS}
#: First element of every measurement's subspace prefix.
ROOT = "fdbrecipes-bench"


def progress(message: str) -> None:
    """Say what is being measured now (stderr, so stdout holds only the results)."""
    print(f"  ... {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Runtime:
    """How a suite reaches the world: the cluster, this machine, the client
    processes, the fills.  The defaults are the real ones; tests of the suite's order
    pass stand-ins (a documented testing hook, instead of patching the module).

    Attributes:
        open_database: opens the cluster file (selects the API version).
        server_pids: the ``fdbserver`` processes on this machine for a cluster file.
        machine_info: (db, cluster name) -> the machine's description.
        format_machine: that description -> the lines printed.
        run_clients: (context, job, clients) -> one report per client process.
        fills: by operation, how a drained structure is pre-filled.
        latency: whether the measurements made in this process run (WeightTree
            latency; the fair queue's latency and noisy neighbour; the flow group's
            claim latency).
    """

    open_database: Callable[[str], Any] = open_database
    server_pids: Callable[[str], Tuple[int, ...]] = server_pids
    machine_info: Callable[[Any, str], Dict[str, Any]] = machine_info
    format_machine: Callable[[Dict[str, Any]], str] = format_machine
    run_clients: Callable[[Any, Job, int], List[Report]] = run_clients
    fills: Mapping[str, Filler] = field(default_factory=lambda: dict(FILLS))
    latency: bool = True


class Suite:
    """Runs every measurement against one cluster (the parent process).

    The servers' CPU time is read from the ``fdbserver`` processes found on this
    machine for ``cluster_file`` (:func:`~fdbrecipes.bench.cpu.server_pids`), if any.
    """

    def __init__(self, cluster_file: str, settings: Settings,
                 runtime: Optional[Runtime] = None) -> None:
        self.cluster_file = cluster_file
        self.settings = settings
        self.io = runtime if runtime is not None else Runtime()
        self.db = self.io.open_database(cluster_file)
        self.context = multiprocessing.get_context("spawn")
        self.server_pids = self.io.server_pids(cluster_file)

    def run(self, cluster: str) -> Results:
        """Every measurement of the groups ``--only`` selects, in order: limit, pushes,
        Queue pops, claims, WeightTree pops, PriorityQueue pops, the hot paths, the
        async rows, the worker rows, the fair queue, the shards, the tasks, flow
        control, workflows, WeightTree latency."""
        machine = self.io.machine_info(self.db, cluster)
        machine["server_processes_sampled"] = len(self.server_pids)
        print(self.io.format_machine(machine), flush=True)
        rows = self.limits()
        if self.settings.runs("push"):
            rows += self.pushes()
        rows += self.pops() if self.settings.runs("pops") else self.baselines()
        if self.settings.runs("claim"):
            rows += self.claims()
        if self.settings.runs("tree"):
            rows += self.tree_pops()
        if self.settings.runs("pq"):
            rows += self.pq_pops()
        if self.settings.runs("hot"):
            rows += self.hot()
        if self.settings.runs("aio"):
            rows += self.aio()
        jobs: List[Latency] = []
        if self.settings.runs("worker"):
            rows += self.workers()
            if self.io.latency:
                jobs = [self.job_latency()]
        fair: List[Latency] = []
        noisy: Optional[NoisyNeighbour] = None
        if self.settings.runs("fair"):
            rows += self.fair_claims()
            if self.io.latency:
                fair, noisy = self.fair_latencies(), self.noisy_neighbour()
        if self.settings.runs("shards"):
            rows += self.shards()
        if self.settings.runs("tasks"):
            rows += self.tasks()
        flow: List[Tail] = []
        if self.settings.runs("flow"):
            rows += self.flow()
            if self.io.latency:
                flow = self.flow_latencies()
        if self.settings.runs("workflow"):
            rows += self.workflows()
        latencies = (self.weight_tree()
                     if self.settings.runs("latency") and self.io.latency else [])
        return Results(machine, self.settings, with_ratios(rows), latencies, fair, noisy, jobs,
                       flow)

    @contextlib.contextmanager
    def space(self, name: str) -> Iterator[Tuple[str, ...]]:
        """A fresh subspace prefix ``("fdbrecipes-bench", uuid, name)``, cleared after."""
        prefix = (ROOT, uuid.uuid4().hex, name)
        try:
            yield prefix
        finally:
            r = Subspace(prefix).range()
            self.db.clear_range(r.start, r.stop)

    def measure(self, kind: Kind, clients: int, prefix: Tuple[str, ...],
                duration: Optional[float] = None) -> Row:
        """Run ``kind`` with ``clients`` processes in the subspace ``prefix``: for
        ``duration`` seconds (default ``--duration``), or until drained."""
        if kind.drains:
            duration = None
        elif duration is None:
            duration = self.settings.duration
        job = Job(kind.op, kind.batch, self.cluster_file, prefix, duration, self.server_pids)
        progress(f"{kind.label}, {plural(clients, 'client')}")
        return summarize(kind, clients, self.io.run_clients(self.context, job, clients))

    def timed(self, kind: Kind, clients: int, duration: Optional[float] = None) -> Row:
        """``clients`` processes doing ``kind`` for ``duration`` seconds (default
        ``--duration``)."""
        with self.space(f"{kind.op}-{kind.batch}-{clients}") as prefix:
            return self.measure(kind, clients, prefix, duration)

    def rotated(self, kinds: Tuple[Kind, ...], clients: int,
                turns: Optional[int] = None, items: Optional[int] = None) -> List[Row]:
        """Each of ``kinds`` with ``clients`` processes in ``turns`` rounds (default:
        as many as there are kinds), the order rotated each round (with as many
        rounds as kinds, every kind runs once in every position): a passing load on
        the cluster, such as its clearing of the writes measured just before, weighs
        on them alike.  A timed kind runs ``--duration`` seconds in all, a draining
        one drains ``items`` items (default ``--items``) each round.  A kind's rounds
        are summed into one row."""
        turns = len(kinds) if turns is None else turns
        share = self.settings.duration / turns
        rounds: Dict[str, List[Row]] = {kind.label: [] for kind in kinds}
        for turn in range(turns):
            at = turn % len(kinds)
            for kind in kinds[at:] + kinds[:at]:
                rounds[kind.label].append(self.drained(kind, clients, items) if kind.drains
                                          else self.timed(kind, clients, share))
        return [combined(rounds[kind.label]) for kind in kinds]

    def drained(self, kind: Kind, clients: int, items: Optional[int] = None) -> Row:
        """``clients`` processes emptying a structure pre-filled with ``items`` items
        (default ``--items``), each until its pop or claim gets nothing."""
        items = self.settings.items if items is None else items
        with self.space(f"{kind.op}-{clients}") as prefix:
            self.io.fills[kind.op](self.db, Subspace(prefix), items, self.settings.seed)
            row = self.measure(kind, clients, prefix)
        if row.count != items:
            print(f"warning: {kind.label} with {plural(clients, 'client')} took {row.count} "
                  f"of {items} items", file=sys.stderr)
        return row

    def limits(self) -> List[Row]:
        """The limit: 1-key write transactions at every client count, then 100-key
        write transactions at 1 and K clients."""
        rows = [self.timed(LIMIT, c) for c in self.settings.clients]
        return rows + [self.timed(LIMIT_BATCH, c) for c in self.settings.ends]

    def pushes(self) -> List[Row]:
        """Queue.push(db), Queue.push(tr), Queue.push_many(100) and the recipe's push at
        1 and K clients, rotated (:meth:`rotated`)."""
        return [row for c in self.settings.ends for row in self.rotated(PUSH_KINDS, c)]

    def pops(self) -> List[Row]:
        """The recipe's pop, Queue.pop, Queue.pop(spread=16) and the high-contention pop,
        interleaved at every popper count."""
        return [self.drained(kind, p) for p in self.settings.clients for kind in POP_KINDS]

    def baselines(self) -> List[Row]:
        """Instead of the "pops" group (which measures it everywhere): the recipe's pop
        at the client counts where a selected group (claim, pq) compares with it."""
        counts = set()
        if self.settings.runs("claim"):
            counts |= set(self.settings.ends)
        if self.settings.runs("pq"):
            counts |= set(self.settings.coarse)
        return [self.drained(RECIPE_POP, c) for c in sorted(counts)]

    def claims(self) -> List[Row]:
        """claim_many(100) + ack_many at 1 and K clients, each draining a queue of
        :meth:`Settings.claim_items` items."""
        return [self.drained(CLAIM_ACK, c, self.settings.claim_items(c))
                for c in self.settings.ends]

    def tree_pops(self) -> List[Row]:
        """WeightTree.pop draining a tree of ``--items`` items at 1, 4, 16 clients."""
        return [self.drained(TREE_POP, c) for c in self.settings.coarse]

    def pq_pops(self) -> List[Row]:
        """PriorityQueue.pop_min and pop_max, interleaved, at 1, 4, 16 clients."""
        return [self.drained(kind, c) for c in self.settings.coarse for kind in PQ_KINDS]

    def hot(self) -> List[Row]:
        """The hot paths at K clients, in :data:`HOT_ROUNDS` rotated rounds
        (:meth:`rotated`): the bare probe pop and ``Queue.pop(spread=16)``, each
        draining :attr:`Settings.hot_items` items, the limit, and ``WeightTree.pop``
        draining as many; the spread pop is compared with the probe, the tree's pop
        with this limit."""
        return self.rotated(HOT_KINDS, self.settings.most, HOT_ROUNDS, self.settings.hot_items)

    def aio(self) -> List[Row]:
        """One async process with 16 and with 64 tasks: pushes (timed, sharing
        transactions), spread pops of ``--items`` and claim+ack of as many items as
        the sync claims at K clients (draining); one process's 16 threads pushing
        given a Database as before they shared (the baseline), each in a transaction
        of its own without a receipt, given a Database (sharing), and writing one key
        a transaction (the floor of a commit per call), in rotated rounds;
        then the client CPU of a read blocked on and of one awaited, one after the
        other."""
        rows = []
        for kind in AIO_KINDS:
            if kind.op == "aio-claim-ack":
                rows.append(self.drained(kind, 1, self.settings.claim_items(self.settings.most)))
            elif kind.drains:
                rows.append(self.drained(kind, 1))
            else:
                rows.append(self.timed(kind, 1))
        rows += self.rotated((THREAD_PUSH_UNSHARED, THREAD_PUSH_ALONE, THREAD_PUSH,
                              THREAD_WRITE), 1)
        return rows + [self.timed(BLOCKING_READ, 1), self.timed(AWAITED_READ, 1)]

    def workers(self) -> List[Row]:
        """Workers (concurrency 8, a handler that returns at once) draining a queue at
        1 and K processes, beside the same claims and acks in bare loops; then the CPU
        of an idle worker, and, once started, of one without schedules beside one
        carrying a store of 1,000 (neither due)."""
        rows = []
        for clients in self.settings.ends:
            items = self.settings.claim_items(clients)
            rows += [self.drained(kind, clients, items) for kind in WORKER_KINDS]
        rows.append(self.timed(IDLE_WORKER, 1, IDLE_SECONDS))
        return rows + [self.timed(kind, 1, IDLE_SECONDS) for kind in IDLE_PAIR]

    def job_latency(self) -> Latency:
        """``Queue.job`` latency: a Queue made with ``history`` holding
        :data:`JOB_RECORDS` jobs, half of them finished (popped), and
        :data:`JOB_SAMPLES` reads of random ids among them."""
        rng = random.Random(self.settings.seed)
        with self.space("job-records") as prefix:
            queue = Queue(Subspace(prefix), history=HISTORY_SECONDS)
            progress(f"Queue.job: {JOB_RECORDS:,} records")
            ids: List[bytes] = []
            for chunk in chunks(0, JOB_RECORDS, QUEUE_FILL_BATCH):
                ids += queue.push_many(self.db, chunk)
            queue.pop_many(self.db, JOB_RECORDS // 2)
            seconds = []
            for id_ in rng.sample(ids, JOB_SAMPLES):
                start = time.perf_counter()
                if queue.job(self.db, id_) is None:
                    raise BenchError(f"Queue.job found no record of {id_!r}")
                seconds.append(time.perf_counter() - start)
        return latency(JOB_RECORDS, seconds)

    def fair_claims(self) -> List[Row]:
        """Queue.claim+ack and FairQueue.claim+ack (``--items`` items over 1,000
        groups), one item at a time, draining, at 1 and K clients."""
        return [self.drained(kind, c) for c in self.settings.ends for kind in FAIR_KINDS]

    def shards(self) -> List[Row]:
        """Each pair of :data:`SHARD_PAIRS` (an unsharded queue's row, the same row
        with 8 shards) at K clients, side by side: pushes rotated (:meth:`rotated`),
        draining claims in the order unsharded, sharded, sharded, unsharded, each
        pair's two rounds summed into one row."""
        rows: List[Row] = []
        most = self.settings.most
        for plain, spread in SHARD_PAIRS:
            if not plain.drains:
                rows += self.rotated((plain, spread), most)
                continue
            items = self.settings.claim_items(most) if plain.batch > 1 else self.settings.items
            rows += self.side_by_side(plain, spread, most, items)
        return rows

    def side_by_side(self, first: Kind, second: Kind, clients: int, items: int) -> List[Row]:
        """Two draining kinds at ``clients`` processes, each draining ``items`` items
        twice, in the order first, second, second, first (a passing load weighs on
        both alike); each kind's two drains summed into one row."""
        runs = [self.drained(kind, clients, items) for kind in (first, second, second, first)]
        return [combined([runs[0], runs[3]]), combined([runs[1], runs[2]])]

    def tasks(self) -> List[Row]:
        """Tasks beside the raw calls (:mod:`.tasks`), at 4 processes (K if fewer):
        ``task.defer(db)`` and ``Queue.push(db)`` rotated; ``Worker(db, app)`` and the
        raw Worker draining in the order raw, task, task, raw, each pair of rounds
        summed; then each codec's cost per job in one process."""
        clients = min(TASK_PROCESSES, self.settings.most)
        rows = self.rotated((RAW_PUSH, TASK_PUSH), clients)
        rows += self.side_by_side(RAW_WORKER, TASK_WORKER, clients,
                                  self.settings.claim_items(clients))
        return rows + [self.timed(kind, 1) for kind in CODEC_KINDS]

    def flow(self) -> List[Row]:
        """Flow control beside the same work without it (:mod:`.flow`):
        ``claim_many(100)`` + ack at K clients draining as many items as the claims
        at K, on a queue without limits and on one under a global
        ``concurrency(10,000)`` (:meth:`side_by_side`); then a push given a fresh
        ``id`` and one given a fresh ``unique`` key, at 4 processes (K if fewer),
        rotated (:meth:`rotated`)."""
        most = self.settings.most
        rows = self.side_by_side(PLAIN_CLAIMS, LIMITED_CLAIMS, most,
                                 self.settings.claim_items(most))
        return rows + self.rotated(FLOW_PUSHES, min(FLOW_PUSH_PROCESSES, most))

    def workflows(self) -> List[Row]:
        """Workflows beside the same jobs without them (:mod:`.workflows`), at 4
        processes (K if fewer): workers draining :data:`FANIN_CHILDREN` independent
        jobs and a fan-in of as many children and its callback, in the order jobs,
        fan-in, fan-in, jobs, each kind's two drains summed; then ``push_many`` of
        :data:`~.settings.CREATE_NODES` items and ``Workflows.create`` of as many nodes, in one
        process, rotated (:meth:`rotated`)."""
        clients = min(WORKFLOW_PROCESSES, self.settings.most)
        items = {WORKFLOW_JOBS: FANIN_CHILDREN, WORKFLOW_FANIN: FANIN_CHILDREN + 1}
        runs = [self.drained(kind, clients, items[kind])
                for kind in (WORKFLOW_JOBS, WORKFLOW_FANIN, WORKFLOW_FANIN, WORKFLOW_JOBS)]
        rows = [combined([runs[0], runs[3]]), combined([runs[1], runs[2]])]
        return rows + self.rotated((WORKFLOW_PUSH_MANY, WORKFLOW_CREATE), 1)

    def flow_latencies(self) -> List[Tail]:
        """``Queue.claim`` latency with 10,000 keys each holding a job under a keyed
        ``concurrency(1)``, beside a plain Queue's, ``--samples`` claims of each
        (:func:`~fdbrecipes.bench.keyed.claim_latencies`)."""
        progress(f"Queue.claim latency: {FLOW_KEYS:,} keys, keyed limit and plain")
        with self.space("flow-plain") as plain, self.space("flow-keyed") as keyed:
            return claim_latencies(self.db, Subspace(plain), Subspace(keyed), FLOW_KEYS,
                                   self.settings.samples)

    def fair_latencies(self) -> List[Latency]:
        """FairQueue.claim latency with 10^2, 10^4, 10^5 groups with work (one item
        each, pushed again after each claim's ack): ``--samples`` claims each."""
        latencies = []
        with self.space("fair-latency") as prefix:
            queue = FairQueue(Subspace(prefix))
            n = 0
            for size in self.settings.fair_sizes:
                progress(f"FairQueue: filling to {size:,} groups")
                fill_fair_groups(self.db, queue, [group_name(i) for i in range(n, size)])
                n = size
                progress(f"FairQueue: {self.settings.samples} claims at {size:,} groups")
                latencies.append(latency(size, time_claims(self.db, queue,
                                                           self.settings.samples)))
        return latencies

    def noisy_neighbour(self) -> NoisyNeighbour:
        """The noisy neighbour (:func:`~fdbrecipes.bench.fair.noisy_neighbour`)."""
        progress("FairQueue: the noisy neighbour")
        with self.space("fair-noisy") as prefix:
            return noisy_neighbour(self.db, FairQueue(Subspace(prefix)))

    def weight_tree(self) -> List[Latency]:
        """WeightTree.pop latency at each size: grow the tree with push_many (random
        weights 1..100), then time ``--samples`` pops, each followed by an untimed push
        that keeps n constant."""
        rng = random.Random(self.settings.seed)
        latencies = []
        with self.space("weight-tree") as prefix:
            tree = WeightTree(Subspace(prefix), rng=random.Random(self.settings.seed + 1))
            n = 0
            for size in self.settings.sizes:
                progress(f"WeightTree: filling to {size:,} items")
                for chunk in chunks(n, size, TREE_FILL_BATCH):
                    tree.push_many(self.db, [(i, rng.randint(1, MAX_WEIGHT)) for i in chunk])
                n = size
                progress(f"WeightTree: {self.settings.samples} pops at {size:,} items")
                latencies.append(latency(size, self.time_pops(tree, rng)))
        return latencies

    def time_pops(self, tree: WeightTree, rng: random.Random) -> List[float]:
        """Seconds taken by each of ``--samples`` pops (the pushes are not timed)."""
        seconds = []
        for _ in range(self.settings.samples):
            start = time.perf_counter()
            value = tree.pop(self.db)
            seconds.append(time.perf_counter() - start)
            if value is None:
                raise BenchError("the WeightTree was empty during the latency measurement")
            tree.push(self.db, value, rng.randint(1, MAX_WEIGHT))
        return seconds


# --------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------


def _cluster_name() -> str:
    """How the results name the cluster they were measured on."""
    configured = os.environ.get("FDB_CLUSTER_FILE")
    if configured:
        return f"FDB_CLUSTER_FILE={configured}"
    return "throwaway local fdbserver (single process, memory engine)"


def run_bench(args: argparse.Namespace) -> int:
    """Run the suite; 1 (with the reason on stderr) when it cannot run, else 0.

    A missed target is reported, never an error.
    """
    settings = settings_from_args(args)

    def body(cluster_file: str) -> int:
        try:
            results = Suite(cluster_file, settings).run(_cluster_name())
        except BenchError as e:
            print(f"fdbrecipes bench: failed: {e}", file=sys.stderr)
            return 1
        publish(results)
        return 0

    return with_cluster("bench", body)


def main(argv: Optional[List[str]] = None) -> int:
    """``python benchmarks/run.py [options]``: the same as ``fdbrecipes bench``."""
    parser = argparse.ArgumentParser(prog="benchmarks/run.py")
    add_arguments(parser)
    return run_bench(parser.parse_args(argv))
