"""A Queue or PriorityQueue spread over shards: whole engines, and what picks among them.

A structure made with ``shards=N`` (N > 1) is N whole engines (:class:`.engine.Ordered`
with its leases, dead letters and listings), one per shard, each in its own key range
(:func:`.._layout.shard_space`: shard 0 at ``S`` exactly as an unsharded structure,
shard k at ``S/"l"/(k,)``).  Whatever a push writes (the item, the counters, the wake
key) and whatever a claim writes (the hold, the deadline index, the floor) is its
shard's own, so the shards' ranges can live on different storage teams (so is the
pause flag, the prefix of each shard's deadline index, which pausing writes in every
shard); the ids and the job records are the structure's, shared.  The classes here do for
the operations object (:mod:`.._ops.ordered`) what one engine, its leases and its high-contention
popper do, over the shards (:mod:`.shard_listing` does the listings):

* a push goes to a shard drawn at random, the whole call in it;
* a pop or a claim of a Queue reads one shard drawn at random, as an unsharded queue
  would (a strict take is strict in it, ``spread`` applies in it), and when it holds
  fewer than asked, every other shard side by side, by snapshot (a strict take then
  conflicts on the range of the shard it takes from, up to its item); a
  PriorityQueue's reads every shard's front and takes the best priority (among shards
  tied on it, one at random);
* a lease goes to the shard its id names (:func:`.._values.lease_shard`).

Order: items leave each shard in its order (FIFO, or priority then FIFO), exactly as
in an unsharded structure; between shards a Queue keeps no order (a pop takes the front
of a shard drawn at random: an item at the front of its shard is taken by each pop
with probability 1/N while every shard has items).  A strict PriorityQueue pop reads
every shard's front with a read conflict, so it takes the best priority at its commit.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from fdb.subspace_impl import Subspace

from .._attempt import Attempt, gather, side_by_side
from .._clock import Clock
from .._fdb import Gen, Tally, clear_structure
from .._ids import Ids
from .._layout import Marker, OrderedLayout, kept_by_clear, shard_space
from .._limits.admission import Admission
from .._limits.gate import Gate
from .._records.history import terms_known
from .._records.records import Records
from .._retry import RetryLoop
from .._values import BATCH_BYTES, Value, lease_shard
from .._waiting import Readiness
from .contention import Contention
from .counts import QueueStats
from .dead import DeadLetters
from .engine import Ordered, Takes
from .front import MIN, OTHER_END, Entry, Front, choose, value_of
from .leases import Claims, Lease, Leases, answers, claimed, lease_id
from .listing import Listing
from .requests import PushRequest

__all__ = ["REST_SPREAD", "Shard", "ShardedContention", "ShardedEngine", "ShardedLeases", "Shards",
           "claim_admitted", "in_turn", "make_shards", "shard_spaces"]

#: The largest spread a take reads the other shards with once the first ran short
#: (see :meth:`Shards.rest`).
REST_SPREAD = 64
#: What a take read in one shard: the shard, its front and the entries it takes there.
Pick = Tuple["Shard", Front, List[Entry]]

_chance = random.Random()


class Shard(NamedTuple):
    """One shard: its engine, and its leases, dead letters and listings."""

    engine: Ordered
    leases: Leases
    dead: DeadLetters
    listing: Listing


def shard_spaces(subspace: Subspace, count: int) -> List[Subspace]:
    """The subspaces of the ``count`` shards of the structure at ``subspace``."""
    return [shard_space(subspace, k) for k in range(count)]


def make_shards(spaces: Sequence[Subspace], group_len: int, clock: Clock, ids: Ids,
                max_deliveries: Optional[int], records: Records,
                gate: Optional[Gate] = None,
                workflows: Optional[Dict[bytes, Any]] = None) -> List[Shard]:
    """The shards of a structure, one per subspace of ``spaces``, sharing ``ids``,
    ``records``, the limits' ``gate`` and the structure's ``workflows`` (see
    ``Ordered.workflows``); one shard (numbered None: unsharded) when ``spaces`` has
    one."""
    parts = []
    for k, space in enumerate(spaces):
        engine = Ordered(OrderedLayout(space, group_len), clock, ids, max_deliveries,
                         records, None if len(spaces) == 1 else k, gate, workflows)
        parts.append(Shard(engine, Leases(engine), DeadLetters(engine), Listing(engine)))
    return parts


def best(picks: List[Pick], end: str, n: int) -> List[Pick]:
    """``picks`` (each shard's front and the entries chosen there, in a random order of
    the shards) cut to the ``n`` best entries of a PriorityQueue at ``end``: by
    priority, then by that order of the shards, then in each shard's order."""
    sign = 1 if end == MIN else -1
    ranked = sorted((sign * entry.item[0], rank, i)
                    for rank, (_, _, entries) in enumerate(picks)
                    for i, entry in enumerate(entries))
    kept = {(rank, i) for _, rank, i in ranked[:n]}
    return [(shard, front, [e for i, e in enumerate(entries) if (rank, i) in kept])
            for rank, (shard, front, entries) in enumerate(picks)]


