"""What the benchmark measures, and the run's parameters from the command line.

A :class:`Kind` says what the clients of one measurement do and how its rate is named;
the kinds are grouped (:data:`GROUPS`) so that ``--only`` can rerun a few of them.
:class:`Settings` holds the run's parameters, which :func:`add_arguments` and
:func:`settings_from_args` make from ``fdbrecipes bench``'s options.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

#: Client process counts the suite measures at (capped by ``--clients``).
CLIENT_COUNTS = (1, 2, 4, 8, 16)
#: Client counts of the WeightTree and PriorityQueue pops (capped by ``--clients``).
COARSE_COUNTS = (1, 4, 16)
#: WeightTree sizes (``--quick`` stops at 10^5).
TREE_SIZES = (10**3, 10**4, 10**5, 10**6)
QUICK_TREE_SIZES = TREE_SIZES[:3]
DEFAULT_DURATION = 5.0
QUICK_DURATION = 1.0
#: ``spread`` of the relaxed-order pop.
SPREAD = 16
#: Items per ``claim_many`` (and so per ``ack_many``).
CLAIM_BATCH = 100
#: Lease of the claimed items: far longer than a claim and its ack take.
LEASE_SECONDS = 30.0
#: ``claim_many`` calls each client makes at least, when the queue is drained.
CLAIM_ROUNDS = 10
#: Most items a claim measurement pre-fills beyond ``--items``.
CLAIM_FILL_CAP = 100_000
#: Priorities a PriorityQueue is pre-filled over (item i has priority i mod this).
PQ_PRIORITIES = 4
#: Tasks of the one async client process the ``aio`` group measures with.
AIO_TASKS = (16, 64)
#: Seconds a benchmarked structure made with ``history`` keeps finished job records.
HISTORY_SECONDS = 3600.0
#: Job records ``Queue.job`` is timed among (half finished, half pending), and calls.
JOB_RECORDS, JOB_SAMPLES = 10_000, 200
#: A measured worker's concurrency (and the spread of its claims).
WORKER_CONCURRENCY = 8
#: Seconds an idle worker is watched for its CPU.
IDLE_SECONDS = 3.0
#: Stored schedules of the idle worker carrying a store, and the seconds the idle pair
#: of workers runs before it is measured (the store read, the first watches set).
IDLE_SCHEDULES = 1_000
WARM_UP = 2.0
#: Groups of the FairQueue whose claims are compared with Queue.claim.
FAIR_GROUPS = 1_000
#: Group counts at which FairQueue.claim latency is measured (``--quick``: the first two).
FAIR_SIZES = (10**2, 10**4, 10**5)
QUICK_FAIR_SIZES = FAIR_SIZES[:2]
#: The noisy neighbour: items of the loud group, groups beside it and their items each.
NOISY_ITEMS, QUIET_GROUPS, QUIET_ITEMS = 20_000, 10, 20
#: The hot paths (group ``hot``): items each drain takes at least, and rounds.
HOT_ITEMS, HOT_ROUNDS = 4_000, 3
#: Shards of the sharded rows (the "shards" group), measured beside the same rows of
#: an unsharded queue.
BENCH_SHARDS = 8


# --------------------------------------------------------------------------------------
# What is measured
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One kind of measurement: what its clients do and how its rate is named.

    Attributes:
        label: its name in the table.
        op: the client operation (a key of :data:`fdbrecipes.bench.operations.FACTORIES`;
            for the kinds that drain, also of :data:`fdbrecipes.bench.fill.FILLS`).
        batch: items per operation (keys per transaction, values per push_many, leases
            per claim_many).
        unit: what the rate counts.
        recipe: label of the baseline it is compared with in the "x recipe" column
            (None: none): the recipe's push or pop, or, for the ``hot`` rows, the
            bare probe pop or the limit measured in the same rounds.
        drains: True for pops and claims, which empty a pre-filled structure; False
            for operations run for ``--duration`` seconds.
        tasks: for the ``aio`` kinds, the tasks its one client process runs (the
            factory gets them as its batch); 0 for the others.
    """

    label: str
    op: str
    batch: int
    unit: str
    recipe: Optional[str]
    drains: bool = False
    tasks: int = 0


