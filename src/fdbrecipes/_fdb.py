"""Talking to the fdb bindings: the classes, futures, range reads, atomic counters.

The module deliberately does not import ``fdb.impl`` at import time: that module
loads ``libfdb_c``, and ``import fdbrecipes`` must work where the C library is
missing (for type checking, docs and ``--help``).  The classes that tell a
Transaction from a Database are looked up when a structure is first used, after
the application has called ``fdb.api_version()``.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import time
from typing import (
    Any,
    Callable,
    Dict,
    Generator,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)

import fdb

T = TypeVar("T")

#: What a method's ``tr`` argument may be: an ``fdb.Transaction`` (the call becomes
#: part of the caller's transaction) or an ``fdb.Database`` / ``fdb.Tenant`` (the call
#: runs in its own retry loop, like a function decorated with ``@fdb.transactional``).
Transactor = Any

#: Lowest API version the library supports.
MIN_API_VERSION = 630
#: FoundationDB's error codes the library acts on.
NOT_COMMITTED = 1020
#: ``fdb.StreamingMode`` values, usable before the API version is selected: want_all,
#: iterator, exact.
WANT_ALL, ITERATOR, EXACT = -2, -1, 0
#: Versions per second: FoundationDB's read versions advance about 1,000,000 per second.
VERSIONS_PER_SECOND = 1_000_000


_impl: Any = None  # fdb.impl, once checked (an API version, once selected, stays)


def fdb_impl() -> Any:
    """Return ``fdb.impl`` once the application has selected an API version.

    Raises:
        RuntimeError: no API version is selected yet, or it is below 630.
    """
    global _impl
    if _impl is not None:
        return _impl
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
    _impl = sys.modules["fdb.impl"]
    return _impl


def is_transaction(tr: Any, *, writes: bool = True) -> bool:
    """True if ``tr`` is a Transaction (or, for reads, a snapshot view of one)."""
    impl = _impl or fdb_impl()
    return isinstance(tr, impl.Transaction) or (
        not writes and isinstance(tr, impl.TransactionRead)
    )


def is_database(tr: Any) -> bool:
    """True if ``tr`` is a Database or Tenant (a call given it runs its own
    transactions)."""
    impl = _impl or fdb_impl()
    return isinstance(tr, (impl.Database, impl.Tenant))


def check_transactor(tr: Transactor, *, writes: bool = True) -> None:
    """Raise TypeError unless ``tr`` is a Transaction, Database or Tenant (or, for
    reads, a snapshot view)."""
    impl = _impl or fdb_impl()
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
    if not is_database(db):
        raise TypeError(
            f"{name} must be an fdb Database or Tenant (this call runs its own "
            f"transactions), not {type(db).__name__}"
        )
    return db


def seconds_to_versions(seconds: float) -> int:
    """Convert seconds to read-version units (at least 1)."""
    return max(1, int(seconds * VERSIONS_PER_SECOND))


# -- reading: operations as generators ----------------------------------------------------
#
# Every operation is a generator that yields the FoundationDB futures it needs and
# goes on once they are ready (it then reads them without waiting): the blocking
# driver and the awaiting one (:mod:`._drivers`) run the same code.

#: An operation: a generator yielding FoundationDB futures (waiting operations also
#: yield ``_waiting.Watch`` and ``_waiting.Pause``) and returning its result.
Gen = Generator[Any, Any, T]


def get_value(future: Any) -> Optional[bytes]:
    """The bytes of a ``tr.get`` future, or None when the key is absent (the future
    must be ready, or this blocks)."""
    value: Optional[bytes] = future.wait().value
    return value


def read(future: Any) -> Gen[Optional[bytes]]:
    """The bytes of a ``tr.get`` future once it is ready, or None."""
    yield future
    return get_value(future)


def ready(future: Any) -> Gen[Any]:
    """What ``future.wait()`` returns, once the future is ready."""
    yield future
    return future.wait()


def known(future: Any) -> Gen[Any]:
    """:func:`ready`, for a future that is most likely ready already (a read version
    asked for before a read that came back): then it is read at once, not handed to
    the driver (a step through every operation the call nests).  Not for a future
    that is usually still on its way: asking whether it is ready is one more call into
    ``libfdb_c``, which lets the network thread take the GIL."""
    if not future.is_ready():
        yield future
    return future.wait()


def first(kvs: Iterable[Any]) -> Optional[Any]:
    """The first KeyValue of a list of them, or None."""
    for kv in kvs:
        return kv
    return None


class Range:
    """A range read, started: its first batch is on its way as soon as it is made,
    so reads started together go out together; :meth:`read` collects it.

    It reads in ``want_all`` mode (or the mode given), and asks for the next batch
    while the server says there is more, through the bindings' ``_get_range``: the
    call their own range iterator makes, unchanged from 7.1 to 8.0, and the only way
    to read a range without blocking (the public ``get_range`` returns an iterator
    that blocks on each batch).  These calls, :func:`range_of` and :class:`Spans`
    (which reads a ready range future's key-values as ``fdb.impl``'s own
    ``FutureKeyValueArray.wait`` does, through the future's C API handle) are the
    library's only uses of the bindings' internals.
    """

    __slots__ = ("begin", "end", "future", "limit", "mode", "reader", "reverse")

    def __init__(self, reader: Any, begin: Any, end: Any, limit: int = 0,
                 reverse: bool = False, mode: int = WANT_ALL, future: Any = None) -> None:
        impl = _impl or fdb_impl()
        self.reader = reader
        self.begin = begin if isinstance(begin, impl.KeySelector) else \
            impl.KeySelector.first_greater_or_equal(begin)
        self.end = end if isinstance(end, impl.KeySelector) else \
            impl.KeySelector.first_greater_or_equal(end)
        self.limit = limit
        self.reverse = reverse
        self.mode = mode
        self.future = future if future is not None else reader._get_range(  # noqa: SLF001
            self.begin, self.end, limit, mode, 1, reverse)

    def read(self) -> Gen[List[Any]]:
        """Every KeyValue of the range (up to the limit), in the order read."""
        out = KeyValues()
        yield from self.collect(out)
        return out

    def spans(self) -> Gen[Spans]:
        """The range (up to the limit) as :class:`Spans`: values copied out, keys
        read only when asked."""
        out = Spans()
        yield from self.collect(out)
        return out

    def collect(self, out: Batches) -> Gen[None]:
        """Read the range into ``out``, one batch after the other (see :meth:`read`)."""
        impl = _impl or fdb_impl()
        future, iteration, limit = self.future, 1, self.limit
        begin, end = self.begin, self.end
        while True:
            yield future
            count, more = out.add(future)
            if not count or not more or (self.limit and len(out) >= self.limit):
                return
            iteration += 1
            if limit:
                limit -= count
            last = out.key(len(out) - 1)
            if self.reverse:
                end = impl.KeySelector.first_greater_or_equal(last)
            else:
                begin = impl.KeySelector.first_greater_than(last)
            future = self.reader._get_range(begin, end, limit, self.mode,  # noqa: SLF001
                                            iteration, self.reverse)

    def first(self) -> Gen[Optional[Any]]:
        """The first KeyValue read, or None."""
        return first((yield from self.read()))


class Batches:
    """Where :meth:`Range.collect` puts the batches of a range read: :meth:`add` takes
    one ready future's key-values, :meth:`key` gives one key back (where the next
    batch starts)."""

    def add(self, future: Any) -> Tuple[int, bool]:
        """Take the key-values of ``future`` (ready); (how many, whether more)."""
        raise NotImplementedError

    def key(self, i: int) -> bytes:
        """The ``i``-th key read."""
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class KeyValues(List[Any], Batches):
    """The KeyValues of a range read, as the bindings make them (:meth:`Range.read`)."""

    def add(self, future: Any) -> Tuple[int, bool]:
        """Take ``future``'s KeyValues."""
        kvs, count, more = future.wait()
        self.extend(kvs)
        return count, bool(more)

    def key(self, i: int) -> bytes:
        """The ``i``-th KeyValue's key."""
        key: bytes = self[i].key
        return key


