"""Helpers shared by the tests."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Sequence


class TestClock:
    """A lease clock for tests: the read version plus an offset the test advances.

    Every structure built with the same TestClock sees the same time, so a test can
    expire leases without waiting.
    """

    __test__ = False  # not a test class

    def __init__(self) -> None:
        self.offset = 0

    def __call__(self, tr: Any) -> int:
        return int(tr.get_read_version().wait()) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += int(seconds * 1_000_000)


def dump(db: Any, subspace: Any) -> Dict[bytes, bytes]:
    """Every key/value under ``subspace``, read in one transaction."""
    r = subspace.range()
    return {bytes(kv.key): bytes(kv.value) for kv in db.get_range(r.start, r.stop)}


def everything(db: Any) -> Dict[bytes, bytes]:
    """Every key/value in the normal keyspace (below \\xff)."""
    return {bytes(kv.key): bytes(kv.value) for kv in db.get_range(b"", b"\xff")}


def run_threads(
    threads: Sequence[threading.Thread], errors: List[BaseException], timeout: float
) -> None:
    """Start ``threads``, join them, and fail on any error they recorded or a hang."""
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
