"""The library's exceptions."""

from __future__ import annotations

from typing import Any, List

__all__ = ["FdbRecipesError", "IncompleteBatchError", "JobCancelledError", "JobFailedError",
           "LayoutError", "LeaseExpiredError", "ResultTooLargeError", "UniqueConflictError",
           "UnknownJobError", "UnknownScheduleError", "UnknownWorkflowError",
           "UnknownWorkflowStoreError", "WorkTooLargeError", "WorkflowFailedError"]


class FdbRecipesError(Exception):
    """Base class of the library's own errors."""


class LeaseExpiredError(FdbRecipesError):
    """A lease was used after it expired, or after its item was taken back.

    Once a lease's deadline has passed, its item may already have been delivered to
    another consumer, so ``ack`` and ``extend`` refuse it.
    """


class LayoutError(FdbRecipesError, ValueError):
    """The structure stored at a subspace is not laid out as this object's: another
    number of ``shards``, another kind, an unsharded structure opened with ``shards``
    > 1, or a layout of a later fdbrecipes.  Raised before anything is written; make
    the object as the structure was made (``fdbrecipes stats`` names it)."""


class UniqueConflictError(FdbRecipesError):
    """A push with ``unique=Unique(key, on_conflict="raise")`` met another job holding
    ``key``: nothing was pushed.

    Attributes:
        key: the unique key.
        job: the id of the job that holds it.
    """

    def __init__(self, key: Any, job: bytes) -> None:
        super().__init__(f"unique key {key!r} is held by job {job!r}: nothing pushed")
        self.key = key
        self.job = job


class WorkTooLargeError(FdbRecipesError):
    """An operation keeps failing because it cannot finish within FoundationDB's
    5-second transaction limit (error 1007, ``transaction_too_old``, several times in
    a row).  Split the work: smaller batches, or pass a Database, which splits batch
    operations into several transactions itself."""


class IncompleteBatchError(FdbRecipesError):
    """A batch call given a Database (``pop_many``, ``claim_many``,
    ``WeightTree.pop_many``...) stopped after some of its transactions had committed.

    What those transactions took is yours, here, not lost: ``result`` holds it, in
    order (the values popped, the leases claimed).  The error that stopped the call
    is ``__cause__``; the transaction it stopped did not commit, or, if that error is
    an :class:`~fdbrecipes.UnknownResultError`, may have (``__cause__.settle(db)``
    finds out, and returns what it took).  Ctrl-C raises
    :class:`~fdbrecipes.InterruptedCall` instead, whose ``outcome.result`` holds
    everything the call took.

    Attributes:
        result: what the committed transactions returned, in order.
    """

    def __init__(self, result: List[Any]) -> None:
        super().__init__(f"the batch stopped after {len(result):,} results; they are in "
                         "this error's result (see __cause__ for why it stopped)")
        self.result = result


class UnknownJobError(FdbRecipesError, LookupError):
    """No job has this id: never pushed (or pushed without ``history``), or its record
    was pruned after ``history`` seconds.

    Attributes:
        id: the id asked for.
    """

    def __init__(self, id_: bytes) -> None:
        super().__init__(f"no job {id_!r}: unknown id, or its record was pruned")
        self.id = id_


class UnknownScheduleError(FdbRecipesError, LookupError):
    """No stored schedule has this name (see :class:`fdbrecipes.Schedules`).

    Attributes:
        name: the name asked for.
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"no schedule named {name!r}")
        self.name = name


class JobFailedError(FdbRecipesError):
    """``result()`` of a job that failed for good (a dead letter): its record says
    why (``record.error``: type, message, traceback).

    Attributes:
        record: the job's :class:`~fdbrecipes.JobRecord`.
    """

    def __init__(self, record: Any) -> None:
        error = record.error
        why = f"{error.type}: {error.message}" if error is not None else "no error recorded"
        super().__init__(f"job {record.id!r} failed after {record.attempts} attempt(s): {why}")
        self.record = record


class JobCancelledError(FdbRecipesError):
    """``result()`` of a job that was cancelled.

    Attributes:
        record: the job's :class:`~fdbrecipes.JobRecord`.
    """

    def __init__(self, record: Any) -> None:
        super().__init__(f"job {record.id!r} was cancelled")
        self.record = record


class ResultTooLargeError(FdbRecipesError, ValueError):
    """A job's result encodes to more than :data:`fdbrecipes.jobs.MAX_RESULT_BYTES`.

    Raised by ``result()`` of a job that succeeded but whose result was not kept (its
    handler's return value was too large: the job was acked all the same, its record
    says so in ``error``).

    Attributes:
        record: the job's :class:`~fdbrecipes.JobRecord`, or None.
    """

    def __init__(self, message: str, record: Any = None) -> None:
        super().__init__(message)
        self.record = record


class UnknownWorkflowError(FdbRecipesError, LookupError):
    """No workflow of this id in the store (never created, or pruned).

    Attributes:
        id: the workflow's id.
    """

    def __init__(self, id_: bytes) -> None:
        super().__init__(f"no workflow {id_!r}")
        self.id = id_


class UnknownWorkflowStoreError(FdbRecipesError, LookupError):
    """A job that is a workflow's node (or expander) would be buried by a structure
    object made without its workflow store (another process: the command line, a
    sweeper), which cannot take the workflow's step: the call wrote nothing (a
    process that made the store with the structure buries it, with the step).

    Attributes:
        id: the job's id.
    """

    def __init__(self, id_: bytes, structure: Any) -> None:
        super().__init__(f"job {id_!r} of {structure!r} is a workflow's node, of a workflow "
                         "store this process did not make with the structure: burying it "
                         "here would skip its workflow's step; make the Workflows store "
                         "with the structure (or leave the burial to a process that did)")
        self.id = id_


class BatchClosedError(FdbRecipesError):
    """``add_to_batch`` of a batch that is closed, over (cancelled), or was not made
    open (see :meth:`fdbrecipes.workflow.Workflows.open_batch`): nothing was added.

    Attributes:
        id: the batch's id.
    """

    def __init__(self, id_: bytes) -> None:
        super().__init__(f"batch {id_!r} takes no more members: it is closed or over")
        self.id = id_


class WorkflowFailedError(FdbRecipesError):
    """``result()`` of a workflow that failed (a node failed under the ``fail``
    policy) or was cancelled.

    Attributes:
        status: its :class:`fdbrecipes.workflow.WorkflowStatus`.
    """

    def __init__(self, status: Any) -> None:
        super().__init__(f"workflow {status.id!r} {status.state}: {status.why}")
        self.status = status
