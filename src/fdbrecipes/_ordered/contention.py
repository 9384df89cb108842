"""High-contention pops: one commit takes items for many pops, in order.

Under contention every plain pop reads the same first item, so of ``k`` concurrent
pops one commits and ``k - 1`` conflict.  A popper object in contended mode (it saw
a conflict in the last :data:`HC_CONTENDED` seconds) instead *fetches*: one
transaction takes the first :data:`HC_BATCH` items in order, returns the first and
sets the others aside for this popper under holds of kind RESULT, each with a
deadline ``result_timeout`` away.  Its next pops *collect* them, oldest first, each
in a small transaction of its own that conflicts with nothing but the removal of
that same hold, and that reads nothing while it can prove the hold is there.

* Order: fetches take the front in order, with a read conflict on it (a fetch and a
  concurrent pop or fetch cannot both take the same items); a popper returns its
  items oldest first, so no consumer receives an older item of a producer after a
  newer one.
* Crash safety: an item set aside for a popper that stops popping (or dies) is a hold
  like a lease: at its deadline it counts as visible again at its original place and
  the next writer puts it back.  Nothing is stranded, nothing is lost.
* ``clear()``: it removes the holds without reading them.  A collect that reads
  nothing is therefore pinned to a *chain*: the items of one fetch are all there at
  the fetch's commit version, and each collect reads at the version its batch is
  known good at and, when it commits, extends that version to its own commit
  version: a clear in between conflicts with it (it clears the collect's hold, on
  which the collect has a read conflict).  A collect that cannot pin (the version is
  over :data:`HC_VERSION_AGE` old, or was learnt from a receipt), a retry, and every
  give-back read the holds instead.
* ``commit_unknown_result`` and Ctrl-C: every fetch and collect is a call of the
  structure's :class:`.._retry.RetryLoop`, with receipts; an interrupted or unknown call
  reports the popped value (not this module's records), and the items its fetch may
  have set aside stay this popper's to collect (each read first).

Cost per pop in contended mode: one collect (a commit, no reads) plus one fetch
shared by :data:`HC_BATCH` pops.  Without contention a pop is a plain pop.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Deque, Dict, List, NamedTuple, Optional

from .._attempt import Attempt
from .._fdb import Gen, Tally, read, seconds_to_versions
from .._hooks import Hooks
from .._layout import RESULT
from .._receipts import InterruptedCall, Outcome, UnknownResultError
from .._retry import RetryLoop
from .._values import Value, random_id
from .engine import Ordered
from .front import OTHER_END, Entry, value_of

#: Items one fetch takes at most: the first is popped, the others set aside.
HC_BATCH = 32
#: Value bytes one fetch sets aside at most.
HC_BATCH_BYTES = 1_000_000
#: Seconds a popper stays in contended mode after it saw a conflict.
HC_CONTENDED = 5.0
#: A collect trusts a hold without reading it only while its deadline is at least
#: this many seconds ahead of the read version.
HC_MARGIN = 0.5
#: A batch's known-good version this many seconds old is not pinned to.
HC_VERSION_AGE = 1.0


class Chain:
    """The items set aside by one fetch: a version at which every one of them not yet
    collected is known to be held (0: unknown, read them), and when it was learnt."""

    __slots__ = ("at", "version")

    def __init__(self, version: int) -> None:
        self.version = version
        self.at = time.monotonic()

    def pin(self) -> int:
        """The version a collect may read at without reading its hold, or 0."""
        if time.monotonic() - self.at > HC_VERSION_AGE:
            return 0
        return self.version

    def extend(self, pinned: int, committed: int) -> None:
        """A collect that read at ``pinned`` committed at ``committed``: nothing
        removed the batch's holds in between (it would have conflicted)."""
        if pinned and committed and pinned <= self.version < committed:
            self.version, self.at = committed, time.monotonic()


class Held(NamedTuple):
    """An item set aside for this popper: its entry (item, value, hold) and the chain
    of its fetch."""

    entry: Entry
    chain: Chain


class Fetched(NamedTuple):
    """What a fetch did: the value popped now (None: the queue is empty) and the
    items set aside, oldest first."""

    value: Optional[Value]
    held: List[Entry]


class Collected(NamedTuple):
    """What a collect did: ``found`` False when the hold was gone (its item went back
    to the queue, or was cleared); else the value taken."""

    found: bool
    value: Optional[Value] = None


GONE = Collected(False)


def popped(result: Any) -> Optional[Value]:
    """The value a fetch or collect handed out (what the caller's pop returns)."""
    return result.value if isinstance(result, (Fetched, Collected)) else None


