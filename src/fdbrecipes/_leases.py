"""Leases: an item claimed by a consumer stays hidden until ack, release or expiry.

A claim moves the first visible item under a hold of kind LEASE (see
:class:`._ordered.Ordered`); ``ack`` removes it for good, ``extend`` moves its
deadline, ``release`` puts it back at its place.  An expired lease's item counts as
visible again, with one more delivery.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import fdb.tuple

from ._fdb import get_value, seconds_to_versions
from ._layout import Item
from ._ordered import LEASE, Entry, Ordered
from ._run import Attempt
from ._values import decode_value
from .errors import LeaseExpiredError

__all__ = ["Lease", "Leases", "lease_parts"]


class Lease:
    """A claimed item, hidden from other consumers until ack, release or expiry.

    Attributes:
        value: the item's value.
        deliveries: how many times the item has been delivered, this time included
            (1 the first time; more after leases expired or were released).
        deadline: when the lease expires, in the cluster's read-version units
            (about 1,000,000 per second).
        token: bytes naming the lease; ``ack``/``extend``/``release`` accept the token in
            place of the Lease, so another process can finish the work.
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


def lease_parts(lease: Any) -> Tuple[bytes, Item, int]:
    """Split a Lease or its token into (lease id, item tuple, deadline).

    Raises:
        TypeError/ValueError: ``lease`` is not a Lease or a token made by the library.
    """
    token = lease.token if isinstance(lease, Lease) else lease
    if type(token) is not bytes:
        raise TypeError(f"lease must be a Lease or its token (bytes), not {type(lease).__name__}")
    try:
        lease_id, item, deadline = fdb.tuple.unpack(token)
    except Exception:
        raise ValueError("lease is not a token made by this library") from None
    if type(lease_id) is not bytes or type(item) is not tuple or type(deadline) is not int:
        raise ValueError("lease is not a token made by this library")
    return lease_id, item, deadline


class Leases:
    """Claim, ack, extend and release on an :class:`._ordered.Ordered` engine."""

    __slots__ = ("o",)

    def __init__(self, engine: Ordered) -> None:
        self.o = engine

    def make(self, item: Item, value: bytes, lease_id: bytes, deadline: int) -> Lease:
        """The Lease handed to the consumer of a held item."""
        token = fdb.tuple.pack((lease_id, item, deadline))
        return Lease(decode_value(value), self.o.k.meta(item)[0] + 1, deadline, token)

    def claim(self, tr: Any, attempt: Attempt, end: int, seconds: float,
              lease_id: bytes) -> Optional[Lease]:
        """Take the first item and hold it under a lease for ``seconds``."""
        entries, extra, now = self.o.front(tr, end, 1, snapshot=False)
        self.o.put_back(tr, extra)
        if not entries:
            attempt.idle = True
            return None
        item = self.o.take(tr, entries[0])
        deadline = now + seconds_to_versions(seconds)
        self.o.hold(tr, item, entries[0].value, lease_id, deadline, LEASE)
        return self.make(item, entries[0].value, lease_id, deadline)

    def _held(self, tr: Any, lease: Any) -> Tuple[bytes, bytes, Item, int, Any]:
        lease_id, item, deadline = lease_parts(lease)
        held_key = self.o.k.held_key(lease_id, item, deadline, LEASE)
        due_key = self.o.k.due_key(lease_id, item, deadline, LEASE)
        return held_key, due_key, item, deadline, tr.get(held_key)

    def ack(self, tr: Any, _attempt: Attempt, lease: Any) -> None:
        """Remove a leased item for good."""
        held_key, due_key, item, deadline, value = self._held(tr, lease)
        now = self.o.clock(tr)
        if get_value(value) is None or now > deadline:
            raise LeaseExpiredError("cannot ack: the lease expired; its item may have "
                                    "been delivered to another consumer")
        tr.clear(held_key)
        tr.clear(due_key)
        self.o.gone(tr, item, 1, now)

    def extend(self, tr: Any, _attempt: Attempt, lease: Any, seconds: float) -> Lease:
        """Move a live lease's deadline to now + ``seconds``."""
        held_key, due_key, item, deadline, value = self._held(tr, lease)
        lease_id = lease_parts(lease)[0]
        now = self.o.clock(tr)
        encoded = get_value(value)
        if encoded is None or now > deadline:
            raise LeaseExpiredError("cannot extend: the lease expired; its item may have "
                                    "been delivered to another consumer")
        tr.clear(held_key)
        tr.clear(due_key)
        new_deadline = now + seconds_to_versions(seconds)
        self.o.hold(tr, item, encoded, lease_id, new_deadline, LEASE)
        return self.make(item, encoded, lease_id, new_deadline)

    def release(self, tr: Any, attempt: Attempt, lease: Any) -> bool:
        """Put a leased item back at its place now; False if the lease had expired."""
        held_key, due_key, item, deadline, value = self._held(tr, lease)
        now = self.o.clock(tr)
        encoded = get_value(value)
        if encoded is None or now > deadline:
            attempt.idle = True
            return False
        entry = Entry(item, encoded, self.o.k.item_key(item), (held_key, due_key, LEASE))
        self.o.put_back(tr, [entry])
        return True
