# Generated in part by tools/unasync.py from src/fdbrecipes/workflow.py: the
# public methods (signature, docstring, code), but the code of those the script
# lists in OWN_CODE.  Edit the sync module (or OWN_CODE's methods here), then run
# `python tools/unasync.py`; `--check` (in .ci/run) fails while a file is stale.
"""AsyncWorkflows: :class:`fdbrecipes.workflow.Workflows` for asyncio code.

The same constructor arguments and the same keys as Workflows; every method is an
``async def`` twin of the sync method of the same name, with its docstring, awaiting
the same operation (:class:`fdbrecipes._workflow.ops.WorkflowOps`).  Workflows are
built the same way (``new()``, ``batch()``, ``open_batch()``: nothing is read or
written).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional

from .._drivers.awaiting import drive
from .._fdb import Transactor
from ..workflow import GraphNode, Input, Workflow, WorkflowsBase, WorkflowStatus

__all__ = ["AsyncWorkflows"]


class AsyncWorkflows(WorkflowsBase):
    """A store of workflows for asyncio code (see :class:`fdbrecipes.workflow.Workflows`)."""

    async def create(self, tr: Transactor, workflow: Workflow) -> bytes:
        """The async twin of :meth:`fdbrecipes.Workflows.create`, awaited without blocking the
        event loop.

        Write ``workflow`` and push its nodes without dependencies; its id.  If a
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
        return await drive(self._ops.create(tr, workflow))

    async def cancel(self, tr: Transactor, workflow: bytes) -> bool:
        """The async twin of :meth:`fdbrecipes.Workflows.cancel`, awaited without blocking the
        event loop.

        Cancel a workflow: every node not started ends ``cancelled`` (those waiting
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
        return await drive(self._ops.cancel(tr, workflow))

    async def status(self, tr: Transactor, workflow: bytes, limit: int = 100) -> WorkflowStatus:
        """The async twin of :meth:`fdbrecipes.Workflows.status`, awaited without blocking the
        event loop.

        What became of a workflow: its state, its nodes by state, and its first
        ``limit`` nodes, with what those waiting wait on.

        Reads (no writes) its header, tallies, and first nodes' definitions and
        states, side by side; then the waiting ones' dependencies.  Cost: 2 round
        trips (3 given a Database).

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        return await drive(self._ops.status(tr, workflow, limit))

    async def result(self, db: Any, workflow: bytes, timeout: Optional[float] = None
    ) -> Dict[str, Any]:
        """The async twin of :meth:`fdbrecipes.Workflows.result`, awaited without blocking the
        event loop.

        Wait until a workflow is over; the results of its last nodes (those
        nothing depends on), by name.

        Waits on a watch of its count of ended nodes (no polling), then reads its
        status and results.  Cost: a round trip per wake, then 3.

        Raises:
            UnknownWorkflowError: no such workflow.
            WorkflowFailedError: it failed or was cancelled (``error.status``).
            TimeoutError: it was not over within ``timeout`` seconds.
        """
        return await drive(self._ops.result(db, workflow, timeout))

    async def inputs(self, tr: Transactor, job: Any) -> Dict[str, Input]:
        """The async twin of :meth:`fdbrecipes.Workflows.inputs`, awaited without blocking the
        event loop.

        The dependencies of the node a handler runs (``job``: its Job, or job
        id), by name: how each ended, its result, what it failed with.  Those that
        failed under ``ignore`` are left out.

        Reads (no writes) the node's dependencies, then their states, definitions
        and results side by side (a sub-workflow's result: the results of its last
        nodes, read from its keys).  Cost: 2 round trips (2 more for each dependency
        that is a sub-workflow).

        Raises:
            ValueError: ``job`` is not a node of this store's workflows.
        """
        return await drive(self._ops.inputs(tr, job))

    async def prune(self, tr: Transactor, limit: Optional[int] = None) -> int:
        """The async twin of :meth:`fdbrecipes.Workflows.prune`, awaited without blocking the
        event loop.

        Forget up to ``limit`` (all when None) workflows whose retention passed
        and which are over (one still running is looked at a retention later), in
        transactions of 100 given a Database; how many were looked at.

        Reads the pruning index by snapshot and each workflow's header and count of
        ended nodes (conflicts); clears every key of those forgotten.  Cost: 2 round
        trips per workflow, in each transaction.
        """
        return await drive(self._ops.prune(tr, limit))

    async def list(self, tr: Transactor, limit: int = 100,
                   after: Optional[bytes] = None) -> List[WorkflowStatus]:
        """The async twin of :meth:`fdbrecipes.Workflows.list`, awaited without blocking the
        event loop.

        The workflows of the store, in the order of their ids (random: ids are
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
        return await drive(self._ops.list(tr, limit, after))

    async def graph(self, tr: Transactor, workflow: bytes, limit: int = 1_000) -> List[GraphNode]:
        """The async twin of :meth:`fdbrecipes.Workflows.graph`, awaited without blocking the
        event loop.

        A workflow's graph: its first ``limit`` nodes (0 to 50,000, in the order
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
        return await drive(self._ops.read_graph(tr, workflow, limit))

    async def add_to_batch(self, tr: Transactor, batch: bytes, structure: Any,
                           values: Iterable[Any], *, delay: Optional[float] = None,
                           time_limit: Optional[float] = None,
                           limit_keys: Optional[Dict[str, Any]] = None,
                           **where: Any) -> List[bytes]:
        """The async twin of :meth:`fdbrecipes.Workflows.add_to_batch`, awaited without
        blocking the event loop.

        Add a member to open batch ``batch`` for each of ``values``: a job in
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
        return await drive(self._ops.add_to_batch(tr, batch, structure, values, delay, time_limit,
                                                  where, limit_keys))

    async def close_batch(self, tr: Transactor, batch: bytes) -> bool:
        """The async twin of :meth:`fdbrecipes.Workflows.close_batch`, awaited without blocking
        the event loop.

        Close open batch ``batch``: no member is added after; its callbacks are
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
        return await drive(self._ops.close_batch(tr, batch))

    async def targets(self, tr: Transactor, workflow: bytes) -> List[bytes]:
        """The async twin of :meth:`fdbrecipes.Workflows.targets`, awaited without blocking the
        event loop.

        The keys (subspace prefixes) of the structures a workflow's nodes go to,
        in the order the nodes name them: what a tool opens to :meth:`cancel` a
        workflow from a store made without its structures.

        Reads (no writes) the header and every node's definition (one range read,
        side by side): in a transaction that writes, a conflict with a cancel or a
        failure of the workflow (they write its header).  Cost: 1 round trip (2
        given a Database), O(nodes) keys.

        Raises:
            UnknownWorkflowError: no such workflow.
        """
        return await drive(self._ops.targets_of(tr, workflow))
