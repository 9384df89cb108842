"""Stuck work made visible: what is in flight, what is delayed, removing one pending
item by its idempotency id, and a job's record and its cancel (Queue and PriorityQueue).

* In flight: the live leases, from the held range ``h`` (a lease's id starts with the
  clock reading of its claim, so they come oldest claim first).
* Delayed: the delayed items, from the deadline index ``d``, soonest first.
* Removing by id: an id's key holds its item's place (``seq, random``), which names the
  item's key while it is visible and, through ``_layout.OrderedLayout.delay_id``, its
  hold while it is delayed.
* A job's record (see :mod:`.._records.records`), its state read as it is at the read version:
  a running job whose lease expired is retrying (or dead, on its last delivery), a
  delayed one whose delay passed is pending; and its cancel.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Tuple

import fdb.tuple

from .._attempt import Attempt
from .._clock import reading
from .._fdb import Gen, Range, Tally, read, snap
from .._ids import RETIRED
from .._layout import DELAY, LEASE
from .._records.records import (
    CANCELLED,
    DEAD,
    DELAYED,
    FINISHED,
    PENDING,
    RETRYING,
    RUNNING,
    SUCCEEDED,
    JobRecord,
    Kept,
    Stored,
    pushed_place,
)
from .._records.tokens import TimedPlace, after_key, dead_token, delayed_token, pending_token
from .._values import Value, claimed_at, decode_value, made_bytes
from .engine import Ordered, told
from .front import Entry, Hold
from .leases import token_of
from .sequences import sequence_of
from .unique import place_of

__all__ = ["DelayedItem", "LeaseInfo", "Listing"]


class LeaseInfo(NamedTuple):
    """An item in flight: its value, deliveries (this one included), when its lease
    ends and when it was claimed (clock readings: read versions, about 1,000,000 per
    second; ``claimed_at`` None for leases taken before ids told it), and the lease's
    token (``ack``/``extend``/``release`` take it)."""

    value: Value
    deliveries: int
    deadline: int
    claimed_at: Optional[int]
    token: bytes
    id: Optional[bytes] = None


class DelayedItem(NamedTuple):
    """A delayed item: its value, when it becomes visible (a clock reading), its
    deliveries so far, its id (None if pushed without one) and its token (``after=``
    of the next page, ``remove_many``)."""

    value: Value
    due_at: int
    deliveries: int
    id: Optional[bytes] = None
    token: bytes = b""


class Listing:
    """The listings and the removal by id of one :class:`.engine.Ordered` engine."""

    __slots__ = ("engine",)

    def __init__(self, engine: Ordered) -> None:
        self.engine = engine

    def leases(self, tr: Any, limit: Optional[int],
               after: Optional[bytes] = None) -> Gen[List[LeaseInfo]]:
        """The live leases, oldest claim first (up to ``limit``), after the lease
        whose id is ``after`` if given; snapshot reads, 1,000 held keys a round
        trip."""
        k = self.engine.keys
        r = k.held.range()
        begin = r.start if after is None else k.held.range((after,)).stop
        now = yield from reading(tr, self.engine.clock)
        out: List[LeaseInfo] = []
        while limit is None or len(out) < limit:
            kvs = yield from Range(snap(tr), begin, r.stop, 0 if limit is None else 1_000).read()
            for kv in kvs:
                if limit is not None and len(out) >= limit:
                    break
                hold_id, item, deadline, kind = k.held.unpack(kv.key)
                if kind == LEASE and deadline >= now:
                    out.append(LeaseInfo(decode_value(kv.value), k.deliveries(item) + 1,
                                         deadline, claimed_at(hold_id), token_of(hold_id),
                                         k.item_id(item)))
            if limit is None or len(kvs) < 1_000:
                break
            begin = bytes(kvs[-1].key) + b"\x00"
        return out if limit is None else out[:limit]

    def delayed(self, tr: Any, limit: Optional[int],
                after: Optional[TimedPlace] = None) -> Gen[List[DelayedItem]]:
        """The delayed items, soonest first (up to ``limit``), after the one ``after``
        names if given; snapshot reads, 1,000 deadlines a round trip."""
        k = self.engine.keys
        now = yield from reading(tr, self.engine.clock)
        begin, end = k.due.pack((now + 1,)), k.due_range.stop
        if after is not None:
            hold_id = k.delay_id(after.place)
            begin = max(begin, after_key(k.due.pack((after.at, hold_id))))
        out: List[DelayedItem] = []
        while limit is None or len(out) < limit:
            kvs = yield from Range(snap(tr), begin, end, 0 if limit is None else 1_000).read()
            entries = []
            for kv in kvs:
                deadline, hold_id, item, kind = k.due.unpack(kv.key)
                if kind == DELAY:
                    entries.append(Entry(item, k.item_key(item), None,
                                         Hold(hold_id, deadline, kind)))
            if limit is not None:  # only the values of the rows returned are read
                entries = entries[:limit - len(out)]
            [found] = yield from self.engine.read_held(snap(tr), (entries,))
            out += [DelayedItem(decode_value(e.value), e.hold.deadline,  # type: ignore[arg-type,union-attr]
                                k.deliveries(e.item), k.item_id(e.item),
                                delayed_token(e.hold.deadline, k.place(e.item)))  # type: ignore[union-attr]
                    for e in found]
            if limit is None or len(kvs) < 1_000:
                break
            begin = bytes(kvs[-1].key) + b"\x00"
        return out if limit is None else out[:limit]

    def job(self, tr: Any, id_: bytes) -> Gen[Optional[JobRecord]]:
        """Job ``id_``'s record as it is at the read version, with the token of where
        its item is, or None (unknown id, or a job pushed without history).  Reads the
        record (a read conflict on it; its push key says where the item of a job whose
        id the push made is), by snapshot the id's key and, for a unique job, its
        unique entry (beside it: where the item is, see :meth:`start_place`) and, while
        it runs, its lease's hold."""
        known = self.start_place(snap(tr), id_, pushed=False)
        found = yield from self.state_of(tr, id_)
        if found is None:
            return None
        stored, state, kv = found
        place = yield from self.place(known, id_)
        at = pushed_place(stored.parts.get("a")) if place is None else (
            None if not place or place.startswith(RETIRED) else fdb.tuple.unpack(place))
        token = self.token_at(stored, state, kv, at)
        return stored.record(id_, state)._replace(token=token)

    def start_place(self, tr: Any, id_: bytes, pushed: bool = True) -> Tuple[Any, ...]:
        """Start reading where job ``id_``'s item is: its id key, for a unique job
        whose push wrote none, its unique entry (see ``unique.place_of``) and, unless
        not ``pushed``, for a job whose id its push made (and wrote no id key for), its
        record's push key (see ``pushed_place``): side by side, no round trip more;
        read conflicts unless ``tr`` is a snapshot."""
        unique = self.engine.unique
        return (tr.get(self.engine.ids.key(id_)),
                None if unique is None else unique.locate(tr, id_),
                tr.get(self.engine.records.keys.key(id_, "a"))
                if pushed and made_bytes(id_) is not None else None)

    def place(self, started: Tuple[Any, ...], id_: bytes) -> Gen[Optional[bytes]]:
        """What :meth:`start_place` read, as the id key holds it (None: unknown; the
        place a made id's push key names, packed, when there is no id key)."""
        known = yield from read(started[0])
        held = None if started[1] is None else (yield from read(started[1]))
        found = place_of(id_, known, held)
        if found is None and started[2] is not None:
            pushed = yield from read(started[2])
            at = None if pushed is None else pushed_place(fdb.tuple.unpack(pushed))
            found = None if at is None else fdb.tuple.pack(at)
        return found

    def token_at(self, stored: Stored, state: str, kv: Any,
                 place: Optional[Tuple[Any, ...]]) -> Optional[bytes]:
        """The token of where a job's item is (see ``JobRecord.token``): from the hold
        ``kv`` of its lease if it runs or died with it, else from its ``place`` and
        its state's due."""
        k = self.engine.keys
        due = stored.facts.due
        if kv is not None:
            hold_id, item, deadline, _kind = k.held.unpack(kv.key)
            if state == RUNNING:
                return token_of(hold_id)
            return dead_token(deadline, k.place(item)) if state == DEAD else None
        if place is None or state in (SUCCEEDED, CANCELLED):
            return None
        if state == DEAD:
            return None if due is None else dead_token(due, place)
        if state in (DELAYED, RETRYING) and due is not None:
            return delayed_token(due, place)
        return pending_token(place)

    def state_of(self, tr: Any, id_: bytes) -> Gen[Optional[Tuple[Stored, str, Any]]]:
        """Job ``id_``'s stored record, its state at the read version, and, if it
        runs or ran, its lease's held key-value (None when gone)."""
        records = self.engine.records
        stored = yield from records.read(tr, id_)
        if stored is None:
            return None
        state, due = stored.facts.state, stored.facts.due
        lease = stored.lease()
        kv = None
        if lease is not None:
            r = self.engine.keys.held.range((lease,))
            kv = yield from Range(tr, r.start, r.stop, 1).first()
        now = yield from reading(tr, self.engine.clock)
        if state == RUNNING and kv is None:  # its lease ended: its state key says
            stored = stored.returned()       # what it is now
            state, due = stored.facts.state, stored.facts.due
        if state == RUNNING and kv is not None:
            _, item, deadline, _kind = self.engine.keys.held.unpack(kv.key)
            if deadline < now:
                state = DEAD if self.engine.dies(item) else RETRYING
        elif state == DELAYED and due is not None and due <= now:
            state = PENDING
        return stored, state, kv

    def cancel(self, tr: Any, attempt: Attempt, id_: bytes) -> Gen[Tuple[Optional[str], Any]]:
        """Cancel job ``id_``: a pending, delayed or retrying job is removed (its record
        cancelled), a running one gets a cancel request (its holder is returned, to be
        told); a finished one is left as it is.  The state it had (None: unknown id)
        and, for a running job, the worker holding it."""
        found = yield from self.state_of(tr, id_)
        attempt.idle = True
        if found is None:
            return None, None
        stored, state, kv = found
        if state in FINISHED:
            return state, None
        if state == RUNNING:
            self.engine.records.cancel(tr, id_)
            attempt.idle = False
            return RUNNING, stored.parts.get("b", (None, None, None))[1]
        now = yield from attempt.now(tr, self.engine.clock)
        if kv is not None:  # the hold of a lease that expired: the item is there
            hold_id, item, deadline, kind = self.engine.keys.held.unpack(kv.key)
            keys = (bytes(kv.key), self.engine.keys.due_key(bytes(kv.key), hold_id, deadline,
                                                            kind))
            tally = Tally()
            self.engine.remove(tr, [Entry(item, self.engine.keys.item_key(item), kv.value,
                                          Hold(hold_id, deadline, kind, keys))],
                               now, tally, CANCELLED, kept=(id_,))
            tally.write(tr, attempt)
            attempt.idle = False
        else:
            yield from self.remove(tr, attempt, id_, (id_,))
        return state, None

    def remove(self, tr: Any, attempt: Attempt, id_: bytes,
               kept: Optional[Kept] = None, tell: bool = False) -> Gen[Optional[Value]]:
        """Remove the pending (visible or delayed) item pushed with ``id_``; its value,
        or None (nothing written) when there is none: never pushed, in flight, dead,
        gone, or pushed before ids told where their items are.  Its job record, if it
        has one, says cancelled (``kept``: the records known to exist; else this
        object's, or, if it keeps none, read beside the id's key; ``tell``: as for
        :meth:`remove_at`).  Reads the id's key and, for a unique job, its unique
        entry (side by side, read conflicts on both, see :meth:`start_place`)."""
        looked = None if kept is not None else self.engine.records.look(tr, [id_])
        known = yield from self.place(self.start_place(tr, id_), id_)
        if kept is None and (known or sequence_of(id_) is not None):
            kept = yield from self.engine.records.found(looked or {})
        if not known or known.startswith(RETIRED):
            sequences = self.engine.sequences
            if sequences is not None and kept is not None:  # a job waiting for its turn?
                waiting = yield from sequences.cancel(tr, self.engine, id_, kept)
                if waiting is not None:
                    attempt.idle = False
                    return decode_value(waiting)
            attempt.idle = True
            return None
        assert kept is not None
        [value] = yield from self.remove_at(tr, attempt, [fdb.tuple.unpack(known)], kept,
                                            tell)
        return value

    def remove_at(self, tr: Any, attempt: Attempt, places: List[Tuple[Any, ...]],
                  kept: Optional[Kept] = None, tell: bool = False) -> Gen[List[Optional[Value]]]:
        """Remove the pending (visible or delayed) items at ``places``; for each, its
        value, or None when no pending item is there (taken, in flight, dead, gone,
        or named earlier in ``places``).  Reads each place's item and delay hold (read
        conflicts), in parallel.  Their job records, if they have one, say cancelled
        (``kept``: the records known to exist; else this object's, or, if it keeps
        none, read after the items: one round trip more).  ``tell`` (a ``remove`` or
        ``remove_many`` of the application): each workflow store made with the
        structure is told of each item removed (``removed``: a node of it asks for
        its step, ended ``cancelled``, later in the transaction)."""
        found = {place: self.find_pending(tr, place) for place in places}
        entries: List[Optional[Entry]] = []
        for place in places:
            started = found.pop(place, None)
            entries.append(None if started is None else
                           (yield from self.pending_entry(*started)))
        taking = [e for e in entries if e is not None]
        if not taking:
            attempt.idle = True
            return [None for _ in places]
        if kept is None:
            kept = yield from self.engine.records.kept(
                tr, [self.engine.keys.item_id(e.item) for e in taking])
        now = yield from attempt.now(tr, self.engine.clock)
        tally = Tally()
        values = iter(self.engine.remove(tr, taking, now, tally, CANCELLED, kept=kept))
        for entry in taking if tell else ():
            id_ = self.engine.keys.item_id(entry.item)
            for store in told(self.engine.workflows, id_, self.engine.keys.subspace):
                store.removed(attempt.later, id_, "removed")
        tally.write(tr, attempt)
        attempt.idle = False
        return [None if e is None else decode_value(next(values)) for e in entries]

    def find_pending(self, tr: Any, place: Tuple[Any, ...]) -> Tuple[Range, Range]:
        """Start reading where the pending item at ``place`` may be: among the visible
        items, or under its delay hold (each a range read of one key)."""
        k = self.engine.keys
        at = k.items.range(place)
        visible = Range(tr, bytes(at.start), bytes(at.stop), 1)
        under = k.held.range((b"delay:" + place[-1][:16],))
        held = Range(tr, bytes(under.start), bytes(under.stop), 1)
        return visible, held

    def pending_entry(self, visible: Range, held: Range) -> Gen[Optional[Entry]]:
        """The entry :meth:`find_pending` found, or None."""
        k = self.engine.keys
        entry: Optional[Entry] = None
        kv = yield from visible.first()
        if kv is not None:
            entry = Entry(None, bytes(kv.key), kv.value, space=k.items)
        else:
            kv = yield from held.first()
            if kv is not None:
                hold_id, item, deadline, kind = k.held.unpack(kv.key)
                if kind == DELAY:
                    entry = Entry(item, k.item_key(item), kv.value,
                                  Hold(hold_id, deadline, kind,
                                       (bytes(kv.key), k.due_key(bytes(kv.key), hold_id,
                                                                 deadline, kind))))
        return entry

