"""A task: a function made deferrable by ``@app.task``, and the handle of one call.

``send_email.defer(tr, to="a@b", subject="hi")`` checks the arguments against the
function's signature and annotations (:mod:`.arguments`), encodes them with the app's
codec (:mod:`.codecs`), and pushes one item (:mod:`.envelope`) into the task's
structure, in ``tr``: a Transaction (the push joins it; the caller commits) or a
Database (the structure's own retry loop).  ``configure(id=..., delay=...,
priority=..., group=...)`` gives one call's push options; ``then(...)``, called while
a task runs, pushes a follow-up with the running job's ack (see
:meth:`fdbrecipes.Job.then`).  Each returns a :class:`TaskHandle`, typed with the
function's return type.  ``Task`` is typed with ``ParamSpec``: ``mypy --strict`` checks
the arguments of ``defer`` and ``then`` against the function's parameters.

A task knows its app as a :class:`Host`: what a task, the runner of its jobs
(:mod:`.running`) and the test harness (:mod:`.testing`) ask of the app that made it.
:class:`fdbrecipes.tasks.App` is one; this module, below ``app.py``, never names it.
"""

from __future__ import annotations

import contextvars
import sys
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Generic,
    NamedTuple,
    Optional,
    Protocol,
    Tuple,
    TypeVar,
    cast,
)

from .._drivers import awaiting, blocking
from .._fdb import Gen
from .._values import check_delay, check_id
from ..jobs import Backoff, Job
from ..limits import LimitUse
from ..types import JobRecord
from ..workflow import NodeJob
from .arguments import Arguments
from .codecs import Codec
from .envelope import seal
from .limiting import carry
from .tracing import sending

if TYPE_CHECKING or sys.version_info >= (3, 10):
    from typing import ParamSpec
else:  # Python 3.9: annotations are strings; a TypeVar stands in at run time
    ParamSpec = TypeVar

__all__ = ["Configured", "Host", "Options", "Task", "TaskCall", "TaskHandle", "current_job"]

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

#: The job whose task runs in this context (set by the worker around the function).
_current: contextvars.ContextVar[Optional[Job]] = contextvars.ContextVar(
    "fdbrecipes_task_job", default=None)


def current_job() -> Optional[Job]:
    """The :class:`fdbrecipes.Job` of the task running in this thread or asyncio task
    (its id, deliveries, progress, ``check()``), or None outside a task's run."""
    return _current.get()


class Options(NamedTuple):
    """One push's options: an idempotency ``id`` (a push with an id already pushed
    stores nothing), a ``delay`` in seconds, a PriorityQueue's ``priority``, a
    FairQueue's ``group`` (instead of the task's group argument)."""

    id: Optional[bytes] = None
    delay: Optional[float] = None
    priority: Optional[int] = None
    group: Optional[str] = None


class Push(NamedTuple):
    """A checked push of one call of a task: the item's value, its id (given; else
    made by the structure, or by ``then``), its delay, where it goes, and its
    arguments as plain data."""

    value: Tuple[Any, ...]
    id: Optional[bytes]
    delay: Optional[float]
    where: Dict[str, Any]
    plain: Dict[str, Any]


class Host(Protocol):
    """What a task, the runner of its jobs and the test harness ask of the app that
    made it (:class:`fdbrecipes.tasks.App` is one)."""

    @property
    def tasks(self) -> Dict[str, Task[Any, Any]]:
        """The app's tasks by name."""

    @property
    def codec(self) -> Codec:
        """How arguments and results become bytes."""

    @property
    def testing_mode(self) -> Optional[str]:
        """``"inline"`` or ``"manual"`` under ``app.testing(...)``; else None."""

    def kind_of(self, queue: str) -> str:
        """The kind of ``queue``'s structure."""

    def structure(self, queue: str) -> Any:
        """The structure of ``queue``."""

    def push(self, tr: Any, task: Task[Any, Any], push: Push) -> Optional[bytes]:
        """Push one checked call of ``task`` in ``tr``; its id."""

    async def push_async(self, tr: Any, task: Task[Any, Any],
                         push: Push) -> Optional[bytes]:
        """:meth:`push`, awaited."""

    def record(self, tr: Any, task: Task[Any, Any], id_: bytes,
               group: Optional[Any]) -> Gen[Optional[JobRecord]]:
        """The record of a call of ``task``."""

    def outcome(self, db: Any, task: Task[Any, Any], id_: bytes, group: Optional[Any],
                timeout: Optional[float]) -> Gen[Any]:
        """Wait for a call's end: its result's bytes."""

    def decode_result(self, task: Task[Any, Any], raw: Any) -> Any:
        """A result as the function returned it, from its stored bytes."""


