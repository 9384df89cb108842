"""Firing stored schedules, in every worker carrying the store: leaderless, each slot
exactly once.

A :class:`Firing` runs beside a worker's other tasks (:mod:`fdbrecipes._worker.core`):

* it writes the worker's code-defined schedules into the store (``upsert``), then
  reads every schedule, and again each time the store's change counter moves: it
  waits on a watch of that counter (no polling), so an add, a pause, a resume, a
  run-now request or a removal reaches it as soon as it commits;
* it sleeps until the next slot of a schedule whose target it knows (its own queue,
  its code-defined schedules' queues, the store's ``targets``) or until that watch
  fires, whichever is first: an idle worker with 1,000 schedules costs one watch;
* when slots are due, it fires them in transactions of up to :data:`FIRE_BATCH`
  schedules (:func:`fire`), starting at a batch drawn at random, so workers waking
  together mostly fire different schedules.  A fire reads each schedule's state with
  a conflict, pushes the due jobs into their targets and writes the slot fired, all in
  one transaction: two workers firing the same slot conflict, and the one that retries
  reads that the slot is fired and pushes nothing.  A pause, a change or a removal
  commits before the fire (which then sees it) or conflicts with it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple

from .._attempt import Attempt
from .._drivers.awaiting import drive
from .._fdb import Gen, read
from .._values import Value
from ..protocol import Workable
from ..schedule import Schedule, check_retention
from .cron import Rule
from .ops import ScheduleOps, Stored
from .records import (
    RUN_NOW,
    Definition,
    ScheduleFire,
    State,
    jitter_of,
    now_job_id,
    plan,
    slot_job_id,
)

__all__ = ["FIRE_BATCH", "Fired", "Firing", "Planned", "fire", "firing_of"]

log = logging.getLogger("fdbrecipes.worker")

#: Schedules one fire transaction fires at most.
FIRE_BATCH = 50
#: Seconds a wait for changes lasts before it is set again (a wait, not a poll: a
#: change wakes it at once).
CHANGES_WAIT = 60.0
#: Seconds to wait after a failed read of the store.
RETRY_AFTER = 1.0
#: Seconds before a schedule whose fire failed is tried again.
FAILED_BACKOFF = 10.0
#: Seconds before a schedule is looked at again when a fire found nothing to do but it
#: still seems due (never, if the rules agree with themselves: a guard against a spin).
RECHECK = 1.0


class Planned(NamedTuple):
    """A schedule a worker means to fire: as it last read it, and where it pushes."""

    name: str
    revision: int
    definition: Definition
    rule: Rule
    value: Value
    target: Workable[Any]


class Fired(NamedTuple):
    """What a fire found and did for one schedule: its state after the fire (None:
    it was removed), the jobs it pushed, and whether its definition changed since
    the worker read it (``stale``: it pushed nothing; read the store again)."""

    name: str
    state: Optional[State]
    fires: Tuple[ScheduleFire, ...]
    stale: bool


def push(tr: Any, planned: Planned, job_id: bytes, slot: float, now: float,
         how: str) -> Gen[ScheduleFire]:
    """Push one job of ``planned`` in ``tr`` (a slot's delayed by its jitter, a run-now
    request's at once); the fire it makes."""
    definition = planned.definition
    delay = None if how == RUN_NOW else jitter_of(job_id, definition.jitter) or None
    yield from planned.target.push_job(tr, planned.value, id=job_id, delay=delay,
                                       limit_keys=definition.limit_keys_args,
                                       **definition.where_args)
    return ScheduleFire(slot, now, job_id, how)


def fire(tr: Any, attempt: Attempt, ops: ScheduleOps,
         planned: Sequence[Planned]) -> Gen[List[Fired]]:
    """Fire what is due of each schedule of ``planned`` now: its due slots (as
    :func:`.records.plan` says) and its run-now requests, each a job pushed into its
    target, and its new state written.  Reads every state with a conflict (side by
    side: one round trip), then pushes one job after the other (each push's reads,
    one round trip)."""
    now = time.time()
    store = ops.store
    futures = [tr.get(store.keys.state(p.name)) for p in planned]
    out: List[Fired] = []
    wrote = False
    for p, future in zip(planned, futures):
        raw = yield from read(future)
        if raw is None:
            out.append(Fired(p.name, None, (), False))
            continue
        state = State.unpack(raw)
        if state.revision != p.revision:
            out.append(Fired(p.name, state, (), True))
            continue
        slots, last = plan(p.rule, p.definition, state, now)
        if last is None and not state.requests:
            out.append(Fired(p.name, state, (), False))
            continue
        fires = []
        for slot, how in slots:
            fires.append((yield from push(tr, p, slot_job_id(p.name, slot), slot, now, how)))
        for request, asked in state.requests:
            fires.append((yield from push(tr, p, now_job_id(p.name, request), asked, now,
                                          RUN_NOW)))
        state = store.fired(tr, p.name, state._replace(
            last=state.last if last is None else last, requests=(),
            fires=state.fires + tuple(fires)))
        wrote = True
        out.append(Fired(p.name, state, tuple(fires), False))
    attempt.idle = not wrote
    return out


class Cached(NamedTuple):
    """A schedule as this worker last read it."""

    raw: bytes
    definition: Definition
    rule: Rule
    value: Value
    state: State


class Firing:
    """Fires the schedules of a store that a worker can (see the module docstring).

    Args:
        ops: the store's operations.
        db: the database.
        own: the structures the worker knows besides the store's ``targets``: its
            queue's operations, and its code-defined schedules'.
        declared: its code-defined schedules given by ``every`` or ``cron``, written
            into the store when it starts.
    """

    def __init__(self, ops: ScheduleOps, db: Any, own: Iterable[Workable[Any]],
                 declared: Sequence[Stored]) -> None:
        self.ops = ops
        self.db = db
        self.targets: Dict[bytes, Workable[Any]] = {bytes(o.subspace.key()): o for o in own}
        self.targets.update(ops.targets)
        self.declared = list(declared)
        self.version = -1  # the change counter when the store was last read
        self.cached: Dict[str, Cached] = {}
        self.due: Dict[str, float] = {}  # what this worker fires: when to look next
        self.unknown: Set[str] = set()  # schedules whose target it does not know (logged)

    # -- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        """Declare, read the store, and fire until cancelled."""
        await self.declare()
        watch: Optional[asyncio.Future[bool]] = None
        try:
            while True:
                try:
                    if watch is None or watch.done():
                        if watch is None or watch.result():
                            await self.load()
                        watch = asyncio.ensure_future(drive(self.ops.wait_changed(
                            self.db, self.version, CHANGES_WAIT)))
                    await self.fire_due()
                    await asyncio.wait({watch}, timeout=self.until_due())
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("firing schedules failed; trying again in %s s",
                                  RETRY_AFTER)
                    watch = None
                    await asyncio.sleep(RETRY_AFTER)
        finally:
            if watch is not None and not watch.done():
                watch.cancel()
                await asyncio.wait({watch})

    async def declare(self) -> None:
        """Write the worker's code-defined schedules into the store (each unless it
        says the same already)."""
        for stored in self.declared:
            try:
                if await drive(self.ops.upsert(self.db, stored)):
                    log.info("schedule %r written into the store", stored.name)
            except Exception:
                log.exception("writing schedule %r into the store failed", stored.name)

    def until_due(self) -> float:
        """Seconds until the next schedule this worker fires is due (at most
        :data:`CHANGES_WAIT`)."""
        soonest = min(self.due.values(), default=time.time() + CHANGES_WAIT)
        return max(0.0, min(CHANGES_WAIT, soonest - time.time()))

    # -- reading the store -------------------------------------------------------------

    async def load(self) -> None:
        """Read every schedule (and the change counter first: a change after it makes
        the watch fire at once, and the store is read again)."""
        version = await drive(self.ops.version(self.db))
        entries = await drive(self.ops.entries(self.db))
        cached: Dict[str, Cached] = {}
        for entry in entries:
            old = self.cached.get(entry.name)
            try:
                if old is not None and old.raw == entry.definition:
                    definition, rule, value = old.definition, old.rule, old.value
                else:
                    definition = Definition.unpack(entry.definition)
                    rule, value = definition.rule(), definition.job_value
            except Exception as e:  # a format, an expression or a zone this worker lacks
                self.once(entry.name, logging.ERROR,
                          f"schedule {entry.name!r} cannot be fired by this worker: {e}")
                continue
            cached[entry.name] = Cached(entry.definition, definition, rule, value,
                                        State.unpack(entry.state))
        self.cached, self.version = cached, version
        self.due = {}
        for name, c in cached.items():
            if c.definition.target not in self.targets:
                self.once(name, logging.INFO, f"schedule {name!r} pushes into a structure "
                          "this worker does not serve: workers that know it fire it")
                continue
            try:
                self.reckon(name, c.state)
            except Exception as e:  # its expression matches no time to come
                self.once(name, logging.ERROR, f"schedule {name!r} cannot be fired: {e}")

    def once(self, name: str, level: int, message: str) -> None:
        """Log ``message`` about schedule ``name``, the first time only."""
        if name not in self.unknown:
            self.unknown.add(name)
            log.log(level, "%s", message)

    def reckon(self, name: str, state: State) -> None:
        """Keep ``state`` as schedule ``name``'s, and when to fire it next."""
        cached = self.cached[name] = self.cached[name]._replace(state=state)
        due = time.time() if state.requests else state.due(cached.rule)
        if due is None:
            self.due.pop(name, None)
        else:
            self.due[name] = due

    # -- firing --------------------------------------------------------------------------

    async def fire_due(self) -> None:
        """Fire every schedule due now, in batches of :data:`FIRE_BATCH`, the first
        drawn at random."""
        now = time.time()
        names = sorted(name for name, at in self.due.items() if at <= now)
        if not names:
            return
        batches = [names[i:i + FIRE_BATCH] for i in range(0, len(names), FIRE_BATCH)]
        start = random.randrange(len(batches))
        for batch in batches[start:] + batches[:start]:
            await self.fire_batch(batch)

    async def fire_batch(self, names: List[str]) -> None:
        """Fire ``names`` in one transaction; if it fails, each alone, and a schedule
        that fails alone is tried again after :data:`FAILED_BACKOFF`."""
        planned = []
        for name in names:
            c = self.cached.get(name)
            if c is not None and name in self.due:
                planned.append(Planned(name, c.state.revision, c.definition, c.rule,
                                       c.value, self.targets[c.definition.target]))
        if not planned:
            return
        try:
            results = await drive(self.ops.loop(self.db, fire, self.ops, planned))
        except Exception:
            if len(planned) > 1:
                for p in planned:
                    await self.fire_batch([p.name])
                return
            log.exception("firing schedule %r failed; trying again in %s s", planned[0].name,
                          FAILED_BACKOFF)
            self.due[planned[0].name] = time.time() + FAILED_BACKOFF
            return
        for result in results:
            self.settle(result)

    def settle(self, result: Fired) -> None:
        """Keep what a fire found of one schedule."""
        if result.state is None:  # removed meanwhile
            self.cached.pop(result.name, None)
            self.due.pop(result.name, None)
        elif result.stale:  # changed: the watch fires, the store is read again
            self.due.pop(result.name, None)
        else:
            self.reckon(result.name, result.state)
            due = self.due.get(result.name)
            if not result.fires and due is not None and due <= time.time():
                # nothing came of a fire and the schedule still seems due: look later
                self.due[result.name] = time.time() + RECHECK


def firing_of(db: Any, served: Sequence[Workable[Any]], schedules: Sequence[Any],
              store: Any) -> Tuple[Optional[Firing], List[Schedule]]:
    """What a worker serving the structures of ``served`` (their ``ops``) does with its
    ``schedules`` and its ``schedule_store``: the :class:`Firing` of the store (None
    without one), and the
    schedules it pushes itself (all of them without a store; with one, those given by
    ``at=``), whose queues must remember ids for a period.

    Raises:
        TypeError or ValueError: a schedule is not a Schedule, the store is not a
            schedule store, or a queue forgets ids too soon.
    """
    for i, schedule in enumerate(schedules):
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedules[{i}] must be a Schedule")
    if store is not None and not isinstance(getattr(store, "ops", None), ScheduleOps):
        raise TypeError(f"schedule_store must be a Schedules (or an AsyncSchedules), not "
                        f"{type(store).__name__}")
    stored = [s for s in schedules if store is not None and s.storable]
    local = [s for s in schedules if store is None or not s.storable]
    check_retention(local, time.time())
    if store is None:
        return None, local
    own = [*served, *(s.ops for s in schedules)]
    return Firing(store.ops, db, own, [s.stored() for s in stored]), local
