"""A schedule store's transactions: which of its keys each call reads and writes.

Each writing call is an operation ``op(tr, attempt, ...)`` (see
:mod:`fdbrecipes._attempt`), each reading one ``op(tr, ...)``; the checked calls that
hand them to a retry loop are :mod:`.ops`, the fires :mod:`.firing`.  Every write of a
definition or a state also adds 1 to the change counter, which workers watch (a fire
does not: only the workers racing for the same slot need to know, and they read the
state in the fire itself).
"""

from __future__ import annotations

import time
from typing import Any, List, NamedTuple, Optional, Tuple

from fdb.subspace_impl import Subspace

from .._attempt import Attempt
from .._fdb import Gen, Range, add, read, read_le64, snap
from .._store_layout import ScheduleLayout
from ..errors import UnknownScheduleError
from .records import Definition, ScheduleInfo, State

__all__ = ["MAX_REQUESTS", "Entry", "Store"]

#: Run-now requests a schedule keeps waiting at most.
MAX_REQUESTS = 100


class Entry(NamedTuple):
    """One stored schedule as read: its name, and its definition and state as
    stored (packed)."""

    name: str
    definition: bytes
    state: bytes


class Store:
    """The reads and writes of one schedule store (see the module docstring)."""

    __slots__ = ("keys", "recent")

    def __init__(self, subspace: Subspace, recent: int) -> None:
        self.keys = ScheduleLayout(subspace)
        self.recent = recent

    def touch(self, tr: Any) -> None:
        """Tell the workers watching the store that something changed."""
        add(tr, self.keys.version, 1)

    # -- writing ---------------------------------------------------------------------

    def add(self, tr: Any, attempt: Attempt, name: str, definition: Definition,
            paused: bool, replace: bool) -> Gen[bool]:
        """Store schedule ``name`` as ``definition`` (new: ``paused`` or not, its slots
        counted from now); an existing one is refused unless ``replace``, when its
        definition is replaced if it differs (its slots counted from now, its pause,
        its last slot and its fires kept).  Whether it wrote.  Reads the definition and
        the state with conflicts.

        Raises:
            ValueError: ``name`` exists and not ``replace`` (nothing written).
        """
        old_definition = tr.get(self.keys.definition(name))
        old_state = tr.get(self.keys.state(name))
        found = yield from read(old_definition)
        raw_state = yield from read(old_state)
        now = time.time()
        if found is not None and raw_state is not None:
            if not replace:
                raise ValueError(f"name: a schedule named {name!r} exists already")
            if Definition.unpack(found).same(definition):
                attempt.idle = True
                return False
            state = State.unpack(raw_state)
            state = state._replace(revision=state.revision + 1, since=max(state.since, now))
            definition = definition._replace(created_at=Definition.unpack(found).created_at)
        else:
            state = State(1, now if paused else None, now, None, (), ())
        tr.set(self.keys.definition(name), definition.pack())
        tr.set(self.keys.state(name), state.pack())
        self.touch(tr)
        return True

    def state_of(self, tr: Any, name: str) -> Gen[State]:
        """Schedule ``name``'s state (a read with a conflict).

        Raises:
            UnknownScheduleError: no schedule has that name.
        """
        raw = yield from read(tr.get(self.keys.state(name)))
        if raw is None:
            raise UnknownScheduleError(name)
        return State.unpack(raw)

    def pause(self, tr: Any, attempt: Attempt, name: str, paused: bool) -> Gen[bool]:
        """Pause (``paused``) or resume schedule ``name``; whether that changed it.  A
        resumed schedule's slots count from now (none missed while it was paused)."""
        state = yield from self.state_of(tr, name)
        if (state.paused_at is not None) == paused:
            attempt.idle = True
            return False
        now = time.time()
        state = state._replace(paused_at=now if paused else None,
                               since=state.since if paused else max(state.since, now))
        tr.set(self.keys.state(name), state.pack())
        self.touch(tr)
        return True

    def request(self, tr: Any, attempt: Attempt, name: str, request: bytes) -> Gen[None]:
        """Ask the workers to push a job of schedule ``name`` now (request ``request``).

        Raises:
            UnknownScheduleError: no schedule has that name.
            ValueError: :data:`MAX_REQUESTS` are waiting already.
        """
        state = yield from self.state_of(tr, name)
        if len(state.requests) >= MAX_REQUESTS:
            raise ValueError(f"schedule {name!r} has {MAX_REQUESTS} run-now requests "
                             "waiting already: is any worker carrying the store?")
        state = state._replace(requests=state.requests + ((request, time.time()),))
        tr.set(self.keys.state(name), state.pack())
        self.touch(tr)

    def remove(self, tr: Any, attempt: Attempt, name: str) -> Gen[bool]:
        """Forget schedule ``name``; whether it existed (reads its state with a
        conflict: a fire in flight conflicts)."""
        found = yield from read(tr.get(self.keys.state(name)))
        if found is None:
            attempt.idle = True
            return False
        tr.clear(self.keys.definition(name))
        tr.clear(self.keys.state(name))
        self.touch(tr)
        return True

    def fired(self, tr: Any, name: str, state: State) -> State:
        """Write the state a fire left, with the latest :attr:`recent` fires; that
        state."""
        state = state._replace(fires=state.fires[-self.recent:])
        tr.set(self.keys.state(name), state.pack())
        return state

    # -- reading ---------------------------------------------------------------------

    def version(self, tr: Any) -> Gen[int]:
        """The change counter (a snapshot read: 0 for a store never written)."""
        return read_le64((yield from read(snap(tr).get(self.keys.version))))

    def changed(self, tr: Any, known: int) -> Gen[Tuple[bool, None]]:
        """Whether the change counter moved from ``known`` (a readiness check)."""
        return (yield from self.version(tr)) != known, None

    def entries(self, tr: Any, limit: int, after: Optional[str]) -> Gen[List[Entry]]:
        """Up to ``limit`` schedules by name, after the name ``after`` (None: from the
        first): their definitions and states, two range reads side by side, by
        snapshot (a schedule's two keys are written and cleared together, so both
        ranges hold the same names)."""
        reader = snap(tr)
        ranges = []
        for space in (self.keys.definitions, self.keys.states):
            r = space.range()
            begin = r.start if after is None else bytes(space.pack((after,))) + b"\x00"
            ranges.append(Range(reader, begin, r.stop, limit))
        definitions = yield from ranges[0].read()
        states = yield from ranges[1].read()
        by_name = {self.keys.states.unpack(kv.key)[0]: bytes(kv.value) for kv in states}
        out = []
        for kv in definitions:
            name = self.keys.definitions.unpack(kv.key)[0]
            if name in by_name:
                out.append(Entry(name, bytes(kv.value), by_name[name]))
        return out

    def listing(self, tr: Any, limit: int, after: Optional[str]) -> Gen[List[ScheduleInfo]]:
        """:meth:`entries`, as :class:`ScheduleInfo` at this time."""
        now = time.time()
        return [ScheduleInfo.of(e.name, Definition.unpack(e.definition),
                                State.unpack(e.state), now)
                for e in (yield from self.entries(tr, limit, after))]

    def info(self, tr: Any, name: str) -> Gen[Optional[ScheduleInfo]]:
        """Schedule ``name`` as :class:`ScheduleInfo`, or None (snapshot reads)."""
        reader = snap(tr)
        definition = reader.get(self.keys.definition(name))
        state = reader.get(self.keys.state(name))
        found, raw_state = (yield from read(definition)), (yield from read(state))
        if found is None or raw_state is None:
            return None
        return ScheduleInfo.of(name, Definition.unpack(found), State.unpack(raw_state),
                               time.time())
