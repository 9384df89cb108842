"""Sequences: the jobs of one sequence key run one at a time, in push order.

``push(..., sequence=key)`` puts a job in the queue only when its sequence has none
there: the *head*.  The others wait beside the queue, in push order, and the
transaction that ends the head (ack, pop, cancel, removal by id) puts the next one at
the queue's tail.  A head that fails and is retried (released, or its lease expired)
stays the head, so its successors wait for it.  Claims are unchanged: a waiting job
is not in the queue, so it blocks nobody (no head-of-line blocking, and a claim costs
what it did).  Keys inside the structure's subspace ``S``::

    S/"Q"/"h"/(token,)              = (job id, blocked)   the sequence's head
    S/"Q"/"w"/(token, n, job id)    = (group, value, due) a waiting job (``n``: push
                                                          order; ``due``: not before,
                                                          a clock reading, or 0)

``token`` is the key typed as for unique keys (``b"s"`` + UTF-8, ``b"b"`` + bytes).

**A head that dies blocks its sequence** (it becomes a dead letter: its successors
must not run before it did, so they wait).  The head's entry then says ``blocked``;
the operator decides: :meth:`Sequences.unblock` (``Queue.unblock``, ``fdbrecipes
unblock``) moves on to the next job and leaves the dead letter where it is, and
``requeue_dead`` runs the dead job again (still the head: the sequence goes on when it
ends).

A job of a sequence has an id made by the push, which names its sequence:
``b"seq:" + 16 hex characters + b":" + token``; so the transaction ending a job knows,
without a read, that it must look at its sequence.  It asks for that in its Tally
(``Tally.later``): after its own work, the same transaction reads the head (a read
conflict) and the first waiting job (a read conflict on the range read) and moves it
(one more round trip, for jobs of a sequence only).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, NamedTuple, Optional, Protocol, Sequence, Tuple

from fdb.subspace_impl import Subspace
from fdb.tuple import pack, unpack

from .._attempt import Attempt
from .._clock import Clock
from .._fdb import Gen, Range, Tally, get_value, read
from .._ids import Ids
from .._layout import Item, OrderedLayout
from .._records.records import CANCELLED, Kept, Records
from .unique import Unique

__all__ = ["ID_HEAD", "SequenceState", "Sequences", "SequencePush", "check_sequence",
           "token_of"]

#: How the id of a job of a sequence begins (ids given to ``push`` may not).
ID_HEAD = b"seq:"


class Tail(Protocol):
    """What a sequence needs of the engine whose tail its jobs go in
    (:class:`.engine.Ordered`, which calls this module: a protocol, so the import
    points one way): its keys, clock, ids and job records, and how it appends."""

    @property
    def keys(self) -> OrderedLayout: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def ids(self) -> Ids: ...

    @property
    def records(self) -> Records: ...

    def next_seqs(self, tr: Any, groups: Any) -> Gen[Any]: ...

    def append(self, tr: Any, group: Item, seqs: Any, value: bytes,
               meta: Tuple[int, Optional[bytes]], now: int, delay: int, tally: Tally,
               kept: Optional[Kept] = None, made: bool = False) -> Item: ...


class SequenceState(NamedTuple):
    """A sequence key's state.

    Attributes:
        head: the id of its job in the queue (pending, delayed, running, retrying, or
            dead and blocking it), or None when none is.
        blocked: the head died: its successors wait for the operator (``unblock``,
            or ``requeue_dead`` of the head).
        waiting: how many of its jobs wait for their turn.
    """

    head: Optional[bytes]
    blocked: bool
    waiting: int


def token_of(key: Any) -> bytes:
    """A sequence key's token (the key checked as a unique key's: str or bytes, 1 to
    200 bytes).

    Raises:
        TypeError or ValueError: it is not.
    """
    try:
        return Unique(key).token
    except (TypeError, ValueError) as e:
        raise type(e)(str(e).replace("unique key", "sequence")) from None


def check_sequence(key: Any) -> Optional[bytes]:
    """A push's ``sequence``: None, or its token."""
    return None if key is None else token_of(key)


