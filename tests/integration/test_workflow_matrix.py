"""The workflow fault matrix (issue 41): randomized runs of fan-out 1 -> N, fan-in
N -> 1, random DAGs (with diamonds: two parents sharing their children) and batches
with callbacks, drained by consumer processes (``tests/workflow_consumer.py``) that
are SIGKILLed at random and whose commits report ``commit_unknown_result`` at random
(acks and the workflow steps in them included), while a storage, a log or the master
process of the 5-process ``double`` LocalCluster is killed and restarted.

What each run asserts, from the workflow's record, the job records and the
consumers' lines (each handler start, and each end the worker reports, with the
job's delivery and the consumer's pid):

* the workflow reaches its final state, its tallies exact (nothing ``queued`` or
  ``waiting`` left, every node counted once in its end);
* every node that should run ran, its job record ended as it should
  (``succeeded``; ``dead`` for a discarded batch member), and a node skipped by its
  ``when`` never ran;
* every node ran exactly once for the graph's sake: no delivery of a node was run
  twice, at most one run of it was acked, and every run but its last ended because
  its consumer died running it (SIGKILLed, no end reported) or, in a run whose
  cluster was struck, its lease was lost while it ran (``lease_lost``: a recovery's
  version jump ends leases early, see :func:`fdbrecipes._clock.database_clock`; the
  run's end is waited for, with a deadline, before the consumers are stopped; in a
  run without a cluster fault, a lost lease fails it); the job record counts every
  delivery.

Seeds: each run's seed is printed and names its shape (``seed % 5``) and fault;
``FDBRECIPES_WORKFLOW_SEEDS=s1,s2`` replays those runs (in the soak), and
``FDBRECIPES_FAULT_SEED`` sets the first of the soak's 200 consecutive seeds (else
random).  The default run is small (three runs on the plugin's single server, 150
nodes, consumer kills and unknown results: a few seconds each); the matrix is the
soak (``FDBRECIPES_SOAK=1``: 200 runs, N = 10,000 for fan-out and fan-in, on the
double cluster, each run with its deadline; ``FDBRECIPES_WORKFLOW_N`` sets another N).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import fdb
import pytest

from fdbrecipes.testing import LocalCluster
from fdbrecipes.workflow import Workflow, Workflows
from tests.helpers import eventually
from tests.integration.test_cluster_faults import LOG_ALONE, STORAGE_ALONE, pick
from tests.integration.test_limits_faults import Consumers as KilledConsumers
from tests.workflow_consumer import structures

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("FDBRECIPES_FAULT_SEED", random.randrange(2**32)))
#: The shapes, by ``seed % 5``; the cluster faults, by ``seed // 5 % 3``.
SHAPES = ("fan-out", "fan-in", "dag", "diamond", "batch")
FAULTS = ("storage", "log", "master")
#: Runs of the soak, and its N (``FDBRECIPES_WORKFLOW_N``: a smaller one for more runs
#: in an hour).
SOAK_RUNS = 200
SOAK_N = int(os.environ.get("FDBRECIPES_WORKFLOW_N", 10_000))
#: Share of the consumers' commits that report commit_unknown_result.
FAULT_RATE = 0.1
#: Seconds a killed storage process stays down at least (re-replication starts after
#: 2 s: tests.conftest.DOUBLE_KNOBS); a killed log or master is restarted after a
#: random part of this.
OUTAGE = 4.0


def soak_seeds() -> List[int]:
    """The soak's seeds: those of ``FDBRECIPES_WORKFLOW_SEEDS``, else 200 from
    :data:`SEED` on (every shape meets every fault)."""
    given = os.environ.get("FDBRECIPES_WORKFLOW_SEEDS")
    if given:
        return [int(s) for s in given.split(",")]
    return [SEED + k for k in range(SOAK_RUNS)]


@dataclass
class Expected:
    """What a run's workflow should end as: each node's job state (by job id, hex;
    None: skipped, never run), the workflow's state and its tallies."""

    states: Dict[str, Optional[str]] = field(default_factory=dict)
    workflow: str = "succeeded"
    results: Optional[Dict[str, Any]] = None  # flows.result(), where checked

    def add(self, node: Any, state: Optional[str] = "succeeded") -> None:
        self.states[node.id.hex()] = state

    def counts(self) -> Dict[str, int]:
        ended = list(self.states.values())
        return {"queued": 0, "waiting": 0, "cancelled": 0,
                "succeeded": ended.count("succeeded"), "failed": ended.count("dead"),
                "skipped": ended.count(None)}


