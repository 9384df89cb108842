"""Reading a workflow store: what a workflow's keys hold (its header, a node's
definition, the public types of its status and inputs), and the reads of
:class:`Reads`, which :class:`.engine.Store` is made of with its transactions."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import fdb.tuple

from .._fdb import Gen, Range, read, read_le64
from .._records.records import CANCELLED
from .._store_layout import WorkflowLayout
from .._values import decode_value
from ..protocol import Workable
from .defs import Record, Stored, read_blocks, unpack_deps
from .graph import END, IGNORE, SUB, node_id

__all__ = ["COMPLETED", "DONE", "ENDED", "FAILED", "QUEUED", "RUNNING", "SKIPPED",
           "SUCCEEDED", "TOTAL", "WAITING", "GraphNode", "Header", "Input", "NodeStatus",
           "Reads", "Stored", "WorkflowStatus", "pack", "span", "summary",
           "value_of"]


def pack(parts: Tuple[Any, ...]) -> bytes:
    """``parts``, tuple-packed."""
    packed: bytes = fdb.tuple.pack(parts)
    return packed


#: A node's states: pushed (``queued``: waiting in its structure, or running), and
#: how it ended.  A node with no state waits for its dependencies.
QUEUED, SUCCEEDED, FAILED, SKIPPED = "queued", "succeeded", "failed", "skipped"
WAITING = "waiting"
ENDED = frozenset((SUCCEEDED, FAILED, CANCELLED, SKIPPED))
#: The tally of nodes that ended, whatever way (``result`` watches it), and that of
#: all nodes (an open batch's grows as members are added; the header keeps the count at
#: creation).
DONE, TOTAL = "done", "total"
#: A workflow's stored status; ``succeeded`` and ``completed`` (some nodes failed,
#: and were ignored) are read from its tallies.
RUNNING = "running"
COMPLETED = "completed"


class Input(NamedTuple):
    """A dependency as its dependent sees it: how it ended (``succeeded``,
    ``failed``, ``cancelled``, ``skipped``), its result (None unless it succeeded),
    and what it failed with (``Type: message``), or None."""

    state: str
    result: Any
    error: Optional[str]


class NodeStatus(NamedTuple):
    """One node of :class:`WorkflowStatus`: its name, state (``waiting``,
    ``queued``, ``succeeded``, ``failed``, ``cancelled``, ``skipped``) and, while it
    waits, the names of the dependencies that have not ended."""

    name: str
    state: str
    waiting_on: Tuple[str, ...]


class GraphNode(NamedTuple):
    """One node of a workflow's graph (:meth:`fdbrecipes.workflow.Workflows.graph`):
    its number (the order it was added, from 0), name, state (as in
    :class:`NodeStatus`), the names of its dependencies (every one, ended or not),
    what it failed with (``Type: message``; None unless it failed, or was cancelled
    or skipped for a reason), and, for a node that is a job (not a sub-workflow), its
    job's id, the key (subspace prefix) of the structure it goes to, and its FairQueue
    group (None: none)."""

    number: int
    name: str
    state: str
    deps: Tuple[str, ...]
    error: Optional[str]
    job_id: Optional[bytes] = None
    target: Optional[bytes] = None
    group: Any = None


class WorkflowStatus(NamedTuple):
    """What became of a workflow, as of one read version.

    Attributes:
        id: its id.
        state: ``running``, ``succeeded`` (every node succeeded), ``completed``
            (every node ended, some failed under ``ignore`` or ``continue``),
            ``failed`` (a node failed under ``fail``) or ``cancelled``.
        total: its number of nodes.
        counts: nodes by state (``waiting``, ``queued``, ``succeeded``, ``failed``,
            ``cancelled``, ``skipped``).
        created_at, ended_at: wall-clock seconds; ``ended_at`` is set by a cancel or
            a failure only.
        why: what failed it, or None.
        nodes: the first ``limit`` nodes, in the order they were added (none in
            what ``list`` returns).
    """

    id: bytes
    state: str
    total: int
    counts: Dict[str, int]
    created_at: float
    ended_at: Optional[float]
    why: Optional[str]
    nodes: List[NodeStatus]


class Header(NamedTuple):
    """A workflow's header (see :class:`.._store_layout.WorkflowLayout`)."""

    created_at: float
    nodes: int
    status: str
    ended_at: Optional[float]
    why: Optional[str]

    def pack(self) -> bytes:
        return pack(tuple(self))

    @classmethod
    def unpack(cls, raw: bytes) -> Header:
        return cls(*fdb.tuple.unpack(raw))


