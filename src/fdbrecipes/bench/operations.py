"""What one client process does: a :class:`Client` per kind of measurement.

:data:`FACTORIES` maps each :attr:`Kind.op <fdbrecipes.bench.settings.Kind.op>` to a
function making its client from the database, the measurement's subspace, the client's
index and the kind's batch.  A client's :meth:`~Client.step` runs one operation; its
:meth:`~Client.retries` reads the :class:`~fdbrecipes.RetryStats` that the operation's
retry loop counts in: the structure's own (``retry_stats``) for calls given a
Database, the benchmark's for loops it runs itself.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, Callable, Dict, Optional

from .. import PriorityQueue, Queue, RetryStats, WeightTree
from .recipe import VALUE, RecipeQueue, transact
from .settings import CLAIM_BATCH, LEASE_SECONDS, SPREAD

#: A pop given the Database: a value, or None when the structure is empty.
PopFunction = Callable[[Any], Optional[object]]


class Client:
    """One client process's operation (subclasses define :meth:`step`).

    Args:
        stats: the retry counters of the operation's loop; None when it cannot count
            them (the recipe's push runs in ``@fdb.transactional``).
    """

    def __init__(self, stats: Optional[RetryStats]) -> None:
        self.stats = stats

    def step(self) -> int:
        """Run one operation; return the items it moved (keys written, items pushed,
        items popped or claimed and acked: 0 means the structure was empty)."""
        raise NotImplementedError

    def retries(self) -> Optional[int]:
        """Retried transactions so far (None when not counted)."""
        return None if self.stats is None else self.stats.retries


class Writer(Client):
    """The limit: each transaction writes ``batch`` tiny values under fresh keys."""

    def __init__(self, db: Any, subspace: Any, index: int, batch: int) -> None:
        self.loop_stats = RetryStats()
        super().__init__(self.loop_stats)
        self.db, self.subspace, self.index, self.batch = db, subspace, index, batch
        self.steps = itertools.count()

    def step(self) -> int:
        """Commit one transaction of ``batch`` writes."""
        transact(self.db, self._write, self.loop_stats)
        return self.batch

    def _write(self, tr: Any) -> None:
        """Set ``batch`` keys no other client or step writes."""
        step = next(self.steps)
        for j in range(self.batch):
            tr[self.subspace.pack((self.index, step, j))] = VALUE


class Pusher(Client):
    """``Queue.push(db, value)`` (batch 1) or ``Queue.push_many(db, values)``: the
    library's own retry loop."""

    def __init__(self, db: Any, queue: Queue, batch: int) -> None:
        super().__init__(queue.retry_stats)
        self.db, self.queue, self.batch = db, queue, batch
        self.values = [VALUE] * batch

    def step(self) -> int:
        """One push (or push_many) given the Database."""
        if self.batch == 1:
            self.queue.push(self.db, VALUE)
        else:
            self.queue.push_many(self.db, self.values)
        return self.batch


class TxPusher(Client):
    """``Queue.push(tr, value)`` inside the caller's transaction, committed by the
    benchmark's own loop (:func:`~fdbrecipes.bench.recipe.transact`): no commit
    receipt, as an application's transaction would run it."""

    def __init__(self, db: Any, queue: Queue) -> None:
        self.loop_stats = RetryStats()
        super().__init__(self.loop_stats)
        self.db, self.queue = db, queue

    def step(self) -> int:
        """One transaction holding one push."""
        transact(self.db, self._push, self.loop_stats)
        return 1

    def _push(self, tr: Any) -> None:
        """The push, joining ``tr``."""
        self.queue.push(tr, VALUE)


class RecipePusher(Client):
    """The recipe's push (``@fdb.transactional`` hides its retries: not counted)."""

    def __init__(self, db: Any, recipe: RecipeQueue) -> None:
        super().__init__(None)
        self.db, self.recipe = db, recipe

    def step(self) -> int:
        """One recipe push."""
        self.recipe.push(self.db, VALUE)
        return 1


class Popper(Client):
    """A pop given the Database, until it returns None (any structure's pop)."""

    def __init__(self, db: Any, pop: PopFunction, stats: RetryStats) -> None:
        super().__init__(stats)
        self.db, self.pop = db, pop

    def step(self) -> int:
        """One pop: 1 if it took an item, 0 if the structure was empty."""
        return int(self.pop(self.db) is not None)


class ClaimAcker(Client):
    """``claim_many(db, 100, 30)`` then ``ack_many(db, leases)``, both given the Database:
    a consumer that takes work in batches and acknowledges it in one transaction."""

    def __init__(self, db: Any, queue: Queue) -> None:
        super().__init__(queue.retry_stats)
        self.db, self.queue = db, queue

    def step(self) -> int:
        """One claim of up to 100 items and its ack; the items claimed (0: empty)."""
        leases = self.queue.claim_many(self.db, CLAIM_BATCH, LEASE_SECONDS)
        if leases:
            self.queue.ack_many(self.db, leases)
        return len(leases)


# --------------------------------------------------------------------------------------
# Factories: (db, subspace, client index, batch) -> Client
# --------------------------------------------------------------------------------------

Factory = Callable[[Any, Any, int, int], Client]


def writes(db: Any, subspace: Any, index: int, batch: int) -> Client:
    """The limit's write transactions."""
    return Writer(db, subspace, index, batch)


def pushes(db: Any, subspace: Any, _index: int, batch: int) -> Client:
    """``Queue.push(db)`` or ``Queue.push_many(db)``."""
    return Pusher(db, Queue(subspace), batch)


def tx_pushes(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``Queue.push(tr)`` in the benchmark's transactions."""
    return TxPusher(db, Queue(subspace))


def recipe_pushes(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The recipe's push."""
    return RecipePusher(db, RecipeQueue(subspace))


def recipe_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The recipe's pop, counting its own retries."""
    recipe = RecipeQueue(subspace)
    return Popper(db, recipe.pop, recipe.stats)


def plain_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The plain ``Queue.pop(db)``."""
    queue = Queue(subspace)
    return Popper(db, queue.pop, queue.retry_stats)


def spread_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The relaxed-order ``Queue.pop(db, spread=16)``."""
    queue = Queue(subspace)
    return Popper(db, functools.partial(queue.pop, spread=SPREAD), queue.retry_stats)


def hc_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """The high-contention ``Queue.pop(db)``."""
    queue = Queue(subspace, high_contention=True)
    return Popper(db, queue.pop, queue.retry_stats)


def claims(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``claim_many(100)`` and ``ack_many``."""
    return ClaimAcker(db, Queue(subspace))


def tree_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``WeightTree.pop(db)``."""
    tree = WeightTree(subspace)
    return Popper(db, tree.pop, tree.retry_stats)


def pq_min_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``PriorityQueue.pop_min(db)``."""
    pq = PriorityQueue(subspace)
    return Popper(db, pq.pop_min, pq.retry_stats)


def pq_max_pops(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``PriorityQueue.pop_max(db)``."""
    pq = PriorityQueue(subspace)
    return Popper(db, pq.pop_max, pq.retry_stats)


#: The client operations, by :attr:`Kind.op <fdbrecipes.bench.settings.Kind.op>`.
FACTORIES: Dict[str, Factory] = {
    "write": writes,
    "push": pushes,
    "push-tr": tx_pushes,
    "recipe-push": recipe_pushes,
    "recipe-pop": recipe_pops,
    "pop": plain_pops,
    "spread-pop": spread_pops,
    "hc-pop": hc_pops,
    "claim-ack": claims,
    "tree-pop": tree_pops,
    "pq-pop-min": pq_min_pops,
    "pq-pop-max": pq_max_pops,
}
