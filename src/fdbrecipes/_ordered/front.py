"""Reading the front of a Queue or PriorityQueue: which items come next.

The keys are those of :class:`._layout.OrderedLayout`.  An item is *visible* (under
``i``) or *held* (under ``h``, with a deadline: a lease, a high-contention result or a
delay).  A hold whose deadline has passed counts as visible again at its original
place: a reader merges the expired holds (found through the deadline index ``d``)
with the visible items, in the order of the end it reads.  :mod:`.engine` moves the
items; everything here only reads.
"""

from __future__ import annotations

import random
from typing import Any, Callable, List, NamedTuple, Optional, Tuple

from .._attempt import Attempt
from .._clock import Clock, reading
from .._fdb import Gen, Range, fdb_impl, get_value, snap
from .._layout import LEASE, Item, OrderedLayout

#: The ends of the order a pop takes from: the lowest key (a Queue's oldest item, a
#: PriorityQueue's lowest priority) and the highest priority.
MIN, MAX = "min", "max"
#: Each end, and the other.
OTHER_END = {MIN: MAX, MAX: MIN}
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
        paused: the structure's pause flag was read, with the earliest deadlines (by
            snapshot: a take adds the read conflict, see :meth:`FrontReader.chosen`).
    """

    entries: List[Entry]
    expired: List[Entry]
    dead: List[Entry]
    now: int
    holds: List[Entry]
    paused: bool = False


class Expired(NamedTuple):
    """What a read of the deadline index found: the holds whose deadline has passed,
    by deadline (values not read), and whether the pause flag, which sorts just
    before the index, was there."""

    holds: List[Entry]
    paused: bool


def min_order(entry: Entry) -> Any:
    """Sort key of the MIN end: key order."""
    return entry.key


def max_order(entry: Entry) -> Any:
    """Sort key of the MAX end: highest priority first; within one, oldest first."""
    return (-entry.item[0], entry.key)


def order(end: str) -> Callable[[Entry], Any]:
    """Sort key putting entries in the order ``end`` takes them."""
    return min_order if end == MIN else max_order


def blocks(n: int, spread: int) -> int:
    """How many blocks of ``n`` a take of ``n`` with ``spread`` chooses among: those
    starting at a multiple of ``n`` below ``spread``, so that the block ends within
    the first ``n + spread - 1``."""
    return (spread - 1) // n + 1


def block_start(n: int, spread: int, length: Optional[int] = None) -> int:
    """Where a block of ``n`` drawn among the first ``n + spread - 1`` starts: at a
    random multiple of ``n`` below ``spread``; given the ``length`` of what there is
    (more than ``n``), among the blocks that start within it, the last one ending with
    it."""
    count = blocks(n, spread)
    if length is None:
        return n * _chance.randrange(count)
    return min(n * _chance.randrange(min(count, -(-length // n))), length - n)


def choose(entries: List[Entry], n: int, spread: int) -> List[Entry]:
    """``n`` entries in a row (fewer if fewer), a block chosen at random among the
    first ``n + spread - 1``: when one is taken, at most ``spread - 1`` older ones
    stay.  The blocks start at multiples of ``n`` (the last one ends with the
    entries), so concurrent takers of ``n`` collide only when they draw the same
    block, not whenever their blocks overlap."""
    if n <= 0:  # (a sharded take whose earlier shards gave all it wanted)
        return []
    window = entries[: n + spread - 1]
    if len(window) <= n:
        return window
    start = block_start(n, spread, len(window))
    return window[start: start + n]


def value_of(entry: Entry) -> bytes:
    """The encoded value of an entry whose value was read."""
    assert entry.value is not None
    return entry.value


class FrontReader:
    """Reads the front of the order of one structure (see the module docstring)."""

    __slots__ = ("clock", "keys", "max_deliveries", "restore_pending")

    def __init__(self, layout: OrderedLayout, clock: Clock,
                 max_deliveries: Optional[int]) -> None:
        self.keys = layout
        self.clock = clock
        self.max_deliveries = max_deliveries
        #: A reader met more expired holds than one transaction puts back: the next
        #: call given a Database puts them back first.  A hint, not a lock.
        self.restore_pending = False

    def dies(self, item: Item) -> bool:
        """Whether a lease on ``item`` that ends without ack makes it a dead letter."""
        limit = self.max_deliveries
        return limit is not None and self.keys.deliveries(item) + 1 >= limit

    def split_dead(self, holds: List[Entry]) -> Tuple[List[Entry], List[Entry]]:
        """(expired holds whose items become visible, expired leases whose items die)."""
        live: List[Entry] = []
        dead: List[Entry] = []
        for e in holds:
            dying = e.hold is not None and e.hold.kind == LEASE and self.dies(e.item)
            (dead if dying else live).append(e)
        return live, dead

    def _entry(self, kv: Any) -> Entry:
        return Entry(None, bytes(kv.key), kv.value, space=self.keys.items)

    def _entries(self, reader: Any, begin: Any, end: bytes, limit: Optional[int],
                 reverse: bool = False) -> Gen[List[Entry]]:
        kvs = yield from Range(reader, begin, end, limit or 0, reverse).read()
        return [self._entry(kv) for kv in kvs]

    def _visible(self, reader: Any, end: str, n: Optional[int],
                 after: Optional[Entry], skip: int = 0) -> Gen[List[Entry]]:
        """The first ``n`` (all when None) visible items in ``end`` order, after
        ``after`` when given; at the MIN end, after skipping ``skip`` items (a key
        selector: the server skips them, the client reads only the ``n``)."""
        r = self.keys.items_range
        if end == MIN:
            begin: Any = r.start if after is None else after.key + b"\x00"
            if skip:
                begin = fdb_impl().KeySelector.first_greater_or_equal(begin) + skip
            return (yield from self._entries(reader, begin, self.keys.items_end, n))
        head: List[Entry] = []
        upper = r.stop
        if after is not None:  # the rest of the cursor's priority, then lower ones
            g = self.keys.items.range((after.item[0],))
            head = yield from self._entries(reader, after.key + b"\x00", g.stop, n)
            upper = g.start
            if n is not None and len(head) >= n:
                return head[:n]
        rest = None if n is None else n - len(head)
        # A reverse read finds the highest priorities, newest first.  Every priority
        # it passed completely is reversed to oldest first; the lowest one it reached
        # may hold older items it did not see, so read that one forward.
        top = yield from self._entries(reader, r.start, upper, rest, True)
        if not top:
            return head
        lowest = top[-1].item[0]
        above = sorted((e for e in top if e.item[0] != lowest), key=max_order)
        left = None if rest is None else rest - len(above)
        g = self.keys.items.range((lowest,))
        oldest = yield from self._entries(reader, g.start, min(g.stop, upper), left)
        return head + above + oldest

    def start_expired(self, tr: Any) -> Range:
        """Start a snapshot read of the pause flag and the earliest deadlines (see
        :meth:`expired_holds`): the flag is the deadline index's prefix, so one range
        read finds both.  It needs no read version first, so it goes out beside the
        other reads."""
        return Range(snap(tr), self.keys.paused, self.keys.due_range.stop, EXPIRED_PAGE + 2)

    def expired_holds(self, tr: Any, now: int, started: Range) -> Gen[Expired]:
        """Every hold whose deadline is at or before ``now``, by deadline, and whether
        the structure is paused (snapshot reads).

        ``started`` (from :meth:`start_expired`) reads the flag and the
        :data:`EXPIRED_PAGE` + 1 earliest deadlines; only when all of those have
        passed are the expired ones all read (after a mass expiry; writers soon put
        them back).
        """
        due = yield from started.read()
        paused = bool(due) and due[0].key == self.keys.paused
        if paused:
            del due[0]
        if len(due) > EXPIRED_PAGE and self.keys.due.unpack(due[-1].key)[0] <= now:
            begin, end = self.keys.due_range.start, self.keys.due.pack((now + 1,))
            due = yield from Range(snap(tr), begin, end).read()
        holds = []
        for kv in due:
            deadline, hold_id, item, kind = self.keys.due.unpack(kv.key)
            if deadline > now:
                break
            holds.append(Entry(item, self.keys.item_key(item), None,
                               Hold(hold_id, deadline, kind)))
        return Expired(holds, paused)

    def front(self, tr: Any, end: str, n: Optional[int], *, conflict: bool,
              after: Optional[Entry] = None, writing: bool = True, skip: int = 0,
              attempt: Optional[Attempt] = None) -> Gen[Front]:
        """The first ``n`` items (all when None) in ``end`` order, counting expired holds.

        ``conflict=True`` takes a read conflict on the visible range read, so a
        concurrent change at the front conflicts; otherwise only snapshot reads.
        Expired holds are found with a snapshot read of the deadline index, however
        many there are, and merged at their places.  With ``writing``, it also names
        up to :data:`RESTORE_BATCH` expired holds behind the front to put back or
        bury, and reads their values.  Given the ``attempt`` it runs in, the time is
        the attempt's (see :meth:`Attempt.now`); otherwise the structure's clock.
        """
        reader = tr if conflict else snap(tr)
        started = self.start_expired(tr)
        visible = yield from self._visible(reader, end, n, after, skip)
        if attempt is None:
            now = yield from reading(tr, self.clock)
        else:
            now = yield from attempt.now(tr, self.clock)
        holds, paused = yield from self.expired_holds(tr, now, started)
        if not holds:
            return Front(visible, [], [], now, holds, paused)
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
        entries, expired, dead = yield from self.read_held(reader, (entries, expired, dead))
        return Front(entries, expired, dead, now, holds, paused)

    def read_held(self, reader: Any, groups: Tuple[List[Entry], ...]
                   ) -> Gen[List[List[Entry]]]:
        """Read the values of the held entries in ``groups`` (in parallel); drop those
        whose hold is gone (only possible when this transaction itself took them and
        snapshot reads do not see its writes)."""
        futures = {id(e): reader.get(self.held_key(e)) for g in groups for e in g
                   if e.hold is not None}
        yield from futures.values()
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

    def hold_keys(self, entry: Entry) -> Tuple[bytes, bytes]:
        """(held key, deadline index key) of an entry under a hold."""
        h = entry.hold
        assert h is not None
        if h.keys is not None:
            return h.keys
        return self.keys.hold_keys(h.hold_id, entry.item, h.deadline, h.kind)

    def held_key(self, entry: Entry) -> bytes:
        """The held key of an entry under a hold."""
        return self.hold_keys(entry)[0]

    def paused_front(self, tr: Any, front: Front) -> bool:
        """Whether a take that read ``front`` must take nothing: the structure is
        paused.  The flag came with the earliest deadlines (a snapshot read); this
        adds its read conflict, so a pause committed meanwhile makes the take retry
        and find it."""
        tr.add_read_conflict_key(self.keys.paused)
        return front.paused

    def chosen(self, tr: Any, attempt: Attempt, end: str, n: int,
               spread: int) -> Gen[Tuple[Front, List[Entry]]]:
        """What a pop or claim reads and takes (see :meth:`choose_entries`): nothing
        while the structure is paused (see :meth:`paused_front`)."""
        front, entries = yield from self.choose_entries(tr, attempt, end, n, spread)
        if self.paused_front(tr, front):
            return front, []
        return front, entries

    def choose_entries(self, tr: Any, attempt: Attempt, end: str, n: int,
                       spread: int) -> Gen[Tuple[Front, List[Entry]]]:
        """What a pop or claim of ``n`` items with ``spread`` reads, and the entries it
        takes: ``n`` among the first ``n + spread - 1`` in ``end`` order.

        A single strict take (``n`` = ``spread`` = 1) reads the front with a read
        conflict.  With a spread, at the MIN end, the items are a block of ``n`` at a
        random multiple of ``n`` below ``spread`` (see :func:`choose`), read alone (the
        server skips the offset), so concurrent takers mostly read different items
        (give a take of ``n`` a spread of several times ``n``); when expired holds are about
        (they are items too) or the queue is shorter than the block, it reads the whole
        window and chooses in it (a queue that ends within the block drawn: a block
        drawn again among those before its end, read alone).  Only snapshot reads
        then: conflicts come from the items taken.
        """
        if spread > 1 and end == MIN:
            offset = block_start(n, spread)
            front = yield from self.front(tr, end, n, conflict=False, skip=offset,
                                          attempt=attempt)
            if not offset or not (front.holds or len(front.entries) < n):
                return front, front.entries
            if not front.holds and front.entries:
                # the queue (at this read version) ends in the block drawn: draw again
                # among the blocks before its end, and read only that one
                offset = block_start(n, spread, offset + len(front.entries))
                front = yield from self.front(tr, end, n, conflict=False, skip=offset,
                                              attempt=attempt)
                if not (front.holds or len(front.entries) < n) or not offset:
                    return front, front.entries
        front = yield from self.front(tr, end, n + spread - 1,
                                      conflict=n == 1 and spread == 1, attempt=attempt)
        return front, choose(front.entries, n, spread)

    def expired_now(self, tr: Any, now: int) -> Gen[List[Entry]]:
        """Every hold whose deadline is at or before ``now`` (:meth:`expired_holds`,
        read on its own)."""
        return (yield from self.expired_holds(tr, now, self.start_expired(tr))).holds

    def dead_holds(self, tr: Any, now: int) -> Gen[List[Entry]]:
        """The expired leases whose items are dead letters now but not moved yet, by
        deadline (snapshot reads, values not read; none without ``max_deliveries``)."""
        if self.max_deliveries is None:
            return []
        return self.split_dead((yield from self.expired_now(tr, now)))[1]

    def dying(self, tr: Any, now: int, limit: Optional[int] = None) -> Gen[List[Entry]]:
        """The first ``limit`` (all when None) of :meth:`dead_holds`, values read
        (snapshot reads)."""
        dead = yield from self.dead_holds(tr, now)
        return (yield from self.read_held(snap(tr), (dead[:limit],)))[0]
