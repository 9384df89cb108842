"""Pre-filling the structure a draining measurement empties.

:data:`FILLS` maps each draining :attr:`Kind.op <fdbrecipes.bench.settings.Kind.op>`
to a function ``fill(db, subspace, items, seed)`` that stores ``items`` items there:
the recipe's layout for the recipe's pop, ``push_many`` batches for the library's
structures.  Run by the parent process before the clients start; not timed.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Dict, Optional, Sequence

from .. import FairQueue, PriorityQueue, Queue, RetryStats, WeightTree
from .recipe import QUEUE_FILL_BATCH, VALUE, RecipeQueue, chunks, transact
from .settings import BENCH_SHARDS, FAIR_GROUPS, HISTORY_SECONDS, PQ_PRIORITIES

#: Items per push_many when filling a WeightTree.
TREE_FILL_BATCH = 5_000
#: Heaviest weight of the WeightTree's items (weights are 1 to this, uniform).
MAX_WEIGHT = 100

Filler = Callable[[Any, Any, int, int], None]


def fill_recipe(db: Any, subspace: Any, items: int, _seed: int) -> None:
    """The recipe's layout: values at indexes 0, 1, ... (transactions of 1,000)."""
    RecipeQueue(subspace).fill(db, items)


def fill_queue(db: Any, subspace: Any, items: int, _seed: int,
               history: Optional[float] = None) -> None:
    """A Queue of the ints 0 .. items - 1 (``push_many`` of 1,000; with ``history``,
    each with its job record)."""
    queue = Queue(subspace, history=history)
    for chunk in chunks(0, items, QUEUE_FILL_BATCH):
        queue.push_many(db, chunk)


#: Items per push_many when filling a sharded queue: a push goes to one shard, so
#: small ones spread the items about evenly.
SHARDED_FILL_BATCH = 100


def fill_sharded_queue(db: Any, subspace: Any, items: int, _seed: int) -> None:
    """A Queue of :data:`BENCH_SHARDS` shards holding the ints 0 .. items - 1
    (``push_many`` of 100, each into a shard drawn at random)."""
    queue = Queue(subspace, shards=BENCH_SHARDS)
    for chunk in chunks(0, items, SHARDED_FILL_BATCH):
        queue.push_many(db, chunk)


def fill_history_queue(db: Any, subspace: Any, items: int, seed: int) -> None:
    """A Queue made with ``history``, filled as :func:`fill_queue` does."""
    fill_queue(db, subspace, items, seed, HISTORY_SECONDS)


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


class FairFill:
    """One transaction of a fair queue's fill: ``VALUE`` pushed to each group of
    ``groups`` (a group named more than once gets as many items)."""

    def __init__(self, queue: FairQueue, groups: Sequence[str]) -> None:
        self.queue, self.groups = queue, groups

    def __call__(self, tr: Any) -> None:
        for group in self.groups:
            self.queue.push(tr, VALUE, group=group)


#: Groups pushed to per transaction of a fair queue's fill.
FAIR_FILL_BATCH = 500


def fill_fair_groups(db: Any, queue: FairQueue, groups: Sequence[str]) -> None:
    """One item pushed to each of ``groups``, in transactions of 500."""
    for chunk in chunks(0, len(groups), FAIR_FILL_BATCH):
        transact(db, FairFill(queue, groups[chunk.start:chunk.stop]), RetryStats())


def group_name(i: int) -> str:
    """The name of a benchmark fair queue's group ``i``."""
    return f"g{i}"


def fill_fair_queue(db: Any, subspace: Any, items: int, _seed: int) -> None:
    """A FairQueue of ``items`` items spread round-robin over 1,000 groups."""
    fill_fair_groups(db, FairQueue(subspace), [group_name(i % FAIR_GROUPS)
                                               for i in range(items)])


#: How the structure of each draining operation is pre-filled.
FILLS: Dict[str, Filler] = {
    "recipe-pop": fill_recipe,
    "probe-pop": fill_recipe,
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
    "history-worker": fill_history_queue,
    "spread-claim-ack": fill_queue,
    "claim-one": fill_queue,
    "fair-claim-one": fill_fair_queue,
    "sharded-claim-ack": fill_sharded_queue,
    "sharded-claim-one": fill_sharded_queue,
}
