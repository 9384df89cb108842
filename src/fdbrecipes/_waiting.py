"""Waiting operations: wait for a structure's items on a watch of its wake key.

Waiting calls wait on a FoundationDB watch of a wake key that every push touches, set
in a transaction that writes nothing (a watch adds a read conflict on its key), so a
push from any process wakes them.  Like every operation they are generators
(:data:`._fdb.Gen`); besides futures they yield a :class:`Watch` (the driver sends
back a watch, or None), a :class:`Pause` (the driver sleeps until a watch fires or
its time is up, and sends back which) and a :class:`Take` (the driver runs the take
in its turn).  The drivers are in :mod:`._drivers`; the waiters of a process (an
event loop's tasks, a process's threads) share two things there:

* One watch per database and wake key: a waiter waits on the live watch when it was
  set at or before the waiter's own check (it fires on any change after its version,
  so no later than one of the waiter's own would); a waiter whose check is older than
  the live watch looks again (a change between the two would be missed by both)
  instead of setting a watch of its own.  So a crowd of waiters holds one of the
  connection's watches (``max_watches``, 10,000 by default), not one each: a watch
  beyond that limit fails with ``too_many_watches``, and a crowd with watches of its
  own (as the threads had) kept the limit full and the rest polling.
* Turns to take, per database and structure: a push wakes every waiter of the crowd
  at once, and a take that reads the front (a strict claim or pop) conflicts with
  every other take that commits first, so 1,000 waiters woken together retried about
  40 times each, spent more than a lease's length (120 s under load) before the last
  of them took, and then took the first items again as their leases ended, while the
  last items pushed stayed unclaimed (issue 43, item 11: it looked like lost
  wake-ups; it was this).  In turns, a process sends one take at a time, in the order
  the waiters came; a take that finds nothing ends the turns of those lined up
  behind it, who look again (read-only checks, side by side) instead.

The bound: a waiter looks again (its readiness check, one round trip of snapshot
reads) as soon as its watch fires, when a hold it knows of is due, when its watch
fails instead of firing (too many watches on the connection, ``too_many_watches``;
then after a back-off of 50 ms doubling to 1 s while the failures go on), and in any
case :data:`LOOK_AGAIN` seconds after it last looked.  So a waiter sees an item that
a push made visible within the watch's latency, within about a second while watches
cannot be set, and within :data:`LOOK_AGAIN` seconds whatever happens to watches;
it takes it in its turn.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple, TypeVar, final

from ._clock import Deadline
from ._fdb import Gen, check_database, fdb_impl, ready
from ._hooks import Hooks
from ._values import check_timeout

__all__ = ["Backoff", "Look", "Pause", "Readiness", "Take", "Wake", "Watch", "take_or_wait", "tick",
           "wait_for_wake", "wait_until_ready"]

T = TypeVar("T")

#: Seconds to back off when a watch fails instead of firing, the first time; each
#: failure in a row doubles it, up to the second number.
WATCH_FAILURE_BACKOFF, MAX_WATCH_FAILURE_BACKOFF = 0.05, 1.0
#: Seconds after which a waiter looks again though nothing woke it: the bound on a
#: wait whatever happens to its watch (a look is one round trip of snapshot reads,
#: and a new watch, shared).
LOOK_AGAIN = 10.0
#: What a watch fails with when its waiters need not back off, but look again at once:
#: ``operation_cancelled`` (the driver cancelled a shared watch its last waiter left
#: while another was about to wait on it) and ``transaction_cancelled`` (the waiter
#: that set a shared watch dropped its transaction before committing it).
CANCELLED_WATCH = frozenset((1101, 1025))

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


@final  # the drivers tell steps apart by type(step) is Watch
class Watch:
    """What a waiting operation yields for a watch of ``key`` in ``tr``, whose reads
    are at ``version``.  The driver sends back the live watch of the key that a
    waiter of the process set at or before ``version`` (it fires no later than one
    set now would), or one it sets now in ``tr`` (then the live one), or None when
    the live watch was set after ``version``: the waiter looks again, at a version
    no older than that watch's, and waits on it then."""

    __slots__ = ("key", "tr", "version")

    def __init__(self, tr: Any, key: bytes, version: int) -> None:
        self.tr = tr
        self.key = key
        self.version = version


@final  # the drivers tell steps apart by type(step) is Pause
class Pause:
    """What a waiting operation yields to sleep until one of ``futures`` (watches; none:
    just sleep) is ready or ``seconds`` pass (None: no limit); the driver sends back
    whether one became ready, and is done with those that did not."""

    __slots__ = ("futures", "seconds")

    def __init__(self, futures: Tuple[Any, ...], seconds: Optional[float]) -> None:
        self.futures = futures
        self.seconds = seconds


