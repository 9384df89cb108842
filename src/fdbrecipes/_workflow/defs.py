"""How a workflow's nodes are stored: their definitions and out-edges, many nodes to a
key (``WorkflowLayout``'s ``wn``), so that creating a workflow of ``n`` nodes writes
about ``n / BLOCK`` keys for them, not two or three per node, and reads a block at a
time.

Node ``i`` is in block ``i // BLOCK``.  A block is one key or more, its *segments*:
``(w, block, offset)``, each holding consecutive nodes from ``offset`` on (a new
segment begins where the one before would pass :data:`SEGMENT_BYTES`, and where an
open batch's add begins: it writes the nodes after the last, in new segments).  A
segment's value is two packed tuples, the first preceded by its length (4 bytes,
little-endian), so that a step reads a node's out-edges without decoding the
definitions (:func:`decode_edges`):

* its out-edges: the lists of its nodes' out-edges (each once), then an element a
  node: an index into them (:data:`NO_EDGES`; :data:`APART`, more than :data:`INLINE`
  dependents, in ``we`` keys of :data:`.graph.LEAF` each);
* its definitions: the *kinds* of its nodes (``(target, where, delay, time_limit,
  when, root)``, each once; ``root``: the node waits on nothing, see
  :attr:`Stored.root`), then three elements a node: its kind, its value (None: more
  than :data:`SMALL` bytes, in its own ``wv`` key) and its name (None: its number).

A node's dependencies (``wi`` keys, :data:`.graph.LEAF` a key, what ``status``,
``graph`` and ``inputs`` read) are flat too: three elements a dependency, its number,
its policy (its place in :data:`.graph.POLICIES`) and its name (None: its number)
(:func:`pack_deps`).
"""

from __future__ import annotations

