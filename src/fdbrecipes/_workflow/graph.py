"""A workflow as it is built: nodes (each a job for a known structure) and their
dependencies, checked as they are added and once more, as a whole, before anything
is written (:meth:`Graph.plan`)."""

from __future__ import annotations

import functools
import hashlib
import math
import uuid
from collections import deque
from typing import (
    Any,
    Dict,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
    runtime_checkable,
)

import fdb.tuple

from .._store_layout import WORKFLOW_ID_HEAD, node_parts, pack_index
from .._values import MAX_BATCH_BYTES, check_seconds, materialize
from ..protocol import Workable, workable

__all__ = ["ALWAYS", "CONTINUE", "END", "FAIL", "FAILURE", "IGNORE", "LEAF", "LIMIT_KEYS",
           "MAX_DEPS", "MAX_NODES", "NO_VALUE", "OPEN", "POLICIES", "SUB", "SUCCESS", "WHEN",
           "Graph", "Node", "NodeJob", "NodeRef", "NodeSource", "Plan", "Spec", "expander_id",
           "job_of", "keyed_where", "node_id", "parse_node_id", "push_args", "store_tag",
           "stored_where"]

#: What a dependent does when a dependency fails (dies, or is cancelled or skipped):
#: ``fail`` the workflow (what has not started is cancelled), ``ignore`` it (the
#: dependent runs, and does not see it among its inputs), or ``continue`` (the
#: dependent runs and sees the failure among its inputs).
FAIL, IGNORE, CONTINUE = "fail", "ignore", "continue"
POLICIES = (FAIL, IGNORE, CONTINUE)
#: When a node runs once its dependencies ended: ``always``, on ``success`` (none of
#: its ``continue`` dependencies failed), or on ``failure`` (one of them did); else it
#: is skipped.
ALWAYS, SUCCESS, FAILURE = "always", "success", "failure"
WHEN = (ALWAYS, SUCCESS, FAILURE)
#: Dependencies per counter of a node (see docs/workflows.md): the acks of
#: dependencies counted in one leaf conflict with each other, those of different
#: leaves do not.
LEAF = 128
#: The most dependencies a node may have (two levels of counters).
MAX_DEPS = LEAF * LEAF
#: The most nodes a workflow may have (it is created in one transaction).
MAX_NODES = 50_000
#: The first element of a node's job id.
NODE_MARK = "fdbwf"
_MARK_HEAD = fdb.tuple.pack((NODE_MARK,))
assert _MARK_HEAD == WORKFLOW_ID_HEAD, "the queues know the head of a node's job id"


def store_tag(store: bytes) -> bytes:
    """The 4 bytes that name a store in its nodes' job ids (a digest of its key)."""
    return hashlib.blake2b(store, digest_size=4).digest()


def node_id(tag: bytes, workflow: bytes, i: int) -> bytes:
    """The job id of node ``i`` of ``workflow`` in the store tagged ``tag``: ``(mark,
    tag, workflow, i)`` packed (a tuple packs as its elements' encodings one after
    the other: the head, the same for every node of the workflow, is packed once)."""
    return node_head(tag, workflow) + pack_index(i)


@functools.lru_cache(maxsize=64)
def node_head(tag: bytes, workflow: bytes) -> bytes:
    """``(mark, tag, workflow)`` packed: how the job ids of ``workflow``'s nodes begin."""
    packed: bytes = fdb.tuple.pack((NODE_MARK, tag, workflow))
    return packed


def expander_id(tag: bytes, workflow: bytes, source: int, chunk: int) -> bytes:
    """The job id of an expander: a job whose ack pushes chunk ``chunk`` of the nodes
    node ``source`` freed (-1: the first nodes; -1 - n: an open batch's add or close,
    see ``Batches.source``), too many for one transaction."""
    packed: bytes = fdb.tuple.pack((NODE_MARK, tag, workflow, source, chunk))
    return packed


class NodeRef(NamedTuple):
    """What a job id of a workflow says: its store's tag, its workflow, its node (an
    expander's: the node that freed its nodes) and, for an expander, its chunk."""

    tag: bytes
    w: bytes
    i: int
    chunk: Optional[int]


def parse_node_id(id_: Optional[bytes]) -> Optional[NodeRef]:
    """What the job id ``id_`` of a workflow's node or expander says; None for any
    other id."""
    parts = node_parts(id_)
    if parts is None:
        return None
    return NodeRef(parts[1], parts[2], parts[3], parts[4] if len(parts) == 5 else None)


