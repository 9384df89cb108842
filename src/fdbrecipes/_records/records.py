"""Job records: what became of each job, written in the transactions that move it.

A structure made with ``history=seconds`` keeps a record per item id (the id given to
``push``, or one it generates): its state, attempts, when it was pushed, began and
finished, which worker holds it, its last error, its progress and its result.  The
record changes in the same transaction as the item (the push, the claim, the ack,
the release, the burial), so it never disagrees with the queue; what changes with
time alone (a lease that expires, a delay that ends) is read as it is at the read
version by :meth:`Records.read` and ``job()``.  A finished record (succeeded, dead,
cancelled) is kept ``history`` seconds, then pruned in bounded transactions.  Keys:
:class:`.._layout.RecordLayout`.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Collection, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

import fdb.tuple

from .._fdb import Gen, Range, Tally, le64, read
from .._layout import RecordLayout, packed_bytes
from .._values import decode_value, storable

__all__ = ["CANCELLED", "DEAD", "DELAYED", "FINISHED", "PENDING", "RESULT_CHUNK", "RETRYING",
           "RUNNING", "SUCCEEDED", "Facts", "JobError", "JobRecord", "Kept", "Progress",
           "Records", "facts_of", "index_entries", "pushed_place"]

#: The ids of items whose job records an object found (see :meth:`Records.look`): it
#: moves those records with the items, whether or not it keeps records itself.
Kept = Collection[bytes]

#: A job's states.  ``pending``: waiting for a consumer; ``delayed``: pushed with a
#: delay that has not passed; ``running``: held under a live lease; ``retrying``: it
#: failed (or its lease expired) and will run again, maybe after a backoff;
#: ``succeeded``: acked (or popped); ``dead``: a dead letter (its deliveries ran out,
#: or it was buried); ``cancelled``: removed before it ran, or cancelled while it ran.
PENDING, DELAYED, RUNNING, RETRYING = "pending", "delayed", "running", "retrying"
SUCCEEDED, DEAD, CANCELLED = "succeeded", "dead", "cancelled"
#: The states a job does not leave (but for ``requeue_dead``, which revives the dead).
FINISHED = frozenset((SUCCEEDED, DEAD, CANCELLED))
#: Bytes of a result per key: a larger one spans several keys.
RESULT_CHUNK = 90_000
#: The longest error message and traceback kept, in characters (a traceback keeps its
#: end, where the error is).
MESSAGE_CHARS, TRACEBACK_CHARS = 1_000, 8_000
#: The error of a job whose lease ended while it ran, recorded when the item is taken
#: back.
LEASE_EXPIRED = ("LeaseExpired", "the lease ended before the job was settled (its "
                 "worker died, stalled or ran past the lease)", "")
#: The reason of a dead letter whose last lease expired: ``Type: message`` of
#: :data:`LEASE_EXPIRED`.
EXPIRED_REASON = f"{LEASE_EXPIRED[0]}: {LEASE_EXPIRED[1]}"


class JobError(NamedTuple):
    """What a job last failed with: the exception's type (qualified name), its message
    (at most 1,000 characters) and its traceback (at most the last 8,000)."""

    type: str
    message: str
    traceback: str = ""

    @classmethod
    def of(cls, error: BaseException, traceback: str = "") -> JobError:
        """The record of ``error`` (its traceback, formatted, if given), whatever the
        exception: one whose ``__str__`` raises has the message ``<str() failed>``,
        and a lone surrogate is kept as its escape (``\\udc80``), so the record can
        always be written."""
        kind = type(error)
        name = kind.__qualname__ if kind.__module__ == "builtins" else \
            f"{kind.__module__}.{kind.__qualname__}"
        try:
            message = str(error)
        except Exception:
            message = "<str() failed>"
        return cls(storable(name), storable(message[:MESSAGE_CHARS])[:MESSAGE_CHARS],
                   storable(traceback[-TRACEBACK_CHARS:])[-TRACEBACK_CHARS:])

    def reason(self) -> str:
        """``Type: message``, as a dead letter's reason (at most 1,000 characters)."""
        short = self.type.rsplit(".", 1)[-1]
        return f"{short}: {self.message}"[:MESSAGE_CHARS] if self.message else short


class Progress(NamedTuple):
    """How far a job is, as its handler last said: a fraction in [0, 1] and a short
    message."""

    fraction: float
    message: str


