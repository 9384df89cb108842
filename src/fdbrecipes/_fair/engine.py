"""The engine behind FairQueue: a queue per group, and a weighted pick among groups.

Each group has a Queue of its own (under ``q/(group)``, see :class:`._layout.FairLayout`).
The groups that can be served now, *eligible* ones (a visible item, a free slot under
their ``limit``, room under their ``rate``), are the items of a WeightTree, each
weighted by its ``share``: a claim picks one with probability share / total, in
O(log n) however many groups there are, then claims from that group's queue.

The tree is kept exact by the transactions that change what it depends on.  A push
(of a visible item), an ack, a release and a bury read, with read conflicts, the
group's membership and (when it is not a member) its state, and add the group when it
became eligible; a claim that leaves its group ineligible removes it.  Whatever a
decision was based on is read with a conflict, so two such transactions that
would each leave the decision to the other conflict instead.  Eligibility can also
come back with time alone (a delay ends, a lease expires, a rate window passes): the
transaction that removes a group, or that delays an item, asks for a look at that time
under ``w/(time, group)``, and claims look at a few due groups before they pick.  A
claim that picks a group found ineligible (its state changed with time) removes it and
picks again.

With shared limits (``gate``), a claim also checks the picked group's candidates
against them (``_ordered.shards.claim_admitted``); a parked job's return asks for a look at its
group (``Comeback``).

No key is written by every claim of every group: claims of different groups touch
different keys, but for the tree's sums (atomic, conflict-free) and, by chance, the
same due look-ups.

Sharded (``shards`` > 1), each group's queue is spread over the shards
(:mod:`.._ordered.shards`): shard k of group g under ``S/"l"/(k,)/"q"/(g,)``, with
the index entry its pushes write (``S/"l"/(k,)/"a"/(g,)``) and the wake counter its
pushes touch (``S/"l"/(k,)/"n"/("pushed",)``); shard 0 where an unsharded FairQueue
keeps them.  The lottery, the policies, the rates, the looks, the ids and the job
records stay the structure's: a group's limit and rate count its claims in every shard.
"""

from __future__ import annotations

import random
import struct
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)

import fdb.tuple

from .._attempt import Attempt
from .._clock import Clock
from .._fdb import (
    Gen,
    Range,
    Tally,
    clear_except,
    read,
    read_le64,
    ready,
    seconds_to_versions,
    snap,
)
from .._ids import Ids
from .._layout import (
    LEASE,
    FairLayout,
    Marker,
    RecordLayout,
    TreeLayout,
    kept_by_clear,
    shard_space,
)
from .._limits.gate import Gate
from .._limits.slots import Comeback
from .._ordered.front import MIN
from .._ordered.leases import SCAN, Lease, lease_id, with_terms
from .._ordered.requests import PushRequest
from .._ordered.shard_listing import ShardedDeadLetters, ShardedListing
from .._ordered.shards import ShardedEngine, ShardedLeases, Shards, claim_admitted, make_shards
from .._records.records import Records
from .._records.tokens import TimedPlace
from .._tree.engine import Key, Tree, TreeRequest, View, parse_handle
from .._values import BATCH_BYTES, decode_value, encode_value, lease_shard
from .._waiting import Readiness
from .parts import FairLease, Group, Policy, State, index_order, parse_fair

__all__ = ["Fair"]

T = TypeVar("T")

#: How long a group's membership id is remembered after it left the tree: at once
#: forgotten, so the group can come back in the next transaction.
MEMBERSHIP_RETENTION = 1e-6
#: Groups due for a look that one claim looks at, at most.
WAKES_PER_CLAIM = 4
#: Picks one claim makes at most, when it finds the groups it picked ineligible.
PICKS = 4
#: Groups whose engines a FairQueue object keeps.
GROUP_CACHE = 4_096


_TIMES = struct.Struct("<q")