def committed(error: BaseException) -> bool:
    """Whether ``error`` is Ctrl-C reaching a call whose commit was settled as landed."""
    return (isinstance(error, InterruptedCall) and error.outcome is not None
            and error.outcome.committed)


def set_aside(results: Dict[int, Any]) -> List[Entry]:
    """Every item the fetches among ``results`` (by attempt) may have set aside."""
    return [e for r in results.values() if isinstance(r, Fetched) for e in r.held]


def public_unknown(error: UnknownResultError) -> UnknownResultError:
    """``error`` with the popped values in place of this module's records."""
    return UnknownResultError(str(error), error.receipt, error.call_id,
                              {n: popped(r) for n, r in error.results.items()})


class Contention:
    """The high-contention pop of one structure object (see the module docstring).

    Thread-safe: the items set aside are shared by the threads using the object.
    """

    __slots__ = ("engine", "held", "hooks", "lock", "loop", "result_timeout")

    def __init__(self, engine: Ordered, loop: RetryLoop, hooks: Hooks,
                 result_timeout: float) -> None:
        self.engine = engine
        self.loop = loop
        self.hooks = hooks
        self.result_timeout = seconds_to_versions(result_timeout)
        self.held: Dict[str, Deque[Held]] = {}
        self.lock = threading.Lock()

    def pop(self, db: Any, end: str) -> Gen[Optional[Value]]:
        """Pop at ``end``: collect an item set aside, or fetch.

        Raises:
            InterruptedCall, UnknownResultError: as any call (see :mod:`.._retry`), with
                the popped value as the result; what a fetch in doubt may have set
                aside stays this popper's to collect.
        """
        other = self.take_held(OTHER_END[end])
        if other:  # set aside for the other end: back to their places first
            yield from self.loop(db, self.give_back, other)
        try:
            while True:
                held = self.next_held(end)
                if held is None:
                    break
                collected = yield from self.collect_held(db, end, held)
                if collected.found:
                    return collected.value
            return (yield from self.fetch_more(db, end))
        except InterruptedCall as e:
            outcome, inner = e.outcome, e.unknown
            if outcome is not None:
                if outcome.committed:
                    self.keep(end, set_aside({0: outcome.result}), Chain(0))
                outcome = Outcome(outcome.committed, popped(outcome.result))
            if inner is not None:
                self.keep(end, set_aside(inner.results), Chain(0))
                inner = public_unknown(inner)
            raise InterruptedCall(outcome, inner) from e
        except UnknownResultError as e:
            self.keep(end, set_aside(e.results), Chain(0))
            raise public_unknown(e) from e

    def collect_held(self, db: Any, end: str, held: Held) -> Gen[Collected]:
        """Collect one item set aside: pinned to its chain when it can be.  If the
        call stops without having taken it, it stays first in line (read next time)."""
        pinned = held.chain.pin()
        try:
            done = yield from self.loop.pinned(db, pinned, self.collect, held.entry)
        except BaseException as e:
            if not committed(e):
                with self.lock:
                    self.held.setdefault(end, deque()).appendleft(Held(held.entry, Chain(0)))
            raise
        with self.lock:
            held.chain.extend(pinned, done.version)
        return done.result

    def fetch_more(self, db: Any, end: str) -> Gen[Optional[Value]]:
        """Fetch: pop the first item, set the next ones aside when contended."""
        done = yield from self.loop.pinned(db, 0, self.fetch, end, self.batch())
        fetched: Fetched = done.result
        if fetched.held:
            self.keep(end, fetched.held, Chain(done.version))
            if self.hooks.on_fetch is not None:
                self.hooks.on_fetch(len(fetched.held))
        return fetched.value

    def keep(self, end: str, entries: List[Entry], chain: Chain) -> None:
        """Set ``entries`` aside for this popper at ``end``, after those there."""
        if entries:
            with self.lock:
                self.held.setdefault(end, deque()).extend(Held(e, chain) for e in entries)

    def batch(self) -> int:
        """How many items the next fetch takes: :data:`HC_BATCH` when this popper saw
        a conflict in the last :data:`HC_CONTENDED` seconds, else 1 (a plain pop:
        nothing set aside)."""
        contended = time.monotonic() < self.loop.stats.last_conflict + HC_CONTENDED
        return HC_BATCH if self.hooks.contended or contended else 1

    def waiting(self, end: str) -> bool:
        """Whether items are set aside for this popper at ``end``."""
        with self.lock:
            return bool(self.held.get(end))

    def next_held(self, end: str) -> Optional[Held]:
        """The oldest item set aside at ``end``, or None."""
        with self.lock:
            waiting = self.held.get(end)
            return waiting.popleft() if waiting else None

    def take_held(self, end: str) -> List[Entry]:
        """Every item set aside at ``end``, no longer this popper's to collect."""
        with self.lock:
            waiting = self.held.pop(end, None)
        return [held.entry for held in waiting or ()]

    # -- the two transactions ------------------------------------------------------------

    def fetch(self, tr: Any, attempt: Attempt, end: str, batch: int) -> Gen[Fetched]:
        """Pop the first item; with ``batch`` > 1 also set aside the next ones (up to
        ``batch`` in all) for this popper.  A read conflict on the front; nothing is
        taken while the structure is paused (as :meth:`.front.FrontReader.chosen`)."""
        front = yield from self.engine.front(tr, end, batch, conflict=True, attempt=attempt)
        if self.engine.paused_front(tr, front):
            front = front._replace(entries=[])
        tally = Tally()
        settled = self.engine.settle(tr, front, tally)
        if not front.entries:
            tally.write(tr, attempt)
            attempt.idle = not settled
            return Fetched(None, [])
        first, rest = front.entries[0], front.entries[1:]
        value = self.engine.taken(tr, attempt, [first], front.now, tally)[0]
        deadline = front.now + self.result_timeout
        held: List[Entry] = []
        size = 0
        for entry in rest:
            size += len(value_of(entry))
            if size > HC_BATCH_BYTES:
                break
            item = self.engine.take(tr, entry, front.now, tally)
            hold = self.engine.hold(tr, item, value_of(entry), random_id(), deadline, RESULT, tally)
            held.append(Entry(item, entry.key, entry.value, hold))
        tally.write(tr, attempt)
        if held and attempt.undo is not None:  # cancelled: all of it back in place
            attempt.undo = (self.unfetch, (attempt.undo, held))
        return Fetched(value, held)

    def unfetch(self, tr: Any, attempt: Attempt, unpop: Any, held: List[Entry]) -> Gen[None]:
        """Undo a fetch whose caller was cancelled: the item popped back at its place
        (``unpop``: that pop's undo), the items set aside too."""
        undo_op, undo_args = unpop
        yield from undo_op(tr, attempt, *undo_args)
        yield from self.give_back(tr, attempt, held)
        attempt.idle = False

    def give_back(self, tr: Any, attempt: Attempt, entries: List[Entry]) -> Gen[None]:
        """Put items set aside for this popper back at their places: those whose holds
        still exist (all are read, in parallel: a clear may have removed them)."""
        reads = [tr.get(self.engine.held_key(entry)) for entry in entries]
        held = []
        for entry, found in zip(entries, reads):
            if (yield from read(found)) is not None:
                held.append(entry)
        now = yield from attempt.now(tr, self.engine.clock)  # after the reads: no wait
        tally = Tally()
        for entry in held:
            self.engine.put_back(tr, entry, now, tally)
        tally.write(tr, attempt)
        attempt.idle = not held

    def collect(self, tr: Any, attempt: Attempt, entry: Entry) -> Gen[Collected]:
        """Take the item set aside under ``entry``'s hold for good: its value, or
        :data:`GONE` if the hold has ended (its item went back to the queue, or was
        cleared).

        Reads nothing when the attempt is pinned to its batch's chain (see the module
        docstring) and the deadline is comfortably ahead: a hold there at the read
        version can then only be taken away by a transaction that writes it after
        that version (a clear, or one that read at or after its deadline), which
        conflicts with this one's read conflict on the hold.  Otherwise it reads the
        hold (a read conflict on it).
        """
        held_key = self.engine.held_key(entry)
        hold = None if attempt.pinned else tr.get(held_key)  # beside the read version
        now = yield from attempt.now(tr, self.engine.clock)
        trusted = attempt.pinned and now + seconds_to_versions(HC_MARGIN) <= self.deadline(entry)
        if not trusted and (yield from read(tr.get(held_key) if hold is None else hold)) is None:
            attempt.idle = True
            return GONE
        tally = Tally()
        value = self.engine.taken(tr, attempt, [entry], now, tally)[0]
        tally.write(tr, attempt)
        return Collected(True, value)

    @staticmethod
    def deadline(entry: Entry) -> int:
        """The deadline of the hold an item set aside is under."""
        assert entry.hold is not None
        return entry.hold.deadline
