"""What a Queue or PriorityQueue holds, counted, and whether an item is visible: the
counters' reads an engine makes for ``size``, ``stats`` and a waiter's look
(:class:`Counts`, which :class:`.engine.Ordered` is), and their answer
(:class:`QueueStats`).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from .._clock import reading
from .._fdb import VERSIONS_PER_SECOND, Gen, Range, get_value, read_le64, snap
from .._layout import DELAY
from .._waiting import Readiness
from .front import MIN, FrontReader

__all__ = ["Counts", "QueueStats"]


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


class Counts(FrontReader):
    """The counters and the front of one structure, read (see the module docstring)."""

    __slots__ = ()

    # -- counters -----------------------------------------------------------------------

    def size(self, tr: Any) -> Gen[int]:
        """Items in the structure: "pushed" - "taken" (two reads in parallel, read
        conflicts on both), less the expired leases whose items are dead letters now
        but not yet moved (with ``max_deliveries``: a snapshot read of the expired
        holds)."""
        pushed, taken = tr.get(self.keys.pushed), tr.get(self.keys.taken)
        dying = 0
        if self.max_deliveries is not None:
            now = yield from reading(tr, self.clock)
            dying = len((yield from self.dead_holds(tr, now)))
        yield pushed
        yield taken
        return read_le64(get_value(pushed)) - read_le64(get_value(taken)) - dying

    def stats(self, tr: Any) -> Gen[QueueStats]:
        """Counters, corrected for holds that expired without a write, and the age of
        the front item; snapshot reads only (no conflicts)."""
        r = self.keys.subspace["n"].range()
        started = Range(snap(tr), r.start, r.stop)
        front = yield from self.front(tr, MIN, 1, conflict=False, writing=False)
        counts = {bytes(kv.key): read_le64(kv.value) for kv in (yield from started.read())}
        k = self.keys
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
            since = self.keys.since(entry.item) if entry.hold is None else entry.hold.deadline
            oldest = max(0.0, (front.now - since) / VERSIONS_PER_SECOND)
        return QueueStats(size - in_flight - delayed - len(dying), delayed, in_flight,
                          dead + len(dying), oldest)

    # -- waiting ---------------------------------------------------------------------------

    def ready(self, tr: Any, end: str) -> Gen[Readiness]:
        """Whether an item is visible at ``end``; if not, the seconds until the next
        hold expires (its item becomes visible without any write), or None.  Never
        while the structure is paused (its resume touches the wake key; the flag is
        read with the earliest deadlines, by snapshot)."""
        front = yield from self.front(tr, end, 1, conflict=False, writing=False)
        if front.paused:
            return False, None
        if front.entries:
            return True, None
        due = self.keys.due
        kv = yield from Range(tr.snapshot, due.pack((front.now + 1,)),
                              self.keys.due_range.stop, 1).first()
        if kv is None:
            return False, None
        until = (due.unpack(kv.key)[0] - front.now) / VERSIONS_PER_SECOND
        return False, max(0.0, until) + 0.001