class Fair:
    """A FairQueue's operations (see the module docstring); every method runs in one
    transaction."""

    def __init__(self, layout: FairLayout, clock: Clock, default: Policy,
                 max_deliveries: Optional[int], id_retention: float,
                 history: Optional[float] = None, shards: int = 1,
                 workflows: Optional[Dict[bytes, Any]] = None,
                 gate: Optional[Gate] = None) -> None:
        self.keys = layout
        #: the workflow stores made with the FairQueue (see ``Ordered.workflows``)
        self.workflows: Dict[bytes, Any] = {} if workflows is None else workflows
        #: the shared limits its claims check (a FairQueue made with ``limits=``), or None
        self.gate = gate
        #: Each shard's groups, index entries and wake counter (shard 0: ``keys``).
        self.shard_keys = [layout] + [FairLayout(shard_space(layout.subspace, k))
                                      for k in range(1, shards)]
        self.history = history
        self.clock = clock
        self.default = default
        self.max_deliveries = max_deliveries
        self.id_retention = id_retention
        tree_space = layout.tree
        self.tree = Tree(TreeLayout(tree_space), random.SystemRandom(), clock,
                         Ids(tree_space, MEMBERSHIP_RETENTION))
        self._groups: Dict[Any, Group] = {}

    # -- groups ----------------------------------------------------------------------

    def group(self, g: Any) -> Group:
        """The engine of group ``g``'s queue (kept for the next calls): its shards' ids
        and job records are shard 0's."""
        found = self._groups.get(g)
        if found is None:
            if len(self._groups) >= GROUP_CACHE:
                self._groups.clear()
            spaces = [keys.groups[g] for keys in self.shard_keys]
            records = Records(RecordLayout(spaces[0], self.keys.expiry, (g,)), self.history)
            parts = make_shards(spaces, 0, self.clock,
                                Ids(spaces[0], self.id_retention), self.max_deliveries,
                                records, self.gate, self.workflows)
            for part in parts:  # a parked job moved back: a look at its group, at once
                part.engine.comeback = Comeback(self.keys.wake_key(0, g), self.keys.pushed)
            if len(parts) == 1:
                found = Group(*parts[0], parts)
            else:
                spread = Shards(parts, 0)
                found = Group(ShardedEngine(spread), ShardedLeases(spread),
                              ShardedDeadLetters(spread), ShardedListing(spread), parts)
            self._groups[g] = found
        return found

    def member_id(self, g: Any) -> bytes:
        """The id under which group ``g`` is in the tree."""
        gid: bytes = fdb.tuple.pack((g,))
        return gid

    def member(self, tr: Any, g: Any, now: int) -> Gen[Optional[Key]]:
        """Group ``g``'s key in the tree, or None (a read conflict on its id)."""
        gid = self.member_id(g)
        checks = self.tree.ids.check(tr, [gid])
        assert checks is not None
        handle = yield from self.tree.ids.known(checks, gid, now)
        return None if handle is None else parse_handle(handle)

    def policy(self, raw: Optional[bytes]) -> Policy:
        """A stored policy, or the default."""
        if raw is None:
            return self.default
        share, limit, count, seconds = fdb.tuple.unpack(raw)
        return Policy(share, limit, None if count is None else (count, seconds))

    def look(self, tr: Any, attempt: Attempt, g: Any, n: int = 2) -> Gen[State]:
        """Group ``g``'s state, read with conflicts (see :class:`State`): every shard's
        front (its first ``n`` visible items) and items in flight, side by side."""
        group = self.group(g)
        policy = tr.get(self.keys.policies.pack((g,)))
        times = tr.get(self.keys.rates.pack((g,)))
        held = [(tr.get(p.engine.keys.held_in), tr.get(p.engine.keys.held_out))
                for p in group.parts]
        front = yield from group.engine.front(tr, MIN, n, conflict=True, attempt=attempt)
        expired = sum(1 for e in front.holds if e.hold is not None and e.hold.kind == LEASE)
        in_flight = -expired
        for held_in, held_out in held:
            in_flight += (read_le64((yield from read(held_in)))
                          - read_le64((yield from read(held_out))))
        raw = yield from read(times)
        stamps = () if not raw else tuple(
            _TIMES.unpack_from(raw, i)[0] for i in range(0, len(raw), _TIMES.size))
        stored = yield from read(policy)
        return State(self.policy(stored), front, in_flight, stamps, stored is not None)

    def next_look(self, tr: Any, g: Any, state: State, now: int) -> Gen[Optional[int]]:
        """When group ``g`` (not eligible at ``now``) may become eligible with time
        alone: the end of its next hold (a delay, a lease), or of its rate window;
        None when nothing but a write can make it eligible."""
        when: List[int] = []
        rate = state.policy.rate
        if rate is not None and not state.room(now):
            when.append(state.times[-rate[0]] + seconds_to_versions(rate[1]) + 1)
        started = [(p.engine.keys.due, Range(snap(tr), p.engine.keys.due.pack((now + 1,)),
                                             p.engine.keys.due_range.stop, 1))
                   for p in self.group(g).parts]
        for due, first in started:
            kv = yield from first.first()
            if kv is not None:
                when.append(due.unpack(kv.key)[0] + 1)
        return min(when) if when else None

    # -- keeping the tree exact ------------------------------------------------------

    def enlist(self, tr: Any, attempt: Attempt, g: Any, share: int) -> Gen[None]:
        """Put group ``g`` in the tree with weight ``share`` (once: its id)."""
        request = TreeRequest([(encode_value(g), share)], self.member_id(g))
        yield from self.tree.push(tr, attempt, [request])

    def unlist(self, tr: Any, attempt: Attempt, g: Any, key: Key, state: State,
               now: int) -> Gen[None]:
        """Take group ``g`` (its key ``key`` in the tree) out of the tree, and ask for
        a look when time alone may make it eligible again."""
        yield from self.tree.remove(tr, attempt, key)
        when = yield from self.next_look(tr, g, state, now)
        if when is not None:
            tr.set(self.keys.wake_key(when, g), b"")

    def revise(self, tr: Any, attempt: Attempt, g: Any, now: int,
               key: Optional[Key]) -> Gen[None]:
        """Make group ``g``'s membership match its state (``key``: its key in the
        tree, as read with a conflict, or None).  The leases it finds expired on their
        last delivery are buried now: a group out of the tree is claimed from no more."""
        state = yield from self.look(tr, attempt, g)
        if state.front.dead:
            tally = Tally()
            self.group(g).engine.settle(tr, state.front._replace(entries=[], expired=[]),
                                        tally)
            tally.write(tr, attempt)
        eligible = state.eligible(now)
        if eligible and key is None:
            yield from self.enlist(tr, attempt, g, state.policy.share)
        elif not eligible:
            if key is not None:
                yield from self.tree.remove(tr, attempt, key)
            if not (state.bare() and (yield from self.retire(tr, g, now))):
                when = yield from self.next_look(tr, g, state, now)
                if when is not None:
                    tr.set(self.keys.wake_key(when, g), b"")

    def retire(self, tr: Any, g: Any, now: int) -> Gen[bool]:
        """If group ``g`` (not in the tree, nothing visible or in flight, no policy:
        see :meth:`State.bare`) has no delayed item and no dead letter either, take it
        out of the index of groups and clear its keys, but for the idempotency ids it
        still remembers (a look is asked for when the last of them expires, which
        clears them) and its job records (all finished: pruned in their time); True if
        it did.

        Reads its delayed and dead counters and its latest id expiry by snapshot, and
        takes a read conflict on its index entry, which every push (and
        :meth:`set_group`) writes: a concurrent push makes this transaction conflict,
        so a group is never retired while an item arrives.
        """
        parts = self.group(g).parts
        engine = parts[0].engine  # the group's ids and records
        reader = snap(tr)
        counts = [[reader.get(key) for key in (p.engine.keys.delayed_in,
                                               p.engine.keys.delayed_out,
                                               p.engine.keys.dead_in, p.engine.keys.dead_out)]
                  for p in parts]
        gc = engine.ids.gc.range()
        last_id = Range(reader, gc.start, gc.stop, 1, reverse=True)
        for futures in counts:
            read_counts = []
            for future in futures:
                read_counts.append(read_le64((yield from read(future))))
            delayed_in, delayed_out, dead_in, dead_out = read_counts
            if delayed_in != delayed_out or dead_in != dead_out:
                return False
        for keys in self.shard_keys:
            index = keys.active.pack((g,))
            tr.add_read_conflict_key(index)
            tr.clear(index)
        jobs = engine.records.keys.jobs.range()
        kept: List[Tuple[bytes, bytes]] = [(bytes(jobs.start), bytes(jobs.stop))]
        kv = yield from last_id.first()
        if kv is not None:
            expiry = engine.ids.gc.unpack(kv.key)[0]
            if expiry > now:  # ids still remembered: kept until the last one expires
                ids = engine.ids.ids.range()
                kept += [(bytes(ids.start), bytes(ids.stop)), (bytes(gc.start), bytes(gc.stop))]
                tr.set(self.keys.wake_key(expiry + 1, g), b"")
        space = self.keys.groups[g].range()
        clear_except(tr, bytes(space.start), bytes(space.stop), sorted(kept))
        for keys in self.shard_keys[1:]:
            other = keys.groups[g].range()
            tr.clear_range(other.start, other.stop)
        return True

    def after_change(self, tr: Any, attempt: Attempt, g: Any, now: int) -> Gen[None]:
        """After a write that can only make group ``g`` more eligible (a push, an ack,
        a release): enlist it if it is not a member and became eligible."""
        if (yield from self.member(tr, g, now)) is None:
            yield from self.revise(tr, attempt, g, now, None)

    def look_due(self, tr: Any, attempt: Attempt, now: int) -> Gen[int]:
        """Look at up to :data:`WAKES_PER_CLAIM` groups due for a look; how many."""
        due = yield from Range(snap(tr), self.keys.wakes_range.start,
                               self.keys.wakes.pack((now + 1,)), WAKES_PER_CLAIM).read()
        for kv in due:
            _, g = self.keys.wakes.unpack(kv.key)
            tr.add_read_conflict_key(kv.key)
            tr.clear(kv.key)
            key = yield from self.member(tr, g, now)
            yield from self.revise(tr, attempt, g, now, key)
        return len(due)

    def touch(self, tr: Any, shard: int = 0) -> None:
        """Wake the waiters (they watch every shard's wake counter; this touches
        ``shard``'s): something may have become claimable."""
        tr.add(self.shard_keys[shard].pushed, _TIMES.pack(1))

    def clear(self, tr: Any) -> None:
        """Clear every key but the wake counters, the marker and the receipt slots,
        and wake the waiters."""
        subspace = self.keys.subspace
        marker = [Marker.key(subspace)] if len(self.shard_keys) > 1 else []
        r = subspace.range()
        clear_except(tr, bytes(r.start), bytes(r.stop),
                     kept_by_clear(subspace, *marker, *(k.pushed for k in self.shard_keys)))
        self.touch(tr)

    # -- operations ------------------------------------------------------------------

    def push(self, tr: Any, attempt: Attempt, g: Any, request: PushRequest) -> Gen[bool]:
        """Push ``request`` into group ``g`` (into a shard drawn at random); whether it
        stored (False: a known id)."""
        parts = self.group(g).parts
        k = random.randrange(len(parts))
        into = None if len(parts) == 1 else [parts[k].engine]
        stored = (yield from parts[0].engine.push(tr, attempt, [request], into))[0]
        if stored:
            now = yield from attempt.now(tr, self.clock)
            tr.set(self.shard_keys[k].active.pack((g,)), b"")
            self.touch(tr, k)
            if request.delay:
                tr.set(self.keys.wake_key(now + request.delay, g), b"")
            else:
                yield from self.after_change(tr, attempt, g, now)
        attempt.idle = not stored
        return stored

    def claim(self, tr: Any, attempt: Attempt, seconds: float) -> Gen[Optional[FairLease]]:
        """Pick an eligible group by share, claim its oldest visible item."""
        leases = yield from self.claim_many(tr, attempt, 1, seconds, None)
        return leases[0] if leases else None

    def claim_many(self, tr: Any, attempt: Attempt, n: int, seconds: float,
                   holder: Optional[str]) -> Gen[List[FairLease]]:
        """Up to ``n`` claims (by ``holder``, for the job records), each from a group
        picked by share among the eligible ones (a group may be picked again: its state
        is read again, so its limit and rate hold); stops early when no group can be
        served, or after :data:`PICKS` picks of groups found ineligible (each taken out
        of the tree); none while the structure is paused (its flag read with a read
        conflict: a pause committed meanwhile makes the claim retry and find it)."""
        paused = tr.get(self.keys.paused)
        admission = None if self.gate is None else self.gate.admission(tr)
        now = yield from attempt.now(tr, self.clock)
        if (yield from read(paused)) is not None:
            return []
        wrote = (yield from self.look_due(tr, attempt, now)) > 0
        out: List[FairLease] = []
        taken: List[Tuple[Any, bytes]] = []  # (group, lease id) of each claim, to undo it
        misses = 0
        while len(out) < n and misses < PICKS:
            view = yield from View.read(self.tree, tr)
            picked = yield from self.tree.pick(tr, view, None)
            if picked is None:
                break
            key, _, encoded = picked
            g = decode_value(encoded)
            scan = 2 if admission is None else max(2, SCAN // len(self.shard_keys))
            state = yield from self.look(tr, attempt, g, scan)  # limits: ~64 over the shards
            engine = self.group(g)
            tally = Tally()
            wrote = engine.engine.settle(tr, state.front, tally) or wrote
            if not state.eligible(now):
                tally.write(tr, attempt)
                yield from self.unlist(tr, attempt, g, key, state, now)
                wrote = True
                misses += 1
                continue
            blocked = False
            if admission is None:
                lease: Optional[Lease] = engine.leases.hold_entries(
                    tr, attempt, now, state.front.entries[:1], seconds, BATCH_BYTES, tally,
                    holder)[0]
            else:
                lease, blocked = yield from claim_admitted(
                    tr, attempt, admission, engine.engine, engine.parts, state.front,
                    seconds, tally, holder)
                wrote = wrote or blocked
            tally.write(tr, attempt)
            if lease is None:  # its candidates all held back by the shared limits
                yield from self.revise(tr, attempt, g, now, key)
                misses += 1
                continue
            after = state.after_claim(now)
            if state.policy.rate is not None:
                self.note_claim(tr, g, after)
            if blocked:  # jobs parked or delayed: what is left is read again
                yield from self.revise(tr, attempt, g, now, key)
            elif not after.eligible(now):
                yield from self.unlist(tr, attempt, g, key, after, now)
            out.append(FairLease(lease, g))
            taken.append((g, lease_id(lease)))
        if out:
            attempt.undo = (self.unclaim, (taken,))
        attempt.idle = not (out or wrote)
        if out and self.history is not None:
            yield from with_terms(tr, [(self.group(lease.group).records, lease)
                                       for lease in out])
        return out

    def note_claim(self, tr: Any, g: Any, state: State) -> None:
        """Keep the latest claim times the group's rate needs."""
        assert state.policy.rate is not None
        kept = state.times[-state.policy.rate[0]:]
        tr.set(self.keys.rates.pack((g,)), b"".join(_TIMES.pack(t) for t in kept))

    def unclaim(self, tr: Any, attempt: Attempt,
                claims: Sequence[Tuple[Any, bytes]]) -> Gen[None]:
        """Undo claims whose caller was cancelled (``(group, lease id)`` pairs): the
        items back, their groups revised."""
        by_group: Dict[Any, List[bytes]] = {}
        for g, hold_id in claims:
            by_group.setdefault(g, []).append(hold_id)
        now = yield from attempt.now(tr, self.clock)
        for g, ids in by_group.items():
            parts = self.group(g).parts
            for k, part in enumerate(parts):
                mine = [i for i in ids if len(parts) == 1 or lease_shard(i) == k]
                if mine:
                    yield from part.leases.unclaim(tr, attempt, mine)
            yield from self.after_change(tr, attempt, g, now)
        self.touch(tr)
        attempt.idle = False

    def settle_lease(self, tr: Any, attempt: Attempt, op: str, lease: Any,
                     *args: Any) -> Gen[Any]:
        """Ack, release or bury a FairQueue lease (``op``: the Leases method's name),
        then revise its group, whose slot is free now."""
        g, token = parse_fair(lease)
        leases = self.group(g).leases
        result = yield from getattr(leases, op)(tr, attempt, token, *args)
        wrote = not attempt.idle
        if wrote:
            now = yield from attempt.now(tr, self.clock)
            self.touch(tr, self.shard_of(token))
            yield from self.after_change(tr, attempt, g, now)
        attempt.idle = not wrote
        return result

    def shard_of(self, token: bytes) -> int:
        """The shard lease ``token`` (in its group's queue) is in; 0 unsharded."""
        k = lease_shard(lease_id(token))
        return k if k < len(self.shard_keys) else 0

    def ack_many(self, tr: Any, attempt: Attempt, leases: Sequence[Any],
                 results: Optional[Sequence[Optional[bytes]]] = None,
                 states: Optional[Sequence[str]] = None) -> Gen[List[bool]]:
        """Ack every lease still alive, group by group (each job's record with its
        result of ``results`` and its state of ``states``, if given: see
        ``Leases.ack_many``); for each, whether it was."""
        by_group: Dict[Any, List[int]] = {}
        tokens: List[bytes] = []
        for i, lease in enumerate(leases):
            g, token = parse_fair(lease, f"leases[{i}]")
            by_group.setdefault(g, []).append(i)
            tokens.append(token)
        done = [False] * len(leases)
        now = yield from attempt.now(tr, self.clock)
        for g, where in by_group.items():
            acked = yield from self.group(g).leases.ack_many(
                tr, attempt, [tokens[i] for i in where],
                None if results is None else [results[i] for i in where],
                None if states is None else [states[i] for i in where])
            for i, ok in zip(where, acked):
                done[i] = ok
            if any(acked):
                yield from self.after_change(tr, attempt, g, now)
        if any(done):
            self.touch(tr, self.shard_of(tokens[done.index(True)]))
        attempt.idle = not any(done)
        return done

    def extend_many(self, tr: Any, attempt: Attempt, leases: Sequence[Any],
                    seconds: float) -> Gen[List[Optional[FairLease]]]:
        """Extend every lease still alive, group by group."""
        by_group: Dict[Any, List[int]] = {}
        for i, lease in enumerate(leases):
            by_group.setdefault(parse_fair(lease, f"leases[{i}]")[0], []).append(i)
        out: List[Optional[FairLease]] = [None] * len(leases)
        wrote = False
        for g, where in by_group.items():
            tokens = [parse_fair(leases[i])[1] for i in where]
            renewed = yield from self.group(g).leases.extend_many(tr, attempt, tokens, seconds)
            wrote = wrote or not attempt.idle
            for i, lease in zip(where, renewed):
                out[i] = None if lease is None else FairLease(lease, g)
        attempt.idle = not wrote
        return out

    def set_group(self, tr: Any, attempt: Attempt, g: Any, policy: Policy) -> Gen[None]:
        """Store group ``g``'s policy, and make its membership (and weight) match."""
        now = yield from attempt.now(tr, self.clock)
        key = yield from self.member(tr, g, now)
        tr.set(self.keys.policies.pack((g,)), fdb.tuple.pack(
            (policy.share, policy.limit, *(policy.rate or (None, None)))))
        tr.set(self.keys.active.pack((g,)), b"")
        if key is not None:
            yield from self.tree.set_weight(tr, attempt, key, policy.share)
        yield from self.revise(tr, attempt, g, now, key)
        self.touch(tr)
        attempt.idle = False

    def group_policy(self, tr: Any, g: Any) -> Gen[Policy]:
        """Group ``g``'s policy (read with a conflict)."""
        return self.policy((yield from read(tr.get(self.keys.policies.pack((g,))))))

    def groups(self, tr: Any, limit: Optional[int], after: Any = None) -> Gen[List[Any]]:
        """The groups in the index, after the group ``after`` if given: those with work
        (visible, delayed, in flight or dead items) or a policy (see :meth:`retire`);
        every shard's entries, read side by side, merged."""
        found = []
        for keys in self.shard_keys:
            r = keys.active.range()
            begin = r.start if after is None else keys.active.range((after,)).stop
            found.append((keys.active, Range(tr, begin, r.stop, limit or 0)))
        groups: List[Any] = []
        for active, started in found:
            groups += (active.unpack(kv.key)[0] for kv in (yield from started.read()))
        if len(found) == 1:
            return groups
        return sorted(set(groups), key=index_order)[:limit]

    def refresh(self, tr: Any, attempt: Attempt, g: Any) -> Gen[None]:
        """Make group ``g``'s membership (and its place in the index) match its state,
        after a write that may have made it less eligible (a removal, a purge)."""
        now = yield from attempt.now(tr, self.clock)
        key = yield from self.member(tr, g, now)
        yield from self.revise(tr, attempt, g, now, key)

    def refreshing(self, tr: Any, attempt: Attempt, g: Any, op: Callable[..., Gen[T]],
                   *args: Any) -> Gen[T]:
        """``op(tr, attempt, *args)``, an operation on group ``g``'s queue that may make
        it less eligible (a removal, a purge); then, if it did anything (a result that
        is not None, 0 or empty), refresh the group (see :meth:`refresh`)."""
        done = yield from op(tr, attempt, *args)
        if done:
            yield from self.refresh(tr, attempt, g)
            attempt.idle = False
        return done

    def requeue_dead(self, tr: Any, attempt: Attempt, g: Any, limit: int,
                     at: Optional[List[TimedPlace]] = None) -> Gen[int]:
        """Push group ``g``'s dead letters (the oldest ``limit``, or those ``at``
        names) back; then revise the group."""
        moved = yield from self.group(g).dead.requeue(tr, attempt, limit, at)
        if moved:
            now = yield from attempt.now(tr, self.clock)
            self.touch(tr)
            yield from self.after_change(tr, attempt, g, now)
        return moved

    def ready(self, tr: Any) -> Gen[Readiness]:
        """Whether a group is eligible now, or is due for a look; else the seconds
        until the next look is due.  Never while the structure is paused (its resume
        touches the wake key)."""
        paused = snap(tr).get(self.keys.paused)
        total = yield from read(snap(tr).get(self.tree.keys.total_key))
        if (yield from read(paused)) is not None:
            return False, None
        if read_le64(total) > 0:
            return True, None
        now = yield from ready(tr.get_read_version())
        kv = yield from Range(snap(tr), self.keys.wakes_range.start, self.keys.wakes_range.stop,
                              1).first()
        if kv is None:
            return False, None
        when = self.keys.wakes.unpack(kv.key)[0]
        if when <= now:
            return True, None
        return False, (when - now) / 1e6
