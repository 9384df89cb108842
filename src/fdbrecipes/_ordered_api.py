"""What Queue and PriorityQueue share: construction, size, clear and leases.

The public classes (:mod:`.queue`, :mod:`.priority_queue`) inherit from
:class:`OrderedAPI`; each method validates its arguments, then hands one operation of
the engine (:mod:`._ordered`, :mod:`._leases`, :mod:`._contention`) to the
structure's retry loop (:mod:`._run`).
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

from fdb.subspace_impl import Subspace

from ._contention import Contention
from ._fdb import Transactor, check_database, check_transactor, is_transaction, seconds_to_versions
from ._hooks import Hooks
from ._ids import Ids
from ._layout import Item, OrderedLayout
from ._leases import Lease, Leases, lease_parts
from ._ordered import MIN, Ordered
from ._run import Loop, Stats, read
from ._values import (
    MUTATION_OVERHEAD,
    Value,
    check_batch_bytes,
    check_bool,
    check_clock,
    check_int,
    check_key,
    check_limit,
    check_seconds,
    check_subspace,
    decode_value,
    random_id,
)
from ._wait import Clock, Wake, database_clock, take_or_wait, wait_until_ready

#: A validated batch to push: (group, encoded value) pairs.
Batch = List[Tuple[Item, bytes]]


class OrderedAPI:
    """The public methods Queue and PriorityQueue share (see those classes)."""

    _group_len: int  # key elements before the sequence number: 0 Queue, 1 priority

    def __init__(
        self,
        subspace: Any,
        *,
        high_contention: bool = False,
        clock: Optional[Clock] = None,
        id_retention: float = 3600.0,
        result_timeout: float = 10.0,
    ) -> None:
        subspace = check_subspace(subspace)
        self._high_contention = check_bool(high_contention, "high_contention")
        layout = OrderedLayout(subspace, self._group_len)
        self._engine = Ordered(layout, check_clock(clock) or database_clock,
                               Ids(subspace, id_retention))
        self._leases = Leases(self._engine)
        self._loop = Loop(subspace)
        self._hooks = Hooks()
        timeout = seconds_to_versions(check_seconds(result_timeout, "result_timeout"))
        self._contention = Contention(self._engine, self._loop, self._hooks, timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.subspace!r})"

    @property
    def subspace(self) -> Subspace:
        """The subspace holding every key of this structure."""
        return self._engine.k.subspace

    @property
    def stats(self) -> Stats:
        """Retry counters of the loops this object ran (calls given a Database)."""
        return self._loop.stats

    def size(self, tr: Transactor) -> int:
        """Number of items held: visible ones plus those under a lease or in transit.

        Reads one counter key (kept with atomic adds).  The read takes a conflict on
        that key, so a transaction that calls ``size`` and also writes conflicts with
        every concurrent push, pop and ack; pass ``tr.snapshot`` to avoid that.
        Cost: 1 read, 1 round trip, O(1) in n.
        """
        return read(tr, self._engine.size)

    def is_empty(self, tr: Transactor) -> bool:
        """True when no item is visible: a pop now would return None.

        Items under a live lease are not visible (they still count in :meth:`size`).
        Reads the first item (read conflict on the front of the order) and, with a
        snapshot read, the earliest lease deadlines.  Cost: 1 round trip (2 when a
        lease has expired), O(1) in n.
        """
        return not read(tr, self._engine.peek, MIN, 1)

    def clear(self, tr: Transactor) -> None:
        """Remove everything: items, leases, waiting pops and remembered ids.

        One range clear of the whole subspace; reads nothing, conflicts with every
        transaction that read any of its keys.  Cost: 0 reads, O(1) in n.  A consumer
        holding a lease from before the clear gets LeaseExpiredError on ack.
        """
        self._loop.idempotent(tr, self._engine.clear)

    def ack(self, tr: Transactor, lease: Union[Lease, bytes]) -> None:
        """Remove a claimed item for good: the work it stood for is done.

        Reads the lease's held key (read conflict on it: an ack racing the item's
        redelivery conflicts), clears it and its deadline entry, decrements the size
        counter.  Cost: 1 read, 1 round trip, O(1) in n.

        Raises:
            LeaseExpiredError: the lease's deadline has passed (even if nobody took the
                item back yet) or the item is no longer held under it.
            TypeError/ValueError: ``lease`` is not a Lease or a lease token.
        """
        lease_parts(lease)
        self._loop(tr, self._leases.ack, lease)

    def extend(self, tr: Transactor, lease: Union[Lease, bytes], seconds: float) -> Lease:
        """Keep working on a claimed item: its lease now ends ``seconds`` from now.

        Returns the new Lease (use it, not the old one, from now on).  Reads the held
        key (read conflict), rewrites it and its deadline entry.  Cost: 1 read, 1 round
        trip, O(1) in n.

        Raises:
            LeaseExpiredError: the lease had already expired.
        """
        seconds = check_seconds(seconds, "seconds")
        lease_parts(lease)
        return self._loop(tr, self._leases.extend, lease, seconds)

    def release(self, tr: Transactor, lease: Union[Lease, bytes]) -> bool:
        """Give a claimed item back now, at its original place in the order.

        Its delivery count goes up by one.  Returns False (and changes nothing) when
        the lease had already expired.  Reads the held key (read conflict), moves the
        item back, touches the wake key.  Cost: 1 read, 1 round trip, O(1) in n.
        """
        lease_parts(lease)
        return self._loop(tr, self._leases.release, lease)

    def wait(self, db: Any, timeout: Optional[float] = None) -> bool:
        """Block until an item is visible, or ``timeout`` seconds pass; True if one is.

        For consumers that pop in their own transactions: wait, then pop.  Blocks on a
        watch of the key every push touches, set in a transaction that writes nothing,
        and wakes when a lease expires.  Needs a Database.  Cost per wake-up: 1
        read-only check.
        """
        return wait_until_ready(db, timeout, self._wake(MIN))

    # -- what the public classes call --------------------------------------------------

    def _push(self, tr: Transactor, batch: Batch, id_: Optional[bytes]) -> None:
        if id_ is not None:  # the id becomes part of the item's key
            group = batch[0][0]
            check_key(self._engine.k.item_key(group + (2**64, bytes(20), 2**32, id_)), "id")
        self._loop(tr, self._engine.push, batch, id_)

    def _push_batch(self, tr: Transactor, batch: Batch, name: str) -> None:
        """Push a validated batch, refusing one that cannot fit in a transaction."""
        items = self._engine.k.items
        total = sum(len(items.pack(group)) + 40 + len(value) + MUTATION_OVERHEAD
                    for group, value in batch)
        check_batch_bytes(total, len(batch), name)
        if not batch:
            check_transactor(tr)
            return
        self._push(tr, batch, None)

    def _pop(self, tr: Transactor, end: int) -> Optional[Value]:
        if self._high_contention and not is_transaction(tr, writes=False):
            check_database(tr, "tr")
            encoded = self._contention.pop(tr, end)
            return None if encoded is None else decode_value(encoded)
        values = self._loop(tr, self._engine.pop, end, 1)
        return decode_value(values[0]) if values else None

    def _pop_many(self, tr: Transactor, end: int, n: Any) -> List[Value]:
        n = check_int(n, "n", low=0)
        if n == 0:
            check_transactor(tr)
            return []
        values = self._loop(tr, self._engine.pop, end, n)
        return [decode_value(v) for v in values]

    def _peek(self, tr: Transactor, end: int) -> Optional[Value]:
        values = read(tr, self._engine.peek, end, 1)
        return decode_value(values[0]) if values else None

    def _items(self, tr: Transactor, end: int, limit: Any) -> List[Value]:
        limit = check_limit(limit)
        if limit == 0:
            check_transactor(tr, writes=False)
            return []
        values = read(tr, self._engine.peek, end, limit)
        return [decode_value(v) for v in values]

    def _claim(self, tr: Transactor, end: int, lease_seconds: Any) -> Optional[Lease]:
        seconds = check_seconds(lease_seconds, "lease_seconds")
        return self._loop(tr, self._leases.claim, end, seconds, random_id())

    def _wake(self, end: int) -> Wake:
        return Wake(self._engine.k.wake_key, self._engine.ready, (end,), self._hooks)

    def _pop_wait(self, db: Any, end: int, timeout: Any) -> Optional[Value]:
        value: Optional[Value] = take_or_wait(db, timeout, self._pop, (end,), self._wake(end))
        return value

    def _claim_wait(self, db: Any, end: int, lease_seconds: Any, timeout: Any) -> Optional[Lease]:
        check_seconds(lease_seconds, "lease_seconds")
        return take_or_wait(db, timeout, self._claim, (end, lease_seconds), self._wake(end))
