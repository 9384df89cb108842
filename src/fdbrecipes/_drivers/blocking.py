"""The blocking driver: an operation run to its end in the calling thread (the sync API).

The library's operations are generators that yield the FoundationDB futures they need
(see :data:`.._fdb.Gen`); :func:`drive` blocks on each, where its twin in
:mod:`.awaiting` awaits it.  Waiting operations also yield :class:`.._waiting.Watch`
and :class:`.._waiting.Pause` steps: the threads of a process share one watch per
database and wake key (:class:`Watches`), as the tasks of an event loop do in
:mod:`.awaiting`, so 1,000 waiting threads hold one of the connection's watches, not
1,000; and they take in turns (:class:`.._waiting.Take`, :mod:`.turns`).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Optional, Set, Tuple, TypeVar, cast

from .._fdb import Gen
from .._waiting import Pause, Take, Watch
from .turns import Lines

__all__ = ["Interrupt", "Interrupted", "SharedWatch", "Watches", "drive", "wait_ready"]

T = TypeVar("T")


class Interrupted(Exception):
    """Raised inside a call driven with an :class:`Interrupt` that was set while it
    paused (or before)."""


class Interrupt:
    """Ends the pauses (waits on a watch, sleeps) of calls driven with it, from any
    thread: a worker's ``stop`` wakes its fetching thread at once.  Only pauses end
    this way, never a wait for a read or a commit."""

    __slots__ = ("_events", "_lock", "_set")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._events: Set[threading.Event] = set()

    def set(self) -> None:
        """Interrupt every pause now and later."""
        with self._lock:
            self._set = True
            for event in self._events:
                event.set()

    def pause(self, event: threading.Event, timeout: Optional[float]) -> None:
        """Wait for ``event`` or ``timeout``, unless interrupted first.

        Raises:
            Interrupted: the interrupt was set (before or during the wait).
        """
        with self._lock:
            if self._set:
                raise Interrupted
            self._events.add(event)
        try:
            event.wait(timeout)
        finally:
            with self._lock:
                self._events.discard(event)
        if self._set:
            raise Interrupted


class SharedWatch:
    """One watch of a key, set by one thread's waiter at read version ``version`` and
    waited on by every waiter of the process that checked at or after that version
    (it fires on any change after its own version: no later than a watch of theirs
    would).  Waiters wait on events of their own, which the watch's one callback sets."""

    __slots__ = ("events", "future", "gone", "key", "users", "version")

    def __init__(self, key: Tuple[Any, bytes], future: Any, version: int) -> None:
        self.key = key
        self.future = future
        self.version = version
        self.users = 0  # waiters pausing on it
        self.events: Set[threading.Event] = set()  # theirs
        self.gone = False  # it fired, failed or was cancelled: wake whoever comes

    def is_ready(self) -> bool:
        """Whether the watch fired (or failed)."""
        return bool(self.future.is_ready())

    def wait(self) -> Any:
        """What the watch's ``wait()`` gives (its error, if it failed)."""
        return self.future.wait()


