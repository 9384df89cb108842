"""How a call runs an operation: in the caller's transaction, or in a retry loop.

An operation (see :mod:`._attempt`) is handed to one of:

* :meth:`RetryLoop.__call__` for calls that write: given a Transaction, the operation runs
  once inside it and the caller commits; given a Database or Tenant, it runs in a
  retry loop whose commits carry a receipt (:mod:`._receipts`), so
  ``commit_unknown_result`` neither doubles nor loses work.
* :func:`read` for calls that only read (they also accept ``tr.snapshot``).

Operations are plain methods called with their arguments (``loop(tr, engine.pop,
end, 1)``), never lambdas, so every call can be followed by a reader or a tool.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Generic, List, Optional, Sequence, TypeVar, cast

from fdb.subspace_impl import Subspace

from ._attempt import Attempt, Cancelled, Undo, log, logged
from ._fdb import (
    NOT_COMMITTED,
    Gen,
    Transactor,
    check_transactor,
    fdb_impl,
    is_transaction,
    ready,
)
from ._receipts import Call, InterruptedCall, Outcome, Receipts, UnknownResultError
from .errors import IncompleteBatchError, WorkTooLargeError

__all__ = ["Committed", "RetryLoop", "RetryStats", "read", "read_pages", "run", "too_many"]

T = TypeVar("T")

#: FoundationDB's transaction_too_old: the transaction outlived the 5-second limit.
TRANSACTION_TOO_OLD = 1007
#: Attempts in a row that may fail with transaction_too_old before the call gives up.
MAX_TOO_OLD = 5
#: Results one page of a listing reads, in its own transaction, given a Database.
PAGE = 1_000
#: A call that has retried this many times says so (once) on the ``fdbrecipes`` logger.
RETRIES_LOGGED = 20


class RetryStats:
    """Counters a structure keeps about its own retry loops (for benchmarks, metrics).

    Attributes:
        retries: transactions that failed and were retried (conflicts and other
            retryable errors) in loops the structure runs itself, that is, in calls
            given a Database.  Updated without a lock: exact with one thread per
            structure object, approximate otherwise.
        last_conflict: ``time.monotonic()`` of the latest conflict (1020) among them.
        committed_version: the commit version of the latest transaction these loops
            committed with writes (0 before any), and ``committed_at`` its
            ``time.monotonic()``: a version known to be recent.
    """

    __slots__ = ("committed_at", "committed_version", "last_conflict", "retries")

    def __init__(self) -> None:
        self.retries = 0
        self.last_conflict = float("-inf")
        self.committed_version = 0
        self.committed_at = float("-inf")


class Committed(Generic[T]):
    """What a call given a Database returned, the version its transaction committed
    at (0 when it wrote nothing, or when the commit was learnt from its receipt
    rather than seen), and what would undo it (None: nothing to undo)."""

    __slots__ = ("result", "undo", "version")

    def __init__(self, result: T, version: int, undo: Optional[Undo] = None) -> None:
        self.result = result
        self.version = version
        self.undo = undo


class RetryLoop:
    """A structure's retry loop for calls that write: retries counted in
    :attr:`stats`, ``commit_unknown_result`` settled by :attr:`receipts`."""

    __slots__ = ("receipts", "stats")

    def __init__(self, subspace: Subspace) -> None:
        self.stats = RetryStats()
        self.receipts = Receipts(subspace)

    def __call__(self, tr: Transactor, op: Callable[..., Gen[T]], *args: Any) -> Gen[T]:
        """``op(transaction, attempt, *args)`` in ``tr`` or in a loop with receipts."""
        return run(tr, op, args, stats=self.stats, receipts=self.receipts)

    def pinned(self, db: Any, version: int, op: Callable[..., Gen[T]],
               *args: Any) -> Gen[Committed[T]]:
        """As calling the loop given a Database, whose first attempt reads at
        ``version`` (a version known to be recent: no request for one; 0: ask; see
        :attr:`Attempt.pinned`); the result, with the version it committed at."""
        return run_committed(db, op, args, self.stats, self.receipts, version)

    def idempotent(self, tr: Transactor, op: Callable[..., Gen[T]], *args: Any) -> Gen[T]:
        """As calling the loop, without a receipt: for operations that may commit
        twice without harm (a range clear)."""
        return run(tr, op, args, stats=self.stats)

    def counted(self, tr: Transactor, op: Callable[..., Gen[int]], limit: Optional[int],
                most: int, name: str, what: str,
                count: Optional[Callable[..., Gen[int]]] = None) -> Gen[int]:
        """``op(transaction, attempt, k)``, which handles ``k`` things at most and says
        how many, over ``limit`` of them (all when None).

        Given a Transaction, one call of at most ``most``: a larger ``limit`` is refused,
        and so is None when ``count(transaction)`` (if given) finds more than ``most``;
        without ``count``, None means ``most``.  Given a Database or Tenant, calls of
        at most ``most``, each in its own transaction, until ``limit`` are done or one
        handles none.  The total handled.

        Raises:
            ValueError: given a Transaction, more than ``most`` (the message names the
                call ``name`` and what it counts, ``what``).
        """
        if limit == 0:
            check_transactor(tr)
            return 0
        if is_transaction(tr):
            if limit is None:
                if count is not None and (yield from read(tr, count)) > most:
                    raise ValueError(f"{name}: more than {most:,} {what} for one "
                                     "transaction; pass a Database (it splits the work)")
                limit = most
            elif limit > most:
                raise too_many("limit", most, limit, what)
            done: int = yield from self(tr, op, limit)
            return done
        total = 0
        while limit is None or total < limit:
            ask = most if limit is None else min(most, limit - total)
            moved: int = yield from self(tr, op, ask)
            total += moved
            if moved == 0:
                break
        return total

    def batches(self, tr: Transactor, op: Callable[..., Gen[List[T]]], n: int,
                args: Sequence[Any], most: int, batch: int,
                budgeted: bool = False, what: str = "") -> Gen[List[T]]:
        """``op(transaction, attempt, k, *args)`` for ``n`` results in all, in order.

        Given a Transaction, one call with ``k`` = ``n`` (more than ``most`` is
        refused; the message counts them as ``what``, if given).  Given a Database or
        Tenant, calls of at most ``batch``, each in its own transaction with its own
        receipt, until ``n`` are done or a call returns fewer than it was asked for
        (``budgeted``: until one returns none, for an operation that may stop short
        while more remain).  Stopped after some of them committed, it hands over what
        they took (see :func:`incomplete`), or, cancelled, gives it back.

        Raises:
            ValueError: given a Transaction, ``n`` is over ``most``.
        """
        if n == 0:
            check_transactor(tr)
            return []
        if is_transaction(tr):
            if n > most:
                raise too_many("n", most, n, what)
            return (yield from self(tr, op, n, *args))
        out: List[T] = []
        undos: List[Undo] = []
        try:
            while len(out) < n:
                ask = min(batch, n - len(out))
                done = yield from self.pinned(tr, 0, op, ask, *args)
                got = done.result
                out.extend(got)
                if done.undo is not None:
                    undos.append(done.undo)
                if not got or (len(got) < ask and not budgeted):
                    break
        except Cancelled:
            for undo_op, undo_args in undos:
                yield from self(tr, undo_op, *undo_args)
            raise
        except GeneratorExit:
            raise
        except BaseException as e:
            if out:
                raise incomplete(out, e) from e
            raise
        return out


def incomplete(done: List[Any], error: BaseException) -> BaseException:
    """The error a batch raises when ``error`` stopped it after its transactions took
    ``done``: Ctrl-C as :class:`InterruptedCall` whose outcome holds everything
    taken (what the last transaction took too, if it was settled as committed),
    anything else as :class:`IncompleteBatchError` carrying ``done``."""
    if isinstance(error, InterruptedCall):
        outcome = error.outcome
        last = outcome.result if outcome is not None and outcome.committed else []
        return InterruptedCall(Outcome(True, done + last), error.unknown)
    if isinstance(error, KeyboardInterrupt):
        return InterruptedCall(Outcome(True, done))
    return IncompleteBatchError(done)


def too_many(name: str, most: int, got: int, what: str = "") -> ValueError:
    """The error for asking one transaction (a caller's) for ``got`` of something
    (``what``, if given) where at most ``most`` fit: argument ``name``."""
    bound = f"{most:,} {what}".rstrip()
    return ValueError(f"{name}: at most {bound} in one transaction, got {got:,}; "
                      "pass a Database (it splits the work)")


def read(tr: Transactor, op: Callable[..., Gen[T]], *args: Any) -> Gen[T]:
    """``op(transaction, *args)`` for an operation that only reads.

    Given a Transaction or a snapshot view, it runs there; given a Database or
    Tenant, in a transaction of its own, retried on retryable errors (it commits
    nothing).
    """
    return run(tr, op, args, writes=False)


def read_pages(tr: Transactor, op: Callable[..., Gen[List[T]]], args: Sequence[Any],
               limit: Optional[int]) -> Gen[List[T]]:
    """``op(transaction, *args, k, after)``'s first ``limit`` results (all when None),
    in order, for a listing.

    Given a Transaction or a snapshot view, one call with ``k`` = ``limit``.  Given a
    Database or Tenant, pages of :data:`PAGE`, each read in its own transaction (so
    not one snapshot), each after ``after``, the last result of the page before (None
    for the first).
    """
    if limit == 0:
        check_transactor(tr, writes=False)
        return []
    if is_transaction(tr, writes=False):
        return (yield from read(tr, op, *args, limit))
    out: List[T] = []
    after: Optional[T] = None
    while limit is None or len(out) < limit:
        ask = PAGE if limit is None else min(PAGE, limit - len(out))
        page = yield from read(tr, op, *args, ask, after)
        out.extend(page)
        if len(page) < ask:
            break
        after = page[-1]
    return out


def run(
    tr: Transactor,
    op: Callable[..., Gen[T]],
    args: Sequence[Any],
    *,
    writes: bool = True,
    stats: Optional[RetryStats] = None,
    receipts: Optional[Receipts] = None,
) -> Gen[T]:
    """Run ``op(transaction, attempt, *args)`` in the caller's transaction or a loop
    (``op(transaction, *args)`` for a call that only reads: no attempt, no read
    version asked for).

    Given a Transaction, the operation runs once inside it and nothing is committed
    (the caller owns the transaction).  Given a Database or Tenant, it runs in a new
    transaction which is committed; retryable errors retry as ``@fdb.transactional``
    does, except that with ``receipts`` a ``commit_unknown_result`` is settled
    exactly: the call returns the result of the attempt that committed, and no
    attempt's work is done twice.  A call that stops while an attempt is in doubt
    settles first (see :mod:`._receipts`): if that attempt committed, its result is
    returned after all.  Read-only calls (``writes=False``) also accept a snapshot
    view (``tr.snapshot``).

    Raises:
        TypeError: ``tr`` is neither a Transaction nor a Database/Tenant.
        WorkTooLargeError: the operation keeps outliving FoundationDB's 5-second
            transaction limit.
        UnknownResultError: it stopped in doubt and could not settle.
        InterruptedCall: Ctrl-C arrived while a commit was in flight (settled).
        Cancelled: the awaiting driver cancelled the call (settled, and undone).
    """
    if is_transaction(tr, writes=writes):
        if writes:
            attempt = Attempt(tr)
            result = yield from op(tr, attempt, *args)
            yield from attempt.run_later(tr)
            logged(attempt.notes)
            return result
        return (yield from op(tr, *args))
    check_transactor(tr)
    return (yield from Retrying(tr, receipts, stats, writes).run(op, args, 0))


def run_committed(db: Any, op: Callable[..., Gen[T]], args: Sequence[Any],
                  stats: Optional[RetryStats], receipts: Optional[Receipts],
                  version: int, writes: bool = True) -> Gen[Committed[T]]:
    """:func:`run` given a Database or Tenant, whose first attempt reads at
    ``version`` (if not 0); the result with the version it committed at."""
    loop = Retrying(db, receipts, stats, writes)
    result = yield from loop.run(op, args, version)
    return Committed(result, loop.committed, loop.undo)


class Retrying:
    """One call's retry loop, and its state (see :func:`run`): its receipt, if it
    has ``receipts`` (a :class:`.._receipts.Call`)."""

    __slots__ = ("call", "committed", "db", "failures", "impl", "sent", "stats", "too_old",
                 "tr", "undo", "writes")

    def __init__(self, db: Any, receipts: Optional[Receipts], stats: Optional[RetryStats],
                 writes: bool) -> None:
        self.impl = fdb_impl()
        self.writes = writes  # False: the operation only reads; nothing to commit
        self.db = db
        self.tr = db.create_transaction()
        self.call = None if receipts is None else Call(receipts, db)
        self.stats = stats
        self.sent = False  # the current attempt's commit was sent, and signed
        self.too_old = 0  # attempts in a row that failed with transaction_too_old
        self.committed = 0  # the version the attempt that wrote committed at
        self.failures = 0  # attempts that failed
        self.undo: Optional[Undo] = None  # what undoes the attempt that committed

    def run(self, op: Callable[..., Gen[T]], args: Sequence[Any], version: int) -> Gen[T]:
        """``op``'s result, from the attempt that committed (the first at ``version``,
        if not 0).  A call stopping while an attempt is in doubt settles first (see
        :func:`run`): if that attempt committed, its result is returned after all
        (then :attr:`committed` is 0, and :attr:`undo` what undoes it)."""
        call, transaction = self.call, self.tr
        try:
            while True:
                self.sent = False
                try:
                    if not self.writes:
                        return (yield from op(transaction, *args))
                    attempt = Attempt(transaction, version)
                    version = 0  # a retry asks for a new one
                    if call is not None and call.begin(transaction):
                        done, result = yield from call.settled(transaction)
                        if done:
                            return cast(T, result)
                    result = yield from op(transaction, attempt, *args)
                    if attempt.later:
                        yield from attempt.run_later(transaction)
                    signed = call is not None and (call.doubt or not attempt.idle)
                    if call is not None and signed:
                        # (after a doubtful attempt even an idle one signs: its write of
                        # the receipt makes the doubtful one conflict if it lands later)
                        now = yield from attempt.read_version()
                        call.sign(transaction, now, result, attempt.undo)
                        if call.sweeping:
                            yield from call.sweep(transaction, now)
                    self.sent = signed
                    commit = transaction.commit()
                    yield commit
                    commit.wait()
                    if attempt.notes:
                        logged(attempt.notes)
                    if not attempt.idle:
                        self.committed = transaction.get_committed_version()
                        self.undo = attempt.undo
                        if self.stats is not None:
                            self.stats.committed_version = self.committed
                            self.stats.committed_at = time.monotonic()
                    return result
                except self.impl.FDBError as e:
                    self.failed(e)
                    yield from ready(transaction.on_error(e))
        except (UnknownResultError, GeneratorExit):
            raise
        except BaseException as e:
            if call is None or not (call.doubt or self.sent):
                raise
            return (yield from self.settle(call, e))
        finally:
            if call is not None:
                call.end()

    def settle(self, call: Call, e: BaseException) -> Gen[T]:
        """The call stops with ``e`` while an attempt is in doubt: settle it; the
        result of that attempt if it committed (:attr:`committed` 0, :attr:`undo`
        what undoes it), else raise (``e``, or what it means once settled).

        Raises:
            UnknownResultError: settling failed.
            InterruptedCall: ``e`` is Ctrl-C (the outcome settled, or not).
            Cancelled: ``e`` is the awaiting driver's cancellation (what landed undone).
        """
        if self.sent:
            call.failed(None)
        try:
            outcome = yield from call.settle()
        except UnknownResultError as unknown:
            if isinstance(e, KeyboardInterrupt):
                raise InterruptedCall(None, unknown) from e
            raise unknown from e
        if isinstance(e, KeyboardInterrupt):
            raise InterruptedCall(outcome) from e
        if isinstance(e, Cancelled):
            if call.landed_undo is not None:
                undo_op, undo_args = call.landed_undo
                yield from run(self.db, undo_op, undo_args, stats=self.stats,
                               receipts=call.receipts)
            raise e
        if outcome.committed:
            self.committed, self.undo = 0, call.landed_undo
            return cast(T, outcome.result)
        raise e

    def failed(self, e: Any) -> None:
        """Count a failed attempt; note doubt; refuse work that cannot fit in time."""
        self.failures += 1
        if self.failures == RETRIES_LOGGED:
            log.warning("a call has retried %d times (last error %d: %s); it goes on",
                        self.failures, e.code, e.description)
        if self.stats is not None:
            self.stats.retries += 1
            if e.code == NOT_COMMITTED:
                self.stats.last_conflict = time.monotonic()
        if self.call is not None and self.sent:
            self.call.failed(e.code)
        self.sent = False
        self.too_old = self.too_old + 1 if e.code == TRANSACTION_TOO_OLD else 0
        if self.too_old >= MAX_TOO_OLD:
            raise WorkTooLargeError(
                f"an operation failed {MAX_TOO_OLD} times in a row with "
                "transaction_too_old: it cannot finish within FoundationDB's 5-second "
                "transaction limit; split the work") from e
