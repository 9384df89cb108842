"""Daemon threads for a worker's sync handlers.

Unlike a ThreadPoolExecutor's threads, they do not hold the process at exit: a
handler that never returns (its job given back when the worker stopped, or abandoned
at its time limit) cannot keep a stopped worker's process alive.  A thread whose call
is abandoned is replaced at once, so ``n`` threads stay free for new calls; the
abandoned one ends when its call returns, if ever.

:class:`Completions` hands the calls' results to the event loop awaiting them: one
wake-up of the loop for all the calls that returned since the last one, not one each
(as ``asyncio.wrap_future`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from concurrent.futures import Future
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

__all__ = ["Completions", "HandlerThreads"]

#: A call for :class:`HandlerThreads`: its future, the function, its arguments.
_Call = Tuple["Future[Any]", Callable[..., Any], Tuple[Any, ...]]


class HandlerThreads:
    """``n`` daemon threads running the calls submitted, in order."""

    def __init__(self, n: int) -> None:
        self._calls: queue.SimpleQueue[Optional[_Call]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._serving: Dict[Future[Any], int] = {}  # a running call's future: its thread
        self._abandoned: Set[int] = set()  # threads that end once their call returns
        self._started = 0
        self._live = 0
        for _ in range(n):
            self._spawn()

    def _spawn(self) -> None:
        with self._lock:
            name = f"fdbrecipes-job-{self._started}"
            self._started += 1
            self._live += 1
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` on a free thread; its future (cancellable until then)."""
        future: Future[Any] = Future()
        self._calls.put((future, fn, args))
        return future

    def abandon(self, future: Future[Any]) -> None:
        """Give up on the call of ``future``: if it runs, its thread ends when it returns
        (its result is dropped) and a new thread takes its place now; if it did not
        start, it never will."""
        if future.cancel():
            return
        with self._lock:
            thread = self._serving.pop(future, None)
            if thread is None:  # it returned meanwhile
                return
            self._abandoned.add(thread)
            self._live -= 1
        self._spawn()

    def shutdown(self) -> None:
        """Let each thread end once it is free (a blocked one never is)."""
        with self._lock:
            live = self._live
        for _ in range(live):
            self._calls.put(None)

    def _serve(self) -> None:
        me = threading.get_ident()
        while True:
            call = self._calls.get()
            if call is None:
                return
            future, fn, args = call
            with self._lock:  # before it runs: abandon() always finds a running call
                self._serving[future] = me
            if not future.set_running_or_notify_cancel():
                with self._lock:
                    self._serving.pop(future, None)
                continue
            try:
                result = fn(*args)
            except BaseException as e:
                future.set_exception(e)
            else:
                future.set_result(result)
            with self._lock:
                self._serving.pop(future, None)
                if me in self._abandoned:
                    self._abandoned.discard(me)
                    return


class Completions:
    """The results of thread futures, handed to asyncio futures of ``loop`` in
    batches: a call returning while the loop has not yet taken the previous ones
    costs no wake-up of its own."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._done: List[Tuple[Future[Any], asyncio.Future[Any]]] = []

    def wrap(self, future: Future[Any]) -> asyncio.Future[Any]:
        """An asyncio future of the loop with ``future``'s outcome once it has one;
        cancelling it cancels ``future`` (if its call has not started)."""
        awaited: asyncio.Future[Any] = self._loop.create_future()
        awaited.add_done_callback(partial(_cancel_source, future))
        future.add_done_callback(partial(self._returned, awaited))
        return awaited

    def _returned(self, awaited: asyncio.Future[Any], future: Future[Any]) -> None:
        """(In the thread that set ``future``'s outcome.)"""
        with self._lock:
            self._done.append((future, awaited))
            first = len(self._done) == 1
        if first:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits
                self._loop.call_soon_threadsafe(self._hand_over)

    def _hand_over(self) -> None:
        """(In the loop.)  Resolve the futures of every call returned so far."""
        with self._lock:
            done, self._done = self._done, []
        for future, awaited in done:
            if awaited.done():
                continue
            if future.cancelled():
                awaited.cancel()
                continue
            error = future.exception()
            if error is not None:
                awaited.set_exception(error)
            else:
                awaited.set_result(future.result())


def _cancel_source(future: Future[Any], awaited: asyncio.Future[Any]) -> None:
    """Cancel ``future`` when the asyncio future awaiting it was cancelled."""
    if awaited.cancelled():
        future.cancel()