class Watches:
    """The watches the blocking waiters of this process share, by (database, wake key).

    A waiter whose readiness check read at version ``v`` may wait on a watch set at
    ``v`` or earlier (see :class:`SharedWatch`); one whose check is older than the
    live watch gets none (it looks again: a watch of its own would hold one of the
    connection's watches beside the live one, and past ``max_watches`` make the live
    one fail).  Only when there is no live watch does a waiter set one, the live one
    then.  A watch nobody waits on any more is cancelled; one that fired or failed is
    replaced by the next waiter's."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: Dict[Tuple[Any, bytes], SharedWatch] = {}

    def watch(self, step: Watch) -> Optional[SharedWatch]:
        """The live watch for ``step`` if set early enough, a new one (the live one
        now) if there is none, or None (the live one is newer than its check)."""
        key = (step.tr.db, step.key)
        with self.lock:
            shared = self.live.get(key)
            if shared is not None and not shared.gone:
                return shared if shared.version <= step.version else None
        fresh = SharedWatch(key, step.tr.watch(step.key), step.version)
        with self.lock:
            current = self.live.get(key)
            if current is None or current.gone:
                self.live[key] = fresh
                current = None
        if current is not None:  # another thread set one meanwhile: that one, or none
            fresh.future.cancel()
            return current if current.version <= step.version else None
        fresh.future.on_ready(_Fired(self, fresh))  # may run now, in this thread
        return fresh

    def fired(self, watch: SharedWatch) -> None:
        """``watch`` fired or failed (on FoundationDB's network thread): wake its
        waiters; the next waiter sets a new one."""
        with self.lock:
            watch.gone = True
            if self.live.get(watch.key) is watch:
                del self.live[watch.key]
            events = tuple(watch.events)
        for event in events:
            event.set()

    def pause(self, watches: Tuple[SharedWatch, ...], seconds: Optional[float],
              interrupt: Optional[Interrupt]) -> bool:
        """Block until one of ``watches`` fires (or is gone) or ``seconds`` pass; True
        if one did.

        Raises:
            Interrupted: ``interrupt`` was set.
        """
        event = threading.Event()
        with self.lock:
            for watch in watches:
                watch.users += 1
                watch.events.add(event)
                if watch.gone:
                    event.set()
        try:
            if interrupt is not None:
                interrupt.pause(event, seconds)
            else:
                event.wait(seconds)
        finally:
            self.leave(watches, event)
        return event.is_set()

    def leave(self, watches: Tuple[SharedWatch, ...], event: threading.Event) -> None:
        """A waiter stops waiting on ``watches``: cancel those nobody waits on."""
        idle = []
        with self.lock:
            for watch in watches:
                watch.users -= 1
                watch.events.discard(event)
                if not watch.users and not watch.gone:
                    watch.gone = True  # a waiter holding it before its pause looks again
                    if self.live.get(watch.key) is watch:
                        del self.live[watch.key]
                    idle.append(watch)
        for watch in idle:
            watch.future.cancel()


class _Fired:
    """A shared watch's callback (see :meth:`Watches.fired`)."""

    __slots__ = ("owner", "watch")

    def __init__(self, owner: Watches, watch: SharedWatch) -> None:
        self.owner = owner
        self.watch = watch

    def __call__(self, _future: Any) -> None:
        self.owner.fired(self.watch)


#: The watches this process's blocking waiters share, and their turns to take.
WATCHES = Watches()
LINES = Lines()


def drive(call: Gen[T], interrupt: Optional[Interrupt] = None) -> T:
    """Run ``call`` to its end, blocking on each future it waits for (the sync API).

    A KeyboardInterrupt that arrives while it blocks is raised inside the call,
    where it waited, so the call settles a commit in flight (see ``_retry.run``).
    With ``interrupt``, setting it ends the call's pauses: ``Interrupted`` is
    raised inside the call where it paused (no commit is in flight there).
    """
    send: Any = None
    throw: Optional[BaseException] = None
    while True:
        try:
            step = call.send(send) if throw is None else call.throw(throw)
        except StopIteration as stop:
            result: T = stop.value  # (an annotation, not a call to cast: run per call)
            return result
        send, throw = None, None
        kind = type(step)  # by type, not isinstance: most steps are futures
        try:
            if kind is Pause:
                send = pause(step, interrupt)
            elif kind is Watch:
                send = WATCHES.watch(step)
            elif kind is Take:
                send = take(step, interrupt)
            else:
                step.block_until_ready()
        except BaseException as e:
            throw = e


def pause(step: Pause, interrupt: Optional[Interrupt]) -> bool:
    """Sleep as ``step`` asks: until one of its (shared) watches fires or its time is
    up; True if a watch did.

    Raises:
        Interrupted: ``interrupt`` was set.
    """
    if not step.futures:
        return wait_ready((), step.seconds, interrupt)
    return WATCHES.pause(cast(Tuple[SharedWatch, ...], step.futures), step.seconds, interrupt)


def take(step: Take, interrupt: Optional[Interrupt]) -> Any:
    """Run ``step``'s take in its turn (see :mod:`.turns`); None if its turn did not
    come within ``step.seconds``, or a take before it took nothing.

    Raises:
        Interrupted: ``interrupt`` was set while it waited for its turn.
    """
    event = threading.Event()
    turn, now = LINES.join(step.db, step.keys, event)
    try:
        if not now:
            if interrupt is not None:
                interrupt.pause(event, step.seconds)
            else:
                event.wait(step.seconds)
            if not LINES.holds(turn):
                return None
        if LINES.stale(turn):
            return None
        got = drive(step.call, interrupt)
        LINES.took(turn, got is None)
        return got
    finally:
        after = LINES.leave(turn)
        if after is not None:
            after.set()


def wait_ready(futures: Tuple[Any, ...], timeout: Optional[float],
               interrupt: Optional[Interrupt] = None) -> bool:
    """Block until one of ``futures`` is ready or ``timeout`` seconds pass; True if one
    is (those not ready then are cancelled; none: just sleep).

    The futures' outcomes (a value or an error) are not inspected: callers use this
    for watches, where any outcome means "look again".

    Raises:
        Interrupted: ``interrupt`` was set (the futures are cancelled).
    """
    if any(future.is_ready() for future in futures):
        return True
    if not futures and not timeout:  # nothing to wait for
        return False
    event = threading.Event()
    for future in futures:
        future.on_ready(_Setter(event))
    try:
        if interrupt is not None:
            interrupt.pause(event, timeout)
        elif not futures:
            if timeout:
                time.sleep(timeout)
        else:
            event.wait(timeout)
    except Interrupted:
        cancel_unready(futures)
        raise
    cancel_unready(futures)
    return event.is_set()


def cancel_unready(futures: Tuple[Any, ...]) -> None:
    """Cancel those of ``futures`` not ready yet."""
    for future in futures:
        if not future.is_ready():
            future.cancel()


class _Setter:
    """A future's callback that sets an event."""

    __slots__ = ("event",)

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, _future: Any) -> None:
        self.event.set()
