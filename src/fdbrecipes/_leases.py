"""Leases: an item claimed by a consumer stays hidden until ack, release or expiry.

A claim moves an item under a hold of kind LEASE (see :class:`._ordered.Ordered`):
``h/(lease id, item, deadline, LEASE)``.  A lease is named by its id alone, so it
keeps its identity when ``extend`` moves its deadline: the original Lease object and
its token stay valid until the lease really expires or is acked.  ``ack`` removes the
item for good, ``release`` puts it back (at once, or after a delay), and an expired
lease's item counts as visible again with one more delivery, or, once it has been
delivered ``max_deliveries`` times, goes to the dead letters.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import fdb.tuple

from ._fdb import WANT_ALL, Tally, first, seconds_to_versions
from ._front import Entry, Hold
from ._layout import DELAY, LEASE
from ._ordered import Ordered
from ._run import Attempt
from ._values import BATCH_BYTES, BATCH_ID_LEN, batch_ids, decode_value, random_id, unpack_token
from .errors import LeaseExpiredError

__all__ = ["Lease", "Leases", "lease_id"]


class Lease:
    """A claimed item, hidden from other consumers until ack, release or expiry.

    Attributes:
        value: the item's value.
        deliveries: how many times the item has been delivered, this time included
            (1 the first time; more after leases expired or were released).
        deadline: when the lease expires, in the cluster's read-version units
            (about 1,000,000 per second), as of the call that made this object.
        token: bytes naming the lease; ``ack``/``extend``/``release`` accept the token in
            place of the Lease, so another process can finish the work.  It names
            the lease, not a deadline: it stays valid across ``extend``.
    """

    __slots__ = ("deadline", "deliveries", "token", "value")

    def __init__(self, value: Any, deliveries: int, deadline: int, token: bytes) -> None:
        self.value = value
        self.deliveries = deliveries
        self.deadline = deadline
        self.token = token

    def __repr__(self) -> str:
        return (
            f"Lease(value={self.value!r}, deliveries={self.deliveries}, "
            f"deadline={self.deadline})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lease) and other.token == self.token

    def __hash__(self) -> int:
        return hash(self.token)


def lease_id(lease: Any, name: str = "lease") -> bytes:
    """The id a Lease or its token names.

    Raises:
        TypeError/ValueError: ``lease`` is not a Lease or a token made by the library.
    """
    token = lease.token if isinstance(lease, Lease) else lease
    parts = unpack_token(token, name, "a Lease or its token (bytes)")
    if parts is None or len(parts) != 2 or parts[0] != "lease" or type(parts[1]) is not bytes:
        raise ValueError(f"{name} is not a lease token made by this library")
    found: bytes = parts[1]
    return found


def token_of(hold_id: bytes) -> bytes:
    """The token naming lease ``hold_id``."""
    token: bytes = fdb.tuple.pack(("lease", hold_id))
    return token


class Live(NamedTuple):
    """A lease found alive: its entry (item, value, hold) and the clock's reading."""

    entry: Entry
    now: int


