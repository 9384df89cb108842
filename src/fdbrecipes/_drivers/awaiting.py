"""The awaiting driver: FoundationDB futures awaited from an asyncio event loop.

The library's operations are generators that yield the futures they need (see
``fdbrecipes._attempt`` and ``fdbrecipes._waiting``); :func:`drive` runs one on the
running loop, awaiting each future instead of blocking on it, so a waiting call holds
no thread.  Its twin, beside it, is :mod:`.blocking`.

* :func:`ready` turns a FoundationDB future into an awaitable: the future's callback
  (run on FoundationDB's network thread) wakes the loop with
  ``call_soon_threadsafe``; a future already ready costs nothing.
* Cancellation (``task.cancel()``, ``asyncio.timeout``, ``wait_for``) is thrown into
  the call where it waits, as :class:`fdbrecipes._attempt.Cancelled`: before a commit
  is sent the call stops having written nothing; with a commit in flight it settles it,
  gives back what a landed pop or claim took, and only then raises
  ``CancelledError``.  Further cancellations meanwhile are absorbed: settling runs to
  its end.
* Waiters of one event loop share one watch per database and wake key
  (:class:`Watches`): 1,000 waiting tasks hold one watch, not 1,000.  They take in
  turns (:mod:`.turns`): a push that wakes them all does not set 1,000 takes
  conflicting with each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from typing import Any, Dict, Optional, Tuple, TypeVar, cast

from .._attempt import Cancelled
from .._fdb import Gen, is_range, range_of
from .._waiting import Pause, Take, Watch
from .turns import Lines

__all__ = ["Watches", "drive", "ready", "wait"]

T = TypeVar("T")


class _Wake:
    """A FoundationDB future's callback: wake ``waiter`` on its loop (from the
    network thread).  A loop closed meanwhile is left alone."""

    __slots__ = ("loop", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None]) -> None:
        self.loop = loop
        self.waiter = waiter

    def __call__(self, _future: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            self.loop.call_soon_threadsafe(_resolve, self.waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def ready(future: Any) -> asyncio.Future[None]:
    """An asyncio future done when the FoundationDB ``future`` is ready (already done
    if it is).  Its value or error is the FoundationDB future's to give."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    if future.is_ready():
        waiter.set_result(None)
    else:
        future.on_ready(_Wake(loop, waiter))
    return waiter


async def wait(future: Any) -> Any:
    """Await any FoundationDB future (a read, a commit, a watch) or range read (what
    ``tr.get_range`` returns, with its limit, direction and streaming mode) without
    blocking the event loop; what its ``wait()`` returns (a range read: its list of
    KeyValues, every batch awaited), or its error.

    Example::

        value = await aio.wait(tr.get(b"key"))
        kvs = await aio.wait(tr.get_range(b"a", b"b", limit=10, reverse=True))
    """
    if is_range(future):
        return await drive(range_of(future).read())
    if not future.is_ready():
        await ready(future)
    return future.wait()


class SharedWatch:
    """One watch of a key, set by one waiter at read version ``version`` and awaited
    by every waiter of the loop that checked at or after that version."""

    __slots__ = ("fired", "future", "key", "users", "version")

    def __init__(self, key: Tuple[Any, bytes], future: Any, version: int) -> None:
        self.key = key
        self.future = future
        self.version = version
        self.fired = ready(future)
        self.users = 0

    def wait(self) -> Any:
        """What the watch's ``wait()`` gives (its error, if it failed)."""
        return self.future.wait()

    def is_ready(self) -> bool:
        """Whether the watch fired (or failed)."""
        return bool(self.future.is_ready())

    def gone(self) -> bool:
        """Whether it fired, failed or was cancelled (the loop may not know yet)."""
        return self.fired.done() or self.is_ready()


