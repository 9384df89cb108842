"""Workflows against a real server: the graph advances in its nodes' acks, exactly
once (docs/workflows.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from typing import Any, Dict, Tuple

import fdb
import fdb.impl
import pytest

from fdbrecipes import FairQueue, PriorityQueue, Queue, Worker, cli
from fdbrecipes.errors import UnknownWorkflowError, WorkflowFailedError
from fdbrecipes.jobs import Discard, Job
from fdbrecipes.tasks import App, current_job
from fdbrecipes.workflow import GraphNode, Workflows
from tests.helpers import dump, eventually

pytestmark = pytest.mark.integration


def store(fdb_subspace: Any, *structures: Any) -> Workflows:
    return Workflows(fdb_subspace["flows"], structures=structures)


class Runs:
    """What handlers ran: each value's runs, and the inputs each saw."""

    def __init__(self, flows: Workflows, db: Any) -> None:
        self.flows = flows
        self.db = db
        self.lock = threading.Lock()
        self.count: Counter[Any] = Counter()
        self.inputs: Dict[Any, Dict[str, Any]] = {}

    def __call__(self, job: Job) -> Any:
        seen = self.flows.inputs(self.db, job)
        with self.lock:
            self.count[job.value] += 1
            self.inputs[job.value] = seen
        if isinstance(job.value, str) and job.value.startswith("fail"):
            raise Discard("failing on purpose")
        return f"did {job.value}"


class Cancellable:
    """A handler that runs until its job is cancelled (30 s at most), and says when it
    started and when it saw the cancel."""

    def __init__(self) -> None:
        self.started, self.saw_cancel = threading.Event(), threading.Event()

    def __call__(self, job: Job) -> None:
        self.started.set()
        for _ in range(3000):
            if job.cancelled:
                self.saw_cancel.set()
                job.check()
            self.saw_cancel.wait(0.01)  # a step of work between two looks


def drain(db: Any, queue: Any, handler: Any, **options: Any) -> None:
    Worker(db, queue, handler, lease_seconds=10, **options).run(burst=True)


def test_the_diamond_of_two_parents_sharing_children(db: Any, fdb_subspace: Any) -> None:
    """bullmq#1021: two parents sharing two children; every node runs once, and both
    parents run, after both children."""
    q = Queue(fdb_subspace["q"], history=3600)
    flows = store(fdb_subspace, q)
    flow = flows.new()
    a = flow.add(q, "a", name="a")
    b = flow.add(q, "b", name="b")
    flow.add(q, "p1", deps=[a, b], name="p1")
    flow.add(q, "p2", deps=[a, b], name="p2")
    w = flows.create(db, flow)
    runs = Runs(flows, db)
    drain(db, q, runs)
    assert runs.count == Counter({"a": 1, "b": 1, "p1": 1, "p2": 1})
    for parent in ("p1", "p2"):
        assert {k: v.result for k, v in runs.inputs[parent].items()} == \
            {"a": "did a", "b": "did b"}
    assert flows.result(db, w, timeout=10) == {"p1": "did p1", "p2": "did p2"}
    status = flows.status(db, w)
    assert status.state == "succeeded" and status.counts["succeeded"] == 4
    assert [n.state for n in status.nodes] == ["succeeded"] * 4
    assert flows.status(db, w, 0).nodes == []


@pytest.mark.parametrize("n", [500])
def test_fan_out_then_fan_in(db: Any, fdb_subspace: Any, n: int) -> None:
    q = Queue(fdb_subspace["q"])
    pq = PriorityQueue(fdb_subspace["pq"])
    flows = store(fdb_subspace, q, pq)
    flow = flows.new()
    root = flow.add(q, "root", name="root")
    kids = flow.add_many(pq, list(range(n)), deps=[root], priority=3)
    flow.add(q, "sink", deps=kids, name="sink")
    w = flows.create(db, flow)
    runs = Runs(flows, db)
    # the queue's worker drains the root, the priority queue's the children, and the
    # sink comes last: run them until the workflow is over
    done = threading.Event()

    def forever(s: Any) -> None:
        with Worker(db, s, runs, lease_seconds=10, concurrency=8):
            done.wait(120)

    both = [threading.Thread(target=forever, args=(s,)) for s in (q, pq)]
    for t in both:
        t.start()
    try:
        assert flows.result(db, w, timeout=120) == {"sink": "did sink"}
    finally:
        done.set()
        for t in both:
            t.join(60)
    assert runs.count["root"] == 1 and runs.count["sink"] == 1
    assert all(runs.count[k] == 1 for k in range(n))
    assert len(runs.inputs["sink"]) == n


