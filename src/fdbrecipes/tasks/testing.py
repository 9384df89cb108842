"""Tasks in tests, without FoundationDB: ``app.testing("inline")`` and
``app.testing("manual")``.

* ``"inline"``: ``defer`` (and ``then``) runs the task at once, in the caller (an
  ``async def`` task: on an event loop of its own for ``defer``, awaited for
  ``defer_async``); what it raises comes out of ``defer``.  The handle's ``status``
  and ``result`` say what it did.
* ``"manual"``: ``defer`` keeps the call (``app.deferred`` lists the waiting ones);
  ``app.drain()`` (``await app.drain_async()``) runs them, oldest first, and the calls
  they defer in turn, until none is left, and says what each did (:class:`Ran`).  A
  run that raises is recorded as ``dead`` with its error; ``drain`` goes on.

Both check each call's arguments against the function, and pass them (and the
result) through the app's codec and back, exactly as a worker would, so what cannot
be stored or decoded fails here too.  What they do **not** exercise: transactions
(``tr`` is not used: pass None), leases, retries, delays (a delayed call runs at
once), time limits, priorities and groups, concurrency, ``current_job()`` (None) and
the structures' own limits.  Test those against a server (the pytest plugin's
``fdb_database`` fixture).  No module here loads ``libfdb_c``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .._fdb import Gen
from .._records.history import new_id
from ..errors import JobFailedError, UnknownJobError
from ..types import JobError, JobRecord
from .running import Runner
from .task import Host, Push, Task

__all__ = ["Harness", "Ran", "Testing"]


@dataclass
class Ran:
    """One call of a task under ``app.testing(...)``: its task and id, its
    arguments as stored (plain data), its state (``pending``, ``succeeded`` or
    ``dead``), its result (as the function returned it, through the codec) or the
    exception it raised."""

    task: Task[Any, Any]
    id: bytes
    arguments: Dict[str, Any]
    state: str = "pending"
    result: Any = None
    error: Optional[BaseException] = None
    value: Any = None  # the item's value, as a worker would claim it

    def record(self) -> JobRecord:
        """Its state as a job record (most fields empty)."""
        error = None if self.error is None else JobError.of(self.error)
        return JobRecord(self.id, self.state, 0 if self.state == "pending" else 1, None,
                         None, None, None, error, None, None, None, False)


class Testing:
    """The mode of ``app.testing(mode)``: set when made, the previous one back when a
    ``with`` block of it ends."""

    def __init__(self, harness: Harness, mode: Optional[str]) -> None:
        self.harness = harness
        self.previous = harness.mode
        harness.mode = mode

    def __enter__(self) -> Testing:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.harness.mode = self.previous
        if self.previous is None:
            self.harness.clear()


class Harness:
    """What an app does with its calls under ``testing(...)`` (see the module
    docstring): ``mode``, ``"inline"`` or ``"manual"`` while ``app.testing(...)``
    holds (None: the cluster)."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.mode: Optional[str] = None
        self.calls: Dict[bytes, Ran] = {}
        self.queue: List[Ran] = []

    def clear(self) -> None:
        """Forget every call."""
        self.calls.clear()
        self.queue.clear()

    def knows(self, id_: bytes) -> bool:
        """Whether ``id_`` is a call made under ``testing``."""
        return id_ in self.calls

    def made(self, task: Task[Any, Any], push: Push) -> Ran:
        """The call ``push`` stands for, kept."""
        id_ = push.id if push.id is not None else new_id()
        ran = Ran(task, id_, push.plain, value=push.value)
        self.calls[id_] = ran
        return ran

    def deferred(self, task: Task[Any, Any], push: Push) -> bytes:
        """A call deferred by ``defer`` or ``then``: run now (inline) or kept; its id."""
        ran = self.made(task, push)
        if self.mode == "inline":
            self.run(ran, raising=True)
        else:
            self.queue.append(ran)
        return ran.id

    async def deferred_async(self, task: Task[Any, Any], push: Push) -> bytes:
        """A call deferred by ``defer_async``: awaited now (inline) or kept; its id."""
        ran = self.made(task, push)
        if self.mode == "inline":
            await self.run_async(ran, raising=True)
        else:
            self.queue.append(ran)
        return ran.id

    def waiting(self) -> List[Ran]:
        """The calls kept and not run yet."""
        return list(self.queue)

    def run(self, ran: Ran, raising: bool) -> None:
        """Run one call in the caller (an ``async def`` task on a loop of its own)."""
        runner = Runner(self.app)
        call = runner.call(ran.value)
        try:
            value = call.task.function(*call.args, **call.kwargs)
            if call.task.asynchronous:
                value = asyncio.run(value)
            self.done(runner, ran, value)
        except Exception as e:
            self.failed(ran, e, raising)

    async def run_async(self, ran: Ran, raising: bool) -> None:
        """Run one call, an ``async def`` task awaited on the caller's loop."""
        runner = Runner(self.app)
        call = runner.call(ran.value)
        try:
            value = call.task.function(*call.args, **call.kwargs)
            if call.task.asynchronous:
                value = await value
            self.done(runner, ran, value)
        except Exception as e:
            self.failed(ran, e, raising)

    def done(self, runner: Runner, ran: Ran, value: Any) -> None:
        """A run returned ``value``: kept as it comes back through the codec."""
        ran.result = self.app.decode_result(ran.task, runner.result(ran.task, value))
        ran.state = "succeeded"

    def failed(self, ran: Ran, error: Exception, raising: bool) -> None:
        """A run raised ``error``."""
        ran.state, ran.error = "dead", error
        if raising:
            raise error

    def drain(self) -> List[Ran]:
        """Run the calls kept, and those they keep, until none is left."""
        out = []
        while self.queue:
            ran = self.queue.pop(0)
            self.run(ran, raising=False)
            out.append(ran)
        return out

    async def drain_async(self) -> List[Ran]:
        """:meth:`drain`, on the caller's loop."""
        out = []
        while self.queue:
            ran = self.queue.pop(0)
            await self.run_async(ran, raising=False)
            out.append(ran)
        return out

    def record(self, id_: bytes) -> Gen[Optional[JobRecord]]:
        """The record of a call (an operation that waits for nothing)."""
        yield from ()
        ran = self.calls.get(id_)
        return None if ran is None else ran.record()

    def outcome(self, id_: bytes) -> Gen[Any]:
        """The result's bytes of a finished call (an operation that waits for nothing).

        Raises:
            UnknownJobError: no such call; JobFailedError: it raised; TimeoutError: it
                has not run (manual: drain first).
        """
        yield from ()
        ran = self.calls.get(id_)
        if ran is None:
            raise UnknownJobError(id_)
        if ran.state == "pending":
            raise TimeoutError(f"task {ran.task.name}: call {id_!r} has not run (drain "
                               "first)")
        if ran.state == "dead":
            raise JobFailedError(ran.record())
        plain = ran.task.arguments.dump_result(ran.result)
        return None if plain is None else self.app.codec.encode(plain)
