"""Waiting: the clock, watches and wake keys.

Time is the cluster's: a transaction's read version, about 1,000,000 per second and
the same for every client.  Blocking calls wait on a FoundationDB watch of a wake key
that every push touches, set in a transaction that writes nothing (a watch adds a
read conflict on its key), so a push from any process wakes them.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, NamedTuple, Optional, Protocol, Tuple, TypeVar

from ._fdb import check_database, fdb_impl
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
        ready: ``ready(tr, *args)``, the readiness check, read-only.
        args: its arguments after the transaction.
        hooks: the structure's testing hooks.
    """

    key: bytes
    ready: Callable[..., Readiness]
    args: Tuple[Any, ...]
    hooks: Hooks


class Clock(Protocol):
    """Where a structure reads the time: microseconds, agreed by every client."""

    def __call__(self, tr: Any) -> int: ...


def database_clock(tr: Any) -> int:
    """The transaction's read version: ~1,000,000 per second, the same for all clients.

    Client clocks may be skewed; read versions come from the cluster.  During a
    recovery versions can jump ahead, which makes leases expire early (never late).
    """
    version: int = tr.get_read_version().wait()
    return version


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


def wait_ready(future: Any, timeout: Optional[float]) -> bool:
    """Block until ``future`` is ready or ``timeout`` seconds pass; True if ready.

    The future's outcome (a value or an error) is not inspected: callers use this for
    watches, where any outcome means "look again".
    """
    if future.is_ready():
        return True
    event = threading.Event()
    future.on_ready(_Setter(event))
    return event.wait(timeout)


class _Setter:
    """A future's callback that sets an event."""

    __slots__ = ("event",)

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, _future: Any) -> None:
        self.event.set()


def wait_on_watch(watch: Any, timeout: Optional[float], hooks: Hooks) -> None:
    """Block until ``watch`` fires or ``timeout`` seconds pass (None: no limit).

    A watch that fails instead of firing (too many watches, a cancelled transaction)
    would otherwise return at once, again and again: then wait out a short backoff.
    """
    if hooks.on_block is not None:
        hooks.on_block(timeout)
    if not wait_ready(watch, timeout):
        watch.cancel()
        return
    try:
        watch.wait()
    except fdb_impl().FDBError:
        backoff = WATCH_FAILURE_BACKOFF
        time.sleep(backoff if timeout is None else min(timeout, backoff))


def wait_for_wake(db: Any, wake: Wake, deadline: Deadline) -> bool:
    """True if ``wake.ready(tr, *wake.args)`` holds now; else block until it may have
    become true, or until ``deadline``, and return False.

    If not ready, a watch is set on the wake key (which every push touches) in the
    same transaction, which writes nothing: a push that commits after the check
    changes the key after the watch's read version, so the watch fires and no
    wake-up is lost.
    """
    impl = fdb_impl()
    tr = db.create_transaction()
    while True:
        try:
            is_ready, hint = wake.ready(tr, *wake.args)
            if is_ready:
                return True
            watch = tr.watch(wake.key)
            tr.commit().wait()
            break
        except impl.FDBError as e:
            tr.on_error(e).wait()
    wait_on_watch(watch, deadline.limit(hint), wake.hooks)
    return False


def wait_until_ready(db: Any, timeout: Any, wake: Wake) -> bool:
    """Block until ``wake.ready`` holds (True) or ``timeout`` seconds pass (False).

    Raises:
        TypeError/ValueError: bad ``timeout``; ``db`` is not a Database or Tenant.
    """
    deadline = Deadline(check_timeout(timeout))
    check_database(db)
    while not wait_for_wake(db, wake, deadline):
        if deadline.passed():
            return False
    return True


def take_or_wait(
    db: Any,
    timeout: Any,
    take: Callable[..., T],
    take_args: Tuple[Any, ...],
    wake: Wake,
) -> T:
    """``take(db, *take_args)`` until it returns something or ``timeout`` passes.

    Between tries, blocks in :func:`wait_for_wake`.  Returns None at the timeout.

    Raises:
        TypeError/ValueError: bad ``timeout``; ``db`` is not a Database or Tenant.
    """
    deadline = Deadline(check_timeout(timeout))
    check_database(db)
    while True:
        got = take(db, *take_args)
        if got is not None or deadline.passed():
            return got
        wait_for_wake(db, wake, deadline)