LIMIT = Kind("limit: 1-key write tx", "write", 1, "tx/s", None)
LIMIT_BATCH = Kind("limit: 100-key write tx", "write", 100, "keys/s", None)
RECIPE_PUSH = Kind("recipe push", "recipe-push", 1, "items/s", "recipe push")
PUSH = Kind("Queue.push(db)", "push", 1, "items/s", RECIPE_PUSH.label)
PUSH_TR = Kind("Queue.push(tr)", "push-tr", 1, "items/s", RECIPE_PUSH.label)
PUSH_MANY = Kind("Queue.push_many(100)", "push", 100, "items/s", RECIPE_PUSH.label)
RECIPE_POP = Kind("recipe pop", "recipe-pop", 1, "pops/s", "recipe pop", drains=True)
POP = Kind("Queue.pop", "pop", 1, "pops/s", RECIPE_POP.label, drains=True)
SPREAD_POP = Kind(f"Queue.pop spread={SPREAD}", "spread-pop", 1, "pops/s", RECIPE_POP.label,
                  drains=True)
HC_POP = Kind("Queue.pop high_contention", "hc-pop", 1, "pops/s", RECIPE_POP.label,
              drains=True)
CLAIM_ACK = Kind(f"claim_many({CLAIM_BATCH})+ack", "claim-ack", CLAIM_BATCH, "items/s",
                 RECIPE_POP.label, drains=True)
TREE_POP = Kind("WeightTree.pop", "tree-pop", 1, "pops/s", None, drains=True)
PQ_POP_MIN = Kind("PriorityQueue.pop_min", "pq-pop-min", 1, "pops/s", RECIPE_POP.label,
                  drains=True)
PQ_POP_MAX = Kind("PriorityQueue.pop_max", "pq-pop-max", 1, "pops/s", RECIPE_POP.label,
                  drains=True)


def aio_kinds(tasks: int) -> Tuple[Kind, ...]:
    """The async rows with ``tasks`` tasks in one process: push, spread pop, claim+ack."""
    return (
        Kind(f"aio push(db), {tasks} tasks", "aio-push", tasks, "items/s", None, tasks=tasks),
        Kind(f"aio pop spread={SPREAD}, {tasks} tasks", "aio-spread-pop", tasks, "pops/s",
             None, drains=True, tasks=tasks),
        Kind(f"aio claim_many({CLAIM_BATCH})+ack, {tasks} tasks", "aio-claim-ack", tasks,
             "items/s", None, drains=True, tasks=tasks),
    )


#: Threads of the one process of the threads rows: pushes given a Database (sharing
#: transactions) beside the same threads' pushes as they ran before they shared (the
#: baseline) and each in an application's transaction of its own.
THREADS = 16
THREAD_PUSH_UNSHARED = Kind(f"Queue.push(db) unshared (before), {THREADS} threads",
                            "thread-push-unshared", THREADS, "items/s", None)
THREAD_PUSH_ALONE = Kind(f"Queue.push(tr), a transaction each, {THREADS} threads",
                         "thread-push-alone", THREADS, "items/s", None)
THREAD_PUSH = Kind(f"Queue.push(db), {THREADS} threads", "thread-push", THREADS, "items/s",
                   None)
THREAD_WRITE = Kind(f"limit: 1-key write tx, {THREADS} threads", "thread-write", THREADS,
                    "tx/s", None)
#: Client CPU per read, blocked on and awaited (one client, one task, timed).
BLOCKING_READ = Kind("blocking read", "blocking-read", 1, "reads/s", None)
AWAITED_READ = Kind("awaited read", "awaited-read", 1, "reads/s", None)
WORKER = Kind(f"Worker(concurrency={WORKER_CONCURRENCY})", "worker", WORKER_CONCURRENCY,
              "items/s", None, drains=True)
