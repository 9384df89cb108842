"""Heartbeats for async code: a claimed item's lease kept alive by a task.

The async twin of :mod:`fdbrecipes._heartbeat`: :func:`kept_alive` backs the async
structures' ``claimed`` (and ``claimed_min`` / ``claimed_max``); its
:class:`Heartbeat` extends the lease about every third of its length while the
``async with`` block runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, TypeVar

from .._drivers.awaiting import drive
from .._fdb import Gen
from .._heartbeat import LOST
from .._ordered.leases import Lease
from ..errors import LeaseExpiredError

__all__ = ["Heartbeat", "kept_alive"]

L = TypeVar("L", bound=Lease[Any])


class Heartbeat:
    """A task extending one lease every ``seconds / 3`` until stopped.

    Attributes:
        lost: the lease expired before an extension reached it (the loop stalled past
            the deadline): the item may be with another consumer now.
        error: the last error an extension raised, if any (it keeps trying).
    """

    def __init__(self, extend: Callable[[Any, Lease[Any], float], Awaitable[Lease[Any]]], db: Any,
                 lease: Lease[Any], seconds: float) -> None:
        self._extend = extend
        self._db = db
        self._lease = lease
        self._seconds = seconds
        self.lost = False
        self.error: Optional[BaseException] = None
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._seconds / 3)
            try:
                await self._extend(self._db, self._lease, self._seconds)
            except LeaseExpiredError:
                self.lost = True
                return
            except Exception as e:  # a passing failure: the next beat tries again
                self.error = e

    async def stop(self) -> None:
        """Stop beating (an extension in flight is settled first)."""
        self._task.cancel()
        await asyncio.wait({self._task})  # the caller's own cancellation still reaches it


@contextlib.asynccontextmanager
async def kept_alive(structure: Any, db: Any, claim: Gen[Optional[L]], seconds: float,
                  release_delay: Optional[float]) -> AsyncIterator[Optional[L]]:
    """The async twin of :func:`fdbrecipes._heartbeat.kept_alive`: the lease the operation
    ``claim`` takes (or None), kept alive by a :class:`Heartbeat` task; acked on a
    normal exit, released when the block raises.

    Raises:
        LeaseExpiredError: the block ended normally but the lease was lost meanwhile.
    """
    lease = await drive(claim)
    if lease is None:
        yield None
        return
    beat = Heartbeat(structure.extend, db, lease, seconds)
    try:
        yield lease
    except BaseException:
        await beat.stop()
        if not beat.lost:
            with contextlib.suppress(Exception):
                await structure.release(db, lease, delay=release_delay)
        raise
    await beat.stop()
    if beat.lost:
        raise LeaseExpiredError(LOST)
    await structure.ack(db, lease)
