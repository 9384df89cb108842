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
from typing import Iterator, List, Optional, Tuple

import fdb

from .. import Queue, WeightTree
from .._cluster import open_database, with_cluster
from .clients import QUEUE_FILL_BATCH, BenchError, Job, RecipeQueue, chunks, run_clients
from .machine import format_machine, machine_info
from .report import publish
from .results import Latency, Results, Row, latency, plural, summarize, with_ratios
from .settings import (
    LIMIT,
    LIMIT_BATCH,
    POP_KINDS,
    PUSH,
    PUSH_MANY,
    RECIPE_POP,
    RECIPE_PUSH,
    Kind,
    Settings,
    add_arguments,
    settings_from_args,
)

#: Items per push_many when filling a WeightTree.
TREE_FILL_BATCH = 5_000
#: First element of every measurement's subspace prefix.
ROOT = "fdbrecipes-bench"


def progress(message: str) -> None:
    """Say what is being measured now (stderr, so stdout holds only the results)."""
    print(f"  ... {message}", file=sys.stderr, flush=True)


class Suite:
    """Runs every measurement against one cluster (the parent process)."""

    def __init__(self, cluster_file: str, settings: Settings) -> None:
        self.cluster_file = cluster_file
        self.settings = settings
        self.db = open_database(cluster_file)
        self.context = multiprocessing.get_context("spawn")

    def run(self, cluster: str) -> Results:
        """Every measurement, in order: limit, pushes, pops, WeightTree."""
        machine = machine_info(self.db, cluster)
        print(format_machine(machine), flush=True)
        rows = self.limits() + self.pushes() + self.pops()
        return Results(machine, self.settings, with_ratios(rows), self.weight_tree())

    @contextlib.contextmanager
    def space(self, name: str) -> Iterator[Tuple[str, ...]]:
        """A fresh subspace prefix ``("fdbrecipes-bench", uuid, name)``, cleared after."""
        prefix = (ROOT, uuid.uuid4().hex, name)
        try:
            yield prefix
        finally:
            r = fdb.Subspace(prefix).range()
            self.db.clear_range(r.start, r.stop)

    def measure(self, kind: Kind, clients: int, prefix: Tuple[str, ...]) -> Row:
        """Run ``kind`` with ``clients`` processes in the subspace ``prefix``."""
        duration = None if kind.drains else self.settings.duration
        job = Job(kind.op, kind.batch, self.cluster_file, prefix, duration)
        progress(f"{kind.label}, {plural(clients, 'client')}")
        return summarize(kind, clients, run_clients(self.context, job, clients))

    def timed(self, kind: Kind, clients: int) -> Row:
        """``clients`` processes doing ``kind`` for ``--duration`` seconds."""
        with self.space(f"{kind.op}-{kind.batch}-{clients}") as prefix:
            return self.measure(kind, clients, prefix)

    def limits(self) -> List[Row]:
        """The limit: 1-key write transactions at every client count, then 100-key
        write transactions at 1 and K clients."""
        rows = [self.timed(LIMIT, c) for c in self.settings.clients]
        return rows + [self.timed(LIMIT_BATCH, c) for c in self.settings.ends]

    def pushes(self) -> List[Row]:
        """Queue.push, Queue.push_many(100) and the recipe's push at 1 and K clients."""
        return [self.timed(kind, c) for kind in (PUSH, PUSH_MANY, RECIPE_PUSH)
                for c in self.settings.ends]

    def fill(self, kind: Kind, prefix: Tuple[str, ...]) -> None:
        """Pre-fill the queue that ``kind`` drains with ``--items`` items."""
        subspace = fdb.Subspace(prefix)
        if kind is RECIPE_POP:
            RecipeQueue(subspace).fill(self.db, self.settings.items)
            return
        queue = Queue(subspace)
        for chunk in chunks(0, self.settings.items, QUEUE_FILL_BATCH):
            queue.push_many(self.db, chunk)

    def drained(self, kind: Kind, poppers: int) -> Row:
        """``poppers`` processes popping a pre-filled queue until each gets None."""
        with self.space(f"{kind.op}-{poppers}") as prefix:
            self.fill(kind, prefix)
            row = self.measure(kind, poppers, prefix)
        if row.count != self.settings.items:
            print(f"warning: {kind.label} with {plural(poppers, 'popper')} popped {row.count} of "
                  f"{self.settings.items} items", file=sys.stderr)
        return row

    def pops(self) -> List[Row]:
        """The recipe's pop, Queue.pop and the high-contention pop at every popper count."""
        return [self.drained(kind, p) for p in self.settings.clients for kind in POP_KINDS]

    def weight_tree(self) -> List[Latency]:
        """WeightTree.pop latency at each size: grow the tree with push_many (random
        weights 1..100), then time ``--samples`` pops, each followed by an untimed push
        that keeps n constant."""
        rng = random.Random(self.settings.seed)
        latencies = []
        with self.space("weight-tree") as prefix:
            tree = WeightTree(fdb.Subspace(prefix), rng=random.Random(self.settings.seed + 1))
            n = 0
            for size in self.settings.sizes:
                progress(f"WeightTree: filling to {size:,} items")
                for chunk in chunks(n, size, TREE_FILL_BATCH):
                    tree.push_many(self.db, [(i, rng.randint(1, 100)) for i in chunk])
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
            tree.push(self.db, value, rng.randint(1, 100))
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