class Shards:
    """The shards of one structure, and how a call picks among them (see the module
    docstring)."""

    __slots__ = ("group_len", "parts", "prefixes")

    def __init__(self, parts: List[Shard], group_len: int) -> None:
        self.parts = parts
        self.group_len = group_len
        self.prefixes = [bytes(p.engine.keys.items.key()) for p in parts]

    @property
    def records(self) -> Records:
        """The structure's job records (every shard's are the same)."""
        return self.parts[0].engine.records

    def for_push(self) -> Shard:
        """The shard a push goes to: one drawn at random."""
        return _chance.choice(self.parts)

    def order(self) -> List[Shard]:
        """Every shard, in a random order."""
        return _chance.sample(self.parts, len(self.parts))

    def of_hold(self, hold_id: bytes) -> Shard:
        """The shard lease ``hold_id`` is in (shard 0 for an id that names none)."""
        k = lease_shard(hold_id)
        return self.parts[k] if k < len(self.parts) else self.parts[0]

    def of_lease(self, lease: Any) -> Shard:
        """The shard of ``lease`` (a Lease, or its token)."""
        return self.of_hold(lease_id(lease))

    def of_entry(self, entry: Entry) -> Shard:
        """The shard holding ``entry`` (its key is an item key of that shard)."""
        for part, prefix in zip(self.parts, self.prefixes):
            if entry.key.startswith(prefix):
                return part
        raise AssertionError(f"no shard holds {entry.key!r}")

    def by_lease(self, leases: Sequence[Any]) -> Dict[int, List[int]]:
        """The positions in ``leases`` of each shard's leases, by shard number."""
        where: Dict[int, List[int]] = {}
        for i, lease in enumerate(leases):
            k = lease_shard(lease_id(lease))
            where.setdefault(k if k < len(self.parts) else 0, []).append(i)
        return where

    def chosen(self, tr: Any, attempt: Attempt, end: str, n: int,
               spread: int) -> Gen[List[Pick]]:
        """What a pop or claim of ``n`` items with ``spread`` reads and takes, shard by
        shard (see the module docstring).  A PriorityQueue's reads every shard as an
        unsharded one is read (:meth:`.front.FrontReader.chosen`, with its read
        conflicts); a Queue's, one shard so, then, if it holds too few, the others by
        snapshot (:meth:`rest`)."""
        order = self.order()
        if self.group_len:  # a PriorityQueue: every front
            found = yield from gather([s.engine.chosen(tr, attempt, end, n, spread)
                                       for s in order])
            return best([(s, front, entries) for s, (front, entries) in zip(order, found)],
                        end, n)
        first = order[0]
        front, entries = yield from first.engine.chosen(tr, attempt, end, n, spread)
        picks: List[Pick] = [(first, front, entries)]
        if len(entries) < n and len(order) > 1:
            picks += yield from self.rest(tr, attempt, order[1:], end, n - len(entries),
                                          n == 1 and spread == 1, spread)
        return picks

    def rest(self, tr: Any, attempt: Attempt, order: List[Shard], end: str, short: int,
             strict: bool, spread: int) -> Gen[List[Pick]]:
        """The takes from ``order``'s shards of what the first shard lacked (``short``
        items): every shard's front read side by side by snapshot, the items chosen in
        the shards' order (each among its shard's first ``short + spread - 1``, the
        spread at most :data:`REST_SPREAD`: the first shard ran short, the queue is
        nearly drained, and a worker's spread of many blocks would read hundreds of
        items of every shard).  A
        ``strict`` take of one item takes a read conflict on its shard's range up to it,
        as a strict take reading that shard alone would; none while the structure is
        paused (every shard's flag comes with its front: see
        :meth:`.front.FrontReader.paused_front`)."""
        spread = min(spread, REST_SPREAD)
        found: List[Front] = yield from gather([
            s.engine.front(tr, end, short + spread - 1, conflict=False, attempt=attempt)
            for s in order])
        picks: List[Pick] = []
        for shard, front in zip(order, found):
            if shard.engine.paused_front(tr, front):
                return []
            taking = choose(front.entries, short, spread)
            short -= len(taking)
            if taking and strict:
                tr.add_read_conflict_range(shard.engine.keys.items_range.start,
                                           taking[0].key + b"\x00")
            picks.append((shard, front, taking))
        return picks


