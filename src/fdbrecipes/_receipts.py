"""Commit receipts: how a library retry loop settles ``commit_unknown_result``.

FoundationDB raises ``commit_unknown_result`` (1021) when it cannot tell whether a
commit happened; ``@fdb.transactional`` then runs the function again, which may do
its work twice (a second push) or lose it (a pop whose item is gone).  A library
call given a Database instead writes, in every attempt that writes anything, one
receipt ``c/(version, call id) = attempt number``, and takes a read conflict on
it.  After an attempt fails in a way that may have committed, the next attempt
first reads the receipt:

* present: that attempt committed; the call returns that attempt's result.
* absent: no attempt has committed before this one's read version.  An earlier
  attempt still in flight either lands before this attempt commits, and this
  attempt conflicts on its read of the receipt (the retry after that finds it),
  or lands after, and then it conflicts itself, on its read conflict on the
  receipt this attempt wrote.  At most one attempt of a call ever commits.

A receipt is spent when its call returns; a later call on the same structure in
the same process clears it (blind clears: no reads, no conflicts).  Receipts left
by a process that exited are cleared once older than :data:`RECEIPT_RETENTION`
by an occasional snapshot scan of the oldest ones.  See docs/design.md.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Tuple

import fdb.tuple
from fdb.subspace_impl import Subspace

from ._fdb import NOT_COMMITTED, VERSIONS_PER_SECOND, WANT_ALL, get_value
from ._values import random_id

#: Seconds after which a receipt left behind (by a client that exited) is cleared.
RECEIPT_RETENTION = 3600
#: A process looks for such receipts at its 1st, 17th, 33rd... call on a structure,
#: and clears at most this many per look.
RECEIPT_GC_EVERY, RECEIPT_GC_BATCH = 16, 64
#: Spent receipts one call clears at most.
RECEIPT_CLEARS = 16


class Spent:
    """The spent receipts of one structure in this process, shared by its objects."""

    __slots__ = ("calls", "keys", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.keys: List[bytes] = []
        self.calls = 0


_SPENT: Dict[bytes, Spent] = {}  # receipt subspace prefix -> its spent receipts
_SPENT_LOCK = threading.Lock()


class Receipts:
    """The receipts of one structure: where they live and which are spent."""

    __slots__ = ("space", "spent")

    def __init__(self, subspace: Subspace) -> None:
        self.space = subspace["c"]
        with _SPENT_LOCK:
            self.spent: Spent = _SPENT.setdefault(self.space.key(), Spent())

    def start(self) -> Tuple[List[bytes], bool]:
        """For a new call: spent receipts it clears, and whether it looks for old ones."""
        spent = self.spent
        with spent.lock:
            clearing = spent.keys[:RECEIPT_CLEARS]
            del spent.keys[:RECEIPT_CLEARS]
            spent.calls += 1
            return clearing, spent.calls % RECEIPT_GC_EVERY == 1

    def give_back(self, keys: List[bytes]) -> None:
        """Hand receipts (or clears that may not have committed) to later calls."""
        if keys:
            with self.spent.lock:
                self.spent.keys.extend(keys)


class Call:
    """One library call's receipt, across its attempts (see the module docstring)."""

    __slots__ = ("attempts", "clearing", "doubt", "gc", "key", "old", "receipts", "results")

    def __init__(self, receipts: Receipts) -> None:
        self.receipts = receipts
        self.key: Optional[bytes] = None  # the call's receipt, named at its first write
        self.results: Dict[int, Any] = {}  # attempt number -> result, for signed attempts
        self.doubt = False  # a signed attempt failed otherwise than by a conflict
        self.attempts = 0
        self.clearing, self.gc = receipts.start()
        self.old: Any = None  # the oldest receipts, read by snapshot when gc

    def settled(self, tr: Any) -> Tuple[bool, Any]:
        """Before an attempt: (True, result) if an earlier attempt did commit."""
        self.attempts += 1
        if self.doubt and self.key is not None:
            data = get_value(tr.get(self.key))
            if data is not None:
                return True, self.results[fdb.tuple.unpack(data)[0]]
        for key in self.clearing:
            tr.clear(key)
        if self.gc:
            r = self.receipts.space.range()
            self.old = tr.snapshot.get_range(r.start, r.stop, limit=RECEIPT_GC_BATCH,
                                             streaming_mode=WANT_ALL)
        return False, None

    def sign(self, tr: Any) -> None:
        """After an attempt's body: write the receipt, with a read conflict on it."""
        if self.key is None:
            version: int = tr.get_read_version().wait()
            self.key = bytes(self.receipts.space.pack((version, random_id())))
        tr.add_read_conflict_key(self.key)
        tr.set(self.key, fdb.tuple.pack((self.attempts,)))
        if self.old is not None:
            now: int = tr.get_read_version().wait()
            horizon = now - RECEIPT_RETENTION * VERSIONS_PER_SECOND
            for kv in self.old:
                if self.receipts.space.unpack(kv.key)[0] >= horizon:
                    break
                tr.clear(kv.key)

    def failed(self, result: Any, code: int) -> None:
        """A signed attempt failed with FDBError ``code``."""
        self.results[self.attempts] = result
        self.doubt = self.doubt or code != NOT_COMMITTED

    def end(self, committed: bool) -> None:
        """The call returns: its receipt is spent; unconfirmed clears go back."""
        spent = [] if committed else list(self.clearing)
        if self.key is not None:
            spent.append(self.key)
        self.receipts.give_back(spent)
