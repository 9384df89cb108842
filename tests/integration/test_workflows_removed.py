"""Workflows against a real server: a node's job that leaves its structure other than
through its worker's ack (``remove``, ``remove_many``, sync and async; a burial in a
process that did not make the store) still ends in its workflow, so its dependents
never wait forever (docs/workflows.md, "Failures")."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Dict, Tuple

import pytest

from fdbrecipes import FairQueue, PriorityQueue, Queue, Worker
from fdbrecipes.aio import AsyncQueue
from fdbrecipes.errors import UnknownWorkflowStoreError
from fdbrecipes.workflow import Workflows
from tests.helpers import TestClock

pytestmark = pytest.mark.integration

KINDS: Dict[str, Callable[..., Any]] = {"queue": Queue, "priority": PriorityQueue,
                                        "fair": FairQueue}


def remove_one(kind: str, how: str, db: Any, structure: Any, node: Any) -> Any:
    """Take ``node``'s job (delayed) out of ``structure`` by ``how``; what it gave."""
    where = {"group": "g"} if kind == "fair" else {}
    if how == "remove":
        return structure.remove(db, id=node.id, **where)
    tokens = [row.token for row in structure.delayed(db, *where.values()) if row.id == node.id]
    assert len(tokens) == 1
    return structure.remove_many(db, *where.values(), tokens)[0]


def chain(db: Any, flows: Workflows, structure: Any, **options: Any) -> Tuple[Any, bytes]:
    """A workflow of node x (waiting an hour: delayed) and its dependent (``fail``);
    x's node and the workflow's id."""
    flow = flows.new()
    x = flow.add(structure, "x", name="x", delay=3600, **options)
    flow.add(structure, "after-x", deps=[x], name="after-x", **options)
    return x, flows.create(db, flow)


def failed_by_x(db: Any, flows: Workflows, w: bytes) -> None:
    """Workflow ``w`` of :func:`chain` failed: x cancelled, and its dependent."""
    status = flows.status(db, w)
    assert status.state == "failed"
    assert {n.name: n.state for n in status.nodes} == {"x": "cancelled",
                                                       "after-x": "cancelled"}


