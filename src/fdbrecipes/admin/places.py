"""Where a structure is, and what is stored there.

A place is a directory-layer path or a tuple (:class:`Place`).  :func:`survey` reads
the first key of each range a kind keeps, to refuse a place holding another kind's
keys before anything is shown or changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from fdb.subspace_impl import Subspace

from .. import _kinds
from .._kinds import Kind
from .._layout import LEFT_BEHIND, SHARDED, Marker
from .._store_layout import LIMITS, SCHEDULES, WORKFLOWS
from .output import cut

__all__ = ["ANY_QUEUE", "LIMIT_STORE", "SCHEDULE_STORE", "WORKFLOW_STORE", "OperatorError",
           "Place", "Structure", "UsageError", "make_place", "make_structure", "open_place",
           "shards_of", "stored", "survey"]

#: A structure the commands act on: a Queue, PriorityQueue, FairQueue or WeightTree
#: (the sync class of a kind, see :mod:`fdbrecipes._kinds`).
Structure = Any
#: What :func:`stored` says of queue keys that do not tell which kind of queue.
ANY_QUEUE = "queue or priority-queue"
#: What :func:`stored` says of a schedule store (:class:`fdbrecipes.Schedules`), which
#: it recognises by its change counter.
SCHEDULE_STORE = "schedule store"
#: What :func:`stored` says of a limit store (:class:`fdbrecipes.Limits`), which it
#: recognises by its change counter.
LIMIT_STORE = "limit store"
#: What :func:`stored` says of a workflow store (:class:`fdbrecipes.workflow.Workflows`),
#: which it recognises by its first workflow's header.
WORKFLOW_STORE = "workflow store"
#: The stores :func:`stored` recognises, by the first element of their change counter's
#: key, which no structure uses.
STORES = ((SCHEDULES, SCHEDULE_STORE), (LIMITS, LIMIT_STORE))


class OperatorError(Exception):
    """A command failed; the message is the line printed, ``status`` the exit status."""

    status = 1


class UsageError(OperatorError):
    """The command line asks for something that cannot be done (exit status 2)."""

    status = 2


@dataclass(frozen=True)
class Place:
    """Where a structure lives: a directory path, or a tuple naming a subspace."""

    directory: Optional[Tuple[str, ...]] = None
    prefix: Tuple[Any, ...] = ()

    def __str__(self) -> str:
        if self.directory is not None:
            return "directory " + "/".join(self.directory)
        return f"tuple {self.prefix!r}"


def open_place(tr: Any, place: Place) -> Subspace:
    """The subspace of ``place``: a directory is opened (read only), never created.

    Raises:
        OperatorError: no such directory, or it cannot hold data (a partition).
    """
    if place.directory is None:
        return Subspace(place.prefix)
    import fdb.directory_impl  # loads libfdb_c: only once a command runs

    try:
        opened: Subspace = fdb.directory.open(tr, place.directory)
    except ValueError as e:
        if "does not exist" in str(e):
            raise OperatorError(f"no such directory: {'/'.join(place.directory)}") from None
        raise OperatorError(f"cannot open {place}: {e}") from None
    return _data_directory(place, opened)


def make_place(db: Any, place: Place) -> Subspace:
    """The subspace of ``place``, a directory made if it is missing
    (``fdb.directory.create_or_open``, in a transaction of its own that commits what
    it made; one that exists is opened, nothing written).  For the commands that
    start a structure where none is yet (``push``, ``worker``).

    Raises:
        OperatorError: it cannot hold data (a partition, another layer's directory).
    """
    if place.directory is None:
        return Subspace(place.prefix)
    import fdb.directory_impl  # loads libfdb_c: only once a command runs

    try:
        made: Subspace = fdb.directory.create_or_open(db, place.directory)
    except ValueError as e:
        raise OperatorError(f"cannot open {place}: {e}") from None
    return _data_directory(place, made)


def _data_directory(place: Place, opened: Subspace) -> Subspace:
    """``opened``, the directory of ``place``, unless it is a partition.

    Raises:
        OperatorError: it is a partition.
    """
    import fdb.directory_impl

    if isinstance(opened, fdb.directory_impl.DirectoryPartition):
        raise OperatorError(f"{place} is a directory partition: name a directory in it")
    return opened


def _first(tr: Any, subspace: Subspace) -> Any:
    """Start reading the first key of ``subspace`` (a snapshot read)."""
    r = subspace.range()
    return tr.snapshot.get_range(r.start, r.stop, limit=1)


def stored(tr: Any, subspace: Subspace) -> Tuple[Optional[str], Optional[str]]:
    """What is stored at ``subspace``: (the kind, or None for an empty place or a
    queue whose kind its keys do not tell; what is wrong there, or None).

    Snapshot reads, all issued at once: a sharded structure's marker, the change
    counters of a schedule store and of a limit store, a workflow store's first
    header, the first key of each range and
    the single keys whose presence tells a kind (each kind's footprint, see
    :func:`fdbrecipes._kinds.recognise`), and the first key of the place.  A sharded
    structure's marker names its kind.  A queue's item tuple is one element shorter than
    a priority queue's, which tells those two apart when an item, a hold or a dead
    letter is there (otherwise the kind is "queue or priority-queue").
    """
    ranges, keys = _kinds.reads()
    marker = tr.snapshot.get(Marker.key(subspace))
    stores = {name: tr.snapshot.get(subspace.pack((key,))) for key, name in STORES}
    workflows = _first(tr, subspace[WORKFLOWS])
    started = {m: _first(tr, subspace[m]) for m in ranges}
    singles = {m: tr.snapshot.get(subspace.pack((m,))) for m in keys}
    anything = _first(tr, subspace)
    raw = marker.wait().value
    if raw is not None:
        return _marked(Marker.unpack(bytes(raw)))
    store = next((name for name, f in stores.items() if f.wait().value is not None), None)
    if store is not None:
        return store, None
    if list(workflows):
        return WORKFLOW_STORE, None
    firsts = {m: list(kvs) for m, kvs in started.items()}
    found = tuple(m for m, f in singles.items() if f.wait().value is not None)
    seen = _kinds.recognise(subspace, firsts, found)
    if seen.wrong is not None:
        return None, seen.wrong
    if seen.kinds:
        return _named(seen.kinds), None
    return None, _foreign(subspace, anything)


def _marked(layout: Marker) -> Tuple[Optional[str], Optional[str]]:
    """What a sharded structure's marker says is stored."""
    if layout.version != SHARDED:
        return None, f"a layout of a later fdbrecipes ({layout.version})"
    if layout.kind not in _kinds.names():
        return None, f"a sharded structure of no known kind ({cut(repr(layout.kind), 40)})"
    return layout.kind, None


def _named(kinds: Tuple[Kind, ...]) -> str:
    """The name :func:`stored` gives the kinds the keys may be: the one kind's, or
    :data:`ANY_QUEUE` for a queue or a priority queue."""
    return kinds[0].name if len(kinds) == 1 else " or ".join(kind.name for kind in kinds)


def _foreign(subspace: Subspace, anything: Any) -> Optional[str]:
    """What is wrong at a place that holds no structure's keys: its first key (read
    into ``anything``), unless what any structure may leave (:data:`LEFT_BEHIND`)."""
    for kv in anything:
        try:
            head = subspace.unpack(kv.key)[:1]
        except Exception:  # a key under a nested subspace ("t" of a fair queue's lottery)
            head = (bytes(kv.key[len(subspace.key()):]),)
        if not (head and head[0] in LEFT_BEHIND):
            return f"keys of no fdbrecipes structure (first: {cut(repr(head[0]), 40)})"
    return None


def survey(tr: Any, subspace: Subspace, kind: str) -> Optional[str]:
    """What is stored at ``subspace`` if it is not a ``kind`` ("keys of a queue",
    ...); None if it is one, or if the place holds none of a structure's keys (see
    :func:`stored`)."""
    seen, wrong = stored(tr, subspace)
    if wrong is not None:
        return wrong
    if seen is None or seen == kind:
        return None
    if seen == ANY_QUEUE:
        return None if kind in ANY_QUEUE.split(" or ") else "keys of a queue"
    return f"keys of a {seen}"


def shards_of(tr: Any, subspace: Subspace) -> int:
    """How many shards the structure at ``subspace`` has: its marker's number, 1 when
    it has none (a snapshot read)."""
    raw = tr.snapshot.get(Marker.key(subspace)).wait().value
    return 1 if raw is None else max(1, Marker.unpack(bytes(raw)).shards)


def make_structure(kind: str, subspace: Subspace, max_deliveries: Optional[int],
                   history: Optional[float] = None, shards: int = 1,
                   limits: Any = None) -> Structure:
    """The library object for a structure of ``kind`` at ``subspace`` (``history``:
    it keeps job records, as a worker's structure may; ``shards``: as it was made,
    see :func:`shards_of`; ``limits``: the uses of limits its jobs carry, as a
    structure with jobs takes them)."""
    return _kinds.kind_named(kind).make(subspace, max_deliveries, history, shards, limits)
