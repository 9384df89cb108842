"""The benchmark suite: ``fdbrecipes bench`` (also ``python benchmarks/run.py``).

In one run against one cluster it measures:

1. the limit: 1-key write transactions per second from 1, 2, 4, 8, 16 client processes,
   and 100-key write transactions (keys per second) from 1 and K processes;
2. pushes: ``Queue.push``, ``Queue.push_many`` (100 values) and the recipe's push, from
   1 and K processes;
3. pops: the recipe's pop, ``Queue.pop`` and the high-contention ``Queue.pop`` draining a
   pre-filled queue with 1, 2, 4, 8, 16 popper processes (pops per second, retries per
   pop);
4. ``WeightTree.pop`` latency at 10^3 ... 10^6 live items.

Every rate is printed with its ratio to the limit measured at the same number of client
processes, and to the recipe baseline measured at the same number, both in the same run:
absolute figures depend on the machine, ratios much less.  The run prints one table, checks
the project's targets (PASS/FAIL, never failing the command), and writes ``bench.png`` and
``results.json`` to ``--out``.  See docs/performance.md for the methodology.

Clients are separate processes (``multiprocessing`` with ``spawn``): each has its own
FoundationDB network thread, as separate application servers would.  They connect, wait
at a barrier so that all start together, run, and report (count, seconds, retries)
through a queue.  Every measurement uses a fresh subspace, cleared afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import importlib
import itertools
import json
import math
import multiprocessing
import os
import platform
import queue as queue_module
import random
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)

import fdb
import fdb.tuple

from . import Queue, Stats, WeightTree, __version__
from .cli import open_database, with_cluster

if TYPE_CHECKING:
    from multiprocessing.context import SpawnContext, SpawnProcess
    from multiprocessing.queues import Queue as ProcessQueue
    from multiprocessing.synchronize import Barrier

__all__ = ["add_arguments", "main", "run_bench"]

T = TypeVar("T")

#: Client process counts the suite measures at (capped by ``--clients``).
CLIENT_COUNTS = (1, 2, 4, 8, 16)
#: WeightTree sizes (``--quick`` stops at 10^5).
TREE_SIZES = (10**3, 10**4, 10**5, 10**6)
QUICK_TREE_SIZES = TREE_SIZES[:3]
DEFAULT_DURATION = 5.0
QUICK_DURATION = 1.0
#: Items per push_many when pre-filling a queue, and when filling a WeightTree.
QUEUE_FILL_BATCH = 1_000
TREE_FILL_BATCH = 5_000
#: Tiny value every write, push and fill stores.
VALUE = b"x"
#: Seconds a client waits at the start barrier for the others to connect.
BARRIER_TIMEOUT = 300.0
#: Seconds the parent waits for a finished client process to exit.
JOIN_TIMEOUT = 30.0
ROOT = "fdbrecipes-bench"


class BenchError(RuntimeError):
    """A measurement could not be made (a client failed); the run stops."""


# --------------------------------------------------------------------------------------
# What is measured
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One kind of measurement: what its clients do and how its rate is named.

    Attributes:
        label: its name in the table.
        op: the client operation (a key of :data:`FACTORIES`).
        batch: items per operation (keys per transaction, values per push_many).
        unit: what the rate counts.
        recipe: label of the recipe baseline it is compared with (None: none).
        drains: True for pops, which empty a pre-filled queue; False for operations
            run for ``--duration`` seconds.
    """

    label: str
    op: str
    batch: int
    unit: str
    recipe: Optional[str]
    drains: bool = False


LIMIT = Kind("limit: 1-key write tx", "write", 1, "tx/s", None)
LIMIT_BATCH = Kind("limit: 100-key write tx", "write", 100, "keys/s", None)
RECIPE_PUSH = Kind("recipe push", "recipe-push", 1, "items/s", "recipe push")
PUSH = Kind("Queue.push", "push", 1, "items/s", RECIPE_PUSH.label)
PUSH_MANY = Kind("Queue.push_many(100)", "push", 100, "items/s", RECIPE_PUSH.label)
RECIPE_POP = Kind("recipe pop", "recipe-pop", 1, "pops/s", "recipe pop", drains=True)
POP = Kind("Queue.pop", "pop", 1, "pops/s", RECIPE_POP.label, drains=True)
HC_POP = Kind("Queue.pop high_contention", "hc-pop", 1, "pops/s", RECIPE_POP.label,
              drains=True)
