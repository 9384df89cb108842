"""Testing hooks: what a test may change about a structure's waiting and contention.

Public through :func:`fdbrecipes.testing.hooks.hooks`; the library itself never sets
them.  Each structure object has its own :class:`Hooks`.
"""

from __future__ import annotations

from typing import Callable, Optional

__all__ = ["Hooks"]


class Hooks:
    """Switches and callbacks for tests.

    Attributes:
        contended: high-contention pops behave as if contention had just been seen:
            they fetch a batch (one item popped, the next set aside for this popper)
            instead of popping one item.
        on_fetch: called (with the number of items set aside) right after a
            high-contention pop's fetch committed: a test can stop a popper there,
            holding items, as a crash would.
        on_block: called (with the timeout in seconds, None for none) right before a
            waiting call blocks on a FoundationDB watch: a test learns that the waiter
            is asleep, so a push now must wake it.
        batch: items one transaction of a batch call given a Database takes at most
            (``pop_many``, ``claim_many`` and their PriorityQueue twins,
            ``WeightTree.pop_many``); None: the library's own (1,000; 100 picks).  A
            test makes a batch of a few items span several transactions.
    """

    __slots__ = ("batch", "contended", "on_block", "on_fetch")

    def __init__(self) -> None:
        self.contended = False
        self.batch: Optional[int] = None
        self.on_fetch: Optional[Callable[[int], None]] = None
        self.on_block: Optional[Callable[[Optional[float]], None]] = None