class ShardedEngine(Takes):
    """What :class:`.engine.Ordered` does for the operations object, over the shards
    (see the module docstring).  Every method runs inside one transaction."""

    __slots__ = ("shards",)

    def __init__(self, shards: Shards) -> None:
        self.shards = shards

    @property
    def parts(self) -> List[Shard]:
        return self.shards.parts

    # -- push and take -------------------------------------------------------------------

    def push(self, tr: Any, attempt: Attempt,
             requests: Sequence[PushRequest]) -> Gen[List[bool]]:
        """Push each request into a shard drawn at random (see :meth:`Ordered.push`:
        the ids are checked once, across the shards)."""
        into = [self.shards.for_push().engine for _ in requests]
        return (yield from self.parts[0].engine.push(tr, attempt, requests, into))

    def pop(self, tr: Any, attempt: Attempt, n: int, end: str,
            spread: int) -> Gen[List[Value]]:
        """Remove and return up to ``n`` values (see :meth:`Shards.chosen`)."""
        picks = yield from self.shards.chosen(tr, attempt, end, n, spread)
        tally = Tally()
        settled = False
        values: List[Value] = []
        parts = []
        for shard, front, entries in picks:
            settled = shard.engine.settle(tr, front, tally) or settled
            part = attempt.fork()
            values += shard.engine.taken(tr, part, entries, front.now, tally)
            parts.append(part)
        attempt.join(parts)
        tally.write(tr, attempt)
        attempt.idle = not (values or settled)
        return values

    # -- reading -------------------------------------------------------------------------

    def peek(self, tr: Any, end: str, n: Optional[int],
             after: Optional[Entry] = None) -> Gen[List[Entry]]:
        """The first ``n`` entries (all when None) of every shard, after the place of
        ``after``, merged by place (at a PriorityQueue's MAX end, by priority first): the
        order of :meth:`.shard_listing.ShardedListing.pending`, which each shard's own
        follows (read conflicts as :meth:`Ordered.peek`, side by side)."""
        found = yield from gather([p.engine.peek(tr, end, n, self.after_in(p, after))
                                   for p in self.parts])
        key = self.place_order if end == MIN else self.priority_order
        return sorted((e for f in found for e in f), key=key)[:n]

    def after_in(self, shard: Shard, after: Optional[Entry]) -> Optional[Entry]:
        """A cursor in ``shard`` just after the place of ``after`` (an entry of any
        shard): it sorts after every key of an item at that place."""
        if after is None:
            return None
        place = self.place_order(after)
        return Entry(place, bytes(shard.engine.keys.items.pack(place)) + b"\xff", None)

    def place_order(self, entry: Entry) -> Tuple[Any, ...]:
        """Sort key of entries at the MIN end: their places."""
        place: Tuple[Any, ...] = entry.item[:self.shards.group_len + 2]
        return place

    def priority_order(self, entry: Entry) -> Tuple[Any, ...]:
        """Sort key of a PriorityQueue's entries at the MAX end: the highest priority
        first, then their places."""
        place = self.place_order(entry)
        return (-place[0], *place[1:])

    def size(self, tr: Any) -> Gen[int]:
        """Every shard's size (see :meth:`Ordered.size`), summed; read side by side."""
        return sum((yield from gather([p.engine.size(tr) for p in self.parts])))

    def stats(self, tr: Any) -> Gen[QueueStats]:
        """Every shard's stats (see :meth:`Ordered.stats`), summed; ``oldest_age`` the
        longest a front item waited.  Snapshot reads, side by side."""
        found: List[QueueStats] = yield from gather([p.engine.stats(tr) for p in self.parts])
        ages = [s.oldest_age for s in found if s.oldest_age is not None]
        return QueueStats(sum(s.visible for s in found), sum(s.delayed for s in found),
                          sum(s.in_flight for s in found), sum(s.dead for s in found),
                          max(ages) if ages else None)

    def ready(self, tr: Any, end: str) -> Gen[Readiness]:
        """Whether an item is visible in any shard; if not, the seconds until the
        first hold of any shard expires, or None (see :meth:`Ordered.ready`)."""
        found = yield from gather([p.engine.ready(tr, end) for p in self.parts])
        if any(is_ready for is_ready, _ in found):
            return True, None
        hints = [hint for _, hint in found if hint is not None]
        return False, (min(hints) if hints else None)

    def front(self, tr: Any, end: str, n: Optional[int], *, conflict: bool,
              attempt: Optional[Attempt] = None) -> Gen[Front]:
        """Every shard's front of ``n`` items (see :meth:`Ordered.front`), side by side,
        as one: the shards' entries one shard after the other, in a random order of
        the shards (a FairQueue group's)."""
        order = self.shards.order()
        fronts: List[Front] = yield from gather([
            p.engine.front(tr, end, n, conflict=conflict, attempt=attempt) for p in order])
        return Front([e for f in fronts for e in f.entries],
                     [e for f in fronts for e in f.expired], [e for f in fronts for e in f.dead],
                     fronts[0].now, [e for f in fronts for e in f.holds])

    # -- writing -------------------------------------------------------------------------

    def settle(self, tr: Any, front: Front, tally: Tally) -> bool:
        """Put back the expired holds ``front`` (of :meth:`front`) named, bury its dead,
        each in its shard; True if any."""
        settled = False
        for part in self.parts:
            mine = [[e for e in group if self.shards.of_entry(e) is part]
                    for group in (front.expired, front.dead)]
            if any(mine):
                settled = part.engine.settle(tr, Front([], mine[0], mine[1], front.now, []),
                                             tally) or settled
        return settled

    def wake(self, tally: Tally) -> None:
        """Touch shard 0's wake key (waiters watch every shard's)."""
        self.parts[0].engine.wake(tally)

    def clear(self, tr: Any, _attempt: Attempt) -> Gen[None]:
        """Remove every key of every shard and of the structure but the wake counters,
        the marker and the receipt slots (see :meth:`Ordered.clear`)."""
        keys = [p.engine.keys for p in self.parts]
        subspace = keys[0].subspace
        kept = kept_by_clear(subspace, Marker.key(subspace), *(k.pushed for k in keys))
        yield from clear_structure(tr, subspace, kept, [(k.pushed, k.taken) for k in keys])

    @property
    def restore_pending(self) -> bool:
        """Whether a reader of any shard met more expired holds than it put back."""
        return any(p.engine.restore_pending for p in self.parts)

    @restore_pending.setter
    def restore_pending(self, pending: bool) -> None:
        for p in self.parts:
            p.engine.restore_pending = pending

    def restore(self, tr: Any, attempt: Attempt, limit: int) -> Gen[int]:
        """Put back (or bury) up to ``limit`` expired holds, shard after shard; the
        number handled (see :meth:`Ordered.restore`)."""
        return in_turn(tr, attempt, [p.engine.restore for p in self.parts], limit)