#: The same worker on a Queue made with ``history``: every job's record kept.
HISTORY_WORKER = Kind(f"Worker(concurrency={WORKER_CONCURRENCY}), history", "history-worker",
                      WORKER_CONCURRENCY, "items/s", None, drains=True)
#: What a worker adds to: the same claims and acks in a bare loop.
BARE_CLAIMS = Kind(f"claim_many({WORKER_CONCURRENCY}, spread={WORKER_CONCURRENCY})+ack",
                   "spread-claim-ack", WORKER_CONCURRENCY, "items/s", None, drains=True)
#: A worker on an empty queue, timed: its CPU is what matters.
IDLE_WORKER = Kind("Worker, idle", "idle-worker", WORKER_CONCURRENCY, "items/s", None)
#: Idle workers measured once started (after :data:`WARM_UP` seconds), side by side:
#: one with no schedule, one carrying a store of :data:`IDLE_SCHEDULES` schedules none
#: of which is due (daily ones).
IDLE_STARTED = Kind("Worker, idle, started", "idle-started", WORKER_CONCURRENCY, "items/s",
                    None)
IDLE_STORED = Kind(f"Worker, idle, {IDLE_SCHEDULES:,} stored schedules", "idle-schedules",
                   WORKER_CONCURRENCY, "items/s", None)
IDLE_PAIR = (IDLE_STARTED, IDLE_STORED)
#: One claim and its ack at a time, on a Queue and on a FairQueue of many groups.
QUEUE_CLAIM = Kind("Queue.claim+ack", "claim-one", 1, "items/s", None, drains=True)
FAIR_CLAIM = Kind(f"FairQueue.claim+ack {FAIR_GROUPS:,} g", "fair-claim-one", 1, "items/s",
                  None, drains=True)
FAIR_KINDS = (QUEUE_CLAIM, FAIR_CLAIM)
#: The hot paths, at K clients in rotated rounds: the spread pop beside the simplest
#: code doing its work (a snapshot read of the first 16 items, one taken at random
#: with a read conflict on it, cleared), and WeightTree.pop beside the limit.
PROBE_POP = Kind("hot: bare probe pop", "probe-pop", 1, "pops/s", None, drains=True)
HOT_SPREAD_POP = Kind(f"hot: Queue.pop spread={SPREAD}", "spread-pop", 1, "pops/s",
                      PROBE_POP.label, drains=True)
HOT_LIMIT = Kind("hot: limit 1-key write tx", "write", 1, "tx/s", None)
HOT_TREE_POP = Kind("hot: WeightTree.pop", "tree-pop", 1, "pops/s", HOT_LIMIT.label,
                    drains=True)
HOT_KINDS = (PROBE_POP, HOT_SPREAD_POP, HOT_LIMIT, HOT_TREE_POP)


def shard_pair(label: str, op: str, batch: int, unit: str, recipe: Optional[str],
               drains: bool) -> Tuple[Kind, Kind]:
    """A row of an unsharded queue and the same row with :data:`BENCH_SHARDS` shards
    (its op ``sharded-`` ``op``), measured side by side in the "shards" group."""
    return (Kind(f"{label}, 1 shard", op, batch, unit, recipe, drains),
            Kind(f"{label}, {BENCH_SHARDS} shards", f"sharded-{op}", batch, unit, recipe,
                 drains))


