"""The listings, dead letters and finding by id or token of a sharded Queue or
PriorityQueue.

What :class:`.listing.Listing`, :mod:`.paging` and :class:`.dead.DeadLetters` do for one
engine, over the shards of :mod:`.shards`.  Every shard's listing is read side by side
and merged in one order that each shard's own follows, so a token (:mod:`.._records.tokens`)
given as ``after=`` goes on in every shard at once, and names no shard: pending items
by place (a PriorityQueue's, by priority first), leases by id (oldest claim first),
delayed items by due time, dead letters by death.  Dead letters are requeued and
purged shard after shard.  An item stays in the shard it was pushed to for its whole
life (its leases, delays and death are that shard's), so a call naming one finds it:

* a job's record names its last lease, whose id names the shard;
* a lease's token names its shard;
* otherwise (an id's key, a token) its place is looked for in every shard, side by
  side: one round trip, a small read a shard.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import fdb.tuple

from .._attempt import Attempt, gather, side_by_side
from .._fdb import Gen, Range
from .._ids import RETIRED
from .._records.records import JobRecord
from .._records.tokens import Named, TimedPlace, after_key
from .._values import Value
from .dead import Budget, DeadLetter
from .front import MIN
from .listing import DelayedItem, LeaseInfo
from .paging import PendingItem, Row, lookup, pending
from .shards import Shard, Shards, in_turn

__all__ = ["ShardedDeadLetters", "ShardedListing"]


def by_token(info: LeaseInfo) -> bytes:
    """Sort key of leases: their tokens, whose ids start with the claim's time."""
    return info.token


def by_due(item: DelayedItem) -> Tuple[Any, ...]:
    """Sort key of delayed items: when they become visible, then their delay hold's id
    (drawn from the place: a shard's order, see ``OrderedLayout.delay_id``)."""
    _, due, place = fdb.tuple.unpack(item.token)
    return due, place[-1][:16], place


def by_death(letter: DeadLetter) -> Tuple[Any, ...]:
    """Sort key of dead letters: when they died, then their place (their token)."""
    _, died, place = fdb.tuple.unpack(letter.token)
    return died, place


def by_place(row: PendingItem) -> Tuple[Any, ...]:
    """Sort key of pending items at the MIN end: their places (key order)."""
    place: Tuple[Any, ...] = fdb.tuple.unpack(row.token)[1:]
    return place


def by_priority(row: PendingItem) -> Tuple[Any, ...]:
    """Sort key of a PriorityQueue's pending items at the MAX end: the highest priority
    first, then their places."""
    place = by_place(row)
    return (-place[0], *place[1:])


def first_found(answers: List[List[Any]], n: int) -> List[Any]:
    """For each of ``n`` positions, the first answer of any shard that is not None
    (each shard answered for every position)."""
    return [next((a[i] for a in answers if a[i] is not None), None) for i in range(n)]


