"""The two ordered structures' operations objects, by what their items carry.

:class:`QueueOps` (a Queue's values) and :class:`PriorityQueueOps` (values with
priorities) check their pushes and make the push request every other call of the
:class:`.ordered.OrderedOps` base they share runs (see that module's docstring).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Tuple

from .._ordered.requests import PushRequest
from .._values import V, check_id, check_pairs, materialize
from .checks import check_priority
from .ordered import OrderedOps

__all__ = ["PriorityQueueOps", "QueueOps"]


class QueueOps(OrderedOps[V]):
    """A Queue's operations (see the module docstring)."""

    group_len = 0
    kind = "queue"

    def request(self, value: V, id_: Any, delay: Any, time_limit: Any = None,
                unique: Any = None, sequence: Any = None,
                limit_keys: Any = None) -> PushRequest:
        """The checked push of one value."""
        return self.pushes.request([((), self.values.encoded(value))], check_id(id_), delay,
                                   "value", time_limit, unique, sequence, limit_keys)

    def requests(self, values: Iterable[V], delay: Any, time_limit: Any = None,
                 limit_keys: Any = None) -> PushRequest:
        """The checked push of every value of ``values``, in order."""
        batch = [((), self.values.encoded(v, f"values[{i}]"))
                 for i, v in enumerate(materialize(values, "values"))]
        return self.pushes.request(batch, None, delay, "values", time_limit,
                                   limit_keys=limit_keys)

    def job_request(self, value: Any, id_: Optional[bytes], delay: Optional[float],
                    where: Mapping[str, Any], time_limit: Optional[float] = None,
                    limit_keys: Any = None) -> PushRequest:
        if where:
            raise TypeError(f"a Queue takes no {', '.join(sorted(where))}")
        return self.request(value, id_, delay, time_limit, limit_keys=limit_keys)


class PriorityQueueOps(OrderedOps[V]):
    """A PriorityQueue's operations (see the module docstring)."""

    group_len = 1
    kind = "priority-queue"

    def request(self, value: V, priority: Any, id_: Any, delay: Any,
                time_limit: Any = None, unique: Any = None,
                sequence: Any = None, limit_keys: Any = None) -> PushRequest:
        """The checked push of one value with ``priority``."""
        group = check_priority(priority)
        return self.pushes.request([(group, self.values.encoded(value))], check_id(id_), delay,
                                   "value", time_limit, unique, sequence, limit_keys)

    def requests(self, items: Iterable[Tuple[V, int]], delay: Any,
                 time_limit: Any = None, limit_keys: Any = None) -> PushRequest:
        """The checked push of every ``(value, priority)`` pair of ``items``."""
        batch = [(group, value) for value, group in check_pairs(
            items, "priority", check_priority, self.values.encoded)]
        return self.pushes.request(batch, None, delay, "items", time_limit,
                                   limit_keys=limit_keys)

    def job_request(self, value: Any, id_: Optional[bytes], delay: Optional[float],
                    where: Mapping[str, Any], time_limit: Optional[float] = None,
                    limit_keys: Any = None) -> PushRequest:
        unknown = set(where) - {"priority"}
        if unknown:
            raise TypeError(f"a PriorityQueue takes no {', '.join(sorted(unknown))}")
        return self.request(value, where.get("priority", 0), id_, delay, time_limit,
                            limit_keys=limit_keys)
