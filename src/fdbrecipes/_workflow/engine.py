"""A workflow store's transactions: creating a workflow, advancing it as its nodes
end, stopping it (a cancel, or a failure under the ``fail`` policy), and reading it.

How a node becomes runnable exactly once (docs/workflows.md tells the why): a node
``d`` with ``k`` dependencies has ``ceil(k / LEAF)`` counters (its *leaves*), each
set to the number of its dependencies counted there, and, with more than one leaf, a
counter of its open leaves (:data:`.._layout.ROOT`).  The transaction that ends
dependencies (an ack of one job or of several, or a burial) adds -1 for each of them
to a leaf (-k for k, in one add; with several leaves, one picked at random, the rest
from the others when it has less: leaves are quotas, see
:class:`.advancing.Countdown`) and reads it, with a read conflict; the one
that reads 0 closes the leaf (adds -1 to the root and reads it the same way), and the
one that reads the root (or the only leaf) at 0 pushes ``d``.
Reads with conflicts make these counts serializable: of two acks that decrement the
same counter, the later conflicts and retries, and reads the value the first left, so
exactly one reads 0.  Acks that count down different leaves do not conflict; acks
that close leaves conflict on the root only.

Every step reads the workflow's header with a read conflict, and a stop writes it: a
step that would push a node races a cancel, and one of the two retries.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import fdb.tuple

from .._fdb import Gen, Range, le64, read, read_le64, ready, snap
from .._ordered.requests import PushRequest
from .._records.records import CANCELLED
from .._store_layout import ROOT, WorkflowLayout
from .._values import MAX_BATCH_BYTES
from ..protocol import Workable
from . import advancing, nesting
from .advancing import Countdown, Ended, end_node
from .defs import Edge, pack_deps, read_blocks, read_edges, write_nodes
from .graph import (
    ALWAYS,
    END,
    FAIL,
    FAILURE,
    LEAF,
    LIMIT_KEYS,
    SUB,
    SUCCESS,
    Plan,
    expander_id,
    node_id,
    push_args,
    store_tag,
)
from .reading import (
    DONE,
    FAILED,
    QUEUED,
    RUNNING,
    SKIPPED,
    SUCCEEDED,
    TOTAL,
    Header,
    Reads,
    Stored,
    value_of,
)
from .reading import pack as _pack

__all__ = ["CHUNK", "FAIR_CHUNK", "NODE_PUSH_BYTES", "Fresh", "Store", "chunk_of",
           "expander_where", "fitting"]


#: Nodes a transaction pushes into one Queue or PriorityQueue at most (a push of a
#: job with an id writes about 1 KB; a FairQueue's push, a round trip each, 50):
#: more go through expanders (see :meth:`Store.push`).  A create pushes its first
#: nodes into a Queue or PriorityQueue past this, as long as they fit (see
#: :data:`NODE_PUSH_BYTES`).
CHUNK, FAIR_CHUNK = 500, 50
#: Bytes of writes the push of a node is taken to add to its create's transaction at
#: most, besides its value, until the first chunk pushed says (see
#: :meth:`Store.push_fitting`): its item's and its id's keys, with their conflict
#: ranges (about 850 bytes measured, with a store's job ids; a first node writes no
#: state key).
NODE_PUSH_BYTES = 2_000
#: What a chunk of dependents to count down starts with (a chunk of nodes to push is
#: their numbers).
EDGES = "edges"


def chunk_of(ops: Any) -> int:
    """How many nodes one transaction pushes into the structure of ``ops``."""
    return CHUNK if hasattr(ops, "job_request") else FAIR_CHUNK


def expander_where(stored: Stored) -> Dict[str, Any]:
    """Where an expander goes: its nodes' group in a FairQueue, none elsewhere (a
    PriorityQueue's default priority)."""
    where = dict(stored.where)
    return {"group": where["group"]} if "group" in where else {}