POP_KINDS = (RECIPE_POP, POP, HC_POP)


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

    @property
    def most(self) -> int:
        """K: the largest client count measured."""
        return self.clients[-1]

    @property
    def ends(self) -> Tuple[int, ...]:
        """1 and K (once when K is 1): where pushes and batched writes are measured."""
        return tuple(sorted({1, self.most}))


def client_counts(most: int) -> Tuple[int, ...]:
    """1, 2, 4, 8, 16 up to ``most``, and ``most`` itself (``--clients 6``: 1, 2, 4, 6)."""
    counts = [c for c in CLIENT_COUNTS if c <= most]
    if most not in counts:
        counts.append(most)
    return tuple(counts)


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------


class Report(NamedTuple):
    """What one client process reports: items moved, seconds from the barrier's
    release to its last operation's end, retried transactions (None: not counted),
    and an error message if it failed."""

    client: int
    items: int
    seconds: float
    retries: Optional[int]
    error: Optional[str] = None


@dataclass(frozen=True)
class Row:
    """One measurement: ``count`` items in ``seconds`` by ``clients`` processes."""

    name: str
    clients: int
    count: int
    seconds: float
    retries: Optional[int]
    unit: str
    recipe: Optional[str] = None
    ratio_limit: Optional[float] = None
    ratio_recipe: Optional[float] = None

    @property
    def rate(self) -> float:
        """Items per second over the wall time."""
        return self.count / self.seconds if self.seconds > 0 else 0.0

    @property
    def retries_per_op(self) -> Optional[float]:
        """Retried transactions per item moved (None when not counted)."""
        if self.retries is None:
            return None
        return self.retries / self.count if self.count else float(self.retries)

    def to_json(self) -> Dict[str, Any]:
        data = dataclasses.asdict(self)
        data.update(rate=self.rate, retries_per_op=self.retries_per_op)
        return data


@dataclass(frozen=True)
class Latency:
    """WeightTree pop latency with ``n`` live items, over ``samples`` pops."""

    n: int
    samples: int
    median_ms: float
    p90_ms: float


@dataclass(frozen=True)
class Target:
    """One of the project's performance targets, checked against this run."""

    name: str
    value: Optional[float]
    threshold: float
    at_most: bool = False
    note: str = ""

    @property
    def status(self) -> str:
        """PASS, FAIL, or SKIP when the run did not measure the figure."""
        if self.value is None:
            return "SKIP"
        met = self.value <= self.threshold if self.at_most else self.value >= self.threshold
        return "PASS" if met else "FAIL"


@dataclass
class Results:
    """Everything one run measured."""

    machine: Dict[str, Any]
    settings: Settings
    rows: List[Row]
    latencies: List[Latency]


def summarize(kind: Kind, clients: int, reports: Sequence[Report]) -> Row:
    """Combine the clients' reports into one row.

    All clients leave the barrier together, so the wall time is the longest client's
    time: from the release to the last client finishing.  Retries are summed (None if
    any client could not count them).
    """
    retries = [r.retries for r in reports]
    return Row(
        name=kind.label,
        clients=clients,
        count=sum(r.items for r in reports),
        seconds=max((r.seconds for r in reports), default=0.0),
        retries=None if None in retries else sum(r or 0 for r in retries),
        unit=kind.unit,
        recipe=kind.recipe,
    )


def ratio(value: float, reference: Optional[float]) -> Optional[float]:
    """``value / reference``, or None when there is no (positive) reference."""
    if reference is None or reference <= 0:
        return None
    return value / reference


def with_ratios(rows: Sequence[Row]) -> List[Row]:
    """The rows with their ratios to the limit and to the recipe at the same client count."""
    rates = {(row.name, row.clients): row.rate for row in rows}
    return [
        dataclasses.replace(
            row,
            ratio_limit=ratio(row.rate, rates.get((LIMIT.label, row.clients))),
            ratio_recipe=ratio(row.rate, rates.get((row.recipe or "", row.clients))),
        )
        for row in rows
    ]


