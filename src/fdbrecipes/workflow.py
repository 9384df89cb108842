"""Workflows: graphs of jobs that advance in their nodes' acks, exactly once.

A :class:`Workflows` store knows the structures its nodes go to (Queue,
PriorityQueue, FairQueue, sync or async).  :meth:`Workflows.new` starts a
:class:`Workflow`, built in memory: each node an ordinary job (``add``, ``add_many``:
its value, priority or group, delay, time limit), its dependencies ``deps=[...]``
(fan-out, fan-in, shared dependencies); or a workflow of its own
(:meth:`Workflow.add_workflow`: a sub-workflow, whose end is the node's).
:meth:`Workflows.create` checks it whole and
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
:meth:`Workflows.batch` builds a batch of jobs with ``on_success``, ``on_complete``
and ``on_failure`` callbacks on the same mechanism; :meth:`Workflows.open_batch` one
whose members are added over time (:meth:`Workflows.add_to_batch`) until it is closed
(:meth:`Workflows.close_batch`).  docs/workflows.md tells the keys,
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
    NO_VALUE,
    SUCCESS,
    Graph,
    Node,
    NodeJob,
    NodeSource,
    job_of,
    keyed_where,
)
from ._workflow.ops import DEFAULT_RETENTION, LIST_LIMIT, WorkflowOps
from ._workflow.reading import GraphNode, Input, NodeStatus, WorkflowStatus

__all__ = ["ALWAYS", "CONTINUE", "FAIL", "FAILURE", "IGNORE", "LIST_LIMIT", "SUCCESS",
           "GraphNode", "Input", "Node", "NodeJob", "NodeSource", "NodeStatus", "Workflow",
           "WorkflowStatus", "Workflows", "WorkflowsBase"]


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

    def add(self, structure: Any, value: Any = NO_VALUE, *, deps: Sequence[Any] = (),
            on_failure: str = FAIL, name: Optional[str] = None, when: str = ALWAYS,
            delay: Optional[float] = None, time_limit: Optional[float] = None,
            limit_keys: Optional[Dict[str, Any]] = None, **where: Any) -> Node:
        """Add a node: a job of ``value`` pushed into ``structure`` once every one of
        ``deps`` ended (at once if none).

        Args:
            structure: a Queue, PriorityQueue or FairQueue the store was made with;
                or a call of a task (``my_task.s(*args)``: its job on the task's
                queue, which the store must be made with), then without ``value``.
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
            limit_keys: the job's keys under ``structure``'s limits, a dict from limit
                names to keys, as its ``push`` takes them (docs/flow-control.md, "Keys
                given at push"): kept with the node's definition, and its job pushed
                with them.

        Reads and writes nothing.  Cost: none (checks only).

        Raises:
            TypeError or ValueError: a structure the store does not know, a node of
                another workflow, a bad value, policy, name or push argument (bad
                ``limit_keys`` as ``push`` refuses them); a task's call with a value.
        """
        job = job_of(structure, value, delay, time_limit, keyed_where(where, limit_keys))
        return self._graph.add(job.structure, job.value, deps, on_failure, name, when,
                               job.delay, job.time_limit, job.where)

    def add_many(self, structure: Any, values: Iterable[Any], *, deps: Sequence[Any] = (),
                 on_failure: str = FAIL, delay: Optional[float] = None,
                 time_limit: Optional[float] = None,
                 limit_keys: Optional[Dict[str, Any]] = None, **where: Any) -> List[Node]:
        """Add a node for each of ``values`` (fan-out), each with the same ``deps``
        and options (see :meth:`add`); their nodes, named by their numbers.

        Reads and writes nothing.  Cost: none (checks only).

        Raises:
            TypeError or ValueError: as :meth:`add` (nothing is added then).
        """
        added = []
        graph = self._graph
        before = (len(graph.specs), graph.size)
        where = keyed_where(where, limit_keys)
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

    def add_workflow(self, workflow: Workflow, *, deps: Sequence[Any] = (),
                     on_failure: str = FAIL, name: Optional[str] = None,
                     when: str = ALWAYS) -> Node:
        """Add a node that is a workflow of its own (a sub-workflow): ``workflow``, made
        by the same store's :meth:`Workflows.new` and in no other workflow, starts once
        every one of ``deps`` ended (its first nodes pushed in that transaction), and
        its end is the node's, in the transaction that ends it: ``succeeded`` once
        every node of it ended (the ``continue`` and ``ignore`` failures in it
        included), ``failed`` or ``cancelled`` when it stopped (a ``fail`` in it, or a
        cancel); the node's dependents then follow their policies.  Its result, which
        its dependents read with :meth:`Workflows.inputs`, is the results of its last
        nodes, by name, as :meth:`Workflows.result` gives them.  It is written with
        this workflow by :meth:`Workflows.create` (more nodes may be added to it until
        then), under its own id: :meth:`Workflows.status` and ``cancel`` take it once
        it started; it is kept, and pruned, with this workflow.  Arguments as
        :meth:`add` takes them.

        Reads and writes nothing.  Cost: none (checks only).

        Raises:
            TypeError or ValueError: a workflow of another store, this one, one in a
                workflow already, an open batch, an empty one, or a bad argument.
        """
        return self._graph.add_workflow(workflow.graph if isinstance(workflow, Workflow)
                                        else workflow, deps, on_failure, name, when)

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
        as :meth:`Workflow.add` takes them: ``{"group": ...}``), or a task's call
        (``notify.s(...)``), pushed once the last
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
        add_callbacks(flow, members, on_success, on_complete, on_failure)
        return flow

    def open_batch(self, *, on_success: Optional[Any] = None,
                   on_complete: Optional[Any] = None,
                   on_failure: Optional[Any] = None) -> Workflow:
        """An open batch: its callbacks (as :meth:`batch` takes them; one at least),
        and members added over time, once it is created (:meth:`Workflows.add_to_batch`),
        until it is closed (:meth:`Workflows.close_batch`).  Each callback is pushed
        (or skipped) exactly once, after the close, in the transaction of the member
        whose end brings the batch's count to zero, or in the close if every member
        ended already.  A workflow to :meth:`create` (more nodes may be added to it
        first: nodes that depend on the callbacks).

        Reads and writes nothing.

        Raises:
            TypeError or ValueError: a bad callback, or none.
        """
        flow = self.new()
        joins = add_callbacks(flow, [], on_success, on_complete, on_failure)
        if not joins:
            raise ValueError("open_batch: give on_success, on_complete or on_failure")
        flow.graph.joins.extend(node.index for node in joins)
        return flow


def add_callbacks(flow: Workflow, members: List[Node], on_success: Optional[Any],
                  on_complete: Optional[Any], on_failure: Optional[Any]) -> List[Node]:
    """Add a batch's callbacks to ``flow``, each depending on ``members`` (see
    :meth:`WorkflowsBase.batch`); their nodes.

    Raises:
        TypeError or ValueError: a bad callback.
    """
    added = []
    for name, callback, when in (("on_success", on_success, SUCCESS),
                                 ("on_complete", on_complete, ALWAYS),
                                 ("on_failure", on_failure, FAILURE)):
        if callback is None:
            continue
        if isinstance(callback, NodeSource):  # a task's call
            added.append(flow.add(callback, deps=members, on_failure=CONTINUE, name=name,
                                  when=when))
            continue
        if not (isinstance(callback, tuple) and len(callback) in (2, 3)
                and (len(callback) == 2 or isinstance(callback[2], dict))):
            raise TypeError(f"{name} must be a (structure, value) pair, or a "
                            "(structure, value, options) triple")
        options = callback[2] if len(callback) == 3 else {}
        added.append(flow.add(callback[0], callback[1], deps=members, on_failure=CONTINUE,
                              name=name, when=when, **options))
    return added


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
            structure is not acked: its lease runs out and it runs again).  None
            given (``[]``) makes a store that looks only (``list``, ``status``,
            ``result``: results as stored, no codec applied); its ``cancel`` cannot
            take queued nodes out of the structures it does not know (``fdbrecipes
            workflow cancel`` gives it those :meth:`targets` names).
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
        writes the nodes' definitions and out-edges, 16 nodes a key (a node's value
        over 1,000 bytes, or its dependents past 8, in keys of their own), the
        dependencies and counters of the nodes that have dependencies, and the
        pushes of the first nodes: into a Queue or PriorityQueue all of them in one
        push, as ``push_many``, as long as the transaction stays within 9 MB of writes
        (FoundationDB's approximate size, the caller's writes before included; about
        900 bytes a node besides its value, more with long subspace prefixes), into a
        FairQueue 50 at most; the nodes
        past that are pushed later by expander jobs (500 each) pushed now
        (docs/workflows.md).  Cost: 1 round trip, then one for each Queue or
        PriorityQueue pushed into (two past 500 nodes) and one per node into a
        FairQueue, one for the expanders if any, and the commit.

        Raises:
            TypeError: ``workflow`` is not one this store made.
            ValueError: it is empty or has a cycle: refused before anything is
                written.
        """
        return drive(self._ops.create(tr, workflow))

    def add_to_batch(self, tr: Transactor, batch: bytes, structure: Any,
                     values: Iterable[Any], *, delay: Optional[float] = None,
                     time_limit: Optional[float] = None,
                     limit_keys: Optional[Dict[str, Any]] = None,
                     **where: Any) -> List[bytes]:
        """Add a member to open batch ``batch`` for each of ``values``: a job in
        ``structure`` (a structure the store was made with; ``delay``, ``time_limit``,
        ``limit_keys`` and ``where`` as :meth:`Workflow.add` takes them), pushed now;
        their job ids.
        A member that ends before the batch is closed counts down the batch all the
        same.

        Reads the batch's header and open key with conflicts (adds to one batch are
        serialized; an add conflicts with its close, and a cancel) and its count of
        nodes; writes the members' definitions and edges (16 a key, as ``create``),
        the callbacks' dependencies and a new counter for each 128 members in each
        callback, and the pushes (see ``create``).  Cost: 1 round
        trip, then one for each structure pushed into (a FairQueue: one per member),
        and the commit.

        Raises:
            TypeError or ValueError: a bad value or option (nothing is written).
            UnknownWorkflowError: no such workflow.
            BatchClosedError: the batch is closed or over, or was not made open
                (nothing is written).
        """
        return drive(self._ops.add_to_batch(tr, batch, structure, values, delay, time_limit,
                                            where, limit_keys))

    def close_batch(self, tr: Transactor, batch: bytes) -> bool:
        """Close open batch ``batch``: no member is added after; its callbacks are
        pushed (or skipped) now if every member ended already, else in the transaction
        of the last member's end.  False if it was closed or over already.

        Reads the batch's header and open key with conflicts, then the callbacks'
        root counters with conflicts (as the member end that closes a counter does:
        exactly one of them reads 0), then, when the callbacks are pushed, their
        definitions.  Cost: 2 round trips, 2 more and the pushes when it pushes them,
        and the commit.

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        return drive(self._ops.close_batch(tr, batch))

    def cancel(self, tr: Transactor, workflow: bytes) -> bool:
        """Cancel a workflow: every node not started ends ``cancelled`` (those waiting
        in their structures are removed), every running node's worker is told
        (``job.cancelled``, with job records), and no node is pushed after.  False if
        it was over already.

        Reads the header and every node's state with conflicts (it conflicts with any
        step of the workflow in flight), then the definitions of the queued nodes.
        Cost: 4 round trips, one more per queued node (its structure's ``cancel``),
        those of a running sub-workflow's cancel, and the commit.  A sub-workflow's
        cancel ends its node in its parent (``cancelled``), with the parent's step.

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
        edges), what it failed with, and a job node's job id, structure and group,
        to draw it or walk it.

        Reads (no writes) the header and range reads of those nodes' definitions
        (their blocks, 16 nodes a key, with their values up to 1,000 bytes), states
        and dependencies, side by side.  Cost: 1 round trip (2 given a Database).

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

    def targets(self, tr: Transactor, workflow: bytes) -> List[bytes]:
        """The keys (subspace prefixes) of the structures a workflow's nodes go to,
        in the order the nodes name them: what a tool opens to :meth:`cancel` a
        workflow from a store made without its structures.

        Reads (no writes) the header and every node's definition (one range read,
        side by side): in a transaction that writes, a conflict with a cancel or a
        failure of the workflow (they write its header).  Cost: 1 round trip (2
        given a Database), O(nodes) keys.

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        return drive(self._ops.targets_of(tr, workflow))

    def inputs(self, tr: Transactor, job: Any) -> Dict[str, Input]:
        """The dependencies of the node a handler runs (``job``: its Job, or job
        id), by name: how each ended, its result, what it failed with.  Those that
        failed under ``ignore`` are left out.

        Reads (no writes) the node's dependencies, then their states, definitions
        and results side by side (a sub-workflow's result: the results of its last
        nodes, read from its keys).  Cost: 2 round trips (2 more for each dependency
        that is a sub-workflow).

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