import struct
from typing import (
    Any,
    Callable,
    Collection,
    Dict,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

import fdb.tuple

from .._fdb import Gen, Range, snap
from .._store_layout import WorkflowLayout
from .graph import LEAF, POLICIES, Spec

__all__ = ["APART", "BLOCK", "INLINE", "NO_EDGES", "SEGMENT_BYTES", "SMALL", "Block", "Edge",
           "EdgeReads", "Record", "Stored", "pack_deps", "read_blocks", "read_edges",
           "unpack_deps", "write_nodes"]

#: Nodes a block holds.
BLOCK = 16
#: Out-edges kept with a node at most (more: ``we`` keys).
INLINE = 8
#: Value bytes kept with a node at most (more: its own ``wv`` key).
SMALL = 1_000
#: Bytes past which a segment ends (well under the 100 kB a value may hold: a node adds
#: at most its name, its small value and its inline edges).
SEGMENT_BYTES = 50_000
#: A node's out-edges: none; in ``we`` keys.
NO_EDGES, APART = -1, -2
#: How a segment's value begins: the length of its out-edges part.
HEAD = struct.Struct("<I")

#: An out-edge: (dependent, the leaf of its counters the node counts in, policy, the
#: dependent's leaves).
Edge = Tuple[int, int, str, int]


class Stored(NamedTuple):
    """A node's stored definition: its structure's key (``target``), its value (its
    structure's codec, tuple-packed), ``where`` it goes, its delay and time limit, its
    name, when it runs, and whether it is a *root*: a node that waits on nothing (no
    dependencies, not an open batch's callback), pushed by the create (or its
    expanders, a batch's add, its sub-workflow's start) without a state key: its
    state is ``queued`` until it ends (see ``WorkflowLayout``'s ``ws``)."""

    target: bytes
    value: bytes
    where: Tuple[Tuple[str, Any], ...]
    delay: Optional[float]
    time_limit: Optional[float]
    name: str
    when: str
    root: bool = False


class Record(NamedTuple):
    """A node as a block holds it: its definition and its out-edges (None: apart, in
    ``we`` keys, see :func:`read_edges`)."""

    stored: Stored
    edges: Optional[Tuple[Edge, ...]]


class Segment:
    """A segment being written: its tables and nodes."""

    __slots__ = ("block", "edges", "flat", "kinds", "lists", "offset", "size")

    def __init__(self, block: int, offset: int) -> None:
        self.block, self.offset = block, offset
        self.kinds: Dict[Tuple[Any, ...], int] = {}
        self.lists: Dict[Tuple[Edge, ...], int] = {}
        self.flat: List[Any] = []
        self.edges: List[int] = []
        self.size = 0

    def packed(self) -> bytes:
        """Its value."""
        edges: bytes = fdb.tuple.pack((tuple(self.lists), *self.edges))
        defined: bytes = fdb.tuple.pack((tuple(self.kinds), *self.flat))
        return HEAD.pack(len(edges)) + edges + defined


def write_nodes(put: Callable[[bytes, bytes], None], keys: WorkflowLayout, w: bytes,
                first: int, specs: Sequence[Spec], dependents: Sequence[Sequence[Edge]],
                joins: Collection[int] = ()) -> None:
    """Write nodes ``first``, ``first + 1``... of workflow ``w``: ``specs`` and their
    out-edges ``dependents`` (``put``: how a key is set), in segments from node
    ``first`` on (see the module docstring); ``joins``: an open batch's callbacks
    (no root, though they may have no dependencies)."""
    segment: Optional[Segment] = None
    for k, spec in enumerate(specs):
        i = first + k
        block, offset = divmod(i, BLOCK)
        if segment is not None and (segment.block != block or segment.size > SEGMENT_BYTES):
            put(keys.segment(w, segment.block, segment.offset), segment.packed())
            segment = None
        if segment is None:
            segment = Segment(block, offset)
        kind = (spec.target, spec.where, spec.delay, spec.time_limit, spec.when,
                not spec.deps and i not in joins)
        known = segment.kinds.get(kind)
        if known is None:
            known = segment.kinds[kind] = len(segment.kinds)
            segment.size += len(spec.target) + len(repr(spec.where)) + 30
        out = dependents[k]
        if not out:
            edges = NO_EDGES
        elif len(out) > INLINE:
            edges = APART
            for c, at in enumerate(range(0, len(out), LEAF)):
                put(keys.edge(w, i, c), fdb.tuple.pack(tuple(out[at:at + LEAF])))
        else:
            listed = tuple(out)
            edges = segment.lists.get(listed, -3)
            if edges == -3:
                edges = segment.lists[listed] = len(segment.lists)
                segment.size += 20 * len(listed)
        value: Optional[bytes] = spec.value
        if len(spec.value) > SMALL:
            put(keys.value(w, i), spec.value)
            value = None
        else:
            segment.size += len(spec.value)
        name = spec.name
        segment.edges.append(edges)
        if name == str(i):
            segment.flat += (known, value, None)
        else:
            segment.flat += (known, value, name)
            segment.size += len(name)
        segment.size += 8
    if segment is not None:
        put(keys.segment(w, segment.block, segment.offset), segment.packed())


def edges_in(raw: bytes) -> List[Optional[Tuple[Edge, ...]]]:
    """The out-edges of the nodes of a segment's value ``raw``, in order (None:
    apart)."""
    (length,) = HEAD.unpack_from(raw)
    lists, *indexes = fdb.tuple.unpack(raw[HEAD.size:HEAD.size + length])
    return [() if e == NO_EDGES else (None if e == APART else lists[e]) for e in indexes]


def first_of(keys: WorkflowLayout, key: bytes) -> int:
    """The first node of the segment at ``key``."""
    _, block, offset = keys.nodes.unpack(key)
    first: int = block * BLOCK + offset
    return first


def decode(keys: WorkflowLayout, kvs: Iterable[Any], values: Dict[int, bytes],
           out: Dict[int, Record]) -> None:
    """Add the nodes of the segments ``kvs`` to ``out`` (their large values from
    ``values``, by node)."""
    for kv in kvs:
        i = first_of(keys, kv.key)
        (length,) = HEAD.unpack_from(kv.value)
        kinds, *parts = fdb.tuple.unpack(kv.value[HEAD.size + length:])
        for at, edges in zip(range(0, len(parts), 3), edges_in(kv.value)):
            kind, value, name = parts[at:at + 3]
            target, where, delay, time_limit, when, root = kinds[kind]
            stored = Stored(target, values[i] if value is None else value, where, delay,
                            time_limit, str(i) if name is None else name, when, root)
            out[i] = Record(stored, edges)
            i += 1


def decode_edges(keys: WorkflowLayout, kvs: Iterable[Any],
                 out: Dict[int, Optional[Tuple[Edge, ...]]]) -> None:
    """Add the out-edges of the nodes of the segments ``kvs`` to ``out`` (None:
    apart), without decoding their definitions."""
    for kv in kvs:
        out.update(enumerate(edges_in(kv.value), first_of(keys, kv.key)))


def runs(numbers: Iterable[int]) -> List[Tuple[int, int]]:
    """The blocks of nodes ``numbers``, as runs of consecutive blocks ``(first,
    last)``."""
    out: List[Tuple[int, int]] = []
    for block in sorted({i // BLOCK for i in numbers}):
        if out and out[-1][1] == block - 1:
            out[-1] = (out[-1][0], block)
        else:
            out.append((block, block))
    return out


def read_blocks(tr: Any, keys: WorkflowLayout, w: bytes, numbers: Optional[Iterable[int]],
                values: bool = True, limit: Optional[int] = None) -> Gen[Dict[int, Record]]:
    """Start reading the blocks of nodes ``numbers`` of workflow ``w`` (None: every
    node; ``limit``: the first ``limit`` nodes), snapshot (a node's record never
    changes), with their large values unless ``values`` is False (then a large value
    reads as b""); a generator collecting each node's record, by number (those of
    the blocks read: more than ``numbers``).  A range read per run of consecutive
    blocks (two with values), all started at once."""
    reader = snap(tr)
    spans: List[Tuple[bytes, bytes, bytes, bytes]] = []
    if numbers is None:
        whole = keys.nodes.range((w,))
        big = keys.values.range((w,))
        if limit is None:
            spans.append((whole.start, whole.stop, big.start, big.stop))
        elif limit > 0:
            last = (limit - 1) // BLOCK
            spans.append((whole.start, bytes(keys.nodes.range((w, last)).stop),
                          big.start, keys.value(w, (last + 1) * BLOCK)))
    else:
        for first, last in runs(numbers):
            spans.append((bytes(keys.nodes.pack((w, first))),
                          bytes(keys.nodes.range((w, last)).stop),
                          keys.value(w, first * BLOCK), keys.value(w, (last + 1) * BLOCK)))
    reads = [(Range(reader, begin, end),
              Range(reader, big_begin, big_end) if values else None)
             for begin, end, big_begin, big_end in spans]
    return collect(keys, reads, values)


def collect(keys: WorkflowLayout, reads: List[Tuple[Range, Optional[Range]]],
            values: bool) -> Gen[Dict[int, Record]]:
    """What :func:`read_blocks` started, collected."""
    out: Dict[int, Record] = {}
    for segments, big in reads:
        kvs = yield from segments.read()
        large: Dict[int, bytes] = {}
        if big is not None:
            large = {keys.values.unpack(kv.key)[1]: kv.value for kv in (yield from big.read())}
        decode(keys, kvs, large if values else DefaultEmpty(), out)
    return out


class DefaultEmpty(Dict[int, bytes]):
    """Large values not read: each reads as b""."""

    def __missing__(self, key: int) -> bytes:
        return b""


class Block:
    """A block's segments being read, and the out-edges of its nodes once decoded."""

    __slots__ = ("inline", "segments")

    def __init__(self, segments: Range) -> None:
        self.segments = segments
        self.inline: Optional[Dict[int, Optional[Tuple[Edge, ...]]]] = None

    def edges(self, keys: WorkflowLayout) -> Gen[Dict[int, Optional[Tuple[Edge, ...]]]]:
        """Its nodes' out-edges (None: apart), read and decoded once."""
        if self.inline is None:
            inline: Dict[int, Optional[Tuple[Edge, ...]]] = {}
            decode_edges(keys, (yield from self.segments.read()), inline)
            self.inline = inline
        return self.inline


class EdgeReads:
    """Nodes' out-edges read in one transaction (snapshot: they never change, but for
    an open batch's members, written with them): each block read once, however many
    of its nodes are asked for (a worker acks neighbours together), and decoded once;
    a node's ``we`` keys read only when its block says its edges are apart (more than
    :data:`INLINE`: one more round trip for such a node, none for the others)."""

    __slots__ = ("blocks", "keys", "reader")

    def __init__(self, tr: Any, keys: WorkflowLayout) -> None:
        self.keys = keys
        self.reader = snap(tr)
        self.blocks: Dict[Tuple[bytes, int], Block] = {}

    def start(self, w: bytes, i: int) -> Gen[List[Edge]]:
        """Start reading node ``i``'s out-edges (its block, unless started already);
        a generator collecting them."""
        at = (w, i // BLOCK)
        block = self.blocks.get(at)
        if block is None:
            r = self.keys.nodes.range(at)
            block = self.blocks[at] = Block(Range(self.reader, r.start, r.stop))
        return self.collect(block, w, i)

    def collect(self, block: Block, w: bytes, i: int) -> Gen[List[Edge]]:
        """What :meth:`start` started, collected."""
        edges = (yield from block.edges(self.keys)).get(i)
        if edges is not None:
            return list(edges)
        r = self.keys.edges.range((w, i))
        out: List[Edge] = []
        for kv in (yield from Range(self.reader, r.start, r.stop).read()):
            out.extend(fdb.tuple.unpack(kv.value))
        return out


def read_edges(tr: Any, keys: WorkflowLayout, w: bytes, i: int) -> Gen[List[Edge]]:
    """Start reading node ``i``'s out-edges (see :class:`EdgeReads`); a generator
    collecting them."""
    return EdgeReads(tr, keys).start(w, i)


def pack_deps(deps: Iterable[Tuple[int, str, str]]) -> bytes:
    """The value of a ``wi`` key: dependencies ``(number, policy, name)``, flat."""
    flat: List[Any] = []
    for dep, policy, name in deps:
        flat += (dep, POLICIES.index(policy), None if name == str(dep) else name)
    packed: bytes = fdb.tuple.pack(tuple(flat))
    return packed


def unpack_deps(raw: bytes) -> List[Tuple[int, str, str]]:
    """What :func:`pack_deps` packed."""
    parts = fdb.tuple.unpack(raw)
    return [(parts[at], POLICIES[parts[at + 1]], str(parts[at]) if parts[at + 2] is None
             else parts[at + 2]) for at in range(0, len(parts), 3)]