def build(flows: Workflows, q: Any, shape: str, n: int,
          rng: random.Random) -> Tuple[Workflow, Expected]:
    """A workflow of ``shape`` with about ``n`` nodes, and what it should end as."""
    flow, expected = flows.new(), Expected()
    nodes: List[Any]
    if shape == "fan-out":
        root = flow.add(q, ("n", -1), name="root")
        nodes = [root, *flow.add_many(q, [("n", k) for k in range(n)], deps=[root])]
        expected.results = {node.name: 1 for node in nodes[1:]}
    elif shape == "fan-in":
        nodes = flow.add_many(q, [("n", k) for k in range(n)])
        nodes.append(flow.add(q, ("n", "end"), deps=list(nodes), name="end"))
        expected.results = {"end": n}
    elif shape == "dag":
        nodes = []
        used: Set[int] = set()
        shared = rng.sample(range(n), min(n, 20))  # a diamond inside: shared children
        for k in range(n):
            deps = rng.sample(nodes, min(len(nodes), rng.randint(0, 4)))
            nodes.append(flow.add(q, ("n", k), deps=deps))
            used.update(d.index for d in deps)
        for p in ("left", "right"):
            nodes.append(flow.add(q, ("n", p), deps=[nodes[k] for k in shared]))
        used.update(shared)
        sinks = [node for node in nodes if node.index not in used]
        nodes.append(flow.add(q, ("n", "end"), deps=sinks, name="end"))
        expected.results = {"end": len(sinks)}
    elif shape == "diamond":
        root = flow.add(q, ("n", "root"), name="root")
        children = flow.add_many(q, [("n", k) for k in range(n)], deps=[root])
        parents = [flow.add(q, ("n", p), deps=children, name=p) for p in ("left", "right")]
        nodes = [root, *children, *parents,
                 flow.add(q, ("n", "end"), deps=parents, name="end")]
        expected.results = {"end": 2}
    else:
        failing = set(rng.sample(range(n), rng.randint(1, 5))) if rng.random() < 0.5 else set()
        values = [("discard" if k in failing else "n", k) for k in range(n)]
        flow = flows.batch(q, values, on_success=(q, ("n", "success")),
                           on_complete=(q, ("n", "complete")),
                           on_failure=(q, ("n", "failure")))
        for node, value in zip(flow.nodes, values):
            expected.add(node, "dead" if value[0] == "discard" else "succeeded")
        on_success, on_complete, on_failure = flow.nodes[n:]
        expected.add(on_success, None if failing else "succeeded")
        expected.add(on_complete)
        expected.add(on_failure, "succeeded" if failing else None)
        expected.workflow = "completed" if failing else "succeeded"
        return flow, expected
    for node in nodes:
        expected.add(node)
    return flow, expected


