"""Job records as a structure's operations use them: results, follow-up work, waiting
for a job to finish, pruning, progress and time limits.

What Queue's, PriorityQueue's and FairQueue's operations objects share about job
records (:mod:`.records` writes and reads one queue's): each function takes the
structure's own parts (its records, found by where they are) as arguments.
"""

from __future__ import annotations

import time
import uuid
from typing import (
    Any,
    Callable,
    Dict,
    List,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    cast,
)

import fdb.tuple
from fdb.subspace_impl import Subspace

from .._attempt import Attempt
from .._fdb import Gen, Range, Tally, read, read_le64, snap
from .._values import check_id, check_seconds, encode_value
from .._waiting import Readiness
from ..errors import JobCancelledError, JobFailedError, ResultTooLargeError, UnknownJobError
from .records import (
    CANCELLED,
    DEAD,
    FINISHED,
    RUNNING,
    SUCCEEDED,
    JobError,
    JobRecord,
    Progress,
    Records,
    facts_of,
    index_entries,
)
from .registry import Registry

__all__ = ["CANCELLING", "MAX_RESULT_BYTES", "PRUNE_BATCH", "Finished", "Followup", "cancelled",
           "check_error", "check_job_id", "check_time_limit", "encode_result", "finished_or",
           "made_ids", "new_id", "Then", "outcome", "prune", "push_all", "recorded", "report",
           "terms", "Terms"]

#: The largest result a job record keeps, encoded (in chunks of 90,000 bytes): a larger
#: one is not kept, and its job's record says so.
MAX_RESULT_BYTES = 1_000_000
#: The name of the error recorded for a result that was too large.
TOO_LARGE = "fdbrecipes.ResultTooLargeError"
#: Job records one pruning transaction forgets at most.
PRUNE_BATCH = 1_000
#: Keys of the index of finished records a pruning transaction reads a round trip at
#: most (each names one job or more).
PRUNE_PAGE = 100
#: What ``cancel`` says of a running job: its worker was asked to stop it.
CANCELLING = "cancelling"


class Followup(NamedTuple):
    """Work to push when a job is acked, in the same transaction: ``value`` into the
    structure whose operations are ``ops`` (:class:`fdbrecipes.protocol.Workable`),
    with an idempotency ``id``, a ``delay``, ``where`` it goes (``(("priority",
    3),)``, ``(("group", "acme"),)``) and its keys under the structure's limits
    (``limit_keys``, as ``push`` takes them, or None)."""

    ops: Any
    value: Any
    id: Optional[bytes]
    delay: Optional[float]
    where: Tuple[Tuple[str, Any], ...]
    limit_keys: Optional[Dict[str, Any]] = None

    def push(self, tr: Any) -> Gen[None]:
        """The push, in the caller's transaction ``tr``."""
        return cast("Gen[None]", self.ops.push_job(tr, self.value, id=self.id,
                                                   delay=self.delay,
                                                   limit_keys=self.limit_keys,
                                                   **dict(self.where)))


class Then(Protocol):
    """Work pushed with a job's ack, in its transaction: a :class:`Followup`, or a
    workflow's step (``fdbrecipes._workflow.steps.Step``)."""

    def push(self, tr: Any) -> Gen[None]:
        """Its writes, in the ack's transaction ``tr``."""


class Finished(NamedTuple):
    """A job a worker finished: its lease, its result (encoded, or None), the work to
    push with its ack (:class:`Followup`), its last progress (or None), the error to
    record beside a success (a result too large to keep), or None, and its final
    state: ``succeeded``, or ``cancelled`` (it stopped on a cancel)."""

    lease: Any
    result: Optional[bytes] = None
    followups: Sequence[Then] = ()
    progress: Optional[Progress] = None
    error: Optional[Tuple[str, str, str]] = None
    state: str = SUCCEEDED


def new_id() -> bytes:
    """A job id made for an item: 32 random hex characters (a UUID4's)."""
    return uuid.uuid4().hex.encode()


def made_ids(n: int, given: Optional[bytes], history: Optional[float]) -> Tuple[bytes, ...]:
    """The ids made for ``n`` items pushed without an id (``given`` None) into a
    structure with job records (``history``): see :func:`new_id`; none otherwise."""
    if given is not None or history is None:
        return ()
    return tuple(new_id() for _ in range(n))


def check_time_limit(time_limit: Any, history: Optional[float]) -> Optional[float]:
    """A job's own time limit: None, or seconds > 0, kept in its record (a structure
    with ``history``).

    Raises:
        TypeError or ValueError: otherwise.
    """
    if time_limit is None:
        return None
    seconds = check_seconds(time_limit, "time_limit")
    if history is None:
        raise ValueError("time_limit is kept in the job's record: make the structure with "
                         "history=SECONDS")
    return seconds


