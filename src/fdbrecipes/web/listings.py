"""The rows of a structure's page, read page by page by key: its tabs (pending,
delayed, in flight, dead, finished) and a FairQueue's groups.

Every read is bounded in rows and in bytes: one page (``limit`` + 1 rows, at most
:data:`ROW_LIMIT` + 1) from the cursor on, or, for a search, :data:`SEARCH_SCAN` rows
from the cursor on, through the structures' listings (``pending``, ``delayed``,
``leases``, ``dead``, ``finished``, ``groups``), each in one transaction that is never
committed, within the request's deadline (:class:`.reads.Reads`).  A read stops early
once the rows it read hold :data:`PAGE_BYTES` of values (their values, results,
reasons and errors): it reads its rows in steps sized from the rows read so far, and
the page says where it stopped, so its "next page" goes on from there.  A cursor is
the token of the last row of the page before (a group's name for the groups),
carried in URLs as hex (see :func:`.show.cursor_from_hex`): whatever a URL holds, the
library either finds a place in the listing's own range in it or refuses it (400).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from .. import FairQueue, _kinds, drive
from ..admin.jobs import jobs_of
from ..protocol import Inspectable, inspectable
from .reads import Reads
from .show import ago, cut, group_hex, shown, shown_id, when

__all__ = ["FIRST_STEP", "PAGE_BYTES", "ROW_LIMIT", "SEARCH_SCAN", "TABS", "GroupRow", "Groups",
           "Row", "Tab", "group_rows", "queue_of", "scan", "tab", "weight"]

#: Rows one page lists at most (``limit`` is capped to it).
ROW_LIMIT = 500
#: Rows a search reads at most per page.
SEARCH_SCAN = 1_000
#: Bytes of values (results, reasons, errors) one transaction of a page reads, about:
#: it stops at the first step that reaches them.
PAGE_BYTES = 5_000_000
#: Rows the first step of a read asks for at most.
FIRST_STEP = 64
#: The tabs of a queue's page.
TABS = ("pending", "delayed", "in-flight", "dead", "finished")
#: A clock reading's units per second (read versions).
PER_SECOND = 1_000_000


def queue_of(structure: Any, group: Any = None) -> Inspectable:
    """The queue a page looks into: a Queue's or PriorityQueue's operations, or those of
    a FairQueue's ``group``.

    Raises:
        ValueError: a FairQueue without a group.
        TypeError: a WeightTree.
    """
    kind = _kinds.of(structure)
    if kind.groups:
        if group is None:
            raise ValueError("g: a fair-queue's page needs a group")
        inspect: Inspectable = kind.group_queue(structure, group)
        return inspect
    return inspectable(structure)


class Row(NamedTuple):
    """One row of a tab, as shown: the value (or a finished job's id), its deliveries
    (attempts), when (due, lease end, death, end), what the tab adds (a lease's token,
    a reason, a state and error), its token (hex: its checkbox, the next page's
    cursor) and its job's id (hex, for a link; None without one)."""

    value: str
    deliveries: Optional[int]
    when: str
    extra: str
    token: str
    job: Optional[str]
    group: Optional[str] = None


class Tab(NamedTuple):
    """One page of a tab: its rows, the cursor of the next page (hex; None when this
    page ended the listing), for a search how many rows it read, and whether it
    stopped short at :data:`PAGE_BYTES` of values (``cut``)."""

    rows: List[Row]
    next: Optional[str]
    scanned: Optional[int]
    cut: bool = False


def _since(now: int, at: int) -> str:
    return ago((now - at) / PER_SECOND)


def _job(id_: Optional[bytes]) -> Optional[str]:
    return None if id_ is None else id_.hex()


def _row(name: str, item: Any, now: int) -> Row:
    """The row of one listed ``item`` of tab ``name``."""
    if name == "pending":
        return Row(shown(item.value), item.deliveries, "waiting " + _since(now, item.since),
                   "" if item.priority is None else f"priority {item.priority}",
                   item.token.hex(), _job(item.id))
    if name == "delayed":
        return Row(shown(item.value), item.deliveries, "in " + ago(
            (item.due_at - now) / PER_SECOND), "", item.token.hex(), _job(item.id))
    if name == "in-flight":
        return Row(shown(item.value), item.deliveries, "ends in " + ago(
            (item.deadline - now) / PER_SECOND), item.token.hex(), item.token.hex(),
            _job(item.id))
    if name == "dead":
        return Row(shown(item.value), item.deliveries, when(item.died_at),
                   cut(item.reason) if item.reason else "", item.token.hex(), _job(item.id))
    error = "" if item.error is None else cut(f"{item.error.type}: {item.error.message}")
    return Row(shown_id(item.id), item.attempts, when(item.finished_at),
               f"{item.state}{': ' if error else ''}{error}", item.token.hex(), _job(item.id),
               None if item.group is None else group_hex(item.group))


def _listing(structure: Any, name: str, group: Any, end: str) -> Callable[..., Any]:
    """The call listing tab ``name``: ``call(tr, limit, after)``, an operation."""
    if name == "finished":
        finished: Callable[..., Any] = jobs_of(structure).ops.finished
        return finished
    queue = queue_of(structure, group)
    if name == "pending":
        return Pending(queue, end).read
    return {"delayed": queue.delayed, "in-flight": queue.leases, "dead": queue.dead}[name]


class Pending(NamedTuple):
    """The pending listing at one end, called as the others are."""

    queue: Inspectable
    end: str

    def read(self, tr: Any, limit: int, after: Optional[bytes]) -> Any:
        return self.queue.pending(tr, limit, self.end, after)


def weight(item: Any) -> int:
    """About how many bytes a listed row holds: the lengths of the str and bytes in its
    value, result, dead letter's reason and error (8 for any other element)."""
    error = getattr(item, "error", None)
    todo = [getattr(item, "value", None), getattr(item, "result", None),
            getattr(item, "reason", None),
            None if error is None else (error.message, error.traceback)]
    total = 0
    while todo:  # not recursive: a value may nest deeper than Python's stack
        part = todo.pop()
        if isinstance(part, (str, bytes)):
            total += len(part)
        elif isinstance(part, tuple):
            total += 1
            todo.extend(part)
        elif part is not None:
            total += 8
    return total


class Read(NamedTuple):
    """What one transaction read of a listing: its items, their rows, and whether the
    listing ended there (fewer rows than asked for, and not for the byte budget)."""

    items: List[Any]
    rows: List[Row]
    ended: bool


def _page(tr: Any, listing: Callable[..., Any], name: str, limit: int,
          after: Optional[bytes], budget: int = PAGE_BYTES) -> Read:
    """``limit`` rows of ``listing`` after ``after``, or fewer once they hold
    ``budget`` bytes (see :func:`weight`): steps of :data:`FIRST_STEP` rows, then of
    as many as the budget left holds at the rows' mean size so far."""
    items: List[Any] = []
    used = 0
    ask = min(limit, FIRST_STEP)
    while True:
        got = drive(listing(tr, ask, after))
        items += got
        used += sum(weight(item) for item in got)
        if len(got) < ask or len(items) >= limit or used >= budget:
            ended = len(got) < ask
            break
        after = got[-1].token
        mean = max(1, used // len(items))
        ask = min(limit - len(items), max(1, (budget - used) // mean))
    now: int = tr.get_read_version().wait()
    return Read(items, [_row(name, item, now) for item in items], ended)


def tab(reads: Reads, structure: Any, name: str, *, group: Any = None, limit: int = 50,
        search: str = "", end: str = "min", after: Optional[bytes] = None) -> Tab:
    """The rows of tab ``name`` (see :data:`TABS`) of a queue (of a FairQueue's
    ``group``; a FairQueue's finished jobs are every group's), ``limit`` of them from
    the cursor ``after`` on; with ``search``, those among the next :data:`SEARCH_SCAN`
    whose shown value (its ``repr()`` cut at 200 characters) or shown reason or error
    contains it.  One transaction, never committed, reading at most ``max(limit + 1,
    SEARCH_SCAN)`` rows of one listing and about :data:`PAGE_BYTES` of values: 1
    round trip per step (a few), 2 for finished jobs (their records).

    Raises:
        ValueError: an unknown tab, ``limit`` not in 1..ROW_LIMIT, a cursor that is
            not one of this listing's.
        .reads.TooSlow: the request's deadline passed.
    """
    if name not in TABS:
        raise ValueError(f"tab: one of {', '.join(TABS)}")
    if not 1 <= limit <= ROW_LIMIT:
        raise ValueError(f"limit: 1 to {ROW_LIMIT}")
    listing = _listing(structure, name, group, end)
    read = reads(_page, listing, name, SEARCH_SCAN if search else limit + 1, after)
    rows = read.rows
    if not search:
        if len(rows) > limit:
            return Tab(rows[:limit], rows[limit - 1].token, None)
        return Tab(rows, None if read.ended or not rows else rows[-1].token, None,
                   not read.ended)
    kept = [r for r in rows if search in r.value or search in r.extra]
    if len(kept) > limit:  # the next page starts after the last row shown
        return Tab(kept[:limit], kept[limit - 1].token, len(read.items))
    more = None if read.ended or not rows else rows[-1].token
    return Tab(kept, more, len(read.items), more is not None and len(rows) < SEARCH_SCAN)


class Scanned(NamedTuple):
    """What :func:`scan` found: the tokens of the rows that matched, how many rows it
    read, and where the listing goes on (a token; None: it ended)."""

    tokens: List[bytes]
    scanned: int
    next: Optional[bytes]


def scan(reads: Reads, structure: Any, name: str, group: Any, search: str,
         after: Optional[bytes], most: int, most_bytes: int) -> Scanned:
    """The tokens of the rows of tab ``name`` from ``after`` on whose shown value
    contains ``search`` (every row when empty), reading at most ``most`` rows and about
    ``most_bytes`` of values, :data:`SEARCH_SCAN` rows and :data:`PAGE_BYTES` at most
    per transaction (each never committed): what a bulk action works through.  Cost: a
    few round trips per transaction."""
    listing = _listing(structure, name, group, "min")
    tokens: List[bytes] = []
    scanned = used = 0
    while scanned < most and used < most_bytes:
        page = min(SEARCH_SCAN, most - scanned)
        read = reads(_page, listing, name, page, after, min(PAGE_BYTES, most_bytes - used))
        scanned += len(read.items)
        used += sum(weight(item) for item in read.items)
        tokens += [item.token for item, row in zip(read.items, read.rows)
                   if not search or search in row.value or search in row.extra]
        if read.ended:
            return Scanned(tokens, scanned, None)
        after = read.items[-1].token
    return Scanned(tokens, scanned, after)


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


class Groups(NamedTuple):
    """One page of a FairQueue's groups, and the cursor of the next (hex; None: the
    last page)."""

    rows: List[GroupRow]
    next: Optional[str]


def _group_page(tr: Any, fair: FairQueue, limit: int, after: Any) -> Groups:
    groups = fair.groups(tr, limit + 1, after=after)
    shown_now = groups[:limit]
    stats: Dict[Any, Any] = drive(fair.ops.stats_of(tr, shown_now))
    rows = [GroupRow(shown(g), group_hex(g), v.stats.visible, v.stats.delayed,
                     v.stats.in_flight, v.stats.dead, v.policy.share, v.policy.limit,
                     v.policy.rate)
            for g, v in ((g, stats[g]) for g in shown_now)]
    return Groups(rows, group_hex(shown_now[-1]) if len(groups) > limit else None)


def group_rows(reads: Reads, fair: FairQueue, limit: int = 50, after: Any = None) -> Groups:
    """``limit`` groups of ``fair`` in key order after the group ``after``, with their
    counts and policy.  One transaction: the index of groups from there (one range
    read), then every shown group's stats and policy side by side
    (``ops.stats_of``): 2 to 3 round trips in all, whatever ``limit``."""
    return reads(_group_page, fair, limit, after)
