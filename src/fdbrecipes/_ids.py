"""Idempotency ids: ``push(..., id=...)`` stores at most one item per id.

Keys inside the structure's subspace ``S``::

    S/"k"/(id,)           = ''  (WeightTree: the item's handle)   an id remembered
                          = RETIRED + expiry + that               ... after its item left
    S/"g"/(expiry, id)    = ''                                    when to forget it

(A table that uses :meth:`Ids.finish`, the unique keys', stores in ``g`` the marker
written, and forgets the id only while its key still holds that marker.)
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional

from fdb.subspace_impl import Subspace

from ._fdb import Gen, Range, le64, read, read_le64, seconds_to_versions
from ._values import check_seconds

#: Scheduled expiries a push with an id looks at, and collects, per transaction.
COLLECT_BATCH = 4
#: First byte of an id key's value once its item left: then the expiry (int64) and
#: what it held before.  Live values are empty or a tuple-packed handle, which never
#: start with it.
RETIRED = b"\xff"


def expiry_of(marker: bytes) -> int:
    """The expiry a retired marker (:data:`RETIRED` + expiry + value) holds."""
    return read_le64(marker[1:9])


class IdChecks:
    """The ids of one push operation being checked: each id's key and the read of it
    (started together), the oldest scheduled expiries being read, and the ids this
    operation has remembered already (a second push of one of them stores nothing)."""

    __slots__ = ("collecting", "keys", "reads", "remembered")

    def __init__(self, keys: Dict[bytes, bytes], reads: Dict[bytes, Any],
                 collecting: Range) -> None:
        self.keys = keys
        self.reads = reads
        self.collecting = collecting
        self.remembered: Dict[bytes, bytes] = {}


class Ids:
    """Idempotency ids: ``k/(id)`` exists while an id is remembered.

    A push with an id reads its id key (a read conflict on that key only, so pushes
    with different ids never conflict).  When the item leaves the structure for good,
    the id key is marked with its expiry (``id_retention`` later) and ``g/(expiry,
    id)`` schedules the id to be forgotten.  Pushes with new ids collect a few
    expired ids each, so ids do not pile up; a push of an id whose retention has
    passed is a new push, whether or not a collector got to it first.  One push
    operation may push several items with ids (async pushes sharing a transaction):
    it reads their keys together and collects once.
    """

    __slots__ = ("gc", "ids", "retention")

    def __init__(self, subspace: Subspace, retention: Any) -> None:
        self.ids = subspace["k"]
        self.gc = subspace["g"]
        self.retention = seconds_to_versions(check_seconds(retention, "id_retention"))

    def key(self, id_: bytes) -> bytes:
        """The key that remembers ``id_``."""
        return bytes(self.ids.pack((id_,)))

    def check(self, tr: Any, ids: Iterable[Optional[bytes]],
              fresh: bool = False) -> Optional[IdChecks]:
        """For pushes with ``ids`` (None: no id; no ids at all, and no ``fresh`` ids
        made for the items: no reads, None): start reading each id's key (a read
        conflict on it) and, by snapshot, the oldest scheduled expiries."""
        keys = {id_: self.key(id_) for id_ in ids if id_ is not None}
        if not keys and not fresh:
            return None
        reads = {id_: tr.get(key) for id_, key in keys.items()}
        return IdChecks(keys, reads, self.start_collect(tr))

    def known(self, checks: IdChecks, id_: bytes, now: int) -> Gen[Optional[bytes]]:
        """What ``id_``'s key holds while the id is remembered at ``now`` (empty, or a
        WeightTree's handle), this operation's own pushes included; None if the id is
        new, or its retention has passed (the push goes ahead)."""
        if id_ in checks.remembered:
            return checks.remembered[id_]
        value = yield from read(checks.reads[id_])
        if value is None or not value.startswith(RETIRED):
            return value
        return None if expiry_of(value) <= now else value[9:]

    def remember(self, tr: Any, checks: IdChecks, id_: bytes, value: bytes = b"") -> Gen[None]:
        """The push of the new id ``id_`` goes ahead: remember the id (its key holds
        ``value``), and cancel its scheduled forgetting if it was used before."""
        before = yield from read(checks.reads[id_])
        self.take(tr, id_, before, value)
        checks.remembered[id_] = value

    def take(self, tr: Any, id_: bytes, before: Optional[bytes], value: bytes) -> None:
        """Write ``value`` in ``id_``'s key, which held ``before`` (read by the caller):
        if that was a retired marker, its scheduled forgetting is cancelled."""
        if before is not None and before.startswith(RETIRED):
            tr.clear(self.gc.pack((expiry_of(before), id_)))
        tr.set(self.key(id_), value)

    def fresh(self, tr: Any, checks: Optional[IdChecks], id_: bytes, value: bytes) -> None:
        """Remember ``id_``, an id just made for an item (new: not read), its key
        holding ``value``."""
        tr.set(self.key(id_), value)
        if checks is not None:
            checks.remembered[id_] = value

    def start_collect(self, tr: Any) -> Range:
        """Start a snapshot read of the oldest scheduled expiries (no conflicts)."""
        r = self.gc.range()
        return Range(tr.snapshot, r.start, r.stop, COLLECT_BATCH)

    def collect(self, tr: Any, checks: IdChecks, now: int) -> Gen[None]:
        """Forget a few ids whose retention has passed (the expiries :meth:`check`
        read), except those this operation remembered again.  A schedule key that
        holds a marker (written by :meth:`finish`) clears the id's key only if it still
        holds that marker (COMPARE_AND_CLEAR), so a stale one never clears a later
        holder's; an empty one (:meth:`retire`'s) clears it.

        Takes a read conflict on each entry and id key it clears: a collector with an
        older read version must not clear an id that a push wrote after that version
        (the id would be forgotten while its item is queued), nor race another
        collector.  Pushes with different ids still never conflict: only two
        collectors of the same expired id, or a collector and a push of that id.
        """
        for kv in (yield from checks.collecting.read()):
            expiry, id_ = self.gc.unpack(kv.key)
            if expiry > now:
                break
            if id_ in checks.remembered:
                continue
            id_key = self.key(id_)
            tr.add_read_conflict_key(kv.key)
            tr.add_read_conflict_key(id_key)
            tr.clear(kv.key)
            if kv.value:
                tr.compare_and_clear(id_key, kv.value)
            else:
                tr.clear(id_key)

    def retire(self, tr: Any, id_: Optional[bytes], now: int, value: bytes = b"") -> None:
        """An item with this id left the structure (its id key held ``value``):
        forget the id after the table's retention."""
        if id_ is not None:
            expiry = now + self.retention
            tr.set(self.key(id_), RETIRED + le64(expiry) + value)
            tr.set(self.gc.pack((expiry, id_)), b"")

    def finish(self, tr: Any, id_: bytes, now: int, value: bytes, retention: int) -> None:
        """An item that held ``id_``'s key with ``value`` left: its key holds the
        retired marker (expiry ``now + retention``) unless another item's live value
        is there; forgotten at the expiry only if the marker is still there (the
        schedule key holds the marker written: see :meth:`collect`).

        No read: COMPARE_AND_CLEAR of ``value`` (the key is this item's: free it),
        then BYTE_MIN of the marker (stored if the key is absent; else the smaller
        value kept: a live value, tuple-packed, never starts with :data:`RETIRED`, so
        another item's is kept; of two markers, one of the two, see
        ``UniqueKeys.left``).  Conflicts with nothing it does not write."""
        expiry = now + retention
        marker = RETIRED + le64(expiry) + value
        key = self.key(id_)
        tr.compare_and_clear(key, value)
        tr.byte_min(key, marker)
        # (BYTE_MIN here too: two items finishing in one transaction, their markers
        # alike up to the value, leave in the schedule the one the key keeps)
        tr.byte_min(self.gc.pack((expiry, id_)), marker)

    def unretire(self, tr: Any, id_: Optional[bytes], retired_at: int,
                 value: bytes = b"") -> None:
        """Undo :meth:`retire` (called at ``retired_at``): the item is back, its id live
        again (its key holding ``value``)."""
        if id_ is not None:
            tr.set(self.key(id_), value)
            tr.clear(self.gc.pack((retired_at + self.retention, id_)))
