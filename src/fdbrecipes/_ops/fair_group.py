"""One group of a FairQueue seen as a queue: :class:`GroupOps`, for the tools that look
into one queue at a time (the operator commands, the dashboard), which make one with
the fair-queue kind's ``group_queue(structure, group)`` (see :mod:`fdbrecipes._kinds`).
A view over :class:`~.fair.FairOps`: it imports that module, never the other way."""

from __future__ import annotations

from typing import Any, List, Optional

from .._fair.parts import check_group
from .._fdb import Gen, Transactor
from .._ordered.counts import QueueStats
from .._ordered.dead import DeadLetter
from .._ordered.front import MIN
from .._ordered.listing import DelayedItem, LeaseInfo
from .._ordered.paging import PendingItem, Row
from .._retry import read
from .._values import Value
from .checks import check_end
from .fair import FairOps

__all__ = ["GroupOps"]


class GroupOps:
    """One group of a FairQueue seen as a queue: the calls of
    :class:`fdbrecipes.protocol.Inspectable`, each that of the FairQueue's operations
    with this group (what the operator commands use for ``--group``).

    Raises:
        TypeError or ValueError: ``group`` is not a group (a short str or bytes).
    """

    def __init__(self, fair: FairOps, group: Any) -> None:
        self.fair = fair
        self.group = check_group(group)
        self.subspace = fair.engine.keys.groups[group]
        self.wake_key = fair.wake_key
        self.max_deliveries = fair.max_deliveries

    def __repr__(self) -> str:
        return f"GroupOps({self.fair.subspace!r}, {self.group!r})"

    def stats(self, tr: Transactor) -> Gen[QueueStats]:
        """The group's :class:`fdbrecipes.QueueStats`."""
        return self.fair.guarded(tr, read(tr, self.fair.engine.group(self.group).engine.stats))

    def items(self, tr: Transactor, limit: Any = None, end: Any = MIN) -> Gen[List[Value]]:
        check_end(end, 0)
        return self.fair.items(tr, self.group, limit)

    def pending(self, tr: Transactor, limit: Any = None, end: Any = MIN,
                after: Any = None) -> Gen[List[PendingItem]]:
        check_end(end, 0)
        return self.fair.pending(tr, self.group, limit, after)

    def leases(self, tr: Transactor, limit: Any = None,
               after: Any = None) -> Gen[List[LeaseInfo]]:
        return self.fair.leases(tr, self.group, limit, after)

    def delayed(self, tr: Transactor, limit: Any = None,
                after: Any = None) -> Gen[List[DelayedItem]]:
        return self.fair.delayed(tr, self.group, limit, after)

    def dead(self, tr: Transactor, limit: Any = None,
             after: Any = None) -> Gen[List[DeadLetter]]:
        return self.fair.dead(tr, self.group, limit, after)

    def requeue_dead(self, tr: Transactor, limit: Any = None, tokens: Any = None) -> Gen[int]:
        return self.fair.requeue_dead(tr, self.group, limit, tokens)

    def purge_dead(self, tr: Transactor, tokens: Any = None) -> Gen[int]:
        return self.fair.purge_dead(tr, self.group, tokens)

    def remove(self, tr: Transactor, id_: Any) -> Gen[Optional[Value]]:
        return self.fair.remove(tr, self.group, id_)

    def remove_many(self, tr: Transactor, tokens: Any) -> Gen[List[Optional[Value]]]:
        return self.fair.remove_many(tr, self.group, tokens)

    def lookup(self, tr: Transactor, token: Any) -> Gen[Optional[Row]]:
        return self.fair.lookup(tr, self.group, token)

    def push_job(self, tr: Transactor, value: Any, *, id: Optional[bytes] = None,
                 delay: Optional[float] = None, time_limit: Optional[float] = None,
                 limit_keys: Any = None, **where: Any) -> Gen[Optional[bytes]]:
        if where:
            raise TypeError(f"a FairQueue group takes no {', '.join(sorted(where))}")
        return self.fair.push_job(tr, value, id=id, delay=delay, time_limit=time_limit,
                                  limit_keys=limit_keys, group=self.group)