def check_job_id(id_: Any) -> bytes:
    """A job's id (an item's id: 1 to 1,000 bytes).

    Raises:
        TypeError or ValueError: otherwise.
    """
    checked = check_id(id_)
    if checked is None:
        raise TypeError("id must be bytes, not NoneType")
    return checked


def check_error(error: Any) -> Optional[Tuple[str, str, str]]:
    """What a job failed with: None, or a :class:`JobError`.

    Raises:
        TypeError: otherwise.
    """
    if error is None:
        return None
    if not isinstance(error, JobError):
        raise TypeError(f"error must be a JobError or None, not {type(error).__name__}")
    return (str(error.type)[:200], str(error.message)[:1_000], str(error.traceback)[-8_000:])


def cancelled(tr: Any, registry: Registry, state: Optional[str], holder: Optional[str],
              where: Any, id_: bytes) -> Optional[str]:
    """What ``cancel`` says of a job that was ``state`` (see
    ``Listing.cancel``): ``cancelled`` (it was waiting: removed), ``cancelling`` (it
    runs: its holder, told here, stops it), its finished state (nothing changed), or
    None (no such job)."""
    if state == RUNNING:
        if holder is not None:
            registry.cancel(tr, holder, where, id_)
        return CANCELLING
    if state is None or state in FINISHED:
        return state
    return CANCELLED


def recorded(tr: Any, records: Records, finished: Finished) -> None:
    """What goes with the ack of a job in its records: its last progress, and the
    error recorded beside a success (a result too large).  Its follow-up work is
    pushed by :func:`push_all`."""
    id_ = finished.lease.id
    if id_ is not None and records.keeps:
        if finished.progress is not None:
            records.progress(tr, id_, finished.progress)
        if finished.error is not None:
            records.failed(tr, id_, finished.error)


def push_all(tr: Any, followups: Sequence[Then]) -> Gen[None]:
    """Push ``followups`` (of one job, or of the jobs of one ack, in order) in ``tr``:
    each in turn, but runs of those that can be pushed together (with a
    ``together()`` naming what they share, and a ``push_many``: a workflow store's
    steps, whose reads then go out side by side) in one call a run."""
    at = 0
    while at < len(followups):
        first = followups[at]
        together = getattr(first, "together", None)
        at += 1
        if together is None:
            yield from first.push(tr)
            continue
        shared = together()
        run = [first]
        while at < len(followups) and getattr(followups[at], "together", None) is not None \
                and followups[at].together() == shared:  # type: ignore[attr-defined]
            run.append(followups[at])
            at += 1
        yield from first.push_many(tr, run)  # type: ignore[attr-defined]


def encode_result(value: Any, codec: Any = None
                  ) -> Tuple[Optional[bytes], Optional[Tuple[str, str, str]]]:
    """A handler's return value, to keep in its job's record: (its encoding, None), or
    (None, the error to record) when it is None, or cannot be encoded (by the
    structure's ``codec``, if it has one, then by the tuple layer), or encodes to more
    than :data:`fdbrecipes.jobs.MAX_RESULT_BYTES` (the job succeeded all the same).

    Raises nothing: a result is the job's own business, its ack is not lost for it."""
    if value is None:
        return None, None
    try:
        if codec is not None:
            value = codec.encode(value)
        return encode_value(value, "the job's result", MAX_RESULT_BYTES), None
    except (TypeError, ValueError) as e:
        return None, (TOO_LARGE, str(e)[:1_000], "")


def outcome(record: JobRecord) -> Any:
    """What ``result()`` gives for a finished job: its result (None if it returned
    none).

    Raises:
        JobFailedError: it is dead.
        JobCancelledError: it was cancelled.
        ResultTooLargeError: its result was not kept.
    """
    if record.state == DEAD:
        raise JobFailedError(record)
    if record.state == CANCELLED:
        raise JobCancelledError(record)
    if record.error is not None and record.error.type == TOO_LARGE and record.result is None:
        raise ResultTooLargeError(f"job {record.id!r} succeeded, but its result was not "
                                  f"kept: {record.error.message}", record)
    return record.result


def finished_or(state: Optional[Tuple[Any, str, Any]], id_: bytes) -> Readiness:
    """Whether a job whose state was read as ``state`` (see
    ``Listing.state_of``) is finished; a readiness check's answer.

    Raises:
        UnknownJobError: no record.
    """
    if state is None:
        raise UnknownJobError(id_)
    return state[1] in FINISHED, None


