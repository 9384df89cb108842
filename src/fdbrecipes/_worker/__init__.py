"""The worker's control flow, written once for sync and asyncio handlers.

:mod:`.core` runs on an event loop: it fetches work, runs handlers, keeps their
leases alive, settles each job and drains on shutdown.  ``fdbrecipes.Worker`` runs it
on an event loop of its own, with sync handlers in the daemon threads of
:mod:`.threads`; ``fdbrecipes.aio.AsyncWorker`` runs it on the caller's loop, with
``async def`` handlers as tasks.  Both use nothing of a structure but its operations
object (:class:`fdbrecipes.protocol.Workable`).

The core's parts: :mod:`.options` (the options, checked once for both faces),
:mod:`.fetching` (claims, and the waits between them) with :mod:`.ahead` (how many
jobs to claim beyond the free slots), :mod:`.running` and :mod:`.threads` (one job's
handler), :mod:`.holding` (the jobs held, the heartbeat, giving back),
:mod:`.presence` (the worker's record, operators' orders, pruning), :mod:`.stopping`
(stops asked from any thread, the drain); :mod:`.serving` makes the cores of a
structure or of an app.
"""
