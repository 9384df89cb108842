"""Commit receipts: how a library retry loop settles ``commit_unknown_result``.

FoundationDB raises ``commit_unknown_result`` (1021) when it cannot tell whether a
commit happened; ``@fdb.transactional`` then runs the function again, which may do
its work twice (a second push) or lose it (a pop whose item is gone).  A library
call given a Database instead writes, in every attempt that writes anything, a
receipt ``c/(process token, thread, slot number) = call id, version, attempt`` in
its *receipt slot*, and takes a read conflict on it.  After an attempt fails in
a way that may have committed, the next attempt first reads the slot:

* it names this call: that attempt committed; the call returns that attempt's result.
* it does not: no attempt has committed before this one's read version.  An earlier
  attempt still in flight either lands before this attempt commits, and this
  attempt conflicts on its read of the slot (the retry after that finds it), or
  lands after, and then it conflicts itself, on its read conflict on the slot this
  attempt wrote.  At most one attempt of a call ever commits.

Each running call of a thread has a slot of its own (the lowest free number), and
the thread's next call simply overwrites it: nothing to clear, one small key per
client thread.  A call that must stop while an
attempt is in doubt (a timeout, an exhausted retry limit, an error raised by the
operation, Ctrl-C) first *settles*: a fresh transaction reads the slot and, if it
does not name the call, writes a fence there, so the doubtful attempt can never
commit.  Then the call knows, and returns the committed attempt's result or raises;
if even settling fails it raises :class:`UnknownResultError`, which can settle later,
and its slot is never used again: it keeps the evidence.  Slots
left by processes that exited are cleared once older than :data:`RECEIPT_RETENTION`
by an occasional snapshot scan.  See docs/design.md.
"""

from __future__ import annotations

import itertools
import logging
import os
import struct
import threading
from typing import Any, Dict, NamedTuple, Optional, Set, Tuple

from fdb.subspace_impl import Subspace

from ._drivers.blocking import drive
from ._fdb import NOT_COMMITTED, VERSIONS_PER_SECOND, Gen, Range, fdb_impl, read, ready
from .errors import FdbRecipesError

log = logging.getLogger("fdbrecipes")

#: Seconds after which a receipt left behind (by a client that exited) is cleared.
RECEIPT_RETENTION = 3600
#: A retry that finds no receipt older than this (seconds) cannot tell "never
#: committed" from "committed, and the receipt was swept": it raises instead.
TRUST_ABSENCE = RECEIPT_RETENTION / 2
#: A structure object looks for receipts left behind at its 1st, 17th, 33rd... call,
#: and clears at most this many per look.
RECEIPT_GC_EVERY, RECEIPT_GC_BATCH = 16, 64
#: Milliseconds a settling transaction may take, whatever the database's options.
SETTLE_TIMEOUT_MS = 30_000
#: The attempt number a fence writes: no attempt (attempts count from 1).
FENCE = 0


class Outcome(NamedTuple):
    """How a doubtful call ended: whether it committed, and then its result."""

    committed: bool
    result: Any


def outcome(attempt: int, results: Dict[int, Any]) -> Outcome:
    """The outcome :func:`settle` found: no attempt committed (:data:`FENCE`), or
    attempt ``attempt``, whose result is in ``results``."""
    if attempt == FENCE:
        return Outcome(False, None)
    return Outcome(True, results[attempt])


class UnknownResultError(FdbRecipesError):
    """A call stopped while a commit of it may have gone through, and could not find
    out (settling failed too: the cluster was unreachable, say).

    It carries what is needed to find out later: ``error.settle(db)`` reads the
    call's receipt and, if it is absent, fences it so the doubtful attempt can never
    commit; either way it returns the :class:`Outcome`.

    Attributes:
        receipt: the key of the call's receipt slot.
        call_id: the call's id, which the receipt names if an attempt committed.
        results: the result of each attempt that may have committed, by number.
    """

    def __init__(self, message: str, receipt: bytes, call_id: bytes,
                 results: Dict[int, Any]) -> None:
        super().__init__(message)
        self.receipt = receipt
        self.call_id = call_id
        self.results = results

    def settle(self, db: Any) -> Outcome:
        """Learn the call's outcome now (see the class docstring).

        Raises:
            fdb.FDBError: the cluster still cannot be reached.
        """
        return drive(self.settling(db))

    def settling(self, db: Any) -> Gen[Outcome]:
        """:meth:`settle` as an operation (for the awaiting driver)."""
        return outcome((yield from settle(db, self.receipt, self.call_id)), self.results)


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


#: A receipt's value: the call id (16 bytes), the version it was signed at, the attempt.
_RECEIPT = struct.Struct("<16sqH")