#: The "shards" group's pairs: pushes (timed), claims in batches and one at a time
#: (draining).
SHARD_PAIRS = (
    shard_pair("Queue.push(db)", "push", 1, "items/s", RECIPE_PUSH.label, False),
    shard_pair(f"claim_many({CLAIM_BATCH})+ack", "claim-ack", CLAIM_BATCH, "items/s",
               RECIPE_POP.label, True),
    shard_pair("Queue.claim+ack", "claim-one", 1, "items/s", None, True),
)
SHARD_KINDS = tuple(kind for pair in SHARD_PAIRS for kind in pair)
#: The "tasks" group (:mod:`fdbrecipes.bench.tasks`): processes of the push and
#: drain rows (each worker of :data:`WORKER_CONCURRENCY`), a task's push beside the
#: raw push on the same kind of queue (``history``), ``Worker(db, app)`` beside the raw
#: Worker, and the codecs' cost per job (one process, no cluster).
TASK_PROCESSES = 4
RAW_PUSH = Kind("tasks: Queue.push(db), history", "task-raw-push", 1, "items/s", None)
TASK_PUSH = Kind("tasks: task.defer(db)", "task-push", 1, "items/s", RAW_PUSH.label)
RAW_WORKER = Kind(f"tasks: Worker(queue, handler), history, concurrency={WORKER_CONCURRENCY}",
                  "history-worker", WORKER_CONCURRENCY, "items/s", None, drains=True)
TASK_WORKER = Kind(f"tasks: Worker(db, app), no-op task, concurrency={WORKER_CONCURRENCY}",
                   "task-worker", WORKER_CONCURRENCY, "items/s", RAW_WORKER.label,
                   drains=True)
CODEC_KINDS = (Kind("codec per job: JSON", "codec-json", 1, "jobs/s", None),
               Kind("codec per job: MsgPack", "codec-msgpack", 1, "jobs/s", None),
               Kind("codec per job: Encrypted(JSON), AES-GCM", "codec-encrypted", 1,
                    "jobs/s", None))
TASK_KINDS = (RAW_PUSH, TASK_PUSH, RAW_WORKER, TASK_WORKER, *CODEC_KINDS)
#: The "flow" group (:mod:`fdbrecipes.bench.flow`, issue 40): claim_many(100)+ack at K
#: clients on a queue under a global concurrency limit far above what they hold,
#: beside the same queue without it; a push with a unique key beside one with an id,
#: at 4 processes (K if fewer); and, in the parent, ``Queue.claim`` latency over
#: :data:`FLOW_KEYS` keys each under a keyed concurrency limit beside a plain
#: Queue's, claim for claim.
FLOW_GLOBAL_LIMIT = 10_000
FLOW_KEYS = 10_000
FLOW_KEYED_LIMIT = 1
FLOW_PUSH_PROCESSES = 4
PLAIN_CLAIMS = Kind(f"flow: claim_many({CLAIM_BATCH})+ack, no limit", "claim-ack",
                    CLAIM_BATCH, "items/s", None, drains=True)
LIMITED_CLAIMS = Kind(f"flow: claim_many({CLAIM_BATCH})+ack, concurrency({FLOW_GLOBAL_LIMIT:,})",
                      "limited-claim-ack", CLAIM_BATCH, "items/s", PLAIN_CLAIMS.label,
                      drains=True)
ID_PUSH = Kind("flow: Queue.push(db, id=)", "id-push", 1, "items/s", None)
UNIQUE_PUSH = Kind("flow: Queue.push(db, unique=)", "unique-push", 1, "items/s",
                   ID_PUSH.label)
FLOW_PUSHES = (ID_PUSH, UNIQUE_PUSH)
FLOW_KINDS = (PLAIN_CLAIMS, LIMITED_CLAIMS, *FLOW_PUSHES)
#: The "workflow" group (:mod:`fdbrecipes.bench.workflows`, issue 41): a fan-in of
#: :data:`FANIN_CHILDREN` no-op children and a callback drained by
#: :data:`WORKFLOW_PROCESSES` workers (each of :data:`WORKER_CONCURRENCY`) beside as
#: many independent no-op jobs on the same workers; creating a workflow of
#: :data:`CREATE_NODES` nodes beside ``push_many`` of as many items, in one process.
FANIN_CHILDREN = 1_000
WORKFLOW_PROCESSES = 4
CREATE_NODES = 10_000
WORKFLOW_JOBS = Kind(f"workflow: {FANIN_CHILDREN:,} jobs, Worker(concurrency="
                     f"{WORKER_CONCURRENCY})", "worker", WORKER_CONCURRENCY, "items/s",
                     None, drains=True)
