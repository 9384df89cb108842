"""A FIFO queue on FoundationDB (the queue recipe, made complete).

Items live under ``S/"i"/(index, random, ...)``.  A push reads the last index with a
snapshot read (no read conflict) and writes at index + 1 with a 20-byte random
suffix, so concurrent pushers never conflict and never overwrite each other; items
pushed concurrently share an index and are ordered among themselves at random.  A pop
reads the first item.  The whole key layout is :class:`fdbrecipes._layout.OrderedLayout`
(drawn in docs/data-model.md); leases, dead letters and stats are shared with
PriorityQueue in :class:`fdbrecipes._ordered_face.OrderedFace`; the checked operations
behind every method are :class:`fdbrecipes._ops.kinds.QueueOps`.
"""

from __future__ import annotations

from typing import Any, ContextManager, Dict, Iterable, List, Optional, Union

from ._drivers.blocking import drive
from ._fdb import Transactor
from ._heartbeat import kept_alive
from ._kinds import Kind, register
from ._layout import ORDERED_FOOTPRINT, OrderedLayout
from ._ops.kinds import QueueOps
from ._ordered.front import MIN
from ._ordered.leases import Lease
from ._ordered.paging import PendingItem
from ._ordered.unique import Unique
from ._ordered_face import OrderedFace
from ._values import V

__all__ = ["Queue"]


