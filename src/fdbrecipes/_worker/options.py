"""A worker's options, checked once (:class:`WorkerOptions`).

``fdbrecipes.Worker``, ``fdbrecipes.aio.AsyncWorker`` and ``fdbrecipes worker`` take
the same options; each checks them here (:meth:`WorkerOptions.check`), and every
:class:`.core.WorkerCore` they make (one per structure of an app) shares the frozen
result.  What depends on the structure served (an ``end`` it has, the schedules' ids
it remembers long enough) is checked by the core, against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from .._ops.checks import check_end
from .._ordered.front import MAX, MIN
from .._values import check_int, check_seconds
from ..jobs import Backoff, EventSink
from ..schedule import Schedule
from .ahead import check_prefetch

__all__ = ["WorkerOptions", "check_shutdown_timeout"]


@dataclass(frozen=True)
class WorkerOptions:
    """The options of :class:`fdbrecipes.Worker`, checked (see its arguments): made by
    :meth:`check`.

    Attributes:
        prefetch: the jobs held claimed beyond the free slots at most (the default
            resolved: see :func:`.ahead.check_prefetch`).
        schedules, schedule_store: as given; :func:`.._schedules.firing.firing_of`
            checks them against the structures served.
    """

    concurrency: int
    lease_seconds: float
    backoff: Backoff
    shutdown_timeout: float
    on_event: Optional[EventSink]
    end: str
    schedules: Sequence[Schedule]
    time_limit: Optional[float]
    name: Optional[str]
    prefetch: int
    schedule_store: Any

    @classmethod
    def check(cls, *, concurrency: Any, lease_seconds: Any, backoff: Any,
              shutdown_timeout: Any, on_event: Any, end: Any, schedules: Any,
              time_limit: Any, name: Any, prefetch: Any,
              schedule_store: Any) -> WorkerOptions:
        """The options given, checked (``end``: "min" or "max", whichever structure).

        Raises:
            TypeError or ValueError: a bad option, named.
        """
        check_int(concurrency, "concurrency", low=1, high=10_000)
        lease = check_seconds(lease_seconds, "lease_seconds")
        if backoff is not None and not isinstance(backoff, Backoff):
            raise TypeError(f"backoff must be a Backoff, not {type(backoff).__name__}")
        timeout = check_shutdown_timeout(shutdown_timeout)
        if on_event is not None and not callable(on_event):
            raise TypeError("on_event must be callable or None")
        limit = None if time_limit is None else check_seconds(time_limit, "time_limit")
        most = check_prefetch(prefetch, concurrency)
        if name is not None and not (isinstance(name, str) and 0 < len(name) <= 200):
            raise TypeError(f"name must be a str of 1 to 200 characters, not {name!r}")
        if end != MAX:  # "max": the structure decides (see WorkerCore)
            check_end(end, 0)
        return cls(concurrency, lease, backoff or Backoff(), timeout, on_event,
                   MIN if end == MIN else MAX, schedules, limit, name, most, schedule_store)


def check_shutdown_timeout(seconds: Any) -> float:
    """``shutdown_timeout``, checked: seconds >= 0 (0: no wait for running handlers).

    Raises:
        ValueError: otherwise (a bool or a str too).
    """
    if not (isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
            and 0 <= seconds < 1e9):
        raise ValueError(f"shutdown_timeout must be seconds >= 0, got {seconds!r}")
    return float(seconds)
