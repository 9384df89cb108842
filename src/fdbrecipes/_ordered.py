"""The engine behind Queue and PriorityQueue: items in key order, taken from either end.

Queue is this with an empty group; PriorityQueue with the group ``(priority,)``.  The
keys are those of :class:`._layout.OrderedLayout`.  An item is *visible* (under
``i``), *held* (under ``h``, with a deadline: a lease, a high-contention result or a
delay) or *dead* (under ``x``).  A hold whose deadline has passed counts as visible
again at its original place; writers put such items back (or, for a lease whose
item reached ``max_deliveries``, bury them among the dead letters) as they meet them.

Every method here runs inside one transaction; :mod:`._run` decides which.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

from ._fdb import (
    VERSIONS_PER_SECOND,
    WANT_ALL,
    Tally,
    clear_except,
    fdb_impl,
    first,
    get_value,
    le64,
    read_le64,
    snap,
)
from ._ids import Ids
from ._layout import DELAY, LEASE, RESULT, Item, OrderedLayout
from ._run import Attempt
from ._values import Value, decode_value, random_id
from ._wait import Clock, Readiness

MIN, MAX = 0, 1  # the end of the order a pop takes from
#: Earliest deadlines a reader reads first (beside its other reads); when every one
#: of them has passed, it reads every expired hold.
EXPIRED_PAGE = 8
#: Expired holds one writing transaction puts back or buries, beside its own work.
RESTORE_BATCH = 64

_chance = random.Random()


class Hold(NamedTuple):
    """Where an item is held: the hold's id, deadline and kind (LEASE, RESULT, DELAY),
    and, when known, its two keys (packing them costs more than keeping them)."""

    hold_id: bytes
    deadline: int
    kind: int
    keys: Optional[Tuple[bytes, bytes]] = None


class Entry:
    """One item in the order: visible, or under a hold that has expired."""

    __slots__ = ("_item", "hold", "key", "space", "value")

    def __init__(self, item: Optional[Item], key: bytes, value: Optional[bytes],
                 hold: Optional[Hold] = None, space: Any = None) -> None:
        self._item = item  # the item tuple (see _layout.Item), or None until needed
        self.space = space  # the items' subspace, to decode the key when needed
        self.key = key  # its key among the visible items
        self.value = value  # the encoded value (None until read, for a hold)
        self.hold = hold  # where it is held, for an item under an expired hold

    @property
    def item(self) -> Item:
        """The item tuple, decoded from the key the first time it is needed (a range
        read of the front decodes only the items it takes)."""
        if self._item is None:
            self._item = self.space.unpack(self.key)
        return self._item


class Front(NamedTuple):
    """What :meth:`Ordered.front` read.

    Attributes:
        entries: the first items in the order asked for, values read.
        expired: expired holds behind them, for a writer to put back (values read).
        dead: expired leases whose item reached ``max_deliveries``, for a writer to
            bury (values read).
        now: the clock's reading.
        holds: every expired hold (values not read).
    """

    entries: List[Entry]
    expired: List[Entry]
    dead: List[Entry]
    now: int
    holds: List[Entry]


class QueueStats(NamedTuple):
    """Where a queue's items are, at one read version.

    Attributes:
        visible: items a pop or claim could take now.
        delayed: items pushed (or released) with a delay that has not passed yet.
        in_flight: items under a live lease, or held for a high-contention pop.
        dead: dead letters.
        oldest_age: seconds since the item at the front (the next ``pop`` /
            ``pop_min``) became visible; None when nothing is visible.
    """

    visible: int
    delayed: int
    in_flight: int
    dead: int
    oldest_age: Optional[float]


def min_order(entry: Entry) -> Any:
    """Sort key of the MIN end: key order."""
    return entry.key


def max_order(entry: Entry) -> Any:
    """Sort key of the MAX end: highest priority first; within one, oldest first."""
    return (-entry.item[0], entry.key)


def order(end: int) -> Callable[[Entry], Any]:
    """Sort key putting entries in the order ``end`` takes them."""
    return min_order if end == MIN else max_order


def choose(entries: List[Entry], n: int, spread: int) -> List[Entry]:
    """``n`` entries (fewer if fewer) chosen at random among the first ``n + spread - 1``,
    kept in order: when one is taken, at most ``spread - 1`` older ones stay."""
    window = entries[: n + spread - 1]
    if len(window) <= n:
        return window
    picked = sorted(_chance.sample(range(len(window)), n))
    return [window[i] for i in picked]


def value_of(entry: Entry) -> bytes:
    """The encoded value of an entry whose value was read."""
    assert entry.value is not None
    return entry.value


class Ordered:
    """Items kept in key order, taken from either end (see the module docstring)."""

    __slots__ = ("clock", "ids", "k", "max_deliveries", "restore_pending")

    def __init__(self, layout: OrderedLayout, clock: Clock, ids: Ids,
                 max_deliveries: Optional[int]) -> None:
        self.k = layout
        self.clock = clock
        self.ids = ids
        self.max_deliveries = max_deliveries
        #: A reader met more expired holds than one transaction puts back: the next
        #: call given a Database runs :meth:`restore` first.  A hint, not a lock.
        self.restore_pending = False

    # -- reading the front --------------------------------------------------------------

    def dies(self, item: Item) -> bool:
        """Whether a lease on ``item`` that ends without ack makes it a dead letter."""
        limit = self.max_deliveries
        return limit is not None and self.k.deliveries(item) + 1 >= limit

    def split_dead(self, holds: List[Entry]) -> Tuple[List[Entry], List[Entry]]:
        """(expired holds whose items become visible, expired leases whose items die)."""
        live: List[Entry] = []
        dead: List[Entry] = []
        for e in holds:
            dying = e.hold is not None and e.hold.kind == LEASE and self.dies(e.item)
            (dead if dying else live).append(e)
        return live, dead

    def _entry(self, kv: Any) -> Entry:
        return Entry(None, bytes(kv.key), kv.value, space=self.k.items)

    def _range(self, reader: Any, begin: bytes, end: bytes, limit: Optional[int],
               reverse: bool = False) -> Any:
        return reader.get_range(begin, end, limit=limit or 0, reverse=reverse,
                                streaming_mode=WANT_ALL)

    def _visible(self, reader: Any, end: int, n: Optional[int],
                 after: Optional[Entry], skip: int = 0) -> List[Entry]:
        """The first ``n`` (all when None) visible items in ``end`` order, after
        ``after`` when given; at the MIN end, after skipping ``skip`` items (a key
        selector: the server skips them, the client reads only the ``n``)."""
        r = self.k.items.range()
        if end == MIN:
            begin: Any = r.start if after is None else after.key + b"\x00"
            if skip:
                begin = fdb_impl().KeySelector.first_greater_or_equal(begin) + skip
            return [self._entry(kv) for kv in self._range(reader, begin, self.k.items_end, n)]
        head: List[Entry] = []
        upper = r.stop
        if after is not None:  # the rest of the cursor's priority, then lower ones
            g = self.k.items.range((after.item[0],))
            head = [self._entry(kv) for kv in
                    self._range(reader, after.key + b"\x00", g.stop, n)]
            upper = g.start
            if n is not None and len(head) >= n:
                return head[:n]
        rest = None if n is None else n - len(head)
        # A reverse read finds the highest priorities, newest first.  Every priority
        # it passed completely is reversed to oldest first; the lowest one it reached
        # may hold older items it did not see, so read that one forward.
        top = [self._entry(kv) for kv in self._range(reader, r.start, upper, rest, True)]
        if not top:
            return head
        lowest = top[-1].item[0]
        above = sorted((e for e in top if e.item[0] != lowest), key=max_order)
        left = None if rest is None else rest - len(above)
        g = self.k.items.range((lowest,))
        oldest = self._range(reader, g.start, min(g.stop, upper), left)
        return head + above + [self._entry(kv) for kv in oldest]

    def start_expired(self, tr: Any) -> Any:
        """Start a snapshot read of the earliest deadlines (see :meth:`expired_holds`);
        it needs no read version first, so it goes out beside the other reads."""
        r = self.k.due.range()
        return self._range(snap(tr), r.start, r.stop, EXPIRED_PAGE + 1)

    def expired_holds(self, tr: Any, now: int, started: Any) -> List[Entry]:
        """Every hold whose deadline is at or before ``now``, by deadline (snapshot
        reads).

        ``started`` (from :meth:`start_expired`) reads the :data:`EXPIRED_PAGE` + 1
        earliest deadlines; only when all of them have passed are the expired ones
        all read (after a mass expiry; writers soon put them back).
        """
        due = list(started)
        if len(due) > EXPIRED_PAGE and self.k.due.unpack(due[-1].key)[0] <= now:
            begin, end = self.k.due.range().start, self.k.due.pack((now + 1,))
            due = list(self._range(snap(tr), begin, end, None))
        holds = []
        for kv in due:
            deadline, hold_id, item, kind = self.k.due.unpack(kv.key)
            if deadline > now:
                break
            holds.append(Entry(item, self.k.item_key(item), None,
                               Hold(hold_id, deadline, kind)))
        return holds

    def front(self, tr: Any, end: int, n: Optional[int], *, conflict: bool,
              after: Optional[Entry] = None, writing: bool = True, skip: int = 0) -> Front:
        """The first ``n`` items (all when None) in ``end`` order, counting expired holds.

        ``conflict=True`` takes a read conflict on the visible range read, so a
        concurrent change at the front conflicts; otherwise only snapshot reads.
        Expired holds are found with a snapshot read of the deadline index, however
        many there are, and merged at their places.  With ``writing``, it also names
        up to :data:`RESTORE_BATCH` expired holds behind the front to put back or
        bury, and reads their values.
        """
        reader = tr if conflict else snap(tr)
        started = self.start_expired(tr)
        visible = self._visible(reader, end, n, after, skip)
        now = self.clock(tr)
        holds = self.expired_holds(tr, now, started)
        if not holds:
            return Front(visible, [], [], now, holds)
        key = order(end)
        live, dead = self.split_dead(holds)
        if after is not None:
            live = [e for e in live if key(e) > key(after)]
        merged = sorted(visible + live, key=key)
        entries = merged if n is None else merged[:n]
        expired: List[Entry] = []
        if writing:
            expired = [e for e in merged[len(entries):] if e.hold is not None]
            self.restore_pending = len(expired) + len(dead) > RESTORE_BATCH
            expired, dead = expired[:RESTORE_BATCH], dead[:RESTORE_BATCH]
        else:
            dead = []
        entries, expired, dead = self._read_held(reader, (entries, expired, dead))
        return Front(entries, expired, dead, now, holds)

    def _read_held(self, reader: Any, groups: Tuple[List[Entry], ...]) -> List[List[Entry]]:
        """Read the values of the held entries in ``groups`` (in parallel); drop those
        whose hold is gone (only possible when this transaction itself took them and
        snapshot reads do not see its writes)."""
        futures = {id(e): reader.get(self.held_key(e)) for g in groups for e in g
                   if e.hold is not None}
        out = []
        for group in groups:
            kept = []
            for e in group:
                if e.hold is not None:
                    e.value = get_value(futures[id(e)])
                if e.value is not None:
                    kept.append(e)
            out.append(kept)
        return out

    # -- moving items -----------------------------------------------------------------

    def hold_keys(self, entry: Entry) -> Tuple[bytes, bytes]:
        """(held key, deadline index key) of an entry under a hold."""
        h = entry.hold
        assert h is not None
        if h.keys is not None:
            return h.keys
        item = entry.item
        return (self.k.held_key(h.hold_id, item, h.deadline, h.kind),
                self.k.due_key(h.hold_id, item, h.deadline, h.kind))

    def held_key(self, entry: Entry) -> bytes:
        """The held key of an entry under a hold."""
        return self.hold_keys(entry)[0]

    def take(self, tr: Any, entry: Entry, now: int, tally: Tally) -> Item:
        """Remove ``entry`` from where it is; return its item tuple as visible now.

        Takes a read conflict on the removed key, so two transactions can never both
        take the same item.  An item coming back from a lease counts one more
        delivery; one coming back from any hold became visible at its deadline (or
        now, if the hold ends early).
        """
        h = entry.hold
        if h is None:
            tr.add_read_conflict_key(entry.key)
            tr.clear(entry.key)
            return entry.item
        held_key, due_key = self.hold_keys(entry)
        tr.add_read_conflict_key(held_key)
        tr.clear(held_key)
        tr.clear(due_key)
        tally.add(self.k.delayed_out if h.kind == DELAY else self.k.held_out)
        deliveries = self.k.deliveries(entry.item) + (h.kind == LEASE)
        return self.k.renewed(entry.item, deliveries, min(h.deadline, now))

    def put_back(self, tr: Any, entry: Entry, now: int, tally: Tally) -> None:
        """Return an item under a hold to its place in the order."""
        assert entry.value is not None
        tr.set(self.k.item_key(self.take(tr, entry, now, tally)), entry.value)
        self.wake(tally)

    def wake(self, tally: Tally) -> None:
        """Touch the wake key (waiters look again) without changing the size: one more
        in and one more out."""
        tally.add(self.k.pushed)
        tally.add(self.k.taken)

    def bury(self, tr: Any, entry: Entry, now: int, tally: Tally) -> None:
        """Move an item under an ended lease to the dead letters, in the order the
        leases ended (at their deadlines, or now if released)."""
        assert entry.value is not None and entry.hold is not None
        died = min(entry.hold.deadline, now)
        item = self.take(tr, entry, now, tally)
        tr.set(self.k.dead_letter_key(died, item, time.time()), entry.value)
        tally.add(self.k.dead_in)
        tally.add(self.k.taken)

    def hold(self, tr: Any, item: Item, value: bytes, hold_id: bytes, deadline: int,
             kind: int, tally: Tally) -> Hold:
        """Hide an item (already taken, or new) under a hold until ``deadline``; the
        hold, with its keys.

        Raises the floor (atomic MAX, conflict-free) to the item's sequence number, so
        later pushes land after it even if the visible items run out meanwhile: when
        the hold ends the item returns to a place before them.
        """
        keys = (self.k.held_key(hold_id, item, deadline, kind),
                self.k.due_key(hold_id, item, deadline, kind))
        tr.set(keys[0], value)
        tr.set(keys[1], b"")
        tally.max(self.k.floor_key, self.k.seq(item))
        tally.add(self.k.delayed_in if kind == DELAY else self.k.held_in)
        return Hold(hold_id, deadline, kind, keys)

    def gone(self, tr: Any, item: Item, now: int, tally: Tally) -> None:
        """An item left the structure for good (pop, ack, collected result)."""
        tally.add(self.k.taken)
        self.ids.retire(tr, self.k.item_id(item), now)

    def settle(self, tr: Any, front: Front, tally: Tally) -> bool:
        """Put back the expired holds ``front`` named, bury its dead; True if any."""
        for entry in front.expired:
            self.put_back(tr, entry, front.now, tally)
        for entry in front.dead:
            self.bury(tr, entry, front.now, tally)
        return bool(front.expired or front.dead)

    def dying(self, tr: Any, now: int) -> List[Entry]:
        """The expired leases whose items are dead letters now but not moved yet,
        values read (snapshot reads; none without ``max_deliveries``)."""
        if self.max_deliveries is None:
            return []
        dead = self.split_dead(self.expired_holds(tr, now, self.start_expired(tr)))[1]
        return self._read_held(snap(tr), (dead,))[0]

    def bury_dying(self, tr: Any, now: int, tally: Tally) -> int:
        """Move up to :data:`RESTORE_BATCH` expired leases whose items died to the dead
        letters (a read conflict on each); how many."""
        dead = self.dying(tr, now)[:RESTORE_BATCH]
        for entry in dead:
            self.bury(tr, entry, now, tally)
        return len(dead)

    def remove(self, tr: Any, entries: Sequence[Entry], now: int, tally: Tally) -> List[bytes]:
        """Take ``entries`` out of the structure for good; their values."""
        values = []
        for entry in entries:
            self.gone(tr, self.take(tr, entry, now, tally), now, tally)
            assert entry.value is not None
            values.append(entry.value)
        return values

    # -- push ----------------------------------------------------------------------------

    def push(self, tr: Any, attempt: Attempt, batch: Sequence[Tuple[Item, bytes]],
             id_: Optional[bytes], delay: int) -> None:
        """Store ``(group, encoded value)`` pairs, in order, after the last of each
        group; with ``delay`` (in clock units, 0 for none) each under a DELAY hold."""
        if id_ is not None:
            id_key = self.ids.key(id_)
            known = tr.get(id_key)
            gc = self.ids.start_collect(tr)
        seqs = self.next_seqs(tr, {group for group, _ in batch})
        now = self.clock(tr)
        if id_ is not None:
            if get_value(known) is not None:
                attempt.idle = True
                return
            self.ids.collect(tr, gc, now)
            tr.set(id_key, b"")
        tally = Tally()
        for group, value in batch:
            self.append(tr, group, seqs, value, (0, id_), now, delay, tally)
        tally.write(tr)

    def next_seqs(self, tr: Any, groups: Any) -> Any:
        """The next free sequence number of each group, from snapshot reads in parallel
        (no conflicts): after the group's last item and after the floor.  A Queue's
        floor sorts after its items: one reverse read of two keys finds both."""
        if self.k.g == 0:
            r = self.k.items.range()
            found = tr.snapshot.get_range(r.start, r.stop, limit=2, reverse=True)
            floor, last = -1, -1
            for kv in found:
                if kv.key == self.k.floor_key:
                    floor = read_le64(kv.value)
                else:
                    last = self.k.seq(self.k.items.unpack(kv.key))
                    break
            return {(): max(last, floor) + 1}
        floor_f = tr.snapshot.get(self.k.floor_key)
        lasts = {}
        for group in groups:
            r = self.k.items.range(group)
            lasts[group] = tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True)
        floor_value = get_value(floor_f)
        lowest = 0 if floor_value is None else read_le64(floor_value) + 1
        seqs = {}
        for group, kvs in lasts.items():
            kv = first(kvs)
            last = -1 if kv is None else self.k.seq(self.k.items.unpack(kv.key))
            seqs[group] = max(last + 1, lowest)
        return seqs

    def append(self, tr: Any, group: Item, seqs: Any, value: bytes,
               meta: Tuple[int, Optional[bytes]], now: int, delay: int, tally: Tally) -> None:
        """Write one item at its group's next sequence number (advancing it);
        ``meta`` = (deliveries, id); with ``delay`` > 0 under a DELAY hold."""
        deliveries, id_ = meta
        item = self.k.new_item(group, seqs[group], id_, now + delay)
        if deliveries:
            item = self.k.renewed(item, deliveries, now + delay)
        seqs[group] += 1
        tally.add(self.k.pushed)
        if delay > 0:
            self.hold(tr, item, value, random_id(), now + delay, DELAY, tally)
        else:
            tr.set(self.k.item_key(item), value)

    # -- pop, peek ------------------------------------------------------------------------

    def chosen(self, tr: Any, end: int, n: int, spread: int) -> Tuple[Front, List[Entry]]:
        """What a pop or claim of ``n`` items with ``spread`` reads, and the entries it
        takes: ``n`` among the first ``n + spread - 1`` in ``end`` order.

        A single strict take (``n`` = ``spread`` = 1) reads the front with a read
        conflict.  With a spread, at the MIN end, the items are a block of ``n`` at a
        random offset below ``spread``, read alone (the server skips the offset), so
        concurrent takers mostly read different items; when expired holds are about
        (they are items too) or the queue is shorter than the block, it reads the whole
        window and chooses in it.  Only snapshot reads then: conflicts come from the
        items taken.
        """
        if spread > 1 and end == MIN:
            offset = _chance.randrange(spread)
            front = self.front(tr, end, n, conflict=False, skip=offset)
            if not offset or not (front.holds or len(front.entries) < n):
                return front, front.entries
        front = self.front(tr, end, n + spread - 1, conflict=n == 1 and spread == 1)
        return front, choose(front.entries, n, spread)

    def pop(self, tr: Any, attempt: Attempt, end: int, n: int, spread: int) -> List[Value]:
        """Remove and return ``n`` values (fewer if fewer are visible), each among the
        first ``n + spread - 1`` (see :meth:`chosen`)."""
        front, entries = self.chosen(tr, end, n, spread)
        tally = Tally()
        settled = self.settle(tr, front, tally)
        values = self.remove(tr, entries, front.now, tally)
        tally.write(tr)
        attempt.idle = not (values or settled)
        return [decode_value(v) for v in values]

    def pop_one(self, tr: Any, attempt: Attempt, end: int, spread: int) -> Optional[Value]:
        """:meth:`pop` of one item: the value, or None when none is visible."""
        values = self.pop(tr, attempt, end, 1, spread)
        return values[0] if values else None

    def peek(self, tr: Any, end: int, n: Optional[int],
             after: Optional[Entry] = None) -> List[Entry]:
        """The entries the next pops would take, without removing them (read
        conflict on the visible range read)."""
        return self.front(tr, end, n, conflict=True, after=after, writing=False).entries

    def restore(self, tr: Any, attempt: Attempt, limit: int) -> int:
        """Put back (or bury) up to ``limit`` expired holds, earliest deadline first;
        the number handled."""
        now = self.clock(tr)
        holds = self.expired_holds(tr, now, self.start_expired(tr))[:limit]
        live, dead = self._read_held(tr, self.split_dead(holds))
        tally = Tally()
        handled = self.settle(tr, Front([], live, dead, now, holds), tally)
        tally.write(tr)
        attempt.idle = not handled
        return len(holds)

    def clear(self, tr: Any, _attempt: Attempt) -> None:
        """Remove every key of the structure except the wake counter "pushed" (it
        must only grow, or a waiter's watch could miss the next push: it is touched,
        and "taken" set to match it, so the size is 0) and the receipt slots.  Reads
        "pushed" (a conflict with concurrent pushes, so the reset is exact)."""
        pushed = read_le64(get_value(tr.get(self.k.pushed)))
        r = self.k.subspace.range()
        clear_except(tr, bytes(r.start), bytes(r.stop), self.k.kept_by_clear())
        tr.add(self.k.pushed, le64(1))
        tr.set(self.k.taken, le64(pushed + 1))

    # -- counters -----------------------------------------------------------------------

    def size(self, tr: Any) -> int:
        """Items in the structure: "pushed" - "taken" (two reads in parallel, read
        conflicts on both), less the expired leases whose items are dead letters now
        but not yet moved (with ``max_deliveries``: a snapshot read of the expired
        holds)."""
        pushed, taken = tr.get(self.k.pushed), tr.get(self.k.taken)
        dying = 0
        if self.max_deliveries is not None:
            now = self.clock(tr)
            dying = len(self.split_dead(
                self.expired_holds(tr, now, self.start_expired(tr)))[1])
        return read_le64(get_value(pushed)) - read_le64(get_value(taken)) - dying

    def stats(self, tr: Any) -> QueueStats:
        """Counters, corrected for holds that expired without a write, and the age of
        the front item; snapshot reads only (no conflicts)."""
        r = self.k.subspace["n"].range()
        started = snap(tr).get_range(r.start, r.stop, streaming_mode=WANT_ALL)
        front = self.front(tr, MIN, 1, conflict=False, writing=False)
        counts = {bytes(kv.key): read_le64(kv.value) for kv in started}
        k = self.k
        size, held, delayed, dead = (counts.get(a, 0) - counts.get(b, 0) for a, b in (
            (k.pushed, k.taken), (k.held_in, k.held_out), (k.delayed_in, k.delayed_out),
            (k.dead_in, k.dead_out)))
        dying = self.split_dead(front.holds)[1]
        late = sum(1 for e in front.holds if e.hold is not None and e.hold.kind == DELAY)
        in_flight = held - (len(front.holds) - late)
        delayed -= late
        oldest = None
        if front.entries:
            entry = front.entries[0]
            since = self.k.since(entry.item) if entry.hold is None else entry.hold.deadline
            oldest = max(0.0, (front.now - since) / VERSIONS_PER_SECOND)
        return QueueStats(size - in_flight - delayed - len(dying), delayed, in_flight,
                          dead + len(dying), oldest)

    # -- waiting ---------------------------------------------------------------------------

    def ready(self, tr: Any, end: int) -> Readiness:
        """Whether an item is visible at ``end``; if not, the seconds until the next
        hold expires (its item becomes visible without any write), or None."""
        front = self.front(tr, end, 1, conflict=False, writing=False)
        if front.entries:
            return True, None
        due = self.k.due
        kv = first(tr.snapshot.get_range(due.pack((front.now + 1,)), due.range().stop,
                                         limit=1))
        if kv is None:
            return False, None
        until = (due.unpack(kv.key)[0] - front.now) / VERSIONS_PER_SECOND
        return False, max(0.0, until) + 0.001

    # -- results of high-contention pops ----------------------------------------------

    def hold_result(self, tr: Any, entry: Entry, owner: bytes, now: int, deadline: int,
                    tally: Tally) -> None:
        """Take ``entry`` and hold it for the high-contention pop ``owner``."""
        assert entry.value is not None
        item = self.take(tr, entry, now, tally)
        self.hold(tr, item, entry.value, owner, deadline, RESULT, tally)
