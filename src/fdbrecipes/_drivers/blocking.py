"""The blocking driver: an operation run to its end in the calling thread (the sync API).

The library's operations are generators that yield the FoundationDB futures they need
(see :data:`.._fdb.Gen`); :func:`drive` blocks on each, where its twin in
:mod:`.awaiting` awaits it.  Waiting operations also yield :class:`.._waiting.Watch`
and :class:`.._waiting.Pause` steps.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Optional, Set, Tuple, TypeVar, cast

from .._fdb import Gen
from .._waiting import Pause, Watch

__all__ = ["Interrupt", "Interrupted", "drive", "wait_ready"]

T = TypeVar("T")


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
    where it waited, so the call settles a commit in flight (see ``_retry.run``).
    With ``interrupt``, setting it ends the call's pauses: ``Interrupted`` is
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
                send = wait_ready(step.futures, step.seconds, interrupt)
            elif isinstance(step, Watch):
                send = step.tr.watch(step.key)
            else:
                step.block_until_ready()
        except BaseException as e:
            throw = e


def wait_ready(futures: Tuple[Any, ...], timeout: Optional[float],
               interrupt: Optional[Interrupt] = None) -> bool:
    """Block until one of ``futures`` is ready or ``timeout`` seconds pass; True if one
    is (those not ready then are cancelled; none: just sleep).

    The futures' outcomes (a value or an error) are not inspected: callers use this
    for watches, where any outcome means "look again".

    Raises:
        Interrupted: ``interrupt`` was set (the futures are cancelled).
    """
    if any(future.is_ready() for future in futures):
        return True
    if not futures and not timeout:  # nothing to wait for
        return False
    event = threading.Event()
    for future in futures:
        future.on_ready(_Setter(event))
    try:
        if interrupt is not None:
            interrupt.pause(event, timeout)
        elif not futures:
            if timeout:
                time.sleep(timeout)
        else:
            event.wait(timeout)
    except Interrupted:
        cancel_unready(futures)
        raise
    cancel_unready(futures)
    return event.is_set()


def cancel_unready(futures: Tuple[Any, ...]) -> None:
    """Cancel those of ``futures`` not ready yet."""
    for future in futures:
        if not future.is_ready():
            future.cancel()


class _Setter:
    """A future's callback that sets an event."""

    __slots__ = ("event",)

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, _future: Any) -> None:
        self.event.set()