class ShardedListing:
    """The listings and the calls by id or token of a sharded structure (see the
    module docstring)."""

    __slots__ = ("shards",)

    def __init__(self, shards: Shards) -> None:
        self.shards = shards

    def leases(self, tr: Any, limit: Optional[int],
               after: Optional[bytes] = None) -> Gen[List[LeaseInfo]]:
        """The live leases of every shard, oldest claim first (up to ``limit``), after
        the lease whose id is ``after``."""
        found = yield from gather([p.listing.leases(tr, limit, after)
                                   for p in self.shards.parts])
        return sorted((i for f in found for i in f), key=by_token)[:limit]

    def delayed(self, tr: Any, limit: Optional[int],
                after: Optional[TimedPlace] = None) -> Gen[List[DelayedItem]]:
        """The delayed items of every shard, soonest first (up to ``limit``), after the
        one ``after`` names."""
        found = yield from gather([p.listing.delayed(tr, limit, after)
                                   for p in self.shards.parts])
        return sorted((i for f in found for i in f), key=by_due)[:limit]

    def pending(self, tr: Any, end: str, first: Optional[Tuple[Any, ...]], n: Optional[int],
                after: Optional[PendingItem] = None) -> Gen[List[PendingItem]]:
        """The first ``n`` visible items of every shard (see :func:`.paging.pending`),
        merged by place (at a PriorityQueue's MAX end, by priority first), after the
        item at place ``first`` or the row ``after``."""
        found = yield from gather([pending(tr, p.engine, end, first, n, after)
                                   for p in self.shards.parts])
        order = by_place if end == MIN else by_priority
        return sorted((r for f in found for r in f), key=order)[:n]

    def lookup(self, tr: Any, named: Named) -> Gen[Optional[Row]]:
        """The row the token ``named`` names, as its listing would list it now (see
        :func:`.paging.lookup`), in the shard holding it; None when gone."""
        if named.kind == "lease":
            shard = self.shards.of_hold(named.at)
        elif named.kind == "dead":
            shard = yield from self.holding(tr, [self.has_dead(tr, p, named.at)
                                                 for p in self.shards.parts])
        else:
            place = named.at.place if named.kind == "d" else named.at
            shard = yield from self.of_place(tr, place)
        return (yield from lookup(tr, shard.listing, shard.dead, named))

    def job(self, tr: Any, id_: bytes) -> Gen[Optional[JobRecord]]:
        """:meth:`Listing.job` in the shard of job ``id_``."""
        shard = yield from self.of_job(tr, id_)
        return (yield from shard.listing.job(tr, id_))

    def state_of(self, tr: Any, id_: bytes) -> Gen[Optional[Tuple[Any, str, Any]]]:
        """:meth:`Listing.state_of` in the shard of job ``id_``."""
        shard = yield from self.of_job(tr, id_)
        return (yield from shard.listing.state_of(tr, id_))

    def cancel(self, tr: Any, attempt: Attempt, id_: bytes) -> Gen[Tuple[Optional[str], Any]]:
        """:meth:`Listing.cancel` in the shard of job ``id_``."""
        shard = yield from self.of_job(tr, id_)
        return (yield from shard.listing.cancel(tr, attempt, id_))

    def remove(self, tr: Any, attempt: Attempt, id_: bytes,
               tell: bool = False) -> Gen[Optional[Value]]:
        """:meth:`Listing.remove` in the shard holding the item pushed with ``id_``."""
        shard = yield from self.of_item(tr, id_)
        return (yield from shard.listing.remove(tr, attempt, id_, None, tell))

    def remove_at(self, tr: Any, attempt: Attempt, places: List[Tuple[Any, ...]],
                  tell: bool = False) -> Gen[List[Optional[Value]]]:
        """:meth:`Listing.remove_at` of ``places`` in every shard, side by side (each
        removes what it holds); for each place, the value removed, or None."""
        answers = yield from side_by_side(tr, attempt, [(p.listing.remove_at,
                                                         (places, None, tell))
                                                        for p in self.shards.parts])
        return first_found(answers, len(places))

    def of_job(self, tr: Any, id_: bytes) -> Gen[Shard]:
        """The shard of job ``id_``: the one its record's last lease names, else that
        of its item (see :meth:`of_item`).  Reads the record (a read conflict on it; the
        shard's listing reads it again, from the transaction's cache)."""
        stored = yield from self.shards.records.read(tr, id_)
        began = None if stored is None else stored.parts.get("b")
        if began is not None:
            return self.shards.of_hold(began[2])
        return (yield from self.of_item(tr, id_))

    def of_item(self, tr: Any, id_: bytes) -> Gen[Shard]:
        """The shard holding, visible or delayed, the item pushed with ``id_``: its
        id's key (or, for an id its push made, its record's push key) names its place
        (see :meth:`of_place`); shard 0 when none does."""
        parts = self.shards.parts
        listing = parts[0].listing
        known = yield from listing.place(listing.start_place(tr, id_), id_)
        if not known or known.startswith(RETIRED):
            return parts[0]
        return (yield from self.of_place(tr, fdb.tuple.unpack(known)))

    def of_place(self, tr: Any, place: Tuple[Any, ...]) -> Gen[Shard]:
        """The shard holding, visible or delayed, the item at ``place`` (every shard
        read there side by side, read conflicts on what is read); shard 0 when none
        does (the shard's listing then finds nothing either)."""
        return self.holding(tr, [self.has_pending(tr, p, place) for p in self.shards.parts])

    def holding(self, tr: Any, looks: List[Gen[bool]]) -> Gen[Shard]:
        """The first shard whose look (one per shard, in order) found what it looked
        for, else shard 0."""
        found = yield from gather(looks)
        parts = self.shards.parts
        return next((p for p, there in zip(parts, found) if there), parts[0])

    @staticmethod
    def has_pending(tr: Any, shard: Shard, place: Tuple[Any, ...]) -> Gen[bool]:
        """Whether ``shard`` holds an item at ``place``, visible or delayed."""
        visible, delayed = shard.listing.find_pending(tr, place)
        return bool((yield from visible.read()) or (yield from delayed.read()))

    @staticmethod
    def has_dead(tr: Any, shard: Shard, at: TimedPlace) -> Gen[bool]:
        """Whether ``shard`` holds the dead letter ``at`` names."""
        prefix = shard.dead.prefix(at)
        return bool((yield from Range(tr, prefix, after_key(prefix), 1).read()))


class ShardedDeadLetters:
    """The dead letters of a sharded structure (see the module docstring)."""

    __slots__ = ("shards",)

    def __init__(self, shards: Shards) -> None:
        self.shards = shards

    def letters(self, tr: Any, limit: Optional[int],
                after: Optional[TimedPlace] = None) -> Gen[List[DeadLetter]]:
        """Every shard's oldest ``limit`` dead letters (all when None), merged, oldest
        first, after the one ``after`` names (see :meth:`DeadLetters.letters`)."""
        found = yield from gather([p.dead.letters(tr, limit, after) for p in self.shards.parts])
        return sorted((d for f in found for d in f), key=by_death)[:limit]

    def count(self, tr: Any) -> Gen[int]:
        """The number of dead letters of every shard (counters, by snapshot)."""
        return sum((yield from gather([p.dead.count(tr) for p in self.shards.parts])))

    def requeue(self, tr: Any, attempt: Attempt, limit: int,
                at: Optional[List[TimedPlace]] = None) -> Gen[int]:
        """Push up to ``limit`` dead letters (or those ``at`` names, each in the shard
        holding it) back, shard after shard, each shard's oldest first, within one
        budget of value bytes; the number moved."""
        return in_turn(tr, attempt, [p.dead.requeue for p in self.shards.parts], limit, at,
                       Budget())

    def purge(self, tr: Any, attempt: Attempt, limit: int,
              at: Optional[List[TimedPlace]] = None) -> Gen[int]:
        """Remove up to ``limit`` dead letters (or those ``at`` names) for good, shard
        after shard; the number removed."""
        return in_turn(tr, attempt, [p.dead.purge for p in self.shards.parts], limit, at)
