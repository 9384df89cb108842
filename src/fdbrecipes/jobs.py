"""What a worker hands its handler, what the handler may answer, and what it reports.

:class:`Job` is one claimed item; a handler returns (the job is acked, and what it
returned is the job's result), raises (it is retried after :class:`Backoff`'s delay,
or becomes a dead letter once the queue's ``max_deliveries`` are used up), raises
:class:`Snooze` (back later, no delivery counted) or :class:`Discard` (to the dead
letters now).  A job may also be stopped: cancelled (:class:`JobCancelled`, see
``Queue.cancel``) or past its time limit (:class:`TimeLimitExceeded`).  A handler
reports progress with :meth:`~fdbrecipes.Job.progress` and hands work to push with the
job's ack to :meth:`~fdbrecipes.Job.then`.  A worker reports each job through ``on_event``: one
:class:`JobStarted`, then exactly one :class:`JobFinished`, and
:class:`WorkerStopping` when it begins to shut down.  One function decides, once,
what becomes of a finished job (``decide``): the sync and the async worker share it.  What job
records hold is in docs/jobs.md.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ._ordered.leases import Lease
from ._records.history import MAX_RESULT_BYTES, Followup, new_id
from ._records.records import Progress
from ._values import Value, check_reason, check_seconds, encode_value
from .protocol import workable

__all__ = ["MAX_RESULT_BYTES", "Backoff", "Discard", "Event", "Job", "JobCancelled",
           "JobFinished", "JobStarted", "Outcome", "Retry", "Snooze", "TimeLimitExceeded",
           "WorkerStopping"]

#: How a job ended (``JobFinished.outcome``).
Outcome = str
OK, RETRY, SNOOZE, DEAD, DISCARD, LEASE_LOST, CANCELLED = (
    "ok", "retry", "snooze", "dead", "discard", "lease_lost", "cancelled")
#: The longest progress message kept, in characters.
PROGRESS_CHARS = 200


class JobCancelled(Exception):
    """The job was cancelled while it ran (``Queue.cancel``): raised by
    :meth:`Job.check` in a sync handler; an async handler's task is cancelled
    instead.  A handler that lets it out ends the job as cancelled (not retried)."""


class TimeLimitExceeded(Exception):
    """The job ran past its time limit: an async handler's task is cancelled, a sync
    handler is abandoned (:meth:`Job.check` raises this in its thread).  The job is
    retried, or becomes a dead letter, like a failure."""


class Job:
    """One claimed item, as a handler sees it.

    Attributes:
        value: the item's value.
        deliveries: how many times it has been delivered, this time included.
        lease: the lease it is held under (the worker acks, extends or releases it).
        wait_seconds: how long it waited for a consumer, on the cluster's clock: from
            when it last became visible (pushed, or its delay or previous lease
            ended) to this claim.
        id: the job's id (the item's id: given to ``push``, or made by a structure with
            ``history``), or None.
        time_limit: seconds the handler may run (the job's own, or the worker's), or
            None.
    """

    __slots__ = ("_followups", "_lock", "_progress", "_stopped", "deliveries", "id", "lease",
                 "time_limit", "value", "wait_seconds")

    def __init__(self, lease: Lease, time_limit: Optional[float] = None) -> None:
        self.value: Value = lease.value
        self.deliveries = lease.deliveries
        self.lease = lease
        self.wait_seconds = max(0, lease.claimed_at - lease.visible_since) / 1e6
        self.id = lease.id
        self.time_limit = time_limit
        self._lock = threading.Lock()
        self._progress: Optional[Progress] = None
        self._followups: List[Followup] = []
        self._stopped: Optional[Exception] = None

    @classmethod
    def of(cls, lease: Lease, time_limit: Optional[float] = None) -> Job:
        """The job a lease stands for."""
        return cls(lease, time_limit)

    def __repr__(self) -> str:
        return f"Job(value={self.value!r}, deliveries={self.deliveries}, id={self.id!r})"

    # -- what a handler may do ---------------------------------------------------------

    def progress(self, fraction: float, message: str = "") -> None:
        """Say how far the job is: ``fraction`` in [0, 1] and a short ``message`` (at
        most 200 characters kept).  The worker writes it to the job's record (a
        structure with ``history``) at its next heartbeat and with the job's end.

        Raises:
            TypeError or ValueError: ``fraction`` is not a number in [0, 1], or
                ``message`` not a str the tuple layer can encode (a lone surrogate,
                from text decoded with ``surrogateescape``, cannot be): checked now,
                so nothing the handler reports can fail the job's ack, or another's.
        """
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
                or not 0 <= fraction <= 1:
            raise ValueError(f"fraction must be a number in [0, 1], got {fraction!r}")
        if not isinstance(message, str):
            raise TypeError(f"message must be a str, not {type(message).__name__}")
        kept = message[:PROGRESS_CHARS]
        encode_value(kept, "message")
        with self._lock:
            self._progress = Progress(float(fraction), kept)

    @property
    def cancelled(self) -> bool:
        """Whether the job was cancelled while it ran (a sync handler looks, and stops:
        see :meth:`check`)."""
        return isinstance(self._stopped, JobCancelled)

    def check(self) -> None:
        """Raise if the job must stop: :class:`JobCancelled` once it was cancelled,
        :class:`TimeLimitExceeded` once it ran past its time limit.  A sync handler
        calls it between steps of long work."""
        stopped = self._stopped
        if stopped is not None:
            raise stopped

    def then(self, structure: Any, value: Value, *, id: Optional[bytes] = None,
             delay: Optional[float] = None, limit_keys: Optional[Dict[str, Any]] = None,
             **where: Any) -> Optional[bytes]:
        """Push ``value`` into ``structure`` (a Queue, PriorityQueue or FairQueue, sync
        or async; ``where``: a PriorityQueue's ``priority=``, a FairQueue's
        ``group=``) in the same transaction as this job's ack: if the job succeeds,
        the follow-up is pushed exactly once, never lost between the two and never
        pushed for a job that fails (a retried job pushes what its last run asked).
        ``limit_keys``: the follow-up's keys under ``structure``'s limits, as its
        ``push`` takes them (docs/flow-control.md, "Keys given at push"), stored
        with it.  The follow-up's id: ``id``, or, if ``structure`` keeps job records,
        one made now (return it as the job's result, and a caller can follow the
        chain with ``result()``); otherwise None.

        Reads and writes nothing now (the push is the ack's); cost: none (checks only).

        Raises:
            TypeError or ValueError: a bad structure, value, id, delay, ``limit_keys``
                (as ``push`` says) or ``where`` (checked now, before anything is
                written).
        """
        ops = workable(structure, "structure")
        if id is None and ops.history is not None:
            id = new_id()
        ops.push_job(None, value, id=id, delay=delay, limit_keys=limit_keys,
                     **where).close()  # checks, runs nothing
        with self._lock:
            self._followups.append(Followup(ops, value, id, delay, tuple(sorted(where.items())),
                                            None if limit_keys is None else dict(limit_keys)))
        return id

    # -- what the worker reads -----------------------------------------------------------

    def stop(self, reason: Exception) -> None:
        """The worker stops the job for ``reason`` (a :class:`JobCancelled` or
        :class:`TimeLimitExceeded`): :meth:`check` raises it from now on."""
        self._stopped = reason

    @property
    def stopped(self) -> Optional[Exception]:
        """Why the worker stopped the job (see :meth:`stop`), or None."""
        return self._stopped

    def reported(self) -> Tuple[Optional[Progress], Tuple[Followup, ...]]:
        """The last progress the handler set, and its follow-up work."""
        with self._lock:
            return self._progress, tuple(self._followups)


class Snooze(Exception):
    """Raised by a handler: put the job back for ``seconds``, no delivery counted."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"snooze for {seconds} s")
        self.seconds = check_seconds(seconds, "seconds")


class Discard(Exception):
    """Raised by a handler: move the job to the dead letters now, with ``reason`` (at
    most 1,000 characters the tuple layer can encode: ``Discard`` raises ValueError
    otherwise)."""

    def __init__(self, reason: Optional[str] = None) -> None:
        super().__init__(reason or "discarded")
        self.reason = check_reason(reason)


class Retry(Exception):
    """Raised by a handler that failed with ``error`` and decides itself what follows
    (a task's own ``retries`` and ``backoff``): retry after ``delay`` seconds (None:
    the worker's backoff), a delivery counted (the structure's ``max_deliveries``
    still make it a dead letter), or, with ``last``, make it a dead letter now.
    Either way ``error`` is what the job's record and dead letter say it failed
    with."""

    def __init__(self, error: BaseException, delay: Optional[float] = None,
                 last: bool = False) -> None:
        super().__init__(str(error))
        self.error = error
        self.delay = None if delay is None else check_seconds(delay, "delay")
        self.last = last


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
    handler raised Discard: a dead letter), ``"cancelled"`` (it was cancelled while it
    ran: removed, not retried) or ``"lease_lost"`` (its lease expired while it ran: it
    may be delivered again; not acked).  ``duration`` is the handler's time in
    seconds; ``error`` what it raised (:class:`TimeLimitExceeded` for a job stopped
    at its time limit), if anything."""

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
    ``"cancel"`` (the item removed, its record cancelled), ``"release"`` (after
    ``delay`` seconds, counting a delivery or not) or ``"bury"`` (with ``reason``);
    the outcome it means."""

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
    if isinstance(error, JobCancelled):
        return Decision("cancel", CANCELLED)
    if isinstance(error, Snooze):
        return Decision("release", SNOOZE, error.seconds, count=False)
    if isinstance(error, Discard):
        return Decision("bury", DISCARD, reason=error.reason)
    if isinstance(error, Retry) and error.last:
        return Decision("bury", DEAD)
    dies = max_deliveries is not None and job.deliveries >= max_deliveries
    delay = error.delay if isinstance(error, Retry) and error.delay is not None else \
        backoff.delay(job.deliveries)
    return Decision("release", DEAD if dies else RETRY, delay)
