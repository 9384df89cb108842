"""Workflows whose nodes are stored many to a key (see fdbrecipes._workflow.defs)
read back whole against a real server: nodes across blocks, a value too large for
its block, a node with more dependents than its block keeps, custom names, and the
keys one create writes."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from fdbrecipes import Queue, Worker
from fdbrecipes.jobs import Job
from fdbrecipes.workflow import Workflows
from tests.helpers import dump

pytestmark = pytest.mark.integration

BIG = "x" * 5_000


def test_nodes_of_every_shape_read_back(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"], history=3600)
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.new()
    hub = flow.add(q, "hub", name="the hub")
    big = flow.add(q, BIG, name="big")
    spokes = flow.add_many(q, [f"s{k}" for k in range(20)], deps=[hub])  # apart: > 8
    filler = flow.add_many(q, [f"f{k}" for k in range(50)])  # three blocks and more
    sink = flow.add(q, "sink", deps=[big, *spokes, filler[-1]], name="sink")
    w = flows.create(db, flow)
    assert flows.targets(db, w) == [bytes(q.subspace.key())]
    graph = flows.graph(db, w)
    assert [n.name for n in graph] == ["the hub", "big", *(str(k) for k in range(2, 72)),
                                       "sink"]
    assert graph[-1].deps == ("big", *(s.name for s in spokes), filler[-1].name)
    assert graph[2].deps == ("the hub",)
    status = flows.status(db, w, limit=3)
    assert [n.name for n in status.nodes] == ["the hub", "big", "2"]
    assert status.nodes[2].waiting_on == ("the hub",) and status.counts["queued"] == 52
    ran: Counter[Any] = Counter()
    seen = {}
    lock = threading.Lock()

    def handler(job: Job) -> str:
        with lock:
            ran[job.value] += 1
        if job.value == "sink":
            seen.update(flows.inputs(db, job))
        return "did " + str(job.value)

    Worker(db, q, handler, lease_seconds=10).run(burst=True)
    assert sum(ran.values()) == 73 and set(ran.values()) == {1}
    assert seen["big"].result == f"did {BIG}" and seen["big"].state == "succeeded"
    assert sorted(seen) == sorted(["big", *(s.name for s in spokes), filler[-1].name])
    assert flows.result(db, w, timeout=30) == {
        sink.name: "did sink", **{f.name: f"did f{k}" for k, f in enumerate(filler[:-1])}}


def test_a_create_writes_a_key_per_block_of_nodes(db: Any, fdb_subspace: Any) -> None:
    """600 nodes without dependencies and one depending on them all: their definitions
    in 38 keys (16 nodes a key), the last one's 600 dependencies in 5 (128 a key) and
    its 6 counters, the header, tally, pruning entry and receipt: under 60 keys; and
    the 600 first nodes pushed by the create itself (their jobs: an item and its id
    each; no state key of their own, they wait on nothing: queued, as status and
    graph say), no expander."""
    q = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.new()
    flow.add(q, "last", deps=flow.add_many(q, range(600)), name="last")
    w = flows.create(db, flow)
    assert len(dump(db, fdb_subspace["flows"])) < 60
    assert len(dump(db, fdb_subspace["q"])) < 2 * 600 + 10
    assert flows.status(db, w, 0).counts["queued"] == 600 and q.size(db) == 600
    assert [n.state for n in flows.status(db, w, 601).nodes] == ["queued"] * 600 + ["waiting"]
    assert [n.state for n in flows.graph(db, w)] == ["queued"] * 600 + ["waiting"]


def test_a_create_pushes_what_fits_and_leaves_the_rest_to_expanders(
        db: Any, fdb_subspace: Any) -> None:
    """4,000 first nodes of 900 bytes each: their definitions (3.6 MB) and their
    pushes (about 1.8 KB each) do not fit in one transaction's 9 MB: the create pushes
    as many as fit and hands the rest to expanders (500 each), and commits.  Every
    first node is queued from then on (waiting on nothing: pushed, or by its
    expander), and the expanders push the rest."""
    q = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.new()
    flow.add_many(q, [f"{k:04}" + "v" * 896 for k in range(4_000)])
    w = flows.create(db, flow)
    status = flows.status(db, w, 4_000)
    assert status.counts["queued"] == 4_000 and status.counts["waiting"] == 0
    assert {node.state for node in status.nodes} == {"queued"}
    values = q.items(db)
    pushed = sum(type(v) is str for v in values)
    assert 2_000 < pushed < 4_000
    assert len(values) == pushed + -(-(4_000 - pushed) // 500)  # and the expanders'
    Worker(db, q, str, lease_seconds=10, concurrency=4).run(burst=True)
    status = flows.status(db, w, 0)
    assert status.state == "succeeded" and status.counts["succeeded"] == 4_000


def test_a_drained_workflow_leaves_no_job_id_in_its_queue(db: Any, fdb_subspace: Any) -> None:
    """A node's job is pushed once, by its workflow's counters, under an id made for
    it: its ack forgets the id (one clear), not retires it for ``id_retention`` (two
    keys a node, collected later): once the workflow ran, its queue holds its counters
    only."""
    q = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.new()
    flow.add(q, "last", deps=flow.add_many(q, range(100)), name="last")
    w = flows.create(db, flow)
    Worker(db, q, str, lease_seconds=10, concurrency=4).run(burst=True)
    assert flows.status(db, w, 0).state == "succeeded"
    assert len(dump(db, fdb_subspace["q"])) < 10


def test_a_first_node_reads_queued_until_it_ends(db: Any, fdb_subspace: Any) -> None:
    """A node that waits on nothing has no state key until it ends: ``inputs`` of its
    dependent, ``status`` and ``graph`` read it as queued, then as it ended."""
    q = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.new()
    a = flow.add(q, "a", name="a")
    b = flow.add(q, "b", deps=[a], name="b", on_failure="continue")
    w = flows.create(db, flow)
    assert flows.inputs(db, b.id)["a"].state == "queued"
    assert [(n.name, n.state) for n in flows.graph(db, w)] == [("a", "queued"), ("b", "waiting")]
    lease = q.claim(db, 30)
    assert lease is not None and lease.value == "a"
    q.bury(db, lease, "no")  # its step: a failed, b (continue) pushed
    assert flows.inputs(db, b.id)["a"].state == "failed"
    status = flows.status(db, w)
    assert [(n.name, n.state) for n in status.nodes] == [("a", "failed"), ("b", "queued")]
    assert status.counts == {"waiting": 0, "queued": 1, "succeeded": 0, "failed": 1,
                             "cancelled": 0, "skipped": 0}
