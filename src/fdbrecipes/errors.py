"""The library's exceptions."""

from __future__ import annotations

__all__ = ["FdbRecipesError", "LeaseExpiredError"]


class FdbRecipesError(Exception):
    """Base class of the library's own errors."""


class LeaseExpiredError(FdbRecipesError):
    """A lease was used after it expired, or after its item was taken back.

    Once a lease's deadline has passed, its item may already have been delivered to
    another consumer, so ``ack`` and ``extend`` refuse it.
    """