class ShardedLeases(Claims):
    """What :class:`.leases.Leases` does for the operations object, over the shards:
    a claim picks as a pop does, a lease goes to the shard its id names."""

    __slots__ = ("shards",)

    def __init__(self, shards: Shards) -> None:
        self.shards = shards

    def claim(self, tr: Any, attempt: Attempt, n: int, end: str, seconds: float,
              spread: int, budget: int, holder: Optional[str] = None) -> Gen[List[Lease]]:
        """Take ``n`` items (see :meth:`Shards.chosen`), each under a lease of its own
        in its shard, while their values fit in ``budget`` bytes (see
        :meth:`Leases.claim`)."""
        records = self.shards.records
        known = terms_known(tr, [records]) if records.keeps else None  # read meanwhile
        picks = yield from self.shards.chosen(tr, attempt, end, n, spread)
        gate = self.shards.parts[0].engine.gate
        admission = None if gate is None else gate.admission(tr)
        tally = Tally()
        settled = False
        leases: List[Lease] = []
        parts = []
        for shard, front, entries in picks:
            settled = shard.engine.settle(tr, front, tally) or settled
            tags = None
            if admission is not None:  # limits: one read of the front (see Leases.limited)
                yield from shard.engine.expired_slots(tr, front, entries)
                admitted, blocked = yield from admission.admit(
                    tr, shard.engine, front.now, entries, tally, len(entries), 1, choose)
                entries, tags = [e for e, _ in admitted], [t for _, t in admitted]
                settled = settled or blocked
            if leases and budget <= 0:
                continue
            part = attempt.fork()
            got = shard.leases.hold_entries(tr, part, front.now, entries, seconds, budget,
                                            tally, holder, tags)
            budget -= sum(len(value_of(e)) for e in entries[:len(got)])
            budget = budget if len(got) == len(entries) else 0
            leases += got
            parts.append(part)
        attempt.join(parts)
        return (yield from claimed(tr, attempt, tally, leases, settled, records, known))

    def hold_entries(self, tr: Any, attempt: Attempt, now: int, entries: List[Entry],
                     seconds: float, budget: int, tally: Tally,
                     holder: Optional[str] = None) -> List[Lease]:
        """:meth:`Leases.hold_entries` of ``entries`` (read at ``now``), each in its
        shard (a FairQueue group's claim)."""
        leases: List[Lease] = []
        parts = []
        for shard in self.shards.parts:
            mine = [e for e in entries if self.shards.of_entry(e) is shard]
            if mine:
                part = attempt.fork()
                leases += shard.leases.hold_entries(tr, part, now, mine, seconds, budget,
                                                    tally, holder)
                parts.append(part)
        attempt.join(parts)
        return leases

    def ack(self, tr: Any, attempt: Attempt, lease: Any) -> Gen[None]:
        """:meth:`Leases.ack` in the lease's shard."""
        return self.shards.of_lease(lease).leases.ack(tr, attempt, lease)

    def extend(self, tr: Any, attempt: Attempt, lease: Any, seconds: float) -> Gen[Lease]:
        """:meth:`Leases.extend` in the lease's shard."""
        return self.shards.of_lease(lease).leases.extend(tr, attempt, lease, seconds)

    def release(self, tr: Any, attempt: Attempt, lease: Any, delay: int, count: bool = True,
                error: Optional[Tuple[str, str, str]] = None) -> Gen[bool]:
        """:meth:`Leases.release` in the lease's shard."""
        return self.shards.of_lease(lease).leases.release(tr, attempt, lease, delay, count,
                                                           error)

    def bury(self, tr: Any, attempt: Attempt, lease: Any, reason: Optional[str],
             error: Optional[Tuple[str, str, str]] = None) -> Gen[bool]:
        """:meth:`Leases.bury` in the lease's shard."""
        return self.shards.of_lease(lease).leases.bury(tr, attempt, lease, reason, error)

    def ack_many(self, tr: Any, attempt: Attempt, leases: List[Any],
                 results: Optional[Sequence[Optional[bytes]]] = None,
                 states: Optional[Sequence[str]] = None) -> Gen[List[bool]]:
        """:meth:`Leases.ack_many` of each shard's leases, the shards side by side; for
        each lease, whether it was acked."""
        where = self.shards.by_lease(leases)
        calls = [(self.shards.parts[k].leases.ack_many,
                  ([leases[i] for i in at], None if results is None else [results[i] for i in at],
                   None if states is None else [states[i] for i in at]))
                 for k, at in where.items()]
        found = yield from side_by_side(tr, attempt, calls)
        return placed(len(leases), where, found, False)

    def ack_batches(self, tr: Any, attempt: Attempt,
                    batches: Sequence[List[Any]]) -> Gen[List[List[bool]]]:
        """:meth:`ack_many` of the leases of several calls; each call's answers."""
        done = yield from self.ack_many(tr, attempt, [lease for b in batches for lease in b])
        return answers(done, batches)

    def extend_many(self, tr: Any, attempt: Attempt, leases: List[Any],
                    seconds: float) -> Gen[List[Optional[Lease]]]:
        """:meth:`Leases.extend_many` of each shard's leases, side by side."""
        where = self.shards.by_lease(leases)
        calls = [(self.shards.parts[k].leases.extend_many, ([leases[i] for i in at], seconds))
                 for k, at in where.items()]
        found = yield from side_by_side(tr, attempt, calls)
        return placed(len(leases), where, found, None)