def fitting(batch: Sequence[Tuple[int, Stored]], room: int, each: int) -> int:
    """How many of the first nodes of ``batch`` fit in ``room`` bytes of writes, each
    taking ``each`` bytes and its value's."""
    for n, (_, stored) in enumerate(batch):
        room -= len(stored.value) + each
        if room < 0:
            return n
    return len(batch)


class Fresh:
    """Writes of keys no other transaction can write before this one commits (those
    of a workflow being created, under its new random id): without write conflict
    ranges, which would count against the transaction's 10 MB as much as the writes."""

    __slots__ = ("no_conflict", "set_key")

    def __init__(self, tr: Any) -> None:
        self.set_key = tr.set
        self.no_conflict = tr.options.set_next_write_no_write_conflict_range

    def set(self, key: bytes, value: bytes) -> None:
        self.no_conflict()
        self.set_key(key, value)


class Store(Reads):
    """The transactions of one workflow store: its keys, its key (``key``; its
    ``tag`` names it in its nodes' job ids), the structures its nodes go to (``targets``, by their
    subspace's key) and how long an ended workflow is kept (``retention``)."""

    def __init__(self, keys: WorkflowLayout, targets: Dict[bytes, Workable[Any]],
                 retention: float) -> None:
        self.keys = keys
        self.key = bytes(keys.subspace.key())
        self.tag = store_tag(self.key)
        self.targets = targets
        self.retention = retention
        #: Dependents one expander counts down (and pushes) at most.
        self.edge_chunk = min((chunk_of(ops) for ops in targets.values()), default=CHUNK)

    # -- creating ------------------------------------------------------------------------

    def create(self, tr: Any, _attempt: Any, plan: Plan) -> Gen[bool]:
        """Write ``plan`` and push its nodes without dependencies, unless a workflow of
        its id exists (then nothing: False).  Reads the header with a conflict; one
        round trip, then each structure's pushes (one round trip each for a Queue or
        PriorityQueue, one per node for a FairQueue)."""
        keys, w = self.keys, plan.id
        if (yield from read(tr.get(keys.header(w)))) is not None:
            return False
        now = time.time()
        tr.set(keys.header(w), Header(now, len(plan.specs), RUNNING, None, None).pack())
        tr.set(keys.due(now + self.retention, w), b"")
        tr.set(keys.tally(w, TOTAL), le64(len(plan.specs)))
        fresh = Fresh(tr)
        roots = self.define(fresh, plan)
        nesting.write(self, fresh, w, plan)
        yield from self.push(tr, w, -1, roots, room=True)
        return True

    def define(self, fresh: Fresh, plan: Plan) -> List[Tuple[int, Stored]]:
        """Write ``plan``'s nodes: their definitions and out-edges, a block of nodes
        a key (see :mod:`.defs`), the in-edges and counters of those with
        dependencies (an open batch's: its open key); its first nodes (no
        dependencies, no join)."""
        keys, w, specs = self.keys, plan.id, plan.specs
        roots = []
        joins = set(plan.joins)
        if joins:  # an open batch: each callback's leaves so far
            fresh.set(keys.opened(w), _pack(tuple((d, len(plan.counters[d]))
                                                  for d in plan.joins)))
        write_nodes(fresh.set, keys, w, 0, specs, plan.dependents, joins)
        for i, spec in enumerate(specs):
            if spec.deps:
                deps = [(dep, policy, specs[dep].name) for dep, policy in spec.deps]
                for leaf, at in enumerate(range(0, len(deps), LEAF)):
                    fresh.set(keys.dep(w, i, leaf), pack_deps(deps[at:at + LEAF]))
                for leaf, count in plan.counters[i]:
                    fresh.set(keys.counter(w, i, leaf), le64(count))
            leaves = len(plan.counters[i])
            if leaves > 1 or i in joins:  # a join's root counts the close too
                fresh.set(keys.counter(w, i, ROOT), le64(leaves + (i in joins)))
            elif not spec.deps:
                roots.append((i, Stored(spec.target, spec.value, spec.where, spec.delay,
                                        spec.time_limit, spec.name, spec.when, True)))
        return roots

    def push(self, tr: Any, w: bytes, source: int, nodes: Sequence[Tuple[int, Stored]],
             room: bool = False) -> Gen[None]:
        """Push ``nodes`` (freed by node ``source``; -1: the first nodes; -1 - n: an
        open batch's add or close, see :meth:`.batches.Batches.source`) into their
        structures (a Queue's or PriorityQueue's in one push per structure), each
        under its node's job id, and mark them queued (a root, see
        :attr:`.defs.Stored.root`, by its tally alone: no state key, whether it is
        pushed now or by its expander); more than a chunk of them for one structure
        (:func:`chunk_of`) go through expanders instead: one job per chunk, pushed
        there, whose ack pushes the chunk (see :meth:`expand`).

        ``room`` (a create's): the nodes of a Queue or PriorityQueue are pushed now,
        however many, as long as the transaction's writes stay within
        :data:`.._values.MAX_BATCH_BYTES` (see :meth:`push_fitting`), as ``push_many``
        pushes a batch in one transaction; only the nodes past that go through
        expanders."""
        by_target: Dict[bytes, List[Tuple[int, Stored]]] = {}
        roots = 0
        for node in nodes:
            i, stored = node
            if stored.target == SUB:  # a sub-workflow: it starts
                yield from nesting.start(self, tr, w, i, stored.value)
                continue
            roots += stored.root
            by_target.setdefault(stored.target, []).append(node)
        if roots:  # queued from now on, pushed now or by an expander
            tr.add(self.keys.tally(w, QUEUED), le64(roots))
        c = 0
        for target, batch in by_target.items():
            ops = self.targets[target]
            size = chunk_of(ops)
            if room and size == CHUNK:
                batch = batch[(yield from self.push_fitting(tr, w, ops, batch)):]
                if not batch:
                    continue
            elif len(batch) <= size:
                yield from self.push_now(tr, w, ops, batch)
                continue
            first = c
            for at in range(0, len(batch), size):
                Fresh(tr).set(self.keys.pending(w, source, c),
                              _pack(tuple(i for i, _ in batch[at:at + size])))
                c += 1
            yield from self.expanders(tr, ops, w, source, range(first, c), batch[0][1])

    def expanders(self, tr: Any, ops: Any, w: bytes, source: int, chunks: range,
                  stored: Stored) -> Gen[None]:
        """Push the expanders of chunks ``chunks`` of node ``source`` into the
        structure whose operations are ``ops``, where ``stored`` (a node of theirs)
        goes (:func:`expander_where`), each under its id: one push into a Queue or
        PriorityQueue (one round trip), one per expander into a FairQueue."""
        where = expander_where(stored)
        requesting = getattr(ops, "job_request", None)
        if requesting is not None:
            yield from ops.push_requests(tr, [
                requesting(c, expander_id(self.tag, w, source, c), None, where, None)
                for c in chunks])
            return
        for c in chunks:
            yield from ops.push_job(tr, c, id=expander_id(self.tag, w, source, c), **where)

    def push_fitting(self, tr: Any, w: bytes, ops: Any,
                     batch: Sequence[Tuple[int, Stored]]) -> Gen[int]:
        """Push the first nodes of ``batch`` (a create's, into the Queue or
        PriorityQueue whose operations are ``ops``) while the transaction's writes
        (FoundationDB's approximate size: the caller's own too) stay within
        :data:`.._values.MAX_BATCH_BYTES`, 1,000,000 bytes under FoundationDB's limit:
        a chunk of them (:data:`CHUNK`, at :data:`NODE_PUSH_BYTES` each at most),
        then as many more as the bytes that chunk took per node say fit, in one more
        push; how many were pushed.  The states are written without conflict ranges
        (the workflow's keys are new: :class:`Fresh`).  Two round trips (one when a
        chunk holds them all), whatever their number: as ``push_many`` of as many
        values, well within FoundationDB's five seconds."""
        put = Fresh(tr).set
        before = yield from ready(tr.get_approximate_size())
        n = fitting(batch[:CHUNK], MAX_BATCH_BYTES - before, NODE_PUSH_BYTES)
        if n:
            yield from self.push_now(tr, w, ops, batch[:n], put)
        if n < CHUNK or n == len(batch):
            return n
        after = yield from ready(tr.get_approximate_size())
        each = (after - before - sum(len(stored.value) for _, stored in batch[:n])) // n + 1
        more = fitting(batch[n:], MAX_BATCH_BYTES - after, each)
        if more:
            yield from self.push_now(tr, w, ops, batch[n:n + more], put)
        return n + more

    def push_now(self, tr: Any, w: bytes, ops: Any, batch: Sequence[Tuple[int, Stored]],
                 put: Optional[Callable[[bytes, bytes], None]] = None) -> Gen[None]:
        """Push ``batch`` into the structure whose operations are ``ops``, now, the
        states of its nodes that are not roots written with ``put`` (default:
        ``tr.set``) and counted queued (a root was counted by :meth:`push`, and has
        no state key until it ends)."""
        put = tr.set if put is None else put
        waited = [i for i, stored in batch if not stored.root]
        if waited:
            queued = _pack((QUEUED, time.time(), None))
            for i in waited:
                put(self.keys.state(w, i), queued)
            tr.add(self.keys.tally(w, QUEUED), le64(len(waited)))
        requesting = getattr(ops, "job_request", None)
        if requesting is not None:  # a Queue or PriorityQueue: one push_many
            yield from ops.push_requests(tr, self.requests(requesting, ops, w, batch))
            return
        for i, stored in batch:
            value = value_of(ops, stored)
            place, keys = push_args(stored.where)
            yield from ops.push_job(tr, value, id=node_id(self.tag, w, i),
                                    delay=stored.delay, time_limit=stored.time_limit,
                                    limit_keys=keys, **place)

    def expand(self, tr: Any, w: bytes, source: int, c: int) -> Gen[None]:
        """The ack of an expander: push chunk ``c`` of the nodes ``source`` freed,
        or count down chunk ``c`` of its dependents (:meth:`defer`), as
        :meth:`advance` does (nothing if the workflow stopped meanwhile: its stop
        cancelled them).  Reads the header (a conflict) and the chunk side by side,
        then the nodes' definitions (or the dependents' counters, then theirs): two
        or three round trips, and the pushes."""
        keys = self.keys
        header_f = tr.get(keys.header(w))
        chunk_f = tr.get(keys.pending(w, source, c))
        raw = yield from read(header_f)
        listed = yield from read(chunk_f)
        if listed is None or raw is None:
            return
        tr.clear(keys.pending(w, source, c))
        if Header.unpack(raw).status != RUNNING:
            return
        parts = fdb.tuple.unpack(listed)
        if parts[:1] == (EDGES,):  # dependents of source to count down (see defer)
            _, how, out = parts
            yield from self.cascade(tr, w, raw, [(source, how, list(out))])
            return
        nodes = yield from self.definitions(tr, w, list(parts))
        by_target: Dict[bytes, List[Tuple[int, Stored]]] = {}
        for i, stored in nodes:
            by_target.setdefault(stored.target, []).append((i, stored))
        for target, batch in by_target.items():
            yield from self.push_now(tr, w, self.targets[target], batch)

    def requests(self, requesting: Any, ops: Any, w: bytes,
                 batch: Sequence[Tuple[int, Stored]]) -> List[PushRequest]:
        """The pushes of nodes ``batch`` into a Queue or PriorityQueue (``ops``): one
        request per delay and time limit, its items under their nodes' ids, as ids
        made for them (new ids: written without reading them, as ``push_many`` writes
        the ids it makes; a node's job is pushed once, by its counters, see the
        module docstring).  The first node of each delay, time limit and ``where`` is
        checked by the structure's push (its value decoded and encoded again); the
        others of its kind go in its group, their values as their ``add`` encoded
        them (checked then), but for nodes with limit keys, each checked."""
        alike: Dict[Tuple[Any, Any], List[Tuple[Any, bytes]]] = {}
        ids: Dict[Tuple[Any, Any], List[bytes]] = {}
        made: Dict[Tuple[Any, Any], PushRequest] = {}
        firsts: Dict[Tuple[Any, ...], PushRequest] = {}  # by delay, time limit, where
        for i, stored in batch:
            key = (stored.delay, stored.time_limit)
            kind = (stored.delay, stored.time_limit, stored.where)
            one = firsts.get(kind)
            if one is None or LIMIT_KEYS in dict(stored.where):
                place, keys = push_args(stored.where)
                one = requesting(value_of(ops, stored), None, stored.delay, place,
                                 stored.time_limit, keys)
                firsts[kind] = one
                items = one.batch
            else:  # as the first of its kind: its group, and its value as add encoded it
                items = [(one.batch[0][0], stored.value)]
            made.setdefault(key, one)
            alike.setdefault(key, []).extend(items)
            ids.setdefault(key, []).append(node_id(self.tag, w, i))
        return [made[key]._replace(batch=batch, ids=tuple(ids[key]))
                for key, batch in alike.items()]


    # -- advancing -----------------------------------------------------------------------

    def advance(self, tr: Any, w: bytes, i: int, outcome: str, result: Optional[bytes],
                error: Optional[str]) -> Gen[None]:
        """Node ``i`` ended (``outcome``: succeeded, failed or cancelled), in the
        transaction that ended its job: its state, result and tallies written; each
        dependent's counter decremented (read with a conflict) and the dependents it
        frees pushed (or skipped, their ``when`` unmet, which ends them in turn); or,
        when it failed and a dependent's policy is ``fail``, the workflow failed (see
        :meth:`stop`).  Reads the header (a conflict), the node's state and its
        dependents (snapshot) side by side; then its counters; then the freed
        dependents' definitions: three round trips at most (more when a skip frees
        more).  A node with more dependents than :attr:`edge_chunk` leaves them
        to expanders (:meth:`defer`): its definition read, one push per chunk."""
        return advancing.advance_many(self, tr, [Ended(w, i, outcome, result, error)])

    def advance_many(self, tr: Any, ended: Sequence[Ended]) -> Gen[None]:
        """:meth:`advance` of several nodes that ended in one transaction (a worker's
        acks), side by side (see :func:`.advancing.advance_many`): the first reads of
        all of them in one round trip, the counters they count down in one more (each
        added to and read once), then each workflow's freed nodes' definitions (one)
        and pushes."""
        return advancing.advance_many(self, tr, ended)

    def cascade(self, tr: Any, w: bytes, raw: bytes,
                work: List[Tuple[int, str, List[Tuple[int, int, str, int]]]]) -> Gen[None]:
        """Count down the dependents of each node of ``work`` (``(node, how it ended,
        its dependents)``), pushing those freed, skipping those whose ``when`` is unmet
        (their own dependents counted down in turn), or stopping the workflow (its
        header ``raw``) when a ``fail`` dependency did not succeed; a node with more
        dependents than an expander takes has them counted down by expanders (see
        :meth:`defer`)."""
        while work:
            node, how, out = work.pop()
            if how != SUCCEEDED and any(policy == FAIL for _, _, policy, _ in out):
                yield from self.stop(tr, w, FAILED, f"node {node} {how}", raw)
                return
            if len(out) > self.edge_chunk:
                yield from self.defer(tr, w, node, how, out)
                continue
            freed = yield from self.count_down(tr, w, how, out)
            yield from self.free(tr, w, node, freed, work)

    def free(self, tr: Any, w: bytes, source: int, freed: Sequence[int],
             work: List[Tuple[int, str, List[Tuple[int, int, str, int]]]]) -> Gen[None]:
        """Push the ``freed`` nodes that run (freed by ``source``: see :meth:`push`);
        end the others skipped, adding them to ``work`` (see :meth:`cascade`)."""
        if END in freed:  # this sub-workflow's last node ended: its parent's node too
            freed = [d for d in freed if d != END]
            yield from nesting.ended(self, tr, w)
        if not freed:
            return
        ready = yield from self.ready(tr, w, freed)
        yield from self.push(tr, w, source, [(d, s) for d, s, run in ready if run])
        for d, _, run in ready:
            if not run:
                end_node(tr, self.keys, w, d, None, SKIPPED, None)
                work.append((d, SKIPPED, (yield from self.start_edges(tr, w, d))))

    def died(self, tr: Any, _attempt: Any, w: bytes, i: int, outcome: str,
             why: Optional[str]) -> Gen[None]:
        """Node ``i``'s job ended without its worker's ack (``outcome``: failed, a dead
        letter; cancelled, removed while it waited; ``why``): :meth:`advance`, run
        later in that transaction (see :meth:`.ops.WorkflowOps.step`)."""
        return self.advance(tr, w, i, outcome, None, why)

    def expanded(self, tr: Any, _attempt: Any, w: bytes, source: int, c: int) -> Gen[None]:
        """An expander became a dead letter, or was cancelled: :meth:`expand`, run
        later in that transaction."""
        return self.expand(tr, w, source, c)

    def defer(self, tr: Any, w: bytes, node: int, how: str,
              out: Sequence[Tuple[int, int, str, int]]) -> Gen[None]:
        """Leave the counting down of ``node``'s dependents (``out``; it ended
        ``how``) to expanders, one per :attr:`edge_chunk` of them, pushed where
        ``node`` went: counting down and pushing thousands of dependents in one
        transaction would read three keys for each and outlast a transaction's five
        seconds.  Each expander's ack counts its chunk down (see :meth:`expand`).
        Reads ``node``'s definition (its block): one round trip, and the pushes (one
        for a Queue or PriorityQueue, see :meth:`expanders`)."""
        stored = (yield from self.definitions(tr, w, [node]))[0][1]
        ops = self.targets[stored.target]
        fresh = Fresh(tr)
        chunks = range(0, len(out), self.edge_chunk)
        for c, at in enumerate(chunks):
            fresh.set(self.keys.pending(w, node, c),
                      _pack((EDGES, how, tuple(out[at:at + self.edge_chunk]))))
        yield from self.expanders(tr, ops, w, node, range(len(chunks)), stored)

    def start_edges(self, tr: Any, w: bytes, i: int) -> Gen[List[Edge]]:
        """Start reading node ``i``'s dependents (snapshot: they never change): its
        block, then its ``we`` keys if it has many (:func:`.defs.read_edges`); a
        generator to collect ``(dependent, leaf, policy, its leaves)``."""
        return read_edges(tr, self.keys, w, i)

    def count_down(self, tr: Any, w: bytes, outcome: str,
                   edges: Sequence[Tuple[int, int, str, int]]) -> Gen[List[int]]:
        """Decrement the counter of each dependent of ``edges`` (counting a failure
        for those whose policy is ``continue``); the dependents freed (see
        :class:`.advancing.Countdown`)."""
        countdown = Countdown(self.keys)
        countdown.count(w, outcome, list(edges))
        return (yield from countdown.freed(tr)).get(w, [])

    def ready(self, tr: Any, w: bytes, freed: Sequence[int]) -> Gen[List[Tuple[int, Stored, bool]]]:
        """The definitions of ``freed`` nodes, and whether each runs (its ``when``,
        against its failures); read side by side."""
        keys = self.keys
        failed = [snap(tr).get(keys.failed(w, d)) for d in freed]
        defined = yield from self.definitions(tr, w, freed)
        out = []
        for (d, stored), failed_f in zip(defined, failed):
            failures = read_le64((yield from read(failed_f)))
            run = stored.when == ALWAYS or (stored.when == SUCCESS and failures == 0) or \
                (stored.when == FAILURE and failures > 0)
            out.append((d, stored, run))
        return out

    # -- stopping ------------------------------------------------------------------------

    def stop(self, tr: Any, w: bytes, status: str, why: Optional[str],
             raw: Optional[bytes] = None) -> Gen[Optional[bool]]:
        """Stop workflow ``w`` (``status``: cancelled or failed): every node not
        pushed yet is cancelled, every node waiting in its structure removed
        (cancelled), every running node's worker told (``job.cancelled``: with job
        records).  None if there is no such workflow, False if it was not running.
        Reads the header and the nodes' states with conflicts (it conflicts with
        every step of the workflow in flight) and their definitions (snapshot), side
        by side, then cancels each queued node's job (its structure's ``cancel``: a
        round trip each; a root without a state key is queued).  A queued node
        whose job is not found ends cancelled here: its expander has not pushed it
        yet (and will not: the workflow stopped), or its structure was cleared."""
        keys = self.keys
        if raw is None:
            raw = yield from read(tr.get(keys.header(w)))
        if raw is None:
            return None
        header = Header.unpack(raw)
        if header.status != RUNNING:
            return False
        tr.set(keys.header(w), header._replace(status=status, ended_at=time.time(),
                                               why=why).pack())
        r = keys.states.range((w,))
        total_f = tr.get(keys.tally(w, TOTAL))  # a conflict with a batch's adds
        states_read = Range(tr, r.start, r.stop)
        nodes = read_blocks(tr, keys, w, None, values=False)  # a SUB's value is small
        states = {keys.states.unpack(kv.key)[1]: fdb.tuple.unpack(kv.value)[0]
                  for kv in (yield from states_read.read())}
        records = yield from nodes
        queued = []
        for i in range(read_le64((yield from read(total_f)))):
            state = states.get(i)
            if state == QUEUED or (state is None and records[i].stored.root):
                queued.append((i, records[i].stored))
            elif state is None:
                end_node(tr, self.keys, w, i, None, CANCELLED, why)
        for i, stored in queued:
            if stored.target == SUB:  # it stops, and ends the node
                yield from self.stop(tr, stored.value, status, why)
                continue
            ops = self.targets.get(stored.target)
            if ops is None:
                continue
            where = dict(stored.where)
            at = (where["group"],) if "group" in where else ()
            said = yield from ops.cancel_at(tr, node_id(self.tag, w, i), at,  # type: ignore
                                            False)
            if said in (CANCELLED, None):  # None: no job (not pushed yet, or cleared)
                end_node(tr, self.keys, w, i, QUEUED, CANCELLED, why)
        yield from nesting.stopped(self, tr, w, status, why)
        return True

    # -- forgetting ----------------------------------------------------------------------

    def forget(self, tr: Any, w: bytes) -> Gen[None]:
        """Clear every key of workflow ``w`` and of its sub-workflows (their
        retention is its: they have no pruning entry of their own)."""
        for _, sub in (yield from nesting.children(self, tr, w)):
            yield from self.forget(tr, sub)
        for begin, end in self.keys.ranges(w):
            tr.clear_range(begin, end)

    def prune(self, tr: Any, attempt: Any, limit: int, before: float) -> Gen[int]:
        """Forget up to ``limit`` workflows whose retention passed ``before`` (a time)
        and which are over (one still running is looked at again a retention later);
        the number of entries looked at."""
        keys = self.keys
        r = keys.expiry.range()
        now = time.time()
        entries = yield from Range(snap(tr), r.start, keys.expiry.pack((before,)), limit).read()
        for kv in entries:
            _, w = keys.expiry.unpack(kv.key)
            tr.add_read_conflict_key(kv.key)
            tr.clear(kv.key)
            header = yield from self.header(tr, w)
            done = read_le64((yield from read(tr.get(keys.tally(w, DONE)))))
            total = read_le64((yield from read(tr.get(keys.tally(w, TOTAL)))))
            if header is None or header.status != RUNNING or done >= total:
                yield from self.forget(tr, w)
            else:
                tr.set(keys.due(now + self.retention, w), b"")
        attempt.idle = not entries
        return len(entries)
