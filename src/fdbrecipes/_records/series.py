"""Throughput and backlog history: per-minute buckets that the workers write.

Each live worker writes, at each heartbeat, one key for the current minute::

    S/"m"/(minute, worker) = (done, failed, backlog)

``minute`` is ``int(time.time() // 60)`` on the worker's clock; ``done`` and ``failed``
count the jobs it finished (and of those, failed) within that minute, from its own
counts (:attr:`fdbrecipes.WorkerInfo.processed`, ``failed``); ``backlog`` is how many
items were visible when it beat (None where reading that costs more than O(1): a
FairQueue).  The write is a blind set of values computed from the worker's absolute
counts, so a retried heartbeat rewrites the same value (nothing is counted twice), and
each worker writes keys of its own (no hot key).  Each heartbeat also clears the
buckets older than the retention (a blind range clear).  A minute's throughput is the
sum over its workers' keys; its backlog the largest sample.  The buckets live in the
cluster: they survive restarts, and every reader sees the same.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import fdb.tuple
from fdb.subspace_impl import Subspace

from .._fdb import Gen, Range, snap
from .registry import WorkerInfo

__all__ = ["SERIES_RETENTION", "Minute", "Series"]

#: Seconds the buckets are kept by default (7 days).
SERIES_RETENTION = 7 * 24 * 3600.0
#: Minutes one read returns at most (a day).
MAX_MINUTES = 1440


class Minute(NamedTuple):
    """One minute of a structure's history.

    Attributes:
        start: when the minute began (seconds since the epoch).
        done: jobs the workers finished in it (acked, failed or cancelled).
        failed: of those, the ones that failed.
        backlog: the most items visible at a worker's heartbeat in it, or None (no
            worker sampled it).
        workers: how many workers wrote in it.
    """

    start: float
    done: int
    failed: int
    backlog: Optional[int]
    workers: int


class Series:
    """The buckets of one structure (see the module docstring), and, for the workers of
    this process, the counts each had when its current minute began."""

    __slots__ = ("bases", "lock", "retention", "space")

    def __init__(self, space: Subspace, retention: float = SERIES_RETENTION) -> None:
        self.space = space
        self.retention = retention
        #: worker id -> (its minute, done and failed when it began, done and failed at
        #: its last heartbeat)
        self.bases: Dict[str, Tuple[int, int, int, int, int]] = {}
        self.lock = threading.Lock()

    def counts(self, info: WorkerInfo, minute: int) -> Tuple[int, int]:
        """Worker ``info``'s jobs done and failed within ``minute`` so far."""
        with self.lock:
            last = self.bases.get(info.id)
            if last is None:  # its first heartbeat: its counts began at its start
                base_done, base_failed = 0, 0
            elif last[0] == minute:
                base_done, base_failed = last[1], last[2]
            else:  # a new minute: what it did since its last heartbeat counts here
                base_done, base_failed = last[3], last[4]
            self.bases[info.id] = (minute, base_done, base_failed, info.processed, info.failed)
        return info.processed - base_done, info.failed - base_failed

    def record(self, tr: Any, info: WorkerInfo, backlog: Optional[int]) -> None:
        """Write worker ``info``'s bucket of the current minute, and clear the buckets
        past the retention (blind writes)."""
        now = time.time()
        minute = int(now // 60)
        done, failed = self.counts(info, minute)
        tr.set(self.space.pack((minute, info.id)), fdb.tuple.pack((done, failed, backlog)))
        start = self.space.range().start
        tr.clear_range(start, self.space.pack((int((now - self.retention) // 60),)))

    def forget(self, worker: str) -> None:
        """Drop what this process remembers of ``worker`` (it stopped)."""
        with self.lock:
            self.bases.pop(worker, None)

    def minutes(self, tr: Any, count: int) -> Gen[List[Minute]]:
        """The last ``count`` minutes, oldest first, the current one last (minutes no
        worker wrote in are zeros); one snapshot range read of their keys."""
        now = int(time.time() // 60)
        first = now - count + 1
        found = yield from Range(snap(tr), self.space.pack((first,)),
                                 self.space.range().stop).read()
        sums: Dict[int, List[Any]] = {}
        for kv in found:
            minute = self.space.unpack(kv.key)[0]
            done, failed, backlog = fdb.tuple.unpack(kv.value)
            bucket = sums.setdefault(minute, [0, 0, None, 0])
            bucket[0] += done
            bucket[1] += failed
            if backlog is not None:
                bucket[2] = backlog if bucket[2] is None else max(bucket[2], backlog)
            bucket[3] += 1
        return [Minute(float(m * 60), *sums.get(m, (0, 0, None, 0)))
                for m in range(first, now + 1)]
