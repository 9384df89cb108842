"""``aio.transactional``: the async twin of ``@fdb.transactional``."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Awaitable, Callable, TypeVar

from .._drivers.awaiting import wait
from .._fdb import check_transactor, fdb_impl, is_transaction

__all__ = ["transactional"]

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def transactional(func: F) -> F:
    """Make ``async def func(tr, ...)`` run in a transaction, as ``@fdb.transactional``
    does for plain functions.

    Called with a Transaction, it simply awaits ``func`` (the caller commits).  Called
    with a Database or Tenant, it makes a transaction, awaits ``func`` with it, awaits
    the commit, and on a retryable error awaits ``tr.on_error`` and runs ``func``
    again: a retry loop that never blocks the event loop.  As with
    ``@fdb.transactional``, ``func`` may run again after a commit that in fact
    succeeded (``commit_unknown_result``): make its writes idempotent, or use the
    structures' own calls given a Database, which settle it exactly.

    Raises:
        TypeError: at decoration time, if ``func`` is not an ``async def`` function.
    """
    if not inspect.iscoroutinefunction(func):
        raise TypeError(f"aio.transactional decorates an async def function (its first "
                        f"argument the transaction), not {func!r}")

    @functools.wraps(func)
    async def run(tr: Any, *args: Any, **kwargs: Any) -> Any:
        if is_transaction(tr):
            return await func(tr, *args, **kwargs)
        check_transactor(tr)
        impl = fdb_impl()
        transaction = tr.create_transaction()
        while True:
            try:
                result = await func(transaction, *args, **kwargs)
                await wait(transaction.commit())
                return result
            except impl.FDBError as e:
                await wait(transaction.on_error(e))

    return run  # type: ignore[return-value]
