"""What every structure's operations object has: its subspace, retry loop and hooks.

A structure's *operations object* (``Queue(...).ops``, see :mod:`fdbrecipes.protocol`)
holds its configuration and its engine, checks the arguments of every call, and
returns operations (generators, see :mod:`._operation`).  The sync class drives them
with the blocking driver, the async class awaits them (:mod:`._drivers`); neither
holds anything of the other.  This base holds what every operations object needs to
run a call: the subspace, the retry loop with its counters and receipts
(:class:`._retry.RetryLoop`) and the testing hooks.
"""

from __future__ import annotations

from typing import Any, Optional

from fdb.subspace_impl import Subspace

from ._hooks import Hooks
from ._retry import RetryLoop, RetryStats
from ._values import check_int, check_seconds

__all__ = ["JobOps", "Ops"]


class Ops:
    """The base of every operations object.

    Attributes:
        subspace: the subspace holding every key of the structure.
        loop: the retry loop of the calls given a Database (retry counters, receipts).
        hooks: the testing hooks (see :mod:`fdbrecipes.testing.hooks`).
    """

    def __init__(self, subspace: Subspace) -> None:
        self.subspace = subspace
        self.loop = RetryLoop(subspace)
        self.hooks = Hooks()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.subspace!r})"

    @property
    def retry_stats(self) -> RetryStats:
        """Retry counters of the loops this object ran (calls given a Database)."""
        return self.loop.stats


class JobOps(Ops):
    """The base of the operations objects whose items are jobs (those of Queue,
    PriorityQueue and FairQueue).

    Attributes:
        id_retention: seconds an idempotency id is remembered after its item left.
        max_deliveries: deliveries after which a lease that ends without ack makes its
            item a dead letter (None: never).
    """

    def __init__(self, subspace: Subspace, id_retention: Any,
                 max_deliveries: Any) -> None:
        if max_deliveries is not None:
            check_int(max_deliveries, "max_deliveries", low=1)
        self.id_retention = check_seconds(id_retention, "id_retention")
        self.max_deliveries: Optional[int] = max_deliveries
        super().__init__(subspace)