class JobRecord(NamedTuple):
    """What became of one job, as of one read version.

    Attributes:
        id: the job's id (the item's idempotency id).
        state: one of ``pending``, ``delayed``, ``running``, ``retrying``,
            ``succeeded``, ``dead``, ``cancelled`` (see :mod:`fdbrecipes.jobs`).
        attempts: how many times it was handed to a consumer.
        pushed_at, started_at, finished_at: wall-clock seconds (``time.time()``) of its
            push, of the start of its last attempt, of its end; None if not (yet).
        worker: the worker that holds it (or held it last); None if none.
        error: its last error (a failure, an expired lease, a time limit), or None.
        progress: what its handler last reported, or None.
        result: what its handler returned (a :data:`fdbrecipes.Value`), or None.
        time_limit: its own time limit in seconds, given at push, or None.
        cancel_requested: a cancel was asked while it ran.
        token: where its item is now, as the token of the row that lists it: a
            pending item's, a delayed item's, its lease's (running), its dead
            letter's; what ``remove_many``, ``ack``/``release`` and
            ``requeue_dead(tokens=)`` take.  None when it is finished otherwise, when
            its lease ended and the item was not taken back yet, or when the record
            came from elsewhere than ``job``.
    """

    id: bytes
    state: str
    attempts: int
    pushed_at: Optional[float]
    started_at: Optional[float]
    finished_at: Optional[float]
    worker: Optional[str]
    error: Optional[JobError]
    progress: Optional[Progress]
    result: Any
    time_limit: Optional[float]
    cancel_requested: bool
    token: Optional[bytes] = None

    @property
    def finished(self) -> bool:
        """Whether the job is over (succeeded, dead or cancelled)."""
        return self.state in FINISHED


class Facts(NamedTuple):
    """A record's state as stored (before what changes with time alone is read as it
    is at the read version), and, once it finished, when it did and when it goes."""

    state: str
    attempts: int
    due: Optional[int]
    finished_at: Optional[float] = None
    expires_at: Optional[float] = None


def facts_of(state: Optional[bytes], end: Optional[bytes],
             begun: Optional[Tuple[Any, ...]] = None,
             pushed: Optional[Tuple[Any, ...]] = None) -> Optional[Facts]:
    """The :class:`Facts` of a record whose ``s`` and ``f`` keys hold ``state`` and
    ``end`` (None: absent), and whose ``b`` and ``a`` keys hold ``begun`` and
    ``pushed`` (unpacked; None: absent or not read); None when nothing says its state.

    Each step writes one key that says the state (docs/data-model.md), and the later
    step's key wins: an end written by a finish (``(finished_at, expires_at, state,
    attempts, due)``) says the job finished (but a purged dead letter's record, whose
    state key says ``dead`` too, names no dead letter: its due is None); else a
    claim's facts (``(started_at, worker, lease, attempts)``) say it runs, which it
    does while its lease's hold is there (else :meth:`Stored.returned`: a writer that
    ends a lease writes the state key or the end); else the state key, written by a
    return from a lease, a requeue, a release with a delay; else the push's facts
    (``(pushed_at, time_limit, state, 0, due)``).  What revives a finished job clears
    its end, and a push that gives an id again clears the earlier record.  Records of
    the earlier layout, whose every step wrote the state key (``f`` and ``b`` without
    their last elements, ``a`` without the state), read as they did."""
    parts = None if state is None else fdb.tuple.unpack(state)
    ended = None if end is None else fdb.tuple.unpack(end)
    if ended is not None and len(ended) >= 5:
        due = None if parts is not None and parts[0] == DEAD else ended[4]
        return Facts(ended[2], ended[3], due, ended[0], ended[1])
    if ended is not None and parts is not None and parts[0] in FINISHED:
        return Facts(parts[0], parts[1], parts[2], ended[0], ended[1])
    if begun is not None and len(begun) >= 4:
        return Facts(RUNNING, begun[3], None)
    return _before(parts, pushed)


def _before(state: Optional[Tuple[Any, ...]],
            pushed: Optional[Tuple[Any, ...]]) -> Optional[Facts]:
    """What the state key (``state``, unpacked) or else the push (``pushed``) says."""
    if state is not None:
        return Facts(state[0], state[1], state[2])
    if pushed is not None and len(pushed) >= 5:
        return Facts(pushed[2], pushed[3], pushed[4])
    return None


