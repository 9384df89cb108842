"""Shared transactions for the threads of one process: calls given a Database, in one
commit (the blocking face's twin of :mod:`fdbrecipes.aio._combine`).

A web application's request threads each push one job: alone, each push is one
transaction, and the client spends most of its time per commit.  Here the threads
take turns the way flat combining does.  A call finding fewer than :data:`IN_FLIGHT`
transactions of its kind in flight on that database runs one at once, in its own
thread, with itself alone: a single thread pays a lock, nothing more.  A call finding
that many in flight waits; when one of them ends, the thread that ran it hands the turn
to the first call waiting, which runs every call waiting then (at most
:data:`MOST_REQUESTS` calls or :data:`MOST_BYTES` of writes) in one transaction of the
structure's retry loop, with one receipt: exactly-once per call is kept, as the
transaction commits (or not) for all of them, and a conflict or an unknown result is
settled for all of them together.
Each call returns when that transaction's outcome is settled.  A call's bad input
fails that call alone, before anything is written (it is checked before the call
waits).  A call given a Transaction never waits here: it is part of its caller's
transaction.

Ctrl-C reaching a waiting call (in the main thread) takes it out of the next
transaction if that has not started (nothing of it is written; ``KeyboardInterrupt``);
once its transaction runs, the call waits for the outcome and raises
:class:`fdbrecipes.InterruptedCall` saying whether it committed, as a call alone does.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from typing import Any, Callable, Deque, Generic, List, Optional, Sequence, TypeVar

from .._fdb import Gen
from .._receipts import InterruptedCall, Outcome
from .blocking import drive

__all__ = ["MOST_BYTES", "MOST_REQUESTS", "Sharing"]

R = TypeVar("R")  # a request
X = TypeVar("X")  # its result

#: Calls one shared transaction takes at most.
MOST_REQUESTS = 256
#: Bytes of writes one shared transaction takes at most (of FoundationDB's 10 MB).
MOST_BYTES = 2_000_000
#: Shared transactions of one structure and database in flight at once.
IN_FLIGHT = 2


class _Call(Generic[R, X]):
    """One call: its request and size, then its result or error, whether its thread
    is to run the next transaction (``lead``), and, for a call that waits, the event
    that wakes it (a call running its own transaction at once needs none)."""

    __slots__ = ("done", "error", "lead", "request", "result", "sent", "size", "woken")

    def __init__(self, request: R, size: int) -> None:
        self.request, self.size = request, size
        self.woken: Optional[threading.Event] = None
        self.lead = self.sent = self.done = False
        self.result: Optional[X] = None
        self.error: Optional[BaseException] = None


class _Line(Generic[R, X]):
    """The calls of one database: how many transactions run, and those waiting."""

    __slots__ = ("running", "waiting")

    def __init__(self) -> None:
        self.running = 0
        self.waiting: Deque[_Call[R, X]] = deque()


class Sharing(Generic[R, X]):
    """Calls of one kind on one structure, from the threads of this process, gathered
    per database into shared transactions: ``run(db, requests)`` is an operation of
    the structure's operations object that runs every request in one transaction of
    its retry loop and returns one result per request (or an exception instance for
    a request it refused)."""

    def __init__(self, run: Callable[[Any, List[R]], Gen[Sequence[Any]]]) -> None:
        self.run = run
        self.lock = threading.Lock()
        self.lines: weakref.WeakKeyDictionary[Any, _Line[R, X]] = weakref.WeakKeyDictionary()

    def call(self, db: Any, request: R, size: int) -> X:
        """Run ``request`` (about ``size`` bytes of writes) on ``db`` in the next
        shared transaction (this thread's own, when none is in flight); its result
        once that transaction's outcome is settled.

        Raises:
            Whatever the shared transaction raised (each of its calls raises it), or
            the exception the operation returned for this request.
        """
        call: _Call[R, X] = _Call(request, size)
        with self.lock:
            line = self.lines.get(db)
            if line is None:
                line = self.lines[db] = _Line()
            line.waiting.append(call)
            if line.running >= IN_FLIGHT:
                call.woken = threading.Event()
            else:
                line.running += 1
                call.lead = True
        try:
            if not call.lead:
                self.wait(line, call)
            if not call.done:  # this thread runs the next transaction
                self.send(db, line)
        except BaseException:
            self.leave(line, call)
            raise
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[return-value]  # an X, set by send

    def wait(self, line: _Line[R, X], call: _Call[R, X]) -> None:
        """Wait until ``call`` is done or its thread is to run the next transaction."""
        assert call.woken is not None  # made for every call that waits
        try:
            call.woken.wait()
        except KeyboardInterrupt:
            with self.lock:
                if not call.sent:  # not on its way: leave (see :meth:`leave`)
                    raise
            call.woken.wait()  # on its way: its outcome, then say it
            if call.error is not None:
                raise call.error from None
            raise InterruptedCall(Outcome(True, call.result)) from None

    def leave(self, line: _Line[R, X], call: _Call[R, X]) -> None:
        """Take ``call``, interrupted, out of ``line`` if it is not on its way, and
        hand on the turn it was given."""
        with self.lock:
            if not call.sent and call in line.waiting:
                line.waiting.remove(call)
                if call.lead:
                    self.hand_on(line)

    def send(self, db: Any, line: _Line[R, X]) -> None:
        """Run the calls waiting on ``line`` (this thread's first) in one transaction
        on ``db``; each gets its result, and the turn passes to the first call still
        waiting."""
        batch: List[_Call[R, X]] = []
        try:
            with self.lock:
                size = 0
                while line.waiting and len(batch) < MOST_REQUESTS and (
                        not batch or size + line.waiting[0].size <= MOST_BYTES):
                    call = line.waiting.popleft()
                    call.sent = True
                    batch.append(call)
                    size += call.size
            results = drive(self.run(db, [call.request for call in batch]))
        except BaseException as e:
            for call in batch:
                call.error, call.done = e, True
        else:
            for call, result in zip(batch, results):
                if isinstance(result, BaseException):
                    call.error = result
                else:
                    call.result = result
                call.done = True
        finally:
            with self.lock:
                self.hand_on(line)
            for call in batch:
                if call.woken is not None:
                    call.woken.set()

    def hand_on(self, line: _Line[R, X]) -> None:
        """Give the turn to the first call waiting on ``line``, or end it (the lock
        held)."""
        if line.waiting:  # each waits on its event: the first call has none only while it
            first = line.waiting[0]  # runs the transaction itself, with the turn
            first.lead = True
            assert first.woken is not None
            first.woken.set()
        else:
            line.running -= 1
