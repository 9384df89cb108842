"""How a call runs: in the caller's transaction, or in the library's own retry loop.

Every public method takes ``tr`` first and hands its work to one of:

* :meth:`Loop.__call__` for calls that write: given a Transaction, the operation runs
  once inside it and the caller commits; given a Database or Tenant, it runs in a
  retry loop whose commits carry a receipt (:mod:`._receipts`), so
  ``commit_unknown_result`` neither doubles nor loses work.
* :func:`read` for calls that only read (they also accept ``tr.snapshot``).

Operations are plain methods called with their arguments (``loop(tr, engine.pop,
end, 1)``), never lambdas, so every call can be followed by a reader or a tool.
A writing operation's first two parameters are the transaction and an
:class:`Attempt`; a reading operation's first is the transaction.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence, TypeVar, cast

from fdb.subspace_impl import Subspace

from ._fdb import NOT_COMMITTED, Transactor, check_transactor, fdb_impl, is_transaction
from ._receipts import Call, Receipts

__all__ = ["Attempt", "Loop", "Stats", "read"]

T = TypeVar("T")


class Stats:
    """Counters a structure keeps about its own retry loops (for benchmarks, metrics).

    Attributes:
        retries: transactions that failed and were retried (conflicts and other
            retryable errors) in loops the structure runs itself, that is, in calls
            given a Database.  Updated without a lock: exact with one thread per
            structure object, approximate otherwise.
        last_conflict: ``time.monotonic()`` of the latest conflict (1020) among them.
    """

    __slots__ = ("last_conflict", "retries")

    def __init__(self) -> None:
        self.retries = 0
        self.last_conflict = float("-inf")


class Attempt:
    """What an operation tells the loop about one attempt.

    Attributes:
        idle: the attempt wrote nothing (an empty pop, a refused release), so its
            commit needs no receipt.  Operations set it; it starts False.
    """

    __slots__ = ("idle",)

    def __init__(self) -> None:
        self.idle = False


class Loop:
    """A structure's retry loop for calls that write: retries counted in
    :attr:`stats`, ``commit_unknown_result`` settled by :attr:`receipts`."""

    __slots__ = ("receipts", "stats")

    def __init__(self, subspace: Subspace) -> None:
        self.stats = Stats()
        self.receipts = Receipts(subspace)

    def __call__(self, tr: Transactor, op: Callable[..., T], *args: Any) -> T:
        """``op(transaction, attempt, *args)`` in ``tr`` or in a loop with receipts."""
        return run(tr, op, args, stats=self.stats, receipts=self.receipts)

    def idempotent(self, tr: Transactor, op: Callable[..., T], *args: Any) -> T:
        """As calling the loop, without a receipt: for operations that may commit
        twice without harm (a range clear)."""
        return run(tr, op, args, stats=self.stats)


def read(tr: Transactor, op: Callable[..., T], *args: Any) -> T:
    """``op(transaction, *args)`` for an operation that only reads.

    Given a Transaction or a snapshot view, it runs there; given a Database or
    Tenant, in a transaction of its own, retried on retryable errors (it commits
    nothing).
    """
    return cast(T, run(tr, _reading, (op, *args), writes=False))


def _reading(tr: Any, _attempt: Attempt, op: Callable[..., T], *args: Any) -> T:
    return op(tr, *args)


def run(
    tr: Transactor,
    op: Callable[..., T],
    args: Sequence[Any],
    *,
    writes: bool = True,
    stats: Optional[Stats] = None,
    receipts: Optional[Receipts] = None,
) -> T:
    """Run ``op(transaction, attempt, *args)`` in the caller's transaction or a loop.

    Given a Transaction, the operation runs once inside it and nothing is committed
    (the caller owns the transaction).  Given a Database or Tenant, it runs in a new
    transaction which is committed; retryable errors retry as ``@fdb.transactional``
    does, except that with ``receipts`` a ``commit_unknown_result`` is settled
    exactly: the call returns the result of the attempt that committed, and no
    attempt's work is done twice.  Read-only calls (``writes=False``) also accept a
    snapshot view (``tr.snapshot``).

    Raises:
        TypeError: ``tr`` is neither a Transaction nor a Database/Tenant.
    """
    if is_transaction(tr, writes=writes):
        return op(tr, Attempt(), *args)
    check_transactor(tr)
    impl = fdb_impl()
    transaction = tr.create_transaction()
    call = Call(receipts) if receipts is not None else None
    committed = False
    try:
        while True:
            attempt = Attempt()
            signed = False
            try:
                if call is not None:
                    done, result = call.settled(transaction)
                    if done:
                        return cast(T, result)
                result = op(transaction, attempt, *args)
                if call is not None and (call.doubt or not attempt.idle):
                    # (after a doubtful attempt even an idle one signs: its write of
                    # the receipt makes the doubtful one conflict if it lands later)
                    call.sign(transaction)
                    signed = True
                transaction.commit().wait()
                committed = True
                return result
            except impl.FDBError as e:
                if stats is not None:
                    stats.retries += 1
                    if e.code == NOT_COMMITTED:
                        stats.last_conflict = time.monotonic()
                if call is not None and signed:
                    call.failed(result, e.code)
                transaction.on_error(e).wait()
    finally:
        if call is not None:
            call.end(committed)
