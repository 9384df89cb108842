"""Advancing a workflow store's nodes as they end: the steps of several nodes that
ended in one transaction (a worker acks the jobs it finished together), side by side.

One node's step after another's made about two round trips each in a row (its first
reads, then its counters: an ack of 64 children of a fan-in made about 130), and
about ten calls into FoundationDB each (the header read again for every node of one
workflow; three tallies; a counter added to and read per dependent).  Here
(:func:`advance_many`) the first reads of every node go out together (one round trip
for all: each workflow's header once, each node's state and dependents), the
workflows' tallies are added once each, and the counters of the dependents they count
down once each (a dependent ``k`` of these nodes count down is added ``-k`` in one
leaf and read once, with a conflict, see :class:`Countdown`): one more round trip
for all.  Then what each workflow's nodes freed
is pushed, workflow by workflow.

Why a counter still reaches 0 in exactly one transaction: a transaction adds its
nodes' decrements to a counter at once and reads it after, with a read conflict;
of two transactions that both decrement it, the later conflicts and retries, reading
what the first left.  The one that reads 0 made the last decrement (a leaf that had
less than it took is given the difference back, in the same transaction, and the
reader that took its last one closes it).  The same holds for a node's root (its
leaves closed in this transaction, added at once).
"""

from __future__ import annotations

import random
import time
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

import fdb.tuple

from .._fdb import Gen, Range, le64, read, read_le64, snap
from .._records.records import RESULT_CHUNK
from .._store_layout import ROOT, WorkflowLayout
from .defs import EdgeReads
from .graph import CONTINUE, FAIL
from .reading import DONE, ENDED, FAILED, QUEUED, RUNNING, SUCCEEDED, Header, pack

__all__ = ["Countdown", "Ended", "Tallies", "advance_many", "end_node"]

#: A node's dependents, as its edges list them: ``(dependent, its leaf counting this
#: node, the dependency's policy, the dependent's leaves)``.
Edges = List[Tuple[int, int, str, int]]


class Ended(NamedTuple):
    """Node ``i`` of workflow ``w`` ended as ``outcome`` (with its encoded ``result``,
    and what it failed with): what :func:`advance_many` takes, one a node."""

    w: bytes
    i: int
    outcome: str
    result: Optional[bytes]
    error: Optional[str]


#: Changes of workflows' tallies gathered in one transaction (by key), added at its end
#: once each (see :func:`end_node`).
Tallies = Dict[bytes, int]


def end_node(tr: Any, keys: WorkflowLayout, w: bytes, i: int, was: Optional[str],
             outcome: str, error: Optional[str], tallies: Optional[Tallies] = None,
             ends: Optional[Dict[Tuple[str, Optional[str]], bytes]] = None) -> None:
    """Write node ``i``'s end (it was ``was``: None, waiting; or queued, or ended
    before: a dead job requeued), and count it in the workflow's tallies: added now,
    or gathered in ``tallies`` (added by the caller, once a key); ``ends``: the
    states packed already in this transaction, by outcome and error (the nodes one
    ack ends share their time)."""
    state = None if ends is None else ends.get((outcome, error))
    if state is None:
        state = pack((outcome, time.time(), error))
        if ends is not None:
            ends[outcome, error] = state
    tr.set(keys.state(w, i), state)
    changes = [(keys.tally(w, outcome), 1)]
    if was in ENDED:
        changes.append((keys.tally(w, was), -1))
    else:
        changes.append((keys.tally(w, DONE), 1))
        if was == QUEUED:
            changes.append((keys.tally(w, QUEUED), -1))
    for key, delta in changes:
        if tallies is None:
            tr.add(key, le64(delta))
        else:
            tallies[key] = tallies.get(key, 0) + delta


