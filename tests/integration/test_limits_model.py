"""Limits against a plain-Python model (issue 40): random pushes, claims, acks,
releases, extends, expiries and changes of the limits; every claim stays within every
limit as the model counts the jobs running, and at the end every job is delivered and
acked exactly once (none lost behind a parked key, none doubled)."""

from __future__ import annotations

import itertools
from typing import Any, Dict, List

import fdb
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from fdbrecipes import Lease, Limits, Queue, concurrency
from tests.helpers import TestClock

pytestmark = pytest.mark.integration

KEYS = st.sampled_from(["a", "b", "c"])
_spaces = itertools.count()


def key_of(value: Any) -> Any:
    """A job ``(key, number)``'s key."""
    return value[0]


class LimitsMachine(RuleBasedStateMachine):
    """A Queue with a keyed and a global concurrency limit, and the model: the jobs
    pushed, the leases held (with their deadlines) and the limits in force."""

    def __init__(self, db: Any) -> None:
        super().__init__()
        self.db = db
        space = fdb.Subspace(("fdbrecipes-test", "limits-model", next(_spaces)))
        db.clear_range(space.range().start, space.range().stop)
        self.clock = TestClock()
        self.limits = Limits(space["l"], clock=self.clock)
        self.q: Queue[Any] = Queue(space["q"], clock=self.clock,
                                   limits=[self.limits.use("per-key", key=key_of),
                                           self.limits.use("all"), self.limits.use("roomy")])
        self.n = {"per-key": 1, "all": 2, "roomy": 64}  # roomy: read by blocks
        for name, n in self.n.items():
            self.limits.set(db, name, concurrency(n))
        self.pushed: List[Any] = []
        self.held: Dict[Lease[Any], int] = {}  # lease: its deadline (model seconds)
        self.now = 0.0
        self.done: List[Any] = []

    def running(self) -> List[Any]:
        """The jobs under a live lease, as the model knows them."""
        return [lease.value for lease, deadline in self.held.items() if deadline > self.now]

    @rule(key=KEYS)
    def push(self, key: str) -> None:
        value = (key, len(self.pushed))
        self.q.push(self.db, value)
        self.pushed.append(value)

    @rule(n=st.integers(1, 4))
    def claim(self, n: int) -> None:
        leases = self.q.claim_many(self.db, n, 10) if n > 1 else [self.q.claim(self.db, 10)]
        self.held = {held: d for held, d in self.held.items() if d > self.now}
        for lease in leases:
            if lease is None:
                return
            running = self.running()
            key = lease.value[0]
            assert sum(1 for v in running if v[0] == key) < self.n["per-key"], (lease, running)
            assert len(running) < self.n["all"], (lease, running)
            self.held[lease] = self.now + 10

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), how=st.sampled_from(["ack", "release", "extend"]))
    def end(self, data: Any, how: str) -> None:
        lease = data.draw(st.sampled_from(sorted(self.held, key=lambda x: x.value)))
        alive = self.held[lease] > self.now
        if how == "ack":
            if alive:
                self.q.ack(self.db, lease)
                self.done.append(lease.value)
            del self.held[lease]
        elif how == "release":
            assert self.q.release(self.db, lease) == alive
            del self.held[lease]
        elif alive:
            self.q.extend(self.db, lease, 10)
            self.held[lease] = self.now + 10

    @precondition(lambda self: bool(self.held))
    @rule()
    def extend_all(self) -> None:
        """Every lease alive extended in one call (those of one claim together)."""
        alive = [lease for lease, deadline in self.held.items() if deadline > self.now]
        assert all(self.q.extend_many(self.db, alive, 10))
        for lease in alive:
            self.held[lease] = self.now + 10

    @rule(seconds=st.sampled_from([6.0, 11.0]))
    def time_passes(self, seconds: float) -> None:
        """The test clock moves on (leases last 10 s: a lease the model holds alive
        has 4 s of wall-clock time to spare, the cluster's clock moving on too)."""
        self.clock.advance(seconds)
        self.now += seconds

    @rule(name=st.sampled_from(["per-key", "all"]), n=st.integers(1, 4))
    def change(self, name: str, n: int) -> None:
        self.limits.set(self.db, name, concurrency(n))
        self.n[name] = n

    @invariant()
    def the_store_counts_the_running_jobs(self) -> None:
        for name in ("all", "roomy"):
            state = self.limits.state(self.db, name)
            assert state is not None and state.running == len(self.running()), name

    def teardown(self) -> None:
        """Drain: every job pushed is acked exactly once, without the clock moving on:
        each slot freed moves a parked job back, so none waits for its park's
        deadline (the safety net) while the others drain."""
        for lease in list(self.held):
            if self.held[lease] > self.now:
                self.q.ack(self.db, lease)
                self.done.append(lease.value)
        for _ in range(4 * len(self.pushed) + 4):
            if len(self.done) == len(self.pushed):
                break
            got = self.q.claim_many(self.db, 10, 10)
            assert got, "jobs left parked with no slot to free: only their deadline " \
                        "would bring them back"
            for lease in got:
                self.q.ack(self.db, lease)
                self.done.append(lease.value)
        assert sorted(self.done) == sorted(self.pushed)
        assert self.q.size(self.db) == 0


def test_limits_state_machine(db: Any) -> None:
    run_state_machine_as_test(lambda: LimitsMachine(db),
                              settings=settings(max_examples=20, stateful_step_count=30,
                                                deadline=None))
