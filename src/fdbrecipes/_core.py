"""What the structures share: transaction plumbing, validation, encoding, keys.

Nothing here is public API; the public modules re-export what users need.

The module deliberately does not import ``fdb.impl`` at import time: that module
loads ``libfdb_c``, and ``import fdbrecipes`` must work where the C library is
missing (for type checking, docs and ``--help``).  The classes that tell a
Transaction from a Database are looked up when a structure is first used, after
the application has called ``fdb.api_version()``.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
import uuid
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    cast,
)

import fdb
import fdb.tuple
from fdb.subspace_impl import Subspace

__all__ = [
    "Attempt",
    "FdbRecipesError",
    "LeaseExpiredError",
    "Transactor",
    "Value",
]

T = TypeVar("T")

#: What a method's ``tr`` argument may be: an ``fdb.Transaction`` (the call becomes
#: part of the caller's transaction) or an ``fdb.Database`` / ``fdb.Tenant`` (the call
#: runs in its own retry loop, like a function decorated with ``@fdb.transactional``).
Transactor = Any

#: A value a structure can store: one tuple-encodable value, returned exactly as given.
Value = Union[bytes, str, int, float, bool, uuid.UUID, Tuple[Any, ...]]

# --------------------------------------------------------------------------------------
# Limits (FoundationDB's documented limits; see docs/limits)
# --------------------------------------------------------------------------------------

#: Largest encoded value FoundationDB stores under one key.
MAX_VALUE_BYTES = 100_000
#: Largest key FoundationDB accepts.
MAX_KEY_BYTES = 10_000
#: FoundationDB refuses transactions whose writes exceed 10,000,000 bytes (error 2101).
#: A batch is refused above this budget, which leaves room for keys, conflict ranges
#: and the caller's own writes.
MAX_BATCH_BYTES = 9_000_000
#: Bytes a write costs beyond its key and value, a rough upper bound of FoundationDB's
#: own accounting per mutation.
MUTATION_OVERHEAD = 64
#: Versions per second: FoundationDB's read versions advance about 1,000,000 per second.
VERSIONS_PER_SECOND = 1_000_000
#: Lowest API version the library supports.
MIN_API_VERSION = 630

NOT_COMMITTED = 1020
WANT_ALL = -2  # fdb.StreamingMode.want_all, usable before the API version is selected


class FdbRecipesError(Exception):
    """Base class of the library's own errors."""


class LeaseExpiredError(FdbRecipesError):
    """A lease was used after it expired, or after its item was taken back.

    Once a lease's deadline has passed, its item may already have been delivered to
    another consumer, so ``ack`` and ``extend`` refuse it.
    """


# --------------------------------------------------------------------------------------
# The fdb classes, looked up lazily
# --------------------------------------------------------------------------------------


def fdb_impl() -> Any:
    """Return ``fdb.impl`` once the application has selected an API version.

    Raises:
        RuntimeError: no API version is selected yet, or it is below 630.
    """
    if not fdb.is_api_version_selected():
        raise RuntimeError(
            "fdbrecipes needs the FoundationDB API version selected first: call "
            "fdb.api_version(730) (or any version >= 630) before using a structure"
        )
    version = fdb.get_api_version()
    if version < MIN_API_VERSION:
        raise RuntimeError(
            f"fdbrecipes supports FoundationDB API versions >= {MIN_API_VERSION}; "
            f"this process selected {version}"
        )
    return sys.modules["fdb.impl"]


class Stats:
    """Counters a structure keeps about its own retry loops (for benchmarks, metrics).

    Attributes:
        retries: transactions that failed and were retried (conflicts and other
            retryable errors) in loops the structure runs itself, that is, in calls
            given a Database.  Updated without a lock: exact with one thread per
            structure object, approximate otherwise.
        last_conflict: ``time.monotonic()`` of the latest conflict (1020) among them.
    """

    __slots__ = ("last_conflict", "retries")

    def __init__(self) -> None:
        self.retries = 0
        self.last_conflict = float("-inf")


class Attempt:
    """What a body tells :func:`run` about one attempt.

    Attributes:
        idle: the attempt wrote nothing (an empty pop, a refused release), so its
            commit needs no receipt.  Bodies set it; it starts False.
    """

    __slots__ = ("idle",)

    def __init__(self) -> None:
        self.idle = False


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
    by an occasional snapshot scan of the oldest ones.
    """

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
    """One library call's retry loop with receipts (see :class:`Receipts`)."""

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


class Writes:
    """A structure's retry loop for calls that write: :func:`run` with the retries
    counted in :attr:`stats` and ``commit_unknown_result`` settled by :attr:`receipts`."""

    __slots__ = ("receipts", "stats")

    def __init__(self, subspace: Subspace) -> None:
        self.stats = Stats()
        self.receipts = Receipts(subspace)

    def __call__(self, tr: Transactor, body: Callable[[Any, Attempt], T]) -> T:
        return run(tr, body, stats=self.stats, receipts=self.receipts)


def run(
    tr: Transactor,
    body: Callable[[Any, Attempt], T],
    *,
    writes: bool = True,
    stats: Optional[Stats] = None,
    receipts: Optional[Receipts] = None,
) -> T:
    """Run ``body(transaction, attempt)`` in the caller's transaction or a retry loop.

    Given a Transaction, the body runs once inside it and nothing is committed (the
    caller owns the transaction).  Given a Database or Tenant, the body runs in a new
    transaction which is committed; retryable errors retry as ``@fdb.transactional``
    does, except that with ``receipts`` a ``commit_unknown_result`` is settled
    exactly: the call returns the result of the attempt that committed, and no
    attempt's work is done twice.  Read-only calls (``writes=False``) also accept a
    snapshot view (``tr.snapshot``).

    Raises:
        TypeError: ``tr`` is neither a Transaction nor a Database/Tenant.
    """
    impl = fdb_impl()
    if isinstance(tr, impl.Transaction) or (
        not writes and isinstance(tr, impl.TransactionRead)
    ):
        return body(tr, Attempt())
    check_transactor(tr)
    transaction = tr.create_transaction()
    call = Call(receipts) if receipts is not None else None
    committed = False
    try:
        while True:
            attempt = Attempt()
            signed = False
            try:
                if call is not None:
                    done, result = call.settled(transaction)
                    if done:
                        return cast(T, result)
                result = body(transaction, attempt)
                if call is not None and (call.doubt or not attempt.idle):
                    # (after a doubtful attempt even an idle one signs: its write of
                    # the receipt makes the doubtful one conflict if it lands later)
                    call.sign(transaction)
                    signed = True
                transaction.commit().wait()
                committed = True
                return result
            except impl.FDBError as e:
                if stats is not None:
                    stats.retries += 1
                    if e.code == NOT_COMMITTED:
                        stats.last_conflict = time.monotonic()
                if call is not None and signed:
                    call.failed(result, e.code)
                transaction.on_error(e).wait()
    finally:
        if call is not None:
            call.end(committed)


