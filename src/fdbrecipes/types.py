"""The value types of fdbrecipes: what its calls take and give back, in one module.

Each class is defined beside the code that makes it (an engine, the job records, the
workers' registry, the stored schedules) and named here; the same objects are exported
at the package's top (``fdbrecipes.Lease`` is ``fdbrecipes.types.Lease``).  The tools
around the structures (the operator commands, the dashboard, the metrics, the Celery
and Dramatiq adapters, the task layer) name them from here, never from a private
module.  The types of the operations protocols' own calls (``Finished``,
``Followup``, ``Claimed``, ``Orders``) are :mod:`fdbrecipes.protocol`'s.

* What a structure holds and lends: ``Value`` (what may be stored),
  :class:`~fdbrecipes.Lease`, :class:`~fdbrecipes.FairLease`; ``Transactor``, the type
  of every call's ``tr``.
* Counts: :class:`~fdbrecipes.QueueStats`, :class:`~fdbrecipes.FairStats`, and of a
  FairQueue's group its ``GroupView`` (its stats and
  :class:`~fdbrecipes.fair_queue.Policy`).
* Listings' rows: :class:`~fdbrecipes.PendingItem`, :class:`~fdbrecipes.LeaseInfo`,
  :class:`~fdbrecipes.DelayedItem`, :class:`~fdbrecipes.DeadLetter` (any of them:
  ``Row``), :class:`~fdbrecipes.FinishedJob`.
* Jobs and workers: :class:`~fdbrecipes.JobRecord`, :class:`~fdbrecipes.JobError`,
  :class:`~fdbrecipes.Progress`, :class:`~fdbrecipes.WorkerInfo`,
  :class:`~fdbrecipes.RunningJob`, :class:`~fdbrecipes.Minute`.
* Stored schedules: :class:`~fdbrecipes.ScheduleInfo`, :class:`~fdbrecipes.ScheduleFire`,
  :class:`~fdbrecipes.CatchUp`.
* Limits: :class:`~fdbrecipes.Limit` (a definition), :class:`~fdbrecipes.LimitUse` (what
  a structure's jobs carry), :class:`~fdbrecipes.LimitState` (what a key holds).
* Calls: :class:`~fdbrecipes.Outcome` (what an interrupted call did),
  :class:`~fdbrecipes.RetryStats`.
* Flow control: :class:`~fdbrecipes.Unique` (a push's unique key),
  :class:`~fdbrecipes.SequenceState` (a sequence key's state).
"""

from ._fair.parts import FairLease, FairStats, GroupView, Policy
from ._fdb import Transactor
from ._limits.specs import Limit, LimitUse
from ._limits.store import LimitState
from ._ordered.counts import QueueStats
from ._ordered.dead import DeadLetter
from ._ordered.leases import Lease
from ._ordered.listing import DelayedItem, LeaseInfo
from ._ordered.paging import PendingItem, Row
from ._ordered.sequences import SequenceState
from ._ordered.unique import Unique
from ._receipts import Outcome
from ._records.finished import FinishedJob
from ._records.records import JobError, JobRecord, Progress
from ._records.registry import RunningJob, WorkerInfo
from ._records.series import Minute
from ._retry import RetryStats
from ._schedules.records import CatchUp, ScheduleFire, ScheduleInfo
from ._values import Value

__all__ = [
    "CatchUp",
    "DeadLetter",
    "DelayedItem",
    "FairLease",
    "FairStats",
    "FinishedJob",
    "GroupView",
    "JobError",
    "JobRecord",
    "Lease",
    "LeaseInfo",
    "Limit",
    "LimitState",
    "LimitUse",
    "Minute",
    "Outcome",
    "PendingItem",
    "Policy",
    "Progress",
    "QueueStats",
    "RetryStats",
    "Row",
    "RunningJob",
    "ScheduleFire",
    "ScheduleInfo",
    "SequenceState",
    "Transactor",
    "Unique",
    "Value",
    "WorkerInfo",
]