def kv_layout() -> Optional[struct.Struct]:
    """How ``libfdb_c`` lays out one key-value of a range read (``FDBKeyValue``: key
    pointer, key length, value pointer, value length, packed to 4 bytes), as the
    bindings declare it, or None if they declare anything else (then :class:`Spans`
    asks the bindings for whole KeyValues).  Looked at once."""
    global _KV_LAYOUT
    if _KV_LAYOUT is False:
        impl = _impl or fdb_impl()
        kv = getattr(impl, "KeyValueStruct", None)
        expected = [("key", 0), ("key_length", 8), ("value", 12), ("value_length", 20)]
        _KV_LAYOUT = None
        if (kv is not None and ctypes.sizeof(ctypes.c_void_p) == 8
                and ctypes.sizeof(kv) == 24
                and [(f[0], getattr(kv, f[0]).offset) for f in kv._fields_] == expected):
            _KV_LAYOUT = struct.Struct("=QiQi")
    layout: Optional[struct.Struct] = _KV_LAYOUT
    return layout


#: :func:`kv_layout`, once looked at (False: not yet).
_KV_LAYOUT: Any = False


class Spans(Batches):
    """The key-values of a range read, as the C client holds them: every value copied
    out (:attr:`values`), a key copied only when asked (:meth:`key`).

    A weight tree's walk needs the value of every child it reads and the key of the
    one it chooses.  The bindings' ``wait()`` makes a KeyValue of two copies for each
    key-value, through four ctypes field reads and three Python calls: about three
    times the client CPU of copying the value alone.  The futures read are kept, so
    the memory the keys are read from lives as long as this object.  Where the
    bindings declare another layout (``layout`` None: see :func:`kv_layout`), it takes
    their KeyValues instead.
    """

    __slots__ = ("futures", "layout", "spots", "values")

    def __init__(self, layout: Any = False) -> None:
        #: The layout of a key-value (False: :func:`kv_layout`'s; None: unknown).
        self.layout: Optional[struct.Struct] = kv_layout() if layout is False else layout
        #: Each value read, in order.
        self.values: List[bytes] = []
        #: Each key-value's (key pointer, key length, ...) in the client's memory,
        #: or its key (bytes) where the layout is not known.
        self.spots: List[Any] = []
        self.futures: List[Any] = []

    def add(self, future: Any) -> Tuple[int, bool]:
        """Take ``future``'s values (ready: raises its error if it failed)."""
        layout = self.layout
        if layout is None:
            kvs, count, more = future.wait()
            self.values.extend([kv.value for kv in kvs])
            self.spots.extend([kv.key for kv in kvs])
            return count, bool(more)
        impl = _impl or fdb_impl()
        array = ctypes.POINTER(impl.KeyValueStruct)()
        count, more = ctypes.c_int(), ctypes.c_int()
        future.capi.fdb_future_get_keyvalue_array(
            future.fpointer, ctypes.byref(array), ctypes.byref(count), ctypes.byref(more))
        n = count.value
        if n:
            string_at = ctypes.string_at
            spots = list(layout.iter_unpack(string_at(array, n * layout.size)))
            self.values.extend([string_at(at, size) for _, _, at, size in spots])
            self.spots.extend(spots)
            self.futures.append(future)
        return n, bool(more.value)

    def key(self, i: int) -> bytes:
        """The ``i``-th key read."""
        spot = self.spots[i]
        if type(spot) is bytes:
            return spot
        return ctypes.string_at(spot[0], spot[1])

    def __len__(self) -> int:
        return len(self.values)