def prune(tr: Any, attempt: Attempt, expiry: Subspace,
          locate: Callable[[Tuple[Any, ...]], Records], limit: int) -> Gen[int]:
    """Forget up to ``limit`` job records whose time is up: those the index of finished
    records (``expiry``, entries ``(expires_at, *where, id)``, several to a key: see
    :func:`.records.index_entries`) names before now, still finished and due then
    (a record revived and finished again since has a later entry: only the stale
    entry goes).  ``locate(where)`` gives the records of the queue named.  Reads the
    index by snapshot, :data:`PRUNE_PAGE` keys a round trip until it has ``limit``
    entries, then each record's state and end (read conflicts: a revival meanwhile
    makes this conflict); a key whose entries go past ``limit`` is written again
    with those left.  The number of entries handled."""
    r = expiry.range()
    start, end = r.start, expiry.pack((time.time(),))
    taken: List[Tuple[bytes, List[Tuple[Any, ...]]]] = []
    count = 0
    while count < limit:
        ask = min(PRUNE_PAGE, limit - count)
        kvs = yield from Range(snap(tr), start, end, ask).read()
        for kv in kvs:
            taken.append((kv.key, index_entries(expiry, kv)))
            count += len(taken[-1][1])
            if count >= limit:
                break
        if len(kvs) < ask:
            break
        start = kvs[-1].key + b"\x00"
    looked = []
    left = limit
    tally = Tally()
    for key, entries in taken:
        tr.add_read_conflict_key(key)
        tr.clear(key)
        for entry in entries[left:]:  # past the limit: written again, in a key of their own
            tally.group(expiry.pack(entry[:1]), fdb.tuple.pack(entry[1:]))
        for expires, *where, id_ in entries[:left]:
            records = locate(tuple(where))
            looked.append((expires, records, id_, tr.get(records.keys.key(id_, "s")),
                           tr.get(records.keys.key(id_, "f"))))
        left -= min(left, len(entries))
    tally.write(tr)
    for expires, records, id_, state_read, end_read in looked:
        facts = facts_of((yield from read(state_read)), (yield from read(end_read)))
        if facts is not None and facts.state in FINISHED and facts.expires_at == expires:
            whole = records.keys.jobs.range((id_,))
            tr.clear_range(whole.start, whole.stop)
    attempt.idle = not taken
    return len(looked)


def report(tr: Any, records: Sequence[Records], reports: Sequence[Tuple[Any, Progress]]) -> None:
    """Write each job's progress (``reports``: lease and progress; ``records``: the
    records of each lease's queue, in order)."""
    for found, (lease, progress) in zip(records, reports):
        if lease.id is not None:
            found.progress(tr, lease.id, progress)


class Terms(NamedTuple):
    """What a worker learns of a job it claimed from its record: its own time limit
    (seconds, or None) and whether a cancel is pending (asked while a worker that
    died held it)."""

    time_limit: Optional[float]
    cancel_requested: bool


def terms_known(tr: Any, records: Sequence[Records]) -> Dict[bytes, Any]:
    """Start reading, for each of ``records``, whether any of its jobs has terms (a
    time limit, or a cancel asked while it ran): snapshot reads, in parallel."""
    reader = snap(tr)
    return {found.keys.terms: reader.get(found.keys.terms) for found in records}


def terms(tr: Any, records: Sequence[Records], leases: Sequence[Any],
          known: Optional[Dict[bytes, Any]] = None) -> Gen[List[Terms]]:
    """The :class:`Terms` of each job of ``leases`` (``records``: each one's queue's),
    from its record (none: no limit, no cancel); snapshot reads, in parallel, and
    none for the jobs of a queue whose jobs never had terms (``known``: what
    :func:`terms_known` started, if it started earlier)."""
    known = terms_known(tr, records) if known is None else known
    some = {}
    for key, future in known.items():
        count = yield from read(future)
        some[key] = read_le64(count) != 0
    reader = snap(tr)
    reads = [None if lease.id is None or not some[found.keys.terms] else
             (reader.get(found.keys.key(lease.id, "a")), reader.get(found.keys.key(lease.id, "c")))
             for found, lease in zip(records, leases)]
    out: List[Terms] = []
    for futures in reads:
        if futures is None:
            out.append(Terms(None, False))
            continue
        pushed = yield from read(futures[0])
        cancel = yield from read(futures[1])
        out.append(Terms(None if pushed is None else fdb.tuple.unpack(pushed)[1],
                         cancel is not None))
    return out


