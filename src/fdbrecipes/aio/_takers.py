"""How many takes of one structure (pops and claims given a Database) one event loop
runs at once (:class:`Takers`): what :class:`._ordered_face.AsyncOrderedFace` bounds
its takes with."""

from __future__ import annotations

import asyncio
import weakref
from typing import Dict

__all__ = ["Takers"]


class Takers:
    """How many takes of one structure (pops and claims given a Database) one event
    loop runs at once: at most ``spread`` of those with that ``spread`` (one at a
    time for strict ones).  More would only conflict with each other, since they draw
    among the same ``spread`` oldest items: on a real server 64 tasks claiming batches
    of 100 moved 2,800 items a second unbounded and 12,800 bounded, 64 tasks popping
    with ``spread=16`` 1,500 and 2,300 pops a second.  A semaphore belongs to one
    event loop, hence one set per loop."""

    __slots__ = ("by_loop",)

    def __init__(self) -> None:
        self.by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, Dict[int, asyncio.Semaphore]] = weakref.WeakKeyDictionary()

    def bound(self, spread: int) -> asyncio.Semaphore:
        """The semaphore of takes with ``spread`` in the running event loop."""
        semaphores = self.by_loop.setdefault(asyncio.get_running_loop(), {})
        if spread not in semaphores:
            semaphores[spread] = asyncio.Semaphore(spread)
        return semaphores[spread]
