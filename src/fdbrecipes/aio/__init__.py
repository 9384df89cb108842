"""The whole library from asyncio code.

``AsyncQueue``, ``AsyncPriorityQueue``, ``AsyncFairQueue`` and ``AsyncWeightTree`` take
the same constructor arguments and use the same key layout as their sync twins (a sync
and an async client work on one subspace at once); every public method of the sync
class exists here, with the same name and parameters, as an ``async def``, and with
the sync method's docstring and code, awaited (written into the source by
``tools/unasync.py``; the few places where an async call differs are listed in
docs/asyncio.md).
They run the very same operations: each structure's operations object (``.ops``, see
:mod:`fdbrecipes.protocol`) checks every call and returns it as a generator that
yields the FoundationDB futures it needs; the sync class blocks on those futures,
the async class awaits them.  Neither class holds anything of the other.

* ``tr`` is an ``fdb.Transaction`` (the operation joins the caller's transaction;
  its reads are awaited without blocking the event loop) or an ``fdb.Database`` (the
  library's own retry loop, with the same commit receipts and guarantees as the sync
  API).
* No thread per call: a waiting ``pop_wait``/``claim_wait``/``wait`` holds no
  thread, and the waiters of one event loop share one watch per wake key.
* Cancellation: cancelled before its commit is sent, a call writes nothing;
  cancelled while a commit is in flight, it settles the commit first (as Ctrl-C does
  in the sync API): a pop or claim that landed gives its item back to its place, no
  delivery counted, and a push that landed stays pushed (``id=`` makes a retry
  safe); then it raises ``CancelledError``.
* Shared transactions: pushes and acks of a Queue, PriorityQueue or WeightTree given a
  Database by tasks of one event loop within about a millisecond (at most 256 calls,
  2 MB of writes) go into one transaction with one receipt; each call returns once
  its outcome is settled.

:class:`AsyncSchedules` is :class:`fdbrecipes.Schedules` awaited.
:class:`AsyncWorker` runs ``async def`` handlers as :class:`fdbrecipes.Worker` runs
sync ones (one control flow for both).  Also :func:`transactional` (the twin of
``@fdb.transactional`` for ``async def`` functions), :func:`wait` (await any
FoundationDB future, a range read included) and :func:`drive` (await an operation of
an operations object).  Importing this package needs neither ``libfdb_c`` nor a
selected API version.
"""

from .._drivers.awaiting import drive, wait
from ._transactional import transactional
from .fair_queue import AsyncFairQueue
from .limits import AsyncLimits
from .priority_queue import AsyncPriorityQueue
from .queue import AsyncQueue
from .schedules import AsyncSchedules
from .weight_tree import AsyncWeightTree
from .worker import AsyncWorker

__all__ = ["AsyncFairQueue", "AsyncLimits", "AsyncPriorityQueue", "AsyncQueue", "AsyncSchedules",
           "AsyncWeightTree", "AsyncWorker", "drive", "transactional", "wait"]
