"""What each dashboard page shows, read from the cluster: plain data, no HTML.

Every function takes the Database and reads in one transaction that is never committed
(:func:`fdbrecipes.admin.commands.read_only`: snapshot reads where the library's
reading methods take them, retried on retryable errors), through the structures'
public methods and operations objects (:mod:`fdbrecipes.protocol`).  Every read is
bounded: counters, the first ``limit`` rows of one range, or the first
:data:`SEARCH_SCAN` rows searched.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from .. import FairQueue, PriorityQueue, Queue, WeightTree, drive
from ..admin.commands import read_only
from ..admin.jobs import job_record, jobs_of
from ..protocol import Inspectable, inspectable
from .show import LIST_CAP, ago, group_hex, shown, when

__all__ = ["KINDS", "ROW_LIMIT", "SEARCH_SCAN", "TABS", "GroupRow", "Overview", "Row", "Tab",
           "ScheduleRow", "group_rows", "job", "kind_of", "overview", "paused", "queue_of",
           "schedules", "tab", "workers"]

#: Rows one page lists at most (``limit`` is capped to it).
ROW_LIMIT = 500
#: Rows a payload search reads at most.
SEARCH_SCAN = 1_000
#: The tabs of a queue's page.
TABS = ("pending", "delayed", "in-flight", "dead")
#: Minutes of history the overview draws.
HOUR = 60
#: A clock reading's units per second (read versions).
PER_SECOND = 1_000_000
KINDS = {Queue: "queue", PriorityQueue: "priority-queue", FairQueue: "fair-queue",
         WeightTree: "weight-tree"}


def kind_of(structure: Any) -> str:
    """``structure``'s kind, as the operator commands name it.

    Raises:
        TypeError: it is not a Queue, PriorityQueue, FairQueue or WeightTree (the
            dashboard shows the sync structures).
    """
    for cls, name in KINDS.items():
        if isinstance(structure, cls):
            return name
    raise TypeError(f"a dashboard structure must be a Queue, PriorityQueue, FairQueue or "
                    f"WeightTree, not {type(structure).__name__}")


class Overview(NamedTuple):
    """One structure's line on the overview: its name, kind and counts (a weight
    tree's items all count as visible)."""

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


def paused(tr: Any, structure: Any) -> Optional[str]:
    """Since when ``structure`` is paused (a WeightTree never is), or None: ``paused``
    (one read)."""
    if isinstance(structure, WeightTree):
        return None
    at: Optional[float] = jobs_of(structure).paused(tr)
    return None if at is None else when(at)


def _overview_row(tr: Any, name: str, structure: Any) -> Overview:
    stats = drive(structure.ops.stats(tr))
    minutes = [] if isinstance(structure, WeightTree) else jobs_of(structure).throughput(
        tr, HOUR)
    return Overview(name, kind_of(structure), stats.visible, stats.delayed, stats.in_flight,
                    stats.dead, ago(stats.oldest_age), paused(tr, structure),
                    [m.done for m in minutes], _sampled([m.backlog for m in minutes]))


def _sampled(backlog: List[Optional[int]]) -> List[Optional[int]]:
    """``backlog``, or nothing when no minute of it was sampled."""
    return backlog if any(b is not None for b in backlog) else []


def overview(db: Any, structures: Dict[str, Any]) -> List[Overview]:
    """Every structure's counts (``stats``: snapshot reads, 1 round trip each, O(1) in
    the number of items), pause flag (1 read) and last hour of history (``throughput``:
    one range read of 60 keys per worker); read in one transaction, so at one read
    version."""
    def read(tr: Any) -> List[Overview]:
        return [_overview_row(tr, name, s) for name, s in structures.items()]
    return read_only(db, read)


def queue_of(structure: Any, group: Any = None) -> Inspectable:
    """The queue a page looks into: a Queue's or PriorityQueue's operations, or those of
    a FairQueue's ``group``.

    Raises:
        ValueError: a FairQueue without a group.
        TypeError: a WeightTree.
    """
    if isinstance(structure, FairQueue):
        if group is None:
            raise ValueError("g: a fair-queue's page needs a group")
        inspect: Inspectable = structure.ops.group_queue(group)
        return inspect
    return inspectable(structure)


class Row(NamedTuple):
    """One row of a tab: the value (shown), and the columns each tab adds (deliveries,
    when, a token, a reason)."""

    value: str
    deliveries: Optional[int]
    when: str
    extra: str


class Tab(NamedTuple):
    """One tab of a queue's page: its rows, whether there may be more than shown, and
    how many rows a search read."""

    rows: List[Row]
    more: bool
    scanned: Optional[int]


