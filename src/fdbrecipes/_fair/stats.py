"""A fair queue's stats, read: the reading operations of :class:`.._ops.fair.FairOps`'
``group_stats``, ``stats_of``, ``all_stats`` and ``stats``.

A group's stats and its policy are read side by side, and many groups'
:data:`GATHERED` at a time, so a read of many groups costs a few round trips in all,
not a few per group.  Each function is an operation taking the transaction first, as
:func:`fdbrecipes._retry.read` calls it, and the queue's engine (:class:`.engine.Fair`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .._attempt import gather
from .._fdb import Gen, snap
from .._ordered.counts import QueueStats
from .engine import Fair
from .parts import FairStats, GroupView, fair_stats

__all__ = ["GATHERED", "read_all_stats", "read_group_stats", "read_group_view",
           "read_totals", "read_views"]

#: Groups whose stats one step reads side by side.
GATHERED = 500


def read_group_stats(tr: Any, fair: Fair, g: Any) -> Gen[FairStats]:
    """Group ``g``'s :class:`.parts.FairStats`."""
    return fair_stats((yield from read_group_view(tr, fair, g)))


def read_group_view(tr: Any, fair: Fair, g: Any) -> Gen[GroupView]:
    """Group ``g``'s stats and its policy, read side by side."""
    found: List[Any] = yield from gather([fair.group(g).engine.stats(tr),
                                          fair.group_policy(snap(tr), g)])
    return GroupView(found[0], found[1])


def read_views(tr: Any, fair: Fair, groups: List[Any]) -> Gen[Dict[Any, GroupView]]:
    """The stats and policy of each of ``groups``, :data:`GATHERED` groups at a time."""
    out: Dict[Any, GroupView] = {}
    for at in range(0, len(groups), GATHERED):
        some = groups[at:at + GATHERED]
        out.update(zip(some, (yield from gather(
            [read_group_view(tr, fair, g) for g in some]))))
    return out


def read_all_stats(tr: Any, fair: Fair) -> Gen[Dict[Any, FairStats]]:
    """The stats of every group in the index: the groups' reads side by side,
    :data:`GATHERED` groups at a time."""
    groups = yield from fair.groups(tr, None)
    views = yield from read_views(tr, fair, groups)
    return {g: fair_stats(view) for g, view in views.items()}


def read_totals(tr: Any, fair: Fair) -> Gen[QueueStats]:
    """Every group's items, summed (``oldest_age``: the longest a front item has
    waited): each group's stats, their reads side by side, :data:`GATHERED` groups at a
    time."""
    totals = [0, 0, 0, 0]
    oldest: Optional[float] = None
    groups = yield from fair.groups(snap(tr), None)
    for at in range(0, len(groups), GATHERED):
        found: List[QueueStats] = yield from gather(
            [fair.group(g).engine.stats(tr) for g in groups[at:at + GATHERED]])
        for stats in found:
            for i, count in enumerate(stats[:4]):
                totals[i] += count
            if stats.oldest_age is not None:
                oldest = max(oldest or 0.0, stats.oldest_age)
    visible, delayed, in_flight, dead = totals
    return QueueStats(visible, delayed, in_flight, dead, oldest)
