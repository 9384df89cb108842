"""Waiting operations: wait for a structure's items on a watch of its wake key.

Waiting calls wait on a FoundationDB watch of a wake key that every push touches, set
in a transaction that writes nothing (a watch adds a read conflict on its key), so a
push from any process wakes them.  Like every operation they are generators
(:data:`._fdb.Gen`); besides futures they yield a :class:`Watch` (the driver sends
back a watch future) or a :class:`Pause` (the driver sleeps until its future is ready
or its time is up, and sends back which).  The drivers are in :mod:`._drivers`: the
waiters of a process share one watch per database and wake key (an event loop's
tasks, a process's threads), so many waiters hold one of the connection's watches
(``max_watches``, 10,000 by default), not one each.

The bound: a waiter looks again (its readiness check, one round trip of snapshot
reads) as soon as its watch fires, when a hold it knows of is due, when its watch
fails instead of firing (too many watches on the connection, ``too_many_watches``;
then after a back-off of 50 ms doubling to 1 s while the failures go on), and in any
case :data:`LOOK_AGAIN` seconds after it last looked.  So a waiter sees an item that
a push made visible within the watch's latency, within about a second while watches
cannot be set, and within :data:`LOOK_AGAIN` seconds whatever happens to watches.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple, TypeVar

from ._clock import Deadline
from ._fdb import Gen, check_database, fdb_impl, ready
from ._hooks import Hooks
from ._values import check_timeout

__all__ = ["Backoff", "Pause", "Readiness", "Wake", "Watch", "take_or_wait", "tick",
           "wait_for_wake", "wait_until_ready"]

T = TypeVar("T")

#: Seconds to back off when a watch fails instead of firing, the first time; each
#: failure in a row doubles it, up to the second number.
WATCH_FAILURE_BACKOFF, MAX_WATCH_FAILURE_BACKOFF = 0.05, 1.0
#: Seconds after which a waiter looks again though nothing woke it: the bound on a
#: wait whatever happens to its watch (a look is one round trip of snapshot reads,
#: and a new watch, shared).
LOOK_AGAIN = 10.0

#: What a readiness check returns: (ready now, seconds until it may become ready
#: without any write, or None).
Readiness = Tuple[bool, Optional[float]]


class Wake(NamedTuple):
    """How a waiter knows when to look again.

    Attributes:
        keys: the wake keys: every write that may make an item visible touches one of
            them (a sharded structure has one per shard; the waiter watches all).
        ready: ``ready(tr, *args)``, the readiness check (an operation), read-only.
        args: its arguments after the transaction.
        hooks: the structure's testing hooks.
    """

    keys: Tuple[bytes, ...]
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
    """What a waiting operation yields to sleep until one of ``futures`` (watches; none:
    just sleep) is ready or ``seconds`` pass (None: no limit); the driver sends back
    whether one became ready, and is done with those that did not."""

    __slots__ = ("futures", "seconds")

    def __init__(self, futures: Tuple[Any, ...], seconds: Optional[float]) -> None:
        self.futures = futures
        self.seconds = seconds


class Backoff:
    """The back-off of one waiting call after its watches failed (see
    :func:`wait_for_wake`): :data:`WATCH_FAILURE_BACKOFF`, doubled at each failure in
    a row up to :data:`MAX_WATCH_FAILURE_BACKOFF`, back to the first after a watch
    that did not fail."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = WATCH_FAILURE_BACKOFF

    def failed(self) -> float:
        """The seconds to wait after a failure (the next one waits twice as long)."""
        seconds = self.seconds
        self.seconds = min(seconds * 2, MAX_WATCH_FAILURE_BACKOFF)
        return seconds

    def reset(self) -> None:
        """A watch did not fail."""
        self.seconds = WATCH_FAILURE_BACKOFF


def wait_for_wake(db: Any, wake: Wake, deadline: Deadline,
                  backoff: Optional[Backoff] = None) -> Gen[bool]:
    """True if ``wake.ready(tr, *wake.args)`` holds now; else wait until it may have
    become true, or until ``deadline``, and return False.

    If not ready, a watch is set on each wake key (every push touches one) in the
    same transaction, which writes nothing: a push that commits after the check
    changes its key after the watches' read version, so a watch fires and no wake-up
    is lost.  The wait ends when a watch fires, at the check's hint (a hold due), at
    ``deadline``, or :data:`LOOK_AGAIN` seconds on, whichever comes first.  A watch
    that fails instead of firing (too many watches on the connection, a timeout)
    would otherwise return at once, again and again: then it waits out ``backoff``
    (see :class:`Backoff`) before returning.
    """
    backoff = backoff or Backoff()
    impl = fdb_impl()
    tr = db.create_transaction()
    while True:
        try:
            is_ready, hint = yield from wake.ready(tr, *wake.args)
            if is_ready:
                return True
            version = yield from ready(tr.get_read_version())
            watches = []
            for key in wake.keys:
                watches.append((yield Watch(tr, key, version)))
            yield from ready(tr.commit())
            break
        except impl.FDBError as e:
            yield from ready(tr.on_error(e))
    due = hint is not None and hint <= LOOK_AGAIN  # the pause may end at the hint
    timeout = deadline.limit(min(LOOK_AGAIN, LOOK_AGAIN if hint is None else hint))
    if wake.hooks.on_block is not None:
        wake.hooks.on_block(timeout)
    if (yield Pause(tuple(watches), timeout)):
        try:
            for watch in watches:
                if watch.is_ready():
                    watch.wait()
            backoff.reset()
        except impl.FDBError:
            pause = backoff.failed()
            yield Pause((), deadline.limit(pause))
    elif due and not deadline.passed():
        yield from tick(db, wake.keys[0])
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
    backoff = Backoff()
    while not (yield from wait_for_wake(db, wake, deadline, backoff)):
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
    backoff = Backoff()
    while True:
        got = yield from take(db, *take_args)
        if got is not None or deadline.passed():
            return got
        yield from wait_for_wake(db, wake, deadline, backoff)
