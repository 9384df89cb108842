"""The checked calls of a workflow store (see :mod:`fdbrecipes.workflow`, its face,
and :mod:`.engine`, its transactions)."""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .._fdb import Gen, Tally, Transactor
from .._ops.base import Ops
from .._records.records import CANCELLED, JobError
from .._retry import read
from .._store_layout import WorkflowLayout
from .._values import (
    check_int,
    check_limit,
    check_seconds,
    check_subspace,
    check_timeout,
    materialize,
)
from .._waiting import Wake, wait_until_ready
from ..errors import BatchClosedError, UnknownWorkflowError, WorkflowFailedError
from ..protocol import Workable, workable
from .batches import Batches
from .engine import Store
from .graph import ALWAYS, CONTINUE, MAX_NODES, Graph, keyed_where, parse_node_id
from .reading import DONE, FAILED, SUCCEEDED, GraphNode, Input, WorkflowStatus

__all__ = ["DEFAULT_RETENTION", "LIST_LIMIT", "PRUNE_BATCH", "WorkflowOps",
           "check_workflow_id"]

#: Seconds a workflow is kept after it was created, unless the store says (then as
#: long as it runs).
DEFAULT_RETENTION = 7 * 24 * 3600.0
#: Workflows one pruning transaction looks at, at most.
PRUNE_BATCH = 100
#: Workflows one ``list`` returns at most.
LIST_LIMIT = 1_000


def check_workflow_id(w: Any) -> bytes:
    """A workflow's id: bytes (what ``create`` returned).

    Raises:
        TypeError or ValueError: otherwise.
    """
    if type(w) is not bytes:
        raise TypeError(f"workflow must be a workflow id (bytes), not {type(w).__name__}")
    if not 0 < len(w) <= 100:
        raise ValueError("workflow must be a workflow id of 1 to 100 bytes")
    return w


