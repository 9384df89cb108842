"""An expiring key-value store for task results, on plain keys.

Layout under a directory ``D`` (keys are bytes):

* ``D/"v"/(key, i)``: the value, in chunks (:class:`._blobs.Blobs`: values longer
  than one FoundationDB value, up to 8 MB);
* ``D/"e"/key``: when the key expires, a reading of the cluster's clock (read
  versions, about 1,000,000 per second); absent: never;
* ``D/"x"/(deadline, key)``: the expiry index, in deadline order, so a sweep reads only
  what has expired, in transactions of at most :data:`SWEEP_BATCH` keys;
* ``D/"n"/key``: a counter (8-byte little-endian, atomic adds), and
  ``D/"r"/(key, token)``: the counter's value after each increment, its receipt (a
  member counted once, :meth:`ExpiringStore.count_once`: its token is the member's
  id), and ``D/"r"/(key, "done")``: the counter's completion acted on
  (:meth:`ExpiringStore.mark_done`).

An expired key reads as absent at once; the sweep reclaims its space later.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ._blobs import Blobs
from ._database import transact

__all__ = ["SWEEP_BATCH", "Counted", "ExpiringStore", "Watched"]

log = logging.getLogger("fdbrecipes.contrib")

#: Expired keys one sweep transaction removes.
SWEEP_BATCH = 500

_PER_SECOND = 1_000_000
_ONE = struct.pack("<q", 1)
#: The receipt token of a counter's completion mark (member tokens are bytes).
_DONE = "done"


def _pack_int(n: int) -> bytes:
    import fdb.tuple

    return bytes(fdb.tuple.pack((n,)))


def _unpack_int(raw: Any) -> int:
    import fdb.tuple

    return int(fdb.tuple.unpack(bytes(raw))[0])


class Counted(NamedTuple):
    """A member's count (:meth:`ExpiringStore.count_once`): the counter's value after
    it, and whether the counter's completion was marked acted on."""

    value: int
    done: bool


class Watched:
    """Watches on keys, set in a transaction that read them: :meth:`wait` returns when
    one of them changes (or at a timeout); :meth:`cancel` drops them."""

    def __init__(self, futures: List[Any]) -> None:
        self._futures = futures
        self._changed = threading.Event()
        for f in futures:
            f.on_ready(self._fire)

    def _fire(self, _future: Any) -> None:
        self._changed.set()

    def wait(self, timeout: Optional[float]) -> bool:
        """Whether a watched key changed within ``timeout`` seconds (None: forever)."""
        return self._changed.wait(timeout)

    def cancel(self) -> None:
        for f in self._futures:
            f.cancel()


