"""What a worker hands its handler, what the handler may answer, and what it reports.

:class:`Job` is one claimed item; a handler returns (the job is acked), raises (it
is retried after :class:`Backoff`'s delay, or becomes a dead letter once the queue's
``max_deliveries`` are used up), raises :class:`Snooze` (back later, no delivery
counted) or :class:`Discard` (to the dead letters now).  A worker reports each job
through ``on_event``: one :class:`JobStarted`, then exactly one :class:`JobFinished`,
and :class:`WorkerStopping` when it begins to shut down.  :func:`decide` decides,
once, what becomes of a finished job: the sync and the async worker share it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from ._ordered.leases import Lease
from ._values import Value, check_reason, check_seconds

__all__ = ["Backoff", "Discard", "Event", "Job", "JobFinished", "JobStarted", "Outcome",
           "Snooze", "WorkerStopping"]

#: How a job ended (``JobFinished.outcome``).
Outcome = str
OK, RETRY, SNOOZE, DEAD, DISCARD, LEASE_LOST = ("ok", "retry", "snooze", "dead", "discard",
                                                "lease_lost")


@dataclass(frozen=True)
class Job:
    """One claimed item, as a handler sees it.

    Attributes:
        value: the item's value.
        deliveries: how many times it has been delivered, this time included.
        lease: the lease it is held under (the worker acks, extends or releases it).
        wait_seconds: how long it waited for a consumer, on the cluster's clock: from
            when it last became visible (pushed, or its delay or previous lease
            ended) to this claim.
    """

    value: Value
    deliveries: int
    lease: Lease
    wait_seconds: float

    @classmethod
    def of(cls, lease: Lease) -> Job:
        """The job a lease stands for."""
        waited = max(0, lease.claimed_at - lease.visible_since) / 1e6
        return cls(lease.value, lease.deliveries, lease, waited)


class Snooze(Exception):
    """Raised by a handler: put the job back for ``seconds``, no delivery counted."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"snooze for {seconds} s")
        self.seconds = check_seconds(seconds, "seconds")


class Discard(Exception):
    """Raised by a handler: move the job to the dead letters now, with ``reason``."""

    def __init__(self, reason: Optional[str] = None) -> None:
        super().__init__(reason or "discarded")
        self.reason = check_reason(reason)


class Backoff:
    """How long a failed job waits before its next delivery: exponential with full
    jitter, uniform in ``[0, min(cap, base * 2**n)]`` after the ``n``-th delivery.

    Args:
        base: seconds of the first window (n = 0).
        cap: the longest window, in seconds.
        jitter: ``"full"`` (the uniform draw above) or ``"none"`` (the window's end).
        rng: where the draws come from (``random.Random(seed)`` makes them
            reproducible); default a new ``random.Random()``.
    """

    def __init__(self, base: float = 1.0, cap: float = 3600.0, jitter: str = "full",
                 rng: Optional[random.Random] = None) -> None:
        self.base = check_seconds(base, "base")
        self.cap = check_seconds(cap, "cap")
        if jitter not in ("full", "none"):
            raise ValueError(f"jitter must be 'full' or 'none', got {jitter!r}")
        if rng is not None and not isinstance(rng, random.Random):
            raise TypeError(f"rng must be a random.Random, not {type(rng).__name__}")
        self.jitter = jitter
        self.rng = rng if rng is not None else random.Random()

    def __repr__(self) -> str:
        return f"Backoff(base={self.base}, cap={self.cap}, jitter={self.jitter!r})"

    def window(self, deliveries: int) -> float:
        """The end of the window after ``deliveries`` deliveries (seconds)."""
        return min(self.cap, self.base * 2.0 ** min(deliveries, 1_000))

    def delay(self, deliveries: int) -> float:
        """Seconds to wait before the next delivery of a job delivered ``deliveries``
        times."""
        end = self.window(deliveries)
        return end if self.jitter == "none" else self.rng.uniform(0.0, end)


@dataclass(frozen=True)
class JobStarted:
    """The handler was called with ``job``."""

    job: Job


@dataclass(frozen=True)
class JobFinished:
    """A started job ended: ``outcome`` is one of ``"ok"`` (acked), ``"retry"``
    (released, to be delivered again after a backoff), ``"snooze"`` (released with no
    delivery counted: the handler raised Snooze, or the worker gave it back as it shut
    down), ``"dead"`` (its deliveries ran out: a dead letter), ``"discard"`` (the
    handler raised Discard: a dead letter) or ``"lease_lost"`` (its lease expired
    while it ran: it may be delivered again; not acked).  ``duration`` is the
    handler's time in seconds; ``error`` what it raised, if anything."""

    job: Job
    outcome: Outcome
    duration: float
    error: Optional[BaseException] = None


@dataclass(frozen=True)
class WorkerStopping:
    """The worker stops fetching; ``running`` jobs are still in their handlers."""

    running: int


Event = Union[JobStarted, JobFinished, WorkerStopping]
#: Receives a worker's events (called from the worker's threads, or its loop).
EventSink = Callable[[Event], Any]


@dataclass(frozen=True)
class Decision:
    """What to do with a job whose handler ended: ``action`` is ``"ack"``,
    ``"release"`` (after ``delay`` seconds, counting a delivery or not) or
    ``"bury"`` (with ``reason``); the outcome it means."""

    action: str
    outcome: Outcome
    delay: Optional[float] = None
    count: bool = True
    reason: Optional[str] = None


def decide(job: Job, error: Optional[BaseException], backoff: Backoff,
           max_deliveries: Optional[int]) -> Decision:
    """What becomes of ``job`` whose handler returned (``error`` None) or raised."""
    if error is None:
        return Decision("ack", OK)
    if isinstance(error, Snooze):
        return Decision("release", SNOOZE, error.seconds, count=False)
    if isinstance(error, Discard):
        return Decision("bury", DISCARD, reason=error.reason)
    dies = max_deliveries is not None and job.deliveries >= max_deliveries
    return Decision("release", DEAD if dies else RETRY, backoff.delay(job.deliveries))
