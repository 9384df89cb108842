"""Dead letters: items whose leases ended without ack ``max_deliveries`` times.

They wait under ``x/(died, item, died_at)``, oldest first, out of the order
and out of ``size``, until an operator requeues them (back at the tail, delivery
count reset) or purges them.  See :class:`.engine.Ordered` for how they get there.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from fdb.tuple import pack

from .._attempt import Attempt
from .._clock import reading
from .._fdb import VERSIONS_PER_SECOND, Gen, Range, Tally, get_value, read_le64
from .._records.records import DEAD
from .._records.tokens import TimedPlace, after_key, dead_token
from .._values import Value, decode_value
from .engine import Ordered
from .front import value_of

__all__ = ["Budget", "DeadLetter", "DeadLetters"]

#: Dead letters one transaction moves at most; past it, a call given a Database runs
#: several transactions and one given a Transaction is refused.
DEAD_BATCH = 1_000
#: Value bytes one requeue transaction writes at most.
DEAD_BYTES = 4_000_000


class DeadLetter(NamedTuple):
    """An item that was delivered ``max_deliveries`` times without being acked.

    Attributes:
        value: the item's value.
        deliveries: how many times it was delivered.
        died_at: when it became a dead letter, in seconds since the epoch (the clock
            of the client that moved it).
        token: bytes naming this dead letter.
        reason: why it was buried (``bury(..., reason=...)``, a Worker's
            ``Discard``), or None (its deliveries ran out).
        id: the item's id (its job's), or None if it was pushed without one.
    """

    value: Value
    deliveries: int
    died_at: float
    token: bytes
    reason: Optional[str] = None
    id: Optional[bytes] = None


class Budget:
    """The value bytes a requeue may still write in its transaction (shared by the
    shards of a sharded structure's, see :mod:`.shards`), and whether it moved any
    (the first always moves)."""

    __slots__ = ("left", "used")

    def __init__(self, left: int = DEAD_BYTES) -> None:
        self.left = left
        self.used = False


def dead_order(letter: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """Sort key of a dead letter found by :meth:`DeadLetters.letters`: when it died,
    then its place (the order of ``x``)."""
    return letter[0], letter[1]


def key_of(kv: Any) -> bytes:
    """Sort key of a key-value read: its key."""
    return bytes(kv.key)


class DeadLetters:
    """The dead letters of an :class:`.engine.Ordered` engine."""

    __slots__ = ("engine",)

    def __init__(self, engine: Ordered) -> None:
        self.engine = engine

    def _read(self, tr: Any, limit: Optional[int], after: Optional[TimedPlace] = None) -> Range:
        r = self.engine.keys.dead.range()
        begin = r.start if after is None else after_key(self.prefix(after))
        return Range(tr, begin, r.stop, limit or 0)

    def prefix(self, at: TimedPlace) -> bytes:
        """What the key of the dead letter ``at`` names starts with (its item's
        encoding, less its end, begins with its place's)."""
        return bytes(self.engine.keys.dead.pack((at.at, at.place)))[:-1]

    def letters(self, tr: Any, limit: Optional[int],
                after: Optional[TimedPlace] = None) -> Gen[List[DeadLetter]]:
        """The oldest ``limit`` dead letters (all when None), oldest first, after the
        one ``after`` names if given: those moved under ``x``, and the expired leases
        whose items died but were not moved yet (read by snapshot), at the places they
        will take."""
        started = self._read(tr, limit, after)
        now = yield from reading(tr, self.engine.clock)
        dying = yield from self.engine.dying(tr, now)
        found = []
        for kv in (yield from started.read()):
            died, item, died_at, *why = self.engine.keys.dead.unpack(kv.key)
            found.append((died, self.engine.keys.place(item), kv.value, item, died_at,
                          why[0] if why else None))
        wall = time.time()
        for entry in dying:
            assert entry.hold is not None
            died = entry.hold.deadline
            keys = self.engine.keys
            item = keys.renewed(entry.item, keys.deliveries(entry.item) + 1, died)
            found.append((died, self.engine.keys.place(item), value_of(entry), item,
                          wall - (now - died) / VERSIONS_PER_SECOND, None))
        if after is not None:
            found = [f for f in found if dead_order(f) > after]
        found.sort(key=dead_order)
        out = []
        keys = self.engine.keys
        for died, place, value, item, died_at, reason in found[:limit]:
            out.append(DeadLetter(decode_value(value), keys.deliveries(item), died_at,
                                  dead_token(died, place), reason, keys.item_id(item)))
        return out

    def find(self, tr: Any, at: List[TimedPlace]) -> Gen[List[Any]]:
        """The key-values of the dead letters ``at`` names that are there (each named
        once), in their order; a range read of one key each (read conflicts), in
        parallel."""
        reads: Dict[bytes, Range] = {}
        for place in at:
            prefix = self.prefix(place)
            reads.setdefault(prefix, Range(tr, prefix, after_key(prefix), 1))
        found = []
        for started in reads.values():
            kv = yield from started.first()
            if kv is not None:
                found.append(kv)
        return sorted(found, key=key_of)

    def chosen(self, tr: Any, limit: int, at: Optional[List[TimedPlace]]) -> Gen[List[Any]]:
        """The dead letters a requeue or purge moves: the oldest ``limit``, or those
        ``at`` names (see :meth:`find`)."""
        if at is None:
            return (yield from self._read(tr, limit).read())
        return (yield from self.find(tr, at))

    def count(self, tr: Any) -> Gen[int]:
        """The number of dead letters, from the counters, by snapshot."""
        keys = self.engine.keys
        died, revived = tr.snapshot.get(keys.dead_in), tr.snapshot.get(keys.dead_out)
        yield died
        yield revived
        return read_le64(get_value(died)) - read_le64(get_value(revived))

    def requeue(self, tr: Any, attempt: Attempt, limit: int,
                at: Optional[List[TimedPlace]] = None,
                budget: Optional[Budget] = None) -> Gen[int]:
        """Push the oldest ``limit`` dead letters (or those ``at`` names) back at the
        tail of their groups, with a fresh delivery count (ids kept), while their
        values fit in ``budget`` (by default :data:`DEAD_BYTES`; the first always
        moves); the number moved.  Expired leases whose items died are moved to the
        dead letters first.  Each job's record, if it has one (a dead job's may be
        pruned already), says pending again, in the same transaction, whether or not
        this object keeps records: it reads each letter's record state beside the
        tail's read (no round trip more; see ``Records.look``).  A unique job takes its
        key back if it is free or names it, else runs beside its holder without it
        (see ``UniqueKeys.requeued``): a read of each such key's entry, also beside the
        tail's (read conflicts on them)."""
        budget = budget or Budget()
        now = yield from attempt.now(tr, self.engine.clock)
        tally = Tally()
        buried = yield from self.engine.bury_dying(tr, now, tally)
        letters = yield from self.chosen(tr, limit, at)
        items = [self.engine.keys.dead.unpack(kv.key)[1] for kv in letters]
        records = self.engine.records
        looked = records.look(tr, [self.engine.keys.item_id(i) for i in items], every=True)
        unique = self.engine.unique
        entries = None if unique is None else unique.look(
            tr, [self.engine.keys.item_id(i) for i in items])
        seqs = yield from self.engine.next_seqs(tr, {self.engine.keys.group(i) for i in items})
        kept = yield from records.found(looked)
        moved = 0
        for kv, item in zip(letters, items):
            if budget.used and len(kv.value) > budget.left:
                break
            budget.left -= len(kv.value)
            budget.used = True
            tr.clear(kv.key)
            id_ = self.engine.keys.item_id(item)
            back = self.engine.append(tr, self.engine.keys.group(item), seqs, kv.value,
                                      (0, id_), now, 0, tally, kept)
            if unique is not None and entries is not None:  # it takes its key back
                yield from unique.requeued(tr, entries, id_, self.engine.keys.place(back), now)
            if id_ is not None:  # the id tells where its item is now
                tr.set(self.engine.ids.key(id_), pack(self.engine.keys.place(back)))
                if id_ in kept:  # its record ran again: no end, no cancel
                    records.revived(tr, id_)
            if self.engine.sequences is not None:  # a blocked sequence's head runs again
                self.engine.sequences.requeued(tally, id_)
            moved += 1
        if moved:
            tally.add(self.engine.keys.dead_out, moved)
        tally.write(tr, attempt)
        attempt.idle = not (moved or buried)
        return moved

    def purge(self, tr: Any, attempt: Attempt, limit: int,
              at: Optional[List[TimedPlace]] = None) -> Gen[int]:
        """Remove the oldest ``limit`` dead letters (or those ``at`` names) for good;
        the number removed.  The range read takes a read conflict, so a concurrent new
        dead letter conflicts.  Each job's record, if it has one (a dead job's may be
        pruned already; read, one round trip more, whether or not this object keeps
        records), stays dead but names no dead letter any more (its token is None)."""
        now = yield from attempt.now(tr, self.engine.clock)
        tally = Tally()
        buried = yield from self.engine.bury_dying(tr, now, tally)
        letters = yield from self.chosen(tr, limit, at)
        keys = self.engine.keys
        items = [keys.dead.unpack(kv.key)[1] for kv in letters]
        records = self.engine.records
        kept = yield from records.kept(tr, [keys.item_id(i) for i in items], every=True)
        for kv, item in zip(letters, items):
            tr.clear(kv.key)
            id_ = keys.item_id(item)
            self.engine.forget(tr, item, now)
            if id_ in kept:
                records.state(tr, id_, DEAD, keys.deliveries(item))
        tally.add(self.engine.keys.dead_out, len(letters))
        tally.write(tr, attempt)
        attempt.idle = not (letters or buried)
        return len(letters)
