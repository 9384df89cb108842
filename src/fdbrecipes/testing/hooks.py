"""Testing hooks: force a structure's contended mode, learn when it waits, shrink its
batches.

The library never sets these; tests do, instead of reaching into private state::

    from fdbrecipes.testing.hooks import hooks

    q = Queue(subspace, high_contention=True)
    hooks(q).contended = True                # pops fetch a batch at once
    hooks(q).on_fetch = stop_here            # called with the items set aside
    hooks(q).on_block = note_that_it_sleeps  # called before blocking on a watch
    hooks(q).batch = 10                      # batches given a Database: 10 a transaction

See :class:`fdbrecipes._hooks.Hooks` for each field.
"""

from __future__ import annotations

from typing import Any

from .._hooks import Hooks
from .._ops.base import Ops

__all__ = ["Hooks", "hooks"]


def hooks(structure: Any) -> Hooks:
    """The testing hooks of one structure object: those of its operations object
    (each object has its own; an async structure's are those of the operations it
    runs).

    Raises:
        TypeError: ``structure`` is not one of the library's structures (a Queue,
            PriorityQueue, FairQueue or WeightTree, or one of their async twins).
    """
    ops = getattr(structure, "ops", None)
    if not isinstance(ops, Ops):
        raise TypeError(
            f"structure must be a Queue, PriorityQueue, FairQueue or WeightTree (or an "
            f"async one), not {type(structure).__name__}"
        )
    return ops.hooks
