"""What an operation is, and what it tells the call running it.

Every operation is a generator (see :data:`._fdb.Gen`): it yields the FoundationDB
futures it needs and goes on once they are ready, so one engine serves two drivers
(:mod:`._drivers`): the blocking one (the sync classes) and the awaiting one
(:mod:`fdbrecipes.aio`).  A writing operation's first two parameters are the
transaction and an :class:`Attempt`, through which it tells its call what the
attempt did (wrote nothing, how to undo it, what to log once it committed); a reading
operation's first is the transaction.  How a call runs an operation (in the caller's
transaction, or in a retry loop) is :mod:`._retry`.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Callable, List, Optional, Sequence, Tuple, TypeVar

from ._clock import Clock, database_clock
from ._fdb import Gen, known

__all__ = ["Attempt", "Cancelled", "Undo", "gather", "logged", "side_by_side", "undo_all"]

T = TypeVar("T")

log = logging.getLogger("fdbrecipes")


def logged(notes: List[str]) -> None:
    """Log what a committed attempt noted (see :meth:`Attempt.note`)."""
    for message in notes:
        log.info("%s", message)

#: An operation to run in a call of its own, with its arguments after the
#: transaction and the attempt: what undoes an attempt (see :attr:`Attempt.undo`).
Undo = Tuple[Callable[..., Gen[Any]], Tuple[Any, ...]]


class Cancelled(BaseException):
    """The awaiting driver's cancellation (``task.cancel()``), thrown into a call where
    it waits.  Before a commit is sent the call stops, having written nothing; with a
    commit in flight the call settles it first and, if it landed, undoes what the
    caller will never see (:attr:`Attempt.undo`); then it raises this, which the
    driver turns into ``asyncio.CancelledError``."""


class Attempt:
    """What an operation tells the loop about one attempt, and learns of it.

    An attempt asks for its transaction's read version as it begins (or is given one
    known to be recent), so that :meth:`read_version` after the operation's first
    read waits for nothing: a read version asked for *after* a read is a new future,
    and waiting for it is a switch to FoundationDB's network thread and back.

    Attributes:
        idle: the attempt wrote nothing (an empty pop, a refused release), so its
            commit needs no receipt.  Operations set it; it starts False.
        pinned: the attempt reads at a version its caller gave (see
            :meth:`Loop.pinned`), not at one it asked for.
        undo: set by an operation that takes items (a pop, a claim): the operation
            that gives them back, for a call cancelled while its commit was in flight
            (the caller never sees the result; see :class:`Cancelled`).
        later: operations an operation asked for (through its Tally) to run in the
            same transaction after it, before the commit (what a sequence's job that
            ended asks: its successor made visible, see ``_ordered.sequences``); run
            by :meth:`run_later`.
    """

    __slots__ = ("_future", "_version", "idle", "later", "notes", "pinned", "undo")

    def __init__(self, tr: Any, version: int = 0) -> None:
        self.idle = False
        self.pinned = bool(version)
        self.undo: Optional[Undo] = None
        self.notes: List[str] = []
        self.later: List[Undo] = []
        self._version = version
        if version:
            tr.set_read_version(version)
            self._future = None
        else:
            self._future = tr.get_read_version()

    def read_version(self) -> Gen[int]:
        """The transaction's read version."""
        if not self._version:  # asked for before the first read: ready by now, mostly
            self._version = yield from known(self._future)
        return self._version

    def note(self, message: str) -> None:
        """Log ``message`` (INFO, logger ``fdbrecipes``) once the attempt's commit is
        known to have landed (at once, in a caller's transaction)."""
        self.notes.append(message)

    def now(self, tr: Any, clock: Clock) -> Gen[int]:
        """The time in this attempt: with the database clock (the default),
        :meth:`read_version`, which costs no wait; else ``clock(tr)``."""
        if clock is database_clock:
            return (yield from self.read_version())
        return clock(tr)

    def run_later(self, tr: Any) -> Gen[None]:
        """Run the operations asked for in :attr:`later`, in order (and those they ask
        for in turn), in transaction ``tr``."""
        while self.later:
            op, args = self.later.pop(0)
            yield from op(tr, self, *args)

    def fork(self) -> Attempt:
        """An attempt for a part of this one's work (one shard's, see
        :func:`side_by_side`): the same transaction and read version, its own
        :attr:`idle`, :attr:`undo` and notes, gathered back by :meth:`join`."""
        part = copy.copy(self)  # the read version (asked for, or known), shared
        part.idle, part.undo, part.notes, part.later = False, None, [], []
        return part

    def join(self, parts: Sequence[Attempt]) -> bool:
        """Take back the notes and undos of ``parts`` (forks of this attempt); whether
        all of them were idle (the caller sets :attr:`idle` from it)."""
        undos = [] if self.undo is None else [self.undo]
        for part in parts:
            self.notes.extend(part.notes)
            self.later.extend(part.later)
            if part.undo is not None:
                undos.append(part.undo)
        if undos:
            self.undo = undos[0] if len(undos) == 1 else (undo_all, (undos,))
        return all(part.idle for part in parts)


def side_by_side(tr: Any, attempt: Attempt,
                 calls: Sequence[Tuple[Callable[..., Gen[T]], Tuple[Any, ...]]]) -> Gen[List[T]]:
    """The results of writing operations run side by side (as :func:`gather` runs
    reading ones), ``op(tr, part, *args)`` for each ``(op, args)`` of ``calls``, each
    with a fork of ``attempt`` (joined after: notes and undos kept, :attr:`Attempt.idle`
    set when all were idle).  For operations on keys no other of them touches (the
    shards of one structure): their reads go out together, one round trip per step
    for all."""
    parts = [attempt.fork() for _ in calls]
    results = yield from gather([op(tr, part, *args) for (op, args), part in zip(calls, parts)])
    attempt.idle = attempt.join(parts)
    return results


def undo_all(tr: Any, attempt: Attempt, undos: Sequence[Undo]) -> Gen[None]:
    """The undo of an attempt that took items in several shards: each part's undo,
    side by side."""
    yield from side_by_side(tr, attempt, undos)


def gather(ops: Sequence[Gen[T]]) -> Gen[List[T]]:
    """The results of reading operations run side by side: each is advanced, in turn,
    to the future it waits for next, so the reads they start before waiting go out
    together (one round trip per step for all, not one each).  Not for operations
    that write or wait on watches; an error of any stops all.
    """
    results: List[Any] = [None] * len(ops)
    steps = {}
    for i, op in enumerate(ops):
        try:
            steps[i] = op.send(None)
        except StopIteration as stop:
            results[i] = stop.value
    while steps:
        following = {}
        for i, step in steps.items():
            sent = yield step
            try:
                following[i] = ops[i].send(sent)
            except StopIteration as stop:
                results[i] = stop.value
        steps = following
    return results
