"""Limits in the claim's own transaction, and the slots the ends of leases give back.

A structure made with ``limits=`` has a :class:`Gate`: its uses (which limits its jobs
carry, how a job's key and cost are found) over one store's keys
(:class:`.._store_layout.LimitLayout`).  A claim makes an :class:`Admission`, which reads
the definitions (snapshot reads, started with the claim's first read: no round trip of
their own) and, for each (limit, key) its candidates carry, the limit's state (one
round trip for all, side by side):

* a **concurrency** limit: its ``n`` *slots*, ``L/"lr"/(name, key, first slot)``, a
  key a run of them, read by snapshot; a run holds the leases of one claim (their
  deadline; which lease has which slot is in the claim's record of tags), and one
  past its deadline is free (the leases expired).  A job starts in a free slot below
  ``n`` (a claim's first of the key drawn at random, each next one the first free
  after it: runs, see ``Usage.add``), with a read conflict on its slots alone (one
  range a run, added before the slots are written: a read conflict on keys the
  transaction wrote already is not taken) and a write conflict on them (the key of
  a run's first slot stands for all its slots): two claims of one key conflict only
  when they draw a same slot, and a job holds its slot until its lease ends, so at
  most ``n`` run at once, exactly.  A run never crosses a multiple of
  :data:`.slots.RUN_ALIGN`, so a read from one sees every run covering the slots
  after it.  A roomy limit (``n`` at least
  :data:`BLOCKS_FROM` times the block a claim needs, :func:`block_size`) is read
  by blocks: :data:`BLOCKS_READ` blocks drawn at random and the slots above ``n``,
  the slots drawn in the block holding the fewest (see :meth:`Admission.start`).
  An ack clears its slots by runs, each a range clear with a read conflict on it
  (see :meth:`Gate.free`: the leases of a claim left running then get a key a
  slot, as does an extend of some of a claim's leases, :meth:`Gate.extended`); the
  key of an expired lease is cleared with an atomic compare-and-clear (only if it
  still holds what the lease wrote: no read, no conflict).
  When the key is full (no free slot, or, after ``n`` was lowered, as many jobs running
  as ``n`` in any slots), the claim takes a read conflict on the key's whole range and
  on the limit's definition: a slot freed, or the limit changed or deleted, meanwhile
  makes it retry instead of parking a job that could run.
* a **rate** limit: its starts in the window, ``L/"ls"/(name, key, start, ...)``; a
  job starts while the cost started in ``(now - per_seconds, now]`` plus its own is at
  most ``n``.  The read conflict covers the window and everything after it, so of two
  claims of one key the later one to commit always saw the other's start: in every
  window of ``per_seconds`` the starts weigh at most ``n``, by construction.  Starts
  older than the window are cleared.

A candidate at the limit of a concurrency key is **parked**: moved out of the order
under a DELAY hold of its own structure (deadline :data:`PARK_SECONDS` away) and named
in the store under its key, ``L/"lw"/(name, key, parked_at, ...)``.  Whatever frees a
slot of that key (an ack, a release, a dead letter, an expired lease met by a claim)
moves the first parked job back to its place in the same transaction, whatever
structure it is in.  A candidate held back only by a rate is delayed (a DELAY hold)
until the moment its key's window has room.  So a key at its limit never holds the
front: the claim goes on with the next candidates, and each blocked job is moved once
per slot or window, not met again by every claim.  The park's deadline is the safety
net: a job beyond the 1,000 a change or delete of its limit moves back, or whose slot
came back by an expiry no claim of its structure met, is looked at again by then at
the latest.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import fdb.tuple

from .._codec import Values
from .._fdb import Gen, Range, Tally, read, seconds_to_versions
from .._layout import DELAY, LEASE
from .._store_layout import LimitLayout
from .._values import BATCH_ID_LEN
from .slots import (
    BLOCKS_FROM,
    BLOCKS_READ,
    HeldTags,
    Slot,
    StateRead,
    Tag,
    TagReads,
    Usage,
    aligned,
    block_size,
    claim_runs,
    claim_slots,
    draw,
    id_runs,
    move_back,
    pack_batch,
    pack_tags,
    run_value,
    runs,
    slot_span,
    slot_value,
)
from .specs import CONCURRENCY, EXEMPT, Limit, LimitUse, decode_limit, given_keys

__all__ = ["PARK_SECONDS", "Admission", "Gate"]

#: How long a parked job waits at most before a claim looks at it again.
PARK_SECONDS = 60.0
#: Parked entries read beyond those a freeing transaction moves back (stale ones,
#: whose hold ended or whose job was removed, are skipped and cleared).
SPARE_READS = 2



#: How a take picks ``n`` among candidates with a spread (``_ordered.front.choose``).
Chooser = Callable[[List[Any], int, int], List[Any]]


class Gate:
    """The limits a structure's jobs carry (see the module docstring)."""

    __slots__ = ("keys", "known", "uses", "values")

    def __init__(self, keys: LimitLayout, uses: Sequence[LimitUse], values: Values) -> None:
        self.keys = keys
        self.uses = tuple(uses)
        self.values = values
        #: the definitions the last claim read (see :meth:`Admission.guess`)
        self.known: Dict[str, Limit] = {}

    def admission(self, tr: Any, want: int = 0) -> Admission:
        """A claim's admission, its reads of the definitions started (snapshot); for a
        claim that looks at ``want`` candidates first (0: not known), the state of
        its global concurrency limits too, as the definitions the last claim read say
        them (see :meth:`Admission.guess`)."""
        admission = Admission(self, {use.name: tr.snapshot.get(self.keys.definition(use.name))
                                     for use in self.uses})
        if want > 0:
            admission.guess(tr, want)
        return admission

    def tags(self, raw: bytes, defined: Dict[str, Limit]) -> List[Tag]:
        """The limits a job of stored value ``raw`` carries (those defined now): its key
        under each, the one given at push (stored after the value, see
        :func:`.specs.with_limit_keys`) or else the one its use computes."""
        uses = [use for use in self.uses if use.name in defined]
        if not uses:
            return []
        parts = fdb.tuple.unpack(raw)  # the value, then the keys given at push, if any
        given = given_keys(parts)
        value = parts[0] if self.values.codec is None else self.values.value(parts[0])
        tags = []
        for use in uses:
            key = given[use.name] if use.name in given else use.key_of(value)
            if key is EXEMPT:
                continue
            limit = defined[use.name]
            cost = use.cost_of(value) if limit.kind != CONCURRENCY else 1
            tags.append(Tag(use.name, key, cost, limit.kind))
        return tags

    # -- what a lease holds -------------------------------------------------------------

    def held(self, tr: Any, hold_ids: Sequence[bytes], tags: Sequence[Sequence[Tag]],
             now: int, deadline: int) -> None:
        """Write what the leases ``hold_ids`` (of one claim, made at ``now``, until
        ``deadline``) hold, each its ``tags``: the claim's record of their tags (one
        key, ``L/"lt"/(claim prefix,)``: see :class:`.slots.TagReads`), their slots
        in each concurrency limit, one key a run (:func:`.slots.claim_runs`), each
        start in each rate limit.  Each run of slots taken is a read conflict range
        and a write conflict range (the key of its first slot stands for them all):
        two claims never take one slot."""
        claims: Dict[bytes, List[Tuple[int, Sequence[Tag]]]] = {}
        spans: List[Tuple[bytes, bytes, bytes]] = []  # slot keys: begin, end, value
        for hold_id, carried in zip(hold_ids, tags):
            if not carried:
                continue
            if len(hold_id) == BATCH_ID_LEN:
                claims.setdefault(hold_id[:16], []).append(
                    (int.from_bytes(hold_id[16:], "big"), carried))
                continue
            tr.set(self.keys.tags_key(hold_id), pack_tags(carried))
            spans += [(self.keys.running_key(t.name, t.key, t.slot),
                       self.keys.running_key(t.name, t.key, t.slot + 1),
                       slot_value(deadline, hold_id)) for t in carried if t.kind == CONCURRENCY]
        for prefix, carried_by in claims.items():
            tr.set(self.keys.tags_key(prefix), pack_batch(deadline, carried_by))
            for (name, key), slots in claim_slots(tags for _, tags in carried_by).items():
                spans += [(self.keys.running_key(name, key, first),
                           self.keys.running_key(name, key, last + 1),
                           run_value(deadline, prefix, last))
                          for first, last in claim_runs(slots)]
        for begin, end, _ in spans:  # before the writes: a read conflict on keys
            tr.add_read_conflict_range(begin, end)  # written already is not taken
        for begin, end, value in spans:
            tr.set(begin, value)
            tr.add_write_conflict_range(begin, end)
        for hold_id, carried in zip(hold_ids, tags):
            for t in carried:
                if t.kind != CONCURRENCY:
                    tr.set(self.keys.start_key(t.name, t.key, now, hold_id),
                           fdb.tuple.pack((t.cost,)))

    def read_tags(self, tr: Any, hold_ids: Sequence[bytes]) -> TagReads:
        """Start reading what each lease of ``hold_ids`` holds (snapshot reads: the
        lease's own key, read with a conflict by the caller, orders them; the record of
        each claim, and the leases of one claim in one range read), and the jobs parked
        under the global key of each limit used (what :meth:`unpark` reads when the
        leases free slots of those keys, as they do unless a push gave them keys:
        started now, the round trip is saved)."""
        parked = {}
        for use in self.uses:  # the slots they free are most likely of these keys
            if use.key is None:
                begin, end = self.parked_range((use.name, None))
                parked[(use.name, None)] = Range(tr.snapshot, begin, end,
                                                 len(hold_ids) + SPARE_READS)
        return TagReads(tr, self.keys, hold_ids, parked)

    def free(self, tr: Any, held: HeldTags, deadlines: Dict[bytes, int],
             now: int) -> Gen[int]:
        """Give back the slots of the leases of ``deadlines`` (by lease id, each its
        deadline; they ended: acked, released, buried, expired; ``held``: their tags,
        read by :meth:`read_tags`), and for each slot freed the first job parked under
        its key moved back (see :meth:`unpark`); the slots freed.  A rate's starts
        stay: time frees them.

        A claim's record goes when the leases it lists end (one clear), with the keys
        of their runs of slots (:func:`.slots.claim_runs`).  When only some of them
        end, the others are given keys of their own: their tags
        (``L/"lt"/(lease id,)``), with a read conflict on the record (two
        transactions that each end some leases of one claim never both rewrite it),
        and a key a slot.  The slots of leases alive at ``now`` (an ack, a release, a
        dead letter) are cleared by ranges, each with a read conflict: a slot holds
        its lease until the lease's deadline, and a claim that took one as expired
        (by a clock reading past the deadline, so committed after this transaction's
        read version, the clock never running backwards) makes this one retry and
        find the lease expired.  The keys of expired leases (given back by a claim
        that met them) are cleared with an atomic compare-and-clear, only if they
        still hold what the lease wrote: no read, no conflict, as a claim may have
        taken the slots since.  A lease with keys of its own has its tags cleared by
        runs of consecutive lease ids (one range clear a run, :func:`.slots.id_runs`)
        and its slots as above."""
        freed: Dict[Slot, int] = {}
        for prefix, listed in held.listed.items():
            ended = [h for h in listed if h in deadlines]
            if not ended:
                continue
            record = self.keys.tags_key(prefix)
            deadline = held.deadlines[prefix]
            left = {h: tags for h, tags in listed.items() if h not in deadlines}
            if left:
                tr.add_read_conflict_key(record)
                for hold_id, tags in left.items():
                    tr.set(self.keys.tags_key(hold_id), pack_tags(tags))
            tr.clear(record)
            slots = claim_slots(listed.values())
            if deadline >= now:
                self.clear_slots(tr, slots)
                self.alone(tr, left, {h: deadline for h in left})
            else:
                for (name, key), numbers in slots.items():
                    for first, last in claim_runs(numbers):
                        tr.compare_and_clear(self.keys.running_key(name, key, first),
                                             run_value(deadline, prefix, last))
            for hold_id in ended:
                for t in listed[hold_id]:
                    if t.kind == CONCURRENCY:
                        freed[(t.name, t.key)] = freed.get((t.name, t.key), 0) + 1
        for low, high in id_runs([h for h in deadlines if h in held.own]):
            tr.clear_range(self.keys.tags_key(low), self.keys.tags_key(high) + b"\0")
        alive: Dict[Slot, List[int]] = {}
        for hold_id, deadline in deadlines.items():
            if hold_id not in held.own:
                continue
            for t in held.tags[hold_id]:
                if t.kind == CONCURRENCY:
                    slot = (t.name, t.key)
                    if deadline >= now:
                        alive.setdefault(slot, []).append(t.slot)
                    else:
                        tr.compare_and_clear(self.keys.running_key(t.name, t.key, t.slot),
                                             slot_value(deadline, hold_id))
                    freed[slot] = freed.get(slot, 0) + 1
        self.clear_slots(tr, alive)
        if freed:
            yield from self.unpark(tr, freed, now, held.parked)
        return sum(freed.values())

    def clear_slots(self, tr: Any, slots: Dict[Slot, List[int]]) -> None:
        """Clear the keys of the live leases' ``slots`` of each (limit, key), one range
        clear a run of consecutive slots, each with a read conflict on its range (see
        :meth:`free`)."""
        for (name, key), numbers in slots.items():
            for low, high in runs(numbers):
                begin = self.keys.running_key(name, key, low)
                end = self.keys.running_key(name, key, high + 1)
                tr.add_read_conflict_range(begin, end)
                tr.clear_range(begin, end)

    def alone(self, tr: Any, tags: Dict[bytes, List[Tag]], deadlines: Dict[bytes, int]) -> None:
        """Write the slots of the leases of ``tags`` (by lease id, each its tags) a key
        each, until each one's deadline of ``deadlines`` (leases with keys of their
        own, see :meth:`free`)."""
        for hold_id, carried in tags.items():
            for t in carried:
                if t.kind == CONCURRENCY:
                    tr.set(self.keys.running_key(t.name, t.key, t.slot),
                           slot_value(deadlines[hold_id], hold_id))

    def extended(self, tr: Any, held: HeldTags, renewed: Dict[bytes, int]) -> None:
        """Move the slots of the leases of ``renewed`` (by lease id, each its new
        deadline; ``held``: their tags, read by :meth:`read_tags`) to their new
        deadlines, each with a read conflict: a claim that meanwhile took a slot as
        expired makes this extend retry (and find the lease expired).  When every
        lease a claim's record lists moves to one deadline, the record and its runs
        keep their keys (new values); when only some move, the record is replaced by
        a key of its own for each lease it lists, and its runs by a key a slot (as
        when some of them end, see :meth:`free`)."""
        for prefix, listed in held.listed.items():
            moved = {renewed[h] for h in listed if h in renewed}
            if not moved:
                continue
            record = self.keys.tags_key(prefix)
            tr.add_read_conflict_key(record)
            slots = claim_slots(listed.values())
            if len(moved) == 1 and all(h in renewed for h in listed):
                deadline = moved.pop()
                tr.set(record, pack_batch(deadline, [(int.from_bytes(h[16:], "big"), tags)
                                                     for h, tags in listed.items()]))
                for (name, key), numbers in slots.items():
                    for first, last in claim_runs(numbers):
                        begin = self.keys.running_key(name, key, first)
                        end = self.keys.running_key(name, key, last + 1)
                        tr.add_read_conflict_range(begin, end)
                        tr.set(begin, run_value(deadline, prefix, last))
                        tr.add_write_conflict_range(begin, end)  # the run's every slot
                continue
            tr.clear(record)
            for hold_id, tags in listed.items():
                tr.set(self.keys.tags_key(hold_id), pack_tags(tags))
            self.clear_slots(tr, slots)
            self.alone(tr, listed, {h: renewed.get(h, held.deadlines[prefix]) for h in listed})
        for hold_id, deadline in renewed.items():
            for t in held.tags.get(hold_id, ()) if hold_id in held.own else ():
                if t.kind == CONCURRENCY:
                    key = self.keys.running_key(t.name, t.key, t.slot)
                    tr.add_read_conflict_key(key)
                    tr.set(key, slot_value(deadline, hold_id))

    # -- parking --------------------------------------------------------------------------

    def park(self, tr: Any, engine: Any, entry: Any, now: int, tally: Tally,
             tag: Tag) -> None:
        """Move ``entry`` out of its structure's order under a DELAY hold until
        :data:`PARK_SECONDS` from now, named under ``tag``'s key in the store."""
        deadline = now + seconds_to_versions(PARK_SECONDS)
        item = self.hold_back(tr, engine, entry, now, deadline, tally)
        prefix = engine.keys.subspace.key()
        comeback = engine.comeback
        tr.set(self.keys.parked_key(tag.name, tag.key, now, prefix, item, deadline),
               b"" if comeback is None else comeback.pack())

    def hold_back(self, tr: Any, engine: Any, entry: Any, now: int, deadline: int,
                  tally: Tally) -> Any:
        """Take ``entry`` from the order (or its expired hold) and hold it under DELAY
        until ``deadline`` (its job record, if it came back from a lease, retrying);
        its item."""
        item = engine.take(tr, entry, now, tally)
        engine.hold(tr, item, entry.value, engine.keys.delay_id(item), deadline, DELAY, tally)
        engine.wake(tally)  # waiters learn of the new deadline
        if entry.hold is not None and entry.hold.kind == LEASE:
            engine.came_back(tr, item)
        return item

    def unpark(self, tr: Any, freed: Dict[Slot, int], now: int,
               started: Optional[Dict[Slot, Range]] = None) -> Gen[int]:
        """For each (limit, key) of ``freed``, move that many parked jobs back to their
        places (the first parked first, whatever structure holds them): two round
        trips, the parked entries (snapshot) then their holds (read conflicts: two
        transactions never move one job); how many were moved.

        Takes a read conflict on the key's whole range of parked jobs: a claim that
        parks a job of the key and commits after this transaction's read version
        makes it retry (and find the job), so no job is left parked beside the slot
        freed.  (The claim, for its part, read the key's slots with a conflict: a
        free committed first makes the claim retry instead of parking.)  ``started``:
        reads of parked jobs started already (by snapshot, at the same read version),
        used where they read as many as needed."""
        starts = []
        for slot in freed:
            begin, end = self.parked_range(slot)
            tr.add_read_conflict_range(begin, end)
            early = None if started is None else started.get(slot)
            if early is not None and early.limit >= freed[slot] + SPARE_READS:
                starts.append(early)
            else:
                starts.append(Range(tr.snapshot, begin, end, freed[slot] + SPARE_READS))
        found = []
        for reading in starts:
            found.extend((yield from reading.read()))
        return (yield from move_back(tr, self.keys, found, freed, now))

    def parked_range(self, slot: Slot) -> Tuple[bytes, bytes]:
        """The range of the jobs parked under (name, key)."""
        r = self.keys.parked.range(slot)
        return bytes(r.start), bytes(r.stop)