class WorkflowOps(Ops):
    """The checked calls of a workflow store.

    Attributes:
        store: its transactions (:class:`.engine.Store`).
        batches: those of its open batches (:class:`.batches.Batches`).
        targets: the structures its nodes may go to, by their subspace's key; each
            one's operations object knows the store (``ops.workflows``), so that a
            worker serving it advances the workflows of its jobs.
    """

    def __init__(self, subspace: Any, structures: Iterable[Any],
                 retention: Any = DEFAULT_RETENTION) -> None:
        super().__init__(check_subspace(subspace))
        self.targets: Dict[bytes, Workable[Any]] = {}
        for i, structure in enumerate(structures):
            ops = workable(structure, f"structures[{i}]")
            self.targets[bytes(ops.subspace.key())] = ops
        self.store = Store(WorkflowLayout(subspace), self.targets,
                           check_seconds(retention, "retention"))
        self.batches = Batches(self.store)
        for ops in self.targets.values():
            known = getattr(ops, "workflows", None)
            if not isinstance(known, dict):
                raise TypeError(f"{ops!r} cannot carry workflows")
            other = known.get(self.store.tag)
            if other is not None and other.store.key != self.store.key:
                raise ValueError(f"the workflow stores at {other.subspace!r} and {subspace!r} "
                                 "share a tag: use another subspace for one of them")
            known[self.store.tag] = self

    def graph(self) -> Graph:
        """A new, empty graph of this store (nothing is written)."""
        return Graph(self.store.key, self.targets)

    # -- writing -------------------------------------------------------------------------

    def create(self, tr: Transactor, graph: Any) -> Gen[bytes]:
        """Write ``graph`` (a Workflow's, or the Workflow; checked whole first) and
        push its first nodes; its id."""
        graph = getattr(graph, "graph", graph)
        if not isinstance(graph, Graph) or graph.store != self.store.key:
            raise TypeError("workflow must be a Workflow made by this store's new()")
        if graph.parent is not None:
            raise ValueError("workflow is a sub-workflow: it is created with its parent")
        plan = graph.plan()
        yield from self.loop(tr, self.store.create, plan)
        return plan.id

    def add_to_batch(self, tr: Transactor, w: Any, structure: Any, values: Any,
                     delay: Any, time_limit: Any, where: Dict[str, Any],
                     limit_keys: Any = None) -> Gen[List[bytes]]:
        """Add a member for each of ``values`` to open batch ``w`` (``limit_keys``: their
        keys under ``structure``'s limits); their job ids.

        Raises:
            UnknownWorkflowError: no such workflow.
            BatchClosedError: it is closed, over, or was not made open.
        """
        w = check_workflow_id(w)
        graph = self.graph()
        where = keyed_where(where, limit_keys)
        for value in materialize(values, "values"):
            graph.add(structure, value, (), CONTINUE, None, ALWAYS, delay, time_limit, where)
        added = yield from self.loop(tr, self.batches.add, w, graph.specs)
        if added.missing:
            raise UnknownWorkflowError(w)
        if added.closed:
            raise BatchClosedError(w)
        return added.ids

    def close_batch(self, tr: Transactor, w: Any) -> Gen[bool]:
        """Close open batch ``w``; False if it was closed or over already.

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        found = yield from self.loop(tr, self.batches.close, check_workflow_id(w))
        if found is None:
            raise UnknownWorkflowError(w)
        return found

    def cancel(self, tr: Transactor, w: Any) -> Gen[bool]:
        """Cancel workflow ``w``; False if it was over already.

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        found = yield from self.loop(tr, self.cancelling, check_workflow_id(w))
        if found is None:
            raise UnknownWorkflowError(w)
        return found

    def cancelling(self, tr: Any, _attempt: Any, w: bytes) -> Gen[Optional[bool]]:
        """The operation of :meth:`cancel`."""
        return self.store.stop(tr, w, CANCELLED, "cancelled")

    def prune(self, tr: Transactor, limit: Any = None) -> Gen[int]:
        """Forget workflows whose retention has passed and which are over (those
        whose retention passed before this call: one still running is looked at once,
        and again a retention later)."""
        return self.loop.counted(tr, partial(self.store.prune, before=time.time()),
                                 check_limit(limit), PRUNE_BATCH, "prune", "workflows")

    # -- reading -------------------------------------------------------------------------

    def status(self, tr: Transactor, w: Any, limit: Any = 100) -> Gen[WorkflowStatus]:
        """What became of workflow ``w``.

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        found = yield from read(tr, self.store.status, check_workflow_id(w),
                                check_int(limit, "limit", low=0, high=100_000))
        if found is None:
            raise UnknownWorkflowError(w)
        return found

    def list(self, tr: Transactor, limit: Any = 100,
             after: Any = None) -> Gen[List[WorkflowStatus]]:
        """The first ``limit`` workflows by id after ``after``, without their nodes."""
        return read(tr, self.store.listing, check_int(limit, "limit", low=1, high=LIST_LIMIT),
                    None if after is None else check_workflow_id(after))

    def read_graph(self, tr: Transactor, w: Any,
                   limit: Any = 1_000) -> Gen[List[GraphNode]]:
        """Workflow ``w``'s first ``limit`` nodes with their dependencies.

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        found = yield from read(tr, self.store.graph, check_workflow_id(w),
                                check_int(limit, "limit", low=0, high=MAX_NODES))
        if found is None:
            raise UnknownWorkflowError(w)
        return found

    def targets_of(self, tr: Transactor, w: Any) -> Gen[List[bytes]]:
        """The keys of the structures workflow ``w``'s nodes go to.

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        found: Optional[List[bytes]] = yield from read(tr, self.store.targets_of,
                                                       check_workflow_id(w))
        if found is None:
            raise UnknownWorkflowError(w)
        return found

    def inputs(self, tr: Transactor, job: Any) -> Gen[Dict[str, Input]]:
        """The dependencies of the node ``job`` (a Job, or its id) runs."""
        w, i = self.node_of(job)
        return (yield from read(tr, self.store.inputs, w, i))

    def node_of(self, job: Any) -> Tuple[bytes, int]:
        """The workflow and node of ``job`` (a Job, a Lease or a job id).

        Raises:
            ValueError: it is not a node of this store's workflows.
        """
        id_ = job if type(job) is bytes else getattr(job, "id", None)
        parsed = parse_node_id(id_)
        if parsed is None or parsed.tag != self.store.tag or parsed.chunk is not None:
            raise ValueError(f"job {id_!r} is not a node of this store's workflows")
        return parsed.w, parsed.i

    def result(self, db: Any, w: Any, timeout: Any = None) -> Gen[Dict[str, Any]]:
        """Wait until workflow ``w`` is over; the results of its last nodes.

        Raises:
            UnknownWorkflowError: no such workflow.
            WorkflowFailedError: it failed, or was cancelled.
            TimeoutError: it was not over within ``timeout`` seconds.
        """
        w = check_workflow_id(w)
        check_timeout(timeout)
        wake = Wake((self.store.keys.tally(w, DONE), self.store.keys.header(w)),
                    self.over, (w,), self.hooks)
        if not (yield from wait_until_ready(db, timeout, wake)):
            raise TimeoutError(f"workflow {w!r} was not over within {timeout} s")
        status = yield from self.status(db, w, 0)
        if status.state not in (SUCCEEDED, "completed"):
            raise WorkflowFailedError(status)
        found = yield from read(db, self.store.sinks, w)
        if found is None:
            raise UnknownWorkflowError(w)
        return found

    def over(self, tr: Any, w: bytes) -> Gen[Tuple[bool, Optional[float]]]:
        """Whether workflow ``w`` is over (a readiness check).

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        try:
            return (yield from self.store.is_over(tr, w))
        except LookupError:
            raise UnknownWorkflowError(w) from None

    # -- what a burial adds -------------------------------------------------------------

    def buried(self, tally: Tally, id_: Optional[bytes], reason: Optional[str],
               error: Optional[Tuple[str, str, str]]) -> None:
        """Job ``id_`` became a dead letter (whatever buried it: its worker, a release
        on its last delivery, or any transaction that met its lease expired on its
        last delivery), ``reason`` and ``error`` (type, message, traceback) said why:
        if it is a node of this store, its step (:meth:`.engine.Store.advance` with
        ``failed``) is asked for in ``tally``, to run later in the same transaction
        (see :meth:`step`)."""
        why = reason if error is None else JobError(*error).reason()
        self.step(tally.later, id_, FAILED, why)

    def removed(self, later: List[Any], id_: Optional[bytes],
                why: str = "cancelled") -> None:
        """Job ``id_`` was cancelled, or removed (its structure's ``remove`` or
        ``remove_many``: ``why``), while it waited in its structure: if it is a node
        of this store, its step with ``cancelled`` is asked for in ``later`` (an
        attempt's, see :meth:`step`)."""
        self.step(later, id_, CANCELLED, why)

    def step(self, later: List[Any], id_: Optional[bytes], outcome: str,
             why: Optional[str]) -> None:
        """If job ``id_`` is a node of this store, that ended as ``outcome`` without
        its worker's ack, ask for its step in ``later`` (run in the same transaction
        after the operation that ended it: see ``Attempt.later``); an expander of this
        store pushes its chunk of nodes all the same (see
        :meth:`.engine.Store.expand`: no node is lost with it)."""
        parsed = parse_node_id(id_)
        if parsed is None or parsed.tag != self.store.tag:
            return
        if parsed.chunk is not None:
            later.append((self.store.expanded, (parsed.w, parsed.i, parsed.chunk)))
        else:
            later.append((self.store.died, (parsed.w, parsed.i, outcome, why)))


def stores_of(ops: Any) -> Dict[bytes, WorkflowOps]:
    """The workflow stores a structure's operations object knows, by their tags."""
    found: Dict[bytes, WorkflowOps] = getattr(ops, "workflows", {})
    return found

