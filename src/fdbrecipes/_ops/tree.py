"""WeightTree's operations object: every call, checked, as an operation.

:class:`TreeOps` holds one tree's configuration, its engine (:mod:`.._tree.engine`) and its
retry loop; each method checks its arguments (TypeError or ValueError, before anything
is written) and returns an operation that ``WeightTree`` drives and
``AsyncWeightTree`` awaits.  What each call reads, writes, conflicts with and costs is
said in :mod:`fdbrecipes.weight_tree`.
"""

from __future__ import annotations

import random
from typing import Any, Iterable, List, Optional, Tuple

from .._clock import Clock, database_clock
from .._codec import decoded
from .._fdb import Gen, Transactor, check_transactor
from .._ids import Ids
from .._layout import TreeLayout
from .._ordered.counts import QueueStats
from .._retry import read, read_pages
from .._tree.engine import (
    LEVELS,
    MAX_PICKS,
    MAX_WEIGHT,
    PICK_BATCH,
    Pushed,
    Tree,
    TreeRequest,
    parse_handle,
)
from .._values import (
    MUTATION_OVERHEAD,
    Value,
    check_batch_bytes,
    check_clock,
    check_id,
    check_int,
    check_limit,
    check_pairs,
    check_subspace,
)
from .._waiting import Wake, take_or_wait
from .base import Ops

__all__ = ["TreeOps", "pushed"]


def pushed(result: Pushed) -> List[bytes]:
    """The handles a push request came to (raises the error that refused it)."""
    if isinstance(result, ValueError):
        raise result
    return result


def check_weight(weight: Any, name: str = "weight") -> int:
    """``weight`` if it is an int in [1, :data:`MAX_WEIGHT`]."""
    return check_int(weight, name, low=1, high=MAX_WEIGHT)


def check_point(point: Any) -> Optional[int]:
    """``point`` if it is None or an int >= 0."""
    return None if point is None else check_int(point, "point", low=0)


class TreeOps(Ops):
    """What WeightTree runs (see the module docstring); the arguments of the
    constructor are its."""

    def __init__(self, subspace: Any, *, rng: Optional[random.Random] = None,
                 id_retention: float = 3600.0, clock: Optional[Clock] = None,
                 codec: Any = None) -> None:
        subspace = check_subspace(subspace)
        if rng is not None and not isinstance(rng, random.Random):
            raise TypeError(f"rng must be a random.Random, not {type(rng).__name__}")
        ids = Ids(subspace, id_retention)
        super().__init__(subspace, codec)
        self.engine = Tree(TreeLayout(subspace),
                           rng if rng is not None else random.SystemRandom(),
                           check_clock(clock) or database_clock, ids)

    @property
    def wake_key(self) -> bytes:
        """The key every push touches."""
        return self.engine.keys.wake_key

    # -- pushing ---------------------------------------------------------------------

    def request(self, value: Value, weight: Any, id_: Any) -> TreeRequest:
        """The checked push of one value with ``weight``."""
        return TreeRequest([(self.values.encoded(value), check_weight(weight))],
                           check_id(id_))

    def requests(self, items: Iterable[Tuple[Value, int]]) -> TreeRequest:
        """The checked push of every ``(value, weight)`` pair of ``items``."""
        batch = check_pairs(items, "weight", check_weight, self.values.encoded)
        prefix = len(self.subspace.key())
        total = sum(len(v) + 2 * (prefix + 60 + MUTATION_OVERHEAD) + LEVELS * 40
                    for v, _ in batch)
        check_batch_bytes(total, len(batch), "items")
        return TreeRequest(batch, None)

    def push(self, tr: Transactor, request: TreeRequest) -> Gen[List[bytes]]:
        """Push a checked request; its handles."""
        if not request.batch:
            check_transactor(tr)
            return []
        return pushed((yield from self.loop(tr, self.engine.push, [request]))[0])

    def push_requests(self, tr: Transactor, requests: List[TreeRequest]) -> Gen[List[Pushed]]:
        """Push checked requests in one transaction (a shared one: see
        :mod:`fdbrecipes.aio._combine`); for each, its handles or the error that
        refused it."""
        return self.loop(tr, self.engine.push, requests)

    # -- taking and reading ----------------------------------------------------------

    @decoded()
    def pop(self, tr: Transactor, point: Any) -> Gen[Optional[Value]]:
        """Pop an item by weight (at ``point``, if given)."""
        return self.loop(tr, self.engine.pop, check_point(point))

    @decoded()
    def pop_many(self, tr: Transactor, n: Any) -> Gen[List[Value]]:
        """Pop up to ``n`` items by weight, in batches."""
        n = check_int(n, "n", low=0)
        batch = self.hooks.batch or PICK_BATCH
        return self.loop.batches(tr, self.engine.pop_many, n, (), MAX_PICKS, batch,
                                 what="picks")

    def pop_wait(self, db: Any, timeout: Any) -> Gen[Optional[Value]]:
        """Pop, waiting on the watch until an item is there."""
        wake = Wake((self.wake_key,), self.engine.ready, (), self.hooks)
        return take_or_wait(db, timeout, self.pop, (None,), wake)

    @decoded()
    def peek(self, tr: Transactor, point: Any) -> Gen[Optional[Value]]:
        """The value a pop at ``point`` (drawn when None) would take."""
        return read(tr, self.engine.peek, check_point(point))

    @decoded(0)
    def get(self, tr: Transactor, handle: bytes) -> Gen[Optional[Tuple[Value, int]]]:
        """``(value, weight)`` of the item ``handle`` names, or None."""
        return read(tr, self.engine.get, parse_handle(handle))

    @decoded(1)
    def items(self, tr: Transactor, limit: Any) -> Gen[List[Tuple[bytes, Value, int]]]:
        """``(handle, value, weight)`` of every item, in point order."""
        return read_pages(tr, self.engine.items, (), check_limit(limit))

    def total_weight(self, tr: Transactor) -> Gen[int]:
        """The sum of the weights."""
        return read(tr, self.engine.counter, self.engine.keys.total_key)

    def size(self, tr: Transactor) -> Gen[int]:
        """The number of items."""
        return read(tr, self.engine.size)

    def is_empty(self, tr: Transactor) -> Gen[bool]:
        """Whether the tree holds no item."""
        return (yield from self.size(tr)) == 0

    def stats(self, tr: Transactor) -> Gen[QueueStats]:
        """Where the items are, as a queue's stats: all visible (see
        :class:`fdbrecipes.protocol.Inspectable`)."""
        return QueueStats((yield from self.size(tr)), 0, 0, 0, None)

    # -- changing --------------------------------------------------------------------

    @decoded()
    def remove(self, tr: Transactor, handle: bytes) -> Gen[Optional[Value]]:
        """Remove the item ``handle`` names; its value, or None."""
        return self.loop(tr, self.engine.remove, parse_handle(handle))

    def set_weight(self, tr: Transactor, handle: bytes, weight: Any) -> Gen[Optional[int]]:
        """Give the item ``handle`` names a new weight; the old one, or None."""
        key = parse_handle(handle)
        return self.loop(tr, self.engine.set_weight, key, check_weight(weight))

    def clear(self, tr: Transactor) -> Gen[None]:
        """Remove every item, sum and remembered id."""
        return self.loop.idempotent(tr, self.engine.clear)
