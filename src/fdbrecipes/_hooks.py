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
            they register a request at once instead of trying a plain pop first.
        on_register: called (with the request key) right after a high-contention pop
            has registered its request, before it waits: a test can stop a popper
            there, as a crash would.
        on_block: called (with the timeout in seconds, None for none) right before a
            waiting call blocks on a FoundationDB watch: a test learns that the waiter
            is asleep, so a push now must wake it.
    """

    __slots__ = ("contended", "on_block", "on_register")

    def __init__(self) -> None:
        self.contended = False
        self.on_register: Optional[Callable[[bytes], None]] = None
        self.on_block: Optional[Callable[[Optional[float]], None]] = None
