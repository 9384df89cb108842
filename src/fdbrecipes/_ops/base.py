"""What every structure's operations object has: its subspace, retry loop and hooks.

A structure's *operations object* (``Queue(...).ops``, see :mod:`fdbrecipes.protocol`)
holds its configuration and its engine, checks the arguments of every call, and
returns operations (generators, see :mod:`.._attempt`).  The sync class drives them
with the blocking driver, the async class awaits them (:mod:`.._drivers`); neither
holds anything of the other.  This base holds what every operations object needs to
run a call: the subspace, the retry loop with its counters and receipts
(:class:`.._retry.RetryLoop`) and the testing hooks.
"""

from __future__ import annotations

import time
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    ClassVar,
    Dict,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
)

import fdb.tuple
from fdb.subspace_impl import Subspace

from .._attempt import Attempt
from .._codec import Values, decoded
from .._fdb import Gen, Transactor, check_transactor
from .._fdb import read as read_value
from .._hooks import Hooks
from .._ordered.engine import told
from .._records.finished import FinishedJob, finished
from .._records.history import (
    PRUNE_BATCH,
    Finished,
    Then,
    cancelled,
    finished_or,
    outcome,
    prune,
    push_all,
    recorded,
    report,
)
from .._records.records import DELAYED, PENDING, RETRYING, JobRecord, Progress, Records
from .._records.registry import QUIET, STOP, Orders, Registry, WorkerInfo
from .._records.series import MAX_MINUTES, Minute, Series
from .._records.tokens import optional, parse_finished
from .._retry import RetryLoop, RetryStats, read
from .._values import MAX_TAKE, check_int, check_limit, check_seconds, check_timeout, materialize
from .._waiting import Readiness, Wake, wait_until_ready
from ..errors import UnknownJobError
from .layout_guard import LayoutGuard

if TYPE_CHECKING:
    from .._ordered.listing import Listing

T = TypeVar("T")
#: Where a queue is in its structure: ``()``, or a FairQueue group's ``(group,)``.
Where = Tuple[Any, ...]

__all__ = ["ClaimStep", "Claimed", "JobOps", "Ops"]


class Claimed(NamedTuple):
    """What ``finish_and_claim`` gives: for each finished job, whether it was acked
    (as ``finish_many`` says), and the leases claimed (as ``claim_many`` gives)."""

    acked: List[bool]
    leases: List[Any]


class ClaimStep(NamedTuple):
    """A claim, its arguments checked: ``op(tr, attempt, n, **options)`` claims ``n``
    items in ``tr`` (an operation of the structure's engine, its arguments by name);
    ``most``: the claims one transaction of ``claim_many`` given a Database makes at
    most."""

    op: Callable[..., Gen[List[Any]]]
    options: Dict[str, Any]
    most: int

    def claim(self, tr: Any, attempt: Attempt, n: int) -> Gen[List[Any]]:
        """Claim ``n`` items in ``tr`` (see the class docstring)."""
        return self.op(tr, attempt, n, **self.options)


class Ops:
    """The base of every operations object.

    Attributes:
        subspace: the subspace holding every key of the structure.
        loop: the retry loop of the calls given a Database (retry counters, receipts).
        hooks: the testing hooks (see :mod:`fdbrecipes.testing.hooks`).
        values: the structure's codec (see :mod:`.._codec`): how values are stored, and
            decoded by the methods decorated with :func:`.._codec.decoded`.
    """

    def __init__(self, subspace: Subspace, codec: Any = None) -> None:
        self.subspace = subspace
        self.loop = RetryLoop(subspace)
        self.hooks = Hooks()
        self.values = Values(codec)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.subspace!r})"

    @property
    def retry_stats(self) -> RetryStats:
        """Retry counters of the loops this object ran (calls given a Database)."""
        return self.loop.stats


