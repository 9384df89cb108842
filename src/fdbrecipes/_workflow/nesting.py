"""Sub-workflows: a node that is a workflow of its own (see
:meth:`.graph.Graph.add_workflow`).

A sub-workflow is written with its parent, under its own id, but for its header: its
definitions and counters, a link to its parent's node (``WorkflowLayout.link``) and the
list of its first nodes.  When the parent frees the node, the same transaction starts
the sub-workflow (:func:`start`: its header written, its first nodes pushed, the node
queued).  Its last nodes (those nothing in it depends on) count down its end
(:data:`.graph.END`) as any dependent, with the policy ``continue``: the transaction
whose count frees the end is the one that ends the last of its nodes, and it ends the
parent's node as succeeded (:func:`ended`), in the parent's step.  A sub-workflow that
stops (a ``fail``, or a cancel) ends the parent's node as failed or cancelled in the
transaction of the stop (:func:`stopped`); a parent that stops stops its running
sub-workflows.  A sub-workflow's result is the results of its last nodes, read by its
dependents' ``inputs`` from its own keys.
"""

from __future__ import annotations

import time
from typing import Any, List, Optional, Tuple

import fdb.tuple

from .._fdb import Gen, Range, le64, read
from .._records.records import CANCELLED
from .._store_layout import ROOT
from .graph import END, Plan
from .reading import FAILED, QUEUED, RUNNING, SUCCEEDED, TOTAL, Header, pack

__all__ = ["ROOTS_CHUNK", "children", "ended", "start", "stopped", "write"]

#: First nodes listed under one key of a sub-workflow (int ids: far below the 100 kB
#: a value may hold).
ROOTS_CHUNK = 5_000


def write(store: Any, fresh: Any, w: bytes, plan: Plan) -> None:
    """Write the sub-workflows of ``plan`` (workflow ``w``), and theirs, not started:
    their definitions (see ``Store.define``), the counters of their ends, the links
    both ways and the lists of their first nodes."""
    keys = store.keys
    for i, sub in plan.subs:
        roots = store.define(fresh, sub)
        for leaf, count in sub.end:
            fresh.set(keys.counter(sub.id, END, leaf), le64(count))
        if len(sub.end) > 1:
            fresh.set(keys.counter(sub.id, END, ROOT), le64(len(sub.end)))
        fresh.set(keys.child(w, i), sub.id)
        fresh.set(keys.link(sub.id), pack((w, i, len(sub.specs))))
        firsts = [r for r, _ in roots]
        for c, at in enumerate(range(0, len(firsts), ROOTS_CHUNK)):
            fresh.set(keys.firsts(sub.id, c), pack(tuple(firsts[at:at + ROOTS_CHUNK])))
        write(store, fresh, sub.id, sub)


def start(store: Any, tr: Any, w: bytes, i: int, sub: bytes) -> Gen[None]:
    """Node ``i`` of ``w`` (sub-workflow ``sub``) was freed: mark it queued, write
    the sub-workflow's header and push its first nodes.  Reads its link and its list
    of first nodes side by side (one round trip), then their definitions (one), then
    the pushes."""
    keys = store.keys
    tr.set(keys.state(w, i), pack((QUEUED, time.time(), None)))
    tr.add(keys.tally(w, QUEUED), le64(1))
    link_f = tr.get(keys.link(sub))
    r = keys.kin.range((sub, "r"))
    listed = Range(tr, r.start, r.stop)
    raw = yield from read(link_f)
    assert raw is not None, "a sub-workflow's link is written with it"
    nodes = fdb.tuple.unpack(raw)[2]
    now = time.time()
    tr.set(keys.header(sub), Header(now, nodes, RUNNING, None, None).pack())
    tr.set(keys.tally(sub, TOTAL), le64(nodes))
    firsts = [n for kv in (yield from listed.read()) for n in fdb.tuple.unpack(kv.value)]
    tr.clear_range(r.start, r.stop)
    yield from store.push(tr, sub, -1, (yield from store.definitions(tr, sub, firsts)))


def parent_of(store: Any, tr: Any, sub: bytes) -> Gen[Optional[Tuple[bytes, int]]]:
    """The parent workflow and node of ``sub``, or None (a workflow of its own)."""
    raw = yield from read(tr.get(store.keys.link(sub)))
    if raw is None:
        return None
    w, i, _ = fdb.tuple.unpack(raw)
    return w, i


def ended(store: Any, tr: Any, sub: bytes) -> Gen[None]:
    """Sub-workflow ``sub`` ended, every node of it (its end freed): its node in the
    parent ends as succeeded, with the parent's step."""
    parent = yield from parent_of(store, tr, sub)
    if parent is not None:
        yield from store.advance(tr, parent[0], parent[1], SUCCEEDED, None, None)


def stopped(store: Any, tr: Any, sub: bytes, status: str, why: Optional[str]) -> Gen[None]:
    """Sub-workflow ``sub`` stopped (``status``: failed or cancelled): its node in the
    parent ends so, with the parent's step."""
    parent = yield from parent_of(store, tr, sub)
    if parent is not None:
        outcome = CANCELLED if status == CANCELLED else FAILED
        yield from store.advance(tr, parent[0], parent[1], outcome, None,
                                 f"sub-workflow {status}: {why}")


def children(store: Any, tr: Any, w: bytes) -> Gen[List[Tuple[int, bytes]]]:
    """The sub-workflows of ``w``, by their nodes there (a range read)."""
    r = store.keys.kin.range((w,))
    out = []
    for kv in (yield from Range(tr, r.start, r.stop).read()):
        key = store.keys.kin.unpack(kv.key)
        if len(key) == 2 and type(key[1]) is int:
            out.append((key[1], kv.value))
    return out
