"""What the tools around a structure need from it: the operations protocols.

Every structure object, sync or async, has an *operations object*, ``structure.ops``:
the one object that checks the arguments of every call and turns it into an
*operation* (see below), and that both the sync class and its async twin run.  A
:class:`fdbrecipes.Worker` (or :class:`fdbrecipes.aio.AsyncWorker`), a
:class:`fdbrecipes.Schedule`, the operator commands and :mod:`fdbrecipes.metrics` use
nothing of a structure but its operations object, through these protocols:

* :class:`Measurable`: where a structure's items are (:meth:`~Measurable.stats`): the
  metrics.  Every structure's operations are measurable.
* :class:`Inspectable`: what is in one queue, and acting on it (counts, items,
  leases, delayed items, dead letters, pushing, removing): the operator commands.
  Queue and PriorityQueue operations are inspectable; so is one group of a FairQueue
  (its kind's ``group_queue(fair, group)``, see ``fdbrecipes._kinds``).
* :class:`Workable`: what a worker and a schedule need: claim a batch under leases,
  settle leases in batches (with each job's result and follow-up work), wait for
  work, push a job, keep the job records (progress, pruning) and the worker's own
  record, and hear what operators ask of it.  Queue, PriorityQueue and FairQueue
  operations are workable.

**Operations.**  Each method returns an operation: a generator that yields the
FoundationDB futures it needs (and, when it waits, the steps of
``fdbrecipes._waiting``) and returns its result.  Run one with
``fdbrecipes.drive(op)`` (blocking) or ``await fdbrecipes.aio.drive(op)`` (asyncio).
``tr`` is, as everywhere, a Transaction (the operation runs inside it, the caller
commits) or a Database/Tenant (it runs in the structure's own retry loop, with commit
receipts).  Arguments are checked when the method is called, before anything is
written.  What each operation reads, writes, conflicts with and costs is said on the
structure's public method of the same purpose.

A structure of your own works with the worker, schedules and metrics by offering an
operations object that satisfies these protocols.
"""

from __future__ import annotations

from typing import (
    Any,
    Dict,
    Generator,
    List,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    TypeVar,
    runtime_checkable,
)

from fdb.subspace_impl import Subspace

from ._ops.base import Claimed
from ._ordered.counts import QueueStats
from ._ordered.dead import DeadLetter
from ._ordered.leases import Lease
from ._ordered.listing import DelayedItem, LeaseInfo
from ._ordered.paging import PendingItem, Row
from ._records.history import Finished, Followup, Then, encode_result
from ._records.records import Progress
from ._records.registry import Orders, WorkerInfo
from ._values import Value

__all__ = ["Claimed", "Finished", "Followup", "Inspectable", "Measurable", "Operation", "Orders",
           "Servable", "Then", "Workable", "encode_result", "inspectable", "workable"]

T = TypeVar("T")
L = TypeVar("L", bound=Lease[Any])

#: An operation returning a ``T``: a generator yielding what it waits for.
Operation = Generator[Any, Any, T]


@runtime_checkable
class Measurable(Protocol):
    """Where a structure's items are (see the module docstring)."""

    subspace: Subspace

    def stats(self, tr: Any) -> Operation[QueueStats]:
        """Where the items are, by snapshot reads (a WeightTree's are all visible; a
        FairQueue's are every group's, summed)."""