def sequence_of(id_: Optional[bytes]) -> Optional[bytes]:
    """The token of the sequence job ``id_`` belongs to, or None."""
    if id_ is None or not id_.startswith(ID_HEAD):
        return None
    parts = id_[len(ID_HEAD):].split(b":", 1)
    return parts[1] if len(parts) == 2 and len(parts[0]) == 16 and parts[1] else None


class SequencePush:
    """One push's sequence: its token and the id made for its job."""

    __slots__ = ("id", "token")

    def __init__(self, token: bytes) -> None:
        self.token = token
        self.id = b"%s%s:%s" % (ID_HEAD, os.urandom(8).hex().encode(), token)


class SequenceChecks:
    """The sequences of one push operation being read: each token's head and its
    last waiting job (started together), and what this operation wrote (a second push
    of one sequence in the same transaction sees the first)."""

    __slots__ = ("heads", "lasts", "next")

    def __init__(self, heads: Dict[bytes, Any], lasts: Dict[bytes, Range]) -> None:
        self.heads = heads
        self.lasts = lasts
        self.next: Dict[bytes, int] = {}  # token -> the next waiting number; -1: no head


class Sequences:
    """The sequence keys of one (unsharded) Queue or PriorityQueue (see the module
    docstring)."""

    __slots__ = ("heads", "waiting")

    def __init__(self, subspace: Subspace) -> None:
        space = subspace["Q"]
        self.heads = space["h"]
        self.waiting = space["w"]

    def head_key(self, token: bytes) -> bytes:
        """The key of sequence ``token``'s head."""
        return bytes(self.heads.pack((token,)))

    # -- push ---------------------------------------------------------------------------

    def check(self, tr: Any, pushes: Sequence[SequencePush]) -> SequenceChecks:
        """Start reading each sequence's head (a read conflict on it) and its last
        waiting job (by snapshot: pushes of one sequence conflict on the head, and
        two that append side by side are in either order)."""
        heads, lasts = {}, {}
        for push in pushes:
            if push.token not in heads:
                heads[push.token] = tr.get(self.head_key(push.token))
                r = self.waiting.range((push.token,))
                lasts[push.token] = Range(tr.snapshot, r.start, r.stop, 1, reverse=True)
        return SequenceChecks(heads, lasts)

    def waits(self, checks: SequenceChecks, push: SequencePush) -> Gen[bool]:
        """Whether ``push``'s job must wait (its sequence has a head); the first push
        of a free sequence is its head (the caller pushes it, then :meth:`started`)."""
        token = push.token
        if token not in checks.next:
            head = yield from read(checks.heads[token])
            if head is None:
                checks.next[token] = -1
            else:
                last = yield from checks.lasts[token].first()
                checks.next[token] = 0 if last is None else (
                    self.waiting.unpack(last.key)[1] + 1)
        return checks.next[token] >= 0

    def started(self, tr: Any, checks: SequenceChecks, push: SequencePush) -> None:
        """``push``'s job went into the queue: it is its sequence's head."""
        tr.set(self.head_key(push.token), pack((push.id, False)))
        checks.next[push.token] = 0

    def wait(self, tr: Any, checks: SequenceChecks, push: SequencePush, group: Item,
             value: bytes, due: int) -> None:
        """Keep ``push``'s job (``group``, encoded ``value``, not before ``due``) at the
        end of its sequence's waiting jobs."""
        n = checks.next[push.token]
        checks.next[push.token] = n + 1
        tr.set(self.waiting.pack((push.token, n, push.id)), pack((group, value, due)))

    # -- the end of a head ----------------------------------------------------------------

    def ended(self, tally: Tally, engine: Tail, id_: Optional[bytes], died: bool) -> None:
        """Job ``id_`` left the structure (``died``: became a dead letter): if it is a
        job of a sequence, ask for :meth:`next` later in the transaction."""
        token = sequence_of(id_)
        if token is not None:
            tally.later.append((self.next, (engine, token, id_, died)))

    def requeued(self, tally: Tally, id_: Optional[bytes]) -> None:
        """Dead job ``id_`` was pushed back (``requeue_dead``): if it is a job of a
        sequence, ask for :meth:`resumed` later in the transaction."""
        token = sequence_of(id_)
        if token is not None:
            tally.later.append((self.resumed, (token, id_)))

    def resumed(self, tr: Any, _attempt: Attempt, token: bytes, id_: bytes) -> Gen[None]:
        """If job ``id_`` is sequence ``token``'s blocked head: it runs again, so the
        sequence is not blocked (its end lets the next in; ``unblock`` has nothing to
        do meanwhile)."""
        head = yield from read(tr.get(self.head_key(token)))
        if head is not None and tuple(unpack(head)) == (id_, True):
            tr.set(self.head_key(token), pack((id_, False)))

    def next(self, tr: Any, attempt: Attempt, engine: Tail, token: bytes,
             id_: bytes, died: bool) -> Gen[None]:
        """If job ``id_`` is sequence ``token``'s head: mark it blocked (``died``), or
        put the next waiting job in the queue (none: the sequence is free)."""
        head = yield from read(tr.get(self.head_key(token)))
        if head is None or unpack(head)[0] != id_:
            return  # not the head (a dead letter run again after an unblock)
        if died:
            tr.set(self.head_key(token), pack((id_, True)))
        else:
            yield from self.promote(tr, attempt, engine, token)

    def promote(self, tr: Any, attempt: Attempt, engine: Tail,
                token: bytes) -> Gen[Optional[bytes]]:
        """Put sequence ``token``'s first waiting job at the queue's tail, its head
        now (read with a read conflict on the range read); with none, the sequence
        has no head.  The job's id, or None."""
        r = self.waiting.range((token,))
        kv = yield from Range(tr, r.start, r.stop, 1).first()
        if kv is None:
            tr.clear(self.head_key(token))
            return None
        _, _, job = self.waiting.unpack(kv.key)
        group, value, due = unpack(kv.value)
        tr.clear(kv.key)
        now = yield from attempt.now(tr, engine.clock)
        seqs = yield from engine.next_seqs(tr, {group})
        tally = Tally()
        item = engine.append(tr, group, seqs, value, (0, job), now, max(0, due - now), tally)
        engine.ids.fresh(tr, None, job, pack(engine.keys.place(item)))
        tr.set(self.head_key(token), pack((job, False)))
        tally.write(tr, attempt)
        promoted: bytes = job
        return promoted

    def cancel(self, tr: Any, engine: Tail, id_: bytes, kept: Kept) -> Gen[Optional[bytes]]:
        """Remove job ``id_`` if it waits in its sequence (a range read of the
        sequence's waiting jobs, a read conflict on it: O(waiting)); its job record,
        if it has one (``kept``: as for ``Ordered.record``), says cancelled.  Its
        encoded value, or None (not a waiting job: nothing written)."""
        token = sequence_of(id_)
        if token is None:
            return None
        r = self.waiting.range((token,))
        for kv in (yield from Range(tr, r.start, r.stop).read()):
            if self.waiting.unpack(kv.key)[2] == id_:
                tr.clear(kv.key)
                if engine.records.keeps or id_ in kept:
                    engine.records.finished(tr, id_, CANCELLED, 0)
                value: bytes = unpack(kv.value)[1]
                return value
        return None

    def unblock(self, tr: Any, attempt: Attempt, engine: Tail,
                token: bytes) -> Gen[Optional[bytes]]:
        """If sequence ``token`` is blocked by its dead head: move on to its next job
        (the dead letter stays where it is); the dead head's id, or None (it was not
        blocked: nothing written)."""
        head = yield from read(tr.get(self.head_key(token)))
        if head is None:
            attempt.idle = True
            return None
        job, blocked = unpack(head)
        if not blocked:
            attempt.idle = True
            return None
        yield from self.promote(tr, attempt, engine, token)
        found: bytes = job
        return found

    def state(self, tr: Any, token: bytes) -> Gen[SequenceState]:
        """Sequence ``token``'s state: its head (a read conflict on it, unless ``tr``
        is a snapshot) and its waiting jobs (a range read of them all)."""
        head_f = tr.get(self.head_key(token))
        r = self.waiting.range((token,))
        waiting: List[Any] = yield from Range(tr, r.start, r.stop).read()
        yield head_f
        head = get_value(head_f)
        job, blocked = (None, False) if head is None else unpack(head)
        return SequenceState(job, blocked, len(waiting))