def check_transactor(tr: Transactor, *, writes: bool = True) -> None:
    """Raise TypeError unless ``tr`` is something :func:`run` accepts."""
    impl = fdb_impl()
    allowed: Tuple[type, ...] = (impl.Transaction, impl.Database, impl.Tenant)
    if not writes:
        allowed += (impl.TransactionRead,)
    if not isinstance(tr, allowed):
        raise TypeError(
            "tr must be an fdb Transaction, Database or Tenant, not "
            f"{type(tr).__name__}"
        )


def check_database(db: Any, name: str = "db") -> Any:
    """Return ``db`` if it is a Database or Tenant, else raise TypeError."""
    impl = fdb_impl()
    if not isinstance(db, (impl.Database, impl.Tenant)):
        raise TypeError(
            f"{name} must be an fdb Database or Tenant (this call runs its own "
            f"transactions), not {type(db).__name__}"
        )
    return db


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------


def check_subspace(subspace: Any) -> Subspace:
    """Return ``subspace`` if it is an ``fdb.Subspace`` (or DirectorySubspace)."""
    if not isinstance(subspace, Subspace):
        raise TypeError(
            "subspace must be an fdb.Subspace (or a DirectorySubspace), not "
            f"{type(subspace).__name__}"
        )
    return subspace


def check_int(
    value: Any,
    name: str,
    *,
    low: Optional[int] = None,
    high: Optional[int] = None,
) -> int:
    """Return ``value`` if it is an int (not a bool) within [low, high]."""
    if type(value) is not int:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value}")
    return value


def check_seconds(value: Any, name: str) -> float:
    """Return ``value`` as float seconds if it is a positive finite real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    seconds = float(value)
    if not (0 < seconds < 1e9):
        raise ValueError(f"{name} must be > 0 and finite, got {value!r}")
    return seconds


def check_timeout(value: Any) -> Optional[float]:
    """Return a timeout in seconds (None = wait forever); 0 is allowed."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"timeout must be None or seconds, not {type(value).__name__}")
    if not (0 <= float(value) < 1e9):
        raise ValueError(f"timeout must be >= 0 and finite, got {value!r}")
    return float(value)


#: Largest idempotency id, in bytes.
MAX_ID_BYTES = 1_000


def check_id(value: Any) -> Optional[bytes]:
    """Return an idempotency id: None, or 1 to 1,000 bytes."""
    if value is None:
        return None
    if type(value) is not bytes:
        raise TypeError(f"id must be bytes, not {type(value).__name__}")
    if not 0 < len(value) <= MAX_ID_BYTES:
        raise ValueError(f"id must be 1 to {MAX_ID_BYTES} bytes, got {len(value)}")
    return value


_SCALARS = (bytes, str, int, float, bool, uuid.UUID)


def _check_encodable(value: Any, name: str, nested: bool) -> None:
    kind = type(value)
    if kind in _SCALARS:
        return
    if value is None and nested:
        return
    if kind is tuple:
        for element in value:
            _check_encodable(element, name, True)
        return
    if value is None:
        raise ValueError(
            f"{name} must not be None (pop returns None to mean 'empty')"
        )
    raise TypeError(
        f"{name} must be bytes, str, int, float, bool, uuid.UUID or a tuple of "
        f"these, not {kind.__name__}"
    )


def encode_value(value: Any, name: str = "value") -> bytes:
    """Tuple-pack one value; raise TypeError/ValueError naming ``name`` if impossible.

    Only types that round-trip exactly are accepted (subclasses such as IntEnum,
    lists and the tuple layer's Versionstamp are refused).  ``None`` is refused at top
    level (it means "empty" to pop) but allowed inside a tuple.
    """
    _check_encodable(value, name, False)
    try:
        packed: bytes = fdb.tuple.pack((value,))
    except Exception as e:  # UnicodeEncodeError, struct.error for ints beyond 2**2040
        raise ValueError(f"{name} cannot be tuple-encoded: {e}") from None
    if len(packed) > MAX_VALUE_BYTES:
        raise ValueError(
            f"{name} encodes to {len(packed):,} bytes; FoundationDB stores at most "
            f"{MAX_VALUE_BYTES:,} bytes per value"
        )
    return packed


def decode_value(data: bytes) -> Value:
    """Inverse of :func:`encode_value`."""
    return cast(Value, fdb.tuple.unpack(data)[0])


def check_batch_bytes(total: int, count: int, name: str) -> None:
    """Refuse a batch whose writes would not fit in one transaction."""
    if total > MAX_BATCH_BYTES:
        raise ValueError(
            f"{name}: {count:,} items need about {total:,} bytes of writes, over the "
            f"{MAX_BATCH_BYTES:,}-byte budget for one transaction (FoundationDB "
            f"refuses transactions over 10,000,000 bytes); split the batch"
        )


def check_key(key: bytes, name: str) -> bytes:
    """Refuse a key FoundationDB would refuse (over 10,000 bytes)."""
    if len(key) > MAX_KEY_BYTES:
        raise ValueError(
            f"{name} makes a key of {len(key):,} bytes; FoundationDB keys are at "
            f"most {MAX_KEY_BYTES:,} bytes"
        )
    return key


