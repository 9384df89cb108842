"""Workflows against a real server: a node whose lease runs out on its last delivery
(``max_deliveries``, its worker gone) still advances its workflow, in whichever
transaction buries it (docs/workflows.md, "Failures")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from typing import Any, Callable

import pytest

from fdbrecipes import FairQueue, Queue, Worker
from fdbrecipes.errors import WorkflowFailedError
from fdbrecipes.workflow import Workflows
from tests.helpers import TestClock, eventually
from tests.integration.test_workflows import Runs

pytestmark = pytest.mark.integration

EXPIRED = "LeaseExpired: the lease ended before the job was settled"


def drain(db: Any, structure: Any, handler: Any) -> None:
    Worker(db, structure, handler, lease_seconds=10).run(burst=True)


def expire(db: Any, structure: Any, clock: TestClock, node_id: bytes) -> None:
    """Claim the job ``node_id`` (the next one) and let its lease run out, as when its
    worker is SIGKILLed: no ack, no release."""
    lease = structure.claim(db, 10)
    assert lease is not None and lease.id == node_id
    clock.advance(11)


#: What meets the expired lease and buries it: a claim, or a dead-letter sweep.
def by_claim(db: Any, structure: Any) -> None:
    assert structure.claim(db, 10) is None


def by_requeue(db: Any, structure: Any) -> None:
    assert structure.requeue_dead(db) == 1  # buried (its step run), then requeued


def by_purge(db: Any, structure: Any) -> None:
    assert structure.purge_dead(db) == 1


@pytest.mark.parametrize("bury", [by_claim, by_requeue, by_purge])
def test_an_expired_last_delivery_fails_its_workflow(db: Any, fdb_subspace: Any,
                                                     clock: TestClock,
                                                     bury: Callable[..., None]) -> None:
    """Under "fail": the transaction that buries the node fails the workflow, its
    waiting sibling is removed (cancelled), its dependent never runs."""
    q = Queue(fdb_subspace["q"], max_deliveries=1, history=3600, clock=clock)
    other = Queue(fdb_subspace["other"], history=3600)
    flows = Workflows(fdb_subspace["flows"], structures=[q, other])
    flow = flows.new()
    a = flow.add(q, "a", name="a")
    flow.add(other, "sibling", name="sibling")
    flow.add(other, "after", deps=[a], name="after")
    w = flows.create(db, flow)
    expire(db, q, clock, a.id)
    bury(db, q)
    status = flows.status(db, w)
    assert status.state == "failed"
    states = {n.name: n.state for n in status.nodes}
    assert states == {"a": "failed", "sibling": "cancelled", "after": "cancelled"}
    assert other.claim(db, 10) is None  # the sibling was removed
    with pytest.raises(WorkflowFailedError, match="node 0 failed"):
        flows.result(db, w, timeout=5)
    if bury is by_requeue:  # it runs again: its ack changes nothing for the others
        runs = Runs(flows, db)
        drain(db, q, runs)
        assert runs.count == Counter({"a": 1})
        assert {n.name: n.state for n in flows.status(db, w).nodes} == \
            {"a": "succeeded", "sibling": "cancelled", "after": "cancelled"}


@pytest.mark.parametrize("kind", ["queue", "sharded-queue", "fair-queue"])
def test_an_expired_last_delivery_frees_continue_and_ignore(db: Any, fdb_subspace: Any,
                                                            clock: TestClock,
                                                            kind: str) -> None:
    """Under "continue" and "ignore": the dependents run, once each, the first seeing
    the failure (the lease's expiry) in its inputs."""
    where: Any = {}
    if kind == "fair-queue":
        source: Any = FairQueue(fdb_subspace["q"], max_deliveries=1, clock=clock)
        where = {"group": "g"}
    else:
        source = Queue(fdb_subspace["q"], max_deliveries=1, clock=clock,
                       shards=2 if kind == "sharded-queue" else 1)
    other = Queue(fdb_subspace["other"])
    flows = Workflows(fdb_subspace["flows"], structures=[source, other])
    flow = flows.new()
    a = flow.add(source, "a", name="a", **where)
    flow.add(other, "continuing", deps=[(a, "continue")], name="continuing")
    flow.add(other, "ignoring", deps=[(a, "ignore")], name="ignoring")
    flow.add(other, "on failure", deps=[a], on_failure="continue", when="failure",
             name="on failure")
    flow.add(other, "on success", deps=[a], on_failure="continue", when="success",
             name="on success")
    w = flows.create(db, flow)
    expire(db, source, clock, a.id)
    assert source.claim(db, 10) is None  # meets the expired lease: buries it
    runs = Runs(flows, db)
    drain(db, other, runs)
    assert runs.count == Counter({"continuing": 1, "ignoring": 1, "on failure": 1})
    seen = runs.inputs["continuing"]["a"]
    assert seen.state == "failed" and seen.error.startswith(EXPIRED)
    assert runs.inputs["ignoring"] == {}
    assert flows.result(db, w, timeout=5) == {
        "continuing": "did continuing", "ignoring": "did ignoring",
        "on failure": "did on failure", "on success": None}
    status = flows.status(db, w)
    assert status.state == "completed"
    assert {n.name: n.state for n in status.nodes}["on success"] == "skipped"


def test_an_expander_whose_lease_expires_still_pushes_its_nodes(db: Any, fdb_subspace: Any,
                                                                clock: TestClock) -> None:
    """More first nodes than one transaction pushes into a FairQueue (50: a round
    trip each) go through expanders (jobs whose ack pushes a chunk of nodes): one
    buried on its last delivery pushes its chunk all the same, and every node runs
    once."""
    q = FairQueue(fdb_subspace["q"], max_deliveries=1, clock=clock)
    flows = Workflows(fdb_subspace["flows"], structures=[q])
    flow = flows.new()
    flow.add_many(q, range(60), group="g")
    w = flows.create(db, flow)
    leases = q.claim_many(db, 10, 10)
    assert len(leases) == 2  # the expanders of 50 and 10 nodes
    clock.advance(11)
    assert q.claim(db, 10) is None  # meets both: buries them, pushes their nodes
    runs = Runs(flows, db)
    drain(db, q, runs)
    assert runs.count == Counter(range(60))
    assert flows.status(db, w).state == "succeeded"


WORKER = textwrap.dedent(
    """
    import sys, threading
    import fdb
    fdb.api_version(int(sys.argv[3]))
    from fdbrecipes import Queue, Worker
    from fdbrecipes.workflow import Workflows

    db = fdb.open(sys.argv[1])
    space = fdb.Subspace(rawPrefix=bytes.fromhex(sys.argv[2]))
    q = Queue(space["q"], max_deliveries=1)
    other = Queue(space["other"])
    Workflows(space["flows"], structures=[q, other])

    def handler(job):
        print("started", flush=True)
        threading.Event().wait(60)  # until the test kills the process

    Worker(db, q, handler, lease_seconds=1).run()
    """
)


def test_a_node_whose_worker_is_sigkilled_on_its_last_delivery(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    """The end to end case: the node's worker process is SIGKILLed while it runs the
    node's only delivery; once its lease has run out, the next claim buries it and
    frees its dependents, each run once."""
    import fdb

    q = Queue(fdb_subspace["q"], max_deliveries=1)
    other = Queue(fdb_subspace["other"])
    flows = Workflows(fdb_subspace["flows"], structures=[q, other])
    flow = flows.new()
    a = flow.add(q, "a", name="a")
    flow.add(other, "continuing", deps=[(a, "continue")], name="continuing")
    w = flows.create(db, flow)
    child = subprocess.Popen([sys.executable, "-c", WORKER, fdb_cluster_file,
                              fdb_subspace.key().hex(), str(fdb.get_api_version())],
                             stdout=subprocess.PIPE, text=True)
    deadline = threading.Timer(60, child.kill)  # a worker that never starts fails
    deadline.start()
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "started", "the worker did not start"
    finally:
        deadline.cancel()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    eventually(lambda: q.claim(db, 10) is None and  # the claim that meets it buries it
               {n.name: n.state for n in flows.status(db, w).nodes}["a"] == "failed",
               30, "the killed node's lease ran out and a claim buried it")
    runs = Runs(flows, db)
    drain(db, other, runs)
    assert runs.count == Counter({"continuing": 1})
    assert runs.inputs["continuing"]["a"].error.startswith(EXPIRED)
    assert flows.status(db, w).state == "completed"