class Reads:
    """The reads of a workflow store (its keys, ``keys``; the tag its nodes' job ids
    carry, ``tag``; the structures its nodes go to, ``targets``, by their subspace's
    key)."""

    keys: WorkflowLayout
    tag: bytes
    targets: Dict[bytes, Workable[Any]]

    def header(self, tr: Any, w: bytes) -> Gen[Optional[Header]]:
        """Workflow ``w``'s header, or None."""
        raw = yield from read(tr.get(self.keys.header(w)))
        return None if raw is None else Header.unpack(raw)

    def definitions(self, tr: Any, w: bytes,
                    numbers: Sequence[int]) -> Gen[List[Tuple[int, Stored]]]:
        """The definitions of nodes ``numbers`` of workflow ``w`` (each written with
        it): their blocks, read side by side (snapshot: they never change), one round
        trip."""
        return (yield from self.start_definitions(tr, w, numbers))

    def start_definitions(self, tr: Any, w: bytes,
                          numbers: Sequence[int]) -> Gen[List[Tuple[int, Stored]]]:
        """Start :meth:`definitions`; a generator collecting them."""
        return picked(read_blocks(tr, self.keys, w, numbers), numbers)

    def tallies(self, tr: Any, w: bytes) -> Gen[Dict[str, int]]:
        """Workflow ``w``'s nodes by state (one range read)."""
        r = self.keys.tallies.range((w,))
        return {self.keys.tallies.unpack(kv.key)[1]: read_le64(kv.value)
                for kv in (yield from Range(tr, r.start, r.stop).read())}

    def status(self, tr: Any, w: bytes, limit: int) -> Gen[Optional[WorkflowStatus]]:
        """What became of workflow ``w`` (None: no such workflow): its header and
        tallies, and its first ``limit`` nodes with their states and, for those
        waiting, their dependencies (range reads side by side: one round trip, two
        when nodes wait)."""
        keys = self.keys
        header_f = tr.get(keys.header(w))
        tallies = self.tallies(tr, w)
        states_r = keys.states.range((w,))
        specs = read_blocks(tr, keys, w, None, values=False, limit=limit)
        states_read = Range(tr, states_r.start, keys.state(w, limit))
        raw = yield from read(header_f)
        if raw is None:
            return None
        header = Header.unpack(raw)
        tally = yield from tallies
        records = {i: record.stored for i, record in (yield from specs).items() if i < limit}
        names = {i: stored.name for i, stored in records.items()}
        states = {keys.states.unpack(kv.key)[1]: fdb.tuple.unpack(kv.value)[0]
                  for kv in (yield from states_read.read())}
        for i, stored in records.items():
            if stored.root and i not in states:  # a root's push writes no state
                states[i] = QUEUED
        waiting = [i for i in names if i not in states]
        deps_reads = [(i, Range(tr, *span(keys.inputs.range((w, i))))) for i in waiting]
        nodes = []
        waits: Dict[int, Tuple[str, ...]] = {}
        for i, reading in deps_reads:
            open_deps = []
            for kv in (yield from reading.read()):
                for dep, _, dep_name in unpack_deps(kv.value):
                    if dep not in states or states[dep] == QUEUED:
                        open_deps.append(dep_name)
            waits[i] = tuple(open_deps)
        for i, name in sorted(names.items()):
            nodes.append(NodeStatus(name, states.get(i, WAITING), waits.get(i, ())))
        return summary(w, header, tally, nodes)

    def listing(self, tr: Any, limit: int, after: Optional[bytes]) -> Gen[List[WorkflowStatus]]:
        """The first ``limit`` workflows by id after ``after`` (None: from the first),
        each without its nodes: one range read of their headers, then each one's
        tallies, side by side (two round trips)."""
        keys = self.keys
        r = keys.headers.range()
        begin = r.start if after is None else keys.header(after) + b"\x00"
        headers = [(keys.headers.unpack(kv.key)[0], Header.unpack(kv.value))
                   for kv in (yield from Range(tr, begin, r.stop, limit).read())]
        tallies = [self.tallies(tr, w) for w, _ in headers]
        out = []
        for (w, header), tally in zip(headers, tallies):
            out.append(summary(w, header, (yield from tally), []))
        return out

    def graph(self, tr: Any, w: bytes, limit: int) -> Gen[Optional[List[GraphNode]]]:
        """Workflow ``w``'s first ``limit`` nodes with their states and dependencies
        (None: no such workflow): its header, and range reads of those nodes'
        definitions, states and dependencies, side by side (one round trip)."""
        keys = self.keys
        header_f = tr.get(keys.header(w))
        states_r, inputs_r = (space.range((w,)) for space in (keys.states, keys.inputs))
        specs = read_blocks(tr, keys, w, None, values=False, limit=limit)
        states_read = Range(tr, states_r.start, keys.state(w, limit))
        deps_read = Range(tr, inputs_r.start, bytes(keys.inputs.pack((w, limit))))
        if (yield from read(header_f)) is None:
            return None
        stored = {i: record.stored for i, record in (yield from specs).items()
                  if i < limit}
        states = {keys.states.unpack(kv.key)[1]: fdb.tuple.unpack(kv.value)
                  for kv in (yield from states_read.read())}
        deps: Dict[int, List[str]] = {}
        for kv in (yield from deps_read.read()):
            deps.setdefault(keys.inputs.unpack(kv.key)[1], []).extend(
                name for _, _, name in unpack_deps(kv.value))
        out = []
        for i, spec in sorted(stored.items()):
            state, _, error = states.get(i, (QUEUED if spec.root else WAITING, None, None))
            job = spec.target != SUB
            out.append(GraphNode(i, spec.name, state, tuple(deps.get(i, ())), error,
                                 node_id(self.tag, w, i) if job else None,
                                 spec.target if job else None,
                                 dict(spec.where).get("group") if job else None))
        return out

    def targets_of(self, tr: Any, w: bytes) -> Gen[Optional[List[bytes]]]:
        """The keys of the structures workflow ``w``'s nodes go to, in the order they
        are first named (None: no such workflow): its nodes' definitions, one range
        read."""
        keys = self.keys
        header_f = tr.get(keys.header(w))
        specs = read_blocks(tr, keys, w, None, values=False)
        if (yield from read(header_f)) is None:
            return None
        out: Dict[bytes, None] = {}
        for _, record in sorted((yield from specs).items()):
            out.setdefault(record.stored.target, None)
        return list(out)

    def inputs(self, tr: Any, w: bytes, i: int) -> Gen[Dict[str, Input]]:
        """Node ``i``'s dependencies, by name, as it sees them (those that failed
        under ``ignore`` left out): their states, results and definitions, read side
        by side (two round trips)."""
        keys = self.keys
        deps = [dep for kv in (yield from Range(tr, *span(keys.inputs.range((w, i)))).read())
                for dep in unpack_deps(kv.value)]
        reads = [(dep, policy, name, tr.get(keys.state(w, dep)),
                  Range(tr, *span(keys.results.range((w, dep)))))
                 for dep, policy, name in deps]
        specs = read_blocks(tr, keys, w, [dep for dep, _, _ in deps])
        records = yield from specs
        out = {}
        for dep, policy, name, state_f, chunks in reads:
            raw = yield from read(state_f)
            parts = yield from chunks.read()
            state, _, error = ((QUEUED if records[dep].stored.root else WAITING, None, None)
                               if raw is None else fdb.tuple.unpack(raw))
            if state != SUCCEEDED and policy == IGNORE:
                continue
            result = yield from self.result_of(tr, records[dep].stored, parts,
                                               state == SUCCEEDED)
            out[name] = Input(state, result, error)
        return out

    def result_of(self, tr: Any, stored: Stored, parts: List[Any],
                  succeeded: bool) -> Gen[Any]:
        """A node's result, from the chunks ``parts`` of it (decoded by its structure's
        codec, then its ``node_results``: a task's return value); a sub-workflow's:
        the results of its last nodes, by name, once it ``succeeded`` (None before,
        or if it failed)."""
        if stored.target == SUB:
            return (yield from self.sinks(tr, stored.value)) if succeeded else None
        if not parts:
            return None
        result = decode_value(b"".join(kv.value for kv in parts))
        ops: Any = self.targets.get(stored.target)
        if ops is None:
            return result
        if ops.values.codec is not None:
            result = ops.values.codec.decode(result)
        hook = getattr(ops, "node_results", None)  # a task's: its return value
        return result if hook is None else hook(result, value_of(ops, stored))

    def sinks(self, tr: Any, w: bytes) -> Gen[Optional[Dict[str, Any]]]:
        """The results of the nodes nothing depends on, by name (None for those that
        returned none; a sub-workflow's: its own, see :meth:`result_of`): range reads
        side by side; None if there is no such workflow (a sub-workflow that did not
        start)."""
        keys = self.keys
        header_f = tr.get(keys.header(w))
        edges_r, results_r = (s.range((w,)) for s in (keys.edges, keys.results))
        nodes = read_blocks(tr, keys, w, None)
        edges = Range(tr, edges_r.start, edges_r.stop)
        results = Range(tr, results_r.start, results_r.stop)
        records = yield from nodes
        specs = {i: record.stored for i, record in records.items()}
        inner = {keys.edges.unpack(kv.key)[1] for kv in (yield from edges.read())
                 if any(d != END for d, *_ in fdb.tuple.unpack(kv.value))}
        inner.update(i for i, record in records.items()
                     if record.edges and any(d != END for d, *_ in record.edges))
        if (yield from read(header_f)) is None:
            return None
        chunks: Dict[int, List[Any]] = {}
        for kv in (yield from results.read()):
            chunks.setdefault(keys.results.unpack(kv.key)[1], []).append(kv)
        out = {}
        for i, stored in sorted(specs.items()):
            if i in inner:
                continue
            succeeded = True
            if stored.target == SUB:  # its results, if it succeeded
                raw = yield from read(tr.get(keys.state(w, i)))
                succeeded = raw is not None and fdb.tuple.unpack(raw)[0] == SUCCEEDED
            out[stored.name] = yield from self.result_of(tr, stored, chunks.get(i, []),
                                                         succeeded)
        return out

    def is_over(self, tr: Any, w: bytes) -> Gen[Tuple[bool, Optional[float]]]:
        """Whether workflow ``w`` is over: stopped, or every node ended (a readiness
        check).

        Raises:
            LookupError: no such workflow.
        """
        header = yield from self.header(tr, w)
        if header is None:
            raise LookupError(f"no workflow {w!r}")
        if header.status != RUNNING:
            return True, None
        done_f, total_f = tr.get(self.keys.tally(w, DONE)), tr.get(self.keys.tally(w, TOTAL))
        done = read_le64((yield from read(done_f)))
        return done >= read_le64((yield from read(total_f))), None

    # -- pruning -------------------------------------------------------------------------


