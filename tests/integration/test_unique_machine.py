"""Unique keys against a plain-Python model (issue 40): random pushes with each
``covers`` and ``on_conflict``, with and without delays, claims, acks, releases (dead
on the second delivery), pops and the clock's steps; after every step each key's holder
(``unique_job``) and the visible order agree with the model.  Leases outlive the run
(a lease that expired but was not put back yet counts as running: left to the kill
test), so the model stays exact."""

from __future__ import annotations

import uuid
from typing import Any, Dict, List, Optional

import fdb
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from fdbrecipes import Lease, Queue, Unique, UniqueConflictError
from tests.helpers import TestClock

pytestmark = pytest.mark.integration

#: Seconds on the test clock: steps of STEP, delays and the window odd multiples of
#: 1,000, so no deadline falls on a step.
STEP = 2_000
WINDOW = 3_000
LEASE = 10**7
COVERS = {"a": "running", "b": "queued", "c": "finished"}


def unique(key: str, on_conflict: str) -> Unique:
    covers = COVERS[key]
    return Unique(key, covers=covers, window=WINDOW if covers == "finished" else None,
                  on_conflict=on_conflict)


class Job:
    def __init__(self, id_: Optional[bytes], key: Optional[str], value: int, place: int,
                 visible_at: int) -> None:
        self.id, self.key, self.value, self.place = id_, key, value, place
        self.visible_at = visible_at
        self.state = "waiting"  # waiting (pending or delayed), running, gone
        self.deliveries = 0


class UniqueMachine(RuleBasedStateMachine):
    leases = Bundle("leases")

    def __init__(self, db: Any) -> None:
        super().__init__()
        self.db = db
        self.space = fdb.Subspace(("fdbrecipes-test", "unique-machine", uuid.uuid4().hex))
        self.clock = TestClock()
        self.q: Queue[int] = Queue(self.space, clock=self.clock, max_deliveries=2)
        self.now = 0
        self.places = 0
        self.jobs: List[Job] = []
        self.running: Dict[bytes, Job] = {}  # lease token -> job
        #: key -> (holder's id, when it finished or None)
        self.holders: Dict[str, tuple[bytes, Optional[int]]] = {}

    def teardown(self) -> None:
        r = self.space.range()
        self.db.clear_range(r.start, r.stop)

    # -- the model ----------------------------------------------------------------------

    def holder(self, key: str) -> Optional[bytes]:
        held = self.holders.get(key)
        if held is None:
            return None
        job, finished = held
        if finished is not None and finished + WINDOW <= self.now:
            return None
        return job

    def job(self, id_: bytes) -> Job:
        return next(j for j in self.jobs if j.id == id_)

    def visible(self) -> List[Job]:
        return sorted((j for j in self.jobs if j.state == "waiting" and j.visible_at <= self.now),
                      key=lambda j: j.place)

    def left(self, job: Job) -> None:
        """``job`` left the queue (acked, popped, dead)."""
        job.state = "gone"
        if job.key is None or self.holders.get(job.key, (None,))[0] != job.id:
            return
        if COVERS[job.key] == "finished":
            self.holders[job.key] = (self.holders[job.key][0], self.now)
        else:
            del self.holders[job.key]

    def started(self, job: Job) -> None:
        job.state = "running"
        job.deliveries += 1
        if job.key is not None and COVERS[job.key] == "queued" and \
                self.holders.get(job.key, (None,))[0] == job.id:
            del self.holders[job.key]

    # -- rules ----------------------------------------------------------------------------

    @rule(key=st.sampled_from(sorted(COVERS)), value=st.integers(0, 99),
          on_conflict=st.sampled_from(["skip", "raise", "replace"]),
          delay=st.sampled_from([None, 1_000]))
    def push_unique(self, key: str, value: int, on_conflict: str,
                    delay: Optional[int]) -> None:
        held = self.holder(key)
        spec = unique(key, on_conflict)
        if held is not None and on_conflict == "raise":
            with pytest.raises(UniqueConflictError) as caught:
                self.q.push(self.db, value, unique=spec, delay=delay)
            assert caught.value.job == held
            return
        got = self.q.push(self.db, value, unique=spec, delay=delay)
        if held is None:
            assert got is not None and all(j.id != got for j in self.jobs)
            self.places += 1
            self.jobs.append(Job(got, key, value, self.places, self.now + (delay or 0)))
            self.holders[key] = (got, None)
            return
        assert got == held
        job = self.job(held)
        if on_conflict == "replace" and job.state == "waiting":
            job.value, job.visible_at = value, self.now + (delay or 0)

    @rule(value=st.integers(100, 199))
    def push_plain(self, value: int) -> None:
        self.q.push(self.db, value)
        self.places += 1
        self.jobs.append(Job(None, None, value, self.places, self.now))

    @rule(target=leases)
    def claim(self) -> Any:
        visible = self.visible()
        lease = self.q.claim(self.db, LEASE)
        if not visible:
            assert lease is None
            return multiple()
        assert lease is not None and lease.value == visible[0].value
        if visible[0].id is not None:
            assert lease.id == visible[0].id
        self.started(visible[0])
        self.running[lease.token] = visible[0]
        return lease

    @rule()
    def pop(self) -> None:
        visible = self.visible()
        got = self.q.pop(self.db)
        assert got == (visible[0].value if visible else None)
        if visible:
            self.started(visible[0])
            self.left(visible[0])

    @rule(lease=consumes(leases))
    def ack(self, lease: Lease[int]) -> None:
        self.q.ack(self.db, lease)
        self.left(self.running.pop(lease.token))

    @rule(lease=consumes(leases), delay=st.sampled_from([None, 1_000]))
    def release(self, lease: Lease[int], delay: Optional[int]) -> None:
        assert self.q.release(self.db, lease, delay=delay)
        job = self.running.pop(lease.token)
        if job.deliveries >= 2:
            self.left(job)  # its last delivery: a dead letter
        else:
            job.state, job.visible_at = "waiting", self.now + (delay or 0)

    @rule()
    def advance(self) -> None:
        self.clock.advance(STEP)
        self.now += STEP

    @invariant()
    def agrees(self) -> None:
        for key in COVERS:
            assert self.q.unique_job(self.db, key) == self.holder(key), key
        assert self.q.items(self.db) == [j.value for j in self.visible()]


def test_unique_keys_follow_the_model(fdb_database: Any) -> None:
    run_state_machine_as_test(lambda: UniqueMachine(fdb_database),
                              settings=settings(max_examples=20, stateful_step_count=30,
                                                deadline=None))
