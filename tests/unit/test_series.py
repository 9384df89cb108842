"""The history's per-minute counts of one worker (fdbrecipes._records.series), without a
server: what a heartbeat writes as the minutes turn."""

from __future__ import annotations

from fdb.subspace_impl import Subspace

from fdbrecipes import WorkerInfo
from fdbrecipes._records.series import Series


def info(processed: int, failed: int, worker: str = "w-1") -> WorkerInfo:
    return WorkerInfo(worker, "host", 1, "q", 0.0, 0.0, 0.0, "running", processed, failed, ())


def test_counts_per_minute() -> None:
    series = Series(Subspace(("m",)))
    assert series.counts(info(3, 1), 100) == (3, 1)  # since the worker started
    assert series.counts(info(5, 1), 100) == (5, 1)  # the same minute, rewritten
    assert series.counts(info(5, 1), 100) == (5, 1)  # a retried beat: the same value
    assert series.counts(info(9, 2), 101) == (4, 1)  # since its last beat of minute 100
    assert series.counts(info(10, 2), 101) == (5, 1)
    assert series.counts(info(10, 2), 103) == (0, 0)  # a quiet minute
    assert series.counts(info(2, 0, "w-2"), 103) == (2, 0)  # workers apart
    series.forget("w-1")
    assert series.counts(info(1, 0), 104) == (1, 0)  # a new worker of that id
