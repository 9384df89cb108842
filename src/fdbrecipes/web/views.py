"""What the dashboard's pages but a structure's tabs show (those are
:mod:`.listings`), read from the cluster: plain data, no HTML.

Every function takes the request's :class:`.reads.Reads` and reads in one transaction
that is never committed (snapshot reads where the library's reading methods take them,
retried on retryable errors within the request's deadline), through the structures'
public methods and operations objects (:mod:`fdbrecipes.protocol`).  Every read is
bounded: counters, one key per row, the last hour of history.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, NamedTuple, Optional

from .. import (
    DeadLetter,
    DelayedItem,
    LeaseInfo,
    PendingItem,
    _kinds,
    drive,
)
from .._attempt import gather
from .._fdb import Gen, snap
from .._schedules.ops import MAX_STORED_VALUE
from ..admin.jobs import job_record, jobs_of
from ..types import QueueStats
from .listings import PAGE_BYTES, PER_SECOND, queue_of
from .reads import Reads
from .show import ago, group_hex, when

__all__ = ["OVERVIEW_GROUPS", "STORED_PAGE", "STORED_ROWS", "JobView", "Overview",
           "ScheduleRow", "StoredRow", "job", "kind_of", "overview", "paused", "schedules",
           "stored", "tab_counts", "workers"]

#: Minutes of history the overview draws.
HOUR = 60
#: Stored schedules the schedules page lists at most, per store.
STORED_ROWS = 1_000
#: Stored schedules read in one transaction of the schedules page: their values (at
#: most ``MAX_STORED_VALUE`` each) add up to about :data:`.listings.PAGE_BYTES`.
STORED_PAGE = PAGE_BYTES // MAX_STORED_VALUE
#: Groups of a FairQueue whose counts the overview sums at most.
OVERVIEW_GROUPS = 200


def kind_of(structure: Any) -> str:
    """``structure``'s kind, as the operator commands name it.

    Raises:
        TypeError: it is not a Queue, PriorityQueue, FairQueue or WeightTree (the
            dashboard shows the sync structures).
    """
    return _kind(structure).name


def _kind(structure: Any) -> _kinds.Kind:
    """``structure``'s kind record (see :func:`kind_of`)."""
    kind = _kinds.find(structure, twins=False)
    if kind is None:
        raise TypeError(f"a dashboard structure must be a Queue, PriorityQueue, FairQueue or "
                        f"WeightTree, not {type(structure).__name__}")
    return kind


class Overview(NamedTuple):
    """One structure's line on the overview: its name, kind and counts (a weight
    tree's items all count as visible; ``partial``: a FairQueue's counts are those of
    its first :data:`OVERVIEW_GROUPS` groups only, it has more)."""

    name: str
    kind: str
    visible: int
    delayed: int
    in_flight: int
    dead: int
    oldest_age: str
    paused: Optional[str]
    done: List[int]
    backlog: List[Optional[int]]
    partial: bool = False


def paused(tr: Any, structure: Any) -> Optional[str]:
    """Since when ``structure`` is paused (a WeightTree never is), or None: ``paused``
    (one read)."""
    if not _kind(structure).jobs:
        return None
    at: Optional[float] = jobs_of(structure).paused(tr)
    return None if at is None else when(at)


def tab_counts(reads: Reads, structure: Any, group: Any = None) -> Dict[str, int]:
    """How many rows each tab of a queue's page lists (``stats``: counters, by
    snapshot, 1 round trip); none for a FairQueue's own page or a WeightTree."""
    if not _kind(structure).one_queue(group):
        return {}
    found = reads(_stats, queue_of(structure, group))
    return {"pending": found.visible, "delayed": found.delayed,
            "in-flight": found.in_flight, "dead": found.dead}


def _stats(tr: Any, queue: Any) -> QueueStats:
    found: QueueStats = drive(queue.stats(tr))
    return found


def _value(value: Any) -> Gen[Any]:
    """An operation that reads nothing and returns ``value``."""
    yield from ()
    return value


class Totals(NamedTuple):
    """A structure's stats, and whether they cover only part of it."""

    stats: QueueStats
    partial: bool


