"""How one request of the dashboard reads: within a deadline.

A :class:`Reads` is made per request.  Each read runs in a transaction that is never
committed (:func:`fdbrecipes.admin.commands.read_only`: retried on retryable errors,
``transaction_too_old`` among them), and each such transaction is given what is left
of the request's deadline as its own timeout (``tr.options.set_timeout``, which
retries do not reset): however the cluster is loaded, a page's reads end within the
deadline, with :class:`TooSlow` when they could not finish (the page answers 503).
The Database's own options are left as they are.  Importing this module needs neither
Starlette nor ``libfdb_c``.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Optional, TypeVar

from ..admin.commands import TIMED_OUT, read_only

__all__ = ["DEADLINE", "Reads", "TooSlow", "fdb_error_code"]

T = TypeVar("T")

#: Seconds a request's reads may take in all, by default.
DEADLINE = 10.0


def fdb_error_code(error: BaseException) -> Optional[int]:
    """The code of a FoundationDB error, or None when ``error`` is none."""
    impl = sys.modules.get("fdb.impl")
    if impl is None or not isinstance(error, impl.FDBError):
        return None
    code: int = error.code
    return code


class TooSlow(Exception):
    """The request's reads did not finish within its deadline."""


class Reads:
    """The reads of one request on ``db``, all within ``seconds`` from now (None: no
    deadline of the dashboard's; the Database's transaction timeout, if any, then
    bounds each read)."""

    __slots__ = ("db", "seconds", "until")

    def __init__(self, db: Any, seconds: Optional[float] = DEADLINE) -> None:
        self.db = db
        self.seconds = seconds
        self.until = None if seconds is None else time.monotonic() + seconds

    def __call__(self, op: Callable[..., T], *args: Any) -> T:
        """``op(transaction, *args)`` in a transaction that is never committed, retried
        until it succeeds or the deadline passes.

        Raises:
            TooSlow: the deadline passed (before or during the read).
        """
        if self.until is None:
            return read_only(self.db, op, *args)
        left = self.until - time.monotonic()
        if left <= 0:
            raise TooSlow(self.said())
        try:
            return read_only(self.db, op, *args, timeout=left)
        except Exception as e:
            if fdb_error_code(e) == TIMED_OUT:
                raise TooSlow(self.said()) from None
            raise

    def said(self) -> str:
        """What the page says when the deadline passed."""
        return (f"the cluster did not answer this page's reads within {self.seconds:g} s "
                "(it is busy, or unreachable); try again")
