"""What a schedule store keeps about each schedule, and the values its calls return.

A schedule is two keys (see :class:`fdbrecipes._store_layout.ScheduleLayout`): its
:class:`Definition` (what it pushes, where, when), written when it is added or
changed, and its :class:`State` (paused or not, the last slot fired, run-now requests,
the latest fires), written at each change and each fire.  :class:`ScheduleInfo` is a
schedule as a listing shows it, :class:`ScheduleFire` one of its fires, :class:`CatchUp`
its misfire policy.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

import fdb.tuple

from .._values import Value, check_int, decode_value
from .cron import Rule, rule_of

__all__ = ["MAX_CATCH_UP", "SKIP", "CatchUp", "Definition", "ScheduleFire", "ScheduleInfo",
           "State", "catch_up", "jitter_of", "now_job_id", "slot_job_id"]

#: The layout version both values start with.
FORMAT = 1
#: The misfire policy that fires no missed slot.
SKIP = "skip"
#: Most missed slots a ``catch_up`` fires at once.
MAX_CATCH_UP = 1_000
#: Most slots on time one fire of a schedule fires (a worker far behind a schedule of
#: tiny periods with a long grace fires the latest).
MAX_ON_TIME = 1_000
#: How a fire came about: the slot on time, a missed slot caught up, a run-now request.
ON_TIME, CAUGHT_UP, RUN_NOW = "slot", "caught up", "run now"


def _pack(parts: Tuple[Any, ...]) -> bytes:
    packed: bytes = fdb.tuple.pack(parts)
    return packed


class CatchUp(NamedTuple):
    """The misfire policy firing the latest ``n`` missed slots (see :func:`catch_up`)."""

    n: int

    def __str__(self) -> str:
        return f"catch_up({self.n})"


def catch_up(n: int) -> CatchUp:
    """The misfire policy that fires the ``n`` latest slots missed while no worker
    fired the schedule (oldest first, each its own job), instead of skipping them.

    Raises:
        TypeError or ValueError: ``n`` is not an int from 1 to 1,000 (``MAX_CATCH_UP``).
    """
    return CatchUp(check_int(n, "catch_up", low=1, high=MAX_CATCH_UP))


Misfire = Union[str, CatchUp]


def slot_job_id(name: str, slot: float) -> bytes:
    """The id of the job of schedule ``name``'s slot at ``slot`` (epoch seconds): the
    same as :meth:`fdbrecipes.Schedule.slot_id`, so a slot is one job whichever way
    it was fired."""
    return _pack(("fdbrecipes-schedule", name, repr(float(slot))))


def now_job_id(name: str, request: bytes) -> bytes:
    """The id of the job of schedule ``name``'s run-now request ``request``."""
    return _pack(("fdbrecipes-schedule", name, "now", request))


def jitter_of(job_id: bytes, jitter: float) -> float:
    """The delay of the job ``job_id`` of a schedule with ``jitter`` seconds: drawn
    from its id, in ``[0, jitter)``, so every worker would give a slot the same one."""
    if not jitter:
        return 0.0
    draw = int.from_bytes(hashlib.blake2b(job_id, digest_size=8).digest(), "big")
    return draw / 2.0**64 * jitter


class Definition(NamedTuple):
    """What a schedule pushes, where and when.

    Attributes:
        cron, tz: the cron expression and its time zone (or None: ``every``).
        every: the period in seconds (or None: ``cron``).
        target: the key of the subspace of the structure its jobs go to.
        where: where in it: ``(("priority", p),)``, ``(("group", g),)`` or ``()``.
        value: the jobs' value, tuple-encoded.
        catch_up: missed slots fired after a downtime (0: ``skip``).
        grace: seconds a slot may be late and still fire as on time.
        jitter: the jobs are delayed by up to this many seconds.
        created_at: when it was added (wall-clock seconds).
        limit_keys: the jobs' keys under the target's limits (``(name, key)`` pairs in
            name order; ``()``: none given), stored after ``created_at`` (a definition
            written without them reads as ``()``).
    """

    cron: Optional[str]
    tz: Optional[str]
    every: Optional[float]
    target: bytes
    where: Tuple[Tuple[str, Any], ...]
    value: bytes
    catch_up: int
    grace: float
    jitter: float
    created_at: float
    limit_keys: Tuple[Tuple[str, Any], ...] = ()

    def pack(self) -> bytes:
        keys = (tuple(tuple(pair) for pair in self.limit_keys),) if self.limit_keys else ()
        return _pack((FORMAT, *self[:4], tuple(tuple(pair) for pair in self.where),
                      *self[5:10], *keys))

    @classmethod
    def unpack(cls, raw: bytes) -> Definition:
        parts = fdb.tuple.unpack(raw)
        if parts[:1] != (FORMAT,):
            raise ValueError(f"a schedule definition of an unknown format ({parts[:1]})")
        cron, tz, every, target, where, value, n, grace, jitter, created = parts[1:11]
        keys = tuple(tuple(pair) for pair in parts[11]) if len(parts) > 11 else ()
        return cls(cron, tz, every, target, tuple(tuple(pair) for pair in where), value, n,
                   grace, jitter, created, keys)

    def same(self, other: Definition) -> bool:
        """Whether ``other`` says the same (when it was added aside)."""
        return self._replace(created_at=0.0) == other._replace(created_at=0.0)

    def rule(self) -> Rule:
        return rule_of(self.cron, self.tz, self.every)

    @property
    def misfire(self) -> Misfire:
        return CatchUp(self.catch_up) if self.catch_up else SKIP

    @property
    def job_value(self) -> Value:
        return decode_value(self.value)

    @property
    def where_args(self) -> Dict[str, Any]:
        return dict(self.where)

    @property
    def limit_keys_args(self) -> Optional[Dict[str, Any]]:
        """The jobs' ``limit_keys`` as a push takes them (None: none given)."""
        return dict(self.limit_keys) if self.limit_keys else None


