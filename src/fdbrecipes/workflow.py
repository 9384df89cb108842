"""Workflows: graphs of jobs that advance in their nodes' acks, exactly once.

A :class:`Workflows` store knows the structures its nodes go to (Queue,
PriorityQueue, FairQueue, sync or async).  :meth:`Workflows.new` starts a
:class:`Workflow`, built in memory: each node an ordinary job (``add``, ``add_many``:
its value, priority or group, delay, time limit), its dependencies ``deps=[...]``
(fan-out, fan-in, shared dependencies). :meth:`Workflows.create` checks it whole and
writes it in the caller's transaction (``tr`` first), pushing the nodes without
dependencies: the workflow commits with the application's writes, or not at all.

Workers serving those structures (any :class:`fdbrecipes.Worker`, in a process that
made the store with them) run the nodes as any job.  The transaction that acks a
node also decrements its dependents' counters and pushes those it frees (the one
that brings a counter to 0 reads it with a conflict, so exactly one does); the one
that makes a node a dead letter applies its dependents' failure policy: ``fail``
(the workflow fails: what has not started is cancelled, what runs sees
``job.cancelled``), ``ignore`` or ``continue`` (the dependent runs, seeing the
failure in :meth:`Workflows.inputs`).  A node reads its dependencies' results with
:meth:`Workflows.inputs` (the store keeps every node's result itself).
:func:`batch` builds a batch of jobs with ``on_success``, ``on_complete`` and
``on_failure`` callbacks on the same mechanism.  docs/workflows.md tells the keys,
the conflicts and the limits.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence

from ._drivers.blocking import drive
from ._face import Face
from ._fdb import Transactor
from ._values import materialize
from ._workflow.graph import (
    ALWAYS,
    CONTINUE,
    FAIL,
    FAILURE,
    IGNORE,
    SUCCESS,
    Graph,
    Node,
)
from ._workflow.ops import DEFAULT_RETENTION, LIST_LIMIT, WorkflowOps
from ._workflow.reading import GraphNode, Input, NodeStatus, WorkflowStatus

__all__ = ["ALWAYS", "CONTINUE", "FAIL", "FAILURE", "IGNORE", "LIST_LIMIT", "SUCCESS",
           "GraphNode", "Input", "Node", "NodeStatus", "Workflow", "WorkflowStatus",
           "Workflows", "WorkflowsBase"]


class Workflow:
    """A workflow being built (see :meth:`Workflows.new`): nodes and their
    dependencies, checked as they are added; nothing is written until
    :meth:`Workflows.create`.

    Attributes:
        id: its id (bytes), made now: what ``create`` returns and ``status``,
            ``result`` and ``cancel`` take.
    """

    def __init__(self, graph: Graph) -> None:
        self._graph = graph
        self.id: bytes = graph.id

    def __repr__(self) -> str:
        return f"Workflow({self.id!r}, {len(self._graph.specs)} nodes)"

    @property
    def graph(self) -> Graph:
        """The checked graph (what ``create`` writes)."""
        return self._graph

    @property
    def nodes(self) -> List[Node]:
        """Its nodes, in the order they were added."""
        return list(self._graph.nodes)

    def add(self, structure: Any, value: Any, *, deps: Sequence[Any] = (),
            on_failure: str = FAIL, name: Optional[str] = None, when: str = ALWAYS,
            delay: Optional[float] = None, time_limit: Optional[float] = None,
            **where: Any) -> Node:
        """Add a node: a job of ``value`` pushed into ``structure`` once every one of
        ``deps`` ended (at once if none).

        Args:
            structure: a Queue, PriorityQueue or FairQueue the store was made with.
            value: the job's value (as the structure's ``push`` takes it).
            deps: nodes of this workflow, or ``(node, policy)`` pairs.
            on_failure: the policy of the dependencies given without one: ``"fail"``
                (a dependency that fails fails the workflow), ``"ignore"`` (the node
                runs; its inputs leave the failure out) or ``"continue"`` (the node
                runs and sees the failure in its inputs).
            name: its name in results and inputs (unique; default its number).
            when: ``"always"``, ``"success"`` (only if no ``continue`` dependency
                failed) or ``"failure"`` (only if one did); else it is skipped.
            delay, time_limit, where: the push's (a PriorityQueue's ``priority=``, a
                FairQueue's ``group=``).

        Reads and writes nothing.  Cost: none (checks only).

        Raises:
            TypeError or ValueError: a structure the store does not know, a node of
                another workflow, a bad value, policy, name or push argument.
        """
        return self._graph.add(structure, value, deps, on_failure, name, when, delay,
                               time_limit, where)

    def add_many(self, structure: Any, values: Iterable[Any], *, deps: Sequence[Any] = (),
                 on_failure: str = FAIL, delay: Optional[float] = None,
                 time_limit: Optional[float] = None, **where: Any) -> List[Node]:
        """Add a node for each of ``values`` (fan-out), each with the same ``deps``
        and options (see :meth:`add`); their nodes, named by their numbers.

        Reads and writes nothing.  Cost: none (checks only).

        Raises:
            TypeError or ValueError: as :meth:`add` (nothing is added then).
        """
        added = []
        graph = self._graph
        before = (len(graph.specs), graph.size)
        try:
            for value in materialize(values, "values"):
                added.append(graph.add(structure, value, deps, on_failure, None, ALWAYS,
                                       delay, time_limit, where))
        except (TypeError, ValueError):
            for node in added:
                del graph.names[node.name]
            del graph.specs[before[0]:]
            del graph.nodes[before[0]:]
            graph.size = before[1]
            raise
        return added

    def after(self, node: Node, deps: Sequence[Any], *, on_failure: str = FAIL) -> None:
        """Make ``node`` depend on ``deps`` as well (a cycle is refused by ``create``).

        Reads and writes nothing.  Cost: none.

        Raises:
            TypeError or ValueError: a node of another workflow, a dependency given
                twice, a bad policy.
        """
        self._graph.after(node, deps, on_failure)


class WorkflowsBase(Face[WorkflowOps]):
    """The constructor of Workflows and its async twin (see :class:`Workflows`)."""

    def __init__(self, subspace: Any, *, structures: Iterable[Any],
                 retention: float = DEFAULT_RETENTION) -> None:
        super().__init__(WorkflowOps(subspace, structures, retention))

    def new(self) -> Workflow:
        """A new workflow to build (nothing is written until :meth:`create`)."""
        return Workflow(self._ops.graph())

    def batch(self, structure: Any, values: Iterable[Any], *,
              on_success: Optional[Any] = None, on_complete: Optional[Any] = None,
              on_failure: Optional[Any] = None, **where: Any) -> Workflow:
        """A batch: a job for each of ``values`` in ``structure``, and callbacks, each a
        ``(structure, value)`` pair (or ``(structure, value, options)``, options
        as :meth:`Workflow.add` takes them: ``{"group": ...}``) pushed once the last
        member ended, in that
        member's ack: ``on_complete`` always, ``on_success`` if every member
        succeeded, ``on_failure`` if one did not (its inputs say which).  A workflow
        to :meth:`create` (more nodes may be added to it first).

        Reads and writes nothing.

        Raises:
            TypeError or ValueError: as :meth:`Workflow.add`.
        """
        flow = self.new()
        members = flow.add_many(structure, values, on_failure=CONTINUE, **where)
        for name, callback, when in (("on_success", on_success, SUCCESS),
                                     ("on_complete", on_complete, ALWAYS),
                                     ("on_failure", on_failure, FAILURE)):
            if callback is None:
                continue
            if not (isinstance(callback, tuple) and len(callback) in (2, 3)
                    and (len(callback) == 2 or isinstance(callback[2], dict))):
                raise TypeError(f"{name} must be a (structure, value) pair, or a "
                                "(structure, value, options) triple")
            options = callback[2] if len(callback) == 3 else {}
            flow.add(callback[0], callback[1], deps=members, on_failure=CONTINUE,
                     name=name, when=when, **options)
        return flow


class Workflows(WorkflowsBase):
    """A store of workflows in one subspace.

    Every method takes ``tr`` first: an ``fdb.Transaction`` (the call becomes part of
    the caller's transaction) or an ``fdb.Database``/``fdb.Tenant`` (it runs in its
    own retry loop, with a commit receipt: see :class:`fdbrecipes.Queue`).

    Args:
        subspace: where the store keeps its keys (it writes nowhere else, but for its
            nodes' pushes and cancels in their structures).
        structures: the structures its nodes may go to.  Each learns of the store:
            a worker serving one of them, in this process, advances the workflows of
            the jobs it acks (a node acked where no store was made with its
            structure is not acked: its lease runs out and it runs again).
        retention: seconds a workflow is kept after its creation, and as long as it
            runs (default 7 days); :meth:`prune` forgets it then.

    Raises:
        TypeError or ValueError: a bad argument.
    """

    def create(self, tr: Transactor, workflow: Workflow) -> bytes:
        """Write ``workflow`` and push its nodes without dependencies; its id.  If a
        workflow of its id exists already (a retried transaction that committed),
        nothing is written.

        Reads the workflow's header (a conflict with a create of the same id);
        writes each node's definition, edges and counters, and the pushes of the
        first nodes (see ``push``).  Cost: 1 round trip, then one for each structure
        pushed into (a FairQueue: one per node), and the commit.

        Raises:
            TypeError: ``workflow`` is not one this store made.
            ValueError: it is empty or has a cycle: refused before anything is
                written.
        """
        return drive(self._ops.create(tr, workflow))

    def cancel(self, tr: Transactor, workflow: bytes) -> bool:
        """Cancel a workflow: every node not started ends ``cancelled`` (those waiting
        in their structures are removed), every running node's worker is told
        (``job.cancelled``, with job records), and no node is pushed after.  False if
        it was over already.

        Reads the header and every node's state with conflicts (it conflicts with any
        step of the workflow in flight), then the definitions of the queued nodes.
        Cost: 3 round trips, one more per queued node (its structure's ``cancel``),
        and the commit.

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        return drive(self._ops.cancel(tr, workflow))

    def status(self, tr: Transactor, workflow: bytes, limit: int = 100) -> WorkflowStatus:
        """What became of a workflow: its state, its nodes by state, and its first
        ``limit`` nodes, with what those waiting wait on.

        Reads (no writes) its header, tallies, and first nodes' definitions and
        states, side by side; then the waiting ones' dependencies.  Cost: 2 round
        trips (3 given a Database).

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        return drive(self._ops.status(tr, workflow, limit))

    def list(self, tr: Transactor, limit: int = 100,
             after: Optional[bytes] = None) -> List[WorkflowStatus]:
        """The workflows of the store, in the order of their ids (random: ids are
        UUIDs), each with its state and counts but without its nodes
        (``nodes`` is empty): the first ``limit`` (1 to :data:`LIST_LIMIT`) after
        the id ``after`` (None: from the first).  Page through them by giving the
        last id of a page as ``after``.

        Reads (no writes) a range of ``limit`` headers, then each one's tallies,
        side by side.  Cost: 2 round trips (3 given a Database), whatever the number
        of workflows.

        Raises:
            TypeError or ValueError: a bad ``limit`` or ``after``.
        """
        return drive(self._ops.list(tr, limit, after))

    def graph(self, tr: Transactor, workflow: bytes, limit: int = 1_000) -> List[GraphNode]:
        """A workflow's graph: its first ``limit`` nodes (0 to 50,000, in the order
        they were added), each with its state, the names of its dependencies (its
        edges) and what it failed with, to draw it or walk it.

        Reads (no writes) the header and range reads of those nodes' definitions
        (their values too: at most the workflow's size), states and dependencies,
        side by side.  Cost: 1 round trip (2 given a Database).

        Raises:
            UnknownWorkflowError: no such workflow.
            TypeError or ValueError: a bad ``workflow`` or ``limit``.
        """
        return drive(self._ops.read_graph(tr, workflow, limit))

    def result(self, db: Any, workflow: bytes, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Wait until a workflow is over; the results of its last nodes (those
        nothing depends on), by name.

        Waits on a watch of its count of ended nodes (no polling), then reads its
        status and results.  Cost: a round trip per wake, then 3.

        Raises:
            UnknownWorkflowError: no such workflow.
            WorkflowFailedError: it failed or was cancelled (``error.status``).
            TimeoutError: it was not over within ``timeout`` seconds.
        """
        return drive(self._ops.result(db, workflow, timeout))

    def inputs(self, tr: Transactor, job: Any) -> Dict[str, Input]:
        """The dependencies of the node a handler runs (``job``: its Job, or job
        id), by name: how each ended, its result, what it failed with.  Those that
        failed under ``ignore`` are left out.

        Reads (no writes) the node's dependencies, then their states and results
        side by side.  Cost: 2 round trips (3 when a dependency's structure has a
        codec).

        Raises:
            ValueError: ``job`` is not a node of this store's workflows.
        """
        return drive(self._ops.inputs(tr, job))

    def prune(self, tr: Transactor, limit: Optional[int] = None) -> int:
        """Forget up to ``limit`` (all when None) workflows whose retention passed
        and which are over (one still running is looked at a retention later), in
        transactions of 100 given a Database; how many were looked at.

        Reads the pruning index by snapshot and each workflow's header and count of
        ended nodes (conflicts); clears every key of those forgotten.  Cost: 2 round
        trips per workflow, in each transaction.
        """
        return drive(self._ops.prune(tr, limit))
