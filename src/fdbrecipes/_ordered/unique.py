"""Unique jobs: at most one job of a Queue or PriorityQueue per unique key, and debounce.

``push(..., unique=Unique(key, covers=..., window=..., on_conflict=...))`` pushes a job
only if no other job holds ``key``.  Keys inside the structure's subspace ``S``::

    S/"U"/"k"/(token,)        = (job id, *place)          the job holding the key
                              = RETIRED + expiry + that   ... after it finished, for
                                                          ``window`` (covers "finished")
    S/"U"/"g"/(expiry, token) = the retired value          when to forget a finished one
                                                          (only if the entry still
                                                          holds that value)

``token`` is the key typed (``b"s"`` + UTF-8 for a str, ``b"b"`` + the bytes) and
``place`` the job's item's place (``group + (seq, random)``, see ``OrderedLayout``).
For a key covering "running" or "finished" the entry is also where a lookup by the
job's id finds its item (:meth:`UniqueKeys.locate`): the push writes no id key
(:func:`id_keyed`); an id key written later (a dead letter requeued, a pop undone)
is read first.
The entries are an :class:`.._ids.Ids` table of their own: a push reads the entry with
a read conflict (pushes of different keys never conflict), and pushes of new keys
collect a few finished entries whose window has passed.

A unique job's id says what it holds (made by the push, never given):
``b"unique:" + 16 hex characters + b":" + covers letter + window in milliseconds +
b":" + token``.  So the transactions that move the job know, from the item alone and
without a read, which entry to clear: the claim (covers "queued"), the removal (ack,
pop, cancel, removal by id: "queued" and "running"; "finished" marks it finished with
its expiry) and the burial among the dead letters (as the removal).  They clear with
COMPARE_AND_CLEAR on the exact value the push wrote, so a job never clears an entry
another job holds (after a job's entry went at its claim, say, and a newer job took
the key); "finished" then writes its retired value by BYTE_MIN, which keeps another
job's live entry (see :meth:`UniqueKeys.left`), and the entry is forgotten at the
expiry by COMPARE_AND_CLEAR on the retired value the schedule key holds, so a stale
schedule never clears a later holder's entry.  A dead letter requeued (or a pop
undone) takes its key back when the key is free or names its job, else runs beside
the holder without it (:meth:`UniqueKeys.requeued`).  Nothing else writes the
entries, so none outlives the states its job covers, and none is overwritten while
its job holds it.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from fdb.subspace_impl import Subspace
from fdb.tuple import pack, unpack

from .._clock import Clock, reading
from .._fdb import VERSIONS_PER_SECOND, Gen, Range, read
from .._ids import RETIRED, IdChecks, Ids, expiry_of
from .._layout import DELAY, Item, OrderedLayout
from .._values import check_seconds
from ..errors import UniqueConflictError
from .front import Entry, Hold

__all__ = ["FINISHED", "QUEUED", "RAISE", "REPLACE", "RUNNING", "SKIP", "Unique",
           "UniqueKeys", "UniquePush", "UniqueReads", "check_unique", "id_keyed", "place_of"]

#: What a unique key covers: its job while pending or delayed ("queued": until a
#: consumer claims it), until it leaves the structure ("running": acked, popped,
#: cancelled, removed or dead), or that and ``window`` seconds more ("finished").
QUEUED, RUNNING, FINISHED = "queued", "running", "finished"
#: What a push does when another job holds the key.
SKIP, RAISE, REPLACE = "skip", "raise", "replace"
#: How a unique job's id begins (ids given to ``push`` may not).
ID_HEAD = b"unique:"
#: The longest key, encoded (it is part of the job's id and of its item's keys).
MAX_KEY_BYTES = 200

_COVERS = {QUEUED: b"q", RUNNING: b"r", FINISHED: b"f"}
_LETTERS = {letter: covers for covers, letter in _COVERS.items()}


class Unique:
    """A push's unique key, what it covers and what a push that meets it does.

    Args:
        key: str or bytes, 1 to 200 bytes (a str's UTF-8); ``"a"`` and ``b"a"`` are
            different keys.
        covers: ``"queued"`` (the job holds the key while pending or delayed, until a
            consumer claims it), ``"running"`` (the default: until it leaves the
            structure: acked, popped, cancelled, removed or dead) or ``"finished"``
            (that, and ``window`` seconds more).
        window: seconds > 0 the key stays held after its job finished (covers
            ``"finished"`` only; None otherwise).
        on_conflict: when another job holds the key: ``"skip"`` (the default: push
            nothing, return that job's id), ``"raise"`` (push nothing, raise
            :class:`fdbrecipes.UniqueConflictError`) or ``"replace"`` (debounce: a
            pending or delayed holder gets the new value and the new delay, counted from
            now, at its place; a holder that runs, or finished, is left alone, as
            with ``"skip"``).

    Raises:
        TypeError or ValueError: an argument is not as above (the message names it).
    """

    __slots__ = ("covers", "key", "on_conflict", "token", "window")

    def __init__(self, key: Any, *, covers: str = RUNNING, window: Optional[float] = None,
                 on_conflict: str = SKIP) -> None:
        if isinstance(key, str):
            token = b"s" + key.encode("utf-8")
        elif type(key) is bytes:
            token = b"b" + key
        else:
            raise TypeError(f"unique key must be str or bytes, not {type(key).__name__}")
        if not 0 < len(token) - 1 <= MAX_KEY_BYTES:
            raise ValueError(f"unique key must be 1 to {MAX_KEY_BYTES} bytes, "
                             f"got {len(token) - 1}")
        if covers not in _COVERS:
            raise ValueError(f"covers must be one of {', '.join(map(repr, _COVERS))}, "
                             f"got {covers!r}")
        if covers == FINISHED:
            if window is None:
                raise ValueError('window (seconds > 0) is needed with covers="finished"')
            window = check_seconds(window, "window")
        elif window is not None:
            raise ValueError('window is for covers="finished" only')
        if on_conflict not in (SKIP, RAISE, REPLACE):
            raise ValueError(f"on_conflict must be 'skip', 'raise' or 'replace', "
                             f"got {on_conflict!r}")
        self.key: Any = key
        self.covers = covers
        self.window: Optional[float] = window
        self.on_conflict = on_conflict
        self.token = token

    def __repr__(self) -> str:
        window = "" if self.window is None else f", window={self.window!r}"
        return (f"Unique({self.key!r}, covers={self.covers!r}{window}, "
                f"on_conflict={self.on_conflict!r})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unique) and (
            (self.token, self.covers, self.window, self.on_conflict)
            == (other.token, other.covers, other.window, other.on_conflict))

    def __hash__(self) -> int:
        return hash((self.token, self.covers, self.window, self.on_conflict))

    def made_id(self) -> bytes:
        """A new id for a job pushed with this key (see the module docstring)."""
        window_ms = 0 if self.window is None else round(self.window * 1000)
        return b"%s%s:%s%d:%s" % (ID_HEAD, os.urandom(8).hex().encode(),
                                  _COVERS[self.covers], window_ms, self.token)


def check_unique(value: Any) -> Optional[Unique]:
    """A push's ``unique``: None, a :class:`Unique`, or its key alone (str or bytes:
    ``Unique(key)``).

    Raises:
        TypeError or ValueError: anything else, or a key that is not 1 to 200 bytes.
    """
    if value is None or isinstance(value, Unique):
        return value
    if isinstance(value, (str, bytes)):
        return Unique(value)
    raise TypeError(f"unique must be a Unique, a str or bytes key, or None, "
                    f"not {type(value).__name__}")


class Mark(NamedTuple):
    """What a unique job's id says: the key's token, what it covers and the window
    (clock units)."""

    token: bytes
    covers: str
    window: int


def mark_of(id_: Optional[bytes]) -> Optional[Mark]:
    """The mark in ``id_``, if it is a unique job's id; else None."""
    if id_ is None or not id_.startswith(ID_HEAD):
        return None
    parts = id_[len(ID_HEAD):].split(b":", 2)
    if len(parts) != 3 or len(parts[1]) < 2 or not parts[1][1:].isdigit():
        return None
    covers = _LETTERS.get(parts[1][:1])
    if covers is None:
        return None
    return Mark(parts[2], covers, int(parts[1][1:]) * (VERSIONS_PER_SECOND // 1000))


class UniquePush:
    """One push's unique key, and what the push found (set by each attempt that runs
    it): ``job``, the id of the job holding the key after it (the new one, or the one
    that held it), and ``outcome``: "pushed", "replaced" (debounce), "held" (left
    alone: skipped, or refused with ``on_conflict="raise"``)."""

    __slots__ = ("id", "job", "outcome", "spec")

    def __init__(self, spec: Unique) -> None:
        self.spec = spec
        self.id = spec.made_id()
        self.job: bytes = self.id
        self.outcome = "pushed"

    def answer(self) -> bytes:
        """The id push returns: the job holding the key.

        Raises:
            UniqueConflictError: the key was held and ``on_conflict`` is "raise".
        """
        if self.outcome == "held" and self.spec.on_conflict == RAISE:
            raise UniqueConflictError(self.spec.key, self.job)
        return self.job


class Replaced(NamedTuple):
    """A held job's item found for a replace: its entry, or None (it runs)."""

    entry: Optional[Entry]


class UniqueReads:
    """The entries of some unique keys being read (see :meth:`UniqueKeys.look`), and
    what this transaction wrote in them since."""

    __slots__ = ("reads", "values")

    def __init__(self, reads: Dict[bytes, Any]) -> None:
        self.reads = reads
        self.values: Dict[bytes, Optional[bytes]] = {}

    def value(self, token: bytes) -> Gen[Optional[bytes]]:
        """What key ``token``'s entry holds now, in this transaction."""
        if token in self.values:
            return self.values[token]
        found = yield from read(self.reads[token])
        self.values[token] = found
        return found


class UniqueKeys:
    """The unique keys of one (unsharded) Queue or PriorityQueue (see the module
    docstring)."""

    __slots__ = ("table",)

    def __init__(self, subspace: Subspace) -> None:
        #: the entries: an Ids table (key ``k``, schedule ``g``) under ``S/"U"``; every
        #: retire passes its job's window, so the table's own retention is unused
        self.table = Ids(subspace["U"], 1)

    def entry_key(self, token: bytes) -> bytes:
        """The key of the entry of key ``token``."""
        return self.table.key(token)

    @staticmethod
    def value(job: bytes, place: Item) -> bytes:
        """What a held entry holds: the job's id and its item's place."""
        encoded: bytes = pack((job,) + tuple(place))
        return encoded

    def check(self, tr: Any, pushes: Sequence[UniquePush]) -> IdChecks:
        """Start reading the entry of each push's key (a read conflict on each) and,
        by snapshot, the oldest finished entries' expiries."""
        checks = self.table.check(tr, (u.spec.token for u in pushes), True)
        assert checks is not None
        return checks

    def held(self, checks: IdChecks, push: UniquePush, now: int) -> Gen[Optional[bytes]]:
        """What holds ``push``'s key at ``now``: the entry's value (live, or finished
        within its window: starting with RETIRED), or None when the key is free."""
        return (yield from self.table.known(checks, push.spec.token, now))

    def taken(self, tr: Any, checks: IdChecks, push: UniquePush, place: Item) -> Gen[None]:
        """``push``'s job was pushed at ``place``: it holds its key."""
        yield from self.table.remember(tr, checks, push.spec.token, self.value(push.id, place))
        push.job, push.outcome = push.id, "pushed"

    def holding(self, tr: Any, token: bytes, clock: Clock) -> Gen[Optional[bytes]]:
        """The id of the job holding key ``token`` now (a read of its entry, a read
        conflict on it unless ``tr`` is a snapshot; the clock), or None."""
        value = yield from read(tr.get(self.entry_key(token)))
        if value is not None and finished(value):
            now = yield from reading(tr, clock)
            if expiry_of(value) <= now:
                return None
        return holder(value)

    def locate(self, tr: Any, id_: bytes) -> Optional[Any]:
        """Start reading the entry that tells where job ``id_`` is, when its push wrote
        no id key (a unique job whose key covers "running" or "finished", see
        :func:`id_keyed`): a read of the entry (a read conflict on it unless ``tr``
        is a snapshot), for :func:`place_of`; None for any other id (no read)."""
        mark = mark_of(id_)
        if mark is None or mark.covers == QUEUED:
            return None
        return tr.get(self.entry_key(mark.token))

    # -- the hooks of the transactions that move a job ------------------------------------

    def claimed(self, tr: Any, id_: Optional[bytes], place: Item) -> None:
        """A consumer claimed job ``id_`` (at ``place``): a key covering it while
        queued is free (if it still names this job)."""
        mark = mark_of(id_)
        if mark is not None and mark.covers == QUEUED:
            assert id_ is not None
            tr.compare_and_clear(self.entry_key(mark.token), self.value(id_, place))

    def left(self, tr: Any, id_: Optional[bytes], place: Item, now: int,
             died: Optional[Ids] = None) -> None:
        """Job ``id_`` (at ``place``) left the structure (acked, popped, cancelled,
        removed) or died: its key is free (if it still names this job), or, for covers
        "finished", held ``window`` more, then forgotten.  A job that died (``died``:
        its structure's ids) whose push wrote no id key (:func:`id_keyed`) gets one
        now: its dead letter is found by its id, as any job's.

        Reads nothing.  The entry is cleared by COMPARE_AND_CLEAR on this job's value,
        so another job's entry is never cleared; for "finished", the retired marker is
        then written by BYTE_MIN (:meth:`.._ids.Ids.finish`): it lands where the entry
        is now absent (this job held it, or nobody did) and another job's live entry
        is kept.  Only a job that ran without holding its key (requeued, or given back
        by an undone pop, while another job held it: see :meth:`requeued`) can meet
        another job's marker there; then the smaller of the two markers is kept (in
        effect either one: the expiry is little-endian): the key stays held as
        finished until that marker's expiry, and only the schedule key that names that
        marker forgets it (the other's clears nothing).  So the key is never freed
        while a job holds it, never overwritten, and at worst held as finished for
        the other job's window rather than this one's."""
        mark = mark_of(id_)
        if mark is None:
            return
        assert id_ is not None
        if died is not None and mark.covers != QUEUED:
            died.fresh(tr, None, id_, pack(tuple(place)))
        value = self.value(id_, place)
        if mark.covers == FINISHED:
            self.table.finish(tr, mark.token, now, value, mark.window)
        else:
            tr.compare_and_clear(self.entry_key(mark.token), value)

    def look(self, tr: Any, ids: Sequence[Optional[bytes]]) -> UniqueReads:
        """Start reading the entries of the unique jobs among ``ids`` (one read per key,
        in parallel; a read conflict on each), for :meth:`requeued` and :meth:`back`."""
        reads = {}
        for id_ in ids:
            mark = mark_of(id_)
            if mark is not None and mark.token not in reads:
                reads[mark.token] = tr.get(self.entry_key(mark.token))
        return UniqueReads(reads)

    def requeued(self, tr: Any, looked: UniqueReads, id_: Optional[bytes], place: Item,
                 now: int) -> Gen[bool]:
        """Job ``id_`` is pending again at ``place`` (a dead letter requeued; its entry
        read by :meth:`look`): it takes its key again when the key is free (absent,
        or finished with its window passed) or names this job (live, or finished:
        this job's own window ends, it runs again), cancelling a marker's scheduled
        forgetting; True if it did.  When another job holds the key (live, or
        finished within its window), the entry is left alone and this job runs beside
        it without holding it (the operator asked for it back): its id key, written
        by the caller, tells where it is, and its moves clear or overwrite nothing of
        the other job's (see :meth:`left`)."""
        mark = mark_of(id_)
        if mark is None:
            return False
        assert id_ is not None
        found = yield from looked.value(mark.token)
        if found is not None and holder(found) != id_ and not (
                finished(found) and expiry_of(found) <= now):
            return False
        value = self.value(id_, place)
        self.table.take(tr, mark.token, found, value)
        looked.values[mark.token] = value
        return True

    def back(self, tr: Any, looked: UniqueReads, id_: Optional[bytes], place: Item,
             left_at: int) -> Gen[None]:
        """Undo :meth:`left` (called at ``left_at``): job ``id_`` is back at ``place``
        (a pop whose caller was cancelled; its entry read by :meth:`look`), holding
        its key again, as :meth:`requeued` says (so not when another job took it
        meanwhile: it runs beside it); the forgetting :meth:`left` scheduled for a
        key covering "finished" is cancelled."""
        yield from self.requeued(tr, looked, id_, place, left_at)
        mark = mark_of(id_)
        if mark is not None and mark.covers == FINISHED:
            tr.clear(self.table.gc.pack((left_at + mark.window, mark.token)))

    # -- replace (debounce) ---------------------------------------------------------------

    def meet(self, tr: Any, keys: OrderedLayout, checks: IdChecks, push: UniquePush,
             now: int) -> Gen[Optional[Replaced]]:
        """``push``'s unique key, read by ``checks`` (its item to be stored under
        ``keys``): None when it is free (the push goes ahead); else what ``push``
        learns (the job holding it; "held", or "replaced": with
        ``on_conflict="replace"``, a pending or delayed holder, whose entry it names
        for the engine to give ``push``'s value and delay at its place, see
        ``Ordered.replace``).  A replace reads the holder's item (one round trip more,
        read conflicts on its keys)."""
        found = yield from self.held(checks, push, now)
        if found is None:
            return None
        job = holder(found)
        assert job is not None
        push.job, push.outcome = job, "held"
        if push.spec.on_conflict != REPLACE or finished(found):
            return Replaced(None)
        replaced = yield from self.find(tr, keys, found)
        if replaced.entry is not None:  # (one that runs is left alone)
            push.outcome = "replaced"
        return replaced

    def find(self, tr: Any, keys: OrderedLayout, held: bytes) -> Gen[Replaced]:
        """The pending or delayed item of the job a live entry (``held``) names, read
        with read conflicts (its visible key, its delay's hold: side by side); an
        entry of None when it is neither (it runs)."""
        place = unpack(held)[1:]
        visible = keys.items.range(place)
        delayed = keys.held.range((keys.delay_id(place),))
        reads = [Range(tr, visible.start, visible.stop, 1),
                 Range(tr, delayed.start, delayed.stop, 1)]
        found: List[Any] = []
        for r in reads:
            found.append((yield from r.first()))
        if found[0] is not None:
            item = keys.items.unpack(found[0].key)
            return Replaced(Entry(item, bytes(found[0].key), found[0].value, None))
        if found[1] is not None:
            key = bytes(found[1].key)
            hold_id, item, deadline, kind = keys.held.unpack(key)
            if kind == DELAY:
                due = keys.due_key(key, hold_id, deadline, kind)
                return Replaced(Entry(item, keys.item_key(item), found[1].value,
                                      Hold(hold_id, deadline, kind, (key, due))))
        return Replaced(None)


def id_keyed(push: Optional[UniquePush]) -> bool:
    """Whether a push (of ``push``'s unique key, if any) writes its job's id key (the
    ids table's, which tells where the job's item is): not for a key covering
    "running" or "finished", whose entry tells it for as long as the job is in the
    structure (see :meth:`UniqueKeys.locate`); one key fewer a push."""
    return push is None or push.spec.covers == QUEUED


def place_of(id_: bytes, known: Optional[bytes], held: Optional[bytes]) -> Optional[bytes]:
    """Where job ``id_``'s item is, as its id key holds it (the packed place, or
    RETIRED and more once it left): ``known``, that key's value, if any; else, from
    ``held`` (the value of the unique entry :meth:`UniqueKeys.locate` names, if any),
    the place, when the entry is live and names this job; else None."""
    if known is not None or held is None or finished(held):
        return known
    found = unpack(held)
    return pack(tuple(found[1:])) if found[0] == id_ else None


def holder(held: Optional[bytes]) -> Optional[bytes]:
    """The job id an entry's value names (live or finished), or None."""
    if held is None:
        return None
    if held.startswith(RETIRED):
        held = held[9:]
    job: bytes = unpack(held)[0]
    return job


def finished(held: bytes) -> bool:
    """Whether an entry's value is that of a job that finished (within its window)."""
    return held.startswith(RETIRED)

