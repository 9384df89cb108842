"""Workflows under faults: ``commit_unknown_result`` injected at the workers' commits
(acks included), and worker processes SIGKILLed mid-run.  Every dependent is pushed
exactly once: the store's tallies count every push (``queued``) and every end, so a
dependent pushed twice would leave ``queued`` above 0 at the end, and one never pushed
would leave the workflow waiting.  Seeds are printed; the ``slow`` versions run many."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from typing import Any, List

import fdb
import pytest

from fdbrecipes import Queue, Worker
from fdbrecipes.jobs import Job
from fdbrecipes.workflow import Workflow, Workflows
from tests.helpers import RandomFaults, unknown_results

pytestmark = pytest.mark.integration


def random_dag(flows: Workflows, q: Any, rng: random.Random, n: int) -> Workflow:
    """``n`` nodes, each depending on up to 3 earlier ones, and a last node depending
    on every node nothing else depends on (a fan-in)."""
    flow = flows.new()
    nodes = []
    used = set()
    for k in range(n):
        deps = rng.sample(nodes, min(len(nodes), rng.randint(0, 3)))
        used.update(d.index for d in deps)
        nodes.append(flow.add(q, k, deps=deps))
    flow.add(q, "end", deps=[node for node in nodes if node.index not in used], name="end")
    return flow


def check_exactly_once(flows: Workflows, db: Any, w: bytes, total: int) -> None:
    status = flows.status(db, w, 0)
    assert status.state == "succeeded", status
    assert status.counts == {"queued": 0, "succeeded": total, "failed": 0, "cancelled": 0,
                             "skipped": 0, "waiting": 0}, status.counts


@pytest.mark.parametrize("seed", [11, 12])
def test_every_dependent_once_under_unknown_results_at_acks(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any, seed: int) -> None:
    print(f"seed {seed}", flush=True)
    rng = random.Random(seed)
    faulty = unknown_results(fdb_cluster_file, RandomFaults(seed, 0.3))
    q = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = random_dag(flows, q, rng, 120)
    w = flows.create(faulty, flow)
    runs: Counter[Any] = Counter()
    lock = threading.Lock()

    def handler(job: Job) -> Any:
        with lock:
            runs[job.value] += 1
        return job.value

    with Worker(faulty, q, handler, lease_seconds=30, concurrency=8):
        assert flows.result(db, w, timeout=120) == {"end": "end"}
    assert set(runs) == set(range(120)) | {"end"}
    assert max(runs.values()) == 1, [k for k, v in runs.items() if v > 1]
    check_exactly_once(flows, db, w, 121)


WORKER = textwrap.dedent(
    r"""
    import sys
    import threading
    import fdb
    fdb.api_version(int(sys.argv[1]))
    from fdbrecipes import Queue, Worker
    from fdbrecipes.workflow import Workflows

    db = fdb.open(sys.argv[2])
    space = fdb.Subspace(rawPrefix=bytes.fromhex(sys.argv[3]))
    q = Queue(space["q"], history=3600)
    flows = Workflows(space["flows"], structures=[q])

    lock = threading.Lock()

    def handler(job):
        flows.inputs(db, job)  # reads its dependencies' results
        with lock:  # one line per run, whole
            sys.stdout.write(f"ran {job.value}\n")
            sys.stdout.flush()
        return job.value

    print("ready", flush=True)
    Worker(db, q, handler, lease_seconds=2, concurrency=4).run()
    """
)


def spawn(script: Any, cluster_file: str, prefix: bytes) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(script), str(fdb.get_api_version()),
                             cluster_file, prefix.hex()], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def run_with_kills(db: Any, cluster_file: str, fdb_subspace: Any, tmp_path: Any, seed: int,
                   n: int, processes: int, kills: int) -> None:
    print(f"seed {seed}", flush=True)
    rng = random.Random(seed)
    space = fdb_subspace[seed]
    q = Queue(space["q"], history=3600)
    flows = Workflows(space["flows"], structures=[q])
    script = tmp_path / "workflow_worker.py"
    script.write_text(WORKER)
    flow = random_dag(flows, q, rng, n)
    w = flows.create(db, flow)
    outputs: List[str] = []
    lock = threading.Lock()
    readers: List[threading.Thread] = []

    def collect(process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with lock:
                outputs.append(line.strip())

    def start() -> subprocess.Popen[str]:
        process = spawn(script, cluster_file, bytes(space.key()))
        reader = threading.Thread(target=collect, args=(process,), daemon=True)
        reader.start()
        readers.append(reader)
        return process

    running = [start() for _ in range(processes)]
    killed = 0
    try:
        for _ in range(kills):
            if flows.status(db, w, 0).state != "running":
                break
            time.sleep(rng.uniform(0.05, 0.5))  # when the next kill comes: the fault's time
            victim = rng.randrange(len(running))
            os.kill(running[victim].pid, signal.SIGKILL)
            running[victim].wait()
            running[victim] = start()
            killed += 1
        print(f"seed {seed}: {killed} workers killed", flush=True)
        try:
            assert flows.result(db, w, timeout=60) == {"end": "end"}
        except TimeoutError:
            status = flows.status(db, w, 1000)
            print(status.counts, [n for n in status.nodes if n.state not in ("succeeded",)])
            print(q.stats(db), q.dead(db))
            for n in status.nodes:
                if n.state == "queued":
                    print(q.job(db, flow.nodes[int(n.name)].id))
            raise
    finally:
        for process in running:
            process.send_signal(signal.SIGKILL)
            process.wait()
        for reader in readers:
            reader.join(30)  # what the processes printed, to their end
    ran = Counter(line.split(" ", 1)[1] for line in outputs if line.startswith("ran "))
    assert set(ran) == {str(k) for k in range(n)} | {"end"}, "a node never ran"
    check_exactly_once(flows, db, w, n + 1)


@pytest.mark.parametrize("seed", [21])
def test_every_dependent_once_with_workers_sigkilled(db: Any, fdb_cluster_file: str,
                                                     fdb_subspace: Any, tmp_path: Any,
                                                     seed: int) -> None:
    run_with_kills(db, fdb_cluster_file, fdb_subspace, tmp_path, seed, 150, 2, 6)


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.parametrize("seed", range(100, 120))
def test_every_dependent_once_with_workers_sigkilled_many_runs(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any, tmp_path: Any, seed: int) -> None:
    run_with_kills(db, fdb_cluster_file, fdb_subspace, tmp_path, seed, 300, 3, 10)