class Node:
    """A node of a workflow being built: what ``add`` returns and ``deps=`` takes.

    Attributes:
        name: its name (given, or its number as a str): the key of its result and
            its inputs.
    """

    __slots__ = ("graph", "index", "name")

    def __init__(self, graph: Graph, index: int, name: str) -> None:
        self.graph = graph
        self.index = index
        self.name = name

    @property
    def id(self) -> bytes:
        """Its job's id (``Queue.job(db, node.id)`` reads its record)."""
        return node_id(self.graph.tag, self.graph.id, self.index)

    def __repr__(self) -> str:
        return f"Node({self.name!r})"


class NodeJob(NamedTuple):
    """A node's job as a task's call gives it to ``Workflow.add``: its structure,
    its value, its delay and time limit, and where it goes (a PriorityQueue's
    ``priority``, a FairQueue's ``group``)."""

    structure: Any
    value: Any
    delay: Optional[float]
    time_limit: Optional[float]
    where: Dict[str, Any]


@runtime_checkable
class NodeSource(Protocol):
    """What ``Workflow.add`` takes instead of a structure and a value: a call of a
    task (``my_task.s(...)``, :class:`fdbrecipes.tasks.TaskCall`), which says its job."""

    def node_job(self) -> NodeJob:
        """The job of the node (checked and encoded; nothing is written)."""


def job_of(source: Any, value: Any, delay: Any, time_limit: Any,
           where: Dict[str, Any]) -> NodeJob:
    """A node's job: a :class:`NodeSource`'s (``value`` not given; ``delay``,
    ``time_limit`` and ``where`` given override its own), or ``source`` (a structure)
    with ``value``.

    Raises:
        TypeError: a task's call with a value, or a structure without one.
    """
    if isinstance(source, NodeSource):
        if value is not NO_VALUE:
            raise TypeError("a task's call is the node's job: give it no value")
        job = source.node_job()
        return NodeJob(job.structure, job.value, job.delay if delay is None else delay,
                       job.time_limit if time_limit is None else time_limit,
                       {**job.where, **where})
    if value is NO_VALUE:
        raise TypeError("value: give the job's value (or a task's call, my_task.s(...), "
                        "instead of a structure)")
    return NodeJob(source, value, delay, time_limit, where)


#: The push argument of a node's ``where`` that holds its keys under its structure's
#: limits: given as a dict (as ``push`` takes it), stored as ``(name, key)`` pairs in
#: name order (see :func:`stored_where`, :func:`push_args`).
LIMIT_KEYS = "limit_keys"


def keyed_where(where: Dict[str, Any], limit_keys: Any) -> Dict[str, Any]:
    """``where`` (a node's push arguments) with ``limit_keys`` among them (none if
    None)."""
    return where if limit_keys is None else {**where, LIMIT_KEYS: limit_keys}


def stored_where(where: Dict[str, Any]) -> Tuple[Tuple[str, Any], ...]:
    """``where`` (checked by a push) as a node stores it: pairs in name order, its
    limit keys as pairs too."""
    return tuple(sorted((k, tuple(sorted(v.items())) if k == LIMIT_KEYS else v)
                        for k, v in where.items()))


def push_args(where: Tuple[Tuple[str, Any], ...]
              ) -> Tuple[Dict[str, Any], Optional[Dict[str, Any]]]:
    """A node's stored ``where`` as a push takes it: where it goes (a PriorityQueue's
    ``priority``, a FairQueue's ``group``) and its ``limit_keys`` (None: none given)."""
    place = dict(where)
    keys = place.pop(LIMIT_KEYS, None)
    return place, None if keys is None else dict(keys)


class _NoValue:
    """The default of ``Workflow.add``'s value: none given (a task's call has its own)."""

    def __repr__(self) -> str:
        return "NO_VALUE"


#: No value given (see :func:`job_of`).
NO_VALUE: Any = _NoValue()


class Spec(NamedTuple):
    """A node as it is stored: its structure's key, its value (encoded by the
    structure's codec, tuple-packed), ``where`` it goes, its delay and time limit,
    its name, when it runs and its dependencies ``(node, policy)``."""

    target: bytes
    value: bytes
    where: Tuple[Tuple[str, Any], ...]
    delay: Optional[float]
    time_limit: Optional[float]
    name: str
    when: str
    deps: List[Tuple[int, str]]


