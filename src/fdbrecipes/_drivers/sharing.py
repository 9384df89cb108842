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
waits); a request the operation refuses in the transaction (a unique key held, with
``on_conflict="raise"``) fails its own call alone, as a result of its own.  A shared
transaction that raises having written nothing, for a reason that may be one call's
(see :func:`each_alone`), fails none of its calls: each runs again alone, in its own
thread and transaction, and gets its own result or error.  A call waits for a turn at
most :data:`TURN_DEADLINE` seconds, then runs alone: transactions in flight that do not
end hold no other call.  A call given a
Transaction never waits here: it is part of its caller's transaction.

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
from .._receipts import InterruptedCall, Outcome, UnknownResultError
from .blocking import drive

__all__ = ["MOST_BYTES", "MOST_REQUESTS", "Sharing", "each_alone"]

R = TypeVar("R")  # a request
X = TypeVar("X")  # its result

#: Calls one shared transaction takes at most.
MOST_REQUESTS = 256
#: Bytes of writes one shared transaction takes at most (of FoundationDB's 10 MB).
MOST_BYTES = 2_000_000
#: Shared transactions of one structure and database in flight at once.
IN_FLIGHT = 2
#: Seconds a call waits for a turn: past them, still not on its way, it leaves the line
#: and runs alone (transactions in flight that do not end, a cluster unreachable say,
#: hold no other call past this).
TURN_DEADLINE = 5.0
#: FoundationDB's timeouts (timed_out, transaction_timed_out): the database's, never
#: one call's doing, so a shared transaction ending in one is not run again call by call.
TIMEOUTS = (1004, 1031)


def each_alone(error: BaseException) -> bool:
    """Whether the calls of a shared transaction that raised ``error`` are each to
    run again alone, in a transaction of its own.

    Yes when the transaction wrote nothing and one call may be the cause: the retry
    loop raises only once any doubt is settled, so every ``Exception`` it raises means
    no attempt committed, except :class:`fdbrecipes.UnknownResultError` (it may have:
    running its calls again could store them twice).  Not for Ctrl-C, a cancellation
    or a timeout (:data:`TIMEOUTS`), which are no call's doing.
    """
    if not isinstance(error, Exception) or isinstance(error, UnknownResultError):
        return False
    return getattr(error, "code", None) not in TIMEOUTS


class _Call(Generic[R, X]):
    """One call: its request and size, then its result or error, whether its thread
    is to run the next transaction (``lead``) or to run it alone after its shared
    transaction failed (``alone``: see :func:`each_alone`), and, for a call that
    waits, the event that wakes it (a call running its own transaction at once needs
    none)."""

    __slots__ = ("alone", "done", "error", "lead", "request", "result", "sent", "size",
                 "woken")

    def __init__(self, request: R, size: int) -> None:
        self.request, self.size = request, size
        self.woken: Optional[threading.Event] = None
        self.lead = self.sent = self.done = self.alone = False
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
            Whatever the shared transaction raised when its calls do not run again
            alone (each of its calls raises it: see :func:`each_alone`), what this
            request's own transaction raised when they do, or the exception the
            operation returned for this request.
        """
        with self.lock:
            line = self.lines.get(db)
            if line is None:
                line = self.lines[db] = _Line()
            alone = line.running < IN_FLIGHT and not line.waiting  # a turn, nobody waits
            if alone:
                line.running += 1
            else:
                call: _Call[R, X] = _Call(request, size)
                line.waiting.append(call)
                if line.running >= IN_FLIGHT:
                    call.woken = threading.Event()
                else:
                    line.running += 1
                    call.lead = True
        if alone:
            return self.run_first(db, line, request)
        try:
            if not call.lead:
                self.wait(line, call)
            if not call.done and not call.alone:  # this thread runs the next transaction
                self.send(db, line)
        except BaseException:
            self.leave(line, call)
            raise
        if call.alone:
            return self.run_alone(db, call)
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[return-value]  # an X, set by send

    def run_first(self, db: Any, line: _Line[R, X], request: R) -> X:
        """Run ``request`` alone, in a transaction of its own, with the turn this
        thread took (nobody was waiting: a thread alone pays a lock, nothing more);
        its result, the turn handed on after it.

        Raises:
            What its transaction raised, or the exception the operation returned for
            its request.
        """
        try:
            [result] = drive(self.run(db, [request]))
        finally:
            with self.lock:
                self.hand_on(line)
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[no-any-return]  # an X, as send's

    def wait(self, line: _Line[R, X], call: _Call[R, X]) -> None:
        """Wait until ``call`` is done, or its thread is to run the next transaction,
        or to run it alone (also once it waited :data:`TURN_DEADLINE` seconds for a
        turn without being on its way)."""
        assert call.woken is not None  # made for every call that waits
        try:
            if not call.woken.wait(TURN_DEADLINE):
                with self.lock:
                    late = not call.sent
                    if late:  # still waiting for a turn: it runs alone
                        self.take_out(line, call)
                if late:
                    call.alone = True
                    return
                call.woken.wait()  # on its way: its outcome
        except KeyboardInterrupt:
            with self.lock:
                if not call.sent:  # not on its way: leave (see :meth:`leave`)
                    raise
            call.woken.wait()  # on its way: its outcome, then say it
            if call.alone:  # its shared transaction wrote nothing: it stops here
                raise
            if call.error is not None:
                raise call.error from None
            raise InterruptedCall(Outcome(True, call.result)) from None

    def run_alone(self, db: Any, call: _Call[R, X]) -> X:
        """Run ``call`` in a transaction of its own (its shared one wrote nothing:
        see :func:`each_alone`); its result.

        Raises:
            What its transaction raised, or the exception the operation returned for
            its request.
        """
        [result] = drive(self.run(db, [call.request]))
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[no-any-return]  # an X, as send's

    def leave(self, line: _Line[R, X], call: _Call[R, X]) -> None:
        """Take ``call``, interrupted, out of ``line`` if it is not on its way, and
        hand on the turn it was given."""
        with self.lock:
            self.take_out(line, call)

    def take_out(self, line: _Line[R, X], call: _Call[R, X]) -> None:
        """:meth:`leave`, the lock held."""
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
            alone = len(batch) > 1 and each_alone(e)
            for call in batch:
                if alone:
                    call.alone = True
                else:
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
