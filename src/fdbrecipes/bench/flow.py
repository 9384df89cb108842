"""The ``flow`` group: flow control (issue 40, docs/flow-control.md) beside the same
work without it, in the same run.

* ``claim_many(100)`` + ``ack_many`` at K clients on a Queue whose jobs carry a global
  ``concurrency(10,000)`` (far above the 1,600 that 16 clients hold at once) beside the
  same drain of a Queue without limits (:data:`.settings.LIMITED_CLAIMS`,
  :data:`.settings.PLAIN_CLAIMS`);
* ``Queue.push(db, value, unique=Unique(key))`` beside ``Queue.push(db, value, id=)``,
  a fresh key (id) per push (:data:`.settings.UNIQUE_PUSH`, :data:`.settings.ID_PUSH`);
* in the parent process (:mod:`.keyed`), ``Queue.claim`` latency with 10,000 keys
  holding one job each under a keyed ``concurrency(1)``, beside a plain Queue of as
  many jobs, claim for claim: its queues are filled here (:func:`fill_keyed`).

Clients (:data:`FLOW_FACTORIES`) and fills (:data:`FLOW_FILLS`) join the suite's own
(:mod:`.clients`, :mod:`.suite`).
"""

from __future__ import annotations

import itertools
from typing import Any, Dict, Sequence

from .. import Limits, Queue, Unique, concurrency
from .fill import Filler
from .operations import ClaimAcker, Client, Factory
from .recipe import QUEUE_FILL_BATCH, VALUE, chunks
from .settings import FLOW_GLOBAL_LIMIT, FLOW_KEYED_LIMIT

__all__ = ["FLOW_FACTORIES", "FLOW_FILLS", "fill", "fill_keyed"]

#: The names of the limits in a measurement's store.
GLOBAL, KEYED = "bench-global", "bench-keyed"


def job_key(value: int) -> int:
    """A job's key under the keyed limit: its value (the ints 0 .. keys - 1)."""
    return value


def limits(subspace: Any) -> Limits:
    """The measurement's limit store."""
    return Limits(subspace["limits"])


def global_queue(subspace: Any) -> Queue[Any]:
    """The queue whose every job carries the global limit."""
    return Queue(subspace["queue"], limits=limits(subspace).use(GLOBAL))


def keyed_queue(subspace: Any) -> Queue[Any]:
    """The queue whose jobs carry the keyed limit, keyed by :func:`job_key`."""
    return Queue(subspace["queue"], limits=limits(subspace).use(KEYED, key=job_key))


def fill(db: Any, queue: Queue[Any], values: Sequence[int]) -> None:
    """``values`` pushed to ``queue`` (``push_many`` of 1,000)."""
    for chunk in chunks(0, len(values), QUEUE_FILL_BATCH):
        queue.push_many(db, values[chunk.start:chunk.stop])


def fill_global(db: Any, subspace: Any, items: int, _seed: int) -> None:
    """The global limit set to ``concurrency(10,000)``; its queue holding the ints
    0 .. items - 1."""
    limits(subspace).set(db, GLOBAL, concurrency(FLOW_GLOBAL_LIMIT))
    fill(db, global_queue(subspace), range(items))


def fill_keyed(db: Any, subspace: Any, keys: int) -> Queue[Any]:
    """The keyed limit set to ``concurrency(1)``; its queue holding one job of each of
    ``keys`` keys; the queue."""
    limits(subspace).set(db, KEYED, concurrency(FLOW_KEYED_LIMIT))
    queue = keyed_queue(subspace)
    fill(db, queue, range(keys))
    return queue


class FreshPusher(Client):
    """``Queue.push(db, VALUE, ...)`` with a key no other push of the run uses
    (subclasses say whether it is an id or a unique key)."""

    def __init__(self, db: Any, queue: Queue[Any], index: int) -> None:
        super().__init__(queue.retry_stats)
        self.db, self.queue, self.index = db, queue, index
        self.pushes = itertools.count()

    def fresh(self) -> bytes:
        """This client's next key."""
        return b"bench-%d-%d" % (self.index, next(self.pushes))


class IdPusher(FreshPusher):
    """A push given a fresh ``id``."""

    def step(self) -> int:
        self.queue.push(self.db, VALUE, id=self.fresh())
        return 1


class UniquePusher(FreshPusher):
    """A push given a fresh ``unique`` key (covers "running", on a conflict "skip":
    the defaults)."""

    def step(self) -> int:
        self.queue.push(self.db, VALUE, unique=Unique(self.fresh()))
        return 1


def limited_claims(db: Any, subspace: Any, _index: int, batch: int) -> Client:
    """``claim_many(batch)`` + ``ack_many`` on the globally limited queue."""
    return ClaimAcker(db, global_queue(subspace), batch)


def id_pushes(db: Any, subspace: Any, index: int, _batch: int) -> Client:
    """``Queue.push(db, value, id=...)``."""
    return IdPusher(db, Queue(subspace), index)


def unique_pushes(db: Any, subspace: Any, index: int, _batch: int) -> Client:
    """``Queue.push(db, value, unique=Unique(...))``."""
    return UniquePusher(db, Queue(subspace), index)


#: The clients of the flow group, by op.
FLOW_FACTORIES: Dict[str, Factory] = {
    "limited-claim-ack": limited_claims,
    "id-push": id_pushes,
    "unique-push": unique_pushes,
}
#: The fills of its draining rows.
FLOW_FILLS: Dict[str, Filler] = {"limited-claim-ack": fill_global}
