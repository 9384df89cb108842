"""A FIFO queue on FoundationDB (the queue recipe, made complete).

Items live under ``S/"i"/(index, random)``.  A push reads the last index with a
snapshot read (no read conflict) and writes at index + 1 with a 20-byte random
suffix, so concurrent pushers never conflict and never overwrite each other; items
pushed concurrently share an index and are ordered among themselves at random.  A pop
reads the first item.  See docs/data-model for the whole key layout.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional

from ._fdb import Transactor
from ._leases import Lease
from ._ordered import MIN
from ._ordered_api import OrderedAPI
from ._values import Value, check_id, encode_value, materialize

__all__ = ["Queue"]


class Queue(OrderedAPI):
    """A transactional FIFO queue stored in one subspace.

    Every method takes ``tr`` first: an ``fdb.Transaction`` (the operation becomes
    part of the caller's transaction and commits, or not, with it) or an
    ``fdb.Database``/``fdb.Tenant`` (the operation runs in its own retry loop).

    Given a Database, a method that writes also writes a commit receipt (one small
    key in the subspace, cleared by a later call), which lets its retry loop settle
    ``commit_unknown_result`` exactly: the docstrings below leave it out.

    Args:
        subspace: where the queue keeps its keys (any ``fdb.Subspace``, including a
            DirectorySubspace).  The queue never writes outside it.
        high_contention: make :meth:`pop` given a Database use the high-contention
            protocol, which keeps many concurrent poppers from conflicting with each
            other (see docs/design).  Given a Transaction, pop is always the plain pop.
        clock: where leases read the time; defaults to the transaction's read version
            (the cluster's clock, ~1,000,000 per second).  Tests pass their own.
        id_retention: seconds an idempotency id is remembered after its item left.
        result_timeout: seconds a high-contention pop result waits for its requester
            before the item goes back to the queue.

    Example::

        jobs = Queue(fdb.Subspace(("jobs",)))
        jobs.push(db, b"payload")

        @fdb.transactional
        def take(tr):
            job = jobs.pop(tr)
            if job is not None:
                tr[b"done/" + job] = b""
    """

    _group_len = 0

    def push(self, tr: Transactor, value: Value, *, id: Optional[bytes] = None) -> None:
        """Append ``value`` at the back of the queue.

        With ``id``, pushing again with the same id stores nothing: a push retried
        after ``commit_unknown_result`` is not duplicated.  The id is remembered while
        the item is in the queue and for ``id_retention`` seconds after it left.

        Reads the last item key with a snapshot read (no read conflict); with ``id``,
        also the id's key (a read conflict on that key only).  Writes the item, adds to
        the size and wake counters (atomic, conflict-free).  Conflicts with: nothing,
        except a concurrent push of the same ``id``.  Cost: 1 round trip, O(1) in n.

        Raises:
            TypeError/ValueError: ``value`` is None, not tuple-encodable or over
                100,000 bytes encoded; ``id`` is not 1 to 1,000 bytes.
        """
        self._push(tr, [((), encode_value(value))], check_id(id))

    def push_many(self, tr: Transactor, values: Iterable[Value]) -> None:
        """Append every value, in order, in one transaction.

        The whole batch is checked before anything is written.  Reads and conflicts
        as :meth:`push`; writes one key per value.  Cost: 1 round trip.

        Raises:
            TypeError/ValueError: any value is invalid (the message names its index),
                or the batch would exceed FoundationDB's 10 MB transaction limit.
        """
        batch = [((), encode_value(v, f"values[{i}]"))
                 for i, v in enumerate(materialize(values, "values"))]
        self._push_batch(tr, batch, "values")

    def pop(self, tr: Transactor) -> Optional[Value]:
        """Remove and return the oldest item; None when the queue is empty.

        Plain pop (given a Transaction, or without ``high_contention``): reads the
        first item with a read conflict on it (and, by snapshot, the earliest lease
        deadlines), clears it, decrements the size counter.  Conflicts with every
        concurrent pop of the same queue: one commits, the others retry.  Cost: 1 round
        trip (2 when an expired lease is being returned), O(1) in n.

        High-contention pop (``high_contention=True`` and given a Database): when
        other pops are contending it registers a request and is served in request
        order by a batch fulfilment; about 2 commits per pop, few conflicts however
        many poppers run.  See docs/design.
        """
        return self._pop(tr, MIN)

    def pop_many(self, tr: Transactor, n: int) -> List[Value]:
        """Remove and return up to ``n`` items, oldest first.

        Reads the first ``n`` items (one range read, read conflict on that range),
        clears them.  Cost: 1 round trip, O(n) keys.

        Raises:
            TypeError/ValueError: ``n`` is not an int >= 0.
        """
        return self._pop_many(tr, MIN, n)

    def peek(self, tr: Transactor) -> Optional[Value]:
        """The value :meth:`pop` would return now, without removing it.

        Reads the first item (read conflict on it).  Cost: 1 round trip, O(1) in n.
        """
        return self._peek(tr, MIN)

    def items(self, tr: Transactor, limit: Optional[int] = None) -> List[Value]:
        """The visible items, oldest first, without removing them (up to ``limit``).

        Reads the item range (read conflict on the part read) and every expired lease.
        Cost: 1 to 2 round trips, O(n) keys (O(limit) with a limit).
        """
        return self._items(tr, MIN, limit)

    def claim(self, tr: Transactor, lease_seconds: float) -> Optional[Lease]:
        """Take the oldest item under a lease: hidden until ack, release or expiry.

        If the lease expires before :meth:`ack`, the item becomes visible again at its
        original place and is delivered again (``lease.deliveries`` counts).  Reads
        and conflicts as :meth:`pop`; moves the item under the lease (2 writes).
        Cost: 1 round trip, O(1) in n.  Returns None when no item is visible.
        """
        return self._claim(tr, MIN, lease_seconds)

    def pop_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[Value]:
        """Pop, waiting until an item arrives; None if ``timeout`` seconds pass first.

        Blocks on a FoundationDB watch of a key that every push touches (set in a
        transaction that writes nothing), not a sleep loop: a push from any process
        wakes the waiter within milliseconds.  Needs a Database (it runs several
        transactions).  Cost per wake-up: 1 pop, 1 read-only check.
        """
        return self._pop_wait(db, MIN, timeout)

    def claim_wait(
        self, db: Any, lease_seconds: float, timeout: Optional[float] = None
    ) -> Optional[Lease]:
        """:meth:`claim`, waiting like :meth:`pop_wait` until an item is visible."""
        return self._claim_wait(db, MIN, lease_seconds, timeout)
