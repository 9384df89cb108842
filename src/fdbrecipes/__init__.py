"""Transactional data structures on FoundationDB: Queue, PriorityQueue, FairQueue,
WeightTree.

Every operation takes ``tr`` first: an ``fdb.Transaction`` (it commits atomically with
the rest of the caller's transaction) or an ``fdb.Database`` (it runs in its own retry
loop).  The application selects the API version (``fdb.api_version(730)``); importing
this package needs neither that nor ``libfdb_c``.  The asyncio twins are in
:mod:`fdbrecipes.aio`; what a worker, a schedule and the tools need from a structure is
:mod:`fdbrecipes.protocol`; the value types, exported here too, are
:mod:`fdbrecipes.types`.
"""

import logging

from ._clock import Clock
from ._codec import Codec, Undecodable
from ._drivers.blocking import drive
from ._receipts import InterruptedCall, UnknownResultError
from .errors import (
    BatchClosedError,
    FdbRecipesError,
    IncompleteBatchError,
    JobCancelledError,
    JobFailedError,
    LayoutError,
    LeaseExpiredError,
    ResultTooLargeError,
    UniqueConflictError,
    UnknownJobError,
    UnknownScheduleError,
    UnknownWorkflowError,
    UnknownWorkflowStoreError,
    WorkflowFailedError,
    WorkTooLargeError,
)
from .fair_queue import FairQueue
from .jobs import (
    Backoff,
    Discard,
    EventSink,
    Job,
    JobCancelled,
    JobFinished,
    JobStarted,
    Snooze,
    TimeLimitExceeded,
    WorkerStopping,
)
from .limits import Limit, Limits, LimitState, LimitUse, concurrency, rate
from .priority_queue import PriorityQueue
from .queue import Queue
from .schedule import Schedule
from .schedules import Schedules, catch_up
from .types import (
    CatchUp,
    DeadLetter,
    DelayedItem,
    FairLease,
    FairStats,
    FinishedJob,
    JobError,
    JobRecord,
    Lease,
    LeaseInfo,
    Minute,
    Outcome,
    PendingItem,
    Progress,
    QueueStats,
    RetryStats,
    RunningJob,
    ScheduleFire,
    ScheduleInfo,
    SequenceState,
    Transactor,
    Unique,
    Value,
    WorkerInfo,
)
from .weight_tree import WeightTree
from .worker import Worker
from .workflow import Workflow, Workflows

__version__ = "0.1.0"

# The library logs (dead letters, expired leases, long retries, unknown outcomes) under
# "fdbrecipes" and leaves where the lines go to the application.
logging.getLogger("fdbrecipes").addHandler(logging.NullHandler())

__all__ = [
    "Backoff",
    "BatchClosedError",
    "CatchUp",
    "Clock",
    "Codec",
    "DeadLetter",
    "DelayedItem",
    "Discard",
    "EventSink",
    "FairLease",
    "FairQueue",
    "FairStats",
    "FdbRecipesError",
    "FinishedJob",
    "IncompleteBatchError",
    "InterruptedCall",
    "Job",
    "JobCancelled",
    "JobCancelledError",
    "JobError",
    "JobFailedError",
    "JobFinished",
    "JobRecord",
    "JobStarted",
    "LayoutError",
    "Lease",
    "LeaseInfo",
    "LeaseExpiredError",
    "Limit",
    "LimitState",
    "LimitUse",
    "Limits",
    "Minute",
    "PendingItem",
    "PriorityQueue",
    "Progress",
    "Queue",
    "Outcome",
    "QueueStats",
    "ResultTooLargeError",
    "RetryStats",
    "RunningJob",
    "Schedule",
    "ScheduleFire",
    "ScheduleInfo",
    "Schedules",
    "SequenceState",
    "Snooze",
    "TimeLimitExceeded",
    "Transactor",
    "UnknownJobError",
    "UnknownScheduleError",
    "UnknownWorkflowError",
    "UnknownWorkflowStoreError",
    "UnknownResultError",
    "Undecodable",
    "Unique",
    "UniqueConflictError",
    "Value",
    "WeightTree",
    "WorkTooLargeError",
    "Worker",
    "WorkerInfo",
    "WorkerStopping",
    "Workflow",
    "WorkflowFailedError",
    "Workflows",
    "__version__",
    "catch_up",
    "concurrency",
    "drive",
    "rate",
]