@runtime_checkable
class Inspectable(Protocol):
    """What is in one queue, and acting on it (see the module docstring).

    Attributes:
        subspace: where the queue's keys are.
        wake_key: the key every write that may make an item visible touches (a watch
            of it wakes on new work).
        max_deliveries: deliveries after which a lease ending without ack makes its
            item a dead letter (None: never).
    """

    subspace: Subspace
    wake_key: bytes
    max_deliveries: Optional[int]

    def stats(self, tr: Any) -> Operation[QueueStats]:
        """Where the items are (snapshot reads)."""

    def items(self, tr: Any, limit: Any = None, end: Any = "min") -> Operation[List[Value]]:
        """The visible items in the order of ``end`` ("min", or a PriorityQueue's
        "max"), up to ``limit``."""

    def pending(self, tr: Any, limit: Any = None, end: Any = "min",
                after: Any = None) -> Operation[List[PendingItem]]:
        """The visible items (with their ids and tokens) in the order of ``end``, up
        to ``limit``, after the item the token ``after`` names."""

    def leases(self, tr: Any, limit: Any = None,
               after: Any = None) -> Operation[List[LeaseInfo]]:
        """The items in flight, oldest claim first, after the lease ``after``."""

    def delayed(self, tr: Any, limit: Any = None,
                after: Any = None) -> Operation[List[DelayedItem]]:
        """The delayed items, soonest first, after the one the token ``after`` names."""

    def dead(self, tr: Any, limit: Any = None,
             after: Any = None) -> Operation[List[DeadLetter]]:
        """The dead letters, oldest first, after the one the token ``after`` names."""

    def requeue_dead(self, tr: Any, limit: Any = None, tokens: Any = None) -> Operation[int]:
        """Push dead letters back (oldest first, up to ``limit``, or those the
        ``tokens`` name); how many."""

    def purge_dead(self, tr: Any, tokens: Any = None) -> Operation[int]:
        """Remove dead letters (or those the ``tokens`` name) for good; how many."""

    def remove(self, tr: Any, id_: Any) -> Operation[Optional[Value]]:
        """Remove the pending item pushed with idempotency id ``id_``; its value."""

    def lookup(self, tr: Any, token: Any) -> Operation[Optional[Row]]:
        """The row ``token`` names (a pending item's, a delayed item's, a lease's, a
        dead letter's), as its listing would list it now; None when it is gone."""

    def remove_many(self, tr: Any, tokens: Any) -> Operation[List[Optional[Value]]]:
        """Remove the pending (or delayed) items the ``tokens`` name, in one
        transaction; for each, its value or None."""

    def push_job(self, tr: Any, value: Any, *, id: Optional[bytes] = None,
                 delay: Optional[float] = None, time_limit: Optional[float] = None,
                 limit_keys: Optional[Dict[str, Any]] = None,
                 **where: Any) -> Operation[Optional[bytes]]:
        """Push one value, with an idempotency ``id``, a ``delay`` (seconds), a
        ``time_limit`` of its own (seconds; a structure with ``history``) and
        ``limit_keys``, its keys under the structure's limits (as the structure's
        ``push`` takes them: see docs/flow-control.md), where ``where`` says: a
        PriorityQueue's ``priority=`` (default 0), a FairQueue's ``group=``
        (required); a Queue takes none.  The item's id: ``id``, or the one a
        structure with ``history`` made, or None.  Its arguments are checked when it
        is called, before the operation runs."""


