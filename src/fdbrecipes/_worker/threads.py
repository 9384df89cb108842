"""Daemon threads for a worker's sync handlers.

Unlike a ThreadPoolExecutor's threads, they do not hold the process at exit: a
handler that never returns (its job given back when the worker stopped, or abandoned
at its time limit) cannot keep a stopped worker's process alive.  A thread whose call
is abandoned is replaced at once, so ``n`` threads stay free for new calls; the
abandoned one ends when its call returns, if ever.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, Dict, Optional, Set, Tuple

__all__ = ["HandlerThreads"]

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