def claim_admitted(tr: Any, attempt: Attempt, admission: Admission,
                   engine: Union[Ordered, ShardedEngine], parts: List[Shard], front: Front,
                   seconds: float, tally: Tally,
                   holder: Optional[str]) -> Gen[Tuple[Optional[Lease], bool]]:
    """The claim of the first of ``front``'s candidates (read from ``engine``, over
    its shards ``parts``: a FairQueue group's) that the shared limits let start, under
    a lease of its shard holding its slots (see :class:`.._limits.admission.Admission`), or
    None; and whether any before it was parked in its shard (a full concurrency key:
    moved back, with its structure's ``Comeback``, by what frees a slot of that key) or
    delayed (a rate).  Gives back the slots of the expired leases met, then reads
    every candidate's limits at once: 1 round trip, 2 when leases had expired."""
    yield from parts[0].engine.expired_slots(tr, front, front.entries)
    yield from admission.tagged(tr, front.entries, front.now)
    blocked = False
    for entry in front.entries:
        shard = parts[0] if isinstance(engine, Ordered) else engine.shards.of_entry(entry)
        admitted, held = yield from admission.admit(tr, shard.engine, front.now, [entry],
                                                    tally, 1, 1, choose)
        blocked = blocked or held
        if admitted:
            return shard.leases.hold_entries(tr, attempt, front.now, [entry], seconds,
                                             BATCH_BYTES, tally, holder,
                                             [admitted[0][1]])[0], blocked
    return None, blocked