class Task(Generic[P, R]):
    """A function made into a task by ``@app.task`` (see :meth:`fdbrecipes.tasks.App.task`
    for the options).

    Attributes:
        name: the task's name, stored with each item (stable: ``module.function`` by
            default).
        function: the function itself (calling the task calls it).
        queue: the name of the structure its items go to (see ``App``).
        priority: a PriorityQueue's priority of its items (lower runs first).
        group: the parameter whose value is the FairQueue group of a call.
        time_limit: seconds a run may take (None: the worker's).
        retries: failed runs retried at most this many times (None: as the
            structure's ``max_deliveries`` says).
        backoff: the delays between retries (None: the worker's).
        limits: the limits its calls carry (see ``App.task``).
    """

    def __init__(self, app: Host, function: Callable[P, Any], *, name: str, queue: str,
                 priority: Optional[int], group: Optional[str], time_limit: Optional[float],
                 retries: Optional[int], backoff: Optional[Backoff],
                 asynchronous: bool, limits: Tuple[LimitUse, ...] = ()) -> None:
        self.app = app
        self.limits = limits
        self.function = function
        self.name = name
        self.queue = queue
        self.priority = priority
        self.group = group
        self.time_limit = time_limit
        self.retries = retries
        self.backoff = backoff
        self.asynchronous = asynchronous
        self.arguments = Arguments(function, f"task {name}")
        if group is not None and group not in self.arguments.params:
            raise ValueError(f"task {name}: group={group!r} names no parameter")

    def __repr__(self) -> str:
        return f"Task({self.name!r})"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Call the function itself, here (a coroutine, for an ``async def`` one)."""
        return self.function(*args, **kwargs)

    def configure(self, *, id: Optional[bytes] = None, delay: Optional[float] = None,
                  priority: Optional[int] = None, group: Optional[str] = None
                  ) -> Configured[P, R]:
        """This task with one push's options (see :class:`fdbrecipes.tasks.Options`), for
        :meth:`Configured.defer`, :meth:`Configured.defer_async` or
        :meth:`Configured.then`.

        Raises:
            TypeError or ValueError: a bad option (named).
        """
        check_id(id)
        check_delay(delay)
        return Configured(self, Options(id, delay, priority, group))

    def defer(self, tr: Any, /, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """Push a call of the task with these arguments into its structure, in ``tr``
        (a Transaction joins; a Database runs its own retry loop); its handle.

        The arguments are checked against the function's signature and annotations,
        and encoded by the app's codec, before anything is written.  Reads and writes
        what the structure's ``push`` does (with an id: its id key too; with the
        structure's ``history``, the job's record) and conflicts with nothing but a
        push of the same id.  Cost: 1 round trip given a Database, none of its own in
        a Transaction.  Given a Database, on a Queue or PriorityQueue, the calls the
        threads of this process defer while one is in flight share the next
        transaction, each with its own id and error (as :meth:`fdbrecipes.Queue.push`
        says).  Under ``app.testing(...)`` nothing is written (see :mod:`.testing`).

        Raises:
            TypeError or ValueError: an argument is missing, unknown, or of the wrong
                type (the message names it), or cannot be encoded.
        """
        return self.push(tr, Options(), args, kwargs)

    async def defer_async(self, tr: Any, /, *args: P.args, **kwargs: P.kwargs
                          ) -> TaskHandle[R]:
        """:meth:`defer`, awaited without blocking the event loop."""
        return await self.push_async(tr, Options(), args, kwargs)

    def then(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """Push a call of the task with the ack of the job running now, in the ack's
        transaction (see :meth:`fdbrecipes.Job.then`): pushed exactly once if that job
        succeeds, never if it fails.  Called from a task's run.

        Raises:
            RuntimeError: no task runs in this context.
            TypeError or ValueError: as :meth:`defer`.
        """
        return self.follow(Options(), args, kwargs)

    def s(self, *args: P.args, **kwargs: P.kwargs) -> TaskCall[R]:
        """A call of the task with these arguments, to be a node of a workflow
        (``flow.add(my_task.s(1, 2), deps=[...])``; a batch's callback): checked and
        encoded as :meth:`defer` does, pushed by the workflow into the task's
        structure (which the workflow store must be made with: ``app.served()``).
        Writes nothing; no round trip.

        Raises:
            TypeError or ValueError: as :meth:`defer`.
        """
        return call_of(self, self.prepare(Options(), args, kwargs))

    def item(self, *args: P.args, **kwargs: P.kwargs) -> Tuple[Any, ...]:
        """The value of an item of a call of the task with these arguments, checked
        and encoded as :meth:`defer` does, for a stored schedule to push
        (``Schedules.add(db, name, target=app.structure(task.queue), value=...)``).
        Writes nothing; no round trip.

        Raises:
            TypeError or ValueError: as :meth:`defer`.
        """
        return self.prepare(Options(), args, kwargs).value

    # -- what the calls share -----------------------------------------------------------

    def prepare(self, options: Options, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                trace: Any = None) -> Push:
        """The checked push of one call (arguments checked and encoded, the id made
        when the structure keeps job records), writing nothing."""
        plain = self.arguments.dump(args, kwargs)
        try:
            payload = self.app.codec.encode(plain)
        except (TypeError, ValueError) as e:
            raise type(e)(f"task {self.name}: the arguments cannot be encoded: {e}") from None
        where: Dict[str, Any] = {}
        kind = self.app.kind_of(self.queue)
        if options.priority is not None and kind != "priority-queue":
            raise TypeError(f"task {self.name}: its {kind} takes no priority")
        if options.group is not None and kind != "fair-queue":
            raise TypeError(f"task {self.name}: its {kind} takes no group")
        if kind == "priority-queue":
            where["priority"] = (options.priority if options.priority is not None
                                 else self.priority or 0)
        elif kind == "fair-queue":
            if options.group is not None:
                where["group"] = options.group
            elif self.group is not None and self.group in plain:
                where["group"] = plain[self.group]
            else:
                raise TypeError(f"task {self.name}: a FairQueue's task needs its group "
                                "(the group= option of the task, or of configure)")
        if self.time_limit is not None:
            where["time_limit"] = self.time_limit
        return Push(seal(self.name, payload, trace, carry(self.name, self.limits, args, kwargs)),
                    options.id, options.delay, where, plain)

    def push(self, tr: Any, options: Options, args: Tuple[Any, ...],
             kwargs: Dict[str, Any]) -> TaskHandle[R]:
        """:meth:`defer` with ``options``."""
        with sending(self.name) as trace:
            push = self.prepare(options, args, kwargs, trace)
            id_ = self.app.push(tr, self, push)
        return TaskHandle(self, id_, push.where.get("group"))

    async def push_async(self, tr: Any, options: Options, args: Tuple[Any, ...],
                         kwargs: Dict[str, Any]) -> TaskHandle[R]:
        """:meth:`defer_async` with ``options``."""
        with sending(self.name) as trace:
            push = self.prepare(options, args, kwargs, trace)
            id_ = await self.app.push_async(tr, self, push)
        return TaskHandle(self, id_, push.where.get("group"))

    def follow(self, options: Options, args: Tuple[Any, ...],
               kwargs: Dict[str, Any]) -> TaskHandle[R]:
        """:meth:`then` with ``options``."""
        job = current_job()
        if job is None and self.app.testing_mode is None:
            raise RuntimeError(f"task {self.name}: then() pushes a follow-up of the job "
                               "running now, and none runs here (use defer)")
        with sending(self.name) as trace:
            push = self.prepare(options, args, kwargs, trace)
            if job is None:  # under app.testing(...): the harness keeps it
                id_ = self.app.push(None, self, push)
            else:
                id_ = job.then(self.app.structure(self.queue), push.value, id=push.id,
                               delay=push.delay, **push.where)
        return TaskHandle(self, id_, push.where.get("group"))


class TaskCall(Generic[R_co]):
    """A call of a task as a workflow's node (made by :meth:`Task.s`): its job is
    an item of the task's structure, and what the function returns is the node's
    result (its dependents' ``inputs`` and the workflow's ``result`` give it back
    decoded, as :meth:`TaskHandle.result` does, in a process whose app has the task).

    Attributes:
        task: the task.
    """

    def __init__(self, task: Task[Any, Any], job: NodeJob) -> None:
        self.task = task
        self._job = job

    def __repr__(self) -> str:
        return f"TaskCall({self.task.name!r})"

    def node_job(self) -> NodeJob:
        """The node's job: the task's structure, the item's value, its delay, time
        limit and where it goes (writes nothing)."""
        return self._job


def call_of(task: Task[Any, Any], push: Push) -> TaskCall[Any]:
    """The call of ``task`` whose checked push is ``push``, as a workflow's node."""
    where = dict(push.where)
    time_limit = where.pop("time_limit", None)
    return TaskCall(task, NodeJob(task.app.structure(task.queue), push.value, push.delay,
                                  time_limit, where))


class Configured(Generic[P, R]):
    """A task with one push's options (made by :meth:`Task.configure`)."""

    def __init__(self, task: Task[P, R], options: Options) -> None:
        self.task = task
        self.options = options

    def __repr__(self) -> str:
        return f"Configured({self.task.name!r}, {self.options})"

    def defer(self, tr: Any, /, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """:meth:`Task.defer` with these options."""
        return self.task.push(tr, self.options, args, kwargs)

    async def defer_async(self, tr: Any, /, *args: P.args, **kwargs: P.kwargs
                          ) -> TaskHandle[R]:
        """:meth:`Task.defer_async` with these options."""
        return await self.task.push_async(tr, self.options, args, kwargs)

    def then(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """:meth:`Task.then` with these options."""
        return self.task.follow(self.options, args, kwargs)

    def s(self, *args: P.args, **kwargs: P.kwargs) -> TaskCall[R]:
        """:meth:`Task.s` with these options (but ``id``: a node's job id is the
        workflow's).

        Raises:
            TypeError or ValueError: as :meth:`Task.defer`; an ``id``.
        """
        if self.options.id is not None:
            raise TypeError(f"task {self.task.name}: a workflow's node has its own id "
                            "(configure it without id=)")
        return call_of(self.task, self.task.prepare(self.options, args, kwargs))


class TaskHandle(Generic[R_co]):
    """One deferred call of a task: its ``id`` (None when its structure keeps no job
    records and no id was given), ``task`` and, in a FairQueue, ``group``; its state
    and result are read from the job's record (the structure's ``history``).

    Under ``app.testing(...)`` a handle reads what the test harness did instead.
    """

    def __init__(self, task: Task[Any, Any], id: Optional[bytes],
                 group: Optional[Any] = None) -> None:
        self.task = task
        self.id = id
        self.group = group

    def __repr__(self) -> str:
        return f"TaskHandle({self.task.name!r}, id={self.id!r})"

    def _job_id(self) -> bytes:
        if self.id is None:
            raise ValueError(f"task {self.task.name}: this call has no id (its structure "
                             "keeps no job records: give the App history=)")
        return self.id

    def status(self, tr: Any) -> Optional[str]:
        """The job's state (``pending``, ``delayed``, ``running``, ``retrying``,
        ``succeeded``, ``dead``, ``cancelled``; see ``Queue.job``), or None if no
        record has its id.  Reads its record (one range read, 1 round trip; with
        read conflicts in a Transaction)."""
        app = self.task.app
        record = blocking.drive(app.record(tr, self.task, self._job_id(), self.group))
        return None if record is None else record.state

    async def status_async(self, tr: Any) -> Optional[str]:
        """:meth:`status`, awaited."""
        app = self.task.app
        record = await awaiting.drive(app.record(tr, self.task, self._job_id(), self.group))
        return None if record is None else record.state

    def result(self, db: Any, timeout: Optional[float] = None) -> R_co:
        """Wait (on a watch of its record) until the job finished; what the function
        returned, decoded into its return type.

        Raises:
            JobFailedError: it is a dead letter (``.record.error`` says why).
            JobCancelledError, UnknownJobError, TimeoutError: as ``Queue.result``.
        """
        app = self.task.app
        raw = blocking.drive(app.outcome(db, self.task, self._job_id(), self.group, timeout))
        return cast(R_co, self.task.app.decode_result(self.task, raw))

    async def result_async(self, db: Any, timeout: Optional[float] = None) -> R_co:
        """:meth:`result`, awaited."""
        raw = await awaiting.drive(self.task.app.outcome(db, self.task, self._job_id(),
                                                         self.group, timeout))
        return cast(R_co, self.task.app.decode_result(self.task, raw))
