"""High-contention pops: many poppers served in order by batch fulfilments.

See docs/design.md ("the high-contention protocol").  In short:

1. If nobody is waiting, try a plain pop.  If it conflicts, or others are waiting,
   register a request ``r/(end, ticket, id)`` (ticket from a snapshot read:
   concurrent registrations never conflict) and watch it.
2. The owner of the oldest request fulfils a batch: it takes the first items in
   order, one per request, oldest request first; its own item it keeps, the others
   it holds for their requesters (``h/(request id, ...)``, kind RESULT) with a
   deadline, and it clears the requests, which fires their watches.
3. A served requester collects its held item.  A result nobody collects before its
   deadline goes back to its place in the queue, like an expired lease; a request
   whose owner went silent is served (or dropped) by another waiter.

Every step is a call of the structure's :class:`._run.Loop`, with receipts, so
``commit_unknown_result`` neither loses nor doubles an item.
"""

from __future__ import annotations

import enum
import time
from typing import Any, List, NamedTuple, Optional

from ._fdb import WANT_ALL, first, get_value, le64, read_le64, seconds_to_versions
from ._hooks import Hooks
from ._ordered import RESULT, Ordered
from ._run import Attempt, Loop
from ._values import random_id
from ._wait import wait_on_watch

HC_BATCH = 64  # pop requests one high-contention fulfilment serves at most
HC_BATCH_BYTES = 4_000_000  # value bytes one fulfilment moves at most
HC_FIRST_WAIT = 0.002  # seconds a waiting popper first waits for its request's watch
HC_MAX_WAIT = 0.1  # ... doubling up to this
HC_STALE = 0.5  # seconds after which any waiter serves a request whose owner is silent
HC_CONTENDED = 1.0  # seconds a popper stays in high-contention mode after a conflict


class Outcome(enum.Enum):
    """What one step of a high-contention pop came to."""

    TAKEN = "taken"  # the pop has its value
    EMPTY = "empty"  # the queue is empty: the pop returns None
    WAIT = "wait"  # the request waits (on ``Step.watch``)
    AGAIN = "again"  # this popper served others first: look again at once
    RESTART = "restart"  # the request was dropped: register a new one


class Step(NamedTuple):
    """One step's result: the outcome, the value taken, the request and its watch."""

    outcome: Outcome
    value: Optional[bytes] = None
    request: Optional[bytes] = None
    watch: Any = None


TAKEN_NOTHING = Step(Outcome.EMPTY)
AGAIN = Step(Outcome.AGAIN)
RESTART = Step(Outcome.RESTART)