class Countdown:
    """The decrements of dependents' counters of one transaction, gathered (by
    :meth:`count`), then added and read (:meth:`freed`).

    A dependent's leaves are quotas: what each counts is how many of its dependencies
    are still to end there, and it does not matter which leaf an end is taken from,
    as long as each end takes one from a leaf that has some (their sum is then the
    dependencies still to end, and each leaf reaches 0 once).  A dependent with one
    leaf (or a batch's callback, whose leaves members are added to) is counted down
    where its edges say: an add and a read (a conflict).  One with several is counted
    down, for all of this transaction's ends together, where it has enough left: its
    leaves read side by side without conflicts, one that has enough picked at random
    (else as many as it takes), and a conflict taken on each leaf taken from (a leaf
    at 0 stays at 0: a leaf of a node's dependencies is never added to, so passing it
    by needs none).  Acks of its dependencies running at once then conflict only
    when they took from the same leaf, not every time (its dependencies' jobs are
    claimed in order, and acks of neighbours went to the same leaf)."""

    __slots__ = ("failures", "keys", "leaves", "spread")

    def __init__(self, keys: WorkflowLayout) -> None:
        self.keys = keys
        #: ``(workflow, dependent, leaf)``: [decrements, its leaves] (a dependent
        #: counted where its edges say)
        self.leaves: Dict[Tuple[bytes, int, int], List[int]] = {}
        #: ``(workflow, dependent)``: [decrements, its leaves] (a dependent of several
        #: leaves, counted down in any)
        self.spread: Dict[Tuple[bytes, int], List[int]] = {}
        #: ``(workflow, dependent)``: failures counted (a ``continue`` dependency)
        self.failures: Dict[Tuple[bytes, int], int] = {}

    def count(self, w: bytes, outcome: str, edges: Edges) -> None:
        """A node of ``w`` ended as ``outcome``: count down its dependents (``edges``),
        counting a failure for those whose policy is ``continue``."""
        for d, leaf, policy, count in edges:
            if outcome != SUCCEEDED and policy == CONTINUE:
                self.failures[w, d] = self.failures.get((w, d), 0) + 1
            if count > 1:
                found = self.spread.get((w, d))
                if found is None:
                    self.spread[w, d] = [1, count]
                else:
                    found[0] += 1
            else:
                at = self.leaves.get((w, d, leaf))
                if at is None:
                    self.leaves[w, d, leaf] = [1, count]
                else:
                    at[0] += 1

    def freed(self, tr: Any) -> Gen[Dict[bytes, List[int]]]:
        """Add the decrements counted (and read each counter added to, or take the
        conflicts above); the dependents freed, by workflow: those whose only leaf
        reads 0, or whose root, decremented by each leaf this transaction brought to
        0, does.  One round trip, and one more when a leaf closed."""
        keys = self.keys
        for (w, d), n in self.failures.items():
            tr.add(keys.failed(w, d), le64(n))
        reads = []
        for (w, d, leaf), (n, count) in self.leaves.items():
            key = keys.counter(w, d, leaf)
            tr.add(key, le64(-n))
            reads.append((w, d, count, tr.get(key)))
        reader = snap(tr)
        spread = [(w, d, n, Range(reader, keys.counter(w, d, 0), keys.counter(w, d, count)))
                  for (w, d), (n, count) in self.spread.items()]
        freed: Dict[bytes, List[int]] = {}
        closed: Dict[Tuple[bytes, int], int] = {}
        for w, d, count, future in reads:
            if read_le64((yield from read(future))) != 0:
                continue
            if count == 1:
                freed.setdefault(w, []).append(d)
            else:
                closed[w, d] = closed.get((w, d), 0) + 1
        for w, d, n, leaves in spread:
            closes = self.take(tr, w, d, n, (yield from leaves.read()))
            if closes:
                closed[w, d] = closed.get((w, d), 0) + closes
        roots = []
        for (w, d), n in closed.items():
            key = keys.counter(w, d, ROOT)
            tr.add(key, le64(-n))
            roots.append((w, d, tr.get(key)))
        for w, d, future in roots:
            if read_le64((yield from read(future))) == 0:
                freed.setdefault(w, []).append(d)
        return freed

    @staticmethod
    def take(tr: Any, w: bytes, d: int, n: int, leaves: Sequence[Any]) -> int:
        """Take ``n`` from ``leaves`` (the leaves of ``d``, read: key-values) that have
        some, a conflict on each taken from: from one that has ``n`` (picked at
        random), else from as many as it takes; how many this brought to 0."""
        left = [(kv.key, read_le64(kv.value)) for kv in leaves]
        enough = [kv for kv in left if kv[1] >= n]
        if enough:
            order = [random.choice(enough)]
        else:
            order = [kv for kv in left if kv[1] > 0]
            random.shuffle(order)
        closes = 0
        for key, has in order:
            taken = min(has, n)
            tr.add_read_conflict_key(key)
            tr.add(key, le64(-taken))
            n -= taken
            closes += taken == has
            if n == 0:
                break
        assert n == 0, f"node {d} of workflow {w!r} was counted down more than it waits for"
        return closes


