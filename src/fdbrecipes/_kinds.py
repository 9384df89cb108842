"""What the tools know of each structure: its kind record, and the registry of them.

Every structure declares one :class:`Kind` beside its class (``queue.py``,
``priority_queue.py``, ``fair_queue.py``, ``weight_tree.py``): its name as the tools
write it, its sync and async classes, the :class:`~fdbrecipes._layout.Footprint` that
tells its keys at a place (the layout's own), and what it offers.  The operator
commands, the dashboard, the metrics and the contrib adapters find a structure's kind
here (by name, by object, or by what is stored at a place) and act on what the record
says, never on a structure's class: a new structure touches its own module, not the
tools.  ``import fdbrecipes`` imports every structure, so the registry is whole before
any tool reads it.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from fdb.subspace_impl import Subspace

from ._layout import Firsts, Footprint

__all__ = ["Kind", "Recognised", "find", "kind_named", "kinds", "names", "of", "reads",
           "recognise", "register", "told_by"]


@dataclass(frozen=True)
class Kind:
    """One kind of structure, as the tools see it.

    Attributes:
        name: its name on the command line, the dashboard and a sharded structure's
            marker ("queue", "priority-queue", "fair-queue", "weight-tree").
        rank: its place when the kinds are listed (``--kind``'s choices).
        sync: the sync class.
        twin: the async class, as ``"module:Class"`` (imported when asked for).
        footprint: what tells its keys at a place (shared by the kinds its
            ``item_len`` tells apart).
        item_len: the length of its item tuples, when its footprint is shared.
        covers: kinds whose keys its own may look like (a FairQueue's looks lie where a
            WeightTree's leaves would): seen together with it, they are not told.
        jobs: it keeps jobs: leases, delays, dead letters, job records, workers, pause,
            throughput; a worker or a schedule may serve it; it may be sharded and takes
            ``max_deliveries`` and ``history``.
        groups: it keeps a queue per group; a call about one item names its ``group``.
        group_ops: of a kind with groups: what makes one group of a structure's
            operations a queue, called with the operations and the group (a
            FairQueue's ``GroupOps``): see :meth:`group_queue`.
        priorities: its items have priorities; a push names one, it is read from
            either end (``end="max"``).
        weights: its items have weights (a WeightTree: no jobs).
        sequences: its jobs may run in sequences (``sequence=``), one at a time in
            push order, and a sequence stopped by a dead job is moved on by
            ``unblock``.
    """

    name: str
    rank: int
    sync: type
    twin: str
    footprint: Footprint
    item_len: Optional[int] = None
    covers: Tuple[str, ...] = ()
    jobs: bool = False
    groups: bool = False
    group_ops: Optional[Callable[[Any, Any], Any]] = None
    priorities: bool = False
    weights: bool = False
    sequences: bool = False

    def async_class(self) -> type:
        """The async class (its module imported)."""
        module, name = self.twin.split(":")
        found: type = getattr(importlib.import_module(module), name)
        return found

    def owns(self, structure: Any, twins: bool = True) -> bool:
        """Whether ``structure`` is of this kind (its async class too, ``twins``: an
        object of it exists only once its module was imported)."""
        if isinstance(structure, self.sync):
            return True
        module, name = self.twin.split(":")
        loaded = sys.modules.get(module) if twins else None
        return loaded is not None and isinstance(structure, getattr(loaded, name))

    def make(self, subspace: Subspace, max_deliveries: Optional[int] = None,
             history: Optional[float] = None, shards: int = 1, limits: Any = None) -> Any:
        """The sync object of this kind at ``subspace`` (``max_deliveries``,
        ``history``, ``shards``: as a structure with jobs takes them; ``limits``: as a
        structure with jobs and without groups takes them)."""
        if not self.jobs:
            return self.sync(subspace)
        if limits:
            return self.sync(subspace, max_deliveries=max_deliveries, history=history,
                             shards=shards, limits=limits)
        return self.sync(subspace, max_deliveries=max_deliveries, history=history,
                         shards=shards)

    def where(self, group: Any = None, priority: Any = None) -> Dict[str, Any]:
        """The keyword arguments that place one item or job in a structure of this
        kind: ``group`` for one with groups, ``priority`` for one with priorities,
        none for the others (``push(tr, value, **kind.where(group, priority))``,
        ``job(tr, id, **kind.where(group))``)."""
        if self.groups:
            return {"group": group}
        if self.priorities:
            return {"priority": priority}
        return {}

    def group_queue(self, structure: Any, group: Any) -> Any:
        """One group of ``structure`` (of this kind) seen as a queue: an
        :class:`fdbrecipes.protocol.Inspectable` whose calls are those of the
        structure's operations with ``group`` (what the operator commands and the
        dashboard look into).  Reads and writes nothing.

        Raises:
            TypeError: this kind has no groups; ``group`` is not a group.
        """
        if self.group_ops is None:
            raise TypeError(f"a {self.name} has no groups")
        return self.group_ops(structure.ops, group)

    def one_queue(self, group: Any = None) -> bool:
        """Whether a structure of this kind, with ``group``, names one queue: it keeps
        jobs, and a group is given when it has groups."""
        return self.jobs and (group is not None or not self.groups)


#: Every kind, by name (see :func:`register`).
_KINDS: Dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Add ``kind`` to the registry (each structure's module, once); ``kind``.

    Raises:
        ValueError: another kind has its name or its rank.
    """
    for other in _KINDS.values():
        if other.name == kind.name or other.rank == kind.rank:
            raise ValueError(f"kind {kind.name!r} (rank {kind.rank}) is registered already")
    _KINDS[kind.name] = kind
    return kind


def kinds() -> Tuple[Kind, ...]:
    """Every kind, by rank."""
    return tuple(sorted(_KINDS.values(), key=_rank))


def _rank(kind: Kind) -> int:
    return kind.rank


def names() -> Tuple[str, ...]:
    """Every kind's name, by rank."""
    return tuple(kind.name for kind in kinds())


def kind_named(name: str) -> Kind:
    """The kind named ``name``.

    Raises:
        ValueError: no kind has that name.
    """
    try:
        return _KINDS[name]
    except KeyError:
        raise ValueError(f"no kind of structure is named {name!r} (one of "
                         f"{', '.join(names())})") from None


def find(structure: Any, twins: bool = True) -> Optional[Kind]:
    """The kind of ``structure`` (an async one's too, ``twins``), or None."""
    for kind in kinds():
        if kind.owns(structure, twins):
            return kind
    return None


def of(structure: Any, twins: bool = True) -> Kind:
    """The kind of ``structure`` (see :func:`find`).

    Raises:
        TypeError: it is no structure's.
    """
    kind = find(structure, twins)
    if kind is None:
        raise TypeError(f"not a structure of fdbrecipes: {type(structure).__name__}")
    return kind


def told_by(kind: Kind) -> Tuple[Kind, ...]:
    """The kinds of ``kind``'s footprint (a Queue's: Queue and PriorityQueue), by rank."""
    return tuple(k for k in kinds() if k.footprint == kind.footprint)


class Recognised(NamedTuple):
    """What the keys at a place tell: the kinds they may be (none: no structure's
    keys; several: kinds of one footprint that the keys do not tell apart), or what is
    wrong there (the keys of two structures)."""

    kinds: Tuple[Kind, ...]
    wrong: Optional[str] = None


def reads() -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """What :func:`recognise` needs: the ranges whose first key it reads, and the
    single keys it reads."""
    ranges: List[str] = []
    keys: List[str] = []
    for kind in kinds():
        ranges += [m for m in kind.footprint.ranges + kind.footprint.traces if m not in ranges]
        keys += [m for m in kind.footprint.keys if m not in keys]
    return tuple(ranges), tuple(keys)


def recognise(subspace: Subspace, firsts: Firsts, found: Tuple[str, ...]) -> Recognised:
    """Which kind the first keys read under each range of :func:`reads` (``firsts``)
    and the single keys present (``found``) are.

    The kinds whose footprint shows, but those another one shown covers; if they are
    of two footprints, the keys of both are there (named by the first kind of each).
    Kinds of one footprint are told apart by the length of the items read.
    """
    shown = [k for k in kinds() if k.footprint.shows(subspace, firsts, found)]
    shown = [k for k in shown if not any(k.name in other.covers for other in shown)]
    if not shown:
        return Recognised(())
    first, *others = shown
    other = next((k for k in others if k.footprint != first.footprint), None)
    if other is not None:
        return Recognised((), f"keys of both a {told_by(first)[0].name} and a "
                          f"{told_by(other)[0].name}")
    alike = told_by(first)
    if len(alike) == 1 or first.footprint.length is None:
        return Recognised((first,))
    length = first.footprint.length(subspace, firsts)
    return Recognised(tuple(k for k in alike if k.item_len == length) or alike)
