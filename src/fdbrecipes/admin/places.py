"""Where a structure is, and what is stored there.

A place is a directory-layer path or a tuple (:class:`Place`).  :func:`survey` reads
the first key of each range a kind keeps, to refuse a place holding another kind's
keys before anything is shown or changed.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from fdb.subspace_impl import Subspace

from .._layout import LIMITS, SCHEDULES, SHARDED, Marker
from .._ops.fair import FairOps
from ..fair_queue import FairQueue
from ..priority_queue import PriorityQueue
from ..queue import Queue
from ..weight_tree import WeightTree
from .output import cut

__all__ = ["ANY_QUEUE", "FAIR_RANGES", "FAIR_WAKES", "LIMIT_STORE", "NEUTRAL",
           "QUEUE_ITEM_LEN", "QUEUE_KEYS", "QUEUE_RANGES", "RECORDS_INDEX", "SCHEDULE_STORE",
           "TREE_KEYS", "TREE_RANGES", "OperatorError", "Place", "Structure", "UsageError",
           "make_place", "make_structure", "open_place", "shards_of", "stored", "survey"]

Structure = Union[Queue, PriorityQueue, FairQueue, WeightTree]

#: The first tuple element of a structure's keys says what they are (the key layout of
#: :mod:`fdbrecipes._layout`, drawn in docs/data-model.md; the unit tests check these
#: against it).  Queue kinds: ranges of items (a Queue's floor among them),
#: holds, deadlines and dead letters; a PriorityQueue's floor key and the pause flag
#: (the deadlines' prefix, outside their range).
QUEUE_RANGES, QUEUE_KEYS = ("i", "h", "d", "x"), ("f", "d")
#: A weight tree: ranges of leaves, values and sums; the total weight key.
TREE_RANGES, TREE_KEYS = ("w", "v", "s"), ("t",)
#: A fair queue: its index of groups, where every group with work or a policy has an
#: entry.  (Its other ranges, its groups' queues under "q", policies under "p" and its
#: lottery under "t", a weight tree, look like structures nested under those names.)
FAIR_RANGES = ("a",)
#: What else tells a fair queue whose groups all left that index (drained, retired):
#: its looks asked for under "w", ``(time, group) = ''`` (a weight-tree's leaves there
#: hold their weight), and its index of finished job records under "o", whose entries
#: name the group, ``(expires_at, group, id)`` (a queue's: ``(expires_at, id)``).
FAIR_WAKES, RECORDS_INDEX = "w", "o"
#: What any structure, even a cleared one, may leave: receipt slots, idempotency ids,
#: its counters (the wake counter "pushed" among them), job records and their index,
#: its workers' records, a fair queue's pause flag and its throughput history.
NEUTRAL = ("c", "g", "k", "n", "j", "o", "u", "z", "m")
#: Elements of a Queue's item tuple; a PriorityQueue's has one more, the priority.
QUEUE_ITEM_LEN = 5
#: What :func:`stored` says of queue keys that do not tell which kind of queue.
ANY_QUEUE = "queue or priority-queue"
#: What :func:`stored` says of a schedule store (:class:`fdbrecipes.Schedules`), which
#: it recognises by its change counter.
SCHEDULE_STORE = "schedule store"
#: What :func:`stored` says of a limit store (:class:`fdbrecipes.Limits`), which it
#: recognises by its change counter.
LIMIT_STORE = "limit store"


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


def _item_length(subspace: Subspace, firsts: Dict[str, List[Any]]) -> int:
    """The length of the item tuple in the first item, hold or dead-letter key read
    (the item is the whole key, its second and its second element); 0 if none.  A
    queue's floor key (``(True,)``, after its items) counts as a queue's item."""
    for marker, index in (("i", None), ("h", 1), ("x", 1)):
        for kv in firsts[marker]:
            try:
                key = subspace[marker].unpack(kv.key)
                item = key if index is None else key[index]
            except Exception:
                continue
            if item == (True,) and index is None:
                return QUEUE_ITEM_LEN
            if type(item) is tuple:
                return len(item)
    return 0


def _fair_traces(subspace: Subspace, firsts: Dict[str, List[Any]]) -> bool:
    """Whether the first keys read under "w" and "o" are a fair queue's: a look asked
    for (an empty value, its key a time and a group) or a finished job's entry in the
    index of records naming its group (see :data:`FAIR_WAKES`)."""
    for kv in firsts[FAIR_WAKES]:
        with contextlib.suppress(Exception):  # not a tuple: no wake
            wake = subspace[FAIR_WAKES].unpack(kv.key)
            if not kv.value and len(wake) == 2 and type(wake[0]) is int:
                return True
    for kv in firsts[RECORDS_INDEX]:
        with contextlib.suppress(Exception):
            entry = subspace[RECORDS_INDEX].unpack(kv.key)
            if len(entry) == FairOps.where_len + 2 and type(entry[0]) is float:
                return True
    return False


def stored(tr: Any, subspace: Subspace) -> Tuple[Optional[str], Optional[str]]:
    """What is stored at ``subspace``: (the kind, or None for an empty place or a
    queue whose kind its keys do not tell; what is wrong there, or None).

    Snapshot reads, all issued at once: the first key of each range a kind keeps, its
    single keys, and the first key of the place.  A sharded structure's marker names
    its kind.  A queue's item tuple is one element shorter than a priority queue's,
    which tells those two apart when an item, a hold or a dead letter is there
    (otherwise the kind is "queue or priority-queue").  A fair queue is told by its
    index of groups or, once every group left it, by its looks asked for or its
    finished job records (:func:`_fair_traces`).
    """
    marker = tr.snapshot.get(Marker.key(subspace))
    schedules = tr.snapshot.get(subspace.pack((SCHEDULES,)))
    limits = tr.snapshot.get(subspace.pack((LIMITS,)))
    ranges = {m: _first(tr, subspace[m])
              for m in QUEUE_RANGES + TREE_RANGES + FAIR_RANGES + (RECORDS_INDEX,)}
    keys = {m: tr.snapshot.get(subspace.pack((m,))) for m in QUEUE_KEYS + TREE_KEYS}
    anything = _first(tr, subspace)
    raw = marker.wait().value
    if raw is not None:
        layout = Marker.unpack(bytes(raw))
        if layout.version != SHARDED:
            return None, f"a layout of a later fdbrecipes ({layout.version})"
        return layout.kind, None
    if schedules.wait().value is not None:
        return SCHEDULE_STORE, None
    if limits.wait().value is not None:
        return LIMIT_STORE, None
    firsts = {m: list(kvs) for m, kvs in ranges.items()}
    found = {m for m, f in keys.items() if f.wait().value is not None}
    is_queue = any(firsts[m] for m in QUEUE_RANGES) or bool(found & set(QUEUE_KEYS))
    is_tree = any(firsts[m] for m in TREE_RANGES) or bool(found & set(TREE_KEYS))
    if any(firsts[m] for m in FAIR_RANGES) or _fair_traces(subspace, firsts):
        return (None, "keys of both a queue and a fair-queue") if is_queue else (
            "fair-queue", None)
    if is_queue and is_tree:
        return None, "keys of both a queue and a weight-tree"
    if is_tree:
        return "weight-tree", None
    if is_queue:
        length = _item_length(subspace, firsts)
        return {QUEUE_ITEM_LEN: "queue", QUEUE_ITEM_LEN + 1: "priority-queue"}.get(
            length, ANY_QUEUE), None
    for kv in anything:
        try:
            head = subspace.unpack(kv.key)[:1]
        except Exception:  # a key under a nested subspace ("t" of a fair queue's lottery)
            head = (bytes(kv.key[len(subspace.key()):]),)
        if not (head and head[0] in NEUTRAL):
            return None, f"keys of no fdbrecipes structure (first: {cut(repr(head[0]), 40)})"
    return None, None


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
        return None if kind in ("queue", "priority-queue") else "keys of a queue"
    return f"keys of a {seen}"


def shards_of(tr: Any, subspace: Subspace) -> int:
    """How many shards the structure at ``subspace`` has: its marker's number, 1 when
    it has none (a snapshot read)."""
    raw = tr.snapshot.get(Marker.key(subspace)).wait().value
    return 1 if raw is None else max(1, Marker.unpack(bytes(raw)).shards)


def make_structure(kind: str, subspace: Subspace, max_deliveries: Optional[int],
                   history: Optional[float] = None, shards: int = 1) -> Structure:
    """The library object for a structure of ``kind`` at ``subspace`` (``history``:
    it keeps job records, as a worker's structure may; ``shards``: as it was made,
    see :func:`shards_of`)."""
    if kind == "weight-tree":
        return WeightTree(subspace)
    if kind == "queue":
        return Queue(subspace, max_deliveries=max_deliveries, history=history, shards=shards)
    if kind == "fair-queue":
        return FairQueue(subspace, max_deliveries=max_deliveries, history=history,
                         shards=shards)
    return PriorityQueue(subspace, max_deliveries=max_deliveries, history=history,
                         shards=shards)