def find(rows: Sequence[Row], kind: Kind, clients: int) -> Optional[Row]:
    """The row of ``kind`` at ``clients``, if measured."""
    for row in rows:
        if row.name == kind.label and row.clients == clients:
            return row
    return None


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of non-empty ``values``."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def latency(n: int, seconds: Sequence[float]) -> Latency:
    """Median and p90, in milliseconds, of pop times measured with ``n`` live items."""
    return Latency(n, len(seconds), statistics.median(seconds) * 1000,
                   percentile(seconds, 90) * 1000)


def growth(latencies: Sequence[Latency]) -> Optional[float]:
    """Median pop latency at the largest size over that at the smallest."""
    if len(latencies) < 2:
        return None
    ordered = sorted(latencies, key=lambda lat: lat.n)
    return ratio(ordered[-1].median_ms, ordered[0].median_ms)


# --------------------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------------------


def plural(count: int, word: str) -> str:
    """``"1 client"``, ``"4 clients"``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def _scope_note(clients: int) -> str:
    return "" if clients == 16 else f"measured at {plural(clients, 'client')}; the target is at 16"


def _field(row: Optional[Row], name: str) -> Optional[float]:
    value: Optional[float] = None if row is None else getattr(row, name)
    return value


def check_targets(rows: Sequence[Row], latencies: Sequence[Latency], most: int) -> List[Target]:
    """The issue's targets, checked against ``rows`` (with ratios) and ``latencies``.

    Client-count targets are checked at K = ``most`` (16 by default); the WeightTree
    target over the sizes measured (10^3 to 10^6 by default).  A figure the run did not
    measure gives SKIP.
    """
    hc = find(rows, HC_POP, most)
    note = _scope_note(most)
    poppers = plural(most, "popper")
    targets = [
        Target(f"high-contention pop, {poppers}: x recipe pop", _field(hc, "ratio_recipe"),
               5.0, note=note),
        Target(f"high-contention pop, {poppers}: x limit", _field(hc, "ratio_limit"),
               0.5, note=note),
        Target(f"high-contention pop, {poppers}: conflicts per pop",
               _field(hc, "retries_per_op"), 0.2, at_most=True, note=note),
    ]
    for clients in sorted({1, most}):
        targets.append(Target(f"Queue.push, {plural(clients, 'client')}: x limit",
                              _field(find(rows, PUSH, clients), "ratio_limit"), 0.8,
                              note="" if clients == 1 else note))
    sizes = sorted(lat.n for lat in latencies) or [10**3, 10**6]
    full = sizes[0] <= 10**3 and sizes[-1] >= 10**6
    targets.append(Target(
        f"WeightTree pop median growth, {sizes[0]:,} to {sizes[-1]:,} items",
        growth(latencies), 2.0, at_most=True,
        note="" if full else "the target is from 10^3 to 10^6 items",
    ))
    return targets


# --------------------------------------------------------------------------------------
# Printing
# --------------------------------------------------------------------------------------


def _cell(value: Optional[float], spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(rows: Sequence[Row]) -> str:
    """The throughput table: measurement, clients, rate, ratios, retries per item."""
    head = (f"{'measurement':<27} {'clients':>7} {'rate':>11} {'unit':<7} "
            f"{'x limit':>8} {'x recipe':>8} {'retries/op':>10}")
    lines = [head, "-" * len(head)]
    for row in rows:
        lines.append(
            f"{row.name:<27} {row.clients:>7} {row.rate:>11,.0f} {row.unit:<7} "
            f"{_cell(row.ratio_limit, '.2f'):>8} {_cell(row.ratio_recipe, '.2f'):>8} "
            f"{_cell(row.retries_per_op, '.3f'):>10}"
        )
    return "\n".join(lines)


def format_latencies(latencies: Sequence[Latency]) -> str:
    """The WeightTree latency table and the growth from the smallest to the largest n."""
    if not latencies:
        return "WeightTree pop latency: not measured"
    lines = ["WeightTree.pop latency (n kept constant by a push after each pop)",
             f"{'items':>11} {'pops':>6} {'median ms':>10} {'p90 ms':>8}"]
    for lat in latencies:
        lines.append(f"{lat.n:>11,} {lat.samples:>6} {lat.median_ms:>10.2f} {lat.p90_ms:>8.2f}")
    lines.append(f"median growth from {latencies[0].n:,} to {latencies[-1].n:,} items: "
                 f"{_cell(growth(latencies), '.2f')}x")
    return "\n".join(lines)


def format_targets(targets: Sequence[Target]) -> str:
    """One line per target: PASS/FAIL/SKIP, the figure and the threshold."""
    lines = ["Targets (a miss is reported, it does not fail the command)"]
    for t in targets:
        sign = "<=" if t.at_most else ">="
        note = f"  ({t.note})" if t.note else ""
        lines.append(f"  {t.status:<4}  {t.name}: {_cell(t.value, '.2f')} "
                     f"(target {sign} {t.threshold:g}){note}")
    return "\n".join(lines)


def progress(message: str) -> None:
    """Say what is being measured now (stderr, so stdout holds only the results)."""
    print(f"  ... {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# Chart and JSON
# --------------------------------------------------------------------------------------


def _series(rows: Sequence[Row], kind: Kind) -> Tuple[List[int], List[float]]:
    points = sorted((row.clients, row.rate) for row in rows if row.name == kind.label)
    return [c for c, _ in points], [r for _, r in points]


def write_chart(rows: Sequence[Row], latencies: Sequence[Latency], path: Path) -> None:
    """Write a PNG: pops/s against poppers (three pops and the limit), and WeightTree
    pop latency against n on a log axis.

    Raises:
        ImportError: matplotlib (the ``bench`` extra) is not installed.
    """
    # Imported by name: matplotlib is an optional extra, absent where mypy runs in CI.
    figure_module = importlib.import_module("matplotlib.figure")
    fig = figure_module.Figure(figsize=(12, 4.8), tight_layout=True)
    pops, tree = fig.subplots(1, 2)
    for kind, style in ((RECIPE_POP, "s-"), (POP, "o-"), (HC_POP, "^-"), (LIMIT, "k--")):
        x, y = _series(rows, kind)
        if x:
            pops.plot(x, y, style, label=f"{kind.label} ({kind.unit})")
    counts = sorted({row.clients for row in rows})
    if counts:
        pops.set_xscale("log", base=2)
        pops.set_xticks(counts)
        pops.set_xticklabels([str(c) for c in counts])
    pops.set(xlabel="client processes (poppers)", ylabel="per second",
             title="Pops per second while draining a queue")
    pops.minorticks_off()
    pops.set_ylim(bottom=0)
    pops.legend()
    pops.grid(True, alpha=0.3)
    sizes = [lat.n for lat in latencies]
    tree.plot(sizes, [lat.median_ms for lat in latencies], "o-", label="median")
    tree.plot(sizes, [lat.p90_ms for lat in latencies], "^--", label="p90")
    tree.set_xscale("log")
    tree.set(xlabel="live items (n)", ylabel="ms per pop", title="WeightTree.pop latency")
    tree.set_ylim(bottom=0)
    tree.legend()
    tree.grid(True, alpha=0.3)
    fig.savefig(path, dpi=110)


def write_json(results: Results, targets: Sequence[Target], path: Path) -> None:
    """Write every figure, the targets, the settings and the machine to ``path``."""
    data = {
        "machine": results.machine,
        "settings": {**dataclasses.asdict(results.settings), "out": str(results.settings.out)},
        "throughput": [row.to_json() for row in results.rows],
        "weight_tree": [dataclasses.asdict(lat) for lat in results.latencies],
        "weight_tree_growth": growth(results.latencies),
        "targets": [{**dataclasses.asdict(t), "status": t.status} for t in targets],
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def publish(results: Results) -> None:
    """Print the tables and targets; write results.json and bench.png to ``--out``."""
    targets = check_targets(results.rows, results.latencies, results.settings.most)
    print(format_table(results.rows))
    print()
    print(format_latencies(results.latencies))
    print()
    print(format_targets(targets))
    out = results.settings.out
    out.mkdir(parents=True, exist_ok=True)
    write_json(results, targets, out / "results.json")
    print(f"\nFigures written to {out / 'results.json'}")
    try:
        write_chart(results.rows, results.latencies, out / "bench.png")
    except ImportError:
        print("No chart: matplotlib is not installed (pip install 'fdbrecipes[bench]')")
        return
    print(f"Chart written to {out / 'bench.png'}")


# --------------------------------------------------------------------------------------
# Machine information
# --------------------------------------------------------------------------------------


def bindings_version() -> Optional[str]:
    """Version of the installed ``foundationdb`` Python package."""
    from importlib import metadata

    try:
        return metadata.version("foundationdb")
    except metadata.PackageNotFoundError:
        return None


def client_library_version() -> Optional[str]:
    """``fdb_get_client_version()`` of the loaded libfdb_c (best effort: the bindings
    do not wrap this C function, so it is called through ctypes)."""
    try:
        function = sys.modules["fdb.impl"]._capi.fdb_get_client_version
        function.argtypes = []
        function.restype = ctypes.c_char_p
        return str(function().decode())
    except Exception:  # metadata only: never stop a run for it
        return None


def server_info(db: Any) -> Dict[str, Any]:
    """Server versions, process count and configuration, from ``\\xff\\xff/status/json``."""
    try:
        status = json.loads(db[b"\xff\xff/status/json"])
        cluster = status["cluster"]
        processes = cluster.get("processes", {}).values()
        config = cluster.get("configuration", {})
        return {
            "versions": sorted({p["version"] for p in processes if "version" in p}),
            "processes": len(processes),
            "storage_engine": config.get("storage_engine"),
            "redundancy_mode": config.get("redundancy_mode"),
        }
    except Exception:  # metadata only: never stop a run for it
        return {}


def machine_info(db: Any, cluster: str) -> Dict[str, Any]:
    """Where the figures come from: the client machine, the bindings, the cluster."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "fdb_api_version": fdb.get_api_version(),
        "fdb_bindings_version": bindings_version(),
        "fdb_client_version": client_library_version(),
        "fdbrecipes_version": __version__,
        "cluster": cluster,
        "server": server_info(db),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def format_machine(machine: Dict[str, Any]) -> str:
    """Two lines naming the machine and the FoundationDB versions."""
    server = machine.get("server") or {}
    return (f"Machine: {machine['platform']}, {machine['cpu_count']} CPUs, "
            f"{machine['python']}\n"
            f"FoundationDB: API {machine['fdb_api_version']}, bindings "
            f"{machine['fdb_bindings_version']}, client {machine['fdb_client_version']}, "
            f"server {', '.join(server.get('versions', [])) or 'unknown'} "
            f"({server.get('storage_engine', 'unknown engine')}); cluster: "
            f"{machine['cluster']}")


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
        self._push(db, self.subspace, value)

    def pop(self, db: Any) -> Optional[bytes]:
        return transact(db, self._pop, self.stats)

    def _pop(self, tr: Any) -> Optional[bytes]:
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
    "pop": lambda db, subspace, _i, _b: _pop_client(db, subspace, False),
    "hc-pop": lambda db, subspace, _i, _b: _pop_client(db, subspace, True),
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