class Consumers(KilledConsumers):
    """The consumer processes of one run (``tests/workflow_consumer.py``): started,
    SIGKILLed (their pids kept), their lines collected."""

    def __init__(self, cluster_file: str, space: Any, rng: random.Random, lease: float,
                 max_deliveries: int = 0) -> None:
        super().__init__(cluster_file, space, rng)
        self.lease, self.max_deliveries = lease, max_deliveries
        self.readers: List[threading.Thread] = []
        self.lines: List[str] = []
        self.lock = threading.Lock()

    def start(self) -> None:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.workflow_consumer", self.cluster_file,
             self.space.key().hex(), str(fdb.get_api_version()),
             str(self.rng.randrange(2**32)), str(FAULT_RATE), str(self.lease),
             str(self.max_deliveries)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        reader = threading.Thread(target=self.collect, args=(process,), daemon=True)
        reader.start()
        self.readers.append(reader)
        self.running.append(process)

    def collect(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with self.lock:
                self.lines.append(line.decode().strip())

    def settled(self) -> bool:
        """Whether every run a consumer still alive started has ended (a handler may
        still run when the workflow ends: one whose lease was lost, its node run again
        elsewhere; it reports its end when it returns)."""
        with self.lock:
            ran = {tuple(line.split()[1:4]) for line in self.lines if line.startswith("ran ")}
            ended = {tuple(line.split()[1:4]) for line in self.lines if line.startswith("end ")}
        return all(int(pid) in self.died for _, _, pid in ran - ended)

    def stop(self) -> None:
        """Kill every consumer (the run is over) and read their lines to the end."""
        super().stop()
        for reader in self.readers:
            reader.join(30)


@dataclass
class Run:
    """One run's settings, all from its seed."""

    seed: int
    n: int
    processes: int
    lease: float
    cluster: Optional[LocalCluster] = None
    shape: str = ""
    fault: Optional[str] = None
    kills: int = 0

    def __post_init__(self) -> None:
        self.shape = SHAPES[self.seed % len(SHAPES)]
        if self.cluster is not None:
            self.fault = FAULTS[self.seed // len(SHAPES) % len(FAULTS)]


def size(shape: str, n: int) -> int:
    """Nodes of the run for ``shape`` at scale ``n``: N for fan-out and fan-in, less
    for the others (each node of a DAG is a transaction of its own to create)."""
    return n if shape in ("fan-out", "fan-in") else max(20, n // 10)


def drive(run: Run, db: Any, flows: Workflows, w: bytes, consumers: Consumers,
          rng: random.Random, deadline: float) -> List[str]:
    """Kill consumers (``run.kills`` of them, at random times) and strike the run's
    cluster fault once a random share of the nodes ended, until the workflow is
    over and the cluster fault healed; what was struck."""
    cluster = run.cluster
    total = flows.status(db, w, 0).total
    strike_at = rng.uniform(0.05, 0.6) * total
    kills_left = run.kills
    next_kill = time.monotonic() + rng.uniform(0.1, 1.0)
    down: Optional[Tuple[str, float]] = None
    fault = run.fault
    struck: List[str] = []

    def step() -> bool:
        nonlocal kills_left, next_kill, down, fault
        now = time.monotonic()
        exited = [p.returncode for p in consumers.running if p.poll() is not None]
        assert not exited, f"a consumer exited on its own: {exited} (seed {run.seed})"
        if kills_left and now >= next_kill:
            consumers.kill_one()
            kills_left -= 1
            next_kill = now + rng.uniform(0.2, 2.0)
        if down is not None and now >= down[1]:
            assert cluster is not None
            cluster.restart(down[0])
            down = None
        status = flows.status(db, w, 0)
        if fault is not None and cluster is not None and status.counts["succeeded"] >= strike_at:
            avoid = {"storage": STORAGE_ALONE, "log": LOG_ALONE, "master": ()}[fault]
            target = pick(cluster.roles(), fault, rng, *avoid)
            cluster.kill(target)
            struck.append(f"{fault} {target}")
            outage = OUTAGE if fault == "storage" else rng.uniform(0, OUTAGE)
            down, fault = (target, now + outage), None
        return status.state != "running" and down is None and fault is None

    try:
        eventually(step, deadline, f"workflow over (seed {run.seed})", every=0.2)
    finally:
        if down is not None:
            assert cluster is not None
            cluster.restart(down[0])
    return struck


def check_runs(lines: List[str], died: Set[int], expected: Expected,
               records: Dict[str, Any], recovered: bool) -> Dict[str, int]:
    """The module docstring's checks of the runs, from the consumers' lines and the
    job records; how many runs ended how.  ``recovered``: the cluster was struck (a
    recovery may end leases early); else a run ran again only where its consumer
    died running it."""
    runs: Dict[str, List[Tuple[int, int]]] = defaultdict(list)
    ends: Dict[Tuple[str, int, int], str] = {}
    for line in lines:
        parts = line.split()
        if parts[:1] == ["ran"]:
            runs[parts[1]].append((int(parts[2]), int(parts[3])))
        elif parts[:1] == ["end"]:
            ends[(parts[1], int(parts[2]), int(parts[3]))] = parts[4]
    tally: Dict[str, int] = defaultdict(int)
    for job, state in expected.states.items():
        seen = sorted(runs.pop(job, []))
        if state is None:
            assert not seen, f"node {job} ran though skipped: {seen}"
            continue
        assert seen, f"node {job} never ran"
        deliveries = [d for d, _ in seen]
        assert len(set(deliveries)) == len(deliveries), f"node {job}: a delivery ran twice {seen}"
        record = records.get(job)
        assert record is not None and record.state == state, (job, record)
        assert record.attempts >= deliveries[-1], (job, record, seen)
        outcomes = [ends.get((job, d, pid)) for d, pid in seen]
        assert outcomes.count("ok") <= 1, f"node {job} acked twice: {seen} {outcomes}"
        for (_, pid), outcome in zip(seen[:-1], outcomes[:-1]):
            why = outcome or ("died" if pid in died else "not ended, consumer alive")
            allowed = ("died", "lease_lost") if recovered else ("died",)
            assert why in allowed, f"node {job} ran again: {seen} {outcomes}"
            tally[f"again ({why})"] += 1
        last = outcomes[-1]
        finish = "ok" if state == "succeeded" else "discard"
        assert last in (finish, None), f"node {job}: its last run ended {last}: {seen}"
        tally["runs"] += len(seen)
    assert not runs, f"jobs of no node ran: {sorted(runs)[:5]}"
    return dict(tally)


def one_run(run: Run, db: Any, cluster_file: str, space: Any, deadline: float) -> None:
    started = time.monotonic()
    rng = random.Random(run.seed)
    q, flows = structures(space, None)
    flow, expected = build(flows, q, run.shape, size(run.shape, run.n), rng)
    print(f"seed {run.seed}: {run.shape} of {len(flow.nodes)} nodes (to end "
          f"{expected.workflow}), fault {run.fault}, {run.kills} consumer kills", flush=True)
    w = flows.create(db, flow)
    consumers = Consumers(cluster_file, space, rng, run.lease)
    try:
        for _ in range(run.processes):
            consumers.start()
        struck = drive(run, db, flows, w, consumers, rng, deadline)
        eventually(consumers.settled, 60, f"every run of a live consumer ended (seed {run.seed})",
                   every=0.2)
    finally:
        consumers.stop()
        if run.cluster is not None:
            run.cluster.wait_healthy(180)
    status = flows.status(db, w, 0)
    assert status.state == expected.workflow, (run.seed, status)
    assert status.counts == expected.counts(), (run.seed, status.counts)
    records = {job.id.hex(): job for job in q.finished(db)}
    tally = check_runs(consumers.lines, consumers.died, expected, records, bool(struck))
    if expected.results is not None:  # what the last nodes read of their inputs
        assert flows.result(db, w, timeout=10) == expected.results
    assert q.size(db) == 0
    print(f"seed {run.seed}: passed in {time.monotonic() - started:.1f} s, struck {struck}, "
          f"{len(consumers.died)} consumers killed, {dict(tally)}", flush=True)


def fresh(db: Any) -> Iterator[Any]:
    """A subspace of its own for a test, cleared after it."""
    subspace = fdb.Subspace(("fdbrecipes-test", "workflow-matrix", uuid.uuid4().hex))
    yield subspace
    r = subspace.range()
    db.clear_range(r.start, r.stop)


@pytest.fixture
def space(db: Any) -> Iterator[Any]:
    yield from fresh(db)


@pytest.fixture
def double_space(double_db: Any) -> Iterator[Any]:
    yield from fresh(double_db)


@pytest.mark.parametrize("seed", [5, 6, 8, 9])  # fan-out, fan-in, diamond, batch
def test_matrix_small(db: Any, fdb_cluster_file: str, space: Any, seed: int) -> None:
    one_run(Run(seed, n=150, processes=2, lease=3.0, kills=2), db, fdb_cluster_file, space,
            deadline=60)


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("seed", soak_seeds())
def test_matrix_soak(double_cluster: LocalCluster, double_db: Any, double_space: Any,
                     seed: int) -> None:
    rng = random.Random(seed)
    one_run(Run(seed, n=SOAK_N, processes=3, lease=10.0, cluster=double_cluster,
                kills=rng.randint(1, 4)), double_db, double_cluster.cluster_file,
            double_space, deadline=900)


def test_node_killed_on_its_last_delivery(db: Any, fdb_cluster_file: str, space: Any) -> None:
    """A node whose consumer is killed while it runs its last delivery
    (``max_deliveries=1``) dies when its lease runs out, and its workflow takes the
    step: it fails (the default policy), its dependent is cancelled, never run."""
    q, flows = structures(space, 1)
    flow = flows.new()
    a = flow.add(q, ("hold", 0), name="a")
    b = flow.add(q, ("n", 1), deps=[a], name="b")
    w = flows.create(db, flow)
    consumers = Consumers(fdb_cluster_file, space, random.Random(0), lease=1.0,
                          max_deliveries=1)
    try:
        consumers.start()
        eventually(lambda: any(line.startswith(f"ran {a.id.hex()}") for line in consumers.lines),
                   30, "node a running")
        consumers.kill_one()  # and another consumer, whose claims meet the expired lease
        eventually(lambda: flows.status(db, w, 0).state != "running", 10,
                   "the workflow over once a's lease ran out")
    finally:
        consumers.stop()
    status = flows.status(db, w, 0)
    assert status.state == "failed", status
    assert status.counts == {"queued": 0, "waiting": 0, "succeeded": 0, "failed": 1,
                             "cancelled": 1, "skipped": 0}, status.counts
    record = q.job(db, a.id)
    assert record is not None and record.state == "dead", record
    assert not [line for line in consumers.lines if line.startswith(f"ran {b.id.hex()}")]
