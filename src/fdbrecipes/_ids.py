"""Idempotency ids: ``push(..., id=...)`` stores at most one item per id.

Keys inside the structure's subspace ``S``::

    S/"k"/(id,)           = ''  (WeightTree: the item's handle)   an id remembered
                          = RETIRED + expiry + that               ... after its item left
    S/"g"/(expiry, id)    = ''                                    when to forget it
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from fdb.subspace_impl import Subspace

from ._fdb import WANT_ALL, get_value, le64, read_le64, seconds_to_versions
from ._values import check_seconds

#: Scheduled expiries a push with an id looks at, and collects, per transaction.
COLLECT_BATCH = 4
#: First byte of an id key's value once its item left: then the expiry (int64) and
#: what it held before.  Live values are empty or a tuple-packed handle, which never
#: start with it.
RETIRED = b"\xff"


class IdCheck(NamedTuple):
    """A push's id being checked: the id, its key, the read of it, the expiries
    being read."""

    id: bytes
    key: bytes
    known: Any
    collecting: Any


class Ids:
    """Idempotency ids: ``k/(id)`` exists while an id is remembered.

    A push with an id reads its id key (a read conflict on that key only, so pushes
    with different ids never conflict).  When the item leaves the structure for good,
    the id key is marked with its expiry (``id_retention`` later) and ``g/(expiry,
    id)`` schedules the id to be forgotten.  Pushes with new ids collect a few
    expired ids each, so ids do not pile up; a push of an id whose retention has
    passed is a new push, whether or not a collector got to it first.
    """

    __slots__ = ("gc", "ids", "retention")

    def __init__(self, subspace: Subspace, retention: Any) -> None:
        self.ids = subspace["k"]
        self.gc = subspace["g"]
        self.retention = seconds_to_versions(check_seconds(retention, "id_retention"))

    def key(self, id_: bytes) -> bytes:
        """The key that remembers ``id_``."""
        return bytes(self.ids.pack((id_,)))

    def check(self, tr: Any, id_: Optional[bytes]) -> Optional[IdCheck]:
        """For a push with ``id_`` (None: no id, no reads): start reading the id's key
        (a read conflict on it) and, by snapshot, the oldest scheduled expiries."""
        if id_ is None:
            return None
        key = self.key(id_)
        return IdCheck(id_, key, tr.get(key), self.start_collect(tr))

    def known(self, check: IdCheck, now: int) -> Optional[bytes]:
        """What the id's key holds while the id is remembered at ``now`` (empty, or a
        WeightTree's handle); None if the id is new, or its retention has passed (the
        push goes ahead)."""
        value = get_value(check.known)
        if value is None or not value.startswith(RETIRED):
            return value
        return None if read_le64(value[1:9]) <= now else value[9:]

    def remember(self, tr: Any, check: IdCheck, now: int, value: bytes = b"") -> None:
        """The push with a new id goes ahead: remember the id (its key holds
        ``value``), forget a few ids whose retention has passed, and cancel the
        scheduled forgetting of this id if it was used before."""
        self.collect(tr, check.collecting, now)
        before = get_value(check.known)
        if before is not None and before.startswith(RETIRED):
            tr.clear(self.gc.pack((read_le64(before[1:9]), check.id)))
        tr.set(check.key, value)

    def start_collect(self, tr: Any) -> Any:
        """Start a snapshot read of the oldest scheduled expiries (no conflicts)."""
        r = self.gc.range()
        return tr.snapshot.get_range(r.start, r.stop, limit=COLLECT_BATCH,
                                     streaming_mode=WANT_ALL)

    def collect(self, tr: Any, started: Any, now: int) -> None:
        """Forget the ids whose retention has passed (from :meth:`start_collect`).

        Takes a read conflict on each entry and id key it clears: a collector with an
        older read version must not clear an id that a push wrote after that version
        (the id would be forgotten while its item is queued), nor race another
        collector.  Pushes with different ids still never conflict: only two
        collectors of the same expired id, or a collector and a push of that id.
        """
        for kv in started:
            expiry, id_ = self.gc.unpack(kv.key)
            if expiry > now:
                break
            id_key = self.key(id_)
            tr.add_read_conflict_key(kv.key)
            tr.add_read_conflict_key(id_key)
            tr.clear(kv.key)
            tr.clear(id_key)

    def retire(self, tr: Any, id_: Optional[bytes], now: int, value: bytes = b"") -> None:
        """An item with this id left the structure (its id key held ``value``):
        forget the id after retention."""
        if id_ is not None:
            expiry = now + self.retention
            tr.set(self.key(id_), RETIRED + le64(expiry) + value)
            tr.set(self.gc.pack((expiry, id_)), b"")