class ExpiringStore:
    """Values, counters and their expiry under one directory.

    Args:
        db: the database.
        root: the directory (a subspace).
        sweep_every: seconds between this process's background sweeps of expired keys
            (a daemon thread, started by the first write with an expiry); None: no
            background sweeps (call :meth:`sweep`).
    """

    def __init__(self, db: Any, root: Any, sweep_every: Optional[float] = 60.0) -> None:
        self.db = db
        self._values = Blobs(root.subspace(("v",)))
        self._expiry = root.subspace(("e",))
        self._index = root.subspace(("x",))
        self._counters = root.subspace(("n",))
        self._receipts = root.subspace(("r",))
        self._sweep_every = sweep_every
        self._sweeper: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    # -- values --------------------------------------------------------------------------

    def get(self, key: bytes) -> Optional[bytes]:
        """The value of ``key``; None when absent or expired.  Reads its chunks and its
        expiry in parallel.  Cost: 1 round trip."""
        return transact(self.db, self._get, key)

    def _get(self, tr: Any, key: bytes) -> Optional[bytes]:
        expiry = tr.snapshot[self._expiry.pack((key,))]
        value = self._values.read(tr.snapshot, (key,))
        expired = (value is not None and expiry.present()
                   and _unpack_int(expiry) <= tr.get_read_version().wait())
        return None if expired else value

    def get_many(self, keys: Sequence[bytes]) -> List[Optional[bytes]]:
        """The values of ``keys``, in order (None: absent or expired), in one
        transaction.  Cost: 1 round trip for reads issued together, O(k) keys."""
        return transact(self.db, self._get_many, list(keys))

    def _get_many(self, tr: Any, keys: List[bytes]) -> List[Optional[bytes]]:
        return [self._get(tr, key) for key in keys]

    def get_and_watch(self, keys: Sequence[bytes]) -> Tuple[List[Optional[bytes]], Watched]:
        """The values of ``keys`` (as :meth:`get_many`) and watches that fire when one
        of them is written or removed after that read, set in the same read-only
        transaction, so no write in between is missed."""
        return transact(self.db, self._get_and_watch, list(keys))

    def _get_and_watch(self, tr: Any, keys: List[bytes]) -> Tuple[List[Optional[bytes]], Watched]:
        values = self._get_many(tr, keys)
        return values, Watched([tr.watch(self._values.first_key((k,))) for k in keys])

    def set(self, key: bytes, value: bytes, expires: Optional[float]) -> None:
        """Store ``value`` under ``key``, expiring ``expires`` seconds from now (None
        or 0: never), replacing any value and expiry it had.  Reads the old expiry
        (to move its index entry); writes the chunks, the expiry and its index entry.
        Cost: 1 round trip.

        Raises:
            ValueError: ``value`` is over 8,000,000 bytes.
        """
        Blobs.check(value, "a result")
        transact(self.db, self._set, key, value, expires)
        if expires:
            self._start_sweeper()

    def _set(self, tr: Any, key: bytes, value: bytes, expires: Optional[float]) -> None:
        self._values.write(tr, (key,), value)
        self._expire(tr, key, expires)

    def _expire(self, tr: Any, key: bytes, expires: Optional[float]) -> None:
        old = tr[self._expiry.pack((key,))]
        if old.present():
            tr.clear(self._index.pack((_unpack_int(old), key)))
        if not expires:
            tr.clear(self._expiry.pack((key,)))
            return
        deadline = tr.get_read_version().wait() + int(expires * _PER_SECOND)
        tr[self._expiry.pack((key,))] = _pack_int(deadline)
        tr[self._index.pack((deadline, key))] = b""

    def expire(self, key: bytes, expires: Optional[float]) -> None:
        """Make ``key`` (value or counter) expire ``expires`` seconds from now (None or
        0: never).  Cost: 1 round trip."""
        transact(self.db, self._expire, key, expires)
        if expires:
            self._start_sweeper()

    def delete(self, key: bytes) -> None:
        """Remove ``key``: its value, counter, receipts and expiry.  Cost: 1 round trip
        (a read of the expiry, range clears)."""
        transact(self.db, self._delete, key)

    def _delete(self, tr: Any, key: bytes) -> None:
        self._expire(tr, key, None)
        self._values.clear(tr, (key,))
        tr.clear(self._counters.pack((key,)))
        r = self._receipts.range((key,))
        tr.clear_range(r.start, r.stop)

    # -- counters ------------------------------------------------------------------------

    def incr(self, key: bytes) -> int:
        """Add one to the counter ``key`` and return its new value, exactly once: an
        increment whose commit is in doubt (``commit_unknown_result``) is settled by
        its receipt, never applied twice.  Writes an atomic add and a receipt (removed
        with the key); reads the counter (a read conflict with concurrent increments
        of it: they retry).  Cost: 1 round trip."""
        token = os.urandom(16)
        return transact(self.db, self._incr, key, token)

    def _incr(self, tr: Any, key: bytes, token: bytes) -> int:
        receipt = self._receipts.pack((key, token))
        done = tr[receipt]
        if done.present():  # a retry after a commit that landed
            return _unpack_int(done)
        tr.add(self._counters.pack((key,)), _ONE)
        value = struct.unpack("<q", bytes(tr[self._counters.pack((key,))]))[0]
        tr[receipt] = _pack_int(value)
        return int(value)

    def count_once(self, key: bytes, member: bytes) -> Counted:
        """Count ``member`` in the counter ``key`` once: the counter's value after its
        count (its receipt, the same at every call for that member), and whether
        :meth:`mark_done` was called for ``key``.  Two members counted at once conflict
        on the counter: exactly one reads each value.  Writes an atomic add and the
        member's receipt, once; reads the receipt, the counter and the mark.  Cost: 1
        round trip (2 for the first count of a member)."""
        return transact(self.db, self._count_once, key, member)

    def _count_once(self, tr: Any, key: bytes, member: bytes) -> Counted:
        done = tr[self._receipts.pack((key, _DONE))]
        return Counted(self._incr(tr, key, member), done.present())

    def set_and_count(self, key: bytes, value: bytes, expires: Optional[float],
                      keep: Callable[[bytes], bool], counter: bytes,
                      member: bytes) -> Counted:
        """:meth:`set` (unless the value stored is one ``keep`` says to keep) and
        :meth:`count_once` of ``member`` in ``counter``, in one transaction: the count
        is made if and only if the value is stored (a chord's part and its result).
        A commit in doubt, run again, finds the receipt and counts nothing twice.
        Cost: 4 round trips at most (the stored value, its expiry, the receipt, the
        counter), O(size of the value) bytes.

        Raises:
            ValueError: ``value`` is over 8,000,000 bytes.
        """
        Blobs.check(value, "a result")
        counted = transact(self.db, self._set_and_count, key, value, expires, keep, counter,
                           member)
        if expires:
            self._start_sweeper()
        return counted

    def _set_and_count(self, tr: Any, key: bytes, value: bytes, expires: Optional[float],
                       keep: Callable[[bytes], bool], counter: bytes,
                       member: bytes) -> Counted:
        old = self._values.read(tr, (key,))
        if old is None or not keep(old):
            self._set(tr, key, value, expires)
        return self._count_once(tr, counter, member)

    def mark_done(self, key: bytes) -> None:
        """Mark the counter ``key``'s completion as acted on (read by
        :meth:`count_once`; removed with the counter).  Cost: 1 round trip."""
        transact(self.db, self._mark_done, key)

    def _mark_done(self, tr: Any, key: bytes) -> None:
        tr[self._receipts.pack((key, _DONE))] = b""

    # -- expiry --------------------------------------------------------------------------

    def sweep(self, limit: Optional[int] = None) -> int:
        """Remove expired keys, oldest deadline first, in transactions of at most
        :data:`SWEEP_BATCH` keys (each reads only the expired part of the index);
        stop after ``limit`` keys (None: all).  Return how many were removed.
        Concurrent sweepers conflict on the index entries they both read: one
        retries on what is left."""
        total = 0
        while limit is None or total < limit:
            ask = SWEEP_BATCH if limit is None else min(SWEEP_BATCH, limit - total)
            removed = transact(self.db, self._sweep, ask)
            total += removed
            if removed < ask:
                break
        return total

    def _sweep(self, tr: Any, n: int) -> int:
        now = tr.get_read_version().wait()
        begin = self._index.range().start
        end = self._index.pack((now,))
        expired = [self._index.unpack(kv.key) for kv in tr.get_range(begin, end, limit=n)]
        for deadline, key in expired:
            tr.clear(self._index.pack((deadline, key)))
            tr.clear(self._expiry.pack((key,)))
            self._values.clear(tr, (key,))
            tr.clear(self._counters.pack((key,)))
            r = self._receipts.range((key,))
            tr.clear_range(r.start, r.stop)
        return len(expired)

    def _start_sweeper(self) -> None:
        with self._lock:
            if self._sweeper is None and self._sweep_every is not None:
                self._sweeper = threading.Thread(target=self._sweep_forever, daemon=True,
                                                 name="fdbrecipes-results-sweeper")
                self._sweeper.start()

    def _sweep_forever(self) -> None:
        assert self._sweep_every is not None
        while True:
            time.sleep(self._sweep_every)  # a period between sweeps, not a synchronization
            try:
                self.sweep()
            except Exception:
                log.exception("sweeping expired results failed; trying again later")


_stores: Dict[Tuple[Optional[str], Tuple[str, ...]], ExpiringStore] = {}
_stores_lock = threading.Lock()


def expiring_store(cluster_file: Optional[str], path: Tuple[str, ...]) -> ExpiringStore:
    """The process's store in directory ``path`` of ``cluster_file``'s cluster (made
    on first use: opens the database and the directory)."""
    from ._database import database, directory

    with _stores_lock:
        store = _stores.get((cluster_file, path))
        if store is None:
            db = database(cluster_file)
            store = _stores[(cluster_file, path)] = ExpiringStore(
                db, directory(db, path, cluster_file))
        return store