class Process:
    """This process's token (new after a fork) and the receipt slots its threads use.

    A thread makes one call at a time, but a call may start another inside it (a
    callback), and an event loop runs many: each running call of a thread has a slot
    number of its own, the lowest free one.  A thread's slots are mostly written by
    that thread alone, so a call that reads at the version of its thread's previous
    commit does not conflict on its own slot.  The bookkeeping is as large as the
    calls running at once: a thread with no call running has none.  A slot left to a
    call that could not settle is never used again.
    """

    __slots__ = ("busy", "calls", "lock", "pid", "retired", "token")

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.token = os.urandom(8)
        self.calls = itertools.count()  # numbers this process's call ids
        self.busy: Dict[int, Set[int]] = {}  # thread ident -> slot numbers in use
        self.retired: Dict[int, Set[int]] = {}  # thread ident -> slots left to evidence
        self.lock = threading.Lock()

    def acquire(self) -> Tuple[bytes, int, int]:
        """A free slot for a call starting in this thread: (token, thread, number)."""
        thread = threading.get_ident()
        with self.lock:
            busy = self.busy.setdefault(thread, set())
            retired = self.retired.get(thread, ())
            number = 0
            while number in busy or number in retired:
                number += 1
            busy.add(number)
        return self.token, thread, number

    def call_id(self) -> bytes:
        """A new call id, never made before by any process: this process's token and
        the call's number in it (16 bytes, as a receipt holds)."""
        return self.token + next(self.calls).to_bytes(8, "big")

    def release(self, slot: Tuple[bytes, int, int], retire: bool) -> None:
        """The call using ``slot`` ended; ``retire``: never use the slot again."""
        _, thread, number = slot
        with self.lock:
            busy = self.busy[thread]
            busy.discard(number)
            if not busy:
                del self.busy[thread]
            if retire:
                self.retired.setdefault(thread, set()).add(number)


_PROCESS = Process()


def _forked() -> None:
    """In a child made by ``os.fork``: a receipt identity of its own."""
    global _PROCESS
    _PROCESS = Process()


#: Whether a fork replaces the identity itself (POSIX), so that no call asks for the
#: process id (a system call).
_FORK_AWARE = hasattr(os, "register_at_fork")
if _FORK_AWARE:
    os.register_at_fork(after_in_child=_forked)


def this_process() -> Process:
    """The current process's receipt identity (new in a forked child)."""
    if not _FORK_AWARE and _PROCESS.pid != os.getpid():
        _forked()
    return _PROCESS


class Receipts:
    """Where one structure keeps its receipt slots, and when it sweeps old ones."""

    __slots__ = ("calls", "local", "lock", "space")

    def __init__(self, subspace: Subspace) -> None:
        self.space = subspace["c"]
        self.calls = itertools.count(1)  # numbers this structure's calls (atomic: no lock)
        self.local = threading.local()  # .keys: slot -> its key, for this thread's slots

    def key(self, slot: Tuple[bytes, int, int]) -> bytes:
        """The key of receipt slot ``slot`` in this structure (kept per thread, and
        forgotten with the thread)."""
        keys: Optional[Dict[Tuple[bytes, int, int], bytes]] = getattr(self.local, "keys", None)
        if keys is None:
            keys = self.local.keys = {}
        key = keys.get(slot)
        if key is None:
            key = keys[slot] = bytes(self.space.pack(slot))
        return key

    def sweeps(self) -> bool:
        """Whether this call looks for receipts left behind (calls 1, 17, 33...)."""
        return next(self.calls) % RECEIPT_GC_EVERY == 1


def receipt(call_id: bytes, version: int, attempt: int) -> bytes:
    """A receipt's value."""
    return _RECEIPT.pack(call_id, version, attempt)


def read_receipt(data: Optional[bytes]) -> Tuple[bytes, int, int]:
    """(call id, version, attempt) of a receipt's value (empty for an absent one)."""
    if data is None or len(data) != _RECEIPT.size:
        return b"", 0, FENCE
    call_id, version, attempt = _RECEIPT.unpack(data)
    return call_id, version, attempt


def settle(db: Any, key: bytes, call_id: bytes) -> Gen[int]:
    """Read receipt slot ``key`` in a fresh transaction, fencing it unless it names
    ``call_id``; return the attempt of that call that committed, or :data:`FENCE` if
    none did (and none can now).

    Raises:
        fdb.FDBError: the settling transaction itself failed (not retryable, or it
            timed out after :data:`SETTLE_TIMEOUT_MS`).
    """
    impl = fdb_impl()
    tr = db.create_transaction()
    tr.options.set_timeout(SETTLE_TIMEOUT_MS)
    tr.options.set_retry_limit(-1)
    while True:
        try:
            found, _, attempt = read_receipt((yield from read(tr.get(key))))
            if found == call_id:
                return attempt
            version = yield from ready(tr.get_read_version())
            tr.set(key, receipt(call_id, version, FENCE))
            yield from ready(tr.commit())
            return FENCE
        except impl.FDBError as e:
            yield from ready(tr.on_error(e))


