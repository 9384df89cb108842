"""An app: its tasks by name, the structures they push to, its codec, and how a
worker runs them.

``App(subspace)`` keeps its structures under ``subspace``, one per ``queue`` name its
tasks give (``subspace[name]``): a :class:`fdbrecipes.Queue`, a
:class:`fdbrecipes.PriorityQueue` for tasks with a ``priority``, a
:class:`fdbrecipes.FairQueue` for tasks with a ``group`` argument; made with the
app's ``history``, ``max_deliveries`` and ``shards``, and used as they are (a worker,
the operator commands and the dashboard see ordinary structures; raw pushes and
handlers work beside the tasks).  ``fdbrecipes.Worker(db, app)`` and
``fdbrecipes.aio.AsyncWorker(db, app)`` serve every structure of the app, running
each job's task (:mod:`.running`); ``fdbrecipes worker myapp:app`` does the same from
the command line.  ``app.testing("inline")`` and ``app.testing("manual")`` run tasks
without FoundationDB (:mod:`.testing`).
"""

from __future__ import annotations

import inspect
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Coroutine,
    Dict,
    List,
    Optional,
    Protocol,
    Union,
    overload,
)

from fdb.subspace_impl import Subspace

from .._drivers import awaiting
from .._fdb import Gen
from .._values import check_int, check_seconds, check_subspace
from ..fair_queue import FairQueue
from ..jobs import Backoff, Job
from ..limits import LimitUse
from ..priority_queue import PriorityQueue
from ..queue import Queue
from ..types import JobRecord
from .codecs import JSON, Codec
from .envelope import open_envelope
from .limiting import check_task_limits, structure_uses
from .running import Runner
from .task import P, Push, R, Task
from .testing import Harness, Testing

if TYPE_CHECKING:
    from .testing import Ran

__all__ = ["App"]

Structure = Union[Queue[Any], PriorityQueue[Any], FairQueue]
#: The kinds of structure a task's queue may be.
QUEUE, PRIORITY_QUEUE, FAIR_QUEUE = "queue", "priority-queue", "fair-queue"


class TaskDecorator(Protocol):
    """What ``app.task(...)`` with options returns: the decorator."""

    @overload
    def __call__(self, function: Callable[P, Coroutine[Any, Any, R]]) -> Task[P, R]: ...

    @overload
    def __call__(self, function: Callable[P, R]) -> Task[P, R]: ...


