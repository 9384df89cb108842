"""The two drivers of the library's operations, side by side.

Every operation is a generator yielding the FoundationDB futures it needs (and, when
it waits, :class:`.._waiting.Watch` and :class:`.._waiting.Pause` steps).
:mod:`.blocking` runs one to its end blocking on each future (the sync classes);
:mod:`.awaiting` awaits each on the running asyncio loop (the classes of
:mod:`fdbrecipes.aio`).  Neither knows any structure.
"""