WORKFLOW_FANIN = Kind(f"workflow: fan-in of {FANIN_CHILDREN:,} and a callback, "
                      f"Worker(concurrency={WORKER_CONCURRENCY})", "workflow-fan-in",
                      WORKER_CONCURRENCY, "items/s", WORKFLOW_JOBS.label, drains=True)
WORKFLOW_PUSH_MANY = Kind(f"workflow: Queue.push_many({CREATE_NODES:,})", "push",
                          CREATE_NODES, "items/s", None)
WORKFLOW_CREATE = Kind(f"workflow: Workflows.create, {CREATE_NODES:,} nodes",
                       "workflow-create", CREATE_NODES, "items/s", WORKFLOW_PUSH_MANY.label)
WORKFLOW_KINDS = (WORKFLOW_JOBS, WORKFLOW_FANIN, WORKFLOW_PUSH_MANY, WORKFLOW_CREATE)
AIO_KINDS = tuple(kind for tasks in AIO_TASKS for kind in aio_kinds(tasks))
WORKER_KINDS = (WORKER, HISTORY_WORKER, BARE_CLAIMS)

PUSH_KINDS = (PUSH, PUSH_TR, PUSH_MANY, RECIPE_PUSH)
POP_KINDS = (RECIPE_POP, POP, SPREAD_POP, HC_POP)
PQ_KINDS = (PQ_POP_MIN, PQ_POP_MAX)
#: Every kind, in table order.
KINDS = (LIMIT, LIMIT_BATCH, *PUSH_KINDS, *POP_KINDS, CLAIM_ACK, TREE_POP, *PQ_KINDS,
         *HOT_KINDS, *AIO_KINDS, THREAD_PUSH_UNSHARED, THREAD_PUSH_ALONE, THREAD_PUSH,
         THREAD_WRITE,
         BLOCKING_READ, AWAITED_READ,
         *WORKER_KINDS, IDLE_WORKER, *IDLE_PAIR, *FAIR_KINDS, *SHARD_KINDS, *TASK_KINDS,
         *FLOW_KINDS, *WORKFLOW_KINDS)

#: The groups ``--only`` selects from, in the order a run measures them: the limit
#: (always measured: every ratio needs it), pushes, the four Queue pops, claim_many+ack,
#: WeightTree.pop throughput, the PriorityQueue pops, the hot paths (the spread pop
#: beside the bare probe, WeightTree.pop beside the limit, in rounds), the async rows,
#: the worker rows, the fair queue (claims, latency by groups, the noisy neighbour),
#: the sharded queue beside the unsharded one, tasks beside the raw calls (and the
#: codecs' cost), flow control beside the same work without it, workflows beside the
#: same jobs without them, WeightTree.pop latency.
GROUPS = ("limit", "push", "pops", "claim", "tree", "pq", "hot", "aio", "worker", "fair",
          "shards", "tasks", "flow", "workflow", "latency")


@dataclass(frozen=True)
class Settings:
    """The run's parameters, from the command line."""

    clients: Tuple[int, ...]
    duration: float
    items: int
    samples: int
    sizes: Tuple[int, ...]
    out: Path
    seed: int
    quick: bool
    only: Tuple[str, ...] = GROUPS
    fair_sizes: Tuple[int, ...] = FAIR_SIZES

    @property
    def most(self) -> int:
        """K: the largest client count measured."""
        return self.clients[-1]

    @property
    def ends(self) -> Tuple[int, ...]:
        """1 and K (once when K is 1): where pushes, batched writes and claims are
        measured."""
        return tuple(sorted({1, self.most}))

    @property
    def coarse(self) -> Tuple[int, ...]:
        """1, 4, 16 up to K, and K: where WeightTree and PriorityQueue pops are measured."""
        return tuple(sorted({c for c in COARSE_COUNTS if c <= self.most} | {self.most}))

    def runs(self, group: str) -> bool:
        """Whether this run measures ``group`` (one of :data:`GROUPS`)."""
        return group in self.only

    def claim_items(self, clients: int) -> int:
        """Items pre-filled for ``clients`` claimers: ``--items``, or enough for
        :data:`CLAIM_ROUNDS` full claims per client (at most :data:`CLAIM_FILL_CAP`)
        if that is more."""
        return max(self.items, min(CLAIM_BATCH * clients * CLAIM_ROUNDS, CLAIM_FILL_CAP))

    @property
    def hot_items(self) -> int:
        """Items each drain of the ``hot`` group takes: ``--items``, at least
        :data:`HOT_ITEMS`."""
        return max(self.items, HOT_ITEMS)