class Admission:
    """What one claim (one transaction) learnt of the limits, and added: the
    definitions, and each (limit, key) it read (see the module docstring)."""

    __slots__ = ("defined", "early", "gate", "started", "usage")

    def __init__(self, gate: Gate, started: Dict[str, Any]) -> None:
        self.gate = gate
        self.started = started
        self.defined: Optional[Dict[str, Limit]] = None
        self.usage: Dict[Slot, Usage] = {}
        self.early: Dict[Slot, StateRead] = {}

    def guess(self, tr: Any, want: int) -> None:
        """Start reading, beside the claim's first reads, the state of each global
        concurrency limit (a use without a key function) for ``want`` candidates, as
        the definitions the last claim of this gate read say it (:meth:`start`): the
        claim learns from it when the definition it reads now is the same and the
        candidates carry that key (:meth:`read_usage`), saving that round trip; else
        it is left unread.  The same snapshot reads, only started sooner."""
        for use in self.gate.uses:
            limit = self.gate.known.get(use.name)
            if use.key is None and limit is not None and limit.kind == CONCURRENCY:
                self.early[(use.name, None)] = self.start(tr, (use.name, None), limit, 0, want)

    def definitions(self) -> Gen[Dict[str, Limit]]:
        """The limits defined now, by name (read once per claim)."""
        if self.defined is None:
            defined = {}
            for name, future in self.started.items():
                raw = yield from read(future)
                limit = None if raw is None else decode_limit(raw)
                if limit is not None:
                    defined[name] = limit
            self.defined = self.gate.known = defined
        return self.defined

    def tagged(self, tr: Any, entries: Sequence[Any],
               now: int) -> Gen[List[Tuple[Any, List[Tag]]]]:
        """Each of the candidates ``entries`` (read at ``now``) with the limits it
        carries; the state of each (limit, key) they carry that this claim had not read
        yet read now, side by side (:meth:`read_usage`: one round trip, two when a key
        read by blocks must be read whole; none when all were read)."""
        defined = yield from self.definitions()
        tagged = [(entry, self.gate.tags(entry.value, defined)) for entry in entries]
        yield from self.read_usage(tr, tagged, defined, now)
        return tagged

    def admit(self, tr: Any, engine: Any, now: int, entries: Sequence[Any], tally: Tally,
              want: int, spread: int,
              choose: Chooser) -> Gen[Tuple[List[Tuple[Any, List[Tag]]], bool]]:
        """Up to ``want`` of the candidates ``entries`` (of ``engine``, read at ``now``,
        in order) that may start, each with its tags, chosen as a take with ``spread``
        chooses (``choose``: the engine's ``front.choose``, handed in so that this
        module imports no engine) among the first ``want + spread - 1`` runnable
        ones; the blocked ones met before those parked or delayed (see the module
        docstring).  And whether any was held back.  Only the limits' state read
        decides what is held back, never this claim's own choices: a job is parked
        only when its key is full without it.

        The limits' state is read for the keys of the first ``want + spread - 1``
        candidates, then, only if some of those were held back, for the keys of the
        others (:meth:`read_usage`): a claim whose first candidates can run reads no
        other key."""
        defined = yield from self.definitions()
        needed = want + spread - 1
        runnable: List[Tuple[Any, List[Tag]]] = []
        blocked = False
        for wave in (entries[:needed], entries[needed:]):
            if not wave or len(runnable) >= needed:
                break
            tagged = [(entry, self.gate.tags(entry.value, defined)) for entry in wave]
            yield from self.read_usage(tr, tagged, defined, now)
            for entry, tags in tagged:
                if len(runnable) >= needed:
                    break
                if self.hold(tr, engine, entry, tags, now, tally):
                    blocked = True
                else:
                    runnable.append((entry, tags))
        picked = {id(e) for e in choose([e for e, _ in runnable], want, spread)}
        admitted = []
        for entry, tags in runnable:
            if id(entry) in picked and all(
                    self.usage[(t.name, t.key)].fits(t.cost, now) for t in tags):
                admitted.append((entry, [t._replace(slot=self.usage[(t.name, t.key)].add(
                    t.cost, now)) for t in tags]))
        return admitted, blocked

    def read_usage(self, tr: Any, tagged: Sequence[Tuple[Any, List[Tag]]],
                   defined: Dict[str, Limit], now: int) -> Gen[None]:
        """Learn the state of each (limit, key) the candidates ``tagged`` carry that
        this claim has not read yet, side by side (one round trip; see :meth:`start`).
        A concurrency key read by blocks whose block has fewer free slots than the
        candidates carrying it, or with jobs running above ``n``, is read whole (one
        round trip more)."""
        counts: Dict[Slot, int] = {}
        for _, tags in tagged:
            for t in tags:
                counts[(t.name, t.key)] = counts.get((t.name, t.key), 0) + 1
        for whole in (False, True):
            readings = {slot: self.started_read(tr, slot, defined[slot[0]], now, count, whole)
                        for slot, count in counts.items()
                        if slot not in self.usage or self.usage[slot].short(count)}
            if not readings:
                return
            for slot, state in readings.items():
                usage = yield from self.learn(tr, slot, state, now)
                if usage is not None:
                    self.usage[slot] = usage
                else:
                    self.usage.pop(slot, None)
            counts = {slot: count for slot, count in counts.items() if slot in readings}

    def started_read(self, tr: Any, slot: Slot, limit: Limit, now: int, count: int,
                     whole: bool) -> StateRead:
        """The read of (name, key)'s state for ``count`` candidates: the one
        :meth:`guess` started, if it read what :meth:`start` would read now for them
        (the same definition; the whole key, or a block of at least their count),
        else one started now."""
        early = self.early.pop(slot, None)
        if early is not None and not whole and early.limit == limit and (
                not early.blocks or early.size >= block_size(count)):
            return early
        return self.start(tr, slot, limit, now, count, whole)

    def start(self, tr: Any, slot: Slot, limit: Limit, now: int, count: int,
              whole: bool = False) -> StateRead:
        """Start reading (name, key)'s state for ``count`` candidates, by snapshot: a
        concurrency limit's slots (the conflicts come with the slots taken): all of
        them, or, when ``n`` is at least :data:`BLOCKS_FROM` times the block of
        ``count`` (:func:`block_size`) and not ``whole``, :data:`BLOCKS_READ` blocks
        drawn at random and the slots above ``n`` (claims of one key then conflict
        only when they draw the same block, and read only what it holds); a rate's
        starts with a read conflict on the window and after."""
        keys = self.gate.keys
        if limit.kind == CONCURRENCY:
            r = keys.running.range(slot)
            size = block_size(count)
            if whole or limit.n < BLOCKS_FROM * size:
                return StateRead(limit, [Range(tr.snapshot, bytes(r.start), bytes(r.stop))])
            name, key = slot  # each read from where a run covering its slots may begin
            firsts = tuple(j * size for j in draw.sample(range(limit.n // size), BLOCKS_READ))
            reads = [Range(tr.snapshot, keys.running_key(name, key, aligned(limit.n)),
                           bytes(r.stop))]
            reads += [Range(tr.snapshot, keys.running_key(name, key, aligned(first)),
                            keys.running_key(name, key, first + size)) for first in firsts]
            return StateRead(limit, reads, firsts, size)
        r = keys.starts.range(slot)
        since = bytes(keys.starts.pack(slot + (self.window_start(limit, now),)))
        tr.add_read_conflict_range(since, bytes(r.stop))
        return StateRead(limit, [Range(tr.snapshot, bytes(r.start), bytes(r.stop))])

    def hold(self, tr: Any, engine: Any, entry: Any, tags: List[Tag], now: int,
             tally: Tally) -> bool:
        """Park ``entry`` if a concurrency limit it carries is full, else delay it if a
        rate it carries has no room now; whether it was held back."""
        for t in tags:
            if t.kind == CONCURRENCY and not self.usage[(t.name, t.key)].fits(t.cost, now):
                r = self.gate.keys.running.range((t.name, t.key))
                tr.add_read_conflict_range(r.start, r.stop)  # a slot freed meanwhile: retry
                # the limit raised or deleted meanwhile: retry (see Store.release_parked)
                tr.add_read_conflict_key(self.gate.keys.definition(t.name))
                self.gate.park(tr, engine, entry, now, tally, t)
                return True
        rates = [(t, self.usage[(t.name, t.key)]) for t in tags if t.kind != CONCURRENCY]
        times = [usage.opens(t.cost, now) for t, usage in rates if not usage.fits(t.cost, now)]
        if not times:
            return False
        until = max(times)
        self.gate.hold_back(tr, engine, entry, now, until, tally)
        return True

    @staticmethod
    def window_start(limit: Limit, now: int) -> int:
        """The first clock reading inside a rate's window ending at ``now``."""
        return now - seconds_to_versions(limit.per_seconds or 0.0) + 1

    def learn(self, tr: Any, slot: Slot, state: StateRead, now: int) -> Gen[Optional[Usage]]:
        """(name, key)'s usage from what :meth:`start` read: the live slots (each key
        a run of them, :func:`.slots.slot_span`; an expired lease's slots are free, and
        its key, above ``n``, is cleared if it still holds what the lease wrote), of the
        block that holds the fewest of those read by blocks, or None when a job runs
        above ``n`` (they must all be counted: read it whole); or the starts in the
        window (those before it cleared)."""
        keys = self.gate.keys
        limit = state.limit
        if limit.kind == CONCURRENCY and state.blocks:
            for kv in (yield from state.reads[0].read()):  # from aligned(n): runs above n
                first = keys.running.unpack(kv.key)[2]
                deadline, last = slot_span(first, kv.value)
                if deadline >= now:
                    if last >= limit.n:
                        return None
                elif first >= limit.n:
                    tr.compare_and_clear(kv.key, kv.value)
            best: Optional[Usage] = None
            for low, reading in zip(state.blocks, state.reads[1:]):
                usage = Usage(limit, low, low + state.size)
                for kv in (yield from reading.read()):
                    first = keys.running.unpack(kv.key)[2]
                    deadline, last = slot_span(first, kv.value)
                    if deadline >= now:
                        usage.taken.update(range(max(first, low), min(last + 1, usage.high)))
                if best is None or len(usage.taken) < len(best.taken):
                    best = usage
            assert best is not None
            best.live = len(best.taken)
            return best
        found = yield from state.reads[0].read()
        usage = Usage(limit)
        if limit.kind == CONCURRENCY:
            for kv in found:
                first = keys.running.unpack(kv.key)[2]
                deadline, last = slot_span(first, kv.value)
                if deadline >= now:
                    usage.live += last - first + 1
                    usage.taken.update(range(first, min(last + 1, limit.n)))
                elif first >= limit.n:  # expired, above n (lowered): never drawn again
                    tr.compare_and_clear(kv.key, kv.value)
            if usage.live > len(usage.taken):
                r = keys.running.range(slot)  # n was lowered: count exactly, serialized
                tr.add_read_conflict_range(r.start, r.stop)
            return usage
        since = self.window_start(limit, now)
        for kv in found:
            start = keys.starts.unpack(kv.key)[2]
            if start >= since:
                usage.starts.append((start, fdb.tuple.unpack(kv.value)[0]))
        r = keys.starts.range(slot)
        tr.clear_range(bytes(r.start), bytes(keys.starts.pack(slot + (since,))))
        return usage
