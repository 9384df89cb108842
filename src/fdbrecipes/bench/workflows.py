"""The ``workflow`` group: workflows (issue 41, docs/workflows.md) beside the same work
without them, in the same run.

* a fan-in: :data:`.settings.FANIN_CHILDREN` no-op children and one callback that
  depends on them all, drained by :data:`.settings.WORKFLOW_PROCESSES` worker
  processes (``Worker(concurrency=8)``, each process making the store with the queue,
  so that its acks advance the workflow), beside as many independent no-op jobs on
  the same workers (:data:`.settings.WORKFLOW_FANIN`, :data:`.settings.WORKFLOW_JOBS`);
* ``Workflows.create`` of a workflow of :data:`.settings.CREATE_NODES` nodes (the
  fan-in's shape: all but one pushed by the create's own transaction, as many as fit
  in it, the last one waiting for them),
  built and created in one process, beside ``Queue.push_many`` of as many items
  (:data:`.settings.WORKFLOW_CREATE`, :data:`.settings.WORKFLOW_PUSH_MANY`).

Clients (:data:`WORKFLOW_FACTORIES`) and fills (:data:`WORKFLOW_FILLS`) join the
suite's own (:mod:`.clients`, :mod:`.suite`).
"""

from __future__ import annotations

from typing import Any, Dict

from .. import Queue
from ..workflow import Workflow, Workflows
from .fill import Filler
from .operations import Client, Factory, WorkerDrain

__all__ = ["WORKFLOW_FACTORIES", "WORKFLOW_FILLS", "fan_in", "fill_fan_in"]

#: The callback's value (the children's are the ints 0 .. n - 1).
CALLBACK = "callback"


def queue_of(subspace: Any) -> Queue[Any]:
    """The queue every node goes to."""
    return Queue(subspace["queue"])


def store_of(subspace: Any, queue: Queue[Any]) -> Workflows:
    """The measurement's workflow store, made with ``queue``: a worker of ``queue`` in
    this process advances its workflows."""
    return Workflows(subspace["flows"], structures=[queue])


def fan_in(flows: Workflows, queue: Queue[Any], children: int) -> Workflow:
    """A workflow of ``children`` nodes in ``queue`` (the ints 0 .. children - 1) and
    one more, the callback, depending on them all."""
    flow = flows.new()
    kids = flow.add_many(queue, range(children))
    flow.add(queue, CALLBACK, deps=kids, name=CALLBACK)
    return flow


def fill_fan_in(db: Any, subspace: Any, items: int, _seed: int) -> None:
    """A fan-in of ``items`` jobs created: ``items - 1`` children, pushed by the
    create's transaction (before the clock, as the independent jobs it is compared
    with), and the callback, pushed by the ack of the last of them."""
    queue = queue_of(subspace)
    flows = store_of(subspace, queue)
    flows.create(db, fan_in(flows, queue, items - 1))


class Creator(Client):
    """``Workflows.create(db, workflow)`` of a fan-in of ``nodes`` nodes, the workflow
    built in memory first (what an application does each time)."""

    def __init__(self, db: Any, subspace: Any, nodes: int) -> None:
        self.queue = queue_of(subspace)
        self.flows = store_of(subspace, self.queue)
        super().__init__(self.flows.retry_stats)
        self.db, self.nodes = db, nodes

    def step(self) -> int:
        """One workflow built and created; its nodes."""
        self.flows.create(self.db, fan_in(self.flows, self.queue, self.nodes - 1))
        return self.nodes


class NodeDrain(WorkerDrain):
    """:class:`.operations.WorkerDrain` of a workflow's queue, in a process that made
    the store with it, counting the nodes its handler ran: not the expanders (jobs
    a worker acks without calling the handler, whose acks push the nodes when more
    are freed at once than one transaction pushes)."""

    def __init__(self, db: Any, queue: Queue[Any], concurrency: int) -> None:
        super().__init__(db, queue, concurrency, handler=self.ran)

    def ran(self, _job: Any) -> None:
        """The handler: a node ran (it returns at once)."""
        with self.lock:
            self.done += 1

    def finished(self, event: Any) -> None:
        """Nothing: :meth:`ran` counts."""


def fan_in_workers(db: Any, subspace: Any, _index: int, concurrency: int) -> Client:
    """A Worker draining the fan-in's queue, in a process that made the store with
    it (counting the nodes run: :class:`NodeDrain`)."""
    queue = queue_of(subspace)
    store_of(subspace, queue)
    return NodeDrain(db, queue, concurrency)


def creates(db: Any, subspace: Any, _index: int, nodes: int) -> Client:
    """``Workflows.create`` of a workflow of ``nodes`` nodes."""
    return Creator(db, subspace, nodes)


#: The clients of the workflow group, by op.
WORKFLOW_FACTORIES: Dict[str, Factory] = {
    "workflow-fan-in": fan_in_workers,
    "workflow-create": creates,
}
#: The fills of its draining rows.
WORKFLOW_FILLS: Dict[str, Filler] = {"workflow-fan-in": fill_fan_in}
