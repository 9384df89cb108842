"""Shared transactions: calls given a Database by tasks of one event loop, in one commit.

An event loop runs many calls at once.  Pushes (and acks) that tasks make within
the same short window, :data:`WINDOW` seconds (or until :data:`MOST_REQUESTS` calls
or :data:`MOST_BYTES` of writes are waiting, whichever comes first), go into one
transaction of the structure's retry loop, with one receipt: exactly-once per call is
kept, as the transaction commits (or not) for all of them, and a conflict or an
unknown result is settled for all of them together.  Each call returns when that
transaction's outcome is settled.  A call's bad input fails that call alone, before
anything is written (it is checked before the call joins a batch); a request the
operation refuses in the transaction fails its own call alone.  A shared transaction
that raises having written nothing, for a reason that may be one call's, fails none of
its calls: each runs again in a transaction of its own, side by side, and gets its own
result or error (the threads' rule, :func:`fdbrecipes._drivers.sharing.each_alone`).
A call given a Transaction never joins one: it is part of its caller's transaction.

A task cancelled while its call waits for the window leaves the batch (nothing of it
is written); cancelled once the batch is on its way, its push (or ack) lands with the
others, and it raises ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Callable, Dict, Generic, List, Optional, Sequence, TypeVar

from .._drivers.awaiting import drive
from .._drivers.sharing import MOST_BYTES, MOST_REQUESTS, each_alone
from .._fdb import Gen

__all__ = ["MOST_BYTES", "MOST_REQUESTS", "WINDOW", "Combiner"]

R = TypeVar("R")  # a request
X = TypeVar("X")  # its result

#: Seconds a shared transaction waits for more calls after the first (its calls and
#: bytes at most: the threads' bounds, :data:`MOST_REQUESTS` and :data:`MOST_BYTES`).
WINDOW = 0.001


class _Pending(Generic[R, X]):
    """The calls waiting for one database's next shared transaction."""

    __slots__ = ("bytes", "requests", "timer", "waiters")

    def __init__(self) -> None:
        self.requests: List[R] = []
        self.waiters: List[asyncio.Future[X]] = []
        self.bytes = 0
        self.timer: Optional[asyncio.TimerHandle] = None


class Combiner(Generic[R, X]):
    """Calls of one kind on one structure, gathered per event loop and database into
    shared transactions: ``run(db, requests)`` is an operation of the structure's
    operations object that runs every request in one transaction of its retry loop
    and returns one result per request (or an exception instance for a request it
    refused)."""

    def __init__(self, run: Callable[[Any, List[R]], Gen[Sequence[Any]]]) -> None:
        self.run = run
        self.pending: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, Dict[Any, _Pending[R, X]]] = weakref.WeakKeyDictionary()

    async def call(self, db: Any, request: R, size: int) -> X:
        """Join the next shared transaction on ``db`` with ``request`` (about ``size``
        bytes of writes); its result once that transaction's outcome is settled.

        Raises:
            Whatever the shared transaction raised when its calls do not run again
            alone (each of its calls raises it: see
            :func:`fdbrecipes._drivers.sharing.each_alone`), what this request's own
            transaction raised when they do, or the exception the operation returned
            for this request.
        """
        event_loop = asyncio.get_running_loop()
        pending = self.pending.setdefault(event_loop, {}).setdefault(db, _Pending())
        waiter: asyncio.Future[X] = event_loop.create_future()
        pending.requests.append(request)
        pending.waiters.append(waiter)
        pending.bytes += size
        if len(pending.requests) >= MOST_REQUESTS or pending.bytes >= MOST_BYTES:
            self.flush(event_loop, db)
        elif pending.timer is None:
            pending.timer = event_loop.call_later(WINDOW, self.flush, event_loop, db)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter in pending.waiters:  # not on its way yet: leave the batch
                at = pending.waiters.index(waiter)
                del pending.waiters[at], pending.requests[at]
            raise

    def flush(self, event_loop: asyncio.AbstractEventLoop, db: Any) -> None:
        """Send what waits for ``db`` now, in a task of its own (a caller's
        cancellation does not stop it)."""
        pending = self.pending[event_loop].pop(db)
        if pending.timer is not None:
            pending.timer.cancel()
        if pending.requests:
            event_loop.create_task(self.send(db, pending.requests, pending.waiters))

    async def send(self, db: Any, requests: List[R], waiters: List[asyncio.Future[X]]) -> None:
        """One shared transaction for ``requests``; each waiter gets its result."""
        try:
            results = await drive(self.run(db, requests))
        except BaseException as e:
            if len(requests) > 1 and each_alone(e):  # it wrote nothing: each alone
                await asyncio.gather(*(self.send(db, [request], [waiter])
                                       for request, waiter in zip(requests, waiters)))
                return
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(e)
            if not isinstance(e, Exception):
                raise
            return
        for waiter, result in zip(waiters, results):
            if waiter.done():
                continue
            if isinstance(result, BaseException):
                waiter.set_exception(result)
            else:
                waiter.set_result(result)
