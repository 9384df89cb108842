"""Leases kept alive while a framework's worker holds them.

Celery and Dramatiq workers claim messages ahead of running them (prefetch) and ack
them from other threads; :class:`LeaseKeeper` is where such a process keeps the leases
it holds, by delivery tag, and the one daemon thread that extends them all about every
third of their length: one ``extend_many`` transaction per structure per beat, however
many leases.  A lease the beat finds expired (the process stalled past its deadline)
is dropped and logged: its message may be with another worker now, so it is never
acked.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from .. import Lease

__all__ = ["Held", "LeaseKeeper"]

log = logging.getLogger("fdbrecipes.contrib")

#: extend_many takes at most this many leases per call.
_BATCH = 10_000


class Held(NamedTuple):
    """A lease a process holds: the structure it came from (a Queue or
    PriorityQueue), the lease, and what the integration needs to settle it (the
    queue's name, a blob's name)."""

    structure: Any
    lease: Lease[Any]
    extra: Any = None


class LeaseKeeper:
    """The leases a process holds, by tag, extended by a daemon thread.

    Args:
        db: the database the leases live in.
        lease_seconds: each extension makes a lease end this many seconds from then.
        period: seconds between beats (default: a third of ``lease_seconds``).
        also: a function called at every beat after the extensions (for the
            integration's own keep-alive writes); its errors are logged.
    """

    def __init__(self, db: Any, lease_seconds: float, period: Optional[float] = None,
                 also: Optional[Callable[[], None]] = None,
                 clock_key: Optional[bytes] = None) -> None:
        self.db = db
        self._clock_key = clock_key
        self.lease_seconds = lease_seconds
        self.period = period if period is not None else lease_seconds / 3
        self._also = also
        self._held: Dict[Any, Held] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def hold(self, tag: Any, held: Held) -> None:
        """Keep ``held`` alive under ``tag`` until :meth:`take` (starts the thread)."""
        with self._lock:
            self._held[tag] = held
            self._start()

    def start(self) -> None:
        """Start beating now (for ``also``), holding nothing yet."""
        with self._lock:
            self._start()

    def _start(self) -> None:
        if self._thread is None and not self._stopped.is_set():
            self._thread = threading.Thread(target=self._run, name="fdbrecipes-keeper",
                                            daemon=True)
            self._thread.start()

    def take(self, tag: Any) -> Optional[Held]:
        """Stop keeping the lease under ``tag`` alive and hand it over to be settled
        (acked, released, buried); None if it is not held (never was, settled
        already, or lost: see the log)."""
        with self._lock:
            return self._held.pop(tag, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def close(self) -> None:
        """Stop the thread (an extension in flight finishes).  The leases still held
        stay where they are: the caller gives them back, or they expire."""
        self._stopped.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stopped.wait(self.period):
            try:
                self.beat()
            except Exception:  # a passing failure: the next beat tries again
                log.exception("extending held leases failed; trying again at the next beat")
            if self._also is not None:
                try:
                    self._also()
                except Exception:
                    log.exception("a keep-alive write failed; trying again at the next beat")

    def beat(self) -> int:
        """Extend every held lease now, one ``extend_many`` per structure (per 10,000
        leases); return how many were extended.  Leases found expired are dropped
        and logged.  Cost: 1 round trip per structure, and one commit first that
        moves the cluster's clock (see :meth:`move_clock`)."""
        with self._lock:
            by_structure: Dict[int, List[Tuple[Any, Held]]] = {}
            for tag, held in self._held.items():
                by_structure.setdefault(id(held.structure), []).append((tag, held))
        if by_structure:
            self.move_clock()
        extended = 0
        for group in by_structure.values():
            for start in range(0, len(group), _BATCH):
                extended += self._extend(group[start:start + _BATCH])
        return extended

    def move_clock(self) -> None:
        """Commit a transaction holding only a write conflict on ``clock_key``: the
        cluster's read versions (the leases' clock) stand still between commits, for
        up to about 2 seconds on an idle cluster, and a lease extended from a stale
        read version would end that much early."""
        if self._clock_key is None:
            return
        tr = self.db.create_transaction()
        tr.add_write_conflict_key(self._clock_key)
        tr.commit().wait()

    def _extend(self, group: List[Tuple[Any, Held]]) -> int:
        structure = group[0][1].structure
        renewed = structure.extend_many(self.db, [held.lease for _, held in group],
                                        self.lease_seconds)
        lost = [(tag, held) for (tag, held), lease in zip(group, renewed) if lease is None]
        with self._lock:
            for tag, held in lost:
                if self._held.get(tag) is held:  # not settled meanwhile: really lost
                    del self._held[tag]
                    log.warning("a lease (token %s) expired before its heartbeat (the "
                                "process stalled?): its message may run again elsewhere, "
                                "it will not be acked here", held.lease.token.hex())
        return len(group) - len(lost)
