"""The library's exceptions."""

from __future__ import annotations

__all__ = ["FdbRecipesError", "LeaseExpiredError", "WorkTooLargeError"]


class FdbRecipesError(Exception):
    """Base class of the library's own errors."""


class LeaseExpiredError(FdbRecipesError):
    """A lease was used after it expired, or after its item was taken back.

    Once a lease's deadline has passed, its item may already have been delivered to
    another consumer, so ``ack`` and ``extend`` refuse it.
    """


class WorkTooLargeError(FdbRecipesError):
    """An operation keeps failing because it cannot finish within FoundationDB's
    5-second transaction limit (error 1007, ``transaction_too_old``, several times in
    a row).  Split the work: smaller batches, or pass a Database, which splits batch
    operations into several transactions itself."""
