"""The key layout of the stores, written once: a schedule store, a limit store, a
workflow store (the structures' keys are in :mod:`._layout`).

docs/data-model.md draws these; every key a store writes is named here.  A store lives
in one subspace ``S`` and never writes outside it.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional, Tuple

import fdb.tuple
from fdb.subspace_impl import Subspace

from ._layout import Item

__all__ = ["LIMITS", "ROOT", "SCHEDULES", "WORKFLOWS", "LimitLayout",
           "WORKFLOW_ID_HEAD", "ScheduleLayout", "WorkflowLayout", "forgotten_at_once",
           "node_parts", "pack_index", "unpacked_node_id", "workflow_tag"]


#: The first element of every key of a schedule store (its change counter's), which no
#: structure uses: the operator commands recognise a store by it.
SCHEDULES = "sv"


class ScheduleLayout:
    """Keys of a schedule store (:class:`fdbrecipes.Schedules`)::

        S/"sv"          = int64       the change counter (atomic ADD, only growing): every
                                      add, change, pause, resume, run-now and remove
                                      adds 1; workers carrying the store watch it
        S/"sd"/(name,)  = definition  (1, cron, tz, every, target, where, value, catch
                                      up, grace, jitter, created_at), packed (see
                                      _schedules.records)
        S/"ss"/(name,)  = state       (1, revision, paused_at, since, last slot fired,
                                      run-now requests, latest fires), packed
        S/"c"/(process, thread, generation) = receipt  receipt slots (see _receipts)

    A definition changes only when the schedule is added or changed; its state at each
    fire too (a fire reads it with a conflict, so two workers never fire one slot, and
    a pause or a change conflicts with a fire in flight).  Times are wall-clock
    seconds.
    """

    __slots__ = ("definitions", "states", "subspace", "version")

    def __init__(self, subspace: Subspace) -> None:
        self.subspace = subspace
        self.version = bytes(subspace.pack((SCHEDULES,)))
        self.definitions = subspace["sd"]
        self.states = subspace["ss"]

    def definition(self, name: str) -> bytes:
        """The key of schedule ``name``'s definition."""
        return bytes(self.definitions.pack((name,)))

    def state(self, name: str) -> bytes:
        """The key of schedule ``name``'s state."""
        return bytes(self.states.pack((name,)))


#: The first element of every key of a limit store's change counter, which no structure
#: uses: the operator commands recognise a store by it.
LIMITS = "lv"


#: The first element of a workflow store's headers, which no structure uses: the
#: operator commands recognise a store by its first header.
WORKFLOWS = "wh"


