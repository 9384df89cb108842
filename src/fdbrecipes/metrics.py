"""What the structures hold, as metric samples, for any monitoring system.

:func:`collect` reads the stats of each structure named, in one transaction (snapshot
reads: no conflicts), and returns plain :class:`Sample` values; the Prometheus
collector in :mod:`fdbrecipes.prometheus` (extra ``prometheus``) exposes them, with
the counters and histograms a worker's events feed.  The gauges describe the whole
database, not one process: serve them from one exporter per cluster
(``fdbrecipes metrics``), and do not sum them across worker processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Tuple

from ._fdb import check_database
from ._ordered_api import OrderedAPI
from .weight_tree import WeightTree

__all__ = ["ITEMS", "OLDEST_AGE", "Sample", "collect"]

#: Items of a structure, by state (``visible``, ``delayed``, ``in_flight``, ``dead``).
ITEMS = "fdbrecipes_queue_items"
#: Seconds the item at the front has waited (0 when nothing is visible).
OLDEST_AGE = "fdbrecipes_queue_oldest_item_age_seconds"


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
    the ``queue`` label), by state, and the age of its front item.

    Reads each structure's stats (counters, expired holds, front item) by snapshot,
    all in one transaction: no conflicts.  A WeightTree has only visible items.  Cost:
    1 round trip per structure.

    Raises:
        TypeError: ``db`` is not a Database, or a structure is not one of the library's
            (sync or async).
    """
    check_database(db)
    tr = db.create_transaction()
    out: List[Sample] = []
    for name, structure in structures.items():
        sync = getattr(structure, "_s", structure)
        if isinstance(sync, OrderedAPI):
            stats = sync.stats(tr.snapshot)
            counts = {"visible": stats.visible, "delayed": stats.delayed,
                      "in_flight": stats.in_flight, "dead": stats.dead}
            age = stats.oldest_age or 0.0
        elif isinstance(sync, WeightTree):
            counts = {"visible": sync.size(tr.snapshot)}
            age = 0.0
        else:
            raise TypeError(f"structures[{name!r}] is not a Queue, PriorityQueue or "
                            f"WeightTree, but {type(structure).__name__}")
        for state, count in counts.items():
            out.append(Sample(ITEMS, (("queue", name), ("state", state)), float(count)))
        out.append(Sample(OLDEST_AGE, (("queue", name),), float(age)))
    return out