class Contention:
    """The high-contention pop of one structure object (see the module docstring)."""

    __slots__ = ("contended_until", "hooks", "loop", "o", "result_timeout")

    def __init__(self, engine: Ordered, loop: Loop, hooks: Hooks, result_timeout: int) -> None:
        self.o = engine
        self.loop = loop
        self.hooks = hooks
        self.result_timeout = result_timeout  # in versions
        self.contended_until = 0.0

    def pop(self, db: Any, end: int) -> Optional[bytes]:
        """Pop through the request protocol: the encoded value, or None when empty."""
        while True:
            step = self.loop(db, self.start, end, random_id())
            if step.outcome is Outcome.WAIT:
                assert step.request is not None
                if self.hooks.on_register is not None:
                    self.hooks.on_register(step.request)
                step = self.wait(db, end, step)
            if step.outcome is not Outcome.RESTART:
                return step.value

    def contended(self) -> bool:
        """Whether this popper saw contention in the last :data:`HC_CONTENDED` seconds."""
        recent = max(self.contended_until, self.loop.stats.last_conflict + HC_CONTENDED)
        return self.hooks.contended or time.monotonic() < recent

    def start(self, tr: Any, attempt: Attempt, end: int, rid: bytes) -> Step:
        """Pop at once, or register request ``rid`` and watch it."""
        contended = self.contended()
        r = self.o.k.requests.range((end,))
        waiting = tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True)
        entries, extra, now = self.o.front(tr, end, 1, snapshot=contended)
        last = first(waiting)
        if not entries or (last is None and not contended):
            taken = self.o.pop_entries(tr, attempt, entries, extra, now)
            return Step(Outcome.TAKEN, taken[0]) if taken else TAKEN_NOTHING
        self.contended_until = time.monotonic() + HC_CONTENDED
        ticket = 0 if last is None else self.o.k.requests.unpack(last.key)[1] + 1
        req_key = self.o.k.request_key(end, ticket, rid)
        tr.set(req_key, le64(now))
        return Step(Outcome.WAIT, request=req_key, watch=tr.watch(req_key))

    def wait(self, db: Any, end: int, step: Step) -> Step:
        """Wait for request ``step.request`` to be served, serving others meanwhile."""
        assert step.request is not None
        rid = self.o.k.requests.unpack(step.request)[2]
        delay = 0.0
        watch = step.watch
        while True:
            if delay > 0 and watch is not None:
                wait_on_watch(watch, delay, self.hooks)
            delay = min(max(delay * 2, HC_FIRST_WAIT), HC_MAX_WAIT)
            step = self.loop(db, self.check, end, rid, step.request)
            if step.outcome is Outcome.AGAIN:
                delay = 0.0
            elif step.outcome is not Outcome.WAIT:
                return step
            watch = step.watch

    def check(self, tr: Any, attempt: Attempt, end: int, rid: bytes, req_key: bytes) -> Step:
        """One look at a waiting request: collect its result, serve a batch, or wait."""
        mine = tr.get(req_key)
        h = self.o.k.held.range((rid,))
        result = tr.get_range(h.start, h.stop, limit=1)
        r = self.o.k.requests.range((end,))
        queue = tr.snapshot.get_range(r.start, r.stop, limit=HC_BATCH, streaming_mode=WANT_ALL)
        kv = first(result)
        if kv is not None:  # served: collect the item held for us
            _, item, deadline, kind = self.o.k.held.unpack(kv.key)
            now = self.o.clock(tr)
            tr.clear(kv.key)
            tr.clear(self.o.k.due_key(rid, item, deadline, kind))
            self.o.gone(tr, item, 1, now)
            return Step(Outcome.TAKEN, kv.value)
        if get_value(mine) is None:
            attempt.idle = True
            return RESTART  # dropped: the queue ran empty, or we were too slow
        requests = list(queue)
        now = self.o.clock(tr)
        oldest = requests[0] if requests else None
        if oldest is None or (
            oldest.key != req_key
            and now - read_le64(oldest.value) <= seconds_to_versions(HC_STALE)
        ):
            attempt.idle = True
            return Step(Outcome.WAIT, request=req_key, watch=tr.watch(req_key))
        return self.fulfil(tr, end, requests, rid, now)

    def fulfil(self, tr: Any, end: int, requests: List[Any], rid: bytes, now: int) -> Step:
        """Serve waiting requests in order with the first items in order."""
        entries, extra, _ = self.o.front(tr, end, len(requests), snapshot=True)
        self.o.put_back(tr, extra)
        outcome = AGAIN
        moved = 0
        served = 0
        for request in requests:
            _, _, owner = self.o.k.requests.unpack(request.key)
            silent = now - read_le64(request.value) > self.result_timeout
            if served < len(entries) and not (silent and owner != rid):
                entry = entries[served]
                if moved > 0 and moved + len(entry.value) > HC_BATCH_BYTES:
                    break  # the rest wait for the next batch
                moved += len(entry.value)
                served += 1
                item = self.o.take(tr, entry)
                if owner == rid:
                    self.o.gone(tr, item, 1, now)
                    outcome = Step(Outcome.TAKEN, entry.value)
                else:
                    self.o.hold(tr, item, entry.value, owner, now + self.result_timeout,
                                RESULT)
            elif owner == rid:
                outcome = TAKEN_NOTHING  # nothing left for us: the pop finds it empty
            # Served, or dropped: nothing left for it (its pop finds the queue empty)
            # or its owner has been silent longer than a result is kept.
            tr.add_read_conflict_key(request.key)
            tr.clear(request.key)
        return outcome
