"""A worker's jobs, one by one: the handler's call, what it ended with, and the job as
the worker holds it (:class:`Running`).  Used by :mod:`.core`."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import traceback
from typing import Any, Callable, Optional, Tuple

from .._codec import Undecodable
from .._ordered.leases import Lease
from .._records.history import Finished, Then, encode_result
from .._records.records import CANCELLED, SUCCEEDED, JobError
from .._workflow.steps import is_expander, node_store, step_of
from ..jobs import Decision, Discard, EventSink, Job
from ..protocol import Workable
from .threads import Completions, HandlerThreads

__all__ = ["IDLE_WAIT", "Running", "ack_of", "call_handler", "check_handler", "emit",
           "idle_seconds", "job_error", "named", "outcome_of"]

log = logging.getLogger("fdbrecipes.worker")

#: Seconds an idle worker waits on its watch before it looks at its schedules and its
#: stop flag again (a wait, not a poll: a push wakes it at once).
IDLE_WAIT = 1.0


def check_handler(handler: Any, asynchronous: bool) -> None:
    """Refuse a handler that is not callable, or of the other kind.

    Raises:
        TypeError: naming the worker to use instead.
    """
    if not callable(handler):
        raise TypeError("handler must be callable")
    if inspect.iscoroutinefunction(handler) != asynchronous:
        raise TypeError("an async def handler needs aio.AsyncWorker" if not asynchronous
                        else "AsyncWorker needs an async def handler; use Worker")


def idle_seconds(next_push: float) -> float:
    """How long an idle worker waits on the watch: until its schedules push next,
    at most :data:`IDLE_WAIT` (then it looks again)."""
    return max(0.0, min(IDLE_WAIT, next_push - time.time()))


def emit(on_event: Optional[EventSink], event: Any) -> None:
    """Hand ``event`` to a worker's ``on_event``, if any; what it raises is logged and
    ignored (a broken sink must not stop the worker)."""
    if on_event is None:
        return
    try:
        on_event(event)
    except Exception:
        log.exception("on_event raised; ignored")


def outcome_of(handler: Callable[[Job], Any], job: Job) -> Tuple[Any, Optional[BaseException]]:
    """Run a sync handler (in a handler thread): what it returned, or what it raised."""
    try:
        return handler(job), None
    except BaseException as e:  # the job's outcome, whatever it was
        return None, e


def job_error(error: BaseException) -> JobError:
    """The record of what a job failed with, its traceback included; raises nothing,
    whatever the exception (see :meth:`fdbrecipes.JobError.of`; a traceback that
    cannot be formatted is left out)."""
    try:
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    except Exception:
        text = ""
    return JobError.of(error, text)


def named(job: Job) -> str:
    """How the log names a job: its id, or its value."""
    return repr(job.id) if job.id is not None else f"with value {job.value!r:.60}"


class Running:
    """A job the worker holds: its lease (renewed by the heartbeat), whether its
    handler began and returned, whether the lease was lost or given back meanwhile,
    the task running it (None while it waits for a slot), its time limit's timer and,
    once it succeeded, what its ack carries."""

    __slots__ = ("began_at", "finished", "future", "given_back", "handled", "job",
                 "lease", "lost", "slot", "started", "task", "timer")

    def __init__(self, job: Job) -> None:
        self.job = job
        self.lease: Lease[Any] = job.lease
        self.started = 0.0  # time.monotonic() when its handler began; 0: not yet
        self.began_at = 0.0  # time.time() then
        self.handled = False
        self.slot = False  # it holds one of the worker's slots
        self.lost = False
        self.given_back = False
        self.task: Optional[asyncio.Task[None]] = None
        self.future: Optional[Any] = None  # a sync handler's thread future
        self.timer: Optional[asyncio.TimerHandle] = None
        self.finished: Optional[Finished] = None

    def seconds(self) -> float:
        """How long its handler has run (0 if it did not start)."""
        return time.monotonic() - self.started if self.started else 0.0

    def size(self) -> int:
        """About how many bytes its ack writes."""
        result = self.finished.result if self.finished is not None else None
        return 200 + (len(result) if result is not None else 0)


async def call_handler(running: Running, handler: Callable[[Job], Any],
                       threads: Optional[HandlerThreads],
                       completions: Optional[Completions]) -> Tuple[Any, Optional[BaseException]]:
    """Run ``handler`` on ``running``'s job, in one of ``threads`` for a sync handler
    (unless the job was stopped, or its lease lost, before it began; a value the
    structure's codec could not decode is discarded; a workflow's expander is not
    handed to the handler, see :mod:`.._workflow.steps`): what it returned, or what
    it raised."""
    if running.job.stopped is not None:
        return None, running.job.stopped
    if is_expander(running.job.id):  # a workflow's: its ack pushes its nodes
        return None, None
    if isinstance(running.job.value, Undecodable):  # the structure's codec failed
        return None, Discard(f"undecodable: {running.job.value.reason}"[:1_000])
    if running.lost:  # while it waited for a slot: it may be with another worker
        return None, None
    if threads is not None:
        assert completions is not None
        running.future = threads.submit(outcome_of, handler, running.job)
        found: Tuple[Any, Optional[BaseException]] = await completions.wrap(running.future)
        return found
    try:
        return await handler(running.job), None
    except Exception as e:  # the job's outcome
        return None, e


def ack_of(running: Running, decision: Decision, result: Any, ops: Workable[Any]) -> Finished:
    """What the ack of a job that succeeded (or stopped on a cancel) carries: its
    result (kept, in the codec of ``ops``' values, by a structure with job records),
    progress and follow-ups, and, for a workflow's node, the workflow's step (see
    :mod:`.._workflow.steps`).

    Raises:
        LookupError: the job is a node of a workflow store this process does not know.
    """
    progress, asked = running.job.reported()
    followups: Tuple[Then, ...] = asked
    node = node_store(ops, running.job.id)
    if decision.action == "cancel":
        step = step_of(ops, running.job.id, CANCELLED, None)
        return Finished(running.lease, followups=() if step is None else (step,),
                        progress=progress, state=CANCELLED)
    codec = getattr(getattr(ops, "values", None), "codec", None)
    encoded, error = (None, None) if ops.history is None and node is None else \
        encode_result(result, codec)
    if error is not None:
        log.warning("job %s succeeded, but its result is not kept: %r", named(running.job),
                    error[1])
    step = step_of(ops, running.job.id, SUCCEEDED, encoded)
    if step is not None:
        followups = (*followups, step)
    return Finished(running.lease, encoded if ops.history is not None else None, followups,
                    progress, error, SUCCEEDED)
