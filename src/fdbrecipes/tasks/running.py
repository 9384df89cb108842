"""Running a task's job in a worker: what a Worker or AsyncWorker serving an app calls
with each job it claimed.

:class:`Runner` opens the job's item (:mod:`.envelope`), finds its task by name,
decodes its arguments with the app's codec and turns them back into the function's
types (:mod:`.arguments`), then calls the function, with the job current
(:func:`.task.current_job`: a follow-up pushed with ``then`` goes with its ack) and,
with OpenTelemetry, in a ``process`` span whose parent is the trace context the item
kept (:mod:`.tracing`).  What it returned is encoded by the codec: the job's result,
kept in its record (nothing, when it returned None).

What cannot run is a dead letter at once, its reason saying why (``Discard``): an
item that is not a task's, a task name the app does not know, arguments the codec
cannot decode (a key it does not hold: the reason names the key id) or that do not
fit the function.  A run that raises is retried as the worker retries (its backoff,
the structure's ``max_deliveries``), or as the task says: ``retries`` (then a dead
letter with the error as its reason) and ``backoff`` (:class:`fdbrecipes.jobs.Retry`);
a run the worker stopped at its time limit counts as one that raised (:meth:`Runner.judge`,
which the worker asks).
An ``async def`` task runs on an event loop of its own in a sync Worker's thread; a
sync task runs in a thread of its own under an AsyncWorker.  Runs read and write
nothing in FoundationDB themselves: the worker settles each job.
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, NamedTuple, Optional

from ..jobs import Discard, Job, JobCancelled, Retry, Snooze, TimeLimitExceeded
from .envelope import Trace, open_envelope
from .task import Host, Task, _current
from .tracing import running

__all__ = ["Call", "Runner"]

#: What a run lets through as it is: the handler's own answers to the worker (a time
#: limit is a failure like any other: the task's ``retries`` count it).
PASSED = (Snooze, Discard, JobCancelled, Retry)


class Call(NamedTuple):
    """A job's task and the arguments to call it with."""

    task: Task[Any, Any]
    args: List[Any]
    kwargs: Dict[str, Any]
    trace: Optional[Trace]


class Runner:
    """Runs the tasks of ``app`` on jobs (see the module docstring)."""

    def __init__(self, app: Host) -> None:
        self.app = app

    def call(self, value: Any) -> Call:
        """The call an item's ``value`` stands for.

        Raises:
            Discard: it cannot run (the reason says why).
        """
        try:
            envelope = open_envelope(value)
        except ValueError as e:
            raise Discard(str(e)[:1_000]) from None
        task = self.app.tasks.get(envelope.name)
        if task is None:
            raise Discard(f"unknown task {envelope.name!r}: no task of that name in this "
                          "worker's app"[:1_000])
        try:
            plain = self.app.codec.decode(envelope.payload)
            args, kwargs = task.arguments.load(plain)
        except (TypeError, ValueError) as e:
            raise Discard(f"task {task.name}: its arguments cannot be read: "
                          f"{type(e).__name__}: {e}"[:1_000]) from None
        return Call(task, args, kwargs, envelope.trace)

    def result(self, task: Task[Any, Any], value: Any) -> Optional[bytes]:
        """What the job keeps as its result: ``value``, checked against the function's
        return annotation and encoded by the codec; None (nothing kept: one key less
        in the ack) for a function that returned None."""
        plain = task.arguments.dump_result(value)
        return None if plain is None else self.app.codec.encode(plain)

    def failed(self, task: Task[Any, Any], job: Job, error: Exception) -> Exception:
        """What to raise for a run that raised ``error``: itself (the worker retries it
        as it retries any failure), or, for a task with its own ``retries`` or
        ``backoff``, a :class:`Retry` saying what follows."""
        if isinstance(error, PASSED):
            return error
        if task.retries is not None and job.deliveries > task.retries:
            return Retry(error, last=True)
        if task.backoff is not None:
            return Retry(error, task.backoff.delay(job.deliveries))
        return error

    def judge(self, job: Job, error: BaseException) -> BaseException:
        """What a failure the run did not raise itself (its time limit reached: the
        worker stopped it) is for ``job``: as :meth:`failed` says for its task."""
        if not isinstance(error, TimeLimitExceeded):
            return error
        try:
            task = self.app.tasks.get(open_envelope(job.value).name)
        except ValueError:
            return error
        return error if task is None else self.failed(task, job, error)

    def run(self, job: Job) -> Optional[bytes]:
        """Run the job's task (in a sync Worker's handler thread); its encoded result."""
        call = self.call(job.value)
        token = _current.set(job)
        try:
            with running(call.task.name, call.trace, attributes(job)):
                try:
                    if call.task.asynchronous:
                        value = asyncio.run(call.task.function(*call.args, **call.kwargs))
                    else:
                        value = call.task.function(*call.args, **call.kwargs)
                except Exception as e:
                    raise self.failed(call.task, job, e) from e.__cause__
                return self.result(call.task, value)
        finally:
            _current.reset(token)

    async def run_async(self, job: Job) -> Optional[bytes]:
        """Run the job's task (in an AsyncWorker's task); its encoded result."""
        call = self.call(job.value)
        token = _current.set(job)
        try:
            with running(call.task.name, call.trace, attributes(job)):
                try:
                    if call.task.asynchronous:
                        value = await call.task.function(*call.args, **call.kwargs)
                    else:
                        value = await asyncio.to_thread(call.task.function, *call.args,
                                                        **call.kwargs)
                except Exception as e:
                    raise self.failed(call.task, job, e) from e.__cause__
                return self.result(call.task, value)
        finally:
            _current.reset(token)


def attributes(job: Job) -> Dict[str, Any]:
    """The attributes of a run's span: the job's id and delivery."""
    out: Dict[str, Any] = {"fdbrecipes.deliveries": job.deliveries}
    if job.id is not None:
        out["messaging.message.id"] = job.id.decode("ascii", "backslashreplace")
    return out
