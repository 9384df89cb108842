"""The engine behind Queue and PriorityQueue: items in key order, taken from either end.

Queue is this with an empty group; PriorityQueue with the group ``(priority,)``.  The
keys are those of :class:`._layout.OrderedLayout`.  Held items (leases, and results
of high-contention pops) live in :mod:`._leases` and :mod:`._contention`; an item
whose hold expired counts as visible again, at its original place, and the next
writer puts it back.

Every method here runs inside one transaction; :mod:`._run` decides which.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

from ._fdb import VERSIONS_PER_SECOND, WANT_ALL, add, first, get_value, le64, read_le64, snap
from ._ids import Ids
from ._layout import Item, OrderedLayout
from ._run import Attempt
from ._values import random_suffix
from ._wait import Clock, Readiness

MIN, MAX = 0, 1  # the end of the order a pop takes from
LEASE, RESULT = 0, 1  # why an item is held: a consumer's lease, or a high-contention result
EXPIRED_BATCH = 16  # expired holds one pop looks at, and puts back, per transaction


class Entry:
    """One item at the front of the order, visible or held under an expired hold."""

    __slots__ = ("held", "item", "key", "value")

    def __init__(
        self,
        item: Item,
        value: bytes,
        key: bytes,
        held: Optional[Tuple[bytes, bytes, int]] = None,
    ) -> None:
        self.item = item  # the item tuple: group + (seq, random) [+ (deliveries, id)]
        self.value = value  # the encoded value
        self.key = key  # its key among the visible items
        self.held = held  # (held key, due key, kind) for an item under an expired hold


def min_order(entry: Entry) -> Any:
    """Sort key of the MIN end: key order."""
    return entry.key


def max_order(entry: Entry) -> Any:
    """Sort key of the MAX end: highest priority first; within one, oldest first."""
    return (-entry.item[0], entry.key)


def order(end: int) -> Callable[[Entry], Any]:
    """Sort key putting entries in the order ``end`` takes them."""
    return min_order if end == MIN else max_order


class Ordered:
    """Items kept in key order, taken from either end (see the module docstring)."""

    __slots__ = ("clock", "ids", "k")

    def __init__(self, layout: OrderedLayout, clock: Clock, ids: Ids) -> None:
        self.k = layout
        self.clock = clock
        self.ids = ids

    # -- reading the front --------------------------------------------------------------

    def _visible(self, reader: Any, end: int, n: Optional[int]) -> List[Entry]:
        """The first ``n`` (all when None) visible items in ``end`` order."""
        r = self.k.items.range()
        limit = n or 0
        if end == MIN:
            kvs = reader.get_range(r.start, r.stop, limit=limit, streaming_mode=WANT_ALL)
            return [self._entry(kv) for kv in kvs]
        # MAX: a reverse read finds the highest priorities, newest first.  Every
        # priority it passed completely is reversed to oldest first; the lowest one
        # it reached may hold older items it did not see, so read that one forward.
        top = [self._entry(kv) for kv in reader.get_range(
            r.start, r.stop, limit=limit, reverse=True, streaming_mode=WANT_ALL)]
        if not top:
            return []
        lowest = top[-1].item[0]
        above = [e for e in top if e.item[0] != lowest]
        above.sort(key=max_order)
        rest = None if n is None else n - len(above)
        g = self.k.items.range((lowest,))
        oldest = reader.get_range(g.start, g.stop, limit=rest or 0, streaming_mode=WANT_ALL)
        return above + [self._entry(kv) for kv in oldest]

    def _entry(self, kv: Any) -> Entry:
        return Entry(self.k.items.unpack(kv.key), kv.value, kv.key)

    def front(
        self, tr: Any, end: int, n: Optional[int], *, snapshot: bool
    ) -> Tuple[List[Entry], List[Entry], int]:
        """Read the first ``n`` items in ``end`` order, counting expired holds.

        Returns ``(entries, extra, now)``: the front entries (at most ``n``), the
        expired holds that were read but are not among them (a writer puts those
        back), and the clock's reading.  ``snapshot=False`` takes a read conflict on
        the visible range it scanned (a concurrent change at the front conflicts).
        Holds are found through a snapshot read of the oldest deadlines; with ``n``
        None (a full listing) every expired hold is read.
        """
        reader = snap(tr) if snapshot else tr
        r = self.k.due.range()
        due = snap(tr).get_range(
            r.start, r.stop, limit=0 if n is None else EXPIRED_BATCH,
            streaming_mode=WANT_ALL,
        )
        visible = self._visible(reader, end, n)
        now = self.clock(tr)
        expired = []
        for kv in due:
            deadline, lease_id, item, kind = self.k.due.unpack(kv.key)
            if deadline > now:
                break
            held_key = self.k.held_key(lease_id, item, deadline, kind)
            expired.append((reader.get(held_key), item, held_key, bytes(kv.key), kind))
        entries = list(visible)
        for future, item, held_key, due_key, kind in expired:
            value = get_value(future)
            if value is not None:
                entries.append(Entry(item, value, self.k.item_key(item),
                                     (held_key, due_key, kind)))
        if not expired:
            return entries, [], now
        entries.sort(key=order(end))
        cut = len(entries) if n is None else n
        chosen = entries[:cut]
        extra = [e for e in entries[cut:] if e.held is not None]
        return chosen, extra, now

    # -- taking and putting back ----------------------------------------------------------

    def take(self, tr: Any, entry: Entry) -> Item:
        """Remove ``entry`` from where it is; return its item tuple as delivered now.

        Takes a read conflict on the removed key, so two transactions can never both
        take the same item.  An item coming back from an expired lease counts one more
        delivery.
        """
        if entry.held is None:
            tr.add_read_conflict_key(entry.key)
            tr.clear(entry.key)
            return entry.item
        held_key, due_key, kind = entry.held
        tr.add_read_conflict_key(held_key)
        tr.clear(held_key)
        tr.clear(due_key)
        if kind == LEASE:
            return self.k.with_deliveries(entry.item, self.k.meta(entry.item)[0] + 1)
        return entry.item

    def put_back(self, tr: Any, entries: Iterable[Entry]) -> None:
        """Return items under expired holds to their places in the order."""
        for entry in entries:
            item = self.take(tr, entry)
            tr.set(self.k.item_key(item), entry.value)
            add(tr, self.k.wake_key, 1)

    def hold(self, tr: Any, item: Item, value: bytes, lease_id: bytes,
             deadline: int, kind: int) -> bytes:
        """Hide an item (already taken) under a hold; return its held key.

        Raises the floor (atomic MAX, conflict-free) to the item's sequence number, so
        later pushes land after it even if the visible items run out meanwhile: when
        the hold ends early the item returns to a place before them.
        """
        held_key = self.k.held_key(lease_id, item, deadline, kind)
        tr.set(held_key, value)
        tr.set(self.k.due_key(lease_id, item, deadline, kind), b"")
        tr.max(self.k.floor_key, le64(self.k.seq(item)))
        return held_key

    def gone(self, tr: Any, item: Item, count: int, now: int) -> None:
        """``count`` items left the structure for good (pop, ack, collected result)."""
        add(tr, self.k.count_key, -count)
        self.ids.retire(tr, self.k.meta(item)[1], now)

    # -- push ----------------------------------------------------------------------------

    def push(self, tr: Any, attempt: Attempt, batch: Sequence[Tuple[Item, bytes]],
             id_: Optional[bytes]) -> None:
        """Store ``(group, encoded value)`` pairs, in order, after the last of each group."""
        if id_ is not None:
            id_key = self.ids.key(id_)
            known = tr.get(id_key)
            gc = self.ids.start_collect(tr)
        floor_f = tr.snapshot.get(self.k.floor_key)
        lasts = {}
        for group, _ in batch:
            if group not in lasts:
                r = self.k.items.range(group)
                lasts[group] = tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True)
        if id_ is not None:
            if get_value(known) is not None:
                attempt.idle = True
                return
            self.ids.collect(tr, gc, self.clock(tr))
            tr.set(id_key, b"")
        floor = get_value(floor_f)
        seqs = {}
        for group, kvs in lasts.items():
            kv = first(kvs)
            seqs[group] = max(
                0 if kv is None else self.k.seq(self.k.items.unpack(kv.key)) + 1,
                0 if floor is None else read_le64(floor) + 1,
            )
        for group, value in batch:
            item = group + (seqs[group], random_suffix())
            if id_ is not None:
                item += (0, id_)
            seqs[group] += 1
            tr.set(self.k.item_key(item), value)
        add(tr, self.k.count_key, len(batch))
        add(tr, self.k.wake_key, 1)

    # -- pop, peek ------------------------------------------------------------------------

    def pop(self, tr: Any, attempt: Attempt, end: int, n: int) -> List[bytes]:
        """Remove and return the first ``n`` encoded values (fewer if fewer exist)."""
        entries, extra, now = self.front(tr, end, n, snapshot=False)
        return self.pop_entries(tr, attempt, entries, extra, now)

    def pop_entries(self, tr: Any, attempt: Attempt, entries: List[Entry],
                    extra: List[Entry], now: int) -> List[bytes]:
        """Remove ``entries`` for good, put ``extra`` back; return the values taken."""
        self.put_back(tr, extra)
        for entry in entries:
            self.gone(tr, self.take(tr, entry), 1, now)
        attempt.idle = not entries  # (no entries: no expired holds to put back either)
        return [e.value for e in entries]

    def peek(self, tr: Any, end: int, n: Optional[int]) -> List[bytes]:
        """The encoded values the next pops would return, without removing them."""
        entries, _, _ = self.front(tr, end, n, snapshot=False)
        return [e.value for e in entries]

    def size(self, tr: Any) -> int:
        """The size counter."""
        return read_le64(get_value(tr.get(self.k.count_key)))

    def clear(self, tr: Any, _attempt: Attempt) -> None:
        """Remove every key of the structure."""
        r = self.k.subspace.range()
        tr.clear_range(r.start, r.stop)

    # -- waiting ---------------------------------------------------------------------------

    def ready(self, tr: Any, end: int) -> Readiness:
        """Whether an item is visible at ``end``; if not, the seconds until the earliest
        hold expires (its item becomes visible without any write), or None."""
        entries, _, now = self.front(tr, end, 1, snapshot=True)
        if entries:
            return True, None
        r = self.k.due.range()
        kv = first(tr.snapshot.get_range(r.start, r.stop, limit=1))
        if kv is None:
            return False, None
        until = (self.k.due.unpack(kv.key)[0] - now) / VERSIONS_PER_SECOND
        return False, max(0.0, until) + 0.001
