"""Pre-filling the structure a draining measurement empties.

:data:`FILLS` maps each draining :attr:`Kind.op <fdbrecipes.bench.settings.Kind.op>`
to a function ``fill(db, subspace, items, seed)`` that stores ``items`` items there:
the recipe's layout for the recipe's pop, ``push_many`` batches for the library's
structures.  Run by the parent process before the clients start; not timed.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Dict

from .. import PriorityQueue, Queue, WeightTree
from .recipe import QUEUE_FILL_BATCH, RecipeQueue, chunks
from .settings import PQ_PRIORITIES

#: Items per push_many when filling a WeightTree.
TREE_FILL_BATCH = 5_000
#: Heaviest weight of the WeightTree's items (weights are 1 to this, uniform).
MAX_WEIGHT = 100

Filler = Callable[[Any, Any, int, int], None]


def fill_recipe(db: Any, subspace: Any, items: int, _seed: int) -> None:
    """The recipe's layout: values at indexes 0, 1, ... (transactions of 1,000)."""
    RecipeQueue(subspace).fill(db, items)


def fill_queue(db: Any, subspace: Any, items: int, _seed: int) -> None:
    """A Queue of the ints 0 .. items - 1 (``push_many`` of 1,000)."""
    queue = Queue(subspace)
    for chunk in chunks(0, items, QUEUE_FILL_BATCH):
        queue.push_many(db, chunk)


def fill_tree(db: Any, subspace: Any, items: int, seed: int) -> None:
    """A WeightTree of the ints 0 .. items - 1, with random weights 1 to 100 drawn from
    ``random.Random(seed)`` (``push_many`` of 5,000)."""
    rng = random.Random(seed)
    tree = WeightTree(subspace)
    for chunk in chunks(0, items, TREE_FILL_BATCH):
        tree.push_many(db, [(i, rng.randint(1, MAX_WEIGHT)) for i in chunk])


def fill_priority_queue(db: Any, subspace: Any, items: int, _seed: int) -> None:
    """A PriorityQueue of the ints 0 .. items - 1, item i at priority i mod 4
    (``push_many`` of 1,000)."""
    pq = PriorityQueue(subspace)
    for chunk in chunks(0, items, QUEUE_FILL_BATCH):
        pq.push_many(db, [(i, i % PQ_PRIORITIES) for i in chunk])


#: How the structure of each draining operation is pre-filled.
FILLS: Dict[str, Filler] = {
    "recipe-pop": fill_recipe,
    "pop": fill_queue,
    "spread-pop": fill_queue,
    "hc-pop": fill_queue,
    "claim-ack": fill_queue,
    "tree-pop": fill_tree,
    "pq-pop-min": fill_priority_queue,
    "pq-pop-max": fill_priority_queue,
    "aio-spread-pop": fill_queue,
    "aio-claim-ack": fill_queue,
    "worker": fill_queue,
    "spread-claim-ack": fill_queue,
}