def advance_many(store: Any, tr: Any, ended: Sequence[Ended]) -> Gen[None]:
    """The steps of the nodes ``ended`` (of ``store``, a :class:`.engine.Store`), in
    the transaction that ended them (see :meth:`.engine.Store.advance`, one node's):
    the first reads of all of them side by side (each workflow's header with a
    conflict; each node's state and dependents, snapshot), their ends written, their
    workflows' tallies added once each, the counters they count down added and read
    once each (side by side); a workflow stopped where a node failed a ``fail``
    dependency (its other nodes here count down nothing more: the stop cancelled
    every node not pushed); a node with more dependents than an expander takes has
    them counted down by expanders; then each workflow's freed nodes pushed together
    (or skipped), its header read again first from the transaction (a stop in this
    transaction, of a parent through its sub-workflow, wrote it).  Round trips: one
    for the first reads, one for the counters (one more when leaves close), then
    per workflow that frees nodes, their definitions (one) and pushes."""
    keys = store.keys
    headers: Dict[bytes, Any] = {}
    begun = []
    edge_reads = EdgeReads(tr, keys)  # a block read once for the nodes of it here
    for e in ended:
        if e.w not in headers:
            headers[e.w] = tr.get(keys.header(e.w))
        begun.append((e, snap(tr).get(keys.state(e.w, e.i)), edge_reads.start(e.w, e.i)))
    tallies: Tallies = {}
    ends: Dict[Tuple[str, Optional[str]], bytes] = {}
    countdown = Countdown(keys)
    stopped: Set[bytes] = set()
    deferred: List[Tuple[Ended, Edges]] = []
    sources: Dict[bytes, int] = {}  # each workflow's first node counted down here
    for e, prior_f, edges_r in begun:
        header_f = headers[e.w]
        if stopped:  # a stop here may have ended nodes, stopped a parent: read again
            header_f, prior_f = tr.get(keys.header(e.w)), snap(tr).get(keys.state(e.w, e.i))
        raw = yield from read(header_f)
        prior = yield from read(prior_f)
        if raw is None:  # pruned: nothing to write
            continue
        # no state: a root, queued (its push wrote none): every node acked was pushed
        was = QUEUED if prior is None else fdb.tuple.unpack(prior)[0]
        end_node(tr, keys, e.w, e.i, was, e.outcome, e.error, tallies, ends)
        if e.result is not None:
            for n, at in enumerate(range(0, len(e.result), RESULT_CHUNK)):
                tr.set(keys.chunk(e.w, e.i, n), e.result[at:at + RESULT_CHUNK])
        edges = yield from edges_r
        if was in ENDED:  # it ended before (a dead job requeued): its dependents knew
            continue
        if Header.unpack(raw).status != RUNNING or e.w in stopped:
            continue
        if e.outcome != SUCCEEDED and any(policy == FAIL for _, _, policy, _ in edges):
            stopped.add(e.w)
            yield from store.stop(tr, e.w, FAILED, f"node {e.i} {e.outcome}", raw)
            continue
        if len(edges) > store.edge_chunk:
            deferred.append((e, edges))
            continue
        countdown.count(e.w, e.outcome, edges)
        sources.setdefault(e.w, e.i)
    for key, delta in tallies.items():
        if delta:
            tr.add(key, le64(delta))
    freed = yield from countdown.freed(tr)
    for e, edges in deferred:
        if (yield from running(tr, keys, e.w)) is not None:
            yield from store.defer(tr, e.w, e.i, e.outcome, edges)
    for w, nodes in freed.items():
        raw = yield from running(tr, keys, w)
        if raw is None:
            continue
        work: List[Tuple[int, str, Edges]] = []
        yield from store.free(tr, w, sources[w], nodes, work)
        yield from store.cascade(tr, w, raw, work)


def running(tr: Any, keys: WorkflowLayout, w: bytes) -> Gen[Optional[bytes]]:
    """Workflow ``w``'s header if it runs, else None; read again (with a conflict)
    after it was read in this transaction: from the transaction, without a round
    trip."""
    raw = yield from read(tr.get(keys.header(w)))
    if raw is None or Header.unpack(raw).status != RUNNING:
        return None
    return raw
