"""The clock: where structures read the time, and deadlines of waits.

Time is the cluster's: a transaction's read version, about 1,000,000 per second and
the same for every client (:func:`database_clock`).  Tests and applications may pass a
clock of their own (:class:`Clock`).
"""

from __future__ import annotations

import time
from typing import Any, Optional, Protocol, cast

from ._fdb import Gen, ready

__all__ = ["Clock", "Deadline", "database_clock", "reading"]


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
