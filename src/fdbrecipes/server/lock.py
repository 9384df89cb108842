"""One lock file per folder, so two commands never work on the same install or
server at once."""

from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path
from typing import Iterator

__all__ = ["locked"]


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold ``directory/.lock`` (an exclusive ``flock``, waiting for it; the system
    releases it when the holding process dies, however it dies)."""
    with open(directory / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
