"""Listings that page by key: the pending items of a queue with their tokens, and the
finished jobs of a structure (from its index of finished records); and the row one
token names (:func:`lookup`).

The other listings (in flight, delayed: :mod:`.listing`; dead letters: :mod:`.dead`)
take their cursor there; the tokens and cursors are :mod:`.tokens`.
"""

from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Tuple, Union

import fdb.tuple
from fdb.subspace_impl import Subspace

from .._clock import reading
from .._fdb import Gen, Range, get_value, snap
from .._layout import LEASE
from .._values import Value, claimed_at, decode_value
from .dead import DeadLetter, DeadLetters
from .engine import Ordered
from .front import Entry, value_of
from .leases import token_of
from .listing import DelayedItem, LeaseInfo, Listing
from .records import FINISHED, JobError, Records
from .tokens import Named, after_key, dead_token, delayed_token, finished_token, pending_token

__all__ = ["FinishedJob", "PendingItem", "Row", "finished", "lookup", "pending"]

#: Entries of the index of finished records one round trip reads at most.
FINISHED_PAGE = 1_000


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


class FinishedJob(NamedTuple):
    """A finished job, as ``finished`` lists it (its whole record: ``job``).

    Attributes:
        id: the job's id.
        group: its FairQueue group; None in a Queue or PriorityQueue.
        state: ``succeeded``, ``dead`` or ``cancelled``.
        attempts: how many times it was handed to a consumer.
        finished_at: when it finished (wall-clock seconds).
        expires_at: when its record is pruned (wall-clock seconds).
        error: its last error, or None.
        token: names it in the listing: ``after=`` of the next page.
    """

    id: bytes
    group: Any
    state: str
    attempts: int
    finished_at: float
    expires_at: float
    error: Optional[JobError]
    token: bytes


class _Looked(NamedTuple):
    entry: Tuple[Any, ...]
    state: Any
    end: Any
    error: Any


def _row(looked: _Looked) -> Optional[FinishedJob]:
    """The row of an index entry whose record still says it finished then; None for a
    stale entry (a dead job requeued since: its record moved on)."""
    state, end, error = (get_value(f) for f in (looked.state, looked.end, looked.error))
    if state is None or end is None:
        return None
    name, attempts, _due = fdb.tuple.unpack(state)
    finished_at, expires_at = fdb.tuple.unpack(end)
    expires, *where, id_ = looked.entry
    if name not in FINISHED or expires_at != expires:
        return None
    return FinishedJob(id_, where[0] if where else None, name, attempts, finished_at,
                       expires_at, None if error is None else JobError(*fdb.tuple.unpack(error)),
                       finished_token(looked.entry))


def finished(tr: Any, expiry: Subspace, records_at: Callable[[Tuple[Any, ...]], Records],
             limit: Optional[int], after: Optional[Tuple[Any, ...]]) -> Gen[List[FinishedJob]]:
    """The finished jobs of the index of finished records ``expiry``, the latest to be
    pruned first (the latest finished, when every record is kept as long), up to
    ``limit``, after the entry ``after`` if given; ``records_at(where)`` gives the
    records of the queue an entry names.  Snapshot reads: the index, backwards, 1,000
    entries a round trip, then the state, end and error of each record named, in
    parallel (never its result).  Stale entries are skipped."""
    r = expiry.range()
    stop = r.stop if after is None else expiry.pack(after)
    reader = snap(tr)
    out: List[FinishedJob] = []
    while limit is None or len(out) < limit:
        ask = FINISHED_PAGE if limit is None else min(FINISHED_PAGE, limit - len(out))
        kvs = yield from Range(reader, r.start, stop, ask, True).read()
        looked = []
        for kv in kvs:
            entry = expiry.unpack(kv.key)
            keys = records_at(tuple(entry[1:-1])).keys
            looked.append(_Looked(entry, *(reader.get(keys.key(entry[-1], part))
                                           for part in ("s", "f", "e"))))
        for one in looked:
            yield one.state
            yield one.end
            yield one.error
            row = _row(one)
            if row is not None:
                out.append(row)
        if len(kvs) < ask:
            break
        stop = kvs[-1].key
    return out if limit is None else out[:limit]


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
