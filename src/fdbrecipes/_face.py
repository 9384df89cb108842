"""What every public class has, sync or async: the operations object it runs.

``Queue`` and ``AsyncQueue`` (and every other pair) are peers over one kind of
operations object (:mod:`._ops`): each makes one of its own and drives its operations,
the sync class with the blocking driver, the async class with the awaiting one
(:mod:`._drivers`); neither holds anything of the other.  A sync method and its async
twin have the same name, parameters, defaults and docstring: the async class is
decorated with :func:`twin`, which gives each of its methods the docstring of the sync
method of the same name, and a unit test (``tests/unit/test_parity.py``) checks the
rest for every pair.
"""

from __future__ import annotations

import inspect
from typing import Callable, Generic, Optional, TypeVar

from fdb.subspace_impl import Subspace

from ._ops.base import JobOps, Ops
from ._retry import RetryStats

__all__ = ["Face", "JobFace", "twin"]

OpsT = TypeVar("OpsT", bound=Ops)
JobOpsT = TypeVar("JobOpsT", bound=JobOps)
C = TypeVar("C", bound=type)


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


def twin(sync: type, public: Optional[str] = None) -> Callable[[C], C]:
    """A class decorator for the async twin of the class ``sync``: each public method
    without a docstring of its own gets that of the sync method of the same name,
    after a line naming it (as a method of ``fdbrecipes.<public>``: by default the
    sync class's name); a property of its own without one gets the sync property's."""
    owner = public or sync.__name__

    def document(cls: C) -> C:
        for name, found in list(vars(cls).items()):
            theirs = getattr(sync, name, None)
            if isinstance(found, property) and found.__doc__ is None and \
                    isinstance(theirs, property):
                setattr(cls, name, property(found.fget, found.fset, found.fdel,
                                            theirs.__doc__))
        for name, method in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_") or method.__doc__ is not None:
                continue
            original = getattr(sync, name, None)
            if original is None:
                continue
            method.__doc__ = (f"The async twin of :meth:`fdbrecipes.{owner}.{name}`, "
                              "awaited without blocking the event loop.\n\n"
                              + inspect.cleandoc(original.__doc__ or ""))
        return cls
    return document