def range_of(fdb_range: Any) -> Range:
    """The range read an ``fdb.impl.FDBRange`` (what ``tr.get_range`` returns, its first
    batch already asked for) stands for, as a :class:`Range` that does not block:
    its reader, selectors, limit, direction and streaming mode, and that first batch
    (the ``iterator`` mode reads the rest as the bindings' ``to_list`` does)."""
    parts = vars(fdb_range)
    mode = parts["_mode"]
    if mode == ITERATOR:
        mode = EXACT if parts["_limit"] > 0 else WANT_ALL
    return Range(parts["_tr"], parts["_bsel"], parts["_esel"], parts["_limit"],
                 parts["_reverse"], mode, parts["_future"])


def is_range(value: Any) -> bool:
    """Whether ``value`` is an ``fdb.impl.FDBRange`` (a range read of the bindings)."""
    return isinstance(value, fdb_impl().FDBRange)


def snap(tr: Any) -> Any:
    """The snapshot view of ``tr`` (``tr`` itself when it is one already)."""
    return getattr(tr, "snapshot", tr)


# -- counters -------------------------------------------------------------------------

_LE64 = struct.Struct("<q")
#: ``unpack_le64(data)[0]``: a counter of 8 bytes or more, decoded as :func:`read_le64`
#: does, without a call of it (for loops over many: a tree's weights).
unpack_le64 = _LE64.unpack_from
ZERO = _LE64.pack(0)