def pushed_place(pushed: Optional[Tuple[Any, ...]]) -> Optional[Tuple[Any, ...]]:
    """The place of the item of a job whose push key holds ``pushed`` (unpacked; None:
    absent), when the push made its id (and wrote no id key: see
    :meth:`Records.pushed`); None otherwise.  The item is there (visible, delayed or
    held) until the job finished, or, dead, until its dead letter goes (a requeue
    moves it: that writes the id's key, which says where)."""
    if pushed is None or len(pushed) < 6:
        return None
    place: Tuple[Any, ...] = pushed[5]
    return place


def index_entries(expiry: Any, kv: Any) -> List[Tuple[Any, ...]]:
    """The entries ``(expires_at, *where, id)`` that one key-value ``kv`` of the index
    of finished records ``expiry`` (a Subspace) names, in order: the key's own, then
    those its value holds (the other jobs one operation finished at that time, see
    :meth:`.._fdb.Tally.group`; a key of the earlier layout, its value empty, names
    its own alone)."""
    head: Tuple[Any, ...] = expiry.unpack(kv.key)
    if not kv.value:
        return [head]
    rest = fdb.tuple.unpack(kv.value)
    width = len(head) - 1
    return [head, *((head[0], *rest[at:at + width]) for at in range(0, len(rest), width))]


class Stored(NamedTuple):
    """A record as stored (its parts, unpacked, and its :class:`Facts`), before the
    state is read as it is at the read version (see :meth:`Records.read`)."""

    parts: Dict[str, Tuple[Any, ...]]
    result: Optional[bytes]
    facts: Facts

    def lease(self) -> Optional[bytes]:
        """The lease id of the attempt that began last, if the job runs."""
        begun = self.parts.get("b")
        return None if begun is None or self.facts.state != RUNNING else begun[2]

    def returned(self) -> Stored:
        """The record of a job whose lease's hold is gone: what its state key says (a
        return from a lease writes it), or pending, if that says running (a hold gone
        without a word: a clear)."""
        facts = _before(self.parts.get("s"), self.parts.get("a"))
        assert facts is not None  # a record has its push's facts, or a state key
        return self._replace(facts=facts._replace(state=PENDING) if facts.state == RUNNING
                             else facts)

    def record(self, id_: bytes, state: str) -> JobRecord:
        """The public record, its state as read."""
        parts = self.parts
        facts = self.facts
        pushed_at, time_limit = parts.get("a", (None, None))[:2]
        started_at, worker = parts.get("b", (None, None))[:2]
        error = parts.get("e")
        progress = parts.get("p")
        return JobRecord(id_, state, facts.attempts, pushed_at, started_at, facts.finished_at,
                         worker, None if error is None else JobError(*error),
                         None if progress is None else Progress(*progress),
                         None if self.result is None else decode_value(self.result),
                         time_limit, "c" in parts and facts.state not in FINISHED)


def _pack(parts: Tuple[Any, ...]) -> bytes:
    packed: bytes = fdb.tuple.pack(parts)
    return packed


@functools.lru_cache(maxsize=256)
def _ending(state: str, attempts: int) -> bytes:
    """The end of a finished record's ``f`` value after its times, ``(state, attempts,
    None)`` packed (a packed tuple is its elements' encodings, one after the other):
    the same for most jobs, packed once."""
    return _pack((state, attempts, None))


@functools.lru_cache(maxsize=256)
def _packed_int(n: int) -> bytes:
    """``n`` tuple-packed (an attempt's number: a few of them, packed once each)."""
    return _pack((n,))