class Call:
    """One library call's receipt, across its attempts (see the module docstring)."""

    __slots__ = ("attempts", "call_id", "db", "doubt", "key", "landed_undo", "process",
                 "receipts", "results", "retire", "signed_at", "slot", "sweeping", "swept",
                 "undos")

    def __init__(self, receipts: Receipts, db: Any) -> None:
        self.receipts = receipts
        self.db = db
        self.process = this_process()
        self.slot = self.process.acquire()
        self.key = receipts.key(self.slot)  # this call's receipt slot
        self.retire = False  # the slot keeps evidence of a call that could not settle
        self.call_id = self.process.call_id()
        self.results: Dict[int, Any] = {}  # attempt number -> result, for signed attempts
        self.undos: Dict[int, Any] = {}  # attempt number -> what undoes it, if anything
        self.landed_undo: Any = None  # what undoes the attempt settling found landed
        self.doubt = False  # a signed attempt failed in a way that may have committed
        self.attempts = 0
        self.signed_at = 0  # read version of the first signed attempt
        self.sweeping = receipts.sweeps()  # at the first attempt that signs
        self.swept: Any = None  # the sweep's read, started as the attempt began

    def begin(self, tr: Any) -> bool:
        """Before an attempt (in ``tr``): whether an earlier attempt is in doubt (then
        :meth:`settled` says whether it committed).  A call that sweeps starts the
        sweep's read now: it is there when the attempt signs."""
        self.attempts += 1
        if self.sweeping:
            r = self.receipts.space.range()
            self.swept = Range(tr.snapshot, r.start, r.stop, RECEIPT_GC_BATCH)
        return self.doubt

    def settled(self, tr: Any) -> Gen[Tuple[bool, Any]]:
        """Before an attempt that :meth:`begin` found in doubt: (True, result) if an
        earlier attempt did commit.

        Raises:
            UnknownResultError: the receipt is absent, but the call began so long ago
                that a sweep may have removed it: absence proves nothing.
        """
        found, _, attempt = read_receipt((yield from read(tr.get(self.key))))
        if found == self.call_id:
            self.landed_undo = self.undos.get(attempt)
            return True, self.results[attempt]
        now: int = yield from ready(tr.get_read_version())
        if now - self.signed_at > TRUST_ABSENCE * VERSIONS_PER_SECOND:
            raise self.unknown("the call's receipt is older than half its retention; "
                               "its absence no longer proves the attempt did not commit")
        return False, None

    def sign(self, tr: Any, version: int, result: Any, undo: Any = None) -> None:
        """After an attempt's body: write the receipt, with a read conflict on it
        (``version``: the transaction's read version); ``undo``: what would undo the
        attempt (see ``_attempt.Attempt.undo``).  A call that sweeps then sweeps
        (:meth:`sweep`)."""
        if not self.signed_at:
            self.signed_at = version
        self.results[self.attempts] = result
        if undo is not None:
            self.undos[self.attempts] = undo
        tr.add_read_conflict_key(self.key)
        tr.set(self.key, receipt(self.call_id, version, self.attempts))

    def sweep(self, tr: Any, now: int) -> Gen[None]:
        """Clear this structure's receipt slots not written for :data:`RECEIPT_RETENTION`
        (once a call whose :attr:`sweeping` is set has signed, in that attempt)."""
        horizon = now - RECEIPT_RETENTION * VERSIONS_PER_SECOND
        for kv in (yield from self.swept.read()):
            if read_receipt(kv.value)[1] < horizon and kv.key != self.key:
                tr.clear(kv.key)
        self.sweeping = False

    def failed(self, code: Optional[int]) -> None:
        """A signed attempt failed after its commit was sent: FDBError ``code``, or
        None for any other exception.  Anything but a conflict leaves it in doubt."""
        self.doubt = self.doubt or code != NOT_COMMITTED

    def settle(self) -> Gen[Outcome]:
        """Settle a doubtful call before it raises (see the module docstring); what
        undoes the attempt that landed, if one did, is then :attr:`landed_undo`.

        Raises:
            UnknownResultError: settling failed too.
        """
        try:
            attempt = yield from settle(self.db, self.key, self.call_id)
        except Exception as e:
            raise self.unknown(f"settling failed too ({e})") from e
        self.landed_undo = self.undos.get(attempt)
        return outcome(attempt, self.results)

    def end(self) -> None:
        """The call returns or raises: its slot is free again (unless retired)."""
        self.process.release(self.slot, self.retire)

    def unknown(self, why: str) -> UnknownResultError:
        """The error for a call whose outcome cannot be learnt now; the slot is left
        to it, as evidence for :meth:`UnknownResultError.settle`."""
        self.retire = True
        log.error("a call's outcome is unknown (%s); UnknownResultError.settle(db) finds it "
                  "out later", why)
        return UnknownResultError(f"the call may or may not have committed: {why}",
                                  self.key, self.call_id, dict(self.results))
