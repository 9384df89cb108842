"""What a claim checks against the limits its candidates carry, in its own transaction
(what a lease then holds, and what the end of a lease gives back: :mod:`.gate`).

A claim of a structure made with ``limits=`` makes an :class:`Admission` (the gate's,
``Gate.admission``), which reads the definitions (snapshot reads, started with the
claim's first read: no round trip of their own) and, for each (limit, key) its
candidates carry, the limit's state (one round trip for all, side by side):

* a **concurrency** limit: its ``n`` *slots*, ``L/"lr"/(name, key, first slot)``, a
  key a run of them, read by snapshot; a run holds the leases of one claim (their
  deadline; which lease has which slot is in the claim's record of tags), and one
  past its deadline is free (the leases expired).  A job starts in a free slot below
  ``n`` (a claim's first of the key drawn at random, each next one the first free
  after it: runs, see ``Usage.add``), with a read conflict on its slots alone (one
  range a run, added before the slots are written: a read conflict on keys the
  transaction wrote already is not taken) and a write conflict on them (the key of
  a run's first slot stands for all its slots; see ``Gate.held``): two claims of one
  key conflict only when they draw a same slot, and a job holds its slot until its
  lease ends, so at most ``n`` run at once, exactly.  A run never crosses a multiple
  of :data:`.slots.RUN_ALIGN`, so a read from one sees every run covering the slots
  after it.  A roomy limit (``n`` at least :data:`.slots.BLOCKS_FROM` times the block
  a claim needs, :func:`.slots.block_size`) is read by blocks:
  :data:`.slots.BLOCKS_READ` blocks drawn at random and the slots above ``n``, the
  slots drawn in the block holding the fewest (see :meth:`Admission.start`).
  When the key is full (no free slot, or, after ``n`` was lowered, as many jobs running
  as ``n`` in any slots), the claim takes a read conflict on the key's whole range and
  on the limit's definition: a slot freed, or the limit changed or deleted, meanwhile
  makes it retry instead of parking a job that could run.
* a **rate** limit: its starts in the window, ``L/"ls"/(name, key, start, ...)``; a
  job starts while the cost started in ``(now - per_seconds, now]`` plus its own is at
  most ``n``.  The read conflict covers the window and everything after it, so of two
  claims of one key the later one to commit always saw the other's start: in every
  window of ``per_seconds`` the starts weigh at most ``n``, by construction.  Starts
  older than the window are cleared.

A candidate at the limit of a concurrency key is **parked**: moved out of the order
under a DELAY hold of its own structure (deadline :data:`PARK_SECONDS` away) and named
in the store under its key, ``L/"lw"/(name, key, parked_at, ...)``; whatever frees a
slot of that key moves the first parked job back (``Gate.unpark``).  A candidate held
back only by a rate is delayed (a DELAY hold) until the moment its key's window has
room.  So a key at its limit never holds the front: the claim goes on with the next
candidates, and each blocked job is moved once per slot or window, not met again by
every claim.  The park's deadline is the safety net: a job beyond the 1,000 a change
or delete of its limit moves back, or whose slot came back by an expiry no claim of
its structure met, is looked at again by then at the latest.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Protocol, Sequence, Tuple

import fdb.tuple

from .._codec import Values
from .._fdb import Gen, Range, Tally, read, seconds_to_versions
from .._layout import DELAY, LEASE
from .._store_layout import LimitLayout
from .slots import (
    BLOCKS_FROM,
    BLOCKS_READ,
    Run,
    Slot,
    StateRead,
    Tag,
    Usage,
    aligned,
    block_size,
    draw,
    slot_runs,
)
from .specs import CONCURRENCY, EXEMPT, Limit, LimitUse, decode_limit, given_keys

__all__ = ["PARK_SECONDS", "Admission", "Chooser", "LimitUses"]

#: How long a parked job waits at most before a claim looks at it again.
PARK_SECONDS = 60.0

#: How a take picks ``n`` among candidates with a spread (``_ordered.front.choose``).
Chooser = Callable[[List[Any], int, int], List[Any]]


class LimitUses(Protocol):
    """What an admission needs of the gate that makes it (:class:`.gate.Gate`, which
    imports this module: a protocol, so the import points one way): the store's keys,
    the limits its jobs carry and how the structure's values decode (to find a job's
    keys), and the definitions the last claim read (kept on the gate for the next)."""

    known: Dict[str, Limit]

    @property
    def keys(self) -> LimitLayout: ...

    @property
    def uses(self) -> Sequence[LimitUse]: ...

    @property
    def values(self) -> Values: ...


class Admission:
    """What one claim (one transaction) learnt of the limits, and added: the
    definitions, and each (limit, key) it read (see the module docstring)."""

    __slots__ = ("defined", "early", "gate", "started", "usage")

    def __init__(self, gate: LimitUses, started: Dict[str, Any]) -> None:
        self.gate = gate
        self.started = started
        self.defined: Optional[Dict[str, Limit]] = None
        self.usage: Dict[Slot, Usage] = {}
        self.early: Dict[Slot, StateRead] = {}

    def guess(self, tr: Any, want: int) -> None:
        """Start reading, beside the claim's first reads, the state of each global
        concurrency limit (a use without a key function) for ``want`` candidates, as
        the definitions the last claim of this gate read say it (:meth:`start`): the
        claim learns from it when the definition it reads now is the same and the
        candidates carry that key (:meth:`read_usage`), saving that round trip; else
        it is left unread.  The same snapshot reads, only started sooner."""
        for use in self.gate.uses:
            limit = self.gate.known.get(use.name)
            if use.key is None and limit is not None and limit.kind == CONCURRENCY:
                self.early[(use.name, None)] = self.start(tr, (use.name, None), limit, 0, want)

    def definitions(self) -> Gen[Dict[str, Limit]]:
        """The limits defined now, by name (read once per claim)."""
        if self.defined is None:
            defined = {}
            for name, future in self.started.items():
                raw = yield from read(future)
                limit = None if raw is None else decode_limit(raw)
                if limit is not None:
                    defined[name] = limit
            self.defined = self.gate.known = defined
        return self.defined

    def tags(self, raw: bytes, defined: Dict[str, Limit]) -> List[Tag]:
        """The limits a job of stored value ``raw`` carries (those defined now): its key
        under each, the one given at push (stored after the value, see
        :func:`.specs.with_limit_keys`) or else the one its use computes."""
        uses = [use for use in self.gate.uses if use.name in defined]
        if not uses:
            return []
        parts = fdb.tuple.unpack(raw)  # the value, then the keys given at push, if any
        given = given_keys(parts)
        value = parts[0] if self.gate.values.codec is None else self.gate.values.value(parts[0])
        tags = []
        for use in uses:
            key = given[use.name] if use.name in given else use.key_of(value)
            if key is EXEMPT:
                continue
            limit = defined[use.name]
            cost = use.cost_of(value) if limit.kind != CONCURRENCY else 1
            tags.append(Tag(use.name, key, cost, limit.kind))
        return tags


    def tagged(self, tr: Any, entries: Sequence[Any],
               now: int) -> Gen[List[Tuple[Any, List[Tag]]]]:
        """Each of the candidates ``entries`` (read at ``now``) with the limits it
        carries; the state of each (limit, key) they carry that this claim had not read
        yet read now, side by side (:meth:`read_usage`: one round trip, two when a key
        read by blocks must be read whole; none when all were read)."""
        defined = yield from self.definitions()
        tagged = [(entry, self.tags(entry.value, defined)) for entry in entries]
        yield from self.read_usage(tr, tagged, defined, now)
        return tagged

    def admit(self, tr: Any, engine: Any, now: int, entries: Sequence[Any], tally: Tally,
              want: int, spread: int,
              choose: Chooser) -> Gen[Tuple[List[Tuple[Any, List[Tag]]], bool]]:
        """Up to ``want`` of the candidates ``entries`` (of ``engine``, read at ``now``,
        in order) that may start, each with its tags, chosen as a take with ``spread``
        chooses (``choose``: the engine's ``front.choose``, handed in so that this
        module imports no engine) among the first ``want + spread - 1`` runnable
        ones; the blocked ones met before those parked or delayed (see the module
        docstring).  And whether any was held back.  Only the limits' state read
        decides what is held back, never this claim's own choices: a job is parked
        only when its key is full without it.

        The limits' state is read for the keys of the first ``want + spread - 1``
        candidates, then, only if some of those were held back, for the keys of the
        others (:meth:`read_usage`): a claim whose first candidates can run reads no
        other key."""
        defined = yield from self.definitions()
        needed = want + spread - 1
        runnable: List[Tuple[Any, List[Tag]]] = []
        blocked = False
        for wave in (entries[:needed], entries[needed:]):
            if not wave or len(runnable) >= needed:
                break
            tagged = [(entry, self.tags(entry.value, defined)) for entry in wave]
            yield from self.read_usage(tr, tagged, defined, now)
            for entry, tags in tagged:
                if len(runnable) >= needed:
                    break
                if self.hold(tr, engine, entry, tags, now, tally):
                    blocked = True
                else:
                    runnable.append((entry, tags))
        picked = {id(e) for e in choose([e for e, _ in runnable], want, spread)}
        admitted = []
        for entry, tags in runnable:
            if id(entry) in picked and all(
                    self.usage[(t.name, t.key)].fits(t.cost, now) for t in tags):
                admitted.append((entry, [t._replace(slot=self.usage[(t.name, t.key)].add(
                    t.cost, now)) for t in tags]))
        return admitted, blocked

    def read_usage(self, tr: Any, tagged: Sequence[Tuple[Any, List[Tag]]],
                   defined: Dict[str, Limit], now: int) -> Gen[None]:
        """Learn the state of each (limit, key) the candidates ``tagged`` carry that
        this claim has not read yet, side by side (one round trip; see :meth:`start`).
        A concurrency key read by blocks whose block has fewer free slots than the
        candidates carrying it, or with jobs running above ``n``, is read whole (one
        round trip more)."""
        counts: Dict[Slot, int] = {}
        for _, tags in tagged:
            for t in tags:
                counts[(t.name, t.key)] = counts.get((t.name, t.key), 0) + 1
        for whole in (False, True):
            readings = {slot: self.started_read(tr, slot, defined[slot[0]], now, count, whole)
                        for slot, count in counts.items()
                        if slot not in self.usage or self.usage[slot].short(count)}
            if not readings:
                return
            for slot, state in readings.items():
                usage = yield from self.learn(tr, slot, state, now)
                if usage is not None:
                    self.usage[slot] = usage
                else:
                    self.usage.pop(slot, None)
            counts = {slot: count for slot, count in counts.items() if slot in readings}

    def started_read(self, tr: Any, slot: Slot, limit: Limit, now: int, count: int,
                     whole: bool) -> StateRead:
        """The read of (name, key)'s state for ``count`` candidates: the one
        :meth:`guess` started, if it read what :meth:`start` would read now for them
        (the same definition; the whole key, or a block of at least their count),
        else one started now."""
        early = self.early.pop(slot, None)
        if early is not None and not whole and early.limit == limit and (
                not early.blocks or early.size >= block_size(count)):
            return early
        return self.start(tr, slot, limit, now, count, whole)

    def start(self, tr: Any, slot: Slot, limit: Limit, now: int, count: int,
              whole: bool = False) -> StateRead:
        """Start reading (name, key)'s state for ``count`` candidates, by snapshot: a
        concurrency limit's slots (the conflicts come with the slots taken): all of
        them, or, when ``n`` is at least :data:`BLOCKS_FROM` times the block of
        ``count`` (:func:`block_size`) and not ``whole``, :data:`BLOCKS_READ` blocks
        drawn at random and the slots above ``n`` (claims of one key then conflict
        only when they draw the same block, and read only what it holds); a rate's
        starts with a read conflict on the window and after."""
        keys = self.gate.keys
        if limit.kind == CONCURRENCY:
            r = keys.running.range(slot)
            size = block_size(count)
            if whole or limit.n < BLOCKS_FROM * size:
                return StateRead(limit, [Range(tr.snapshot, bytes(r.start), bytes(r.stop))])
            name, key = slot  # each read from where a run covering its slots may begin
            firsts = tuple(j * size for j in draw.sample(range(limit.n // size), BLOCKS_READ))
            reads = [Range(tr.snapshot, keys.running_key(name, key, aligned(limit.n)),
                           bytes(r.stop))]
            reads += [Range(tr.snapshot, keys.running_key(name, key, aligned(first)),
                            keys.running_key(name, key, first + size)) for first in firsts]
            return StateRead(limit, reads, firsts, size)
        r = keys.starts.range(slot)
        since = bytes(keys.starts.pack(slot + (self.window_start(limit, now),)))
        tr.add_read_conflict_range(since, bytes(r.stop))
        return StateRead(limit, [Range(tr.snapshot, bytes(r.start), bytes(r.stop))])

    def hold(self, tr: Any, engine: Any, entry: Any, tags: List[Tag], now: int,
             tally: Tally) -> bool:
        """Park ``entry`` if a concurrency limit it carries is full, else delay it if a
        rate it carries has no room now; whether it was held back."""
        for t in tags:
            if t.kind == CONCURRENCY and not self.usage[(t.name, t.key)].fits(t.cost, now):
                r = self.gate.keys.running.range((t.name, t.key))
                tr.add_read_conflict_range(r.start, r.stop)  # a slot freed meanwhile: retry
                # the limit raised or deleted meanwhile: retry (see Store.release_parked)
                tr.add_read_conflict_key(self.gate.keys.definition(t.name))
                self.park(tr, engine, entry, now, tally, t)
                return True
        rates = [(t, self.usage[(t.name, t.key)]) for t in tags if t.kind != CONCURRENCY]
        times = [usage.opens(t.cost, now) for t, usage in rates if not usage.fits(t.cost, now)]
        if not times:
            return False
        until = max(times)
        self.hold_back(tr, engine, entry, now, until, tally)
        return True

    def park(self, tr: Any, engine: Any, entry: Any, now: int, tally: Tally,
             tag: Tag) -> None:
        """Move ``entry`` out of its structure's order under a DELAY hold until
        :data:`PARK_SECONDS` from now, named under ``tag``'s key in the store."""
        deadline = now + seconds_to_versions(PARK_SECONDS)
        item = self.hold_back(tr, engine, entry, now, deadline, tally)
        prefix = engine.keys.subspace.key()
        comeback = engine.comeback
        tr.set(self.gate.keys.parked_key(tag.name, tag.key, now, prefix, item, deadline),
               b"" if comeback is None else comeback.pack())

    def hold_back(self, tr: Any, engine: Any, entry: Any, now: int, deadline: int,
                  tally: Tally) -> Any:
        """Take ``entry`` from the order (or its expired hold) and hold it under DELAY
        until ``deadline`` (its job record, if it came back from a lease, retrying);
        its item."""
        item = engine.take(tr, entry, now, tally)
        engine.hold(tr, item, entry.value, engine.keys.delay_id(item), deadline, DELAY, tally)
        engine.wake(tally)  # waiters learn of the new deadline
        if entry.hold is not None and entry.hold.kind == LEASE:
            engine.came_back(tr, item)
        return item

    @staticmethod
    def window_start(limit: Limit, now: int) -> int:
        """The first clock reading inside a rate's window ending at ``now``."""
        return now - seconds_to_versions(limit.per_seconds or 0.0) + 1

    def live_runs(self, tr: Any, slot: Slot, kvs: Sequence[Any], limit: Limit,
                  now: int) -> Iterator[Run]:
        """The runs of live leases the keys ``kvs`` of (name, key)'s slots hold (as
        read, :func:`.slots.slot_runs`; ``limit``: its definition); the key of an
        expired one above ``n`` (after ``n`` was lowered: never drawn again) is cleared
        as met, if it still holds what the lease wrote (a compare-and-clear: no read,
        no conflict)."""
        for run in slot_runs(self.gate.keys, slot, kvs):
            if run.deadline >= now:
                yield run
            elif run.first >= limit.n:
                tr.compare_and_clear(run.key, run.value)

    def learn(self, tr: Any, slot: Slot, state: StateRead, now: int) -> Gen[Optional[Usage]]:
        """(name, key)'s usage from what :meth:`start` read: the live slots (each key
        a run of them; an expired lease's slots are free, and its key, above ``n``, is
        cleared if it still holds what the lease wrote: :meth:`live_runs`), of the
        block that holds the fewest of those read by blocks, or None when a job runs
        above ``n`` (they must all be counted: read it whole); or the starts in the
        window (those before it cleared)."""
        keys = self.gate.keys
        limit = state.limit
        if limit.kind == CONCURRENCY and state.blocks:
            # from aligned(n): the runs above n
            for run in self.live_runs(tr, slot, (yield from state.reads[0].read()), limit, now):
                if run.last >= limit.n:
                    return None
            best: Optional[Usage] = None
            for low, reading in zip(state.blocks, state.reads[1:]):
                usage = Usage(limit, low, low + state.size)
                for run in self.live_runs(tr, slot, (yield from reading.read()), limit, now):
                    usage.taken.update(range(max(run.first, low), min(run.last + 1, usage.high)))
                if best is None or len(usage.taken) < len(best.taken):
                    best = usage
            assert best is not None
            best.live = len(best.taken)
            return best
        found = yield from state.reads[0].read()
        usage = Usage(limit)
        if limit.kind == CONCURRENCY:
            for run in self.live_runs(tr, slot, found, limit, now):
                usage.live += run.last - run.first + 1
                usage.taken.update(range(run.first, min(run.last + 1, limit.n)))
            if usage.live > len(usage.taken):
                r = keys.running.range(slot)  # n was lowered: count exactly, serialized
                tr.add_read_conflict_range(r.start, r.stop)
            return usage
        since = self.window_start(limit, now)
        for kv in found:
            start = keys.starts.unpack(kv.key)[2]
            if start >= since:
                usage.starts.append((start, fdb.tuple.unpack(kv.value)[0]))
        r = keys.starts.range(slot)
        tr.clear_range(bytes(r.start), bytes(keys.starts.pack(slot + (since,))))
        return usage
