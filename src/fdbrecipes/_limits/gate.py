"""What a lease holds of the limits its job carries, and the slots the ends of leases
give back, in their own transactions (what a claim checks: :mod:`.admission`).

A structure made with ``limits=`` has a :class:`Gate`: its uses (which limits its jobs
carry, how a job's key and cost are found) over one store's keys
(:class:`.._store_layout.LimitLayout`).  A claim checks its candidates with the gate's
:class:`.admission.Admission` (:meth:`Gate.admission`: each limit's state read, the
blocked candidates parked or delayed), and the gate writes what its leases hold
(:meth:`Gate.held`): the claim's record of their tags, ``L/"lt"/(claim prefix,)``;
their slots of each concurrency limit, ``L/"lr"/(name, key, first slot)``, one key a
run of a claim's slots (:func:`.slots.claim_runs`), each run with a read conflict and
a write conflict on its range (the key of its first slot stands for all its slots:
two claims never take one slot); their starts of each rate,
``L/"ls"/(name, key, start, ...)``.

An ack clears its slots by runs, each a range clear with a read conflict on it (see
:meth:`Gate.free`: the leases of a claim left running then get a key a slot, as does
an extend of some of a claim's leases, :meth:`Gate.extended`); the key of an expired
lease is cleared with an atomic compare-and-clear (only if it still holds what the
lease wrote: no read, no conflict).  A rate's starts stay: time frees them (a claim
clears those older than its window).

Whatever frees a slot of a concurrency key (an ack, a release, a dead letter, an
expired lease met by a claim) moves the first job parked under that key,
``L/"lw"/(name, key, parked_at, ...)``, back to its place in the same transaction,
whatever structure it is in (:meth:`Gate.unpark`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import fdb.tuple

from .._codec import Values
from .._fdb import Gen, Range
from .._store_layout import LimitLayout
from .._values import BATCH_ID_LEN
from .admission import Admission
from .slots import (
    HeldTags,
    Slot,
    Tag,
    TagReads,
    claim_runs,
    claim_slots,
    id_runs,
    move_back,
    pack_batch,
    pack_tags,
    run_value,
    runs,
    slot_value,
)
from .specs import CONCURRENCY, Limit, LimitUse

__all__ = ["Gate"]

#: Parked entries read beyond those a freeing transaction moves back (stale ones,
#: whose hold ended or whose job was removed, are skipped and cleared).
SPARE_READS = 2


class Gate:
    """The limits a structure's jobs carry (see the module docstring)."""

    __slots__ = ("keys", "known", "uses", "values")

    def __init__(self, keys: LimitLayout, uses: Sequence[LimitUse], values: Values) -> None:
        self.keys = keys
        self.uses = tuple(uses)
        self.values = values
        #: the definitions the last claim read (see :meth:`.admission.Admission.guess`)
        self.known: Dict[str, Limit] = {}

    def admission(self, tr: Any, want: int = 0) -> Admission:
        """A claim's admission, its reads of the definitions started (snapshot); for a
        claim that looks at ``want`` candidates first (0: not known), the state of
        its global concurrency limits too, as the definitions the last claim read say
        them (see :meth:`.admission.Admission.guess`)."""
        admission = Admission(self, {use.name: tr.snapshot.get(self.keys.definition(use.name))
                                     for use in self.uses})
        if want > 0:
            admission.guess(tr, want)
        return admission

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