@pytest.mark.parametrize("how", ["remove", "remove_many"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_node_removed_from_its_structure_ends_cancelled(db: Any, fdb_subspace: Any,
                                                          kind: str, how: str) -> None:
    """Removing a waiting node's job (``remove``, ``remove_many``) ends it
    ``cancelled`` in its workflow, in the removal's transaction: a ``fail``
    dependency fails the workflow (its other nodes cancelled), a ``continue`` one
    frees its dependent, which sees the removal in its inputs."""
    structure = KINDS[kind](fdb_subspace["s"])
    flows = Workflows(fdb_subspace["flows"], structures=[structure])
    where = {"group": "g"} if kind == "fair" else {}
    flow = flows.new()
    flow.add(structure, "a", name="a", delay=3600, **where)  # waits, delayed
    b = flow.add(structure, "b", name="b", delay=3600, **where)
    flow.add(structure, "after-b", deps=[(b, "continue")], name="after-b", **where)
    w = flows.create(db, flow)
    assert remove_one(kind, how, db, structure, b) == "b"
    states = {n.name: n.state for n in flows.status(db, w).nodes}
    assert states == {"a": "queued", "b": "cancelled", "after-b": "queued"}
    assert flows.inputs(db, flow.nodes[2].id)["b"].state == "cancelled"
    x, w2 = chain(db, flows, structure, **where)
    assert remove_one(kind, how, db, structure, x) == "x"
    failed_by_x(db, flows, w2)


def test_a_node_removed_through_the_async_twin_ends_cancelled(db: Any,
                                                               fdb_subspace: Any) -> None:
    """The async twin's ``remove`` tells the workflow the same way."""
    q: AsyncQueue[Any] = AsyncQueue(fdb_subspace["s"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    x, w = chain(db, flows, q)
    assert asyncio.run(q.remove(db, id=x.id)) == "x"
    failed_by_x(db, flows, w)


def test_a_cleared_structure_tells_no_workflow_until_it_is_cancelled(db: Any,
                                                                      fdb_subspace: Any) -> None:
    """``clear`` reads nothing of what it wipes (docs/workflows.md): a node cleared
    stays ``queued``, its workflow runs on, and a cancel ends it (its job is not found:
    ``cancelled``), whether it waited on nothing or was pushed by its dependencies."""
    q: Queue[Any] = Queue(fdb_subspace["s"])
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.new()
    x = flow.add(q, "x", name="x")
    flow.add(q, "y", name="y", delay=3600)  # waits on nothing: pushed, no state key
    flow.add(q, "after-x", deps=[x], name="after-x", delay=3600)  # pushed by x's ack
    w = flows.create(db, flow)
    Worker(db, q, str, lease_seconds=10).run(burst=True)  # x; y and after-x not due
    q.clear(db)
    assert flows.status(db, w).counts["queued"] == 2
    assert flows.cancel(db, w) is True
    status = flows.status(db, w)
    assert status.state == "cancelled" and status.counts["queued"] == 0
    assert {n.name: n.state for n in status.nodes} == {
        "x": "succeeded", "y": "cancelled", "after-x": "cancelled"}


@pytest.mark.parametrize("sweep", ["claim", "requeue_dead", "purge_dead"])
def test_a_node_dead_where_its_store_is_unknown_is_not_buried_there(
        db: Any, fdb_subspace: Any, clock: TestClock, sweep: str) -> None:
    """A node whose lease ran out on its last delivery, met by a transaction of a
    structure object made without the store (another process: the CLI, a sweeper),
    is not buried there (its workflow's step would be lost): the call raises, writing
    nothing; the structure made with the store buries it, and the workflow fails."""
    q: Queue[Any] = Queue(fdb_subspace["q"], max_deliveries=1, clock=clock)
    bare: Queue[Any] = Queue(fdb_subspace["q"], max_deliveries=1, clock=clock)
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.new()
    a = flow.add(q, "a", name="a")
    flow.add(q, "after", deps=[a], name="after", delay=3600)
    w = flows.create(db, flow)
    lease = q.claim(db, 10)
    assert lease is not None and lease.id == a.id
    clock.advance(11)  # its lease ran out: a dead letter once a transaction meets it
    calls = {"claim": (Queue.claim, 10), "requeue_dead": (Queue.requeue_dead,),
             "purge_dead": (Queue.purge_dead,)}
    call, *args = calls[sweep]
    with pytest.raises(UnknownWorkflowStoreError, match="did not make with the structure"):
        call(bare, db, *args)
    assert flows.status(db, w).state == "running"
    assert [letter.id for letter in q.dead(db)] == [a.id]  # not moved: still dying
    call(q, db, *args)
    status = flows.status(db, w)
    assert status.state == "failed"
    assert {n.name: n.state for n in status.nodes} == {"a": "failed", "after": "cancelled"}


@pytest.mark.parametrize("how", ["remove", "remove_many", "cancel"])
def test_a_node_removed_where_its_store_is_unknown_is_refused(db: Any, fdb_subspace: Any,
                                                              how: str) -> None:
    """A waiting node's job removed or cancelled through a structure object made
    without its store raises, writing nothing (its step would be lost); through the
    one made with it, it ends ``cancelled``."""
    q: Queue[Any] = Queue(fdb_subspace["q"], history=3600)  # a cancel finds it by its record
    bare: Queue[Any] = Queue(fdb_subspace["q"], history=3600)
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    x, w = chain(db, flows, q)

    def take_out(structure: Any) -> Any:
        if how == "cancel":
            return structure.cancel(db, x.id)
        return remove_one("queue", how, db, structure, x)

    with pytest.raises(UnknownWorkflowStoreError):
        take_out(bare)
    assert [row.id for row in q.delayed(db)] == [x.id]  # still there
    assert take_out(q) in ("x", "cancelled")
    failed_by_x(db, flows, w)