def client_main(job: Job, index: int, barrier: Barrier, results: ProcessQueue[Report]) -> None:
    """Entry point of one client process: connect, wait for the others, run, report.

    The connection is warmed up (one read) before the barrier, so the measured time
    holds operations only.  On any failure the barrier is broken, so the other clients
    stop waiting, and the error is reported.
    """
    try:
        db = open_database(job.cluster_file)
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


# --------------------------------------------------------------------------------------
# The suite
# --------------------------------------------------------------------------------------


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options (``fdbrecipes bench`` and ``benchmarks/run.py``)."""
    parser.description = (
        "Measure the limit (raw write transactions), pushes, plain and high-contention "
        "pops against the recipe's, and WeightTree pop latency, against FDB_CLUSTER_FILE "
        "or a throwaway local fdbserver; print a table, write bench.png and results.json."
    )
    parser.add_argument("--clients", type=positive_int, default=16, metavar="K",
                        help="most client processes (counts 1, 2, 4, 8, 16 up to K; "
                        "default 16)")
    parser.add_argument("--duration", type=positive_float, default=None, metavar="SECONDS",
                        help=f"seconds per timed measurement (default {DEFAULT_DURATION:g}, "
                        f"{QUICK_DURATION:g} with --quick)")
    parser.add_argument("--items", type=positive_int, default=2000,
                        help="items in the queue each pop measurement drains (default 2000)")
    parser.add_argument("--samples", type=positive_int, default=500,
                        help="timed WeightTree pops per size (default 500)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), metavar="DIR",
                        help="where bench.png and results.json go (default bench-results/)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the WeightTree's weights and picks (default 0)")
    parser.add_argument("--quick", action="store_true",
                        help="WeightTree up to 10^5 items, 1-second timed measurements")


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
    )


def _cluster_name() -> str:
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
