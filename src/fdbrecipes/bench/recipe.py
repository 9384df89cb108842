"""The recipe baseline the library is compared with, and the retry loop the benchmark's
own transactions run in.

:class:`RecipeQueue` is the queue recipe of FoundationDB's documentation, written here
independently of the library, with the simplest relaxed pop beside it (the bare probe);
:func:`transact` is a plain ``create_transaction`` / ``commit`` / ``on_error`` loop
that counts its retries.
"""

from __future__ import annotations

import os
import random
from typing import Any, Callable, Iterator, Optional, TypeVar

import fdb

from .. import RetryStats
from .settings import SPREAD

T = TypeVar("T")

#: Items per transaction (or push_many) when pre-filling a queue.
QUEUE_FILL_BATCH = 1_000
#: Tiny value every write, push and fill stores.
VALUE = b"x"
#: Items the bare probe pop reads, and takes one of: the spread pop's spread.
PROBE_WINDOW = SPREAD

_chance = random.Random()


def transact(db: Any, body: Callable[[Any], T], stats: RetryStats) -> T:
    """Run ``body(tr)`` in a new transaction and commit it; on an FDBError, let
    ``on_error`` decide (back off and retry, or raise) and count the retry."""
    tr = db.create_transaction()
    while True:
        try:
            result = body(tr)
            tr.commit().wait()
            return result
        except fdb.FDBError as e:
            stats.retries += 1
            tr.on_error(e).wait()


def chunks(start: int, stop: int, size: int) -> Iterator[range]:
    """``range(start, stop)`` in consecutive pieces of at most ``size``."""
    for low in range(start, stop, size):
        yield range(low, min(low + size, stop))


def _recipe_push(tr: Any, subspace: Any, value: bytes) -> None:
    """The recipe's push: index = last index + 1 (snapshot read), random suffix."""
    r = subspace.range()
    last = list(tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True))
    index = subspace.unpack(last[0].key)[0] + 1 if last else 0
    tr[subspace.pack((index, os.urandom(20)))] = value


class _Fill:
    """One transaction of :meth:`RecipeQueue.fill`: the values of one chunk of indexes."""

    def __init__(self, subspace: Any, chunk: range) -> None:
        self.subspace = subspace
        self.chunk = chunk

    def __call__(self, tr: Any) -> None:
        """Write ``VALUE`` at every index of the chunk (fresh random suffixes)."""
        for i in self.chunk:
            tr[self.subspace.pack((i, os.urandom(20)))] = VALUE


class RecipeQueue:
    """The queue recipe of FoundationDB's documentation, written here independently of
    the library, as the baseline.

    Items are ``subspace/(index, random 20 bytes) = value``.  A push reads the last key
    with a snapshot read and writes at its index + 1 (``@fdb.transactional``).  A pop reads
    the first key (a normal read: read conflict), clears it and commits, in a retry loop
    that counts its retries in :attr:`stats`.  Its operations need the API version
    selected (constructing it does not).
    """

    def __init__(self, subspace: Any) -> None:
        self.subspace = subspace
        self.stats = RetryStats()
        self._push: Optional[Callable[[Any, Any, bytes], None]] = None

    def push(self, db: Any, value: bytes) -> None:
        """The recipe's push of ``value`` (``@fdb.transactional``, wrapped on first use:
        the bindings refuse to before the API version is selected)."""
        if self._push is None:
            self._push = fdb.transactional(_recipe_push)
        self._push(db, self.subspace, value)

    def pop(self, db: Any) -> Optional[bytes]:
        """The recipe's pop: the first value, or None when the queue is empty."""
        return transact(db, self._pop, self.stats)

    def _pop(self, tr: Any) -> Optional[bytes]:
        """One pop attempt in ``tr``: read the first key (conflicting) and clear it."""
        r = self.subspace.range()
        for kv in tr.get_range(r.start, r.stop, limit=1):
            tr.clear(kv.key)
            return bytes(kv.value)
        return None

    def probe_pop(self, db: Any) -> Optional[bytes]:
        """The simplest relaxed pop (the bare probe): one of the first
        :data:`PROBE_WINDOW` values at random, or None when the queue is empty; its
        retries counted in :attr:`stats`.  What ``Queue.pop(db, spread=16)`` does
        without the library's counters, receipt, deadline index and pause flag."""
        return transact(db, self._probe, self.stats)

    def _probe(self, tr: Any) -> Optional[bytes]:
        """One probe attempt in ``tr``: read the first :data:`PROBE_WINDOW` keys by
        snapshot, take one at random with a read conflict on it, clear it."""
        r = self.subspace.range()
        kvs = list(tr.snapshot.get_range(r.start, r.stop, limit=PROBE_WINDOW))
        if not kvs:
            return None
        kv = _chance.choice(kvs)
        tr.add_read_conflict_key(kv.key)
        tr.clear(kv.key)
        return bytes(kv.value)

    def fill(self, db: Any, items: int) -> None:
        """Store ``items`` values at indexes 0, 1, ..., in transactions of 1,000."""
        for chunk in chunks(0, items, QUEUE_FILL_BATCH):
            transact(db, _Fill(self.subspace, chunk), RetryStats())
