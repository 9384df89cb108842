"""The library's exceptions."""

from __future__ import annotations

from typing import Any, List

__all__ = ["FdbRecipesError", "IncompleteBatchError", "LeaseExpiredError", "WorkTooLargeError"]


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


class IncompleteBatchError(FdbRecipesError):
    """A batch call given a Database (``pop_many``, ``claim_many``,
    ``WeightTree.pop_many``...) stopped after some of its transactions had committed.

    What those transactions took is yours, here, not lost: ``result`` holds it, in
    order (the values popped, the leases claimed).  The error that stopped the call
    is ``__cause__``; the transaction it stopped did not commit, or, if that error is
    an :class:`~fdbrecipes.UnknownResultError`, may have (``__cause__.settle(db)``
    finds out, and returns what it took).  Ctrl-C raises
    :class:`~fdbrecipes.InterruptedCall` instead, whose ``outcome.result`` holds
    everything the call took.

    Attributes:
        result: what the committed transactions returned, in order.
    """

    def __init__(self, result: List[Any]) -> None:
        super().__init__(f"the batch stopped after {len(result):,} results; they are in "
                         "this error's result (see __cause__ for why it stopped)")
        self.result = result
