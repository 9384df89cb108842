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
from ..aio import AsyncPriorityQueue, AsyncQueue, AsyncWeightTree
from ..priority_queue import PriorityQueue
from ..queue import Queue
from ..weight_tree import WeightTree

__all__ = ["Hooks", "hooks"]

#: What has hooks: the structures and their async twins.
Structures = Union[Queue, PriorityQueue, WeightTree, AsyncQueue, AsyncPriorityQueue,
                   AsyncWeightTree]


def hooks(structure: Structures) -> Hooks:
    """The testing hooks of one structure object (each object has its own; an async
    structure's are those of the operations it runs).

    Raises:
        TypeError: ``structure`` is not a Queue, PriorityQueue or WeightTree, or one
            of their async twins.
    """
    if isinstance(structure, (AsyncQueue, AsyncPriorityQueue, AsyncWeightTree)):
        return hooks(structure._s)
    if not isinstance(structure, (Queue, PriorityQueue, WeightTree)):
        raise TypeError(
            f"structure must be a Queue, PriorityQueue or WeightTree (or an async one), "
            f"not {type(structure).__name__}"
        )
    found: Hooks = structure._hooks
    return found
