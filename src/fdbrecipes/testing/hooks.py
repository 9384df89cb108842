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

from typing import Union

from .._hooks import Hooks
from ..priority_queue import PriorityQueue
from ..queue import Queue
from ..weight_tree import WeightTree

__all__ = ["Hooks", "hooks"]


def hooks(structure: Union[Queue, PriorityQueue, WeightTree]) -> Hooks:
    """The testing hooks of one structure object (each object has its own).

    Raises:
        TypeError: ``structure`` is not a Queue, PriorityQueue or WeightTree.
    """
    if not isinstance(structure, (Queue, PriorityQueue, WeightTree)):
        raise TypeError(
            f"structure must be a Queue, PriorityQueue or WeightTree, not "
            f"{type(structure).__name__}"
        )
    found: Hooks = structure._hooks
    return found
