"""Waiting: the clock, watches, wake keys, and the blocking driver.

Time is the cluster's: a transaction's read version, about 1,000,000 per second and
the same for every client.  Waiting calls wait on a FoundationDB watch of a wake key
that every push touches, set in a transaction that writes nothing (a watch adds a
read conflict on its key), so a push from any process wakes them.

Operations are generators (:data:`._fdb.Gen`); :func:`drive` runs one to its end,
blocking on each future it yields: that is the sync API.  The awaiting driver is in
:mod:`fdbrecipes.aio`.  Besides futures, an operation may yield a :class:`Watch`
(the driver sends back a watch future) or a :class:`Pause` (the driver sleeps until
its future is ready or its time is up, and sends back which).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, NamedTuple, Optional, Protocol, Set, Tuple, TypeVar, cast

from ._fdb import Gen, check_database, fdb_impl, ready
from ._hooks import Hooks
from ._values import check_timeout

T = TypeVar("T")

#: Seconds to back off when a watch fails instead of firing.
WATCH_FAILURE_BACKOFF = 0.05

#: What a readiness check returns: (ready now, seconds until it may become ready
#: without any write, or None).
Readiness = Tuple[bool, Optional[float]]


class Wake(NamedTuple):
    """How a waiter knows when to look again.

    Attributes:
        key: the wake key, touched by every write that may make an item visible.
        ready: ``ready(tr, *args)``, the readiness check (an operation), read-only.
        args: its arguments after the transaction.
        hooks: the structure's testing hooks.
    """

    key: bytes
    ready: Callable[..., Gen[Readiness]]
    args: Tuple[Any, ...]
    hooks: Hooks


class Watch:
    """What a waiting operation yields for a watch of ``key`` in ``tr``, whose reads
    are at ``version``: the driver sends back a watch future.  The blocking driver
    sets one in ``tr``; the awaiting driver may hand out a watch of the same key that
    another waiter set at or before ``version`` (it fires no later than this one
    would)."""

    __slots__ = ("key", "tr", "version")

    def __init__(self, tr: Any, key: bytes, version: int) -> None:
        self.tr = tr
        self.key = key
        self.version = version


class Pause:
    """What a waiting operation yields to sleep until ``future`` (a watch; None: none)
    is ready or ``seconds`` pass (None: no limit); the driver sends back whether the
    future became ready, and, if it did not, is done with it."""

    __slots__ = ("future", "seconds")

    def __init__(self, future: Any, seconds: Optional[float]) -> None:
        self.future = future
        self.seconds = seconds


class Clock(Protocol):
    """Where a structure reads the time: microseconds, agreed by every client."""

    def __call__(self, tr: Any) -> int: ...


def database_clock(tr: Any) -> int:
    """The transaction's read version: ~1,000,000 per second, the same for all clients.

    Client clocks may be skewed; read versions come from the cluster.  During a
    recovery versions can jump ahead, which makes leases expire early (never late).
    Operations read it through :func:`reading` (or ``Attempt.now``), without
    blocking; a custom clock is a plain function, called as it is.
    """
    version: int = tr.get_read_version().wait()
    return version


def reading(tr: Any, clock: Clock) -> Gen[int]:
    """``clock(tr)`` as an operation: the read version is waited for, not blocked on."""
    if clock is database_clock:
        return cast(int, (yield from ready(tr.get_read_version())))
    return clock(tr)


class Deadline:
    """A ``time.monotonic()`` deadline, or none (wait forever)."""

    __slots__ = ("at",)

    def __init__(self, timeout: Optional[float]) -> None:
        self.at = None if timeout is None else time.monotonic() + timeout

    def passed(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at

    def limit(self, seconds: Optional[float]) -> Optional[float]:
        """``seconds``, cut to what is left before the deadline (None: no limit)."""
        if self.at is None:
            return seconds
        remaining = max(0.0, self.at - time.monotonic())
        return remaining if seconds is None else min(seconds, remaining)


# -- waiting operations ---------------------------------------------------------------


def wait_for_wake(db: Any, wake: Wake, deadline: Deadline) -> Gen[bool]:
    """True if ``wake.ready(tr, *wake.args)`` holds now; else wait until it may have
    become true, or until ``deadline``, and return False.

    If not ready, a watch is set on the wake key (which every push touches) in the
    same transaction, which writes nothing: a push that commits after the check
    changes the key after the watch's read version, so the watch fires and no
    wake-up is lost.  A watch that fails instead of firing (too many watches, a
    timeout) would otherwise return at once, again and again: then it waits out a
    short backoff.
    """
    impl = fdb_impl()
    tr = db.create_transaction()
    while True:
        try:
            is_ready, hint = yield from wake.ready(tr, *wake.args)
            if is_ready:
                return True
            version = yield from ready(tr.get_read_version())
            watch = yield Watch(tr, wake.key, version)
            yield from ready(tr.commit())
            break
        except impl.FDBError as e:
            yield from ready(tr.on_error(e))
    timeout = deadline.limit(hint)
    if wake.hooks.on_block is not None:
        wake.hooks.on_block(timeout)
    if (yield Pause(watch, timeout)):
        try:
            watch.wait()
        except impl.FDBError:
            backoff = WATCH_FAILURE_BACKOFF
            yield Pause(None, backoff if timeout is None else min(timeout, backoff))
    elif hint is not None and not deadline.passed():
        yield from tick(db, wake.key)
    return False


def tick(db: Any, key: bytes) -> Gen[None]:
    """Move the cluster's clock to now: commit a transaction that writes nothing but
    a write conflict range on ``key`` (no value changes, so no watch fires).

    Read versions only advance with commits: on an idle cluster they stand still for
    up to about two seconds (its empty commit batches), so a waiter that slept until
    a due time (a delay, a lease's end, a rate window) would read a clock that has not
    reached it yet, and sleep again.  One commit per such wake-up; none for a wake-up
    by a watch or at the caller's timeout.
    """
    impl = fdb_impl()
    tr = db.create_transaction()
    while True:
        try:
            tr.add_write_conflict_key(key)
            yield from ready(tr.commit())
            return
        except impl.FDBError as e:
            yield from ready(tr.on_error(e))


def wait_until_ready(db: Any, timeout: Any, wake: Wake) -> Gen[bool]:
    """Wait until ``wake.ready`` holds (True) or ``timeout`` seconds pass (False).

    Raises:
        TypeError or ValueError: bad ``timeout``; ``db`` is not a Database or Tenant.
    """
    deadline = Deadline(check_timeout(timeout))
    check_database(db)
    while not (yield from wait_for_wake(db, wake, deadline)):
        if deadline.passed():
            return False
    return True


def take_or_wait(
    db: Any,
    timeout: Any,
    take: Callable[..., Gen[T]],
    take_args: Tuple[Any, ...],
    wake: Wake,
) -> Gen[T]:
    """``take(db, *take_args)`` until it returns something or ``timeout`` passes.

    Between tries, waits in :func:`wait_for_wake`.  Returns None at the timeout.

    Raises:
        TypeError or ValueError: bad ``timeout``; ``db`` is not a Database or Tenant.
    """
    deadline = Deadline(check_timeout(timeout))
    check_database(db)
    while True:
        got = yield from take(db, *take_args)
        if got is not None or deadline.passed():
            return got
        yield from wait_for_wake(db, wake, deadline)


# -- the blocking driver ------------------------------------------------------------------


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


def drive(call: Gen[T], interrupt: Optional[Interrupt] = None) -> T:
    """Run ``call`` to its end, blocking on each future it waits for (the sync API).

    A KeyboardInterrupt that arrives while it blocks is raised inside the call,
    where it waited, so the call settles a commit in flight (see ``_run.run``).
    With ``interrupt``, setting it ends the call's pauses: :class:`Interrupted` is
    raised inside the call where it paused (no commit is in flight there).
    """
    send: Any = None
    throw: Optional[BaseException] = None
    while True:
        try:
            step = call.send(send) if throw is None else call.throw(throw)
        except StopIteration as stop:
            return cast(T, stop.value)
        send, throw = None, None
        try:
            if isinstance(step, Pause):
                send = wait_ready(step.future, step.seconds, interrupt)
            elif isinstance(step, Watch):
                send = step.tr.watch(step.key)
            else:
                step.block_until_ready()
        except BaseException as e:
            throw = e


def wait_ready(future: Any, timeout: Optional[float],
               interrupt: Optional[Interrupt] = None) -> bool:
    """Block until ``future`` is ready or ``timeout`` seconds pass; True if ready (a
    future not ready by then is cancelled; None: just sleep).

    The future's outcome (a value or an error) is not inspected: callers use this for
    watches, where any outcome means "look again".

    Raises:
        Interrupted: ``interrupt`` was set (the future, if any, is cancelled).
    """
    if future is not None and future.is_ready():
        return True
    if future is None and not timeout:  # nothing to wait for
        return False
    event = threading.Event()
    if future is not None:
        future.on_ready(_Setter(event))
    try:
        if interrupt is not None:
            interrupt.pause(event, timeout)
        elif future is None:
            if timeout:
                time.sleep(timeout)
        else:
            event.wait(timeout)
    except Interrupted:
        if future is not None:
            future.cancel()
        raise
    if event.is_set():
        return True
    if future is not None:
        future.cancel()
    return False


class _Setter:
    """A future's callback that sets an event."""

    __slots__ = ("event",)

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, _future: Any) -> None:
        self.event.set()