class Queue(OrderedFace[V]):
    """A transactional FIFO queue stored in one subspace.

    Every method takes ``tr`` first: an ``fdb.Transaction`` (the operation becomes
    part of the caller's transaction and commits, or not, with it) or an
    ``fdb.Database``/``fdb.Tenant`` (the operation runs in its own retry loop).

    Given a Database, a method that writes also writes a commit receipt (one small
    key per client thread, overwritten by its next call), which lets its retry loop settle
    ``commit_unknown_result`` exactly: the docstrings below leave it out.

    Args:
        subspace: where the queue keeps its keys (any ``fdb.Subspace``, including a
            DirectorySubspace).  The queue never writes outside it.
        high_contention: make :meth:`pop` given a Database use the high-contention
            protocol, which keeps many concurrent poppers from conflicting with each
            other (see docs/design).  Given a Transaction, pop is always the plain pop.
        clock: where leases and delays read the time; defaults to the transaction's
            read version (the cluster's clock, ~1,000,000 per second).  Tests pass
            their own.
        id_retention: seconds an idempotency id is remembered after its item left.
        result_timeout: seconds a high-contention pop result waits for its requester
            before the item goes back to the queue.
        max_deliveries: when a lease ends without ack (it expires, or is released)
            and its item has been delivered this many times, the item moves to the
            dead letters (:meth:`dead`) instead of back into the queue.  None: never.
        history: keep a record of each job (its state, attempts, times, worker, last
            error, progress and result: :meth:`job`), written in the transactions that
            move its item, and keep finished ones this many seconds (then pruned, see
            :meth:`prune`).  Every item then has an id (made by ``push`` when none is
            given).  None (the default): no records, the recipe's cost.
        shards: spread the items over this many shards (1 to 64; 1, the default:
            unsharded).  Each shard is a whole queue in a key range of its own, so
            a busy queue's writes can reach several storage teams; a push goes to a
            shard drawn at random, a pop or claim takes from one (see
            docs/scaling.md).  Items leave each shard in order, and every guarantee
            holds; between shards the order is relaxed.  Every client of the queue
            must pass the same number: the first call of an object whose number
            disagrees with the stored one raises :class:`fdbrecipes.LayoutError`.
        codec: what values are stored as (None, the default: each value as given, by
            the tuple layer): anything with ``encode(value) -> bytes`` and
            ``decode(bytes) -> value``, such as ``fdbrecipes.tasks.JSON()``,
            ``MsgPack()`` or ``Encrypted(...)``.  Pushes store the codec's bytes;
            every value a call returns (popped, peeked, listed, leased, a dead
            letter's, a job's result: workers encode results with it too) is decoded,
            and one that cannot be (a key the codec lacks) comes back as an
            :class:`fdbrecipes.Undecodable` (a worker makes its job a dead letter with
            the reason).  Every client of the structure must pass the same codec.
        limits: limits its jobs carry, shared by name with every structure using
            them: a :meth:`fdbrecipes.Limits.use` of a store, or a list of them (all
            of one store).  A claim then checks each in its own transaction and
            starts a job only within every limit; a job that cannot start is parked
            or delayed, never blocking the others (see docs/flow-control.md: a claim
            costs one round trip more, and claims of one key conflict).  ``pop``
            takes no limit into account.  None (the default): no limits.

    Sharded (``shards`` > 1), each call below works on one shard as it says, and
    the shard is picked for it: a push goes to a shard drawn at random; a pop or claim
    reads a shard drawn at random, and every other one, side by side (one more round
    trip), when that one holds fewer items than asked; a lease's calls go to its
    shard; ``size``, ``stats``, ``peek``, ``is_empty``, the listings and the waits
    read every shard, side by side (``items`` and ``pending`` merge them by place:
    each shard's items in its order, interleaved by their shard's sequence numbers,
    not in the order of the pushes across shards).  Oldest
    means oldest of its shard.  See docs/scaling.md.

    Example::

        jobs = Queue(fdb.Subspace(("jobs",)))
        jobs.push(db, b"payload")

        @fdb.transactional
        def take(tr):
            job = jobs.pop(tr)
            if job is not None:
                tr[b"done/" + job] = b""
    """

    _ops: QueueOps[V]
    _ops_class = QueueOps

    def push(self, tr: Transactor, value: V, *, id: Optional[bytes] = None,
             delay: Optional[float] = None,
             time_limit: Optional[float] = None,
             unique: Union[Unique, str, bytes, None] = None,
             sequence: Union[str, bytes, None] = None,
             limit_keys: Optional[Dict[str, Any]] = None) -> Optional[bytes]:
        """Append ``value`` at the back of the queue.

        With ``id``, pushing again with the same id stores nothing: a push retried
        after ``commit_unknown_result`` is not duplicated.  The id is remembered while
        the item is in the queue and for ``id_retention`` seconds after it left.
        With ``delay`` (seconds), the item counts in :meth:`size` at once but no pop,
        claim, peek or ``items`` sees it before the delay has passed; then it takes
        its place by push order.

        Returns the item's id: ``id``, or, in a structure made with ``history``, the
        id made for it (32 hex characters, as bytes), under which :meth:`job`,
        :meth:`result` and :meth:`cancel` find it; otherwise None.  ``time_limit``
        (seconds, a structure with ``history`` only) is the job's own time limit, kept
        in its record: a worker stops the job past it (see docs/jobs.md).

        With ``unique`` (a :class:`fdbrecipes.Unique`, or its key alone: str or
        bytes), the job is pushed only if no other job holds the key in the states
        it covers (pending and delayed; through running, the default; or through
        finished and ``window`` seconds more).  Otherwise, as ``on_conflict`` says:
        "skip" pushes nothing and returns the holder's id; "raise" raises
        :class:`fdbrecipes.UniqueConflictError`; "replace" (debounce) gives a pending
        or delayed holder ``value`` and ``delay`` (counted from now) at its place and
        returns its id, and leaves a holder that runs or finished alone (as "skip").
        A unique job's id is made by the push (``b"unique:..."``, also without
        ``history``); the key's entry is written and cleared in the transactions that
        move the job (see docs/flow-control.md) and, unless the key covers "queued"
        only, tells where the job is in place of an id key (one key written, as with
        ``id``; a lookup by the id reads the entry beside the id's key).  It reads the
        key's entry too (a read conflict on it: pushes of one key conflict, of
        different keys do not), and a replace reads the holder's item (one more round
        trip, read conflicts on its keys; it conflicts with a claim of that job).
        Given a Database, a push retried after ``commit_unknown_result`` never meets
        its own key (receipts, docs/design.md); given a Transaction, a retry meets it
        and, with "skip", returns its id.

        With ``sequence`` (a key: str or bytes), the job runs after the jobs pushed
        earlier with that key have ended, one at a time, in push order, also when one
        fails and is retried.  A job whose sequence has one in the queue waits beside
        it (not in :meth:`size` nor in the listings; :meth:`sequence` counts them); the
        transaction that ends that job puts the next at the tail.  A job of a sequence
        that dies blocks it until the operator calls :meth:`unblock` (or requeues it
        with :meth:`requeue_dead`).  Its id is made by the push (``b"seq:..."``).
        Reads the sequence's head (a read conflict on it: pushes of one sequence
        conflict) and, by snapshot, its last waiting job, beside the push's other
        reads (still 1 round trip).  See docs/flow-control.md.

        With ``limit_keys`` (a structure made with ``limits=``), a dict from the names
        of limits it uses to the job's key under each (str, bytes, int or a tuple of
        them): every claim, by any consumer, counts the job under that key, in place
        of the key its use computes from the value.  The keys are stored in the item's
        value, after it (a few bytes more per job: no read, no key and no round trip
        more; moved with the job, to its leases, its dead letter and back).

        Reads the last item key and the floor with snapshot reads (no read conflict);
        with ``id``, also the id's key (a read conflict on that key only).  Writes the
        item (delayed: under a hold and its deadline entry; with ``history``, its job
        record, blind writes), adds to the counters (atomic, conflict-free).
        Conflicts with: nothing, except a concurrent push of the same ``id``.  Cost:
        1 round trip, O(1) in n however many items are delayed.

        Given a Database, pushes that threads of this process make while one is in
        flight share the next transaction (one commit, one receipt: each stored
        exactly once; a thread alone runs its own at once; see
        ``docs/guarantees.md``).  Each push keeps its own id, options and error: one
        refused in it (a unique key held) raises in its own thread, and a shared
        transaction that fails having written nothing runs each push again alone,
        so only a push whose own transaction fails raises.

        Raises:
            TypeError or ValueError: ``value`` is None, not tuple-encodable or over
                100,000 bytes encoded; ``id`` is not 1 to 1,000 bytes; ``delay`` is
                not None or seconds >= 0; ``time_limit`` is not None or seconds > 0,
                or is given to a structure without ``history``; ``unique`` is not as
                :class:`fdbrecipes.Unique` says, or is given with ``id`` or to a
                structure with ``shards`` > 1; ``sequence`` is not str or bytes of 1
                to 200 bytes; two of ``unique``, ``sequence`` and ``id`` are given;
                ``id`` begins with ``b"unique:"`` or ``b"seq:"``; ``limit_keys`` is not
                a dict, names a limit the structure has no use of, or gives a key that
                is None or not tuple-encodable.
            UniqueConflictError: the key is held and ``on_conflict`` is "raise".
        """
        return self._push(tr, self._ops.request(value, id, delay, time_limit,
                                                unique, sequence, limit_keys)).answer()

    def push_many(self, tr: Transactor, values: Iterable[V], *,
                  delay: Optional[float] = None,
                  time_limit: Optional[float] = None,
                  limit_keys: Optional[Dict[str, Any]] = None) -> List[bytes]:
        """Append every value, in order, in one transaction (each delayed by ``delay``
        seconds, limited to ``time_limit`` and counted under ``limit_keys``, as for
        :meth:`push`, if given); in a structure made with ``history``, the ids made
        for them, in order (otherwise ``[]``).

        The whole batch is checked before anything is written.  Reads and conflicts
        as :meth:`push`; writes one key per value (two when delayed) and each counter
        once.  Cost: 1 round trip, O(k) keys.

        Raises:
            TypeError or ValueError: any value is invalid (the message names its index),
                ``limit_keys`` is (as for :meth:`push`), or the batch would exceed
                FoundationDB's 10 MB transaction limit.
        """
        return list(self._push(tr, self._ops.requests(values, delay, time_limit,
                                                      limit_keys)).ids)

    def pop(self, tr: Transactor, *, spread: int = 1) -> Optional[V]:
        """Remove and return the oldest visible item; None when none is visible.

        Plain pop (``spread=1``; given a Transaction, or without
        ``high_contention``): reads the first item with a read conflict on it (and,
        by snapshot, the expired holds), clears it, decrements the size counter.
        Conflicts with every concurrent pop of the same queue: one commits, the others
        retry.  Cost: 1 round trip, O(1) in n.

        ``spread=k`` (work queues): takes one of the ``k`` oldest visible items at
        random, with snapshot reads and a read conflict on the item taken only, so
        ``k`` concurrent poppers mostly take different items.  When it takes an item,
        at most ``k - 1`` older visible items (at its read version) are still waiting.

        High-contention pop (``high_contention=True``, ``spread=1``, given a
        Database): a popper that saw a conflict in the last 5 seconds *fetches*: one
        transaction takes the first 32 visible items in order (a read conflict on
        them), returns the first and sets the others aside for this popper, each
        under a hold that puts it back at its place after ``result_timeout``.  Its
        next pops *collect* them, oldest first, each a commit that reads nothing and
        conflicts only with the removal of that hold.  Few conflicts however many
        poppers run; without recent conflicts it is the plain pop (nothing set
        aside).  Cost per pop under contention: 1 round trip (a commit), plus a
        thirty-second of a fetch (3).  See docs/design.

        Raises:
            TypeError or ValueError: ``spread`` is not an int >= 1.
        """
        return drive(self._ops.pop(tr, MIN, spread))

    def pop_many(self, tr: Transactor, n: int, *, spread: int = 1) -> List[V]:
        """Remove and return up to ``n`` items, oldest first (with ``spread=k``, ``n``
        in a row among the ``n + k - 1`` oldest: a block starting at a random
        multiple of ``n`` below ``k``, so concurrent takers given a ``k`` of several
        times ``n`` rarely draw the same block).

        Reads the first items with a snapshot read and takes a read conflict on each
        item taken only (a concurrent pop conflicts only if it takes one of them); a
        block drawn past the end of the queue is drawn again before it (one more
        read).
        Given a Database, works in transactions of at most 1,000 items, each settled
        by its own receipt, results in order; given a Transaction, at most 10,000.
        Cost: 1 round trip per 1,000 items, O(n) keys; time and memory linear in n.

        Raises:
            TypeError or ValueError: ``n`` is not an int >= 0 (or over 10,000 given a
                Transaction); bad ``spread``.
        """
        return drive(self._ops.pop_many(tr, MIN, n, spread))

    def peek(self, tr: Transactor) -> Optional[V]:
        """The value :meth:`pop` would return now, without removing it.

        Reads the first item (read conflict on it).  Cost: 1 round trip, O(1) in n.
        """
        return drive(self._ops.peek(tr, MIN))

    def items(self, tr: Transactor, limit: Optional[int] = None) -> List[V]:
        """The visible items, oldest first, without removing them (up to ``limit``).

        Reads the item range (read conflict on the part read) and the expired holds.
        Given a Database, reads pages of 1,000 items, each in its own transaction
        (so a huge queue is listed in full, though not as one snapshot).  Cost: O(n)
        keys (O(limit) with a limit), 1 round trip per 1,000.
        """
        return drive(self._ops.items(tr, limit))

    def pending(self, tr: Transactor, limit: Optional[int] = None, *,
                after: Optional[bytes] = None) -> List[PendingItem]:
        """The visible items, oldest first, as rows (up to ``limit``): each
        :class:`fdbrecipes.PendingItem` has the value, the item's id, its deliveries,
        since when it is visible and its token, which names it for
        :meth:`remove_many` and, given as ``after``, starts the next page just after
        it: paging by key, never by offset, so a page deep in a queue of millions
        costs what the first does, and items taken meanwhile never shift a page.

        Snapshot reads (no conflicts) of the item range from ``after`` on and of the
        expired holds (counted where they are, as a pop sees them).  Given a
        Database, pages of 1,000 items, each in its own transaction.  Cost: O(limit)
        keys, 1 round trip per 1,000.

        Raises:
            TypeError or ValueError: ``after`` is not a pending item's token of a
                Queue.
        """
        return drive(self._ops.pending(tr, limit, MIN, after))

    def claim(self, tr: Transactor, lease_seconds: float, *,
              spread: int = 1) -> Optional[Lease[V]]:
        """Take the oldest visible item under a lease: hidden until ack, release or
        expiry.  Returns None when no item is visible.

        If the lease expires before :meth:`ack`, the item becomes visible again at its
        original place and is delivered again (``lease.deliveries`` counts).  Reads
        and conflicts as :meth:`pop` (``spread`` likewise); moves the item under the
        lease (2 writes).  Cost: 1 round trip, O(1) in n.

        With ``limits``, it reads the first ``spread`` visible items by snapshot and
        the state of each limit key they carry (by snapshot), takes the oldest
        runnable one in a concurrency slot drawn at random (a read conflict on that
        slot) and a rate's window (a read conflict on it), parks or delays those held
        back by their limits, and, while it has none, reads the keys of the next
        ones, then the front again (``max(spread, 64)`` items), up to 5 reads of the
        front: 2 round trips when the first can run, a bounded number more when
        some are held back (see docs/flow-control.md for the reads and what
        conflicts).
        """
        return drive(self._ops.claim(tr, MIN, lease_seconds, spread))

    def claim_many(self, tr: Transactor, n: int, lease_seconds: float, *,
                   spread: int = 1) -> List[Lease[V]]:
        """Take up to ``n`` items, oldest first, each under a lease of its own.

        Reads and conflicts as :meth:`pop_many` (``spread`` likewise); moves each item
        under its lease.  One transaction rewrites at most 4 MB of values (it returns
        fewer leases past that); given a Database, transactions of at most 1,000
        items follow one another until ``n`` are claimed or none is visible.  Ack
        them together with :meth:`ack_many`.  Cost: 1 round trip per 1,000 items.
        """
        return drive(self._ops.claim_many(tr, n, lease_seconds, spread=spread))

    def claimed(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                release_delay: Optional[float] = None) -> ContextManager[Optional[Lease[V]]]:
        """A context manager around one claimed item, with heartbeats::

            with jobs.claimed(db, lease_seconds=30, timeout=10) as lease:
                if lease is not None:
                    work(lease.value)

        Waits up to ``timeout`` for an item (as :meth:`claim_wait`) and yields its
        Lease, or None.  While the block runs, a background thread extends the lease
        about every ``lease_seconds / 3``.  When the block exits normally the item is
        acked; when it raises, the item is released (visible again after
        ``release_delay`` seconds) and the exception propagates.

        Raises:
            LeaseExpiredError: on exit, if the lease was lost despite the heartbeat
                (the process stalled past the deadline).
        """
        claim, seconds = self._ops.claiming(db, MIN, lease_seconds, timeout, release_delay)
        return kept_alive(self, db, claim, seconds, release_delay)

    def pop_wait(self, db: Any, timeout: Optional[float] = None) -> Optional[V]:
        """Pop, waiting until an item arrives; None if ``timeout`` seconds pass first.

        Blocks on a FoundationDB watch of a key that every push touches (set in a
        transaction that writes nothing), not a sleep loop: a push from any process
        wakes the waiter within milliseconds.  The waiters of a process (threads, or
        an event loop's tasks) share one watch per database and structure, so they
        hold one of the connection's watches (``max_watches``) however many they are.
        The bound: a waiter also looks again when a lease or delay it knows of ends,
        after a back-off growing from 50 ms to 1 s while its watch cannot be set
        (``too_many_watches``), and 10 seconds after it last looked whatever happens
        to watches: it sees an item a push made visible within the watch's latency,
        about a second while watches fail, 10 seconds at most.  The waiters of a
        process pop in turns, one pop at a time per database and structure, so a
        crowd woken by one push does not conflict with itself (a pop that finds
        nothing sends the waiters behind it back to their read-only checks).  Needs a
        Database (it runs several transactions).  Cost per wake-up (and per 10 s of
        waiting): 1 pop, 1 read-only check.
        """
        return drive(self._ops.pop_wait(db, MIN, timeout))

    def claim_wait(
        self, db: Any, lease_seconds: float, timeout: Optional[float] = None
    ) -> Optional[Lease[V]]:
        """:meth:`claim`, waiting like :meth:`pop_wait` until an item is visible (the
        waiters of a process claim in turns, as they pop there)."""
        return drive(self._ops.claim_wait(db, MIN, lease_seconds, timeout))


#: What the tools know of a Queue (see :mod:`fdbrecipes._kinds`).
KIND = register(Kind("queue", 0, Queue, "fdbrecipes.aio.queue:AsyncQueue", ORDERED_FOOTPRINT,
                     item_len=OrderedLayout.ITEM_LEN, jobs=True, sequences=True))