class LimitLayout:
    """Keys of a limit store (:class:`fdbrecipes.Limits`), shared by every structure
    made with ``limits=`` uses of it::

        L/"lv"                      = int64       the change counter (atomic ADD): every
                                                  set and delete adds 1
        L/"ld"/(name,)              = (kind, n, per_seconds)  a limit's definition:
                                                  ("concurrency", n, None) or
                                                  ("rate", n, seconds), packed
        L/"lr"/(name, key, slot)    = (deadline, prefix, last)  slots ``slot`` to
                                                  ``last`` (0 to n - 1) of a concurrency
                                                  limit, held by the leases of one claim
                                                  until their deadline (a clock reading):
                                                  a run of them, never across a multiple
                                                  of ``slots.RUN_ALIGN``
                                   = (deadline, hold id)  slot ``slot`` alone, held by a
                                                  lease whose tags are a key of its own
        L/"ls"/(name, key, start, hold id) = (cost,)  a start counted by a rate limit
                                                  (``start``: the claim's clock reading)
        L/"lt"/(claim prefix,)      = (deadline, ((name, key, cost, kind), ...),
                                                  (number, length, slot, ...)), ...)
                                                  what the leases of one claim hold, in
                                                  runs (``slots.pack_batch``)
        L/"lt"/(hold id,)           = ((name, key, cost, kind, slot), ...)  what a
                                                  lease holds, once others of its
                                                  claim ended
        L/"lw"/(name, key, parked_at, prefix, item, deadline) = '' or (mark, counter)
                                                  a job parked until a slot of (name,
                                                  key) frees: its structure's (shard's)
                                                  raw prefix, its item tuple and the
                                                  deadline of the DELAY hold it waits
                                                  under there; the value, what moving it
                                                  back writes for its structure too
                                                  (``slots.Comeback``: a FairQueue's)

    ``key`` is the limit's key for the job (any tuple-encodable value), None for a
    global limit.  Times are clock readings (read versions, about 1,000,000 per second).
    """

    __slots__ = ("definitions", "parked", "running", "starts", "subspace", "tags", "version")

    def __init__(self, subspace: Subspace) -> None:
        self.subspace = subspace
        self.version = bytes(subspace.pack((LIMITS,)))
        self.definitions = subspace["ld"]
        self.running = subspace["lr"]
        self.starts = subspace["ls"]
        self.tags = subspace["lt"]
        self.parked = subspace["lw"]

    def definition(self, name: str) -> bytes:
        """The key of limit ``name``'s definition."""
        return bytes(self.definitions.pack((name,)))

    def running_key(self, name: str, key: Any, slot: int) -> bytes:
        """The key of slot ``slot`` of (name, key) (of the run beginning there)."""
        return bytes(self.running.pack((name, key, slot)))

    def start_key(self, name: str, key: Any, start: int, hold_id: bytes) -> bytes:
        """The key of the start of lease ``hold_id`` in rate limit (name, key)."""
        return bytes(self.starts.pack((name, key, start, hold_id)))

    def tags_key(self, hold_id: bytes) -> bytes:
        """The key of what lease ``hold_id`` holds (or, given the prefix of a claim's
        lease ids, what the leases of that claim hold)."""
        return bytes(self.tags.pack((hold_id,)))

    def parked_key(self, name: str, key: Any, parked_at: int, prefix: bytes, item: Item,
                   deadline: int) -> bytes:
        """The key naming a job parked under (name, key)."""
        return bytes(self.parked.pack((name, key, parked_at, prefix, item, deadline)))


#: The leaf of a node's counters that counts its leaves still open (a node with more
#: dependencies than one leaf holds; see :class:`WorkflowLayout`).
ROOT = -1
#: How the job ids a workflow store makes begin (``fdb.tuple.pack(("fdbwf",))``: see
#: ``_workflow/graph.py``, which makes them).
WORKFLOW_ID_HEAD = b"\x02fdbwf\x00"


def node_parts(id_: Optional[bytes]) -> Optional[Tuple[Any, ...]]:
    """The parts ``(mark, tag, workflow, node[, chunk])`` of job id ``id_`` if it is a
    workflow's node's (or expander's); None for any other id (one prefix check for
    most; a node's id, asked about several times in its ack, is unpacked once: see
    :func:`unpacked_node_id`)."""
    if id_ is None or not id_.startswith(WORKFLOW_ID_HEAD):
        return None
    return unpacked_node_id(bytes(id_))


@functools.lru_cache(maxsize=4096)
def unpacked_node_id(id_: bytes) -> Optional[Tuple[Any, ...]]:
    """:func:`node_parts` of an id that begins as a node's, unpacked (remembered for
    the last few thousand ids: a worker's ack asks about each of its jobs' ids in
    several places)."""
    try:
        parts: Tuple[Any, ...] = fdb.tuple.unpack(id_)
    except (ValueError, TypeError):
        return None
    if (len(parts) not in (4, 5) or type(parts[1]) is not bytes or type(parts[2]) is not bytes
            or any(type(p) is not int for p in parts[3:])):
        return None
    return parts


def pack_index(i: int) -> bytes:
    """``fdb.tuple.pack((i,))`` of an int ``0 <= i < 2 ** 64`` (its tuple encoding: a
    type code for its length in bytes, then those bytes, big-endian), without the
    tuple layer's generic encoder: a key that ends in a node's number is a prefix
    packed once and this."""
    n = (i.bit_length() + 7) // 8
    return bytes((0x14 + n,)) + i.to_bytes(n, "big")


def forgotten_at_once(id_: bytes) -> bool:
    """Whether ``id_`` is a workflow node's job id (:func:`node_parts` of four; not an
    expander's, of five): a workflow pushes it once, when its counters (or its
    create) say so, in a push that makes it (never checked against a remembered id: a
    retried transaction reads those counters again), so nothing needs it once its job
    has left: its key is cleared then, not retired (two writes, and a collection
    later)."""
    parts = node_parts(id_)
    return parts is not None and len(parts) == 4


