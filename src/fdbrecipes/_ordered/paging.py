"""Listings that page by key: the pending items of a queue with their tokens; and the
row one token names (:func:`lookup`).

The other listings (in flight, delayed: :mod:`.listing`; dead letters: :mod:`.dead`)
take their cursor there; the tokens and cursors are :mod:`.._records.tokens`; the
finished jobs' listing is :mod:`.._records.finished`.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Tuple, Union

import fdb.tuple

from .._clock import reading
from .._fdb import Gen, Range
from .._layout import LEASE
from .._records.tokens import Named, after_key, dead_token, delayed_token, pending_token
from .._values import Value, claimed_at, decode_value
from .dead import DeadLetter, DeadLetters
from .engine import Ordered
from .front import Entry, value_of
from .leases import token_of
from .listing import DelayedItem, LeaseInfo, Listing

__all__ = ["PendingItem", "Row", "lookup", "pending"]


class PendingItem(NamedTuple):
    """A visible item, as ``pending`` lists it.

    Attributes:
        value: its value.
        id: its idempotency id (its job's id), or None if it was pushed without one.
        deliveries: how many times it was delivered before (a lease that ended, a
            release).
        since: when it became visible (a clock reading: a read version, about
            1,000,000 per second).
        priority: its priority in a PriorityQueue; None in a Queue or a FairQueue.
        token: names it: ``after=`` of the next page, ``remove_many``.
    """

    value: Value
    id: Optional[bytes]
    deliveries: int
    since: int
    priority: Optional[int]
    token: bytes


def pending(tr: Any, engine: Ordered, end: str, first: Optional[Tuple[Any, ...]], n: Optional[int],
            after: Optional[PendingItem] = None) -> Gen[List[PendingItem]]:
    """The first ``n`` (all when None) visible items at ``end``, expired holds counted
    where they are (as a pop sees them), after the item at place ``first`` (or after
    the row ``after``, the last of the page before, which wins); snapshot reads (see
    ``Ordered.front``)."""
    keys = engine.keys
    place = first if after is None else fdb.tuple.unpack(after.token)[1:]
    start = None
    if place is not None:  # sorts after every key of the item at that place
        start = Entry(tuple(place), bytes(keys.items.pack(tuple(place))) + b"\xff", None)
    front = yield from engine.front(tr, end, n, conflict=False, after=start, writing=False)
    out = []
    for entry in front.entries:
        item = entry.item
        since = keys.since(item) if entry.hold is None else entry.hold.deadline
        out.append(PendingItem(decode_value(value_of(entry)), keys.item_id(item),
                               keys.deliveries(item), since,
                               item[0] if keys.group_len else None,
                               pending_token(keys.place(item))))
    return out


#: A row of a queue's listings.
Row = Union[PendingItem, DelayedItem, LeaseInfo, DeadLetter]


def lookup(tr: Any, listing: Listing, dead: DeadLetters,
           named: Named) -> Gen[Optional[Row]]:
    """The row the token ``named`` names, as its listing would list it now (a delayed
    item whose delay passed as pending), or None when it is no longer there (taken,
    moved, its lease ended).  One range read of one key (a read conflict on it) and
    the clock."""
    engine = listing.engine
    keys = engine.keys
    if named.kind == "dead":
        prefix = dead.prefix(named.at)
        kv = yield from Range(tr, prefix, after_key(prefix), 1).first()
        if kv is None:
            return None
        died, item, died_at, *why = keys.dead.unpack(kv.key)
        return DeadLetter(decode_value(kv.value), keys.deliveries(item), died_at,
                          dead_token(died, keys.place(item)), why[0] if why else None,
                          keys.item_id(item))
    if named.kind == "lease":
        r = keys.held.range((named.at,))
        kv = yield from Range(tr, r.start, r.stop, 1).first()
        now = yield from reading(tr, engine.clock)
        if kv is None:
            return None
        hold_id, item, deadline, kind = keys.held.unpack(kv.key)
        if kind != LEASE or deadline < now:
            return None
        return LeaseInfo(decode_value(kv.value), keys.deliveries(item) + 1, deadline,
                         claimed_at(hold_id), token_of(hold_id), keys.item_id(item))
    place = named.at.place if named.kind == "d" else named.at
    entry = yield from listing.pending_entry(*listing.find_pending(tr, place))
    now = yield from reading(tr, engine.clock)
    if entry is None:
        return None
    item, value = entry.item, decode_value(value_of(entry))
    if entry.hold is not None and entry.hold.deadline > now:
        return DelayedItem(value, entry.hold.deadline, keys.deliveries(item),
                           keys.item_id(item), delayed_token(entry.hold.deadline, place))
    since = keys.since(item) if entry.hold is None else entry.hold.deadline
    return PendingItem(value, keys.item_id(item), keys.deliveries(item), since,
                       item[0] if keys.group_len else None, pending_token(place))