#: The target of a node that is a sub-workflow (its value: the sub-workflow's id): no
#: structure's key (those of the system keys, ``\xff``, name none).
SUB = b"\xff/fdbrecipes/sub-workflow"
#: The pseudo-node of a sub-workflow that its last nodes (those nothing depends on)
#: count down: the one that frees it ends the sub-workflow, and its node in the parent.
END = -1

#: What an edge says of its dependent's leaves when the dependent is counted through
#: its root whatever its leaves (an open batch's callback: see :attr:`Graph.joins`).
OPEN = 0


class Plan(NamedTuple):
    """A graph checked whole, ready to write: its id, its specs in order, each
    node's dependents ``(dependent, leaf, policy, its leaves)``, each node's
    counters ``(leaf, count)`` and, for an open batch, its callbacks (``joins``)."""

    id: bytes
    specs: List[Spec]
    dependents: List[List[Tuple[int, int, str, int]]]
    counters: List[List[Tuple[int, int]]]
    joins: Tuple[int, ...] = ()
    #: its sub-workflows, by the node that stands for each in it
    subs: Tuple[Tuple[int, Plan], ...] = ()
    #: a sub-workflow's: the counters of its end (:data:`END`), which its last nodes count
    end: Tuple[Tuple[int, int], ...] = ()


def check_policy(policy: Any, name: str) -> str:
    """One of :data:`POLICIES`."""
    if type(policy) is not str or policy not in POLICIES:
        raise ValueError(f"{name} must be one of {', '.join(POLICIES)}, got {policy!r}")
    return policy