@runtime_checkable
class Workable(Protocol[L]):
    """What a worker and a schedule need (see the module docstring).

    Attributes:
        subspace: where the structure's keys are.
        wake_key: the key every write that may make an item visible touches.
        max_deliveries: deliveries after which a lease ending without ack makes its
            item a dead letter (None: never).
        id_retention: seconds an idempotency id is remembered after its item left (a
            schedule's period must not be longer).
        history: seconds a finished job's record is kept (None: no job records).
    """

    subspace: Subspace
    wake_key: bytes
    max_deliveries: Optional[int]
    id_retention: float
    history: Optional[float]

    def claim_many(self, tr: Any, n: Any, lease_seconds: Any, *, spread: Any = 1,
                   end: Any = "min", holder: Optional[str] = None) -> Operation[List[L]]:
        """Up to ``n`` items, each under a lease of ``lease_seconds``, from ``end``
        ("min", or a PriorityQueue's "max"), each among the ``spread`` first where the
        structure has an order (given a Database, in as many transactions as needed);
        ``holder``: the worker claiming them, for their job records."""

    def ack_many(self, tr: Any, leases: Any) -> Operation[List[bool]]:
        """Remove the items of the leases still alive, in one transaction; for each
        lease, whether it was."""

    def finish_many(self, tr: Any, finished: Sequence[Finished]) -> Operation[List[bool]]:
        """Ack the jobs of ``finished`` still held, in one transaction: each job's
        record with its result, progress and final state, and its follow-up work
        pushed in the same transaction; for each, whether it was acked."""

    def finish_and_claim(self, tr: Any, finished: Sequence[Finished], n: Any,
                         lease_seconds: Any, *, spread: Any = 1, end: Any = "min",
                         holder: Optional[str] = None) -> Operation[Claimed]:
        """:meth:`finish_many` of ``finished``, then :meth:`claim_many` of up to ``n``
        (at most what one transaction of ``claim_many`` takes), in one transaction:
        a worker's acks ride on its next claim.  What each acked and claimed.

        Reads, writes and conflicts with what the two calls do (the claim takes no
        item an ack of the same call settles: they are leases already held); costs
        one commit for both, the acks' reads and the claim's going out as in each
        call alone (given a Database, a restore of expired holds may go first, in a
        transaction of its own, as for ``claim_many``)."""

    def extend_many(self, tr: Any, leases: Any, seconds: Any) -> Operation[List[Optional[L]]]:
        """Move the deadline of every lease still alive to ``seconds`` from now; for
        each, the renewed lease or None."""

    def release(self, tr: Any, lease: Any, delay: Any = None, count: Any = True,
                error: Any = None) -> Operation[bool]:
        """Give a claimed item back (visible after ``delay`` seconds; ``count``: the
        delivery counts; ``error``: the :class:`fdbrecipes.JobError` it failed with);
        False if the lease had expired."""

    def bury(self, tr: Any, lease: Any, reason: Any = None,
             error: Any = None) -> Operation[bool]:
        """Move a claimed item to the dead letters now, with ``reason`` (and
        ``error``, as for :meth:`release`); False if the lease had expired."""

    def report(self, tr: Any, reports: Sequence[Tuple[Any, Progress]]) -> Operation[None]:
        """Write the progress of running jobs (``(lease, Progress)`` pairs)."""

    def prune(self, tr: Any, limit: Any = None) -> Operation[int]:
        """Forget job records whose ``history`` has passed (see ``Queue.prune``)."""

    def beat(self, tr: Any, info: WorkerInfo) -> Operation[None]:
        """Write the record of the worker ``info.id`` (see ``Queue.workers``)."""

    def leave(self, tr: Any, worker: str) -> Operation[None]:
        """Clear the record of ``worker``, which stopped."""

    def orders(self, db: Any, worker: str, timeout: Optional[float]) -> Operation[Orders]:
        """Wait on a watch until operators ask something of ``worker`` (see
        ``Queue.command`` and ``Queue.cancel``), or ``timeout`` passes; what they
        asked."""

    def wait(self, db: Any, timeout: Optional[float] = None) -> Operation[bool]:
        """Wait on a watch until an item can be claimed (True), or ``timeout`` seconds
        pass (False)."""

    def stats(self, tr: Any) -> Operation[QueueStats]:
        """Where the items are (a FairQueue's: every group's, summed)."""

    def push_job(self, tr: Any, value: Any, *, id: Optional[bytes] = None,
                 delay: Optional[float] = None, time_limit: Optional[float] = None,
                 limit_keys: Optional[Dict[str, Any]] = None,
                 **where: Any) -> Operation[Optional[bytes]]:
        """Push one value (see :meth:`Inspectable.push_job`); its id."""


@runtime_checkable
class Servable(Protocol):
    """What a worker serves in place of a structure and a handler: an app of tasks
    (:class:`fdbrecipes.tasks.App`), which names its structures and runs each job."""

    def served(self, queues: Optional[List[str]] = None) -> List[Any]:
        """The structures to serve (every one, or those ``queues`` names)."""

    def handler(self, asynchronous: bool) -> Any:
        """The handler to call with each job (an ``async def`` one if
        ``asynchronous``)."""

    def judge(self, job: Any, error: BaseException) -> BaseException:
        """What a failure the handler did not see (a time limit reached: the worker
        stopped the run) is for the job, as the handler would have raised it."""


def workable(structure: Any, name: str = "queue") -> Workable[Any]:
    """The operations object of ``structure`` (a Queue, PriorityQueue or FairQueue,
    sync or async, or anything whose ``ops`` is :class:`Workable`).

    Raises:
        TypeError: ``structure`` has no workable operations object (named ``name``).
    """
    ops = getattr(structure, "ops", None)
    if not isinstance(ops, Workable):
        raise TypeError(f"{name} must be a Queue, PriorityQueue or FairQueue (or an async "
                        f"one), not {type(structure).__name__}")
    return ops


def inspectable(structure: Any, name: str = "structure") -> Inspectable:
    """The operations object of ``structure`` if it is :class:`Inspectable` (a Queue's
    or PriorityQueue's, sync or async).

    Raises:
        TypeError: it is not (named ``name``).
    """
    ops = getattr(structure, "ops", None)
    if not isinstance(ops, Inspectable):
        raise TypeError(f"{name} must be a Queue or PriorityQueue (or an async one), not "
                        f"{type(structure).__name__}")
    return ops