class Watches:
    """The watches the waiters of one event loop share, by (database, wake key).

    A waiter whose readiness check read at version ``v`` may wait on a watch set at
    ``v`` or earlier: that one fires on any change after its own version, so no later
    than a watch of ``v`` would.  A waiter whose check is older than the live watch
    gets none (it looks again); only when there is no live watch does a waiter set
    one, which becomes the live one.  A watch nobody waits on any more is
    cancelled."""

    def __init__(self) -> None:
        self.live: Dict[Tuple[Any, bytes], SharedWatch] = {}

    def watch(self, step: Watch) -> Optional[SharedWatch]:
        """The live watch for ``step`` if set early enough, a new one (the live one
        now) if there is none, or None (the live one is newer than its check)."""
        key = (step.tr.db, step.key)
        shared = self.live.get(key)
        if shared is not None and not shared.gone():
            return shared if shared.version <= step.version else None
        shared = self.live[key] = SharedWatch(key, step.tr.watch(step.key), step.version)
        return shared

    async def pause(self, watches: Tuple[SharedWatch, ...], seconds: Optional[float]) -> bool:
        """Wait until one of ``watches`` fires or ``seconds`` pass; True if one fired."""
        for watch in watches:
            watch.users += 1
        try:
            done, _ = await asyncio.wait({w.fired for w in watches}, timeout=seconds,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            for watch in watches:
                watch.users -= 1
                if not watch.users and not watch.fired.done():
                    self.drop(watch)
        for watch in watches:
            if watch.fired.done():
                self.drop(watch)
        return bool(done)

    def drop(self, watch: SharedWatch) -> None:
        """Forget ``watch`` (and cancel it, unless it fired): a waiter that got it
        and had not paused on it yet sees it cancelled, and looks again."""
        if self.live.get(watch.key) is watch:
            del self.live[watch.key]
        if not watch.fired.done():
            watch.future.cancel()
            watch.fired.cancel()


class Shared:
    """What the waiters of one event loop share: their watches and their turns to
    take."""

    __slots__ = ("lines", "watches")

    def __init__(self) -> None:
        self.watches = Watches()
        self.lines = Lines()


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Shared] = \
    weakref.WeakKeyDictionary()


def shared() -> Shared:
    """What the waiters of the running loop share."""
    loop = asyncio.get_running_loop()
    found = _SHARED.get(loop)
    if found is None:
        found = _SHARED[loop] = Shared()
    return found


def watches() -> Watches:
    """The shared watches of the running loop."""
    return shared().watches


async def _pause(step: Pause) -> bool:
    """Sleep as ``step`` asks: until one of its (shared) watches fires or its time is
    up."""
    if not step.futures:
        if step.seconds:
            await asyncio.sleep(step.seconds)
        return False
    return await watches().pause(cast(Tuple[SharedWatch, ...], step.futures), step.seconds)


async def _take(step: Take) -> Any:
    """Run ``step``'s take in its turn (see :mod:`.turns`); None if its turn did not
    come within ``step.seconds``, or a take before it took nothing."""
    lines = shared().lines
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    turn, now = lines.join(step.db, step.keys, waiter)
    try:
        if not now:
            await asyncio.wait({waiter}, timeout=step.seconds)
            if not lines.holds(turn):
                return None
        if lines.stale(turn):
            return None
        got = await drive(step.call)
        lines.took(turn, got is None)
        return got
    finally:
        after = lines.leave(turn)
        if after is not None and not after.done():
            after.set_result(None)


async def drive(call: Gen[T]) -> T:
    """Run ``call`` to its end on the running loop, awaiting each future it waits for.

    Raises:
        asyncio.CancelledError: the task was cancelled; a commit that was in flight
            was settled first (and what a landed pop or claim took, given back).
    """
    send: Any = None
    throw: Optional[BaseException] = None
    cancelled: Optional[BaseException] = None
    while True:
        try:
            step = call.send(send) if throw is None else call.throw(throw)
        except StopIteration as stop:
            if cancelled is not None:
                raise cancelled from None
            return cast(T, stop.value)
        except Cancelled:
            assert cancelled is not None
            raise cancelled from None
        send, throw = None, None
        kind = type(step)  # by type, not isinstance: most steps are futures
        try:
            if kind is Pause:
                send = await _pause(step)
            elif kind is Watch:
                send = watches().watch(step)
            elif kind is Take:
                send = await _take(step)
            elif not step.is_ready():
                await ready(step)
        except asyncio.CancelledError as e:
            if cancelled is None:  # the first: the call stops, or settles
                cancelled = e
                throw = Cancelled()
        except Exception as e:  # a take's error, raised where the call took
            throw = e