def _totals(tr: Any, structure: Any) -> Gen[Totals]:
    """``structure``'s stats; a FairQueue's summed over its first
    :data:`OVERVIEW_GROUPS` groups (its ``stats`` reads every group: O(groups))."""
    if not _kind(structure).groups:
        return Totals((yield from structure.ops.stats(tr)), False)
    groups = yield from structure.ops.groups(snap(tr), OVERVIEW_GROUPS + 1)
    views = (yield from structure.ops.stats_of(tr, groups[:OVERVIEW_GROUPS])).values()
    found = [view.stats for view in views]
    ages = [s.oldest_age for s in found if s.oldest_age is not None]
    stats = QueueStats(sum(s.visible for s in found), sum(s.delayed for s in found),
                       sum(s.in_flight for s in found), sum(s.dead for s in found),
                       max(ages) if ages else None)
    return Totals(stats, len(groups) > OVERVIEW_GROUPS)


def _overview_reads(tr: Any, structure: Any) -> List[Gen[Any]]:
    """What one line of the overview reads: the totals, the last hour, the pause."""
    if not _kind(structure).jobs:
        return [_totals(tr, structure), _value([]), _value(None)]
    return [_totals(tr, structure), structure.ops.throughput(tr, HOUR),
            structure.ops.paused(tr)]


def _overview(tr: Any, structures: Dict[str, Any]) -> List[Overview]:
    reads = [_overview_reads(tr, s) for s in structures.values()]
    found = drive(gather([op for ops in reads for op in ops]))
    rows = []
    for i, (name, structure) in enumerate(structures.items()):
        totals, minutes, at = found[3 * i:3 * i + 3]
        stats = totals.stats
        rows.append(Overview(name, kind_of(structure), stats.visible, stats.delayed,
                             stats.in_flight, stats.dead, ago(stats.oldest_age),
                             None if at is None else when(at), [m.done for m in minutes],
                             _sampled([m.backlog for m in minutes]), totals.partial))
    return rows


def _sampled(backlog: List[Optional[int]]) -> List[Optional[int]]:
    """``backlog``, or nothing when no minute of it was sampled."""
    return backlog if any(b is not None for b in backlog) else []


def overview(reads: Reads, structures: Dict[str, Any]) -> List[Overview]:
    """Every structure's counts (``stats``: snapshot reads, O(1) in the number of
    items; a FairQueue's over its first :data:`OVERVIEW_GROUPS` groups, side by side),
    pause flag (1 read) and last hour of history (``throughput``: one range read of 60
    keys per worker), every structure's read side by side in one transaction (so at
    one read version): 2 to 4 round trips in all."""
    return reads(_overview, structures)


class JobView(NamedTuple):
    """A job's page, or an item's: its record (a :class:`fdbrecipes.JobRecord`; None
    for an item without one: pushed without an id, or to a structure without
    ``history``); the row of its item where it is now (``lookup`` of its token: a
    PendingItem, DelayedItem, LeaseInfo or DeadLetter; None once it left), which holds
    its payload, its deliveries, its lease's deadline, its dead letter's reason; that
    row's ``kind`` (the tab that lists it), its token (hex), and, for a lease or a
    delay, when it ends (from now, and as a time)."""

    record: Any
    row: Any
    kind: Optional[str]
    token: Optional[str]
    ends_in: str
    deadline: str


#: The tab that lists each kind of row.
ROW_KINDS = {PendingItem: "pending", DelayedItem: "delayed", LeaseInfo: "in-flight",
             DeadLetter: "dead"}


def _job_view(tr: Any, structure: Any, id_: Optional[bytes], group: Any,
              token: Optional[bytes]) -> Optional[JobView]:
    queue = queue_of(structure, group)
    row = None if token is None else drive(queue.lookup(tr, token))
    if id_ is None and row is not None:
        id_ = row.id
    record = None if id_ is None else job_record(tr, structure, id_, group)
    if row is None and record is not None and record.token is not None:
        row = drive(queue.lookup(tr, record.token))
    if row is None:
        return None if record is None else JobView(record, None, None, None, "", "")
    ends = getattr(row, "deadline", getattr(row, "due_at", None))
    left = None if ends is None else (ends - tr.get_read_version().wait()) / PER_SECOND
    return JobView(record, row, ROW_KINDS[type(row)], row.token.hex(), ago(left),
                   "-" if left is None else when(time.time() + left))