def le64(n: int) -> bytes:
    """Little-endian int64, the format of FoundationDB's atomic ADD."""
    return _LE64.pack(n)


def read_le64(data: Optional[bytes]) -> int:
    """Decode a counter written by atomic ADD (its first 8 bytes); a missing key is 0,
    a shorter value its bytes zero-extended."""
    if data is None:
        return 0
    if len(data) >= 8:
        value: int = unpack_le64(data)[0]
        return value
    return int.from_bytes(data, "little")


def sum_le64(values: Iterable[Optional[bytes]]) -> int:
    """The sum of counters written by atomic ADD (each as :func:`read_le64` reads it),
    in one loop."""
    total = 0
    for data in values:
        total += unpack_le64(data)[0] if data is not None and len(data) >= 8 else read_le64(data)
    return total


#: The most bytes of entries one key of a grouped index keeps in its value (see
#: :meth:`Tally.group`).
GROUP_BYTES = 4_000


class Tally:
    """The counter changes of one operation, written at its end as one atomic
    operation per counter.  Many changes of one key in a transaction would make its
    commit grow quadratically (FoundationDB keeps every mutation of a key); a batch
    of n items writes each counter once.  Entries of a time-ordered index that one
    operation names at one time go in as few keys (:meth:`group`)."""

    __slots__ = ("deltas", "groups", "later", "maxima", "notes", "sums", "wall")

    def __init__(self) -> None:
        self.deltas: Dict[bytes, int] = {}
        self.sums: Dict[bytes, int] = {}
        self.maxima: Dict[bytes, int] = {}
        #: index entries by their prefix (see :meth:`group`)
        self.groups: Dict[bytes, List[bytes]] = {}
        #: the operation's wall-clock time, once read (see :meth:`wall_time`)
        self.wall: Optional[float] = None
        self.notes: List[str] = []  # what to log once the transaction has committed
        #: operations to run in the same transaction once this one's is done, each
        #: ``(op, args)`` run as ``op(tr, attempt, *args)`` (see ``Attempt.later``)
        self.later: List[Tuple[Callable[..., Gen[Any]], Tuple[Any, ...]]] = []

    def note(self, message: str) -> None:
        """Log ``message`` once the transaction commits (see ``_run.Attempt.note``)."""
        self.notes.append(message)

    def add(self, key: bytes, delta: int = 1) -> None:
        """Count ``delta`` (> 0) more on the only-growing counter ``key``."""
        self.deltas[key] = self.deltas.get(key, 0) + delta

    def add_sum(self, key: bytes, delta: int) -> None:
        """Add ``delta`` (any sign) to the sum ``key``, removed when it reaches zero."""
        self.sums[key] = self.sums.get(key, 0) + delta

    def max(self, key: bytes, value: int) -> None:
        """Raise counter ``key`` to at least ``value`` (atomic MAX)."""
        self.maxima[key] = max(value, self.maxima.get(key, value))

    def wall_time(self) -> float:
        """The wall-clock time (``time.time()``) of what this operation writes, read
        once: what one transaction finishes, it finishes at one time."""
        if self.wall is None:
            self.wall = time.time()
        return self.wall

    def group(self, prefix: bytes, entry: bytes) -> None:
        """Name ``entry`` (a packed tuple) in an index under ``prefix`` (its place in
        the index: a time).  The entries one operation names under one prefix are
        written as few keys: ``prefix + the first entry``, whose value holds the
        entries after it, concatenated (a packed tuple of them all), up to
        :data:`GROUP_BYTES` a key (read by ``_records.records.index_entries``)."""
        self.groups.setdefault(prefix, []).append(entry)

    def write(self, tr: Any, attempt: Any = None) -> None:
        """Write the changes and forget them: one atomic ADD per counter, an ADD (and
        a compare-and-clear when it went down) per sum, an atomic MAX per maximum, the
        grouped index entries (see :meth:`group`); the notes go to ``attempt`` (logged
        once it commits), and so do the operations to run later in the transaction."""
        if attempt is not None:
            attempt.notes.extend(self.notes)
            attempt.later.extend(self.later)
        else:
            assert not self.later, "operations to run later need the attempt"
        self.notes.clear()
        self.later.clear()
        for key, delta in self.deltas.items():
            if delta:
                tr.add(key, le64(delta))
        for key, delta in self.sums.items():
            add(tr, key, delta)
        for key, value in self.maxima.items():
            tr.max(key, le64(value))
        for prefix, entries in self.groups.items():
            head, size = 0, 0
            for at in range(1, len(entries) + 1):
                if at == len(entries) or size + len(entries[at]) > GROUP_BYTES:
                    tr.set(prefix + entries[head], b"".join(entries[head + 1:at]))
                    head, size = at, 0
                else:
                    size += len(entries[at])
        self.deltas.clear()
        self.sums.clear()
        self.maxima.clear()
        self.groups.clear()