class App:
    """An app's tasks and the structures they push to (see the module docstring).

    Args:
        subspace: where the app's structures are (one per queue name, in
            ``subspace[name]``): any ``fdb.Subspace`` (a directory too), or a tuple,
            the prefix of one (``("myapp",)``: needs no ``fdb.api_version`` yet).
        codec: how arguments and results become bytes (default :class:`JSON`;
            :class:`MsgPack`, :class:`Encrypted`...).
        history: seconds a finished job's record (its state, error, result) is kept
            (default a week); None: no records, and no handle can read a result.
        max_deliveries: runs after which a failing job is a dead letter (default 5;
            a task's ``retries`` may make it fewer); None: retried forever.
        shards: the structures' ``shards`` (see docs/scaling.md).

    Making an App reads and writes nothing.

    Raises:
        TypeError or ValueError: a bad argument (named).
    """

    def __init__(self, subspace: Any, *, codec: Optional[Codec] = None,
                 history: Optional[float] = 7 * 24 * 3600.0, max_deliveries: Optional[int] = 5,
                 shards: int = 1) -> None:
        self.subspace = check_subspace(Subspace(subspace) if type(subspace) is tuple
                                       else subspace)
        if codec is not None and not isinstance(codec, Codec):
            raise TypeError(f"codec must be a Codec, not {type(codec).__name__}")
        self.codec: Codec = codec if codec is not None else JSON()
        self.history = None if history is None else check_seconds(history, "history")
        self.max_deliveries = None if max_deliveries is None else \
            check_int(max_deliveries, "max_deliveries", low=1)
        self.shards = check_int(shards, "shards", low=1, high=64)
        self.tasks: Dict[str, Task[Any, Any]] = {}
        self.kinds: Dict[str, str] = {}
        self.structures: Dict[str, Structure] = {}
        self.harness = Harness(self)

    def __repr__(self) -> str:
        return f"App({self.subspace!r}, tasks={sorted(self.tasks)})"

    # -- tasks ---------------------------------------------------------------------------

    @overload
    def task(self, function: Callable[P, Coroutine[Any, Any, R]]) -> Task[P, R]: ...

    @overload
    def task(self, function: Callable[P, R]) -> Task[P, R]: ...

    @overload
    def task(self, *, name: Optional[str] = None, queue: str = "default",
             priority: Optional[int] = None, group: Optional[str] = None,
             time_limit: Optional[float] = None, retries: Optional[int] = None,
             backoff: Optional[Backoff] = None,
             limits: Union[LimitUse, List[LimitUse], None] = None) -> TaskDecorator: ...

    def task(self, function: Optional[Callable[..., Any]] = None, *,
             name: Optional[str] = None, queue: str = "default",
             priority: Optional[int] = None, group: Optional[str] = None,
             time_limit: Optional[float] = None, retries: Optional[int] = None,
             backoff: Optional[Backoff] = None,
             limits: Union[LimitUse, List[LimitUse], None] = None) -> Any:
        """Make ``function`` (sync or ``async def``) a task: ``@app.task`` or
        ``@app.task(queue="emails", retries=3)``.

        Args:
            name: the name stored with each item (default ``module.qualname``): keep
                it stable while items of the task may wait.
            queue: the name of the structure its items go to.
            priority: its items' priority in a PriorityQueue (lower runs first;
                ``configure(priority=...)`` sets one push's): the queue is a
                PriorityQueue.
            group: the parameter whose value (a str) is a call's FairQueue group: the
                queue is a FairQueue.
            time_limit: seconds a run may take (a job's own time limit, kept in its
                record: needs the app's ``history``).
            retries: failed runs are retried at most this many times (then it is a
                dead letter; the app's ``max_deliveries`` still bounds them).
            backoff: the delays between its retries (default: the worker's).
            limits: limits its calls carry, shared by name with every structure
                using them (see docs/flow-control.md): a
                :meth:`fdbrecipes.Limits.use`, or a list of them (all of one
                store), whose ``key`` and ``cost`` are functions of the call's
                arguments (called as the task's function is: ``key(*args,
                **kwargs)``), computed when a call is deferred.  A FairQueue's
                task's calls are subject to them beside their group's own limit and
                rate.

        Makes the queue's structure object if it is new, or again with the limits
        of its tasks (writes nothing).

        Raises:
            TypeError or ValueError: a bad option, a name already taken, a queue
                already of another kind, or a parameter whose annotation is not a
                type a task keeps (see docs/tasks.md).
        """
        def decorate(f: Callable[..., Any]) -> Task[Any, Any]:
            return self.register(f, name=name, queue=queue, priority=priority, group=group,
                                 time_limit=time_limit, retries=retries, backoff=backoff,
                                 limits=limits)
        return decorate if function is None else decorate(function)

    def register(self, function: Callable[..., Any], *, name: Optional[str], queue: str,
                 priority: Optional[int], group: Optional[str], time_limit: Optional[float],
                 retries: Optional[int], backoff: Optional[Backoff],
                 limits: Any = None) -> Task[Any, Any]:
        """:meth:`task`'s work: check the options, make the task, list it."""
        if not callable(function):
            raise TypeError(f"a task must be a function, not {type(function).__name__}")
        name = name if name is not None else \
            f"{function.__module__}.{getattr(function, '__qualname__', function.__name__)}"
        if type(name) is not str or not 0 < len(name) <= 200:
            raise TypeError(f"name must be a str of 1 to 200 characters, not {name!r}")
        if name in self.tasks:
            raise ValueError(f"a task named {name!r} exists already in this app")
        if type(queue) is not str or not queue:
            raise TypeError(f"queue must be a non-empty str, not {queue!r}")
        if priority is not None:
            check_int(priority, "priority", low=-(2**63), high=2**63 - 1)
        if group is not None and type(group) is not str:
            raise TypeError(f"group must be a parameter's name, not {group!r}")
        if priority is not None and group is not None:
            raise TypeError("a task takes priority or group, not both")
        if time_limit is not None:
            check_seconds(time_limit, "time_limit")
            if self.history is None:
                raise ValueError("time_limit needs the app's history (job records)")
        if retries is not None:
            check_int(retries, "retries", low=0)
        if backoff is not None and not isinstance(backoff, Backoff):
            raise TypeError(f"backoff must be a Backoff, not {type(backoff).__name__}")
        uses = check_task_limits(limits, name)
        kind = FAIR_QUEUE if group is not None else \
            PRIORITY_QUEUE if priority is not None else None
        known = self.kinds.get(queue)
        if known is not None and kind is not None and kind != known:
            raise ValueError(f"queue {queue!r} is a {known} already (its tasks' options "
                             f"say so), not a {kind}")
        if known == FAIR_QUEUE and group is None:
            raise ValueError(f"queue {queue!r} is a fair-queue: the task needs group=")
        made: Task[Any, Any] = Task(
            self, function, name=name, queue=queue, priority=priority, group=group,
            time_limit=time_limit, retries=retries, backoff=backoff,
            asynchronous=inspect.iscoroutinefunction(function), limits=uses)
        if uses:
            try:
                structure_uses(use for task in [*self.queue_tasks(queue), made]
                               for use in task.limits)
            except ValueError as e:
                raise ValueError(f"task {name}: {e} (the limits of queue {queue!r}'s "
                                 "tasks)") from None
        self.tasks[name] = made
        if known is None or uses:
            self.open(queue, kind or known or QUEUE)
        return made

    # -- the structures ------------------------------------------------------------------

    def open(self, queue: str, kind: str) -> Structure:
        """Make the structure object of ``queue``, with the limits its tasks carry
        (writes nothing)."""
        where = self.subspace[queue]
        options: Dict[str, Any] = dict(max_deliveries=self.max_deliveries,
                                       history=self.history)
        structure: Structure
        uses = structure_uses(use for task in self.queue_tasks(queue)
                              for use in task.limits) or None
        if kind == FAIR_QUEUE:
            structure = FairQueue(where, limits=uses, **options)
        else:
            if kind == PRIORITY_QUEUE:
                structure = PriorityQueue(where, shards=self.shards, limits=uses, **options)
            else:
                structure = Queue(where, shards=self.shards, limits=uses, **options)
        structure.ops.node_results = self.node_result
        self.kinds[queue] = kind
        self.structures[queue] = structure
        return structure

    def queue_tasks(self, queue: str) -> List[Task[Any, Any]]:
        """The tasks whose calls go to ``queue``, in the order they were made."""
        return [task for task in self.tasks.values() if task.queue == queue]

    def structure(self, queue: str) -> Structure:
        """The structure of ``queue`` (a Queue, PriorityQueue or FairQueue object).

        Raises:
            KeyError: no task of the app uses that queue.
        """
        return self.structures[queue]

    def kind_of(self, queue: str) -> str:
        """The kind of ``queue``'s structure: "queue", "priority-queue", "fair-queue"."""
        return self.kinds[queue]

    def served(self, queues: Optional[List[str]] = None) -> List[Any]:
        """The structures a worker of the app serves: every queue's, or those named.

        Raises:
            ValueError: the app has no task, or a name is not one of its queues.
        """
        if not self.structures:
            raise ValueError("the app has no task")
        names = sorted(self.structures) if queues is None else list(queues)
        for name in names:
            if name not in self.structures:
                raise ValueError(f"the app has no queue {name!r} (it has "
                                 f"{', '.join(sorted(self.structures))})")
        return [self.structures[name] for name in names]

    def handler(self, asynchronous: bool) -> Callable[[Job], Any]:
        """The handler a worker calls with each job: runs its task (an ``async def``
        function for an :class:`fdbrecipes.aio.AsyncWorker`)."""
        runner = Runner(self)
        return runner.run_async if asynchronous else runner.run

    def judge(self, job: Job, error: BaseException) -> BaseException:
        """What a failure a run did not raise itself (its time limit reached) is for
        ``job``: a task's ``retries`` and ``backoff`` count it as they count what a run
        raises."""
        return Runner(self).judge(job, error)

    @property
    def asynchronous(self) -> bool:
        """Whether every task is an ``async def`` function (``fdbrecipes worker`` then
        runs an AsyncWorker)."""
        return bool(self.tasks) and all(t.asynchronous for t in self.tasks.values())

    # -- calls -------------------------------------------------------------------------

    def push(self, tr: Any, task: Task[Any, Any], push: Push) -> Optional[bytes]:
        """Push one checked call of ``task`` into its structure, in ``tr``: its id (see
        :meth:`fdbrecipes.tasks.Task.defer`); under :meth:`testing`, the harness's
        (``tr`` unused).  By the structure's own ``push``, so that, given a Database,
        the calls of this process's threads into a Queue or PriorityQueue share
        transactions as that ``push`` does."""
        if self.testing_mode is not None:
            return self.harness.deferred(task, push)
        structure: Any = self.structure(task.queue)
        return structure.push(tr, push.value, id=push.id,  # type: ignore[no-any-return]
                              delay=push.delay, **push.where)

    async def push_async(self, tr: Any, task: Task[Any, Any], push: Push) -> Optional[bytes]:
        """:meth:`push`, awaited (an ``async def`` task inline under :meth:`testing`
        awaited on the caller's loop)."""
        if self.testing_mode is not None:
            return await self.harness.deferred_async(task, push)
        ops = self.structure(task.queue).ops
        return await awaiting.drive(ops.push_job(tr, push.value, id=push.id,
                                                 delay=push.delay, **push.where))

    # -- job records ---------------------------------------------------------------------

    def record(self, tr: Any, task: Task[Any, Any], id_: bytes,
               group: Optional[Any]) -> Gen[Optional[JobRecord]]:
        """The record of a call of ``task`` (see :meth:`fdbrecipes.Queue.job`)."""
        if self.testing_mode is not None or self.harness.knows(id_):
            return self.harness.record(id_)
        ops: Any = self.structure(task.queue).ops
        if group is not None:
            return ops.job(tr, group, id_)  # type: ignore[no-any-return]
        return ops.job(tr, id_)  # type: ignore[no-any-return]

    def outcome(self, db: Any, task: Task[Any, Any], id_: bytes, group: Optional[Any],
                timeout: Optional[float]) -> Gen[Any]:
        """Wait for the call's end: its result's bytes (see
        :meth:`fdbrecipes.Queue.result`)."""
        if self.testing_mode is not None or self.harness.knows(id_):
            return self.harness.outcome(id_)
        ops: Any = self.structure(task.queue).ops
        if group is not None:
            return ops.result(db, group, id_, timeout)  # type: ignore[no-any-return]
        return ops.result(db, id_, timeout)  # type: ignore[no-any-return]

    def node_result(self, result: Any, value: Any) -> Any:
        """A workflow node's ``result`` as a workflow store gives it back (see
        ``Workflows.inputs``): for the call of a task of the app (its item's
        ``value``), what the function returned, decoded as :meth:`decode_result`
        does; anything else as it is."""
        if type(result) is not bytes:
            return result
        try:
            task = self.tasks.get(open_envelope(value).name)
        except ValueError:
            return result
        return result if task is None else self.decode_result(task, result)

    def decode_result(self, task: Task[Any, Any], raw: Any) -> Any:
        """A result as the function returned it, from its stored bytes."""
        if raw is None:
            return task.arguments.load_result(None)
        return task.arguments.load_result(self.codec.decode(raw))

    # -- tests -------------------------------------------------------------------------

    def testing(self, mode: Optional[str]) -> Testing:
        """Run tasks without FoundationDB (see :mod:`.testing`): ``"inline"`` runs a
        task at ``defer``, in the caller; ``"manual"`` keeps each deferred call for
        the test to look at (``app.deferred``) and run (:meth:`drain`); None: back to
        the cluster.  Set at once; as a context manager, undone when the block ends.

        Raises:
            ValueError: another mode.
        """
        if mode not in ("inline", "manual", None):
            raise ValueError(f"mode must be 'inline', 'manual' or None, got {mode!r}")
        return Testing(self.harness, mode)

    @property
    def testing_mode(self) -> Optional[str]:
        """The mode :meth:`testing` set (``"inline"``, ``"manual"``), or None."""
        return self.harness.mode

    @property
    def deferred(self) -> List[Ran]:
        """Under ``testing("manual")``: the calls deferred and not run yet, oldest
        first."""
        return self.harness.waiting()

    def drain(self) -> List[Ran]:
        """Under ``testing("manual")``: run every call deferred (and the calls those
        defer, and so on) in the caller, oldest first; what each did."""
        return self.harness.drain()

    async def drain_async(self) -> List[Ran]:
        """:meth:`drain`, ``async def`` tasks awaited on the caller's loop."""
        return await self.harness.drain_async()
