"""The benchmark's ``workflow`` rows do what their names say, on a real server: the
fan-in's workers run its children and then its callback (pushed by the last child's
ack), each once, and the workflow succeeds; a create row writes a workflow of as
many nodes as it counts, pushing all but the one that waits for them."""

from __future__ import annotations

from typing import Any

import pytest
from fdb.subspace_impl import Subspace

from fdbrecipes import Queue
from fdbrecipes.bench.operations import WorkerDrain
from fdbrecipes.bench.settings import WORKER_CONCURRENCY
from fdbrecipes.bench.workflows import CALLBACK, creates, fan_in, fan_in_workers, fill_fan_in
from fdbrecipes.workflow import Workflows

pytestmark = pytest.mark.integration


def test_the_fan_in_drain_runs_the_children_then_the_callback(
        db: Any, fdb_subspace: Subspace) -> None:
    queue: Queue[Any] = Queue(fdb_subspace["queue"])
    flows = Workflows(fdb_subspace["flows"], structures=[queue])
    workflow = flows.create(db, fan_in(flows, queue, 20))
    assert queue.size(db) == 20  # the children: the callback waits for them
    client = fan_in_workers(db, fdb_subspace, 0, WORKER_CONCURRENCY)
    assert isinstance(client, WorkerDrain)
    assert client.loop(None) == 21  # every child, then the callback, each acked once
    assert queue.size(db) == 0
    status = flows.status(db, workflow)
    assert status.state == "succeeded" and status.counts["succeeded"] == 21
    assert flows.result(db, workflow, timeout=10) == {CALLBACK: None}


def test_the_fan_in_fill_creates_a_fan_in_of_its_items(db: Any, fdb_subspace: Subspace) -> None:
    fill_fan_in(db, fdb_subspace, 21, 0)
    queue: Queue[Any] = Queue(fdb_subspace["queue"])
    leases = queue.claim_many(db, 25, 30)
    assert sorted(lease.value for lease in leases) == list(range(20))


def test_a_create_writes_a_workflow_of_its_nodes(db: Any, fdb_subspace: Subspace) -> None:
    client = creates(db, fdb_subspace, 0, 50)
    assert client.step() == 50
    queue: Queue[Any] = Queue(fdb_subspace["queue"])
    assert queue.size(db) == 49  # all but the callback, which waits for them
    assert CALLBACK not in [lease.value for lease in queue.claim_many(db, 49, 30)]
