"""The listings, dead letters and finding by id of a sharded Queue or PriorityQueue.

What :class:`.listing.Listing` and :class:`.dead.DeadLetters` do for one engine, over
the shards of :mod:`.shards`: every shard's listing read side by side and merged (leases
oldest claim first, delayed items soonest first, dead letters oldest first), dead
letters requeued and purged shard after shard, and the calls that name a job or an item
by its id sent to the shard holding it.  An item stays in the shard it was pushed to
for its whole life (its leases, delays and death are that shard's), so:

* a job's record names its last lease, whose id names the shard;
* otherwise the id's key names the item's place, and every shard is looked at there
  (side by side: one round trip).
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import fdb.tuple

from .._fdb import Gen, Range, read
from .._ids import RETIRED
from .._operation import Attempt, gather
from .._values import Value
from .dead import Budget, DeadLetter
from .listing import DelayedItem, LeaseInfo
from .records import JobRecord
from .shards import Shard, Shards, in_turn

__all__ = ["ShardedDeadLetters", "ShardedListing"]


def by_token(info: LeaseInfo) -> bytes:
    """Sort key of leases: their tokens, whose ids start with the claim's time."""
    return info.token


def by_due(item: DelayedItem) -> int:
    """Sort key of delayed items: when they become visible."""
    return item.due_at


def by_death(letter: DeadLetter) -> Tuple[Any, ...]:
    """Sort key of dead letters: when they died, then their place (their token)."""
    _, died, place = fdb.tuple.unpack(letter.token)
    return died, place


class ShardedListing:
    """The listings and the calls by id of a sharded structure (see the module
    docstring)."""

    __slots__ = ("shards",)

    def __init__(self, shards: Shards) -> None:
        self.shards = shards

    def leases(self, tr: Any, limit: Optional[int]) -> Gen[List[LeaseInfo]]:
        """The live leases of every shard, oldest claim first (up to ``limit``)."""
        found = yield from gather([p.listing.leases(tr, limit) for p in self.shards.parts])
        return sorted((i for f in found for i in f), key=by_token)[:limit]

    def delayed(self, tr: Any, limit: Optional[int]) -> Gen[List[DelayedItem]]:
        """The delayed items of every shard, soonest first (up to ``limit``)."""
        found = yield from gather([p.listing.delayed(tr, limit) for p in self.shards.parts])
        return sorted((i for f in found for i in f), key=by_due)[:limit]

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

    def remove(self, tr: Any, attempt: Attempt, id_: bytes) -> Gen[Optional[Value]]:
        """:meth:`Listing.remove` in the shard holding the item pushed with ``id_``."""
        shard = yield from self.of_item(tr, id_)
        return (yield from shard.listing.remove(tr, attempt, id_))

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
        id's key names its place; every shard is read there, side by side (read
        conflicts on the places read).  Shard 0 when none holds it (the shard's listing
        then finds nothing either)."""
        parts = self.shards.parts
        known = yield from read(tr.get(parts[0].engine.ids.key(id_)))
        if not known or known.startswith(RETIRED):
            return parts[0]
        place = fdb.tuple.unpack(known)
        found = yield from gather([self.holds(tr, p, place) for p in parts])
        return next((p for p, there in zip(parts, found) if there), parts[0])

    @staticmethod
    def holds(tr: Any, shard: Shard, place: Tuple[Any, ...]) -> Gen[bool]:
        """Whether ``shard`` holds an item at ``place``, visible or delayed."""
        keys = shard.engine.keys
        at = keys.items.range(place)
        under = keys.held.range((b"delay:" + place[-1][:16],))
        visible = Range(tr, bytes(at.start), bytes(at.stop), 1)
        delayed = Range(tr, bytes(under.start), bytes(under.stop), 1)
        return bool((yield from visible.read()) or (yield from delayed.read()))


class ShardedDeadLetters:
    """The dead letters of a sharded structure (see the module docstring)."""

    __slots__ = ("shards",)

    def __init__(self, shards: Shards) -> None:
        self.shards = shards

    def letters(self, tr: Any, limit: Optional[int]) -> Gen[List[DeadLetter]]:
        """Every shard's oldest ``limit`` dead letters (all when None), merged, oldest
        first (see :meth:`DeadLetters.letters`)."""
        found = yield from gather([p.dead.letters(tr, limit) for p in self.shards.parts])
        return sorted((d for f in found for d in f), key=by_death)[:limit]

    def count(self, tr: Any) -> Gen[int]:
        """The number of dead letters of every shard (counters, by snapshot)."""
        return sum((yield from gather([p.dead.count(tr) for p in self.shards.parts])))

    def requeue(self, tr: Any, attempt: Attempt, limit: int) -> Gen[int]:
        """Push up to ``limit`` dead letters back, shard after shard, each shard's
        oldest first, within one budget of value bytes; the number moved."""
        return in_turn(tr, attempt, [p.dead.requeue for p in self.shards.parts], limit,
                       Budget())

    def purge(self, tr: Any, attempt: Attempt, limit: int) -> Gen[int]:
        """Remove up to ``limit`` dead letters for good, shard after shard; the number
        removed."""
        return in_turn(tr, attempt, [p.dead.purge for p in self.shards.parts], limit)