def _rows(tr: Any, queue: Inspectable, name: str, limit: int, end: str) -> List[Row]:
    now: int = tr.get_read_version().wait()
    if name == "pending":
        return [Row(shown(v), None, "", "") for v in drive(queue.items(tr, limit, end))]
    if name == "delayed":
        return [Row(shown(d.value), d.deliveries, "in " + ago((d.due_at - now) / PER_SECOND), "")
                for d in drive(queue.delayed(tr, limit))]
    if name == "in-flight":
        return [Row(shown(i.value), i.deliveries,
                    "ends in " + ago((i.deadline - now) / PER_SECOND), i.token.hex())
                for i in drive(queue.leases(tr, limit))]
    return [Row(shown(d.value), d.deliveries, ago(None) if d.died_at is None else
                _since(d.died_at), shown(d.reason, LIST_CAP) if d.reason else "")
            for d in drive(queue.dead(tr, limit))]


def _since(epoch: float) -> str:
    return ago(time.time() - epoch) + " ago"


def tab(db: Any, structure: Any, name: str, *, group: Any = None, limit: int = 50,
        search: str = "", end: str = "min") -> Tab:
    """The first ``limit`` rows of tab ``name`` (see :data:`TABS`) of a queue (of a
    FairQueue's ``group``), in the structure's order; with ``search``, those of the
    first :data:`SEARCH_SCAN` whose shown value contains it.  One transaction, never
    committed (its read conflicts conflict with nothing), reading one range of at most
    ``max(limit + 1, SEARCH_SCAN)`` rows through the structure's listing (``items``,
    ``delayed``, ``leases`` or ``dead``): 1 round trip per 1,000 rows.

    Raises:
        ValueError: an unknown tab, or ``limit`` not in 1..ROW_LIMIT.
    """
    if name not in TABS:
        raise ValueError(f"tab: one of {', '.join(TABS)}")
    if not 1 <= limit <= ROW_LIMIT:
        raise ValueError(f"limit: 1 to {ROW_LIMIT}")
    queue = queue_of(structure, group)
    read = SEARCH_SCAN if search else limit + 1
    rows = read_only(db, _rows, queue, name, read, end)
    scanned = None
    if search:
        scanned = len(rows)
        rows = [r for r in rows if search in r.value]
    return Tab(rows[:limit], len(rows) > limit or (scanned is not None and scanned >= read),
               scanned)


class GroupRow(NamedTuple):
    """One group of a FairQueue: its name (shown), its id in URLs, its counts and
    policy."""

    name: str
    key: str
    visible: int
    delayed: int
    in_flight: int
    dead: int
    share: int
    limit: Optional[int]
    rate: Optional[Tuple[int, float]]


def group_rows(db: Any, fair: FairQueue, limit: int = 50) -> Tuple[List[GroupRow], bool]:
    """The first ``limit`` groups of ``fair`` in key order, with their counts and policy;
    and whether there are more.  One transaction: the index of groups (one range read),
    then each group's stats and policy (2 reads, in parallel per group).  Cost: 1 + 2
    round trips per group shown."""
    def read(tr: Any) -> Tuple[List[GroupRow], bool]:
        groups = fair.groups(tr, limit + 1)
        rows = []
        for g in groups[:limit]:
            stats = fair.stats(tr, g)
            assert not isinstance(stats, dict)
            policy = fair.group_policy(tr, g)
            rows.append(GroupRow(shown(g), group_hex(g), stats.visible, stats.delayed,
                                 stats.in_flight, stats.dead, policy.share, policy.limit,
                                 policy.rate))
        return rows, len(groups) > limit
    return read_only(db, read)


def job(db: Any, structure: Any, id_: bytes, group: Any = None) -> Any:
    """Job ``id_``'s record (a :class:`fdbrecipes.JobRecord`), or None: the structure's
    ``job`` method (1 to 2 round trips)."""
    return read_only(db, job_record, structure, id_, group)


def workers(db: Any, structure: Any) -> List[Any]:
    """The live workers serving ``structure`` (``workers``: snapshot reads, 1 round
    trip); none for a WeightTree."""
    if isinstance(structure, WeightTree):
        return []
    jobs = jobs_of(structure)
    found: List[Any] = read_only(db, jobs.workers)
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


def schedules(db: Any, given: List[Any], structures: Dict[str, Any]) -> List[ScheduleRow]:
    """Each schedule's next slot (and, for ``every=``, its last) with the state of its
    job's record (``job``: 1 to 2 round trips each; the slot's id is the schedule's
    ``slot_id``); one transaction."""
    names = {id(s): name for name, s in structures.items()}
    return read_only(db, _schedule_rows, given, names, time.time())