def in_turn(tr: Any, attempt: Attempt, ops: Sequence[Callable[..., Gen[int]]], limit: int,
            *args: Any) -> Gen[int]:
    """``op(tr, part, left, *args)`` for each of ``ops`` (one shard's each), one after
    the other, each with a fork of ``attempt`` and what is ``left`` of ``limit``, until
    ``limit`` things are handled; how many were."""
    done = 0
    parts = []
    for op in ops:
        if done >= limit:
            break
        part = attempt.fork()
        done += yield from op(tr, part, limit - done, *args)
        parts.append(part)
    attempt.idle = attempt.join(parts)
    return done


def placed(n: int, where: Dict[int, List[int]], found: List[List[Any]], empty: Any) -> List[Any]:
    """The answers for ``n`` leases, put back in order: ``found`` holds each shard's
    (in the order of ``where``, which gives their positions)."""
    out = [empty] * n
    for at, answered in zip(where.values(), found):
        for i, answer in zip(at, answered):
            out[i] = answer
    return out


class ShardedContention:
    """High-contention pops over the shards: a popper first collects what it set aside
    in any shard, else fetches from shards in a random order until one has an item
    (see :mod:`.contention`; one popper per shard, sharing the structure's loop)."""

    __slots__ = ("parts",)

    def __init__(self, shards: Shards, loop: RetryLoop, hooks: Any,
                 result_timeout: float) -> None:
        self.parts = [Contention(p.engine, loop, hooks, result_timeout) for p in shards.parts]

    def pop(self, db: Any, end: str) -> Gen[Optional[Value]]:
        """Pop at ``end``: what this popper set aside at the other end goes back first,
        then the shards holding items set aside for it at ``end``, then the others, in
        a random order, until one pops a value."""
        for popper in self.parts:
            other = popper.take_held(OTHER_END[end])
            if other:
                yield from popper.loop(db, popper.give_back, other)
        waiting = [p for p in self.parts if p.waiting(end)]
        rest = [p for p in _chance.sample(self.parts, len(self.parts)) if p not in waiting]
        for popper in waiting + rest:
            popped = yield from popper.pop(db, end)
            if popped is not None:
                return popped
        return None