class JobOps(Ops):
    """The base of the operations objects whose items are jobs (those of Queue,
    PriorityQueue and FairQueue): their job records and workers.

    A structure is made of queues (a FairQueue, one per group), each located by a
    ``where`` (``()``, or ``(group,)``); a subclass says how to find one
    (:meth:`listing_at`), which one a lease is of (:meth:`lease_where`) and how it
    acks leases with results (:meth:`ack_results`).

    Attributes:
        id_retention: seconds an idempotency id is remembered after its item left.
        max_deliveries: deliveries after which a lease that ends without ack makes its
            item a dead letter (None: never).
        history: seconds a finished job's record is kept (None: no job records).
        shards: how many shards its items are spread over (1: unsharded; see
            :mod:`.layout_guard`).
        registry: the workers serving the structure (see :mod:`.._records.registry`).
        series: its throughput and backlog history (see :mod:`.._records.series`), which its
            workers write at each heartbeat; ``series.retention`` (seconds, default
            7 days) is how long it is kept.
    """

    #: Elements of ``where`` in the entries of the index of finished records: 0, or
    #: a FairQueue's 1 (the group).
    where_len: ClassVar[int] = 0

    shards: int
    guard: LayoutGuard  # set by the subclass, which knows its kind and shards

    def __init__(self, subspace: Subspace, id_retention: Any, max_deliveries: Any,
                 history: Any = None, codec: Any = None) -> None:
        if max_deliveries is not None:
            check_int(max_deliveries, "max_deliveries", low=1)
        self.id_retention = check_seconds(id_retention, "id_retention")
        self.max_deliveries: Optional[int] = max_deliveries
        self.history = None if history is None else check_seconds(history, "history")
        super().__init__(subspace, codec)
        self.registry = Registry(subspace["u"])
        self.series = Series(subspace["m"])
        #: The workflow stores made with this structure, by their key (see
        #: fdbrecipes.workflow): a worker serving it advances their workflows.
        self.workflows: Dict[bytes, Any] = {}
        #: How a workflow store gives back the result of a node of this structure
        #: (``inputs``, ``result``): ``node_results(result, value)``, given the
        #: result as stored (the codec applied) and the node's value; None: as
        #: stored.  An App sets it on its structures: a task node's result is then
        #: its task's return value (see fdbrecipes.tasks).
        self.node_results: Optional[Callable[[Any, Any], Any]] = None

    def guarded(self, tr: Transactor, op: Gen[T], writes: bool = False) -> Gen[T]:
        """``op``, after the layout check if this object has not made it yet (a call
        that ``writes`` of a sharded object writes the marker if the structure is
        fresh; see :class:`.layout_guard.LayoutGuard`)."""
        return self.guard.guarded(tr, self.loop, op, writes)

    def workers(self, tr: Any, gone: bool = False) -> Gen[List[WorkerInfo]]:
        """The live workers serving the structure (``gone``: and the records of those
        gone, not yet cleared); snapshot reads."""
        return read(tr, self.registry.workers, gone)

    def command(self, tr: Any, worker: Any, command: Any) -> Gen[bool]:
        """Ask ``worker`` (its id) to ``command``: "quiet" or "stop"; False if no live
        worker has that id."""
        if type(worker) is not str or not worker:
            raise TypeError(f"worker must be a worker's id (a str), not {worker!r}")
        if command not in (QUIET, STOP):
            raise ValueError(f"command must be 'quiet' or 'stop', not {command!r}")
        return self.loop(tr, self.commanding, worker, command)

    def commanding(self, tr: Any, attempt: Attempt, worker: str, command: str) -> Gen[bool]:
        """The operation of :meth:`command`."""
        done: bool = yield from self.registry.command(tr, worker, command)
        attempt.idle = not done
        return done

    # -- pausing -------------------------------------------------------------------------

    def pause(self, tr: Transactor, paused: Any) -> Gen[bool]:
        """Pause (``paused`` True) or resume the structure; whether that changed it."""
        if type(paused) is not bool:
            raise TypeError(f"paused must be a bool, not {type(paused).__name__}")
        return self.guarded(tr, self.loop(tr, self.pausing, paused), True)

    def pausing(self, tr: Any, attempt: Attempt, paused: bool) -> Gen[bool]:
        """The operation of :meth:`pause`: the flag set (with the time) or cleared, in
        every shard, and on a resume the waiters woken."""
        was = yield from read_value(tr.get(self.pause_key))
        changed = (was is None) == paused
        for key in self.pause_keys if changed else ():
            if paused:
                tr.set(key, fdb.tuple.pack((time.time(),)))
            else:
                tr.clear(key)
        if changed and not paused:
            self.wake_waiters(tr, attempt)
        attempt.idle = not changed
        return changed

    def paused(self, tr: Transactor) -> Gen[Optional[float]]:
        """When the structure was paused (wall-clock seconds), or None if it is not."""
        return read(tr, self.paused_at)

    def paused_at(self, tr: Any) -> Gen[Optional[float]]:
        """The operation of :meth:`paused`."""
        value = yield from read_value(tr.get(self.pause_key))
        if value is None:
            return None
        at: float = fdb.tuple.unpack(value)[0]
        return at

    # -- what a subclass says ------------------------------------------------------------

    @property
    def pause_key(self) -> bytes:
        """The structure's pause flag: present while it is paused (see the layouts of
        :mod:`.._layout`); a sharded Queue's or PriorityQueue's, shard 0's."""
        return self.pause_keys[0]

    @property
    def pause_keys(self) -> Tuple[bytes, ...]:
        """Where the pause flag is written: :attr:`pause_key`, and in a sharded Queue
        or PriorityQueue every other shard's (each take reads its shard's)."""
        raise NotImplementedError

    def wake_waiters(self, tr: Any, attempt: Attempt) -> None:
        """Touch the wake key without changing the structure's counts: its waiters look
        again."""
        raise NotImplementedError

    def listing_at(self, where: Where) -> Listing:
        """The listing (records, states, cancels) of the queue at ``where``."""
        raise NotImplementedError

    def lease_where(self, lease: Any) -> Where:
        """Where the queue of ``lease`` (a Lease, or its token) is."""
        raise NotImplementedError

    def check_lease(self, lease: Any, name: str) -> Any:
        """``lease`` if it is one of this structure's (a Lease, or its token)."""
        raise NotImplementedError

    def claim_step(self, lease_seconds: Any, spread: Any, end: Any,
                   holder: Optional[str]) -> ClaimStep:
        """The claim ``claim_many`` makes, its arguments checked (TypeError or
        ValueError, naming them)."""
        raise NotImplementedError

    def before_claim(self, tr: Transactor) -> Gen[None]:
        """What runs before a claim given a Database, in transactions of its own
        (a Queue's restore of a backlog of expired holds): nothing here."""
        yield from ()

    def ack_results(self, tr: Any, attempt: Attempt, leases: List[Any],
                    results: List[Optional[bytes]], states: List[str]) -> Gen[List[bool]]:
        """Ack every lease of ``leases`` still alive, each job's record with its result
        and its final state (succeeded, or cancelled); for each, whether it was
        acked."""
        raise NotImplementedError

    def removing(self, tr: Any, attempt: Attempt, where: Where, op: Callable[..., Gen[T]],
                 *args: Any) -> Gen[T]:
        """``op(tr, attempt, *args)``, which may remove an item of the queue at
        ``where`` (a FairQueue revises the group's eligibility after it)."""
        return op(tr, attempt, *args)

    def records_at(self, where: Where) -> Records:
        """The job records of the queue at ``where``."""
        records: Records = self.listing_at(where).engine.records
        return records

    @property
    def expiry(self) -> Subspace:
        """The index of finished job records (see :class:`.._layout.RecordLayout`)."""
        return self.records_at(()).keys.expiry

    # -- job records -------------------------------------------------------------------

    def job_at(self, tr: Transactor, id_: bytes, where: Where) -> Gen[Optional[JobRecord]]:
        """Job ``id_``'s record (of the queue at ``where``) as it is at the read
        version; None if unknown."""
        return read(tr, self.listing_at(where).job, id_)

    def result_at(self, db: Any, id_: bytes, where: Where, timeout: Any) -> Gen[Any]:
        """Wait until job ``id_`` is finished; its result (or raise its failure)."""
        check_timeout(timeout)
        keys = self.records_at(where).keys
        # a finish writes the end key (the earlier layout: the state key)
        wake = Wake((keys.key(id_, "f"), keys.key(id_, "s")), self.is_finished, (id_, where),
                    self.hooks)
        if not (yield from wait_until_ready(db, timeout, wake)):
            raise TimeoutError(f"job {id_!r} did not finish within {timeout} s")
        record = yield from read(db, self.listing_at(where).job, id_)
        if record is None:
            raise UnknownJobError(id_)
        return outcome(record)

    def is_finished(self, tr: Any, id_: bytes, where: Where) -> Gen[Readiness]:
        """Whether job ``id_`` is finished (a readiness check, see :class:`Wake`)."""
        return finished_or((yield from self.listing_at(where).state_of(tr, id_)), id_)

    def cancel_at(self, tr: Transactor, id_: bytes, where: Where,
                  tell: bool = True) -> Gen[Optional[str]]:
        """Cancel job ``id_``; what became of it (see ``Queue.cancel``).  ``tell``: a
        workflow's node removed while it waited runs its workflow's step (False: the
        workflow's own stop, which ends its nodes itself)."""
        return self.loop(tr, self.cancelling, id_, where, tell)

    def cancelling(self, tr: Any, attempt: Attempt, id_: bytes, where: Where,
                   tell: bool = True) -> Gen[Optional[str]]:
        """The operation of :meth:`cancel_at`: a running job's holder is told; a
        waiting one removed, if it is a workflow's node, asks for its workflow's step
        later in the transaction (see ``WorkflowOps.removed``)."""
        state, holder = yield from self.removing(tr, attempt, where,
                                                 self.listing_at(where).cancel, id_)
        if tell and state in (PENDING, DELAYED, RETRYING):
            for store in told(self.workflows, id_, self.subspace):
                store.removed(attempt.later, id_)
        return cancelled(tr, self.registry, state, holder, where[0] if where else None, id_)

    def finished(self, tr: Transactor, limit: Any = None,
                 after: Any = None) -> Gen[List[FinishedJob]]:
        """The finished jobs, the latest to be pruned first, after the one the token
        ``after`` names (see :func:`.._records.finished.finished`)."""
        at = optional(parse_finished, after, self.where_len)
        return read(tr, finished, self.expiry, self.records_at, check_limit(limit), at)

    def prune(self, tr: Transactor, limit: Any = None) -> Gen[int]:
        """Forget up to ``limit`` (all when None) job records whose time is up, in
        transactions of :data:`PRUNE_BATCH` given a Database; how many index entries
        went."""
        return self.loop.counted(tr, self.pruning, check_limit(limit), PRUNE_BATCH, "prune",
                                 "job records")

    def pruning(self, tr: Any, attempt: Attempt, limit: int) -> Gen[int]:
        """One transaction of :meth:`prune`."""
        return prune(tr, attempt, self.expiry, self.records_at, limit)

    def finish_many(self, tr: Transactor, finished: Sequence[Finished]) -> Gen[List[bool]]:
        """Ack the jobs of ``finished`` (see :class:`fdbrecipes.protocol.Workable`)."""
        batch = self.finished_batch(finished)
        if not batch:
            check_transactor(tr)
            return []
        return (yield from self.guarded(tr, self.loop(tr, self.finishing, batch), True))

    def finished_batch(self, finished: Sequence[Finished]) -> List[Finished]:
        """``finished``, checked: each a :class:`Finished` of a lease of this
        structure, at most :data:`MAX_TAKE`."""
        batch = materialize(finished, "finished")
        for i, f in enumerate(batch):
            if not isinstance(f, Finished):
                raise TypeError(f"finished[{i}] must be a Finished, not {type(f).__name__}")
            self.check_lease(f.lease, f"finished[{i}].lease")
        if len(batch) > MAX_TAKE:
            raise ValueError(f"finished: at most {MAX_TAKE:,} per call, got {len(batch):,}")
        return batch

    @decoded()
    def finish_and_claim(self, tr: Transactor, finished: Sequence[Finished], n: Any,
                         lease_seconds: Any, *, spread: Any = 1, end: Any = "min",
                         holder: Optional[str] = None) -> Gen[Claimed]:
        """``finish_many(finished)`` then ``claim_many(n, ...)``, in one transaction
        (see :class:`fdbrecipes.protocol.Workable`): it claims at most as many as
        one transaction of ``claim_many`` would."""
        batch = self.finished_batch(finished)
        n = check_int(n, "n", low=0)
        step = self.claim_step(lease_seconds, spread, end, holder)
        n = min(n, step.most)
        if n:
            yield from self.before_claim(tr)
        return (yield from self.guarded(
            tr, self.loop(tr, self.finishing_claiming, batch, n, step), True))

    def finishing_claiming(self, tr: Any, attempt: Attempt, finished: List[Finished], n: int,
                           step: ClaimStep) -> Gen[Claimed]:
        """The operation of :meth:`finish_and_claim`: the acks, then the claim (the
        attempt wrote nothing if neither did)."""
        acked: List[bool] = []
        if finished:
            acked = yield from self.finishing(tr, attempt, finished)
        idle = attempt.idle or not finished
        leases: List[Any] = []
        if n:
            attempt.idle = False
            leases = yield from step.claim(tr, attempt, n)
            idle = idle and attempt.idle
        attempt.idle = idle
        return Claimed(acked, leases)

    def finishing(self, tr: Any, attempt: Attempt, finished: List[Finished]) -> Gen[List[bool]]:
        """The operation of :meth:`finish_many`: the acks, then, for each job acked,
        its progress, its error beside a success and its follow-up work."""
        done = yield from self.ack_results(tr, attempt, [f.lease for f in finished],
                                           [f.result for f in finished],
                                           [f.state for f in finished])
        followups: List[Then] = []
        for f, acked in zip(finished, done):
            if acked:
                recorded(tr, self.records_at(self.lease_where(f.lease)), f)
                followups.extend(f.followups)
        yield from push_all(tr, followups)  # a workflow's steps side by side
        return done

    def report(self, tr: Transactor, reports: Sequence[Tuple[Any, Progress]]) -> Gen[None]:
        """Write the progress of running jobs (``(lease, Progress)`` pairs)."""
        return self.loop.idempotent(tr, self.reporting, list(reports))

    def reporting(self, tr: Any, _attempt: Attempt,
                  reports: List[Tuple[Any, Progress]]) -> Gen[None]:
        """The operation of :meth:`report`."""
        yield from ()  # an operation (a generator), though it waits for nothing
        report(tr, [self.records_at(self.lease_where(lease)) for lease, _ in reports], reports)

    # -- the workers -------------------------------------------------------------------

    def beat(self, tr: Transactor, info: WorkerInfo) -> Gen[None]:
        """Write worker ``info.id``'s record (and clear a few of workers gone) and its
        bucket of the structure's history."""
        return self.loop.idempotent(tr, self.beating, info)

    def beating(self, tr: Any, _attempt: Attempt, info: WorkerInfo) -> Gen[None]:
        """The operation of :meth:`beat`."""
        backlog = yield from self.backlog(tr)
        yield from self.registry.beat(tr, info)
        self.series.record(tr, info, backlog)

    def backlog(self, tr: Any) -> Gen[Optional[int]]:
        """How many items are visible now, for the history, where that costs O(1) (by
        snapshot); else None."""
        yield from ()
        return None

    def throughput(self, tr: Transactor, minutes: Any = 60) -> Gen[List[Minute]]:
        """The last ``minutes`` minutes of the structure's history (see
        :mod:`.._records.series`), oldest first."""
        count = check_int(minutes, "minutes", low=1, high=MAX_MINUTES)
        return read(tr, self.series.minutes, count)

    def leave(self, tr: Transactor, worker: str) -> Gen[None]:
        """Clear ``worker``'s record, command and cancels: it stopped."""
        return self.loop.idempotent(tr, self.leaving, worker)

    def leaving(self, tr: Any, _attempt: Attempt, worker: str) -> Gen[None]:
        """The operation of :meth:`leave`."""
        yield from ()  # an operation (a generator), though it waits for nothing
        self.registry.forget(tr, worker)
        self.series.forget(worker)

    def orders(self, db: Any, worker: str, timeout: Optional[float]) -> Gen[Orders]:
        """Wait on a watch until operators ask something of ``worker`` (a command, a
        cancel) or ``timeout`` passes; what they asked (nothing if none), cleared as
        it is read."""
        wake = Wake((self.registry.wake_key(worker),), self.registry.has_orders, (worker,),
                    self.hooks)
        if not (yield from wait_until_ready(db, timeout, wake)):
            return Orders(None, [])
        return (yield from self.loop(db, self.taking_orders, worker))

    def taking_orders(self, tr: Any, attempt: Attempt, worker: str) -> Gen[Orders]:
        """The reading (and clearing) of :meth:`orders`."""
        orders: Orders = yield from self.registry.orders(tr, worker)
        attempt.idle = orders.command is None and not orders.cancels
        return orders
