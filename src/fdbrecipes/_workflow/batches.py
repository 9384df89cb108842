"""An open batch's transactions: members added over time, and the close.

An open batch is a workflow whose callbacks (its *joins*, :attr:`.graph.Graph.joins`)
wait for members added later.  Each join is counted through its root counter
(:data:`.._store_layout.ROOT`), which holds its open leaves plus one for the batch
itself while it is open.  An add writes its members as nodes (no dependencies: pushed
at once), each counted in a new leaf of every join (:data:`.graph.LEAF` members a
leaf), and adds the new leaves to each join's root; the close takes the batch's one
away.  The root is read with a conflict by whatever decrements it (the end of a member
that closes a leaf, or the close), so exactly one transaction reads it at 0, and that
one pushes the callbacks: the close, if every member had ended by then, else the end
of the last member.  While the batch is open its roots never reach 0, whatever members
end; the add and the close both read the batch's open key with a conflict, so no
member is added after the close, and the add's ADD to a root conflicts with the end
that reads it.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import fdb.tuple

from .._fdb import Gen, le64, read, read_le64
from .._store_layout import ROOT
from .defs import Edge, Stored, pack_deps, write_nodes
from .graph import CONTINUE, LEAF, OPEN, Spec, node_id
from .reading import RUNNING, TOTAL, Header, pack

__all__ = ["Added", "Batches"]


class Added(NamedTuple):
    """What an add to an open batch did: ``ids``, its members' job ids; ``closed``:
    nothing written, the batch was closed (or is over, or was never open);
    ``missing``: nothing written, no such workflow."""

    ids: List[bytes]
    closed: bool = False
    missing: bool = False


class Batches:
    """The adds and the close of the open batches of a store (``store``: its
    :class:`.engine.Store`)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def add(self, tr: Any, attempt: Any, w: bytes, specs: Sequence[Spec]) -> Gen[Added]:
        """Add ``specs`` (nodes without dependencies) to open batch ``w``: each a node
        numbered after the last, counted in a new leaf of each join, and pushed.
        Reads the header and the open key with conflicts, and the count of nodes, side
        by side (one round trip), then pushes (see :meth:`.engine.Store.push`)."""
        store, keys = self.store, self.store.keys
        header_f, open_f = tr.get(keys.header(w)), tr.get(keys.opened(w))
        total_f = tr.get(keys.tally(w, TOTAL))
        raw = yield from read(header_f)
        listed = yield from read(open_f)
        first = read_le64((yield from read(total_f)))
        attempt.idle = raw is None or listed is None or Header.unpack(raw).status != RUNNING
        if raw is None:
            return Added([], missing=True)
        if attempt.idle:
            return Added([], closed=True)
        joins: Tuple[Tuple[int, int], ...] = fdb.tuple.unpack(listed)
        leaves = -(-len(specs) // LEAF)
        numbers = range(first, first + len(specs))
        specs = [spec._replace(name=str(i)) for i, spec in zip(numbers, specs)]
        write_nodes(tr.set, keys, w, first, specs, self.edges(joins, len(specs)))
        nodes = [(i, Stored(*spec[:7], root=True)) for i, spec in zip(numbers, specs)]
        for d, at in joins:
            for k in range(leaves):
                members = numbers[k * LEAF:(k + 1) * LEAF]
                tr.set(keys.dep(w, d, at + k), pack_deps((i, CONTINUE, str(i))
                                                         for i in members))
                tr.set(keys.counter(w, d, at + k), le64(len(members)))
            tr.add(keys.counter(w, d, ROOT), le64(leaves))
        tr.set(keys.opened(w), pack(tuple((d, at + leaves) for d, at in joins)))
        tr.add(keys.tally(w, TOTAL), le64(len(specs)))
        yield from store.push(tr, w, self.source(first), nodes)
        return Added([node_id(store.tag, w, i) for i in numbers])

    @staticmethod
    def source(first: int) -> int:
        """The source (see :meth:`.engine.Store.push`) of the pushes of an add whose
        members begin at node ``first``, or of the close of a batch of ``first``
        nodes: ``-1 - first``, distinct from a create's (-1: a batch has a callback,
        so ``first`` is 1 at least), from a node's (its number) and from each other
        (an add's ``first`` is below the count of nodes after it; none follows the
        close), so that no two of their expanders share an id or a chunk's key."""
        return -1 - first

    @staticmethod
    def edges(joins: Sequence[Tuple[int, int]], members: int) -> List[List[Edge]]:
        """Each of ``members`` new members' dependents: every join, in the leaf the
        member is counted in (its place among them, :data:`.graph.LEAF` a leaf, after
        the join's leaves so far)."""
        return [[(d, at + k // LEAF, CONTINUE, OPEN) for d, at in joins]
                for k in range(members)]

    def close(self, tr: Any, attempt: Any, w: bytes) -> Gen[Optional[bool]]:
        """Close open batch ``w``: no member is added after; each join's root loses
        the batch's count, and the joins it brings to 0 (every member ended already)
        are pushed now.  None: no such workflow; False: it was closed or over already.
        Reads the header and the open key with conflicts, and the count of nodes, side
        by side (one round trip), then the roots with conflicts (one), then what
        pushing the callbacks reads."""
        store, keys = self.store, self.store.keys
        header_f, open_f = tr.get(keys.header(w)), tr.get(keys.opened(w))
        total_f = tr.get(keys.tally(w, TOTAL))  # its pushes' source: see :meth:`source`
        raw = yield from read(header_f)
        listed = yield from read(open_f)
        attempt.idle = raw is None or listed is None
        if raw is None:
            return None
        if listed is None:
            return False
        tr.clear(keys.opened(w))
        if Header.unpack(raw).status != RUNNING:
            return False
        roots = []
        for d, _ in fdb.tuple.unpack(listed):
            key = keys.counter(w, d, ROOT)
            tr.add(key, le64(-1))
            roots.append((d, tr.get(key)))
        freed = []
        for d, future in roots:
            if read_le64((yield from read(future))) == 0:
                freed.append(d)
        work: List[Tuple[int, str, List[Tuple[int, int, str, int]]]] = []
        yield from store.free(tr, w, self.source(read_le64((yield from read(total_f)))),
                              freed, work)
        yield from store.cascade(tr, w, raw, work)
        return True

