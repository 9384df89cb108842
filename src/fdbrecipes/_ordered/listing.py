"""Stuck work made visible: what is in flight, what is delayed, and removing one pending
item by its idempotency id (Queue and PriorityQueue).

* In flight: the live leases, from the held range ``h`` (a lease's id starts with the
  clock reading of its claim, so they come oldest claim first).
* Delayed: the delayed items, from the deadline index ``d``, soonest first.
* Removing by id: an id's key holds its item's place (``seq, random``), which names the
  item's key while it is visible and, through ``_layout.OrderedLayout.delay_id``, its
  hold while it is delayed.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional

import fdb.tuple

from .._clock import reading
from .._fdb import Gen, Range, Tally, read, snap
from .._ids import RETIRED
from .._layout import DELAY, LEASE
from .._operation import Attempt
from .._values import Value, claimed_at, decode_value
from .engine import Ordered
from .front import Entry, Hold
from .leases import token_of

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


class DelayedItem(NamedTuple):
    """A delayed item: its value, when it becomes visible (a clock reading), and its
    deliveries so far."""

    value: Value
    due_at: int
    deliveries: int


class Listing:
    """The listings and the removal by id of one :class:`.engine.Ordered` engine."""

    __slots__ = ("engine",)

    def __init__(self, engine: Ordered) -> None:
        self.engine = engine

    def leases(self, tr: Any, limit: Optional[int]) -> Gen[List[LeaseInfo]]:
        """The live leases, oldest claim first (up to ``limit``); snapshot reads, 1,000
        held keys a round trip."""
        k = self.engine.keys
        r = k.held.range()
        begin = r.start
        now = yield from reading(tr, self.engine.clock)
        out: List[LeaseInfo] = []
        while limit is None or len(out) < limit:
            kvs = yield from Range(snap(tr), begin, r.stop, 0 if limit is None else 1_000).read()
            for kv in kvs:
                hold_id, item, deadline, kind = k.held.unpack(kv.key)
                if kind == LEASE and deadline >= now:
                    out.append(LeaseInfo(decode_value(kv.value), k.deliveries(item) + 1,
                                         deadline, claimed_at(hold_id), token_of(hold_id)))
            if limit is None or len(kvs) < 1_000:
                break
            begin = bytes(kvs[-1].key) + b"\x00"
        return out if limit is None else out[:limit]

    def delayed(self, tr: Any, limit: Optional[int]) -> Gen[List[DelayedItem]]:
        """The delayed items, soonest first (up to ``limit``); snapshot reads, 1,000
        deadlines a round trip."""
        k = self.engine.keys
        now = yield from reading(tr, self.engine.clock)
        begin, end = k.due.pack((now + 1,)), k.due_range.stop
        out: List[DelayedItem] = []
        while limit is None or len(out) < limit:
            kvs = yield from Range(snap(tr), begin, end, 0 if limit is None else 1_000).read()
            entries = []
            for kv in kvs:
                deadline, hold_id, item, kind = k.due.unpack(kv.key)
                if kind == DELAY:
                    entries.append(Entry(item, k.item_key(item), None,
                                         Hold(hold_id, deadline, kind)))
            [found] = yield from self.engine.read_held(snap(tr), (entries,))
            out += [DelayedItem(decode_value(e.value), e.hold.deadline,  # type: ignore[arg-type,union-attr]
                                k.deliveries(e.item)) for e in found]
            if limit is None or len(kvs) < 1_000:
                break
            begin = bytes(kvs[-1].key) + b"\x00"
        return out if limit is None else out[:limit]

    def remove(self, tr: Any, attempt: Attempt, id_: bytes) -> Gen[Optional[Value]]:
        """Remove the pending (visible or delayed) item pushed with ``id_``; its value,
        or None (nothing written) when there is none: never pushed, in flight, dead,
        gone, or pushed before ids told where their items are."""
        k = self.engine.keys
        known = yield from read(tr.get(self.engine.ids.key(id_)))
        if not known or known.startswith(RETIRED):
            attempt.idle = True
            return None
        place = fdb.tuple.unpack(known)
        at = k.items.range(place)
        visible = Range(tr, bytes(at.start), bytes(at.stop), 1)
        under = k.held.range((b"delay:" + place[-1][:16],))
        held = Range(tr, bytes(under.start), bytes(under.stop), 1)
        now = yield from attempt.now(tr, self.engine.clock)
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
        if entry is None:
            attempt.idle = True
            return None
        tally = Tally()
        value = self.engine.remove(tr, [entry], now, tally)[0]
        tally.write(tr, attempt)
        return decode_value(value)