def clear_except(tr: Any, begin: bytes, end: bytes, kept: List[Tuple[bytes, bytes]]) -> None:
    """Clear ``[begin, end)`` except the key ranges ``kept`` (sorted, inside it)."""
    for keep_begin, keep_end in kept:
        if begin < keep_begin:
            tr.clear_range(begin, keep_begin)
        begin = max(begin, keep_end)
    if begin < end:
        tr.clear_range(begin, end)


def clear_structure(tr: Any, subspace: Any, kept: List[Tuple[bytes, bytes]],
                    counters: Sequence[Tuple[bytes, bytes]]) -> Gen[None]:
    """Clear a structure's subspace except the ranges ``kept`` (which hold its wake
    counters and its receipt slots); for each ``(pushed, taken)`` pair of
    ``counters`` (one per shard), touch ``pushed`` and set ``taken`` to match it, so the
    size restarts at 0 and a wake counter never returns to a value a watch holds.
    Reads every ``pushed`` (conflicts with concurrent pushes: the reset is exact)."""
    reads = [tr.get(pushed) for pushed, _ in counters]
    counts = []
    for future in reads:
        counts.append(read_le64((yield from read(future))))
    r = subspace.range()
    clear_except(tr, bytes(r.start), bytes(r.stop), kept)
    for (pushed, taken), count in zip(counters, counts):
        tr.add(pushed, le64(1))
        tr.set(taken, le64(count + 1))


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
