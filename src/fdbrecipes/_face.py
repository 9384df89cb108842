"""What every public class has, sync or async: the operations object it runs.

``Queue`` and ``AsyncQueue`` (and every other pair) are peers over one kind of
operations object (:mod:`._ops`): each makes one of its own and drives its operations,
the sync class with the blocking driver, the async class with the awaiting one
(:mod:`._drivers`); neither holds anything of the other, and both take their
constructor from :mod:`._bases`.  A sync method and its async twin have the same name,
parameters and defaults (``tests/unit/test_parity.py`` checks every pair): the async
method is written into its source by ``tools/unasync.py`` from the sync method (its
signature, docstring and code), with the differences that script lists (``--check``
in ``.ci/run``).
"""

from __future__ import annotations

from typing import Generic, Optional, TypeVar

from fdb.subspace_impl import Subspace

from ._ops.base import JobOps, Ops
from ._retry import RetryStats

__all__ = ["Face", "JobFace"]

OpsT = TypeVar("OpsT", bound=Ops)
JobOpsT = TypeVar("JobOpsT", bound=JobOps)


class Face(Generic[OpsT]):
    """The base of the public classes: the operations object, and what it tells."""

    def __init__(self, ops: OpsT) -> None:
        self._ops = ops

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._ops.subspace!r})"

    @property
    def ops(self) -> OpsT:
        """The structure's operations object, which a Worker, a Schedule, the operator
        commands and the metrics use (see :mod:`fdbrecipes.protocol`)."""
        return self._ops

    @property
    def subspace(self) -> Subspace:
        """The subspace holding every key of this structure."""
        return self._ops.subspace

    @property
    def retry_stats(self) -> RetryStats:
        """Retry counters of the loops this object ran (calls given a Database)."""
        return self._ops.retry_stats


class JobFace(Face[JobOpsT]):
    """The base of the classes whose items are jobs (Queue, PriorityQueue, FairQueue and
    their twins): their configuration, as a worker and a schedule read it."""

    @property
    def id_retention(self) -> float:
        """Seconds an idempotency id is remembered after its item left."""
        return self._ops.id_retention

    @property
    def max_deliveries(self) -> Optional[int]:
        """Deliveries after which a lease that ends without ack makes its item a dead
        letter (None: never)."""
        return self._ops.max_deliveries

    @property
    def history(self) -> Optional[float]:
        """How many seconds a finished job's record is kept, or None when the structure
        keeps no job records."""
        return self._ops.history

    @property
    def shards(self) -> int:
        """How many shards the structure's items are spread over, 1 when it is
        unsharded (see docs/scaling.md)."""
        return self._ops.shards

