"""What the structures hold, as metric samples, for any monitoring system.

:func:`collect` reads the stats of each structure named, and the schedules of each
schedule store named (their lag: how long each one's next slot is overdue), in one
transaction (snapshot reads: no conflicts), and returns plain :class:`Sample` values; the Prometheus
collector in :mod:`fdbrecipes.prometheus` (extra ``prometheus``) exposes them, with
the counters and histograms a worker's events feed.  The gauges describe the whole
database, not one process: serve them from one exporter per cluster
(``fdbrecipes metrics``), and do not sum them across worker processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Tuple

from ._attempt import gather
from ._drivers.blocking import drive
from ._fdb import Gen, check_database
from ._limits.store import COUNTED
from .limits import LimitsBase
from .protocol import Measurable
from .schedules import SchedulesBase

__all__ = ["BACKLOG", "ITEMS", "LIMIT_KEYS_READ", "LIMIT_N", "LIMIT_PARKED", "LIMIT_RUNNING",
           "OLDEST_AGE", "SCHEDULE_LAG", "SCHEDULE_PAUSED", "Sample", "by_structure", "collect"]

#: Items of a structure, by state (``visible``, ``delayed``, ``in_flight``, ``dead``).
ITEMS = "fdbrecipes_queue_items"
#: Seconds the item at the front has waited (0 when nothing is visible).
OLDEST_AGE = "fdbrecipes_queue_oldest_item_age_seconds"
#: The work a structure's consumers have: its visible items plus those in flight (what
#: an autoscaler sizes a worker fleet by; delayed items are not due, dead ones not work).
BACKLOG = "fdbrecipes_queue_backlog"
#: Seconds a stored schedule's next slot is overdue: 0 while its workers keep up (and
#: while it is paused); it grows while no worker fires it.
SCHEDULE_LAG = "fdbrecipes_schedule_lag_seconds"
#: 1 while a stored schedule is paused, else 0.
SCHEDULE_PAUSED = "fdbrecipes_schedule_paused"
#: A limit's ``n`` (labels ``store`` and ``limit``; ``kind``: concurrency or rate).
LIMIT_N = "fdbrecipes_limit_n"
#: Jobs running under a concurrency limit, over all its keys (counted from at most
#: :data:`LIMIT_KEYS_READ` keys of its slots).
LIMIT_RUNNING = "fdbrecipes_limit_running"
#: Jobs parked until a slot of their key frees, over all its keys (counted up to
#: :data:`LIMIT_KEYS_READ`).
LIMIT_PARKED = "fdbrecipes_limit_parked"
#: The most keys each count of a limit reads (10,000), of its slots for the jobs
#: running (``fdbrecipes_limit_running``; one key a run of one claim's slots, and the
#: keys of ended leases no claim has cleared yet) and of its parked jobs for those
#: parked (``fdbrecipes_limit_parked``).  A count that stops there is a floor (there
#: may be more).
LIMIT_KEYS_READ = COUNTED


@dataclass(frozen=True)
class Sample:
    """One measurement: a metric's name, its labels (sorted pairs), its value."""

    name: str
    labels: Tuple[Tuple[str, str], ...]
    value: float

    @property
    def label_dict(self) -> Dict[str, str]:
        return dict(self.labels)


def collect(db: Any, structures: Mapping[str, Any]) -> List[Sample]:
    """The items of each structure in ``structures`` (by the name its samples get in
    the ``queue`` label), by state, its backlog (visible plus in flight) and the age of
    its front item; for a schedule store (:class:`fdbrecipes.Schedules`) among them,
    each schedule's lag and pause (labels ``store``, the name given, and ``schedule``);
    for a limit store (:class:`fdbrecipes.Limits`), each limit's ``n`` and its jobs
    running and parked over all its keys (labels ``store`` and ``limit``; each count
    read from at most :data:`LIMIT_KEYS_READ` keys).

    Reads each structure's stats through its operations object
    (:class:`fdbrecipes.protocol.Measurable`: counters, expired holds, front item; a
    FairQueue's every group's, summed) and each store's schedules (two range reads)
    by snapshot, all in one transaction, side by side: no conflicts.  A WeightTree's
    items are all visible (its other states are 0).  Cost: a few round trips, however
    many structures; a store's reads grow with its schedules, or with its limits (two
    range reads each, of at most :data:`LIMIT_KEYS_READ` keys).

    Raises:
        TypeError: ``db`` is not a Database, or a structure is not one of the library's
            (sync or async) nor has measurable operations.
    """
    check_database(db)
    measured, stores, limits = [], [], []
    for name, structure in structures.items():
        if isinstance(structure, SchedulesBase):
            stores.append((name, structure.ops))
            continue
        if isinstance(structure, LimitsBase):
            limits.append((name, structure.ops))
            continue
        ops = getattr(structure, "ops", None)
        if not isinstance(ops, Measurable):
            raise TypeError(f"structures[{name!r}] is not a Queue, PriorityQueue, FairQueue, "
                            f"WeightTree, Schedules or Limits, but "
                            f"{type(structure).__name__}")
        measured.append((name, ops))
    snapshot = db.create_transaction().snapshot
    reads: List[Gen[Any]] = [ops.stats(snapshot) for _, ops in measured]
    reads += [ops.list(snapshot) for _, ops in stores]
    reads += [ops.totals(snapshot, LIMIT_KEYS_READ) for _, ops in limits]
    found: List[Any] = drive(gather(reads))
    out: List[Sample] = []
    for (name, _), stats in zip(measured, found):
        counts = {"visible": stats.visible, "delayed": stats.delayed,
                  "in_flight": stats.in_flight, "dead": stats.dead}
        for state, count in counts.items():
            out.append(Sample(ITEMS, (("queue", name), ("state", state)), float(count)))
        out.append(Sample(BACKLOG, (("queue", name),), float(stats.visible + stats.in_flight)))
        out.append(Sample(OLDEST_AGE, (("queue", name),), float(stats.oldest_age or 0.0)))
    for (name, _), schedules in zip(stores, found[len(measured):]):
        for info in schedules:
            labels = (("schedule", info.name), ("store", name))
            out.append(Sample(SCHEDULE_LAG, labels, info.lag))
            out.append(Sample(SCHEDULE_PAUSED, labels, float(info.paused_at is not None)))
    for (name, _), totals in zip(limits, found[len(measured) + len(stores):]):
        for total in totals:
            labels = (("limit", total.name), ("store", name))
            out.append(Sample(LIMIT_N, (("kind", total.limit.kind), *labels),
                              float(total.limit.n)))
            out.append(Sample(LIMIT_RUNNING, labels, float(total.running)))
            out.append(Sample(LIMIT_PARKED, labels, float(total.parked)))
    return out


def by_structure(samples: List[Sample]) -> Dict[str, Dict[str, float]]:
    """:func:`collect`'s samples as one mapping per structure, for a JSON endpoint (an
    autoscaler's): ``{"jobs": {"backlog": 3.0, "oldest_age_seconds": 12.5,
    "visible": 2.0, "delayed": 0.0, "in_flight": 1.0, "dead": 0.0}}`` (schedules'
    samples are left out: they have no queue)."""
    out: Dict[str, Dict[str, float]] = {}
    for sample in samples:
        labels = sample.label_dict
        if "queue" not in labels:
            continue
        entry = out.setdefault(labels["queue"], {})
        if sample.name == ITEMS:
            entry[labels["state"]] = sample.value
        elif sample.name == BACKLOG:
            entry["backlog"] = sample.value
        elif sample.name == OLDEST_AGE:
            entry["oldest_age_seconds"] = sample.value
    return out
