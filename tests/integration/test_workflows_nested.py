"""Sub-workflows against a real server: a node that is a workflow of its own starts
when its dependencies ended, and its end is the node's (docs/workflows.md,
"Sub-workflows")."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, List

import pytest

from fdbrecipes import Queue, Worker
from fdbrecipes.errors import UnknownWorkflowError, WorkflowFailedError
from fdbrecipes.jobs import Job
from fdbrecipes.workflow import Workflows
from tests.helpers import dump
from tests.integration.test_workflows import Runs

pytestmark = pytest.mark.integration


class Ordered(Runs):
    """:class:`Runs`, and the order the values ran in."""

    def __init__(self, flows: Workflows, db: Any) -> None:
        super().__init__(flows, db)
        self.order: List[Any] = []
        self.order_lock = threading.Lock()

    def __call__(self, job: Job) -> Any:
        with self.order_lock:
            self.order.append(job.value)
        return super().__call__(job)


def drain(db: Any, structure: Any, handler: Any) -> None:
    Worker(db, structure, handler, lease_seconds=10, concurrency=1).run(burst=True)


def test_a_sub_workflow_starts_after_its_deps_and_its_end_frees_the_parent(
        db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    sub = flows.new()
    x = sub.add(q, "x", name="x")
    sub.add(q, "y", deps=[x], name="y")
    sub.add(q, "z", deps=[x], name="z")
    inner = flows.new()
    inner.add(q, "deep", name="deep")
    sub.add_workflow(inner, name="inner")
    flow = flows.new()
    a = flow.add(q, "a", name="a")
    s = flow.add_workflow(sub, deps=[a], name="sub")
    flow.add(q, "after", deps=[s, a], name="after")
    w = flows.create(db, flow)
    with pytest.raises(UnknownWorkflowError):  # it did not start
        flows.status(db, sub.id)
    runs = Ordered(flows, db)
    drain(db, q, runs)
    assert runs.count == Counter(["a", "x", "y", "z", "deep", "after"])
    assert runs.order[0] == "a" and runs.order[-1] == "after"
    seen = runs.inputs["after"]
    assert seen["sub"].state == "succeeded"
    assert seen["sub"].result == {"y": "did y", "z": "did z", "inner": {"deep": "did deep"}}
    assert flows.result(db, w, timeout=5) == {"after": "did after"}
    assert flows.result(db, sub.id, timeout=5)["inner"] == {"deep": "did deep"}
    assert flows.status(db, sub.id).state == "succeeded"
    status = flows.status(db, w)
    assert status.state == "succeeded" and status.total == 3
    assert flows.prune(db) == 0  # within their retention


@pytest.mark.parametrize("policy", ["fail", "continue"])
def test_a_sub_workflow_that_fails_fails_its_node(db: Any, fdb_subspace: Any,
                                                  policy: str) -> None:
    q = Queue(fdb_subspace["q"], history=3600)
    later = Queue(fdb_subspace["later"], history=3600)
    flows = Workflows(fdb_subspace["flows"], structures=[q, later])
    sub = flows.new()
    bad = sub.add(q, "fail-inner", name="bad")
    sub.add(q, "never", deps=[bad], name="never")
    flow = flows.new()
    s = flow.add_workflow(sub, name="sub")
    flow.add(later, "sibling", name="sibling")
    flow.add(later, "after", deps=[(s, policy)], name="after")
    w = flows.create(db, flow)
    runs = Runs(flows, db)
    drain(db, q, runs)
    assert runs.count == Counter(["fail-inner"])
    assert flows.status(db, sub.id).state == "failed"
    drain(db, later, runs)
    states = {n.name: n.state for n in flows.status(db, w).nodes}
    assert states["sub"] == "failed"
    if policy == "fail":
        assert states == {"sub": "failed", "sibling": "cancelled", "after": "cancelled"}
        with pytest.raises(WorkflowFailedError):
            flows.result(db, w, timeout=5)
    else:
        assert runs.count == Counter(["fail-inner", "sibling", "after"])
        seen = runs.inputs["after"]["sub"]
        assert seen.state == "failed" and "sub-workflow failed" in seen.error
        assert seen.result is None  # a failed sub-workflow's partial results are not its
        assert flows.status(db, w).state == "completed"


def test_cancelling_the_parent_cancels_its_running_sub_workflow(db: Any,
                                                               fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"], history=3600)
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    sub = flows.new()
    sub.add_many(q, ["s1", "s2"])
    waiting = flows.new()
    waiting.add(q, "w1")
    flow = flows.new()
    s = flow.add_workflow(sub, name="sub")
    flow.add_workflow(waiting, deps=[s], name="waiting")
    w = flows.create(db, flow)
    assert flows.status(db, sub.id).state == "running"
    assert flows.cancel(db, w) is True
    assert flows.status(db, sub.id).state == "cancelled"
    assert {n.name: n.state for n in flows.status(db, w).nodes} == \
        {"sub": "cancelled", "waiting": "cancelled"}
    runs = Runs(flows, db)
    drain(db, q, runs)
    assert not runs.count
    flows.prune(db)  # within retention: nothing forgotten
    assert flows.status(db, sub.id).state == "cancelled"


def test_bad_sub_workflows_are_refused(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    others = Workflows(fdb_subspace["others"], structures=[q])
    flow = flows.new()
    flow.add(q, "a")
    sub = flows.new()
    sub.add(q, "x")
    with pytest.raises(TypeError):
        flow.add_workflow(others.new())
    with pytest.raises(ValueError, match="no node"):
        flow.add_workflow(flows.new())
    with pytest.raises(ValueError, match="this workflow"):
        flow.add_workflow(flow)
    flow.add_workflow(sub)
    with pytest.raises(ValueError, match="in a workflow already"):
        flows.new().add_workflow(sub)
    with pytest.raises(ValueError, match="in a workflow already"):
        sub.add_workflow(flow)  # a cycle of workflows
    with pytest.raises(ValueError, match="open batch"):
        flow.add_workflow(flows.open_batch(on_complete=(q, "done")))
    before = dump(db, fdb_subspace)
    with pytest.raises(ValueError, match="created with its parent"):
        flows.create(db, sub)
    x = sub.nodes[0]
    sub.after(x, [sub.add(q, "y")])
    sub.after(sub.nodes[1], [x])
    with pytest.raises(ValueError, match="cycle"):  # the parent's create checks it
        flows.create(db, flow)
    assert dump(db, fdb_subspace) == before


def test_prune_forgets_sub_workflows_with_their_parent(db: Any, fdb_subspace: Any) -> None:
    """A sub-workflow has its parent's retention: started or not, pruning the parent
    forgets it."""
    q = Queue(fdb_subspace["q"])
    flows = Workflows(fdb_subspace["flows"], structures=[q], retention=0.001)
    ran, never = flows.new(), flows.new()
    ran.add(q, "x")
    never.add(q, "y")
    deeper = flows.new()
    deeper.add(q, "deep")
    never.add_workflow(deeper)
    flow = flows.new()
    first = flow.add_workflow(ran, name="ran")
    flow.add_workflow(never, deps=[first], name="never")
    w = flows.create(db, flow)
    flows.cancel(db, w)  # "ran" started (and is cancelled), "never" did not start
    assert flows.prune(db) == 1
    for gone in (w, ran.id, never.id, deeper.id):
        with pytest.raises(UnknownWorkflowError):
            flows.status(db, gone)
    assert not [k for k in dump(db, fdb_subspace["flows"]) if not
                k.startswith(fdb_subspace["flows"]["c"].key())], "keys left behind"
