"""Heartbeats for async code: a claimed item's lease kept alive by a task.

The async twin of ``fdbrecipes._heartbeat.Heartbeat``: it extends the lease about
every third of its length while the ``async with`` block runs.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Optional

from .._leases import Lease
from ..errors import LeaseExpiredError

__all__ = ["Heartbeat"]


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