def job(reads: Reads, structure: Any, id_: Optional[bytes], group: Any = None,
        token: Optional[bytes] = None) -> Optional[JobView]:
    """Job ``id_``'s record and its item's row, or the item the row ``token`` names
    (and its job's record, when it has an id and one); None when there is neither.
    One transaction: ``lookup`` of the token (1 round trip; the payload read once,
    whatever its size), the structure's ``job`` (1 to 2 round trips), then, without a
    token or once its row is gone, ``lookup`` of the row the record's ``token``
    names (1 round trip)."""
    return reads(_job_view, structure, id_, group, token)


def workers(reads: Reads, structure: Any) -> List[Any]:
    """The live workers serving ``structure`` (``workers``: snapshot reads, 1 round
    trip); none for a WeightTree."""
    if not _kind(structure).jobs:
        return []
    jobs = jobs_of(structure)
    found: List[Any] = reads(jobs.workers)
    return found


class ScheduleRow(NamedTuple):
    """One schedule: its name, the structure it feeds (its name here, or None), its
    period (seconds, None for ``at=``), and its next and last slots with their jobs'
    states (None: no record, as without ``history``)."""

    name: str
    structure: Optional[str]
    every: Optional[float]
    next_at: float
    next_state: Optional[str]
    last_at: Optional[float]
    last_state: Optional[str]


def _slot_state(tr: Any, schedule: Any, slot: Optional[float]) -> Optional[str]:
    if slot is None:
        return None
    record = job_record(tr, schedule.queue, schedule.slot_id(slot), schedule.group)
    return None if record is None else str(record.state)


def _schedule_rows(tr: Any, schedules: List[Any], names: Dict[int, str],
                   now: float) -> List[ScheduleRow]:
    rows = []
    for s in schedules:
        upcoming = s.next_slot(now)
        last = None if s.every is None else upcoming - s.every
        rows.append(ScheduleRow(s.name, names.get(id(s.queue)), s.every, upcoming,
                                _slot_state(tr, s, upcoming), last, _slot_state(tr, s, last)))
    return rows


def schedules(reads: Reads, given: List[Any], structures: Dict[str, Any]) -> List[ScheduleRow]:
    """Each schedule's next slot (and, for ``every=``, its last) with the state of its
    job's record (``job``: 1 to 2 round trips each; the slot's id is the schedule's
    ``slot_id``); one transaction."""
    names = {id(s): name for name, s in structures.items()}
    return reads(_schedule_rows, given, names, time.time())


class StoredRow(NamedTuple):
    """One stored schedule on the schedules page: the store it is in (its index among
    the stores given), the schedule (a :class:`fdbrecipes.ScheduleInfo`), the
    structure it feeds (its name here, or None) and, for its job links, the group of a
    FairQueue's jobs (hex, or None)."""

    store: int
    info: Any
    structure: Optional[str]
    g: Optional[str]


def stored(reads: Reads, stores: List[Any], structures: Dict[str, Any]) -> List[StoredRow]:
    """The schedules of each store, at most :data:`STORED_ROWS` each, with the
    structure each feeds: ``list`` in transactions of :data:`STORED_PAGE` schedules
    (two snapshot range reads, 1 round trip each), so no transaction reads much more
    than :data:`.listings.PAGE_BYTES` of values."""
    names = {bytes(s.subspace.key()): name for name, s in structures.items()}
    rows = []
    for i, store in enumerate(stores):
        infos: List[Any] = []
        while True:
            page = min(STORED_PAGE, STORED_ROWS - len(infos))
            got = reads(store.list, page, infos[-1].name if infos else None)
            infos += got
            if len(got) < page or len(infos) == STORED_ROWS:
                break
        for info in infos:
            group = info.where.get("group")
            rows.append(StoredRow(i, info, names.get(info.target),
                                  None if group is None else group_hex(group)))
    return rows