def materialize(values: Iterable[Any], name: str) -> List[Any]:
    """Turn an iterable argument into a list (a TypeError names it otherwise)."""
    if isinstance(values, (bytes, str)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be an iterable of items, not {type(values).__name__}")
    return list(values)


# --------------------------------------------------------------------------------------
# Keys, counters, futures
# --------------------------------------------------------------------------------------


def random_suffix() -> bytes:
    """20 random bytes: two writers that chose the same position still write distinct keys."""
    return os.urandom(20)


def random_id() -> bytes:
    """16 random bytes naming a lease or a pop request."""
    return os.urandom(16)


_LE64 = struct.Struct("<q")
ZERO = _LE64.pack(0)


def le64(n: int) -> bytes:
    """Little-endian int64, the format of FoundationDB's atomic ADD."""
    return _LE64.pack(n)


def read_le64(data: Optional[bytes]) -> int:
    """Decode a counter written by atomic ADD; a missing key is 0."""
    if not data:
        return 0
    return int(_LE64.unpack(data[:8].ljust(8, b"\x00"))[0])


def add(tr: Any, key: bytes, delta: int) -> None:
    """Atomically add ``delta`` to a counter; clear it when it reaches zero.

    Atomic adds take no read conflict, so concurrent writers never conflict on a
    counter.  ``compare_and_clear`` after a decrement removes a counter that dropped
    to zero, so counters of an empty structure leave no keys behind.
    """
    if delta == 0:
        return
    tr.add(key, le64(delta))
    if delta < 0:
        tr.compare_and_clear(key, ZERO)


def get_value(future: Any) -> Optional[bytes]:
    """The bytes of a ``tr.get`` future, or None when the key is absent."""
    value: Optional[bytes] = future.wait().value
    return value


def wait_ready(future: Any, timeout: Optional[float]) -> bool:
    """Block until ``future`` is ready or ``timeout`` seconds pass; True if ready.

    The future's outcome (a value or an error) is not inspected: callers use this for
    watches, where any outcome means "look again".
    """
    if future.is_ready():
        return True
    event = threading.Event()
    future.on_ready(lambda _f: event.set())
    return event.wait(timeout)


def wait_on_watch(watch: Any, timeout: Optional[float]) -> None:
    """Block until ``watch`` fires or ``timeout`` seconds pass (None: no limit).

    A watch that fails instead of firing (too many watches, a cancelled transaction)
    would otherwise return at once, again and again: then wait out a short backoff.
    """
    if not wait_ready(watch, timeout):
        watch.cancel()
        return
    try:
        watch.wait()
    except fdb_impl().FDBError:
        backoff = WATCH_FAILURE_BACKOFF
        time.sleep(backoff if timeout is None else min(timeout, backoff))


#: Seconds to back off when a watch fails instead of firing.
WATCH_FAILURE_BACKOFF = 0.05


class Clock(Protocol):
    """Where a structure reads the time: microseconds, agreed by every client."""

    def __call__(self, tr: Any) -> int: ...


def database_clock(tr: Any) -> int:
    """The transaction's read version: ~1,000,000 per second, the same for all clients.

    Client clocks may be skewed; read versions come from the cluster.  During a
    recovery versions can jump ahead, which makes leases expire early (never late).
    """
    version: int = tr.get_read_version().wait()
    return version


def seconds_to_versions(seconds: float) -> int:
    """Convert seconds to read-version units."""
    return max(1, int(seconds * VERSIONS_PER_SECOND))


def snap(tr: Any) -> Any:
    """The snapshot view of ``tr`` (``tr`` itself when it is one already)."""
    return getattr(tr, "snapshot", tr)


def first(kvs: Iterable[Any]) -> Optional[Any]:
    """The first KeyValue of a range read, or None."""
    for kv in kvs:
        return kv
    return None


class Ids:
    """Idempotency ids: ``ids/(id)`` exists while an id is remembered.

    A push with an id reads its id key (a read conflict on that key only, so pushes
    with different ids never conflict); when the item leaves the structure for good,
    ``gc/(expiry, id)`` schedules the id to be forgotten after the retention period.
    Pushes with ids collect a few expired ids each, so ids do not pile up.
    """

    __slots__ = ("gc", "ids", "retention")

    def __init__(self, subspace: Subspace, retention: float) -> None:
        self.ids = subspace["k"]
        self.gc = subspace["g"]
        self.retention = seconds_to_versions(retention)

    def key(self, id_: bytes) -> bytes:
        return bytes(self.ids.pack((id_,)))

    def start_collect(self, tr: Any) -> Any:
        """Start a snapshot read of the oldest scheduled expiries (no conflicts)."""
        r = self.gc.range()
        return tr.snapshot.get_range(r.start, r.stop, limit=4, streaming_mode=WANT_ALL)

    def collect(self, tr: Any, started: Any, now: int) -> None:
        """Forget the ids whose retention has passed (from :meth:`start_collect`)."""
        for kv in started:
            expiry, id_ = self.gc.unpack(kv.key)
            if expiry > now:
                break
            tr.clear(kv.key)
            tr.clear(self.key(id_))

    def retire(self, tr: Any, id_: Optional[bytes], now: int) -> None:
        """An item with this id left the structure: forget the id after retention."""
        if id_ is not None:
            tr.set(self.gc.pack((now + self.retention, id_)), b"")


def check_retention(value: Any) -> float:
    """Validate ``id_retention`` (seconds an id is remembered after its item left)."""
    return check_seconds(value, "id_retention")


def wait_for_wake(
    db: Any,
    wake_key: bytes,
    ready: Callable[[Any], Tuple[bool, Optional[float]]],
    deadline: Optional[float],
) -> None:
    """Block until ``ready(tr)`` may have become true, or until ``deadline``.

    ``ready`` returns ``(ready now, seconds until it may become ready without a
    write, or None)``.  If not ready, a watch is set on ``wake_key`` (which every
    push touches) in the same transaction, which writes nothing: a push that commits
    after the check changes the key after the watch's read version, so the watch
    fires and no wake-up is lost.  ``deadline`` is a ``time.monotonic()`` value.
    """
    impl = fdb_impl()
    tr = db.create_transaction()
    while True:
        try:
            is_ready, hint = ready(tr)
            if is_ready:
                return
            watch = tr.watch(wake_key)
            tr.commit().wait()
            break
        except impl.FDBError as e:
            tr.on_error(e).wait()
    timeout = hint
    if deadline is not None:
        remaining = max(0.0, deadline - time.monotonic())
        timeout = remaining if timeout is None else min(timeout, remaining)
    wait_on_watch(watch, timeout)



# --------------------------------------------------------------------------------------
# Leases
# --------------------------------------------------------------------------------------


class Lease:
    """A claimed item, hidden from other consumers until ack, release or expiry.

    Attributes:
        value: the item's value.
        deliveries: how many times the item has been delivered, this time included
            (1 the first time; more after leases expired or were released).
        deadline: when the lease expires, in the cluster's read-version units
            (about 1,000,000 per second).
        token: bytes naming the lease; ``ack``/``extend``/``release`` accept the token in
            place of the Lease, so another process can finish the work.
    """

    __slots__ = ("deadline", "deliveries", "token", "value")

    def __init__(self, value: Any, deliveries: int, deadline: int, token: bytes) -> None:
        self.value = value
        self.deliveries = deliveries
        self.deadline = deadline
        self.token = token

    def __repr__(self) -> str:
        return (
            f"Lease(value={self.value!r}, deliveries={self.deliveries}, "
            f"deadline={self.deadline})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lease) and other.token == self.token

    def __hash__(self) -> int:
        return hash(self.token)


def lease_parts(lease: Any) -> Tuple[bytes, Tuple[Any, ...], int]:
    """Split a Lease or its token into (lease id, item tuple, deadline)."""
    token = lease.token if isinstance(lease, Lease) else lease
    if type(token) is not bytes:
        raise TypeError(f"lease must be a Lease or its token (bytes), not {type(lease).__name__}")
    try:
        lease_id, item, deadline = fdb.tuple.unpack(token)
    except Exception:
        raise ValueError("lease is not a token made by this library") from None
    if type(lease_id) is not bytes or type(item) is not tuple or type(deadline) is not int:
        raise ValueError("lease is not a token made by this library")
    return lease_id, item, deadline


# --------------------------------------------------------------------------------------
# Ordered items: the engine behind Queue and PriorityQueue
# --------------------------------------------------------------------------------------

MIN, MAX = 0, 1  # the end of the order a pop takes from
LEASE, RESULT = 0, 1  # why an item is held: a consumer's lease, or a high-contention result
EXPIRED_BATCH = 16  # expired holds one pop looks at, and puts back, per transaction
HC_BATCH = 64  # pop requests one high-contention fulfilment serves at most
HC_BATCH_BYTES = 4_000_000  # value bytes one fulfilment moves at most
HC_FIRST_WAIT = 0.002  # seconds a waiting popper first waits for its request's watch
HC_MAX_WAIT = 0.1  # ... doubling up to this
HC_STALE = 0.5  # seconds after which any waiter serves a request whose owner is silent
HC_CONTENDED = 1.0  # seconds a popper stays in high-contention mode after a conflict
RESTART = object()  # a high-contention pop lost its request: start over
WAIT = object()  # ... is still waiting
AGAIN = object()  # ... served others first: look again at once


class Entry:
    """One item at the front of the order, visible or held under an expired hold."""

    __slots__ = ("held", "item", "key", "value")

    def __init__(
        self,
        item: Tuple[Any, ...],
        value: bytes,
        key: bytes,
        held: Optional[Tuple[bytes, bytes, int]] = None,
    ) -> None:
        self.item = item  # the item tuple: group + (seq, random) [+ (deliveries, id)]
        self.value = value  # the encoded value
        self.key = key  # its key among the visible items
        self.held = held  # (held key, due key, kind) for an item under an expired hold


class Ordered:
    """Items kept in key order, taken from either end, with leases and waits.

    Queue is this with an empty group; PriorityQueue with the group ``(priority,)``.

    Key layout inside the subspace ``S`` (``g`` is the group, empty for a Queue)::

        S/"i"/(*g, seq, random[, deliveries, id]) = value   items, in order
        S/"n"                                     = int64    size (atomic ADD)
        S/"w"                                     = int64    wake counter, touched by pushes
        S/"f"                                     = int64    floor: highest seq ever held
        S/"h"/(lease_id, item, deadline, kind)    = value    held items (leases, pop results)
        S/"d"/(deadline, lease_id, item, kind)    = ''       holds by deadline
        S/"r"/(end, ticket, request_id)           = int64    waiting high-contention pops
        S/"k"/(id,), S/"g"/(expiry, id)                      idempotency ids
        S/"c"/(version, call id)                  = int      commit receipts (Receipts)
    """

    def __init__(
        self,
        subspace: Any,
        *,
        group_len: int,
        high_contention: bool,
        clock: Optional[Clock],
        id_retention: float,
        result_timeout: float,
    ) -> None:
        self.subspace = check_subspace(subspace)
        if type(high_contention) is not bool:
            raise TypeError(
                f"high_contention must be a bool, not {type(high_contention).__name__}"
            )
        if clock is not None and not callable(clock):
            raise TypeError("clock must be a callable taking a transaction")
        self.g = group_len
        self.high_contention = high_contention
        self.clock: Clock = clock if clock is not None else database_clock
        self.ids = Ids(self.subspace, check_retention(id_retention))
        self.result_timeout = seconds_to_versions(
            check_seconds(result_timeout, "result_timeout")
        )
        self.items = self.subspace["i"]
        self.held = self.subspace["h"]
        self.due = self.subspace["d"]
        self.requests = self.subspace["r"]
        self.count_key = bytes(self.subspace.pack(("n",)))
        self.wake_key = bytes(self.subspace.pack(("w",)))
        self.floor_key = bytes(self.subspace.pack(("f",)))
        self._contended_until = 0.0
        self.write = Writes(self.subspace)
        self.stats = self.write.stats

    # -- item tuples -----------------------------------------------------------------

    def meta(self, item: Tuple[Any, ...]) -> Tuple[int, Optional[bytes]]:
        """(previous deliveries, id) of an item tuple."""
        if len(item) == self.g + 2:
            return 0, None
        return item[self.g + 2], item[self.g + 3]

    def with_deliveries(self, item: Tuple[Any, ...], deliveries: int) -> Tuple[Any, ...]:
        _, id_ = self.meta(item)
        return item[: self.g + 2] + (deliveries, id_)

    def order(self, end: int) -> Callable[[Entry], Any]:
        """Sort key putting entries in the order ``end`` takes them."""
        if end == MIN:
            return lambda e: e.key
        # MAX: highest priority first; within a priority, oldest first.
        return lambda e: (-e.item[0], e.key)

    # -- reading the front --------------------------------------------------------------

    def _visible(self, reader: Any, end: int, n: Optional[int]) -> List[Entry]:
        """The first ``n`` (all when None) visible items in ``end`` order."""
        r = self.items.range()
        limit = n or 0
        if end == MIN:
            kvs = reader.get_range(r.start, r.stop, limit=limit, streaming_mode=WANT_ALL)
            return [self._entry(kv) for kv in kvs]
        # MAX: a reverse read finds the highest priorities, newest first.  Every
        # priority it passed completely is reversed to oldest first; the lowest one
        # it reached may hold older items it did not see, so read that one forward.
        top = [self._entry(kv) for kv in reader.get_range(
            r.start, r.stop, limit=limit, reverse=True, streaming_mode=WANT_ALL)]
        if not top:
            return []
        lowest = top[-1].item[0]
        above = [e for e in top if e.item[0] != lowest]
        above.sort(key=self.order(MAX))
        rest = None if n is None else n - len(above)
        g = self.items.range((lowest,))
        oldest = reader.get_range(g.start, g.stop, limit=rest or 0, streaming_mode=WANT_ALL)
        return above + [self._entry(kv) for kv in oldest]

    def _entry(self, kv: Any) -> Entry:
        return Entry(self.items.unpack(kv.key), kv.value, kv.key)

    def front(
        self, tr: Any, end: int, n: Optional[int], *, snapshot: bool
    ) -> Tuple[List[Entry], List[Entry], int]:
        """Read the first ``n`` items in ``end`` order, counting expired holds.

        Returns ``(entries, extra, now)``: the front entries (at most ``n``), the
        expired holds that were read but are not among them (a writer puts those
        back), and the clock's reading.  ``snapshot=False`` takes a read conflict on
        the visible range it scanned (a concurrent change at the front conflicts).
        Holds are found through a snapshot read of the oldest deadlines; with ``n``
        None (a full listing) every expired hold is read.
        """
        reader = snap(tr) if snapshot else tr
        r = self.due.range()
        due = snap(tr).get_range(
            r.start, r.stop, limit=0 if n is None else EXPIRED_BATCH,
            streaming_mode=WANT_ALL,
        )
        visible = self._visible(reader, end, n)
        now = self.clock(tr)
        expired = []
        for kv in due:
            deadline, lease_id, item, kind = self.due.unpack(kv.key)
            if deadline > now:
                break
            held_key = bytes(self.held.pack((lease_id, item, deadline, kind)))
            expired.append((reader.get(held_key), item, held_key, bytes(kv.key), kind))
        entries = list(visible)
        for future, item, held_key, due_key, kind in expired:
            value = get_value(future)
            if value is not None:
                entries.append(Entry(item, value, bytes(self.items.pack(item)),
                                     (held_key, due_key, kind)))
        if not expired:
            return entries, [], now
        entries.sort(key=self.order(end))
        cut = len(entries) if n is None else n
        chosen = entries[:cut]
        extra = [e for e in entries[cut:] if e.held is not None]
        return chosen, extra, now

    # -- taking and putting back ----------------------------------------------------------

    def take(self, tr: Any, entry: Entry) -> Tuple[Any, ...]:
        """Remove ``entry`` from where it is; return its item tuple as delivered now.

        Takes a read conflict on the removed key, so two transactions can never both
        take the same item.  An item coming back from an expired lease counts one more
        delivery.
        """
        if entry.held is None:
            tr.add_read_conflict_key(entry.key)
            tr.clear(entry.key)
            return entry.item
        held_key, due_key, kind = entry.held
        tr.add_read_conflict_key(held_key)
        tr.clear(held_key)
        tr.clear(due_key)
        if kind == LEASE:
            return self.with_deliveries(entry.item, self.meta(entry.item)[0] + 1)
        return entry.item

    def put_back(self, tr: Any, entries: Iterable[Entry]) -> None:
        """Return items under expired holds to their places in the order."""
        for entry in entries:
            item = self.take(tr, entry)
            tr.set(self.items.pack(item), entry.value)
            add(tr, self.wake_key, 1)

    def hold(self, tr: Any, item: Tuple[Any, ...], value: bytes, lease_id: bytes,
             deadline: int, kind: int) -> bytes:
        """Hide an item (already taken) under a hold; return its held key.

        Raises the floor (atomic MAX, conflict-free) to the item's sequence number, so
        later pushes land after it even if the visible items run out meanwhile: when
        the hold ends early the item returns to a place before them.
        """
        held_key = bytes(self.held.pack((lease_id, item, deadline, kind)))
        tr.set(held_key, value)
        tr.set(self.due.pack((deadline, lease_id, item, kind)), b"")
        tr.max(self.floor_key, le64(item[self.g]))
        return held_key

    def gone(self, tr: Any, item: Tuple[Any, ...], count: int, now: int) -> None:
        """``count`` items left the structure for good (pop, ack, collected result)."""
        add(tr, self.count_key, -count)
        self.ids.retire(tr, self.meta(item)[1], now)

    # -- push ----------------------------------------------------------------------------

    def push(self, tr: Any, attempt: Attempt, batch: Sequence[Tuple[Tuple[Any, ...], bytes]],
             id_: Optional[bytes]) -> None:
        """Store ``(group, encoded value)`` pairs, in order, after the last of each group."""
        if id_ is not None:
            id_key = self.ids.key(id_)
            known = tr.get(id_key)
            gc = self.ids.start_collect(tr)
        floor_f = tr.snapshot.get(self.floor_key)
        lasts = {}
        for group, _ in batch:
            if group not in lasts:
                r = self.items.range(group)
                lasts[group] = tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True)
        if id_ is not None:
            if get_value(known) is not None:
                attempt.idle = True
                return
            self.ids.collect(tr, gc, self.clock(tr))
            tr.set(id_key, b"")
        floor = get_value(floor_f)
        seqs = {}
        for group, kvs in lasts.items():
            kv = first(kvs)
            seqs[group] = max(
                0 if kv is None else self.items.unpack(kv.key)[self.g] + 1,
                0 if floor is None else read_le64(floor) + 1,
            )
        for group, value in batch:
            item = group + (seqs[group], random_suffix())
            if id_ is not None:
                item += (0, id_)
            seqs[group] += 1
            tr.set(self.items.pack(item), value)
        add(tr, self.count_key, len(batch))
        add(tr, self.wake_key, 1)

    # -- pop, peek ------------------------------------------------------------------------

    def pop(self, tr: Any, attempt: Attempt, end: int, n: int) -> List[bytes]:
        """Remove and return the first ``n`` encoded values (fewer if fewer exist)."""
        entries, extra, now = self.front(tr, end, n, snapshot=False)
        return self.pop_entries(tr, attempt, entries, extra, now)

    def pop_entries(self, tr: Any, attempt: Attempt, entries: List[Entry],
                    extra: List[Entry], now: int) -> List[bytes]:
        """Remove ``entries`` for good, put ``extra`` back; return the values taken."""
        self.put_back(tr, extra)
        for entry in entries:
            self.gone(tr, self.take(tr, entry), 1, now)
        attempt.idle = not entries  # (no entries: no expired holds to put back either)
        return [e.value for e in entries]

    def peek(self, tr: Any, end: int, n: Optional[int]) -> List[bytes]:
        """The encoded values the next pops would return, without removing them."""
        entries, _, _ = self.front(tr, end, n, snapshot=False)
        return [e.value for e in entries]

    def size(self, tr: Any) -> int:
        return read_le64(get_value(tr.get(self.count_key)))

    def clear(self, tr: Any) -> None:
        r = self.subspace.range()
        tr.clear_range(r.start, r.stop)

    # -- leases --------------------------------------------------------------------------

    def lease(self, item: Tuple[Any, ...], value: bytes, lease_id: bytes, deadline: int) -> Lease:
        token = fdb.tuple.pack((lease_id, item, deadline))
        return Lease(decode_value(value), self.meta(item)[0] + 1, deadline, token)

    def claim(self, tr: Any, attempt: Attempt, end: int, seconds: float,
              lease_id: bytes) -> Optional[Lease]:
        """Take the first item and hold it under a lease for ``seconds``."""
        entries, extra, now = self.front(tr, end, 1, snapshot=False)
        self.put_back(tr, extra)
        if not entries:
            attempt.idle = True
            return None
        item = self.take(tr, entries[0])
        deadline = now + seconds_to_versions(seconds)
        self.hold(tr, item, entries[0].value, lease_id, deadline, LEASE)
        return self.lease(item, entries[0].value, lease_id, deadline)

    def _held_lease(self, tr: Any, lease: Any) -> Tuple[bytes, bytes, Tuple[Any, ...], int, Any]:
        lease_id, item, deadline = lease_parts(lease)
        held_key = bytes(self.held.pack((lease_id, item, deadline, LEASE)))
        due_key = bytes(self.due.pack((deadline, lease_id, item, LEASE)))
        return held_key, due_key, item, deadline, tr.get(held_key)

    def ack(self, tr: Any, lease: Any) -> None:
        """Remove a leased item for good."""
        held_key, due_key, item, deadline, value = self._held_lease(tr, lease)
        now = self.clock(tr)
        if get_value(value) is None or now > deadline:
            raise LeaseExpiredError("cannot ack: the lease expired; its item may have "
                                    "been delivered to another consumer")
        tr.clear(held_key)
        tr.clear(due_key)
        self.gone(tr, item, 1, now)

    def extend(self, tr: Any, lease: Any, seconds: float) -> Lease:
        """Move a live lease's deadline to now + ``seconds``."""
        held_key, due_key, item, deadline, value = self._held_lease(tr, lease)
        lease_id = lease_parts(lease)[0]
        now = self.clock(tr)
        encoded = get_value(value)
        if encoded is None or now > deadline:
            raise LeaseExpiredError("cannot extend: the lease expired; its item may have "
                                    "been delivered to another consumer")
        tr.clear(held_key)
        tr.clear(due_key)
        new_deadline = now + seconds_to_versions(seconds)
        self.hold(tr, item, encoded, lease_id, new_deadline, LEASE)
        return self.lease(item, encoded, lease_id, new_deadline)

    def release(self, tr: Any, attempt: Attempt, lease: Any) -> bool:
        """Put a leased item back at its place now; False if the lease had expired."""
        held_key, due_key, item, deadline, value = self._held_lease(tr, lease)
        now = self.clock(tr)
        encoded = get_value(value)
        if encoded is None or now > deadline:
            attempt.idle = True
            return False
        entry = Entry(item, encoded, bytes(self.items.pack(item)), (held_key, due_key, LEASE))
        self.put_back(tr, [entry])
        return True

    # -- waiting for items ----------------------------------------------------------------

    def wait_for_items(self, db: Any, end: int, deadline: Optional[float]) -> None:
        """Block until an item may be visible at ``end``, or until ``deadline``.

        Woken by a watch on the wake key (every push and put-back touches it), or when
        the earliest hold expires (its item becomes visible without any write).
        """

        def ready(tr: Any) -> Tuple[bool, Optional[float]]:
            entries, _, now = self.front(tr, end, 1, snapshot=True)
            if entries:
                return True, None
            r = self.due.range()
            kv = first(tr.snapshot.get_range(r.start, r.stop, limit=1))
            if kv is None:
                return False, None
            until = (self.due.unpack(kv.key)[0] - now) / VERSIONS_PER_SECOND
            return False, max(0.0, until) + 0.001

        wait_for_wake(db, self.wake_key, ready, deadline)

    # -- high-contention pop ------------------------------------------------------------

    def hc_pop(self, db: Any, end: int) -> Optional[bytes]:
        """Pop through the request protocol; see docs/design (high-contention pops).

        1. If nobody is waiting, try a plain pop.  If it conflicts, or others are
           waiting, register a request ``r/(end, ticket, id)`` (ticket from a snapshot
           read: concurrent registrations never conflict) and watch it.
        2. The owner of the oldest request fulfils a batch: it takes the first items
           in order, one per request, oldest request first; its own item it keeps, the
           others it holds for their requesters (``h/(request id, ...)``, kind RESULT)
           with a deadline, and it clears the requests, which fires their watches.
        3. A served requester collects its held item.  A result nobody collects before
           its deadline goes back to its place in the queue, like an expired lease; a
           request whose owner went silent is served (or dropped) by another waiter.

        Every step is a :func:`run` call with receipts, so ``commit_unknown_result``
        neither loses nor doubles an item.
        """
        while True:
            outcome = self._hc_request(db, end, random_id())
            if outcome is not RESTART:
                return outcome  # type: ignore[no-any-return]

    def _hc_request(self, db: Any, end: int, rid: bytes) -> Any:
        """One request's life: the value, None (empty), or RESTART."""
        started = self.write(db, lambda t, a: self._hc_start(t, a, end, rid))
        if started[0] is not WAIT:
            return started[0]
        return self._hc_wait(db, end, rid, started[1], started[2])

    def _hc_start(self, tr: Any, attempt: Attempt, end: int, rid: bytes) -> Tuple[Any, ...]:
        """Pop at once, or register request ``rid``: (value or None,) or (WAIT, key, watch)."""
        recent = max(self._contended_until, self.stats.last_conflict + HC_CONTENDED)
        contended = time.monotonic() < recent
        r = self.requests.range((end,))
        waiting = tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True)
        entries, extra, now = self.front(tr, end, 1, snapshot=contended)
        last = first(waiting)
        if not entries or (last is None and not contended):
            taken = self.pop_entries(tr, attempt, entries, extra, now)
            return (taken[0] if taken else None,)
        self._contended_until = time.monotonic() + HC_CONTENDED
        ticket = 0 if last is None else self.requests.unpack(last.key)[1] + 1
        req_key = bytes(self.requests.pack((end, ticket, rid)))
        tr.set(req_key, le64(now))
        return WAIT, req_key, tr.watch(req_key)

    def _hc_wait(self, db: Any, end: int, rid: bytes, req_key: bytes, watch: Any) -> Any:
        delay = 0.0
        while True:
            if delay > 0 and watch is not None:
                wait_on_watch(watch, delay)
            delay = min(max(delay * 2, HC_FIRST_WAIT), HC_MAX_WAIT)
            outcome, watch = self.write(
                db, lambda t, a: self._hc_check(t, a, end, rid, req_key))
            if outcome is AGAIN:
                delay = 0.0
            elif outcome is not WAIT:
                return outcome

    def _hc_check(self, tr: Any, attempt: Attempt, end: int, rid: bytes, req_key: bytes) -> Any:
        """One look at a waiting request: (outcome, watch on the request or None).

        The outcome is the value collected or taken, None (the queue is empty),
        RESTART, WAIT (with the watch) or AGAIN.
        """
        mine = tr.get(req_key)
        h = self.held.range((rid,))
        result = tr.get_range(h.start, h.stop, limit=1)
        r = self.requests.range((end,))
        queue = tr.snapshot.get_range(r.start, r.stop, limit=HC_BATCH, streaming_mode=WANT_ALL)
        kv = first(result)
        if kv is not None:  # served: collect the item held for us
            _, item, deadline, kind = self.held.unpack(kv.key)
            now = self.clock(tr)
            tr.clear(kv.key)
            tr.clear(self.due.pack((deadline, rid, item, kind)))
            self.gone(tr, item, 1, now)
            return kv.value, None
        if get_value(mine) is None:
            attempt.idle = True
            return RESTART, None  # dropped: the queue ran empty, or we were too slow
        requests = list(queue)
        now = self.clock(tr)
        oldest = requests[0] if requests else None
        if oldest is None or (
            oldest.key != req_key
            and now - read_le64(oldest.value) <= seconds_to_versions(HC_STALE)
        ):
            attempt.idle = True
            return WAIT, tr.watch(req_key)
        return self._fulfil(tr, end, requests, rid, now), None

    def _fulfil(self, tr: Any, end: int, requests: List[Any],
                rid: bytes, now: int) -> Any:
        """Serve waiting requests in order with the first items in order."""
        entries, extra, _ = self.front(tr, end, len(requests), snapshot=True)
        self.put_back(tr, extra)
        outcome: Any = AGAIN
        moved = 0
        served = 0
        for request in requests:
            _, _, owner = self.requests.unpack(request.key)
            silent = now - read_le64(request.value) > self.result_timeout
            if served < len(entries) and not (silent and owner != rid):
                entry = entries[served]
                if moved > 0 and moved + len(entry.value) > HC_BATCH_BYTES:
                    break  # the rest wait for the next batch
                moved += len(entry.value)
                served += 1
                item = self.take(tr, entry)
                if owner == rid:
                    self.gone(tr, item, 1, now)
                    outcome = entry.value
                else:
                    self.hold(tr, item, entry.value, owner, now + self.result_timeout, RESULT)
            elif owner == rid:
                outcome = None  # nothing left for us: the pop finds the queue empty
            # Served, or dropped: nothing left for it (its pop finds the queue empty)
            # or its owner has been silent longer than a result is kept.
            tr.add_read_conflict_key(request.key)
            tr.clear(request.key)
        return outcome


