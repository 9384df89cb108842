"""A structure's finished jobs, from its index of finished records, the latest to be
pruned first (:func:`finished`, rows :class:`FinishedJob`).

The index (``expiry`` of :class:`.._layout.RecordLayout`) holds an entry per finished
record, by when it is pruned, the entries one operation wrote at one time in one key
(:func:`.records.index_entries`); each entry names the record it stands for, which
:mod:`.records` reads.  The tokens are :mod:`.tokens`' ``finished`` ones.
"""

from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Tuple

import fdb.tuple
from fdb.subspace_impl import Subspace

from .._fdb import Gen, Range, get_value, snap
from .records import FINISHED, JobError, Records, facts_of, index_entries
from .tokens import IndexPlace, finished_token

__all__ = ["FinishedJob", "finished"]

#: Entries of the index of finished records one round trip reads at most.
FINISHED_PAGE = 1_000


class FinishedJob(NamedTuple):
    """A finished job, as ``finished`` lists it (its whole record: ``job``).

    Attributes:
        id: the job's id.
        group: its FairQueue group; None in a Queue or PriorityQueue.
        state: ``succeeded``, ``dead`` or ``cancelled``.
        attempts: how many times it was handed to a consumer.
        finished_at: when it finished (wall-clock seconds).
        expires_at: when its record is pruned (wall-clock seconds).
        error: its last error, or None.
        token: names it in the listing: ``after=`` of the next page.
    """

    id: bytes
    group: Any
    state: str
    attempts: int
    finished_at: float
    expires_at: float
    error: Optional[JobError]
    token: bytes


class _Looked(NamedTuple):
    entry: Tuple[Any, ...]
    place: IndexPlace
    state: Any
    end: Any
    error: Any


def _row(looked: _Looked) -> Optional[FinishedJob]:
    """The row of an index entry whose record still says it finished then; None for a
    stale entry (a dead job requeued since: its record moved on)."""
    state, end, error = (get_value(f) for f in (looked.state, looked.end, looked.error))
    facts = facts_of(state, end)
    expires, *where, id_ = looked.entry
    if facts is None or facts.state not in FINISHED or facts.expires_at != expires:
        return None
    assert facts.finished_at is not None
    return FinishedJob(id_, where[0] if where else None, facts.state, facts.attempts,
                       facts.finished_at, expires,
                       None if error is None else JobError(*fdb.tuple.unpack(error)),
                       finished_token(looked.place))


def finished(tr: Any, expiry: Subspace, records_at: Callable[[Tuple[Any, ...]], Records],
             limit: Optional[int], after: Optional[IndexPlace]) -> Gen[List[FinishedJob]]:
    """The finished jobs of the index of finished records ``expiry``, the latest to be
    pruned first (the latest finished, when every record is kept as long), up to
    ``limit``, after the place ``after`` if given; ``records_at(where)`` gives the
    records of the queue an entry names.  Snapshot reads: the index, backwards, 1,000
    keys a round trip (the entries of a key, which one operation finished together,
    last first), then the state, end and error of each record named, in parallel
    (never its result).  Stale entries are skipped."""
    r = expiry.range()
    stop = r.stop
    if after is not None:  # the key that names it, if it names others before it
        stop = expiry.pack(after.entry) + (b"\x00" if after.at else b"")
    reader = snap(tr)
    out: List[FinishedJob] = []
    while limit is None or len(out) < limit:
        ask = FINISHED_PAGE if limit is None else min(FINISHED_PAGE, limit - len(out))
        kvs = yield from Range(reader, r.start, stop, ask, True).read()
        named = [place for kv in kvs for place in _places(expiry, kv, after)]
        while named and (limit is None or len(out) < limit):
            take = len(named) if limit is None else limit - len(out)
            looked = [_look(reader, records_at, entry, place) for entry, place in named[:take]]
            del named[:take]
            for one in looked:
                yield one.state
                yield one.end
                yield one.error
                row = _row(one)
                if row is not None:
                    out.append(row)
        if len(kvs) < ask:
            break
        stop = kvs[-1].key
    return out


def _places(expiry: Subspace, kv: Any,
            after: Optional[IndexPlace]) -> List[Tuple[Tuple[Any, ...], IndexPlace]]:
    """The entries key-value ``kv`` of the index names, each with its place, last
    first (those before ``after``, if it is one of them)."""
    entries = index_entries(expiry, kv)
    below = len(entries)
    if after is not None and after.at and entries[0] == after.entry:
        below = after.at
    return [(entries[at], IndexPlace(entries[0], at)) for at in reversed(range(below))]


def _look(reader: Any, records_at: Callable[[Tuple[Any, ...]], Records],
          entry: Tuple[Any, ...], place: IndexPlace) -> _Looked:
    """Start reading the state, end and error of the record ``entry`` names."""
    keys = records_at(tuple(entry[1:-1])).keys
    return _Looked(entry, place, *(reader.get(keys.key(entry[-1], part))
                                   for part in ("s", "f", "e")))