def test_a_workflow_in_a_transaction_that_aborts_leaves_no_key(db: Any,
                                                                fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"], history=3600)
    flows = store(fdb_subspace, q)
    flow = flows.new()
    a = flow.add(q, "a")
    flow.add(q, "b", deps=[a])
    before = dump(db, fdb_subspace)
    tr = db.create_transaction()
    flows.create(tr, flow)
    tr.reset()  # the application's transaction aborts
    assert dump(db, fdb_subspace) == before
    with pytest.raises(UnknownWorkflowError):
        flows.status(db, flow.id)
    assert q.size(db) == 0


def test_bad_graphs_are_refused_before_anything_is_written(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"])
    other = Queue(fdb_subspace["other"])
    flows = store(fdb_subspace, q)
    before = dump(db, fdb_subspace)
    flow = flows.new()
    a = flow.add(q, "a")
    b = flow.add(q, "b", deps=[a])
    flow.after(a, [b])  # a cycle
    with pytest.raises(ValueError, match="cycle"):
        flows.create(db, flow)
    another = flows.new()
    stranger = another.add(q, "x")
    with pytest.raises(ValueError, match="another workflow"):
        flows.new().add(q, "y", deps=[stranger])
    with pytest.raises(ValueError, match="unknown"):
        flows.new().add(other, "z")
    with pytest.raises(ValueError, match="no node"):
        flows.create(db, flows.new())
    with pytest.raises(ValueError, match="on_failure"):
        flows.new().add(q, "w", on_failure="explode")
    assert dump(db, fdb_subspace) == before


def test_fail_cancels_what_has_not_started(db: Any, fdb_subspace: Any) -> None:
    """A node fails under "fail": the siblings waiting end cancelled, a sibling running
    sees job.cancelled, and no dependent runs."""
    q = Queue(fdb_subspace["q"], history=3600)
    slow = Queue(fdb_subspace["slow"], history=3600)
    flows = store(fdb_subspace, q, slow)
    flow = flows.new()
    runner = flow.add(slow, "runner", name="runner")
    bad = flow.add(q, "fail-me", name="bad")
    waiting = flow.add_many(q, ["w1", "w2", "w3"], deps=[runner])
    flow.add(q, "after", deps=[bad, *waiting], name="after")
    w = flows.create(db, flow)
    slow_handler = Cancellable()
    started, saw_cancel = slow_handler.started, slow_handler.saw_cancel

    runs = Runs(flows, db)
    with Worker(db, slow, slow_handler, lease_seconds=10, concurrency=1):
        assert started.wait(30)
        drain(db, q, runs)
        assert saw_cancel.wait(30)
    assert runs.count == Counter({"fail-me": 1})
    with pytest.raises(WorkflowFailedError):
        flows.result(db, w, timeout=10)
    status = flows.status(db, w)
    assert status.state == "failed"
    by_name = {node.name: node.state for node in status.nodes}
    assert by_name["bad"] == "failed"
    assert by_name["after"] == "cancelled"
    assert all(by_name[str(i)] == "cancelled" for i in (2, 3, 4))


def test_a_batch_pushes_each_callback_once(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"])
    fq = FairQueue(fdb_subspace["fq"])
    flows = store(fdb_subspace, q, fq)
    cb = {"group": "cb"}
    ok = flows.batch(q, list(range(50)), on_success=(fq, "all good", cb),
                     on_complete=(fq, "complete", cb), on_failure=(fq, "some failed", cb))
    bad = flows.batch(q, [1, "fail-1", 2], on_success=(fq, "all good 2", cb),
                      on_complete=(fq, "complete 2", cb), on_failure=(fq, "some failed 2", cb))
    ids = [flows.create(db, ok), flows.create(db, bad)]
    runs = Runs(flows, db)
    drain(db, q, runs)
    callbacks = Runs(flows, db)
    drain(db, fq, callbacks)
    assert callbacks.count == Counter({"all good": 1, "complete": 1, "complete 2": 1,
                                       "some failed 2": 1})
    failed = callbacks.inputs["some failed 2"]
    assert sorted(node.state for node in failed.values()) == ["failed", "succeeded",
                                                              "succeeded"]
    for w in ids:
        status = flows.status(db, w)
        assert status.counts["waiting"] == 0 and status.counts["queued"] == 0
    assert {n.name: n.state for n in flows.status(db, ids[1]).nodes}["on_success"] == \
        "skipped"


def test_cancel_a_workflow(db: Any, fdb_subspace: Any) -> None:
    """Nothing not yet started runs; the running node sees job.cancelled."""
    q = Queue(fdb_subspace["q"], history=3600)
    slow = Queue(fdb_subspace["slow"], history=3600)
    flows = store(fdb_subspace, q, slow)
    flow = flows.new()
    runner = flow.add(slow, "runner", name="runner")
    flow.add(q, "queued", name="queued")
    flow.add(q, "later", deps=[runner], name="later")
    w = flows.create(db, flow)
    slow_handler = Cancellable()
    started, saw_cancel = slow_handler.started, slow_handler.saw_cancel

    with Worker(db, slow, slow_handler, lease_seconds=10, concurrency=1):
        assert started.wait(30)
        assert flows.cancel(db, w) is True
        assert flows.cancel(db, w) is False
        assert saw_cancel.wait(30)
    runs = Runs(flows, db)
    drain(db, q, runs)
    assert not runs.count
    states = {n.name: n.state for n in flows.status(db, w).nodes}
    assert states == {"runner": "cancelled", "queued": "cancelled", "later": "cancelled"}
    with pytest.raises(WorkflowFailedError):
        flows.result(db, w, timeout=5)


def test_ignore_and_continue(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"])
    flows = store(fdb_subspace, q)
    flow = flows.new()
    good = flow.add(q, "good", name="good")
    bad = flow.add(q, "fail-a", name="bad")
    flow.add(q, "ignoring", deps=[good, (bad, "ignore")], name="ignoring")
    flow.add(q, "continuing", deps=[good, bad], on_failure="continue", name="continuing")
    w = flows.create(db, flow)
    runs = Runs(flows, db)
    drain(db, q, runs)
    assert set(runs.inputs["ignoring"]) == {"good"}
    seen = runs.inputs["continuing"]
    assert seen["bad"].state == "failed" and "failing on purpose" in seen["bad"].error
    assert flows.result(db, w, timeout=5) == {"ignoring": "did ignoring",
                                              "continuing": "did continuing"}
    assert flows.status(db, w).state == "completed"


@pytest.mark.parametrize("n", [pytest.param(10_000, marks=pytest.mark.soak), 1_200])
def test_fan_out_and_fan_in_through_expanders(db: Any, fdb_subspace: Any, n: int) -> None:
    """More nodes freed at once than one transaction pushes: expanders push them (a
    fan-out); a fan-in's first nodes, pushed by its create."""
    q = Queue(fdb_subspace["q"])
    flows = store(fdb_subspace, q)
    flow = flows.new()
    root = flow.add(q, "root", name="root")
    kids = flow.add_many(q, list(range(n)), deps=[root])
    flow.add(q, "sink", deps=kids, name="sink")
    w = flows.create(db, flow)
    fan_in = flows.new()
    leaves = fan_in.add_many(q, list(range(n, 2 * n)))
    fan_in.add(q, "sink2", deps=leaves, name="sink2")
    w2 = flows.create(db, fan_in)
    runs = Runs(flows, db)
    with Worker(db, q, runs, lease_seconds=30, concurrency=8):
        assert flows.result(db, w, timeout=600) == {"sink": "did sink"}
        assert flows.result(db, w2, timeout=600) == {"sink2": "did sink2"}
    assert max(runs.count.values()) == 1 and len(runs.count) == 2 * n + 3
    assert len(runs.inputs["sink"]) == n


def test_list_pages_by_id_and_graph_gives_the_edges(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"], history=3600)
    flows = store(fdb_subspace, q)
    ids = []
    made = []
    for k in range(3):
        flow = flows.new()
        a = flow.add(q, f"a{k}", name="a")
        b = flow.add(q, f"b{k}", name="b")
        made.append([a, b, flow.add(q, f"c{k}", deps=[a, b], name="c")])
        ids.append(flows.create(db, flow))
    listed = flows.list(db)
    assert [s.id for s in listed] == sorted(ids)
    assert all(s.state == "running" and s.total == 3 and s.nodes == [] and
               s.counts == {"queued": 2, "waiting": 1, "succeeded": 0, "failed": 0,
                            "cancelled": 0, "skipped": 0} for s in listed)
    first = flows.list(db, 2)
    assert [s.id for s in first] == sorted(ids)[:2]
    assert [s.id for s in flows.list(db, 2, after=first[-1].id)] == sorted(ids)[2:]
    graph = flows.graph(db, ids[0])
    a, b, c = made[0]
    at = q.subspace.key()  # each node's job: its id, its structure's key, no group
    assert graph == [GraphNode(0, "a", "queued", (), None, a.id, at, None),
                     GraphNode(1, "b", "queued", (), None, b.id, at, None),
                     GraphNode(2, "c", "waiting", ("a", "b"), None, c.id, at, None)]
    assert q.job(db, a.id) is not None  # the id is its job's
    assert flows.graph(db, ids[0], 2) == graph[:2] and flows.graph(db, ids[0], 0) == []
    drain(db, q, Runs(flows, db))
    assert {s.state for s in flows.list(db)} == {"succeeded"}
    assert [n.state for n in flows.graph(db, ids[0])] == ["succeeded"] * 3
    with pytest.raises(UnknownWorkflowError):
        flows.graph(db, b"no such workflow")
    with pytest.raises(ValueError):
        flows.list(db, 0)
    with pytest.raises(TypeError):
        flows.list(db, 10, after="not bytes")


def test_the_async_twin(db: Any, fdb_subspace: Any) -> None:
    import asyncio

    from fdbrecipes.aio.workflow import AsyncWorkflows

    q = Queue(fdb_subspace["q"], history=3600)  # a cancel finds its jobs by their records
    flows = AsyncWorkflows(fdb_subspace["flows"], structures=[q])

    async def main() -> None:
        flow = flows.new()
        a = flow.add(q, "a", name="a")
        flow.add(q, "b", deps=[a], name="b")
        w = await flows.create(db, flow)
        assert (await flows.status(db, w)).counts["queued"] == 1
        assert [s.id for s in await flows.list(db)] == [w]
        assert [n.deps for n in await flows.graph(db, w)] == [(), ("a",)]
        assert await flows.cancel(db, w) is True
        status = await flows.status(db, w)
        assert status.state == "cancelled" and status.counts["cancelled"] == 2
        with pytest.raises(WorkflowFailedError):
            await flows.result(db, w, timeout=5)

    asyncio.run(main())
    assert q.size(db) == 0


def test_prune_forgets_workflows_over_and_past_their_retention(db: Any,
                                                               fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q], retention=0.001)
    done, running = flows.new(), flows.new()
    done.add(q, "x")
    first = running.add(q, "y")
    running.add(q, "z", deps=[first])
    ids = [flows.create(db, done), flows.create(db, running)]
    drain(db, q, Runs(flows, db), prefetch=0)  # runs "x" and "y", then "z"
    later = flows.new()
    later.add(q, "w")
    ids.append(flows.create(db, later))  # over and past its retention, but still running
    assert {status.id: status.state for status in flows.list(db)} == {
        ids[0]: "succeeded", ids[1]: "succeeded", ids[2]: "running"}
    assert flows.prune(db) == 3
    assert [status.id for status in flows.list(db)] == ids[2:]
    for w in ids[:2]:
        with pytest.raises(UnknownWorkflowError):
            flows.status(db, w)
    assert flows.status(db, ids[2]).state == "running"
    drain(db, q, Runs(flows, db))
    assert flows.prune(db) == 1
    with pytest.raises(UnknownWorkflowError):
        flows.status(db, ids[2])
    assert flows.list(db) == []
    assert not [k for k in dump(db, fdb_subspace["flows"]) if not
                k.startswith(fdb_subspace["flows"]["c"].key())], "keys left behind"


def test_a_large_fan_out_advances_in_short_transactions(db: Any, fdb_cluster_file: str,
                                                        fdb_subspace: Any) -> None:
    """The ack of a node with 12,000 dependents does not count them all down itself
    (36,000 reads in one transaction: seconds, past FoundationDB's five on a loaded
    machine, and the node ran again and again, its dependents never pushed): its
    expanders do, 500 a transaction, each acked alone.  The worker's transactions
    here time out after 1.2 s (a real client option), so one that reads all 36,000
    keys fails on any machine.  The dependents go to a queue no worker serves: only
    their pushes are waited for."""
    q, later = Queue(fdb_subspace["q"]), Queue(fdb_subspace["later"])
    flows = store(fdb_subspace, q, later)
    flow = flows.new()
    root = flow.add(q, "root", name="root")
    flow.add_many(later, range(12_000), deps=[root])
    w = flows.create(db, flow)
    quick = fdb.impl.create_database(fdb_cluster_file)  # its own options
    quick.options.set_transaction_timeout(1200)
    runs = Runs(flows, db)
    with Worker(quick, q, runs, lease_seconds=10, concurrency=8):
        eventually(lambda: flows.status(db, w, 0).counts["waiting"] == 0, 60,
                   "every dependent pushed")
    assert runs.count == {"root": 1}
    assert flows.status(db, w, 0).counts == {"queued": 12_000, "succeeded": 1, "failed": 0,
                                             "cancelled": 0, "skipped": 0, "waiting": 0}
    assert later.size(db) == 12_000


def test_a_batch_whose_members_all_succeed_succeeds(db: Any, fdb_subspace: Any) -> None:
    """Its on_failure callback skipped (``when`` unmet) is no failure: the batch ends
    ``succeeded``, not ``completed`` (which says some failures were ignored)."""
    q = Queue(fdb_subspace["q"])
    flows = store(fdb_subspace, q)
    batch = flows.batch(q, ["a", "b"], on_success=(q, "all"), on_failure=(q, "some failed"))
    w = flows.create(db, batch)
    runs = Runs(flows, db)
    Worker(db, q, runs).run(burst=True)
    status = flows.status(db, w, 0)
    assert status.counts["skipped"] == 1 and status.counts["succeeded"] == 3
    assert status.state == "succeeded"
    assert flows.result(db, w, timeout=5) == {"on_success": "did all", "on_failure": None}


class Cli:
    """``fdbrecipes`` run in this process (the entry point itself is run once, in a
    process of its own): its exit status, stdout and stderr."""

    def __init__(self, cluster_file: str, capsys: Any) -> None:
        # The same file named otherwise: fdb.open caches a Database per name, and the
        # command sets its transaction timeout on the one it opens, not on the tests'.
        self.cluster_file = os.path.join(os.path.dirname(cluster_file), ".",
                                         os.path.basename(cluster_file))
        self.capsys = capsys

    def __call__(self, *args: str) -> Tuple[int, str, str]:
        self.capsys.readouterr()
        status = cli.main([*args, "--cluster-file", self.cluster_file])
        out, err = self.capsys.readouterr()
        return status, out, err


def test_the_command_line_lists_reads_waits_and_cancels(db: Any, fdb_subspace: Any,
                                                        fdb_cluster_file: str,
                                                        capsys: Any) -> None:
    q, idle = Queue(fdb_subspace["q"], history=3600), Queue(fdb_subspace["idle"], history=60)
    flows = store(fdb_subspace, q, idle)
    place = ["--tuple", repr(fdb.tuple.unpack(fdb_subspace["flows"].key()))]
    first, second = flows.new(), flows.new()
    a = first.add(q, "a", name="a")
    first.add(q, "b", deps=[a], name="b")
    c = second.add(idle, "c", name="c")  # no worker serves it
    second.add(idle, "d", deps=[c], name="d")
    ids = [flows.create(db, first), flows.create(db, second)]
    listed = subprocess.run([sys.executable, "-m", "fdbrecipes", "workflow", "list", *place,
                             "--json", "--cluster-file", fdb_cluster_file],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["workflows"]
    assert [row["id"] for row in rows] == sorted(w.hex() for w in ids)  # by id
    assert {row["state"] for row in rows} == {"running"}
    assert all((row["counts"]["queued"], row["counts"]["waiting"]) == (1, 1) for row in rows)
    run = Cli(fdb_cluster_file, capsys)
    status, out, err = run("workflow", "list", *place, "--limit", "1", "--after", rows[0]["id"],
                           "--json")
    assert status == 0, err
    assert [row["id"] for row in json.loads(out)["workflows"]] == [rows[1]["id"]]
    status, out, err = run("workflow", "status", *place, ids[0].hex())
    assert status == 0, err
    assert "b     waiting  a" in out and "a     queued" in out
    status, out, err = run("workflow", "result", *place, ids[0].hex())
    assert status == 1 and "still running" in err
    drain(db, q, Runs(flows, db))
    assert flows.status(db, ids[0]).state == "succeeded", "the first workflow ran"
    status, out, err = run("workflow", "result", *place, ids[0].hex(), "--wait", "10", "--json")
    got = json.loads(out)
    assert got["state"] == "succeeded" and got["results"] == {"b": "did b"}
    status, out, err = run("workflow", "cancel", *place, ids[1].hex())
    assert status == 2 and "--yes" in err
    status, out, err = run("workflow", "cancel", *place, ids[1].hex(), "--yes")
    assert status == 0, err
    after = flows.status(db, ids[1])
    assert after.state == "cancelled" and after.counts["cancelled"] == 2
    assert idle.size(db) == 0, "the queued node was taken out of its queue"
    status, out, err = run("workflow", "result", *place, ids[1].hex(), "--json")
    assert status == 1 and json.loads(out)["state"] == "cancelled"
    status, out, err = run("workflow", "status", *place, "00" * 16)
    assert status == 1 and "no workflow" in err
    status, out, err = run("workflow", "status", *place, "not-hex")
    assert status == 2 and "hex" in err
    status, out, err = run("stats", *place)
    assert status == 1 and "fdbrecipes workflow" in err


def test_tasks_as_nodes(db: Any, fdb_subspace: Any) -> None:
    """A node can be a task's call: its job on the task's queue, its return value
    (decoded into the function's return type) its dependents' input."""
    app = App(fdb_subspace["app"], history=3600)
    seen: Dict[str, Any] = {}

    @app.task
    def square(n: int) -> Tuple[int, int]:
        return n, n * n

    @app.task(queue="sums", priority=1)
    def total(label: str) -> str:
        job = current_job()
        assert job is not None
        got = flows.inputs(db, job)
        seen[label] = {name: dep.result for name, dep in got.items()}
        return f"{label}: {sum(dep.result[1] for dep in got.values())}"

    flows = Workflows(fdb_subspace["flows"], structures=app.served())
    flow = flows.new()
    parts = [flow.add(square.s(n), name=f"sq{n}") for n in (1, 2, 3)]
    flow.add(total.s("sum"), deps=parts, name="total")
    w = flows.create(db, flow)
    batch = flows.batch(app.structure("default"), [square.item(n) for n in (4, 5)],
                        on_complete=total.s("batch"))
    b = flows.create(db, batch)
    with Worker(db, app, lease_seconds=10):
        assert flows.result(db, w, timeout=60) == {"total": "sum: 14"}
        assert flows.result(db, b, timeout=60) == {"on_complete": "batch: 41"}
    assert seen["sum"] == {"sq1": (1, 1), "sq2": (2, 4), "sq3": (3, 9)}, "typed results"
    assert seen["batch"] == {"0": (4, 16), "1": (5, 25)}
    with pytest.raises(TypeError, match="give it no value"):
        flows.new().add(square.s(1), "a value")
    with pytest.raises(TypeError, match="value"):
        flows.new().add(app.structure("default"))
    with pytest.raises(TypeError, match="its own id"):
        square.configure(id=b"x").s(1)
    with pytest.raises(ValueError, match="unknown to this workflow store"):
        Workflows(fdb_subspace["other"], structures=[Queue(fdb_subspace["q"])]).new().add(
            square.s(1))
    with pytest.raises(TypeError, match="n"):
        square.s("not an int")  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["fail", "continue"])
def test_a_node_cancelled_while_it_waits_advances_its_workflow(db: Any, fdb_subspace: Any,
                                                               policy: str) -> None:
    """A node's job cancelled through its structure (``Queue.cancel``) while it waits
    ends ``cancelled`` in the workflow, in the cancel's transaction: its dependents
    follow their policy."""
    q = Queue(fdb_subspace["q"], history=3600)
    other = Queue(fdb_subspace["other"], history=3600)
    flows = store(fdb_subspace, q, other)
    flow = flows.new()
    a = flow.add(q, "a", name="a", delay=3600)  # waits, delayed
    flow.add(other, "sibling", name="sibling")
    flow.add(other, "after", deps=[(a, policy)], name="after")
    w = flows.create(db, flow)
    assert q.cancel(db, a.id) == "cancelled"
    runs = Runs(flows, db)
    drain(db, other, runs)
    states = {n.name: n.state for n in flows.status(db, w).nodes}
    if policy == "fail":
        assert not runs.count
        assert states == {"a": "cancelled", "sibling": "cancelled", "after": "cancelled"}
        assert flows.status(db, w).state == "failed"
    else:
        assert runs.count == Counter({"sibling": 1, "after": 1})
        assert runs.inputs["after"]["a"].state == "cancelled"
        assert states == {"a": "cancelled", "sibling": "succeeded", "after": "succeeded"}