class OrderedAPI:
    """The public methods Queue and PriorityQueue share (see those classes)."""

    _o: Ordered
    _group_len: int  # key elements before the sequence number: 0 Queue, 1 priority

    def __init__(
        self,
        subspace: Any,
        *,
        high_contention: bool = False,
        clock: Optional[Clock] = None,
        id_retention: float = 3600.0,
        result_timeout: float = 10.0,
    ) -> None:
        self._o = Ordered(
            subspace,
            group_len=self._group_len,
            high_contention=high_contention,
            clock=clock,
            id_retention=id_retention,
            result_timeout=result_timeout,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._o.subspace!r})"

    @property
    def subspace(self) -> Subspace:
        """The subspace holding every key of this structure."""
        return self._o.subspace

    @property
    def stats(self) -> Stats:
        """Retry counters of the loops this object ran (calls given a Database)."""
        return self._o.stats

    def size(self, tr: Transactor) -> int:
        """Number of items held: visible ones plus those under a lease or in transit.

        Reads one counter key (kept with atomic adds).  The read takes a conflict on
        that key, so a transaction that calls ``size`` and also writes conflicts with
        every concurrent push, pop and ack; pass ``tr.snapshot`` to avoid that.
        Cost: 1 read, 1 round trip, O(1) in n.
        """
        return run(tr, lambda t, _a: self._o.size(t), writes=False)

    def is_empty(self, tr: Transactor) -> bool:
        """True when no item is visible: a pop now would return None.

        Items under a live lease are not visible (they still count in :meth:`size`).
        Reads the first item (read conflict on the front of the order) and, with a
        snapshot read, the earliest lease deadlines.  Cost: 1 round trip (2 when a
        lease has expired), O(1) in n.
        """
        return not run(tr, lambda t, _a: self._o.peek(t, MIN, 1), writes=False)

    def clear(self, tr: Transactor) -> None:
        """Remove everything: items, leases, waiting pops and remembered ids.

        One range clear of the whole subspace; reads nothing, conflicts with every
        transaction that read any of its keys.  Cost: 0 reads, O(1) in n.  A consumer
        holding a lease from before the clear gets LeaseExpiredError on ack.
        """
        run(tr, lambda t, _a: self._o.clear(t), stats=self._o.stats)

    def ack(self, tr: Transactor, lease: Union[Lease, bytes]) -> None:
        """Remove a claimed item for good: the work it stood for is done.

        Reads the lease's held key (read conflict on it: an ack racing the item's
        redelivery conflicts), clears it and its deadline entry, decrements the size
        counter.  Cost: 1 read, 1 round trip, O(1) in n.

        Raises:
            LeaseExpiredError: the lease's deadline has passed (even if nobody took the
                item back yet) or the item is no longer held under it.
            TypeError/ValueError: ``lease`` is not a Lease or a lease token.
        """
        lease_parts(lease)
        self._o.write(tr, lambda t, _a: self._o.ack(t, lease))

    def extend(self, tr: Transactor, lease: Union[Lease, bytes], seconds: float) -> Lease:
        """Keep working on a claimed item: its lease now ends ``seconds`` from now.

        Returns the new Lease (use it, not the old one, from now on).  Reads the held
        key (read conflict), rewrites it and its deadline entry.  Cost: 1 read, 1 round
        trip, O(1) in n.

        Raises:
            LeaseExpiredError: the lease had already expired.
        """
        lease_parts(lease)
        seconds = check_seconds(seconds, "seconds")
        return self._o.write(tr, lambda t, _a: self._o.extend(t, lease, seconds))

    def release(self, tr: Transactor, lease: Union[Lease, bytes]) -> bool:
        """Give a claimed item back now, at its original place in the order.

        Its delivery count goes up by one.  Returns False (and changes nothing) when
        the lease had already expired.  Reads the held key (read conflict), moves the
        item back, touches the wake key.  Cost: 1 read, 1 round trip, O(1) in n.
        """
        lease_parts(lease)
        return self._o.write(tr, lambda t, a: self._o.release(t, a, lease))

    # -- helpers for the public classes --------------------------------------------------

    def _push(self, tr: Transactor, batch: List[Tuple[Tuple[Any, ...], bytes]],
              id_: Optional[bytes]) -> None:
        if id_ is not None:  # the id becomes part of the item's key
            group = batch[0][0]
            check_key(self._o.items.pack(group + (2**64, bytes(20), 2**32, id_)), "id")
        self._o.write(tr, lambda t, a: self._o.push(t, a, batch, id_))

    def _push_batch(self, tr: Transactor, batch: List[Tuple[Tuple[Any, ...], bytes]],
                    name: str) -> None:
        """Push a validated batch, refusing one that cannot fit in a transaction."""
        total = sum(len(self._o.items.pack(group)) + 40 + len(value) + MUTATION_OVERHEAD
                    for group, value in batch)
        check_batch_bytes(total, len(batch), name)
        if not batch:
            check_transactor(tr)
            return
        self._push(tr, batch, None)

    def _pop(self, tr: Transactor, end: int) -> Optional[Value]:
        if self._o.high_contention and not isinstance(tr, fdb_impl().TransactionRead):
            check_database(tr, "tr")
            encoded = self._o.hc_pop(tr, end)
            return None if encoded is None else decode_value(encoded)
        values = self._o.write(tr, lambda t, a: self._o.pop(t, a, end, 1))
        return decode_value(values[0]) if values else None

    def _pop_many(self, tr: Transactor, end: int, n: Any) -> List[Value]:
        n = check_int(n, "n", low=0)
        if n == 0:
            check_transactor(tr)
            return []
        values = self._o.write(tr, lambda t, a: self._o.pop(t, a, end, n))
        return [decode_value(v) for v in values]

    def _peek(self, tr: Transactor, end: int) -> Optional[Value]:
        values = run(tr, lambda t, _a: self._o.peek(t, end, 1), writes=False)
        return decode_value(values[0]) if values else None

    def _items(self, tr: Transactor, end: int, limit: Any) -> List[Value]:
        if limit is not None:
            limit = check_int(limit, "limit", low=0)
            if limit == 0:
                check_transactor(tr, writes=False)
                return []
        values = run(tr, lambda t, _a: self._o.peek(t, end, limit), writes=False)
        return [decode_value(v) for v in values]

    def _claim(self, tr: Transactor, end: int, lease_seconds: Any) -> Optional[Lease]:
        seconds = check_seconds(lease_seconds, "lease_seconds")
        lease_id = random_id()
        return self._o.write(tr, lambda t, a: self._o.claim(t, a, end, seconds, lease_id))

    def _pop_wait(self, db: Any, end: int, timeout: Any) -> Optional[Value]:
        deadline = _deadline(check_timeout(timeout))
        check_database(db)
        while True:
            value = self._pop(db, end)
            if value is not None or _passed(deadline):
                return value
            self._o.wait_for_items(db, end, deadline)

    def _claim_wait(self, db: Any, end: int, lease_seconds: Any, timeout: Any) -> Optional[Lease]:
        check_seconds(lease_seconds, "lease_seconds")
        deadline = _deadline(check_timeout(timeout))
        check_database(db)
        while True:
            lease = self._claim(db, end, lease_seconds)
            if lease is not None or _passed(deadline):
                return lease
            self._o.wait_for_items(db, end, deadline)


def _deadline(timeout: Optional[float]) -> Optional[float]:
    return None if timeout is None else time.monotonic() + timeout


def _passed(deadline: Optional[float]) -> bool:
    return deadline is not None and time.monotonic() >= deadline