@final  # the drivers tell steps apart by type(step) is Take
class Take:
    """What :func:`take_or_wait` yields for one take: the driver runs ``call`` (the
    take, an operation returning None when it takes nothing) in its turn among the
    waiters of the process taking from the same structure (``keys``, its wake keys,
    in database ``db``), one at a time in the order they came, and sends back what it
    returned.  It sends back None without running it when a take that began while
    this one waited for its turn took nothing (the waiter looks again instead), or
    when the turn has not come within ``seconds`` (None: no limit)."""

    __slots__ = ("call", "db", "keys", "seconds")

    def __init__(self, db: Any, keys: Tuple[bytes, ...], call: Gen[Any],
                 seconds: Optional[float]) -> None:
        self.db = db
        self.keys = keys
        self.call = call
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
    same transaction, which writes nothing, or the process's live watch of the key is
    shared (see :class:`Watch`): a push that commits after the check changes its key
    after the watch's read version, so the watch fires and no wake-up is lost.  A
    check older than a live watch is made again.  The wait ends when a watch fires,
    at the check's hint (a hold due), at ``deadline``, or :data:`LOOK_AGAIN` seconds
    on, whichever comes first.  A watch that fails instead of firing (too many
    watches on the connection, a timeout) would otherwise return at once, again and
    again: then it waits out ``backoff`` (see :class:`Backoff`) before returning
    (not for a watch cancelled under it: :data:`CANCELLED_WATCH`).
    """
    backoff = backoff or Backoff()
    impl = fdb_impl()
    look = yield from _look(db.create_transaction(), wake, impl)
    while look.stale:
        look = yield from _look(db.create_transaction(), wake, impl)
    if look.ready:
        return True
    hint = look.hint
    due = hint is not None and hint <= LOOK_AGAIN  # the pause may end at the hint
    timeout = deadline.limit(min(LOOK_AGAIN, LOOK_AGAIN if hint is None else hint))
    if wake.hooks.on_block is not None:
        wake.hooks.on_block(timeout)
    if (yield Pause(look.watches, timeout)):
        try:
            for watch in look.watches:
                if watch.is_ready():
                    watch.wait()
            backoff.reset()
        except impl.FDBError as e:
            if e.code not in CANCELLED_WATCH:
                pause = backoff.failed()
                yield Pause((), deadline.limit(pause))
    elif due and not deadline.passed():
        yield from tick(db, wake.keys[0])
    return False


class Look(NamedTuple):
    """What one look found (see :func:`_look`).

    Attributes:
        ready: the readiness check held.
        hint: if not, the check's hint (seconds until a hold is due, or None).
        watches: if not, the watches to wait on, one per wake key.
        stale: a live watch of a wake key was set after the check: look again.
    """

    ready: bool
    hint: Optional[float] = None
    watches: Tuple[Any, ...] = ()
    stale: bool = False


def _look(tr: Any, wake: Wake, impl: Any) -> Gen[Look]:
    """The readiness check in ``tr``, and, if not ready, the watches of the wake keys
    (see :class:`Watch`), ``tr`` committed: a watch set in it is set then (and may be
    shared meanwhile: a waiter that shares it waits for its firing, or its error)."""
    while True:
        try:
            is_ready, hint = yield from wake.ready(tr, *wake.args)
            if is_ready:
                return Look(True)
            version = yield from ready(tr.get_read_version())
            watches = []
            for key in wake.keys:
                watch = yield Watch(tr, key, version)
                if watch is None:
                    break
                watches.append(watch)
            yield from ready(tr.commit())
            return Look(False, hint, tuple(watches), len(watches) < len(wake.keys))
        except impl.FDBError as e:
            yield from ready(tr.on_error(e))


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

    Each take runs in its turn among the waiters of the process taking from the
    same structure (see :class:`Take`); between tries, waits in
    :func:`wait_for_wake`.  Returns None at the timeout.

    Raises:
        TypeError or ValueError: bad ``timeout``; ``db`` is not a Database or Tenant.
    """
    deadline = Deadline(check_timeout(timeout))
    check_database(db)
    backoff = Backoff()
    while True:
        got: T = yield Take(db, wake.keys, take(db, *take_args), deadline.limit(None))
        if got is not None or deadline.passed():
            return got
        yield from wait_for_wake(db, wake, deadline, backoff)
