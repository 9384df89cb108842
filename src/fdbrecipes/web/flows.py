"""What the limits and workflows pages show, read from the cluster: plain data, no
HTML (the graph's SVG is :mod:`.dag`'s).

A store is named in URLs and forms by ``store``, its index among the limit stores
(``limits=``) or the workflow stores (``workflows=``) given to ``create_app``.  Every
function takes the request's :class:`.reads.Reads` and reads in one transaction that
is never committed, through the stores' public methods (and a limit store's
operations object, as the metrics read it); every read is bounded.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional
from urllib.parse import urlencode

from .. import _kinds, drive
from .._attempt import gather
from ..admin.limits import parse_key
from ..admin.places import UsageError
from ..workflow import GraphNode, WorkflowStatus
from .dag import Drawing, draw
from .forms import BadRequest
from .reads import Reads
from .show import group_hex

__all__ = ["GRAPH_NODES", "KEY_CAP", "PUSHED", "TOTALS_CAP", "WORKFLOW_ROWS", "LimitsView",
           "WorkflowView", "job_links", "key_of", "limits", "workflow", "workflows"]

#: Workflows one page of the list shows.
WORKFLOW_ROWS = 50
#: Nodes of a workflow its page reads (the first ones, in the order they were added).
GRAPH_NODES = 2_000
#: The states of a node whose job was pushed (its job page has its record).
PUSHED = ("queued", "succeeded", "failed")
#: Characters of a key's literal read at most.
KEY_CAP = 1_000
#: Keys the limits page reads at most per limit and count: its slots (running jobs,
#: and ended leases whose slot no job took yet), its parked jobs.
TOTALS_CAP = 1_000


def key_of(text: str) -> Any:
    """A limit's key from a form: a Python literal (``'acme'`` in quotes, ``42``,
    ``('a', 1)``), as ``fdbrecipes limits state --key`` takes it.

    Raises:
        BadRequest: too long, or not a literal.
    """
    if len(text) > KEY_CAP:
        raise BadRequest(f"key: at most {KEY_CAP:,} characters")
    try:
        return parse_key(text)
    except (UsageError, RecursionError, MemoryError):
        raise BadRequest("key: a Python literal, such as 'acme' in quotes, 42 or "
                         "('a', 1)") from None


class LimitsView(NamedTuple):
    """A limit store's page: each limit with its jobs running and parked over all its
    keys, each count read up to :data:`TOTALS_CAP` keys
    (:class:`fdbrecipes._limits.store.LimitTotals`, saying which count stopped
    there), and, when a limit and a key were asked for, that key's
    :class:`fdbrecipes.LimitState` (None: no such limit)."""

    totals: List[Any]
    state: Any


def _limits(tr: Any, store: Any, name: Optional[str], key: Any) -> LimitsView:
    ops = [store.ops.totals(tr, TOTALS_CAP)]
    if name is not None:
        ops.append(store.ops.state(tr, name, key))
    found = drive(gather(ops))
    return LimitsView(found[0], found[1] if name is not None else None)


def limits(reads: Reads, store: Any, name: Optional[str], key: Any) -> LimitsView:
    """Every limit of ``store`` with its jobs running and parked (``totals``: its
    definitions, then two range reads per limit, side by side, of at most
    :data:`TOTALS_CAP` keys each: its slots, a key per running job or ended lease not
    reused yet, and its parked jobs),
    and limit ``name``'s key ``key`` (``state``, side by side with them); one
    transaction, 2 round trips."""
    found: LimitsView = reads(_limits, store, name, key)
    return found


def workflows(reads: Reads, store: Any, after: Optional[bytes]) -> List[WorkflowStatus]:
    """The store's first :data:`WORKFLOW_ROWS` workflows after ``after`` (``list``:
    their headers, then their tallies side by side, 2 round trips)."""
    found: List[WorkflowStatus] = reads(store.list, WORKFLOW_ROWS, after)
    return found


class WorkflowView(NamedTuple):
    """One workflow's page: its status (without nodes), its first
    :data:`GRAPH_NODES` nodes with their dependencies, the drawing of them, and those
    nodes by state."""

    status: WorkflowStatus
    nodes: List[GraphNode]
    drawing: Drawing
    by_state: Dict[str, List[GraphNode]]


def job_links(nodes: List[GraphNode], structures: Mapping[str, Any],
              root: str = "") -> Dict[str, str]:
    """The job page (its path under ``root``, and query) of each of ``nodes`` that
    has one, by name: a node whose job was pushed (:data:`PUSHED`) into one of
    ``structures`` (the dashboard's, by name) that keeps job records (``history``)."""
    named = {bytes(s.subspace.key()): name for name, s in structures.items()
             if _kinds.of(s).jobs and s.ops.history is not None}
    out = {}
    for node in nodes:
        name = named.get(node.target or b"")
        if name is None or node.job_id is None or node.state not in PUSHED:
            continue
        query = {"s": name, "id": node.job_id.hex()}
        if node.group is not None:
            query["g"] = group_hex(node.group)
        out[node.name] = f"{root}/job?{urlencode(query)}"
    return out


def _workflow(tr: Any, store: Any, w: bytes, structures: Mapping[str, Any],
              root: str) -> WorkflowView:
    status, nodes = drive(gather([store.ops.status(tr, w, 0),
                                  store.ops.read_graph(tr, w, GRAPH_NODES)]))
    by_state: Dict[str, List[GraphNode]] = {}
    for node in nodes:
        by_state.setdefault(node.state, []).append(node)
    drawing = draw(nodes, links=job_links(nodes, structures, root))
    return WorkflowView(status, nodes, drawing, by_state)


def workflow(reads: Reads, store: Any, w: bytes, structures: Mapping[str, Any] = {},
             root: str = "") -> WorkflowView:
    """Workflow ``w``'s status (``status`` without nodes: its header and tallies) and
    its first :data:`GRAPH_NODES` nodes with their dependencies (``graph``: range
    reads side by side), all side by side in one transaction: 1 round trip; then the
    layout (:mod:`.dag`), in Python, each node linked to its job's page where
    :func:`job_links` finds one among ``structures`` (under ``root``).

    Raises:
        UnknownWorkflowError: no such workflow.
    """
    found: WorkflowView = reads(_workflow, store, w, structures, root)
    return found