def client_counts(most: int) -> Tuple[int, ...]:
    """1, 2, 4, 8, 16 up to ``most``, and ``most`` itself (``--clients 6``: 1, 2, 4, 6)."""
    counts = [c for c in CLIENT_COUNTS if c <= most]
    if most not in counts:
        counts.append(most)
    return tuple(counts)


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def positive_float(text: str) -> float:
    """argparse type: a positive finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def positive_int(text: str) -> int:
    """argparse type: a positive whole number."""
    value = positive_float(text)
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text}")
    return int(value)


def groups(text: str) -> Tuple[str, ...]:
    """argparse type: comma-separated names of :data:`GROUPS`, returned in run order
    with "limit" added (every ratio needs it)."""
    names = {name.strip() for name in text.split(",")}
    unknown = sorted(name for name in names if name not in GROUPS)
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown group {unknown[0]!r} (groups: {', '.join(GROUPS)})")
    return tuple(g for g in GROUPS if g in names or g == "limit")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options (``fdbrecipes bench`` and ``benchmarks/run.py``)."""
    parser.description = (
        "Measure the limit (raw write transactions), pushes, Queue pops (plain, "
        f"spread={SPREAD}, high-contention) against the recipe's, claim_many+ack, "
        "WeightTree and PriorityQueue pops, and WeightTree pop latency, with the client "
        "CPU per operation, against FDB_CLUSTER_FILE or a throwaway local fdbserver; "
        "print a table, write bench.png and results.json."
    )
    parser.add_argument("--clients", type=positive_int, default=16, metavar="K",
                        help="most client processes (counts 1, 2, 4, 8, 16 up to K; "
                        "default 16)")
    parser.add_argument("--duration", type=positive_float, default=None, metavar="SECONDS",
                        help=f"seconds per timed measurement (default {DEFAULT_DURATION:g}, "
                        f"{QUICK_DURATION:g} with --quick)")
    parser.add_argument("--items", type=positive_int, default=2000,
                        help="items in the structure each pop measurement drains (default "
                        f"2000; claims: at least {CLAIM_BATCH * CLAIM_ROUNDS} per client)")
    parser.add_argument("--samples", type=positive_int, default=500,
                        help="timed WeightTree pops per size (default 500)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), metavar="DIR",
                        help="where bench.png and results.json go (default bench-results/)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the WeightTree's weights and picks (default 0)")
    parser.add_argument("--quick", action="store_true",
                        help="WeightTree up to 10^5 items, 1-second timed measurements")
    parser.add_argument("--only", type=groups, default=GROUPS, metavar="GROUPS",
                        help="comma-separated groups to measure, of "
                        f"{','.join(GROUPS)} (default: all; the limit is always measured)")


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The run's parameters from parsed arguments (applying ``--quick``)."""
    default = QUICK_DURATION if args.quick else DEFAULT_DURATION
    return Settings(
        clients=client_counts(args.clients),
        duration=default if args.duration is None else args.duration,
        items=args.items,
        samples=args.samples,
        sizes=QUICK_TREE_SIZES if args.quick else TREE_SIZES,
        out=args.out,
        seed=args.seed,
        quick=args.quick,
        only=args.only,
        fair_sizes=QUICK_FAIR_SIZES if args.quick else FAIR_SIZES,
    )
