"""Daemon threads for a worker's sync handlers.

Unlike a ThreadPoolExecutor's threads, they do not hold the process at exit: a
handler that never returns (its job given back when the worker stopped) cannot keep a
stopped worker's process alive.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, Optional, Tuple

__all__ = ["HandlerThreads"]

#: A call for :class:`HandlerThreads`: its future, the function, its arguments.
_Call = Tuple["Future[Any]", Callable[..., Any], Tuple[Any, ...]]


class HandlerThreads:
    """``n`` daemon threads running the calls submitted, in order."""

    def __init__(self, n: int) -> None:
        self._calls: queue.SimpleQueue[Optional[_Call]] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._serve, name=f"fdbrecipes-job-{i}",
                                          daemon=True) for i in range(n)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` on a free thread; its future (cancellable until then)."""
        future: Future[Any] = Future()
        self._calls.put((future, fn, args))
        return future

    def shutdown(self) -> None:
        """Let each thread end once it is free (a blocked one never is)."""
        for _ in self._threads:
            self._calls.put(None)

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            future, fn, args = call
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as e:
                future.set_exception(e)
