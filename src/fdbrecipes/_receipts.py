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

A call that must stop while an attempt is in doubt (a timeout, an exhausted retry
limit, an error raised by the operation, Ctrl-C) first *settles*: a fresh
transaction reads the receipt and, if it is absent, writes a fence there, so the
doubtful attempt can never commit.  Then the call knows, and returns the committed
attempt's result or raises; if even settling fails it raises
:class:`fdbrecipes.errors.UnknownResultError`, which can settle later.

A receipt is spent when its call returns; a later call on the same database in the
same process clears it (blind clears in an attempt that writes anyway: no reads, no
conflicts, and read-only calls stay read-only).  Receipts left by a process that
exited are cleared once older than :data:`RECEIPT_RETENTION` by an occasional
snapshot scan of each structure's oldest receipts.  See docs/design.md.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import fdb.tuple
from fdb.subspace_impl import Subspace

from ._fdb import NOT_COMMITTED, VERSIONS_PER_SECOND, WANT_ALL, fdb_impl, get_value
from ._values import random_id
from .errors import FdbRecipesError

#: Seconds after which a receipt left behind (by a client that exited) is cleared.
RECEIPT_RETENTION = 3600
#: A retry that finds no receipt older than this (seconds) cannot tell "never
#: committed" from "committed, and the receipt was swept": it raises instead.
TRUST_ABSENCE = RECEIPT_RETENTION / 2
#: A structure object looks for receipts left behind at its 1st, 17th, 33rd... call,
#: and clears at most this many per look.
RECEIPT_GC_EVERY, RECEIPT_GC_BATCH = 16, 64
#: Spent receipts one call clears at most.
RECEIPT_CLEARS = 16
#: Milliseconds a settling transaction may take, whatever the database's options.
SETTLE_TIMEOUT_MS = 30_000
#: The attempt number a fence writes: no attempt (attempts count from 1).
FENCE = 0


class Outcome(NamedTuple):
    """How a doubtful call ended: whether it committed, and then its result."""

    committed: bool
    result: Any


class UnknownResultError(FdbRecipesError):
    """A call stopped while a commit of it may have gone through, and could not find
    out (settling failed too: the cluster was unreachable, say).

    It carries what is needed to find out later: ``error.settle(db)`` reads the
    call's receipt and, if it is absent, fences it so the doubtful attempt can never
    commit; either way it returns the :class:`Outcome`.

    Attributes:
        receipt: the call's receipt key.
        results: the result of each attempt that may have committed, by number.
    """

    def __init__(self, message: str, receipt: bytes, results: Dict[int, Any]) -> None:
        super().__init__(message)
        self.receipt = receipt
        self.results = results

    def settle(self, db: Any) -> Outcome:
        """Learn the call's outcome now (see the class docstring).

        Raises:
            FDBError: the cluster still cannot be reached.
        """
        attempt = settle(db, self.receipt)
        if attempt == FENCE:
            return Outcome(False, None)
        return Outcome(True, self.results[attempt])


class InterruptedCall(KeyboardInterrupt):
    """Ctrl-C (KeyboardInterrupt) reached a call while its commit was in flight.

    The call was settled before this was raised: ``outcome`` says whether it
    committed and, if so, what it returned (the item a pop took is there, not lost),
    or is None when settling failed, and then ``unknown`` can settle later.
    """

    def __init__(self, outcome: Optional[Outcome],
                 unknown: Optional[UnknownResultError] = None) -> None:
        super().__init__("interrupted while a commit was in flight; the call "
                         + ("committed" if outcome and outcome.committed else
                            "did not commit" if outcome else "may have committed"))
        self.outcome = outcome
        self.unknown = unknown