class Leases:
    """Claim, ack, extend and release on an :class:`._ordered.Ordered` engine."""

    __slots__ = ("o",)

    def __init__(self, engine: Ordered) -> None:
        self.o = engine

    def make(self, entry: Entry) -> Lease:
        """The Lease handed to the consumer of a held item."""
        assert entry.hold is not None and entry.value is not None
        return Lease(decode_value(entry.value), self.o.k.deliveries(entry.item) + 1,
                     entry.hold.deadline, token_of(entry.hold.hold_id))

    def claim(self, tr: Any, attempt: Attempt, n: int, end: int, seconds: float,
              spread: int, budget: int) -> List[Lease]:
        """Take ``n`` items (fewer if fewer are visible, or once their values pass
        ``budget`` bytes), each among the first ``n + spread - 1`` (see
        :meth:`Ordered.chosen`), and hold each under a lease of its own for
        ``seconds``."""
        front, entries = self.o.chosen(tr, attempt, end, n, spread)
        tally = Tally()
        settled = self.o.settle(tr, front, tally)
        deadline = front.now + seconds_to_versions(seconds)
        leases: List[Lease] = []
        size = 0
        ids = batch_ids(len(entries))  # one key range: ack_many reads them at once
        for entry, hold_id in zip(entries, ids):
            assert entry.value is not None
            size += len(entry.value)
            if leases and size > budget:
                break
            item = self.o.take(tr, entry, front.now, tally)
            hold = self.o.hold(tr, item, entry.value, hold_id, deadline, LEASE, tally)
            leases.append(self.make(Entry(item, entry.key, entry.value, hold)))
        tally.write(tr)
        attempt.idle = not (leases or settled)
        return leases

    def claim_one(self, tr: Any, attempt: Attempt, end: int, seconds: float,
                  spread: int) -> Optional[Lease]:
        """:meth:`claim` of one item: its Lease, or None when none is visible."""
        leases = self.claim(tr, attempt, 1, end, seconds, spread, BATCH_BYTES)
        return leases[0] if leases else None

    def find(self, tr: Any, attempt: Attempt, lease: Any, doing: str) -> Live:
        """The live lease ``lease`` names, read with a conflict on it.

        Raises:
            LeaseExpiredError: it is gone (acked, taken back, cleared) or its deadline
                has passed (even if nobody took the item back yet).
        """
        hold_id = lease_id(lease)
        found = first(self.start_read(tr, hold_id))
        now = attempt.now(tr, self.o.clock)  # after the read: no wait
        entry = self.alive(found, hold_id, now)
        if entry is not None:
            return Live(entry, now)
        raise LeaseExpiredError(f"cannot {doing}: the lease expired; its item may have "
                                "been delivered to another consumer")

    def start_read(self, tr: Any, hold_id: bytes) -> Any:
        """Start reading lease ``hold_id``'s held key (a read conflict on its range)."""
        r = self.o.k.held.range((hold_id,))
        return tr.get_range(r.start, r.stop, limit=1)

    def alive(self, kv: Any, hold_id: bytes, now: int,
              parts: Optional[Tuple[Any, ...]] = None) -> Optional[Entry]:
        """The leased entry held under ``kv`` (the first result of :meth:`start_read`,
        or None), if the lease is still alive at ``now``; else None.  ``parts``: the
        key, unpacked already."""
        if kv is None:
            return None
        key = bytes(kv.key)
        _, item, deadline, kind = self.o.k.held.unpack(key) if parts is None else parts
        if kind != LEASE or now > deadline:
            return None
        keys = (key, self.o.k.due_key(key, hold_id, deadline, kind))
        return Entry(item, self.o.k.item_key(item), kv.value, Hold(hold_id, deadline, kind, keys))

    def ack(self, tr: Any, attempt: Attempt, lease: Any) -> None:
        """Remove a leased item for good."""
        live = self.find(tr, attempt, lease, "ack")
        tally = Tally()
        self.o.remove(tr, [live.entry], live.now, tally)
        tally.write(tr)

    def ack_many(self, tr: Any, attempt: Attempt, leases: List[Any]) -> List[bool]:
        """Ack every lease still alive; for each, whether it was (all reads in parallel,
        see :meth:`read_many`).  A lease named twice is acked once: False the second
        time, as a second :meth:`ack` would have raised."""
        ids = [lease_id(lease) for lease in leases]
        found = self.read_many(tr, ids)
        now = attempt.now(tr, self.o.clock)  # after the reads: no wait
        tally = Tally()
        done = []
        for hold_id in ids:
            kv, parts = found.pop(hold_id, (None, None))
            entry = self.alive(kv, hold_id, now, parts)
            if entry is not None:
                self.o.remove(tr, [entry], now, tally)
            done.append(entry is not None)
        tally.write(tr)
        attempt.idle = not any(done)
        return done

    def read_many(self, tr: Any, ids: List[bytes]) -> Dict[bytes, Tuple[Any, Any]]:
        """The held key-value of each lease in ``ids`` that is held, with its key
        unpacked, by lease id; read in parallel with read conflicts.

        Leases of one claim (ids of :data:`BATCH_ID_LEN` bytes sharing their first
        16, then numbered) are read with one range read from the lowest number asked
        for to the highest, when at most half the leases in that span are left out:
        it conflicts with any change to a lease of the claim in the span.  Other
        leases are read one by one (a read conflict on each).
        """
        claims: Dict[bytes, List[bytes]] = {}
        for hold_id in ids:
            prefix = hold_id[:16] if len(hold_id) == BATCH_ID_LEN else hold_id
            claims.setdefault(prefix, []).append(hold_id)
        started: List[Any] = []
        for members in claims.values():
            distinct = sorted(set(members))
            low, high = distinct[0], distinct[-1]
            gap = int.from_bytes(high[16:], "big") - int.from_bytes(low[16:], "big")
            if len(distinct) > 1 and gap < 2 * len(distinct):
                begin, end = self.o.k.held_span(low, high)
                started.append(tr.get_range(begin, end, streaming_mode=WANT_ALL))
            else:
                started.extend(self.start_read(tr, hold_id) for hold_id in distinct)
        wanted = set(ids)
        found: Dict[bytes, Tuple[Any, Any]] = {}
        for kvs in started:
            for kv in kvs:
                parts = self.o.k.held.unpack(kv.key)
                if parts[0] in wanted:
                    found[parts[0]] = (kv, parts)
        return found

    def extend(self, tr: Any, attempt: Attempt, lease: Any, seconds: float) -> Lease:
        """Move a live lease's deadline to now + ``seconds``; the same lease, renewed.
        A deadline moved earlier touches the wake key: waiters sleeping until the
        old one look again."""
        live = self.find(tr, attempt, lease, "extend")
        entry, hold = live.entry, live.entry.hold
        assert hold is not None and entry.value is not None
        for key in self.o.hold_keys(entry):
            tr.clear(key)
        deadline = live.now + seconds_to_versions(seconds)
        keys = self.o.k.hold_keys(hold.hold_id, entry.item, deadline, LEASE)
        tr.set(keys[0], entry.value)
        tr.set(keys[1], b"")
        if deadline < hold.deadline:
            tally = Tally()
            self.o.wake(tally)
            tally.write(tr)
        return self.make(Entry(entry.item, entry.key, entry.value,
                               Hold(hold.hold_id, deadline, LEASE, keys)))

    def release(self, tr: Any, attempt: Attempt, lease: Any, delay: int) -> bool:
        """End a live lease without ack: the item goes back to its place, visible at
        once or after ``delay`` clock units, or to the dead letters once it has been
        delivered ``max_deliveries`` times.  False (nothing written) if the lease had
        already expired."""
        try:
            live = self.find(tr, attempt, lease, "release")
        except LeaseExpiredError:
            attempt.idle = True
            return False
        entry = live.entry
        tally = Tally()
        if self.o.dies(entry.item):
            self.o.bury(tr, entry, live.now, tally)
        elif delay > 0:
            item = self.o.take(tr, entry, live.now, tally)
            assert entry.value is not None
            self.o.hold(tr, item, entry.value, random_id(), live.now + delay, DELAY, tally)
            self.o.wake(tally)  # waiters learn of the new deadline
        else:
            self.o.put_back(tr, entry, live.now, tally)
        tally.write(tr)
        return True