class ScheduleFire(NamedTuple):
    """One job a schedule pushed.

    Attributes:
        slot: the slot it was for (epoch seconds; a run-now request's: when it was
            asked).
        fired_at: when it was pushed (the pushing worker's clock).
        job_id: its id in the target structure.
        how: ``"slot"`` (on time), ``"caught up"`` (a missed slot, by ``catch_up``)
            or ``"run now"``.
    """

    slot: float
    fired_at: float
    job_id: bytes
    how: str


class State(NamedTuple):
    """What a schedule's fires and changes left.

    Attributes:
        revision: counts the changes of its definition (a worker that fires it with an
            older definition in mind reads it again instead).
        paused_at: when it was paused, or None.
        since: no slot at or before this time fires (when it was added, changed or
            resumed).
        last: the last slot fired or skipped, or None.
        requests: run-now requests not fired yet: ``(request id, asked at)`` pairs.
        fires: its latest fires, oldest first.
    """

    revision: int
    paused_at: Optional[float]
    since: float
    last: Optional[float]
    requests: Tuple[Tuple[bytes, float], ...]
    fires: Tuple[ScheduleFire, ...]

    def pack(self) -> bytes:
        return _pack((FORMAT, self.revision, self.paused_at, self.since, self.last,
                      tuple(tuple(r) for r in self.requests),
                      tuple(tuple(f) for f in self.fires)))

    @classmethod
    def unpack(cls, raw: bytes) -> State:
        parts = fdb.tuple.unpack(raw)
        if parts[:1] != (FORMAT,):
            raise ValueError(f"a schedule state of an unknown format ({parts[:1]})")
        revision, paused_at, since, last, requests, fires = parts[1:7]
        return cls(revision, paused_at, since, last, tuple(tuple(r) for r in requests),
                   tuple(ScheduleFire(*f) for f in fires))

    @property
    def start(self) -> float:
        """Slots after this time may fire: after the last one fired, and ``since``."""
        return self.since if self.last is None else max(self.since, self.last)

    def due(self, rule: Rule) -> Optional[float]:
        """The next slot to fire (perhaps past), or None while paused."""
        return None if self.paused_at is not None else rule.next_slot(self.start)


def plan(rule: Rule, definition: Definition, state: State,
         now: float) -> Tuple[List[Tuple[float, str]], Optional[float]]:
    """The slots to fire at ``now`` (each with how: on time or caught up), and the
    last slot they consume (fired or skipped; None: none is due).

    The due slots are those in ``(state.start, now]``.  Those less than ``grace``
    seconds late fire, on time (a worker running behind fires each: at most
    :data:`MAX_ON_TIME`, the latest); the others were missed: ``skip`` fires none of
    them, ``catch_up(n)`` the latest ``n``, oldest first, before those on time.
    """
    if state.paused_at is not None:
        return [], None
    latest = rule.last_slots(now, state.start, 1)
    if not latest:
        return [], None
    horizon = now - definition.grace
    on_time = rule.last_slots(now, max(state.start, horizon), MAX_ON_TIME)
    missed = (rule.last_slots(horizon, state.start, definition.catch_up)
              if definition.catch_up and horizon > state.start else [])
    return ([(slot, CAUGHT_UP) for slot in missed]
            + [(slot, ON_TIME) for slot in on_time]), latest[-1]


class ScheduleInfo(NamedTuple):
    """A stored schedule, as :meth:`fdbrecipes.Schedules.list` reads it.

    Attributes:
        name: its name.
        cron, tz: its cron expression and time zone (None for ``every``).
        every: its period in seconds (None for ``cron``).
        target: the key of the subspace of the structure its jobs go to.
        where: where in it (``priority``, a FairQueue's ``group``), as keyword
            arguments of a push.
        value: the jobs' value.
        misfire: ``"skip"`` or a :class:`CatchUp`.
        grace: seconds a slot may be late and still fire as on time.
        jitter: the jobs are delayed by up to this many seconds.
        created_at: when it was added.
        paused_at: when it was paused, or None.
        last_slot: the last slot fired or skipped, or None.
        next_at: the next slot to fire (in the past when it is late), or None while
            paused.
        lag: seconds ``next_at`` is past, when it read (0 when not late, or paused).
        fires: its latest fires, oldest first (:class:`ScheduleFire`).
        requested: run-now requests waiting for a worker.
        limit_keys: the jobs' keys under the target's limits, as a push takes them
            (empty: none given).
    """

    name: str
    cron: Optional[str]
    tz: Optional[str]
    every: Optional[float]
    target: bytes
    where: Dict[str, Any]
    value: Value
    misfire: Misfire
    grace: float
    jitter: float
    created_at: float
    paused_at: Optional[float]
    last_slot: Optional[float]
    next_at: Optional[float]
    lag: float
    fires: Tuple[ScheduleFire, ...]
    requested: int
    limit_keys: Dict[str, Any]

    @classmethod
    def of(cls, name: str, definition: Definition, state: State, now: float) -> ScheduleInfo:
        """The schedule ``name`` stored as ``definition`` and ``state``, at ``now``."""
        due = state.due(definition.rule())
        return cls(name, definition.cron, definition.tz, definition.every, definition.target,
                   definition.where_args, definition.job_value, definition.misfire,
                   definition.grace, definition.jitter, definition.created_at,
                   state.paused_at, state.last, due,
                   0.0 if due is None else max(0.0, now - due), state.fires,
                   len(state.requests), dict(definition.limit_keys))