class Spent:
    """Spent receipts of one database in this process, waiting to be cleared."""

    __slots__ = ("keys", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.keys: List[bytes] = []

    def take(self) -> List[bytes]:
        """Up to :data:`RECEIPT_CLEARS` receipts for a call to clear."""
        with self.lock:
            clearing = self.keys[:RECEIPT_CLEARS]
            del self.keys[:RECEIPT_CLEARS]
            return clearing

    def give_back(self, keys: List[bytes]) -> None:
        """Hand receipts (or clears that may not have committed) to later calls."""
        if keys:
            with self.lock:
                self.keys.extend(keys)


# Database or Tenant -> its spent receipts.  Keyed by the object, not by a prefix:
# two clusters (or tenants) may hold structures under the same prefix.
_SPENT: weakref.WeakKeyDictionary[Any, Spent] = weakref.WeakKeyDictionary()
_SPENT_LOCK = threading.Lock()


def spent_of(db: Any) -> Spent:
    """The spent receipts of ``db`` (a Database or Tenant) in this process."""
    with _SPENT_LOCK:
        spent = _SPENT.get(db)
        if spent is None:
            spent = _SPENT[db] = Spent()
        return spent


class Receipts:
    """Where one structure keeps its receipts, and when it sweeps old ones."""

    __slots__ = ("calls", "lock", "space")

    def __init__(self, subspace: Subspace) -> None:
        self.space = subspace["c"]
        self.calls = 0
        self.lock = threading.Lock()

    def sweeps(self) -> bool:
        """Whether this call looks for receipts left behind (calls 1, 17, 33...)."""
        with self.lock:
            self.calls += 1
            return self.calls % RECEIPT_GC_EVERY == 1


def settle(db: Any, key: bytes) -> int:
    """Read receipt ``key`` in a fresh transaction, fencing it if absent; return the
    attempt number that committed, or :data:`FENCE` if none did (and none can now).

    Raises:
        FDBError: the settling transaction itself failed (not retryable, or it
            timed out after :data:`SETTLE_TIMEOUT_MS`).
    """
    impl = fdb_impl()
    tr = db.create_transaction()
    tr.options.set_timeout(SETTLE_TIMEOUT_MS)
    tr.options.set_retry_limit(-1)
    while True:
        try:
            data = get_value(tr.get(key))
            if data is not None:
                found: int = fdb.tuple.unpack(data)[0]
                return found
            tr.set(key, fdb.tuple.pack((FENCE,)))
            tr.commit().wait()
            return FENCE
        except impl.FDBError as e:
            tr.on_error(e).wait()


class Call:
    """One library call's receipt, across its attempts (see the module docstring)."""

    __slots__ = ("attempts", "clearing", "db", "doubt", "key", "receipts", "results",
                 "spent", "sweeping")

    def __init__(self, receipts: Receipts, db: Any) -> None:
        self.receipts = receipts
        self.db = db
        self.spent = spent_of(db)
        self.key: Optional[bytes] = None  # the call's receipt, named at its first write
        self.results: Dict[int, Any] = {}  # attempt number -> result, for signed attempts
        self.doubt = False  # a signed attempt failed in a way that may have committed
        self.attempts = 0
        self.sweeping = receipts.sweeps()  # at the first attempt that signs
        self.clearing: Optional[List[bytes]] = None  # spent receipts it clears

    def settled(self, tr: Any) -> Tuple[bool, Any]:
        """Before an attempt: (True, result) if an earlier attempt did commit.

        Raises:
            UnknownResultError: the receipt is absent, but the call began so long ago
                that a sweep may have removed it: absence proves nothing.
        """
        self.attempts += 1
        if not (self.doubt and self.key is not None):
            return False, None
        data = get_value(tr.get(self.key))
        if data is not None:
            return True, self.results[fdb.tuple.unpack(data)[0]]
        now: int = tr.get_read_version().wait()
        signed_at = self.receipts.space.unpack(self.key)[0]
        if now - signed_at > TRUST_ABSENCE * VERSIONS_PER_SECOND:
            raise self.unknown("the call's receipt is older than half its retention; "
                               "its absence no longer proves the attempt did not commit")
        return False, None

    def sign(self, tr: Any, result: Any) -> None:
        """After an attempt's body: write the receipt, with a read conflict on it, and
        clear spent receipts (the same ones in every attempt)."""
        if self.key is None:
            version: int = tr.get_read_version().wait()
            self.key = bytes(self.receipts.space.pack((version, random_id())))
        self.results[self.attempts] = result
        tr.add_read_conflict_key(self.key)
        tr.set(self.key, fdb.tuple.pack((self.attempts,)))
        if self.clearing is None:
            self.clearing = self.spent.take()
        for key in self.clearing:
            tr.clear(key)
        if self.sweeping:
            self.sweep(tr)

    def sweep(self, tr: Any) -> None:
        """Clear this structure's receipts older than :data:`RECEIPT_RETENTION`."""
        r = self.receipts.space.range()
        old = tr.snapshot.get_range(r.start, r.stop, limit=RECEIPT_GC_BATCH,
                                    streaming_mode=WANT_ALL)
        horizon = tr.get_read_version().wait() - RECEIPT_RETENTION * VERSIONS_PER_SECOND
        for kv in old:
            if self.receipts.space.unpack(kv.key)[0] >= horizon:
                break
            tr.clear(kv.key)
        self.sweeping = False

    def failed(self, code: Optional[int]) -> None:
        """A signed attempt failed after its commit was sent: FDBError ``code``, or
        None for any other exception.  Anything but a conflict leaves it in doubt."""
        self.doubt = self.doubt or code != NOT_COMMITTED

    def settle(self) -> Outcome:
        """Settle a doubtful call before it raises (see the module docstring).

        Raises:
            UnknownResultError: settling failed too.
        """
        assert self.key is not None
        try:
            attempt = settle(self.db, self.key)
        except Exception as e:
            raise self.unknown(f"settling failed too ({e})") from e
        if attempt == FENCE:
            return Outcome(False, None)
        return Outcome(True, self.results[attempt])

    def unknown(self, why: str) -> UnknownResultError:
        """The error for a call whose outcome cannot be learnt now."""
        assert self.key is not None
        return UnknownResultError(
            f"the call may or may not have committed: {why}", self.key, dict(self.results))

    def end(self, committed: bool) -> None:
        """The call returns: its receipt is spent; clears that may not have committed
        go back to the pool."""
        spent = [] if committed else list(self.clearing or ())
        if self.key is not None:
            spent.append(self.key)
        self.spent.give_back(spent)
