"""How many jobs a worker claims beyond its free slots (:class:`Ahead`).

A worker that claims only for its free slots leaves each slot idle for a claim's
round trips once its handler returns, and claims at most ``concurrency`` jobs per
transaction.  Claiming ahead keeps jobs claimed (under leases the heartbeat extends)
waiting for the next free slot, so a slot is refilled the moment its handler returns
and the next claim is in flight meanwhile, for more jobs at once.

A job claimed ahead waits in the worker, where no other worker can take it: that is
worth it only for short jobs.  So a worker claims ahead only as many jobs as would
wait less than :data:`AHEAD_WAIT` for a slot, judged by how long its handlers took
recently, at most ``prefetch``; with long jobs it claims for free slots only.  With
a time limit, jobs are not claimed ahead: a job that may run up to its limit is not
a short one, and a worker process killed at a job's hard limit (``--processes``)
would hold them back meanwhile.
"""

from __future__ import annotations

from typing import Any, Optional

from .._ordered.front import MIN
from .._values import MAX_SPREAD, check_int

__all__ = ["AHEAD_WAIT", "Ahead", "claim_spread"]

#: Seconds a job claimed ahead should wait for a slot at most (on average): the
#: worker claims ahead only while its recent jobs are short enough for that.
AHEAD_WAIT = 0.1
#: The weight of the last job in the running mean of handler durations.
WEIGHT = 0.1
#: The default ``prefetch`` is this many times the concurrency, at most
#: :data:`PREFETCH_MAX`: claims of dozens of jobs, where a claim's transaction costs
#: little per job; with no-op jobs a worker process starts 1,300 to 1,900 a second,
#: so what it holds ahead starts within about 0.1 s (docs/performance.md).
PREFETCH_PER_SLOT = 16
PREFETCH_MAX = 1_000


def claim_spread(n: int, blocks: int, end: str = MIN) -> int:
    """The ``spread`` of a claim of ``n`` jobs that takes a block of ``n`` drawn among
    ``blocks`` at the front (see :func:`fdbrecipes._ordered.front.choose`): a worker
    draws among as many blocks as it has slots, so concurrent claims of several
    workers rarely draw the same block, and one slot claims in strict order.  (A
    spread of the concurrency against claims of dozens made nearly every claim of
    four workers conflict and retry: docs/performance.md.)  At the MAX ``end`` of a
    PriorityQueue a take reads its whole window (the server skips nothing there), so
    there the spread stays ``blocks``: ``n + blocks - 1`` items read, not
    ``n * (blocks + 1)``.  Never above :data:`MAX_SPREAD` (what a claim accepts): a
    claim of many jobs (a wide worker holding many ahead) then draws among fewer
    blocks."""
    return min(max(1, n) * blocks if end == MIN else blocks, MAX_SPREAD)


def check_prefetch(prefetch: Any, concurrency: int) -> int:
    """``prefetch``, checked (None: :data:`PREFETCH_PER_SLOT` times
    ``concurrency``, at most :data:`PREFETCH_MAX`).

    Raises:
        TypeError or ValueError: not None or an int in [0, 10,000].
    """
    if prefetch is None:
        return min(PREFETCH_PER_SLOT * concurrency, PREFETCH_MAX)
    return check_int(prefetch, "prefetch", low=0, high=10_000)


class Ahead:
    """A worker's measure of its jobs, and how many it claims ahead of its slots.

    Args:
        concurrency: the worker's slots.
        prefetch: the most jobs it holds claimed and not started (0: none).
        limited: the worker gives every job a time limit (then none are claimed
            ahead).
    """

    __slots__ = ("concurrency", "job_seconds", "limited", "prefetch")

    def __init__(self, concurrency: int, prefetch: int, limited: bool) -> None:
        self.concurrency = concurrency
        self.prefetch = 0 if limited else prefetch
        self.limited = limited
        self.job_seconds: Optional[float] = None  # running mean; None: no job ran yet

    def ran(self, seconds: float) -> None:
        """A handler took ``seconds``."""
        mean = self.job_seconds
        self.job_seconds = seconds if mean is None else mean + WEIGHT * (seconds - mean)

    def jobs(self) -> int:
        """How many jobs to hold claimed and not started now: as many as would wait
        under :data:`AHEAD_WAIT` for one of the slots, at most ``prefetch`` (none
        before a job ran)."""
        mean = self.job_seconds
        if not self.prefetch or mean is None:
            return 0
        if mean <= 0:
            return self.prefetch
        return min(self.prefetch, int(AHEAD_WAIT * self.concurrency / mean))
