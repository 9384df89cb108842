"""Heartbeats: a claimed item's lease kept alive while the work runs.

:func:`kept_alive` backs ``Queue.claimed``, ``PriorityQueue.claimed_min`` /
``claimed_max`` and ``FairQueue.claimed``: it claims (waiting like ``claim_wait``),
extends the lease from a background thread about every third of its length, acks when
the block ends normally and releases when it raises.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, Optional, TypeVar

from ._drivers.blocking import drive
from ._fdb import Gen
from ._ordered.leases import Lease
from .errors import LeaseExpiredError

__all__ = ["LOST", "Heartbeat", "kept_alive"]

L = TypeVar("L", bound=Lease[Any])

#: Why a block that ended normally raises: its lease was lost meanwhile.
LOST = ("the lease expired while the block ran (the process stalled past its deadline); "
        "the item may have been delivered to another consumer")


class Heartbeat(threading.Thread):
    """A daemon thread extending one lease every ``interval`` seconds until stopped.

    Attributes:
        lost: the lease expired before an extension reached it (the process stalled
            past the deadline): the item may be with another consumer now.
        error: the last error an extension raised, if any (it keeps trying).
    """

    def __init__(self, extend: Callable[[Any, Lease[Any], float], Lease[Any]], db: Any,
                 lease: Lease[Any], seconds: float) -> None:
        super().__init__(name="fdbrecipes-heartbeat", daemon=True)
        self._extend = extend
        self._db = db
        self._lease = lease
        self._seconds = seconds
        self._stopped = threading.Event()
        self.lost = False
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        while not self._stopped.wait(self._seconds / 3):
            try:
                self._extend(self._db, self._lease, self._seconds)
            except LeaseExpiredError:
                self.lost = True
                return
            except Exception as e:  # a passing failure: the next beat tries again
                self.error = e

    def stop(self) -> None:
        """Stop beating and wait for the thread (an extension in flight finishes)."""
        self._stopped.set()
        self.join()


@contextlib.contextmanager
def kept_alive(
    structure: Any,
    db: Any,
    claim: Gen[Optional[L]],
    seconds: float,
    release_delay: Any,
) -> Iterator[Optional[L]]:
    """Yield the lease the operation ``claim`` takes (or None), kept alive by a
    :class:`Heartbeat` extending it by ``seconds`` at a time.

    On a normal exit the item is acked; if the block raises, it is released (after
    ``release_delay``; best effort: if that fails too, the lease simply expires) and
    the exception propagates.

    Raises:
        LeaseExpiredError: the block ended normally but the lease was lost meanwhile.
    """
    lease = drive(claim)
    if lease is None:
        yield None
        return
    beat = Heartbeat(structure.extend, db, lease, seconds)
    beat.start()
    try:
        yield lease
    except BaseException:
        beat.stop()
        if not beat.lost:
            with contextlib.suppress(Exception):
                structure.release(db, lease, delay=release_delay)
        raise
    beat.stop()
    if beat.lost:
        raise LeaseExpiredError(LOST)
    structure.ack(db, lease)
