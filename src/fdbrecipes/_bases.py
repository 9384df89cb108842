"""The constructors of the public classes, sync and async: each base takes the public
class's arguments and makes the structure's operations object.

``Queue`` and ``AsyncQueue`` (and every other pair) are peers: both inherit their
constructor from a base here, so neither face's module is imported by the other (the
async faces import no sync public module).  What each argument means is documented on
the sync class (``Args:`` of :class:`fdbrecipes.Queue`, :class:`fdbrecipes.WeightTree`,
:class:`fdbrecipes.FairQueue`).  The schedule stores' is
:class:`fdbrecipes._schedules.base.SchedulesBase`, beside their operations.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar, Optional, Sequence, Type, Union

from ._clock import Clock
from ._codec import Codec
from ._face import Face, JobFace
from ._limits.specs import CostOf, KeyOf, LimitUse
from ._ops.fair import FairOps
from ._ops.limits import LimitsOps
from ._ops.ordered import OrderedOps
from ._ops.tree import TreeOps
from ._values import V

__all__ = ["FairBase", "Group", "LimitsBase", "OrderedBase", "TreeBase"]

#: A group's name (of a FairQueue).
Group = Union[str, bytes]


class OrderedBase(JobFace[OrderedOps[V]]):
    """The constructor of Queue, PriorityQueue and their async twins: the arguments
    of :class:`fdbrecipes.Queue`, handed to the operations class of the structure."""

    _ops_class: ClassVar[Type[OrderedOps[Any]]]

    def __init__(
        self,
        subspace: Any,
        *,
        high_contention: bool = False,
        clock: Optional[Clock] = None,
        id_retention: float = 3600.0,
        result_timeout: float = 10.0,
        max_deliveries: Optional[int] = None,
        history: Optional[float] = None,
        shards: int = 1,
        codec: Optional[Codec] = None,
        limits: Union[LimitUse, Sequence[LimitUse], None] = None,
    ) -> None:
        super().__init__(self._ops_class(
            subspace, high_contention=high_contention, clock=clock, id_retention=id_retention,
            result_timeout=result_timeout, max_deliveries=max_deliveries, history=history,
            shards=shards, codec=codec, limits=limits))


class TreeBase(Face[TreeOps]):
    """The constructor of WeightTree and its async twin: the arguments of
    :class:`fdbrecipes.WeightTree`, handed to a :class:`fdbrecipes._ops.tree.TreeOps`."""

    def __init__(
        self,
        subspace: Any,
        *,
        rng: Optional[random.Random] = None,
        id_retention: float = 3600.0,
        clock: Optional[Clock] = None,
        codec: Optional[Codec] = None,
    ) -> None:
        super().__init__(TreeOps(subspace, rng=rng, id_retention=id_retention, clock=clock,
                                 codec=codec))


class FairBase(JobFace[FairOps]):
    """The constructor of FairQueue and its async twin: the arguments of
    :class:`fdbrecipes.FairQueue`, handed to a :class:`fdbrecipes._ops.fair.FairOps`."""

    def __init__(self, subspace: Any, *, default_share: int = 1,
                 default_limit: Optional[int] = None, max_deliveries: Optional[int] = None,
                 id_retention: float = 3600.0, clock: Optional[Clock] = None,
                 history: Optional[float] = None, shards: int = 1,
                 codec: Optional[Codec] = None,
                 limits: Union[LimitUse, Sequence[LimitUse], None] = None) -> None:
        super().__init__(FairOps(subspace, default_share=default_share,
                                 default_limit=default_limit, max_deliveries=max_deliveries,
                                 id_retention=id_retention, clock=clock, history=history,
                                 shards=shards, codec=codec, limits=limits))


class LimitsBase(Face[LimitsOps]):
    """The constructor of Limits and its async twin, and :meth:`use`."""

    def __init__(self, subspace: Any, *, clock: Any = None) -> None:
        super().__init__(LimitsOps(subspace, clock))

    def use(self, name: str, *, key: Optional[KeyOf] = None, cost: CostOf = 1) -> LimitUse:
        """What a structure is given as ``limits=`` (alone, or in a list) for its jobs
        to carry limit ``name`` of this store.  Nothing is read or written.

        Args:
            name: the limit's name (it need not be defined yet: a use of a limit not
                defined does not limit, until it is).
            key: a function of a job's value (as the consumer receives it, decoded)
                giving its key under the limit: a str, bytes, int or tuple of them, or
                None to leave the job out of this limit.  None (the default): one key
                for every job, a global limit.
            cost: what a start weighs against a rate limit: an int >= 1, or a function
                of the value giving one (a cost above the limit's ``n`` counts as
                ``n``).  A concurrency limit counts every job as 1.

        Raises:
            TypeError or ValueError: a bad name, key or cost.
        """
        return self._ops.use(name, key, cost)