def summary(w: bytes, header: Header, tally: Dict[str, int],
            nodes: List[NodeStatus]) -> WorkflowStatus:
    """Workflow ``w``'s status from its header and tallies (``succeeded`` or
    ``completed`` once every node ended; its nodes: the ``total`` tally, which an
    open batch's adds grow), with ``nodes``."""
    counts = {state: tally.get(state, 0) for state in (QUEUED, SUCCEEDED, FAILED,
                                                       CANCELLED, SKIPPED)}
    done, total = tally.get(DONE, 0), tally.get(TOTAL, header.nodes)
    counts[WAITING] = total - done - counts[QUEUED]
    state = header.status
    if state == RUNNING and done >= total:
        # skipped by its ``when`` is no failure: a batch whose members all succeeded
        # (its on_failure skipped) succeeded
        state = COMPLETED if counts[FAILED] or counts[CANCELLED] else SUCCEEDED
    return WorkflowStatus(w, state, total, counts, header.created_at,
                          header.ended_at, header.why, nodes)


def value_of(ops: Any, stored: Stored) -> Any:
    """A stored node's value, as its structure's push takes it."""
    value = decode_value(stored.value)
    codec = ops.values.codec
    return value if codec is None else codec.decode(value)


def span(r: Any) -> Tuple[bytes, bytes]:
    """The begin and end of a subspace's range ``r``."""
    return r.start, r.stop


def picked(blocks: Gen[Dict[int, Record]],
           numbers: Sequence[int]) -> Gen[List[Tuple[int, Stored]]]:
    """The definitions of nodes ``numbers``, from their blocks (being read)."""
    records = yield from blocks
    out = []
    for i in numbers:
        record = records.get(i)
        assert record is not None, "a node's definition is written with its workflow"
        out.append((i, record.stored))
    return out