class Graph:
    """The nodes of one workflow, checked as they are added (see
    :class:`fdbrecipes.workflow.Workflow`, its face).  ``store``: the store's key;
    ``targets``: the structures the store knows, by their subspace's key."""

    def __init__(self, store: bytes, targets: Dict[bytes, Workable[Any]]) -> None:
        self.store = store
        self.tag = store_tag(store)
        self.targets = targets
        self.id = uuid.uuid4().bytes
        self.specs: List[Spec] = []
        self.nodes: List[Node] = []
        self.names: Dict[str, int] = {}
        self.size = 0
        #: an open batch's callbacks: nodes that also wait for the members added later
        #: and for the batch's close (see :mod:`.batches`)
        self.joins: List[int] = []
        #: its sub-workflows, by the node that stands for each; ``parent``: the graph
        #: this one is a sub-workflow of (a graph is one workflow's sub-workflow at most)
        self.subs: Dict[int, Graph] = {}
        self.parent: Optional[Graph] = None
        #: the structures met, by id (each kept, so that its id names it): its key and
        #: operations (see :meth:`target_of`)
        self.known: Dict[int, Tuple[Any, bytes, Workable[Any]]] = {}
        #: the pushes checked whole (see :meth:`add`): by structure, delay, time limit,
        #: the bytes of the node's number (its id's length) and where
        self.checked: Set[Tuple[Any, ...]] = set()

    def target_of(self, structure: Any) -> Tuple[bytes, Workable[Any]]:
        """The key and operations of ``structure``, which the store must know.

        Raises:
            TypeError: it is not a job structure.
            ValueError: the store was not made with it.
        """
        met = self.known.get(id(structure))
        if met is not None and met[0] is structure:
            return met[1], met[2]
        ops = workable(structure, "structure")
        key = bytes(ops.subspace.key())
        if self.targets.get(key) is not ops:
            known = self.targets.get(key)
            if known is None:
                raise ValueError(f"structure {structure!r} is unknown to this workflow store: "
                                 "give it to Workflows(..., structures=[...])")
            if type(known) is not type(ops):
                raise ValueError(f"structure {structure!r} is not the kind the store knows "
                                 "at its subspace")
        self.known[id(structure)] = (structure, key, ops)
        return key, ops

    def deps_of(self, deps: Any, on_failure: str) -> List[Tuple[int, str]]:
        """``deps`` (nodes of this graph, or ``(node, policy)`` pairs) checked."""
        out: List[Tuple[int, str]] = []
        if type(deps) in (tuple, list) and not deps:
            return out
        seen = set()
        for k, dep in enumerate(materialize(deps, "deps")):
            policy = on_failure
            if isinstance(dep, tuple):
                if len(dep) != 2:
                    raise ValueError(f"deps[{k}] must be a Node or (Node, policy)")
                dep, policy = dep[0], check_policy(dep[1], f"deps[{k}]'s policy")
            if not isinstance(dep, Node):
                raise TypeError(f"deps[{k}] must be a Node, not {type(dep).__name__}")
            if dep.graph is not self:
                raise ValueError(f"deps[{k}] ({dep.name!r}) is a node of another workflow")
            if dep.index in seen:
                raise ValueError(f"deps[{k}] ({dep.name!r}) is named twice")
            seen.add(dep.index)
            out.append((dep.index, policy))
        if len(out) > MAX_DEPS:
            raise ValueError(f"deps: at most {MAX_DEPS:,} per node, got {len(out):,}")
        return out

    def add(self, structure: Any, value: Any, deps: Any, on_failure: Any, name: Any,
            when: Any, delay: Any, time_limit: Any, where: Dict[str, Any]) -> Node:
        """Add one node (see ``Workflow.add``); nothing is written."""
        key, ops = self.target_of(structure)
        delay_s = None if delay is None else check_seconds(delay, "delay")
        limit = None if time_limit is None else check_seconds(time_limit, "time_limit")
        index = len(self.specs)
        try:  # the length of its id grows with its number's
            options: Optional[Tuple[Any, ...]] = (
                key, delay_s, limit, (index.bit_length() + 7) // 8,
                tuple((k, type(v), v) for k, v in sorted(where.items())))
            hash(options)
        except TypeError:  # a where that cannot be a key (limit_keys, a dict, among
            options = None  # them: their size with the value is the push's to check)
        if options is None or options not in self.checked:
            ops.push_job(None, value, id=node_id(self.tag, self.id, index), delay=delay_s,
                         time_limit=limit, **where).close()  # checks the push, runs nothing
            if options is not None:
                self.checked.add(options)
        # a push checked with the same options passes but for the value: its encoding
        # checks it, and the workflow's size bounds it
        encoded = ops.values.encoded(value)  # type: ignore[attr-defined]
        stored = stored_where(where) if where else ()
        return self.add_spec(key, encoded, deps, on_failure, name, when,
                             len(encoded) + (len(repr(stored)) if LIMIT_KEYS in where else 0),
                             stored, delay_s, limit)

    def add_spec(self, target: bytes, value: bytes, deps: Any, on_failure: Any, name: Any,
                 when: Any, size: int, where: Tuple[Tuple[str, Any], ...] = (),
                 delay: Optional[float] = None, time_limit: Optional[float] = None) -> Node:
        """Add a node of ``target`` and ``value`` (checked already: encoded, ``size``
        bytes), checking the rest (see :meth:`add`)."""
        policy = check_policy(on_failure, "on_failure")
        if type(when) is not str or when not in WHEN:
            raise ValueError(f"when must be one of {', '.join(WHEN)}, got {when!r}")
        index = len(self.specs)
        if index >= MAX_NODES:
            raise ValueError(f"a workflow has at most {MAX_NODES:,} nodes")
        if name is None:
            name = str(index)
        elif type(name) is not str or not 0 < len(name) <= 200:
            raise TypeError(f"name must be a str of 1 to 200 characters, not {name!r}")
        if name in self.names:
            raise ValueError(f"name {name!r} is taken by another node of this workflow")
        checked = self.deps_of(deps, policy)
        spec = Spec(target, value, where, delay, time_limit, name, when, checked)
        self.size += size + 200 + 60 * len(checked)
        if self.size > MAX_BATCH_BYTES // 2:
            raise ValueError("the workflow is too large to write in one transaction")
        node = Node(self, index, name)
        self.specs.append(spec)
        self.nodes.append(node)
        self.names[name] = index
        return node

    def add_workflow(self, sub: Any, deps: Any, on_failure: Any, name: Any,
                     when: Any) -> Node:
        """Add a node that is the sub-workflow ``sub`` (a graph of the same store, in
        no other workflow): it starts once ``deps`` ended, and its end is the node's;
        nothing is written."""
        if not isinstance(sub, Graph) or sub.store != self.store:
            raise TypeError("workflow must be a Workflow made by this store's new()")
        if sub is self or sub.parent is not None or self.within(sub):
            raise ValueError("workflow is this workflow, or in a workflow already")
        if sub.joins:
            raise ValueError("workflow: an open batch cannot be a sub-workflow")
        if not sub.specs:
            raise ValueError("workflow: the sub-workflow has no node")
        node = self.add_spec(SUB, sub.id, deps, on_failure, name, when, 0)
        sub.parent = self
        self.subs[node.index] = sub
        return node

    def whole(self) -> Tuple[int, int]:
        """The size and nodes of this graph with its sub-workflows (see :meth:`add`)."""
        size, nodes = self.size, len(self.specs)
        for sub in self.subs.values():
            more = sub.whole()
            size, nodes = size + more[0], nodes + more[1]
        return size, nodes

    def within(self, graph: Graph) -> bool:
        """Whether this graph is ``graph``'s sub-workflow, at any depth."""
        parent = self.parent
        while parent is not None:
            if parent is graph:
                return True
            parent = parent.parent
        return False

    def after(self, node: Any, deps: Any, on_failure: Any) -> None:
        """Make ``node`` depend on ``deps`` too (a cycle is refused by :meth:`plan`)."""
        if not isinstance(node, Node) or node.graph is not self:
            raise ValueError("node must be a Node of this workflow")
        added = self.deps_of(deps, check_policy(on_failure, "on_failure"))
        spec = self.specs[node.index]
        known = {i for i, _ in spec.deps}
        twice = [self.nodes[i].name for i, _ in added if i in known]
        if twice:
            raise ValueError(f"{node.name!r} depends on {twice[0]!r} already")
        if len(spec.deps) + len(added) > MAX_DEPS:
            raise ValueError(f"deps: at most {MAX_DEPS:,} per node")
        spec.deps.extend(added)
        self.size += 60 * len(added)

    def plan(self) -> Plan:
        """The graph checked whole: every node's dependents and counters (and those
        of its sub-workflows, and, for a sub-workflow, of its end).

        Raises:
            ValueError: it is empty, or has a cycle (naming a node on it), or one of
                its sub-workflows has.
        """
        n = len(self.specs)
        if n == 0:
            raise ValueError("the workflow has no node")
        size, nodes = self.whole()
        if self.parent is None and (size > MAX_BATCH_BYTES // 2 or nodes > MAX_NODES):
            raise ValueError("the workflow and its sub-workflows are too large to write "
                             "in one transaction")
        dependents: List[List[Tuple[int, int, str, int]]] = [[] for _ in range(n)]
        counters: List[List[Tuple[int, int]]] = []
        joins = set(self.joins)
        for d, spec in enumerate(self.specs):
            if not spec.deps:  # no counter (most nodes of a large workflow)
                counters.append([])
                continue
            leaves = math.ceil(len(spec.deps) / LEAF)
            counts = [0] * leaves
            for position, (i, policy) in enumerate(spec.deps):
                leaf = position // LEAF
                counts[leaf] += 1
                dependents[i].append((d, leaf, policy, OPEN if d in joins else leaves))
            counters.append(list(enumerate(counts)))
        check_acyclic(n, self.specs, dependents)
        end: List[Tuple[int, int]] = []
        if self.parent is not None:  # its last nodes count down its end
            last = [i for i in range(n) if not dependents[i]]
            leaves = math.ceil(len(last) / LEAF)
            end = [(leaf, len(last[leaf * LEAF:(leaf + 1) * LEAF])) for leaf in range(leaves)]
            for position, i in enumerate(last):
                dependents[i].append((END, position // LEAF, CONTINUE, leaves))
        subs = tuple((i, sub.plan()) for i, sub in sorted(self.subs.items()))
        return Plan(self.id, list(self.specs), dependents, counters, tuple(self.joins),
                    subs, tuple(end))


def check_acyclic(n: int, specs: Sequence[Spec],
                  dependents: Sequence[Iterable[Tuple[int, int, str, int]]]) -> None:
    """Refuse a graph with a cycle (Kahn's algorithm).

    Raises:
        ValueError: naming a node on a cycle.
    """
    waiting = [len(spec.deps) for spec in specs]
    ready = deque(i for i in range(n) if waiting[i] == 0)
    seen = 0
    while ready:
        i = ready.popleft()
        seen += 1
        for d, *_ in dependents[i]:
            waiting[d] -= 1
            if waiting[d] == 0:
                ready.append(d)
    if seen < n:
        stuck = next(i for i in range(n) if waiting[i] > 0)
        raise ValueError(f"the workflow has a cycle through node {specs[stuck].name!r}")