class Records:
    """The job records of one queue (see the module docstring): every method writes
    without reading (blind writes: no conflicts), but :meth:`read` and :meth:`look`.
    A structure made without ``history`` writes none as it pushes, claims and acks
    (:attr:`keeps` is False), but reads those others wrote, and moves them with the
    items an operator's call moves (remove, cancel, ack, release and bury by token,
    requeue and purge of dead letters): it looks for them first (:meth:`look`)."""

    __slots__ = ("begun", "history", "keeps", "keys", "last")

    def __init__(self, keys: RecordLayout, history: Optional[float]) -> None:
        self.keys = keys
        self.history = history
        #: whether this structure object writes job records (made with ``history``)
        self.keeps = history is not None
        #: the last operation's time a job finished at, packed with when its record
        #: goes, and where the entries that go then begin in the index of finished
        #: records (see :meth:`finished`): the same for every job it finishes
        self.last: Tuple[float, bytes, bytes] = (-1.0, b"", b"")
        #: the last claim's time and worker, and the two packed, which begin the
        #: ``b`` of each job it holds (see :meth:`began`)
        self.begun: Tuple[float, Optional[str], bytes] = (-1.0, None, b"")

    # -- written as the item moves ------------------------------------------------------

    def pushed(self, tr: Any, id_: bytes, time_limit: Optional[float], state: str,
               due: Optional[int] = None, place: Optional[Tuple[Any, ...]] = None) -> None:
        """Job ``id_`` was pushed now, and is ``state`` (pending, delayed, ``due``
        then): one key, the state key is not written; one more job with terms to read
        at its claims, if it has a time limit.  ``place``: where its item is, for an
        id the push made (kept here: no id key says it, see :func:`pushed_place`)."""
        tr.set(self.keys.key(id_, "a"), _pack((time.time(), time_limit, state, 0, due)
                                              + (() if place is None else (place,))))
        if time_limit is not None:
            tr.add(self.keys.terms, le64(1))

    def state(self, tr: Any, id_: bytes, state: str, attempts: int,
              due: Optional[int] = None) -> None:
        """Job ``id_`` is ``state`` after ``attempts`` attempts (``due``: when a
        delayed or retrying job becomes visible, a clock reading)."""
        tr.set(self.keys.key(id_, "s"), _pack((state, attempts, due)))

    def began(self, tr: Any, id_: bytes, attempts: int, worker: Optional[str],
              lease: bytes, tally: Optional[Tally] = None) -> None:
        """Attempt ``attempts`` of job ``id_`` began now (at the time of the claim whose
        ``tally`` is given: its jobs begin together), under ``lease`` (held by
        ``worker``, if one said): one key, which says it runs while the lease's hold
        is there (the state key is left as it was: see :func:`facts_of`).  A cancel
        asked of an earlier attempt stays: the next claim reads it
        (``Lease.cancel_requested``).  The value's time and worker, the same for the
        claim's jobs, are packed once (a packed tuple is its elements' encodings)."""
        now = time.time() if tally is None else tally.wall_time()
        begun = self.begun
        if begun[0] != now or begun[1] != worker:
            begun = self.begun = (now, worker, _pack((now, worker)))
        tr.set(self.keys.key(id_, "b"), begun[2] + packed_bytes(lease) + _packed_int(attempts))

    def failed(self, tr: Any, id_: bytes, error: Tuple[str, str, str]) -> None:
        """Job ``id_`` failed with ``error`` (type, message, traceback)."""
        tr.set(self.keys.key(id_, "e"), _pack(tuple(error)))

    def finished(self, tr: Any, id_: bytes, state: str, attempts: int,
                 result: Optional[bytes] = None, died: Optional[int] = None,
                 tally: Optional[Tally] = None) -> None:
        """Job ``id_`` ended (``state``: succeeded, dead, cancelled) after ``attempts``,
        with ``result`` (tuple-encoded); its record goes ``history`` seconds from now.
        The end key says so, with the finished state (the state key is left as the
        last step wrote it: one key less); a dead job's keeps when it ``died`` (the
        clock reading its dead letter is filed under) as its ``due``.  A cancel asked
        while it ran stays (a record read says none once it finished): what revives
        the job clears it (:meth:`revived`).  Its entry in the index of finished
        records goes with the other entries of the operation whose ``tally`` is
        given (they finish at its time: one index key for them all, see
        :meth:`.._fdb.Tally.group`), else in a key of its own."""
        now = time.time() if tally is None else tally.wall_time()
        last = self.last
        if last[0] != now:  # what one operation finishes goes at one time
            expires = now + (self.history or 0.0)
            last = self.last = (now, _pack((now, expires)), self.keys.expiry_prefix(expires))
        tr.set(self.keys.key(id_, "f"), last[1] + (
            _ending(state, attempts) if died is None else _pack((state, attempts, died))))
        if result is not None:
            for n, at in enumerate(range(0, len(result), RESULT_CHUNK)):
                tr.set(self.keys.chunk(id_, n), result[at:at + RESULT_CHUNK])
        if tally is None:
            tr.set(last[2] + self.keys.entry(id_), b"")
        else:
            tally.group(last[2], self.keys.entry(id_))

    def revived(self, tr: Any, id_: bytes) -> None:
        """Job ``id_``, which may have finished, runs again (a requeued dead letter, an
        undone pop): its end and any cancel asked of it go (its state is written
        beside)."""
        tr.clear(self.keys.key(id_, "f"))
        tr.clear(self.keys.key(id_, "c"))

    def renewed(self, tr: Any, id_: bytes) -> None:
        """A new job with the id ``id_`` was pushed (an id given again after its
        retention passed): whatever a record of an earlier job with that id kept goes
        (one range clear; its parts are written beside)."""
        whole = self.keys.jobs.range((id_,))
        tr.clear_range(whole.start, whole.stop)

    def look(self, tr: Any, ids: Iterable[Optional[bytes]],
             every: bool = False) -> Dict[bytes, Any]:
        """Start reading which of ``ids`` have a record (for :meth:`found`): each one's
        push key (every record has one), with a read conflict (a prune or a change of it meanwhile
        conflicts), in parallel.  Nothing is read when this object keeps records and
        not ``every``: it writes them as it moves items that are pending, delayed or
        running, whose records are never pruned; ``every`` reads them all the same,
        for items whose records may be pruned already (dead letters)."""
        if self.keeps and not every:
            return {}
        return {id_: tr.get(self.keys.key(id_, "a")) for id_ in ids if id_ is not None}

    def found(self, looked: Dict[bytes, Any]) -> Gen[FrozenSet[bytes]]:
        """The ids :meth:`look` found a record of."""
        out = set()
        for id_, future in looked.items():
            if (yield from read(future)) is not None:
                out.add(id_)
        return frozenset(out)

    def kept(self, tr: Any, ids: Iterable[Optional[bytes]],
             every: bool = False) -> Gen[FrozenSet[bytes]]:
        """:meth:`look`, then :meth:`found`: one round trip when there is anything to
        read, none otherwise."""
        return (yield from self.found(self.look(tr, ids, every)))

    def look_made(self, tr: Any, id_: bytes) -> Tuple[Any, Any, Any]:
        """Start reading whether the job a push gave ``id_`` made it for is still in
        the structure (for :meth:`made_there`): its push, state and end keys, with
        read conflicts (its finish, or its dead letter's purge, meanwhile conflicts),
        in parallel."""
        return (tr.get(self.keys.key(id_, "a")), tr.get(self.keys.key(id_, "s")),
                tr.get(self.keys.key(id_, "f")))

    def made_there(self, looked: Tuple[Any, Any, Any]) -> Gen[bool]:
        """Whether what :meth:`look_made` read says that a job whose id its push made
        (its push key names its place: :func:`pushed_place`) is in the structure: not
        finished, or dead with its dead letter there (what the id key the earlier
        layout wrote for it said, until it was cleared)."""
        pushed = yield from read(looked[0])
        state = yield from read(looked[1])
        end = yield from read(looked[2])
        if pushed is None or pushed_place(fdb.tuple.unpack(pushed)) is None:
            return False
        facts = facts_of(state, end)
        return end is None or (facts is not None and facts.state == DEAD
                               and facts.due is not None)

    def progress(self, tr: Any, id_: bytes, progress: Progress) -> None:
        """Job ``id_``'s handler reported ``progress``."""
        tr.set(self.keys.key(id_, "p"), _pack(tuple(progress)))

    def cancel(self, tr: Any, id_: bytes) -> None:
        """A cancel of running job ``id_`` was asked now (one more job with terms to
        read at its claims)."""
        tr.set(self.keys.key(id_, "c"), _pack((time.time(),)))
        tr.add(self.keys.terms, le64(1))

    # -- read ------------------------------------------------------------------------

    def start(self, reader: Any, id_: bytes) -> Range:
        """Start reading job ``id_``'s record (one range read)."""
        r = self.keys.jobs.range((id_,))
        return Range(reader, r.start, r.stop)

    def stored(self, kvs: List[Any]) -> Optional[Stored]:
        """The record in ``kvs`` (what :meth:`start` read), or None if it has no state."""
        parts: Dict[str, Tuple[Any, ...]] = {}
        raw: Dict[str, bytes] = {}
        chunks: List[bytes] = []
        for kv in kvs:
            part = self.keys.jobs.unpack(kv.key)[1]
            if part == "r":
                chunks.append(kv.value)
            else:
                raw[part] = kv.value
                parts[part] = fdb.tuple.unpack(kv.value)
        facts = facts_of(raw.get("s"), raw.get("f"), parts.get("b"), parts.get("a"))
        if facts is None:
            return None
        return Stored(parts, b"".join(chunks) if chunks else None, facts)

    def read(self, reader: Any, id_: bytes) -> Gen[Optional[Stored]]:
        """Job ``id_``'s record as stored, or None."""
        return self.stored((yield from self.start(reader, id_).read()))
