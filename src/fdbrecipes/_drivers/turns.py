"""Turns to take: the waiters of a process taking from one structure, one at a time.

A push wakes every waiter of a process at once (they share a watch); were they all to
take together, every take that reads the front of a structure (a strict claim or pop)
would conflict with the one that commits first and retry, over and over (see
:class:`.._waiting.Take`).  So each driver lines its waiters up, per database and
structure: one take runs at a time, the next waiter's turn comes when it ends, in the
order they came.  A take that took nothing ends the turns of the waiters lined up
behind it: they look again (read-only checks, side by side) instead of taking.

This module keeps the lines; each driver hands a turn over its own way (a thread's
event, a task's future): :mod:`.blocking`, :mod:`.awaiting`.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Deque, Dict, Tuple

__all__ = ["Line", "Lines", "Turn"]


class Line:
    """The turns of one structure's takers in a process.

    Attributes:
        owner: the waiter whose turn it is (the object it waits on), None if nobody
            takes.
        waiting: the waiters lined up, in order.
        empty: how many takes so far took nothing.
        users: the waiters in the line (the one taking included).
    """

    __slots__ = ("empty", "owner", "users", "waiting")

    def __init__(self) -> None:
        self.owner: Any = None
        self.waiting: Deque[Any] = deque()
        self.empty = 0
        self.users = 0


class Turn:
    """A waiter's place in a line: the line, its waiter, and how many takes had taken
    nothing when it came (if more have when its turn comes, it looks again instead)."""

    __slots__ = ("key", "line", "seen", "waiter")

    def __init__(self, key: Tuple[Any, ...], line: Line, waiter: Any) -> None:
        self.key = key
        self.line = line
        self.waiter = waiter
        self.seen = line.empty


class Lines:
    """The lines of one driver's waiters, by (database, wake keys).  Thread-safe (the
    blocking driver's threads share one; an event loop's tasks, one each)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lines: Dict[Tuple[Any, ...], Line] = {}

    def join(self, db: Any, keys: Tuple[bytes, ...], waiter: Any) -> Tuple[Turn, bool]:
        """Line ``waiter`` up to take from the structure of ``keys`` in ``db``: its
        place, and whether its turn is now (else the driver waits for
        :meth:`pass_on` to hand it over to ``waiter``)."""
        key = (db, keys)
        with self.lock:
            line = self.lines.get(key)
            if line is None:
                line = self.lines[key] = Line()
            line.users += 1
            turn = Turn(key, line, waiter)
            if line.owner is None:
                line.owner = waiter
                return turn, True
            line.waiting.append(waiter)
            return turn, False

    def holds(self, turn: Turn) -> bool:
        """Whether it is ``turn``'s waiter's turn (handed over to it)."""
        with self.lock:
            return turn.line.owner is turn.waiter

    def stale(self, turn: Turn) -> bool:
        """Whether a take that began after ``turn`` lined up took nothing (it is the
        waiter's turn: nobody else counts them meanwhile)."""
        return turn.line.empty != turn.seen

    def took(self, turn: Turn, nothing: bool) -> None:
        """``turn``'s take ended (``nothing``: it took nothing)."""
        if nothing:
            with self.lock:
                turn.line.empty += 1

    def leave(self, turn: Turn) -> Any:
        """``turn``'s waiter leaves the line (its take ended, or it stopped waiting):
        the waiter whose turn it is now, for the driver to wake (None: nobody's, or
        not changed)."""
        with self.lock:
            line = turn.line
            line.users -= 1
            if not line.users:
                del self.lines[turn.key]
            if line.owner is not turn.waiter:  # it gave up waiting: out of the line
                line.waiting.remove(turn.waiter)
                return None
            line.owner = line.waiting.popleft() if line.waiting else None
            return line.owner