def workflow_tag(id_: Optional[bytes]) -> Optional[bytes]:
    """The tag of the workflow store whose node (or expander) job ``id_`` is; None for
    any other id."""
    parts = node_parts(id_)
    return None if parts is None else bytes(parts[1])


#: Keys a :class:`WorkflowLayout` remembers at most (see ``WorkflowLayout.known``).
KNOWN = 4_096


class WorkflowLayout:
    """Keys of a workflow store (:class:`fdbrecipes.workflow.Workflows`); ``w`` is a
    workflow's id, ``i`` and ``d`` its nodes' numbers (in the order they were added)::

        S/"wh"/(w,)          = header     (created_at, nodes, status, ended_at, why),
                                          packed (nodes: at creation); status
                                          "running", "failed", "cancelled"; read with
                                          a conflict by every step, written by a
                                          cancel or a failure only
        S/"wn"/(w, b, s)     = segment    nodes b * 16 + s... (block b, from offset
                                          s): (kinds, edge lists, then kind, edges,
                                          value, name a node), packed: each node's
                                          definition (target, value, where, delay,
                                          time_limit, name, when) and its out-edges
                                          when it has 8 at most (see _workflow.defs)
        S/"wv"/(w, i)        = bytes      i's value, when over 1,000 bytes
        S/"we"/(w, i, c)     = edges      i's dependents when it has more than 8,
                                          128 a key (c: 0, 1...): ((dependent, leaf i
                                          counts in, policy, the dependent's
                                          leaves), ...), packed
        S/"wi"/(w, d, leaf)  = deps       d's dependencies counted in that leaf:
                                          ((node, policy, name), ...), packed
        S/"wc"/(w, d, leaf)  = int64      what d still waits for in that leaf (ROOT:
                                          its leaves still open; d -1: a sub-workflow's
                                          end); ADD, read with a conflict by the step
                                          that decrements it
        S/"wf"/(w, d)        = int64      d's dependencies that did not succeed (ADD)
        S/"ws"/(w, i)        = state      (state, at, error), packed: "queued" once
                                          pushed, then "succeeded", "failed",
                                          "cancelled" or "skipped"; absent: waiting,
                                          or, for a root (a node that waits on
                                          nothing: no dependencies, no batch's
                                          callback; its segment says), queued: its
                                          push (or hand-off to an expander) writes
                                          no state, only the tally
        S/"wr"/(w, i, n)     = bytes      chunk n of i's result (its structure's codec,
                                          tuple-packed)
        S/"wp"/(w, i, c)     = nodes      chunk c of the nodes i freed (-1: the first
                                          nodes; -1 - n: those of the batch's add that
                                          began at node n, or of its close, n its
                                          nodes then), packed, until its
                                          expander's ack pushes them
        S/"wt"/(w, state)    = int64      nodes by state (ADD; "done": every node that
                                          ended, what ``result`` watches; "total":
                                          every node, which an open batch's adds grow)
        S/"wo"/(w,)          = open       an open batch's ((callback, its leaves so
                                          far), ...), packed; present while members
                                          may be added, read with a conflict by an
                                          add and by the close, which clears it
        S/"wk"/(w, i)        = sub        node i of w is the sub-workflow of that id
        S/"wk"/(sub,)        = link       (w, i, nodes): sub's parent, its node there,
                                          its number of nodes
        S/"wk"/(sub, "r", c) = nodes      chunk c of sub's first nodes, packed: what
                                          its start pushes (its header is written then)
        S/"wx"/(at, w)       = ''         when to look at w for pruning
        S/"c"/(...)          = receipt    receipt slots (see _receipts)
    """

    __slots__ = ("chunks", "counters", "edges", "expiry", "failures", "headers", "inputs",
                 "kin", "known", "nodes", "opens", "results", "states", "subspace",
                 "tallies", "values")

    def __init__(self, subspace: Subspace) -> None:
        self.subspace = subspace
        self.headers = subspace[WORKFLOWS]
        self.nodes = subspace["wn"]
        self.values = subspace["wv"]
        self.edges = subspace["we"]
        self.inputs = subspace["wi"]
        self.counters = subspace["wc"]
        self.failures = subspace["wf"]
        self.states = subspace["ws"]
        self.results = subspace["wr"]
        self.tallies = subspace["wt"]
        self.chunks = subspace["wp"]
        self.expiry = subspace["wx"]
        self.opens = subspace["wo"]
        self.kin = subspace["wk"]
        #: keys packed already, by what they are made of (a workflow's tallies and the
        #: head of its states' keys: each node's step writes them; at most
        #: :data:`KNOWN` kept)
        self.known: Dict[Tuple[Any, ...], bytes] = {}

    def header(self, w: bytes) -> bytes:
        """The key of workflow ``w``'s header."""
        return bytes(self.headers.pack((w,)))

    def segment(self, w: bytes, block: int, offset: int) -> bytes:
        """The key of the segment of block ``block`` of nodes from ``offset`` on."""
        return bytes(self.nodes.pack((w, block, offset)))

    def value(self, w: bytes, i: int) -> bytes:
        """The key of node ``i``'s value, when too large for its segment."""
        return bytes(self.values.pack((w, i)))

    def edge(self, w: bytes, i: int, c: int) -> bytes:
        """The key of chunk ``c`` of ``i``'s dependents."""
        return bytes(self.edges.pack((w, i, c)))

    def dep(self, w: bytes, d: int, leaf: int) -> bytes:
        """The key of ``d``'s dependencies counted in ``leaf``."""
        return bytes(self.inputs.pack((w, d, leaf)))

    def counter(self, w: bytes, d: int, leaf: int) -> bytes:
        """The key of ``d``'s counter ``leaf`` (:data:`ROOT`: its open leaves)."""
        return bytes(self.counters.pack((w, d, leaf)))

    def failed(self, w: bytes, d: int) -> bytes:
        """The key counting ``d``'s dependencies that did not succeed."""
        return bytes(self.failures.pack((w, d)))

    def state(self, w: bytes, i: int) -> bytes:
        """The key of node ``i``'s state."""
        return self.packed("ws", w) + pack_index(i)

    def packed(self, space: str, *parts: Any) -> bytes:
        """``parts`` packed under ``space`` (``"ws"``, or ``"wt"``), remembered."""
        key = self.known.get((space, *parts))
        if key is None:
            if len(self.known) >= KNOWN:
                self.known.clear()
            sub = self.states if space == "ws" else self.tallies
            key = self.known[(space, *parts)] = bytes(sub.pack(parts))
        return key

    def chunk(self, w: bytes, i: int, n: int) -> bytes:
        """The key of chunk ``n`` of node ``i``'s result."""
        return bytes(self.results.pack((w, i, n)))

    def pending(self, w: bytes, i: int, c: int) -> bytes:
        """The key of chunk ``c`` of the nodes ``i`` freed, not pushed yet."""
        return bytes(self.chunks.pack((w, i, c)))

    def tally(self, w: bytes, state: str) -> bytes:
        """The key counting ``w``'s nodes in ``state``."""
        return self.packed("wt", w, state)

    def opened(self, w: bytes) -> bytes:
        """The key of open batch ``w``'s callbacks and leaves (present while open)."""
        return bytes(self.opens.pack((w,)))

    def child(self, w: bytes, i: int) -> bytes:
        """The key naming the sub-workflow that node ``i`` of ``w`` is."""
        return bytes(self.kin.pack((w, i)))

    def link(self, sub: bytes) -> bytes:
        """The key of sub-workflow ``sub``'s parent and node there."""
        return bytes(self.kin.pack((sub,)))

    def firsts(self, sub: bytes, c: int) -> bytes:
        """The key of chunk ``c`` of sub-workflow ``sub``'s first nodes."""
        return bytes(self.kin.pack((sub, "r", c)))

    def due(self, at: float, w: bytes) -> bytes:
        """The key of ``w``'s entry in the pruning index."""
        return bytes(self.expiry.pack((at, w)))

    def ranges(self, w: bytes) -> List[Tuple[bytes, bytes]]:
        """Every key range of workflow ``w`` (its pruning entry apart)."""
        out = []
        for space in (self.headers, self.nodes, self.values, self.edges, self.inputs,
                      self.counters, self.failures, self.states, self.results,
                      self.tallies, self.chunks, self.opens, self.kin):
            r = space.range((w,))  # the keys under (w,): the header's own key is (w,)
            out.append((bytes(space.pack((w,))), bytes(r.stop)))
        return out
