"""A limit store's transactions: definitions written, read and deleted, and what a
limit's keys hold now (see :class:`.._store_layout.LimitLayout` for the keys)."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional

import fdb.tuple

from .._attempt import Attempt
from .._clock import Clock, reading
from .._fdb import Gen, Range, le64, read, read_le64, seconds_to_versions, snap
from .._store_layout import LimitLayout
from .slots import live_slots, move_back
from .specs import CONCURRENCY, Limit, decode_limit, encode_limit

__all__ = ["COUNTED", "MOVE_BACK", "LimitState", "LimitTotals", "Store"]

#: The most parked jobs a change or delete of a limit moves back at once (the others
#: come back at their park's deadline, see ``admission.PARK_SECONDS``).
MOVE_BACK = 1_000
#: Parked jobs a count reads at most (a key's state, a limit's totals).
COUNTED = 10_000


class LimitState(NamedTuple):
    """What one key of a limit holds, at one read version.

    Attributes:
        limit: the limit's definition.
        key: the key (None: the global one).
        running: jobs running under a live lease (a concurrency limit; 0 for a rate).
        started: the cost started in the window ending now (a rate limit; 0 for a
            concurrency limit).
        parked: jobs parked until a slot of this key frees (counted up to 10,000).
    """

    limit: Limit
    key: Any
    running: int
    started: int
    parked: int


class LimitTotals(NamedTuple):
    """A limit over all its keys, at one read version: its name and definition, the
    jobs running under it (a concurrency limit's; 0 for a rate) and those parked;
    whether either count stopped at its cap (then it counts only the first slots or
    parked entries read: there may be more)."""

    name: str
    limit: Limit
    running: int
    parked: int
    running_capped: bool = False
    parked_capped: bool = False


class Store:
    """The transactions of one limit store (each runs in one transaction)."""

    __slots__ = ("clock", "keys")

    def __init__(self, keys: LimitLayout, clock: Clock) -> None:
        self.keys = keys
        self.clock = clock

    def set(self, tr: Any, attempt: Attempt, name: str, limit: Limit) -> Gen[Optional[Limit]]:
        """Define or change limit ``name``; the definition it replaced, or None.  A
        concurrency limit changed moves back up to :data:`MOVE_BACK` jobs parked under
        it (claims check them against the new limit)."""
        key = self.keys.definition(name)
        old_raw = yield from read(tr.get(key))
        old = None if old_raw is None else decode_limit(old_raw)
        tr.set(key, encode_limit(limit))
        tr.add(self.keys.version, le64(1))
        if old is not None and old.kind == CONCURRENCY and old != limit:
            yield from self.release_parked(tr, attempt, name)
        return old

    def delete(self, tr: Any, attempt: Attempt, name: str) -> Gen[Limit]:
        """Forget limit ``name``; its definition.  The jobs parked under it move back
        (up to :data:`MOVE_BACK` now, the others at their park's deadline); the slots
        and starts of running jobs are cleared as their leases end.

        Raises:
            ValueError: no limit is named ``name`` (nothing written).
        """
        key = self.keys.definition(name)
        raw = yield from read(tr.get(key))
        old = None if raw is None else decode_limit(raw)
        if raw is None or old is None:
            raise ValueError(f"no limit is named {name!r}")
        tr.clear(key)
        tr.add(self.keys.version, le64(1))
        yield from self.release_parked(tr, attempt, name)
        return old

    def release_parked(self, tr: Any, attempt: Attempt, name: str) -> Gen[int]:
        """Move back up to :data:`MOVE_BACK` jobs parked under limit ``name``; how many.

        Takes a read conflict on the limit's whole range of parked jobs, as the end of
        a lease does on its key's (``gate.Gate.unpark``): a claim that parks a job
        under the limit and commits after this transaction's read version makes it
        retry (and find the job).  (The claim, for its part, reads the definition with
        a conflict when it parks: a change committed first makes it retry instead.)"""
        r = self.keys.parked.range((name,))
        begin, end = bytes(r.start), bytes(r.stop)
        tr.add_read_conflict_range(begin, end)
        found = yield from Range(snap(tr), begin, end, MOVE_BACK).read()
        now = yield from attempt.now(tr, self.clock)
        return (yield from move_back(tr, self.keys, found, None, now))

    def get(self, tr: Any, name: str) -> Gen[Optional[Limit]]:
        """Limit ``name``'s definition, or None (a snapshot read)."""
        raw = yield from read(snap(tr).get(self.keys.definition(name)))
        return None if raw is None else decode_limit(raw)

    def definitions(self, tr: Any) -> Gen[Dict[str, Limit]]:
        """Every limit by name (a snapshot range read)."""
        r = self.keys.definitions.range()
        found = yield from Range(snap(tr), bytes(r.start), bytes(r.stop)).read()
        out = {}
        for kv in found:
            limit = decode_limit(kv.value)
            if limit is not None:
                out[self.keys.definitions.unpack(kv.key)[0]] = limit
        return out

    def totals(self, tr: Any, cap: Optional[int] = None) -> Gen[List[LimitTotals]]:
        """Each limit with its jobs running (under live leases, every key) and parked:
        snapshot reads, side by side, two ranges per limit beside the definitions,
        each of at most ``cap`` keys (None: every slot; parked entries up to
        :data:`COUNTED`), the totals saying which count stopped there."""
        defined = yield from self.definitions(tr)
        now = yield from reading(tr, self.clock)
        most_parked = COUNTED if cap is None else min(cap, COUNTED)
        reads = []
        for name in defined:
            running, parked = self.keys.running.range((name,)), self.keys.parked.range((name,))
            reads.append((Range(snap(tr), bytes(running.start), bytes(running.stop), cap or 0),
                          Range(snap(tr), bytes(parked.start), bytes(parked.stop), most_parked)))
        out = []
        for (name, limit), (running, parked) in zip(defined.items(), reads):
            slots = yield from running.read()
            live = live_slots(self.keys, (name,), slots, now)
            waiting = len((yield from parked.read()))
            out.append(LimitTotals(name, limit, live, waiting,
                                   cap is not None and len(slots) >= cap,
                                   waiting >= most_parked))
        return out

    def version(self, tr: Any) -> Gen[int]:
        """The change counter (a snapshot read)."""
        return read_le64((yield from read(snap(tr).get(self.keys.version))))

    def state(self, tr: Any, name: str, key: Any) -> Gen[Optional[LimitState]]:
        """What key ``key`` of limit ``name`` holds now, or None if no such limit:
        snapshot reads, side by side."""
        definition = snap(tr).get(self.keys.definition(name))
        slot = (name, key)
        r = self.keys.running.range(slot)
        running = Range(snap(tr), bytes(r.start), bytes(r.stop))
        r = self.keys.starts.range(slot)
        starts = Range(snap(tr), bytes(r.start), bytes(r.stop))
        r = self.keys.parked.range(slot)
        parked = Range(snap(tr), bytes(r.start), bytes(r.stop), COUNTED)
        raw = yield from read(definition)
        limit = None if raw is None else decode_limit(raw)
        now = yield from reading(tr, self.clock)
        live = live_slots(self.keys, slot, (yield from running.read()), now)
        started = 0
        if limit is not None and limit.per_seconds is not None:
            since = now - seconds_to_versions(limit.per_seconds) + 1
            for kv in (yield from starts.read()):
                if self.keys.starts.unpack(kv.key)[2] >= since:
                    started += fdb.tuple.unpack(kv.value)[0]
        else:
            yield from starts.read()
        waiting = len((yield from parked.read()))
        if limit is None:
            return None
        return LimitState(limit, key, live, started, waiting)
