"""High-contention pops: one commit takes items for many pops, in order.

Under contention every plain pop reads the same first item, so of ``k`` concurrent
pops one commits and ``k - 1`` conflict.  A popper object in contended mode (it saw
a conflict in the last :data:`HC_CONTENDED` seconds) instead *fetches*: one
transaction takes the first :data:`HC_BATCH` items in order, returns the first and
sets the others aside for this popper under holds of kind RESULT, each with a
deadline ``result_timeout`` away.  Its next pops *collect* them, oldest first, each
in a small transaction of its own that conflicts with nothing but the expiry of that
same hold, and that reads nothing: while the hold's deadline is ahead, it is still
there, so the collect only takes a read conflict on it, with a read version known
to be recent (the previous commit's), and commits.

* Order: fetches take the front in order, with a read conflict on it (a fetch and a
  concurrent pop or fetch cannot both take the same items); a popper returns its
  items oldest first, so no consumer receives an older item of a producer after a
  newer one.
* Crash safety: an item set aside for a popper that stops popping (or dies) is a hold
  like a lease: at its deadline it counts as visible again at its original place and
  the next writer puts it back.  Nothing is stranded, nothing is lost.
* ``commit_unknown_result``: every fetch and collect is a call of the structure's
  :class:`._run.Loop`, with receipts.

Cost per pop in contended mode: one collect (a commit, no reads) plus one fetch
shared by :data:`HC_BATCH` pops.  Without contention a pop is a plain pop.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Deque, Dict, List, NamedTuple, Optional

from ._fdb import Tally, get_value, seconds_to_versions
from ._front import Entry, value_of
from ._hooks import Hooks
from ._layout import RESULT
from ._ordered import Ordered
from ._run import Attempt, Loop
from ._values import Value, decode_value, random_id

#: Items one fetch takes at most: the first is popped, the others set aside.
HC_BATCH = 32
#: Value bytes one fetch sets aside at most.
HC_BATCH_BYTES = 1_000_000
#: Seconds a popper stays in contended mode after it saw a conflict.
HC_CONTENDED = 5.0
#: A collect trusts a hold without reading it only while its deadline is at least
#: this many seconds ahead of the read version.
HC_MARGIN = 0.5
#: A read version this many seconds old is not reused.
HC_VERSION_AGE = 1.0


class Held(NamedTuple):
    """An item set aside for this popper: its entry (item, value, hold) and the
    version after which the hold is known to exist (the fetch's commit)."""

    entry: Entry
    since_version: int


class Fetched(NamedTuple):
    """What a fetch did: the value popped now (None: the queue is empty) and the
    items set aside, oldest first."""

    value: Optional[Value]
    held: List[Entry]


class Collected(NamedTuple):
    """What a collect did: ``found`` False when the hold was gone (its item went back
    to the queue); else the value taken."""

    found: bool
    value: Optional[Value] = None


GONE = Collected(False)


class Contention:
    """The high-contention pop of one structure object (see the module docstring).

    Thread-safe: the items set aside are shared by the threads using the object.
    """

    __slots__ = ("held", "hooks", "lock", "loop", "o", "pops",
                 "result_timeout", "window")

    def __init__(self, engine: Ordered, loop: Loop, hooks: Hooks,
                 result_timeout: float) -> None:
        self.o = engine
        self.loop = loop
        self.hooks = hooks
        self.result_timeout = seconds_to_versions(result_timeout)
        self.window = 0.0  # time.monotonic() when the current second of pops began
        self.pops = 0  # pops in it
        self.held: Dict[int, Deque[Held]] = {}
        self.lock = threading.Lock()

    def pop(self, db: Any, end: int) -> Optional[Value]:
        """Pop at ``end``: collect an item set aside, or fetch."""
        other = self.take_held(1 - end)
        if other:  # set aside for the other end: back to their places first
            self.loop(db, self.give_back, other)
        while True:
            held = self.next_held(end)
            if held is None:
                break
            collected: Collected = self.loop.reading_at(db, self.read_version(held),
                                                        self.collect, held.entry)
            if collected.found:
                return collected.value
        fetched: Fetched = self.loop(db, self.fetch, end, self.batch())
        if fetched.held:
            since = self.loop.stats.committed_version
            with self.lock:
                self.held.setdefault(end, deque()).extend(
                    Held(entry, since) for entry in fetched.held)
            if self.hooks.on_fetch is not None:
                self.hooks.on_fetch(len(fetched.held))
        return fetched.value

    def batch(self) -> int:
        """How many items the next fetch takes: :data:`HC_BATCH` when this popper saw
        contention in the last :data:`HC_CONTENDED` seconds; otherwise 2 for its first
        fetch in a second, doubling with each one after."""
        now = time.monotonic()
        if now - self.window > 1.0:
            self.window, self.pops = now, 0
        self.pops += 1
        if self.hooks.contended or now < self.loop.stats.last_conflict + HC_CONTENDED:
            return HC_BATCH
        return int(min(HC_BATCH, 2 ** self.pops))

    def next_held(self, end: int) -> Optional[Held]:
        """The oldest item set aside at ``end``, or None."""
        with self.lock:
            waiting = self.held.get(end)
            return waiting.popleft() if waiting else None

    def take_held(self, end: int) -> List[Entry]:
        """Every item set aside at ``end``, no longer this popper's to collect."""
        with self.lock:
            waiting = self.held.pop(end, None)
        return [held.entry for held in waiting or ()]

    def read_version(self, held: Held) -> int:
        """A recent version at which ``held`` is known to exist, or 0 (fetch one)."""
        stats = self.loop.stats
        if time.monotonic() - stats.committed_at > HC_VERSION_AGE:
            return 0
        version = stats.committed_version
        return version if version >= held.since_version else 0

    # -- the two transactions ------------------------------------------------------------

    def fetch(self, tr: Any, attempt: Attempt, end: int, batch: int) -> Fetched:
        """Pop the first item; with ``batch`` > 1 also set aside the next ones (up to
        ``batch`` in all) for this popper.  A read conflict on the front."""
        front = self.o.front(tr, end, batch, conflict=True, attempt=attempt)
        tally = Tally()
        settled = self.o.settle(tr, front, tally)
        if not front.entries:
            tally.write(tr)
            attempt.idle = not settled
            return Fetched(None, [])
        first, rest = front.entries[0], front.entries[1:]
        value = decode_value(self.o.remove(tr, [first], front.now, tally)[0])
        deadline = front.now + self.result_timeout
        held: List[Entry] = []
        size = 0
        for entry in rest:
            size += len(value_of(entry))
            if size > HC_BATCH_BYTES:
                break
            item = self.o.take(tr, entry, front.now, tally)
            hold = self.o.hold(tr, item, value_of(entry), random_id(), deadline, RESULT, tally)
            held.append(Entry(item, entry.key, entry.value, hold))
        tally.write(tr)
        return Fetched(value, held)

    def give_back(self, tr: Any, attempt: Attempt, entries: List[Entry]) -> None:
        """Put items set aside for this popper back at their places (those whose
        holds still exist: a hold near its deadline is read first)."""
        now = attempt.now(tr, self.o.clock)
        tally = Tally()
        held = [entry for entry in entries if self.still_held(tr, entry, now)]
        for entry in held:
            self.o.put_back(tr, entry, now, tally)
        tally.write(tr)
        attempt.idle = not held

    def still_held(self, tr: Any, entry: Entry, now: int) -> bool:
        """Whether ``entry``'s hold may be taken without reading it: its deadline is
        comfortably ahead (see :meth:`collect`); otherwise read it (a conflict)."""
        hold = entry.hold
        assert hold is not None
        if now + seconds_to_versions(HC_MARGIN) <= hold.deadline:
            return True
        return get_value(tr.get(self.o.held_key(entry))) is not None

    def collect(self, tr: Any, attempt: Attempt, entry: Entry) -> Collected:
        """Take the item set aside under ``entry``'s hold for good: its value, or
        :data:`GONE` if the hold has ended (its item went back to the queue).

        Reads nothing while the deadline is comfortably ahead (run at a recent
        version, it does not even ask for a read version): a hold that exists at the
        read version and has not expired can only be taken away by a transaction
        reading at or after its deadline, which then conflicts with this one's read
        conflict.
        """
        now = attempt.now(tr, self.o.clock)
        if not self.still_held(tr, entry, now):
            attempt.idle = True
            return GONE
        tally = Tally()
        self.o.remove(tr, [entry], now, tally)
        tally.write(tr)
        return Collected(True, decode_value(value_of(entry)))

