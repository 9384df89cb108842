"""Unique keys against a plain-Python model (issue 40): random pushes with each
``covers`` and ``on_conflict``, with and without delays, claims (with leases that
outlive the run, or end after one or two of the clock's steps), acks, releases and
burials (dead on the second delivery), pops, ``requeue_dead`` and the clock's steps;
after every step each key's holder (``unique_job``) and the visible order agree with
the model.  A lease
that ended counts as visible again at its place (or, on its last delivery, as dying,
its job still holding its key) until the next claim or pop meets it and puts it back
(then a replace finds it) or buries it (then its key is free); an ack, release or
burial of it is refused.  A requeued dead job takes its key back when the key is free
or names it, else runs beside the holder without it; one that finishes so, covering
"finished", while the entry is absent or holds another's finish leaves one of the two
finishes (the server's choice: the model learns which from ``unique_job``)."""

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

from fdbrecipes import Lease, LeaseExpiredError, Queue, Unique, UniqueConflictError
from tests.helpers import TestClock

pytestmark = pytest.mark.integration

#: Seconds on the test clock: steps of STEP, delays and the window odd multiples of
#: 1,000, so no deadline falls on a step.
STEP = 2_000
WINDOW = 3_000
LEASE = 10**7
#: A lease that ends after one or two steps (an odd multiple of 1,000 too).
SHORT = 3_000
#: The structure's max_deliveries: a lease that ends on a job's second delivery kills it.
DELIVERIES = 2
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
        self.deadline = 0  # while running: when its lease ends
        self.claimed = 0  # while running: the turn of its claim (see UniqueMachine.turn)
        self.died = (0, 0)  # while dead: when it died, and the turn that buried it

class UniqueMachine(RuleBasedStateMachine):
    leases = Bundle("leases")

    def __init__(self, db: Any) -> None:
        super().__init__()
        self.db = db
        self.space = fdb.Subspace(("fdbrecipes-test", "unique-machine", uuid.uuid4().hex))
        self.clock = TestClock()
        self.turns = 0
        self.q: Queue[int] = Queue(self.space, clock=self.clock,
                                     max_deliveries=DELIVERIES)
        self.now = 0
        self.places = 0
        self.jobs: List[Job] = []
        self.running: Dict[bytes, Job] = {}  # lease token -> job
        #: key -> (holder's id, when it finished or None)
        self.holders: Dict[str, tuple[bytes, Optional[int]]] = {}
        self.dead: List[Job] = []
        #: key -> the finishes of jobs that did not hold it, one of which the server
        #: may have kept instead of the holders' entry (see ``left``)
        self.either: Dict[str, List[tuple[bytes, int]]] = {}

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

    def ended(self, job: Job) -> bool:
        """Whether ``job`` runs under a lease that ended (no writer met it yet)."""
        return job.state == "running" and self.now > job.deadline

    def visible(self) -> List[Job]:
        """The jobs a claim would take, in order: waiting ones whose delay passed and
        those whose lease ended before their last delivery (visible again at their
        places, though still under their holds)."""
        return sorted((j for j in self.jobs
                       if (j.state == "waiting" and j.visible_at <= self.now)
                       or (self.ended(j) and j.deliveries < DELIVERIES)),
                      key=lambda j: j.place)

    def settle(self) -> None:
        """A claim or pop met the leases that ended: each job goes back to its place
        (visible since its lease's end) or, on its last delivery, to the dead letters
        (its key free, or finished now)."""
        for token, job in list(self.running.items()):
            if self.ended(job):
                del self.running[token]
                if job.deliveries >= DELIVERIES:
                    self.died(job, job.deadline, job.claimed)  # its lease's end
                else:
                    job.state, job.visible_at = "waiting", job.deadline

    def turn(self) -> int:
        """The next turn: claims, releases and burials commit one after the other, so
        a later one reads a later version.  A dead letter sorts by the clock when it
        died (the read version plus the clock's offset): by model time, then by the
        turn whose read version it took (a burial's own; a lease's end, its claim's),
        then by place (the jobs one claim took)."""
        self.turns += 1
        return self.turns

    def died(self, job: Job, at: int, turn: int) -> None:
        self.left(job)
        job.died = (at, turn)
        self.dead.append(job)

    def left(self, job: Job) -> None:
        """``job`` left the queue (acked, popped, dead)."""
        job.state = "gone"
        if job.key is None:
            return
        held = self.holders.get(job.key)
        if held is None or held[0] != job.id:
            if COVERS[job.key] == "finished" and (held is None or held[1] is not None):
                # its finish meets an absent entry or another's finish: one is kept
                self.either.setdefault(job.key, []).append((job.id or b"", self.now))
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

    @rule(target=leases, seconds=st.sampled_from([LEASE, SHORT]))
    def claim(self, seconds: int) -> Any:
        self.settle()
        visible = self.visible()
        lease = self.q.claim(self.db, seconds)
        if not visible:
            assert lease is None
            return multiple()
        assert lease is not None and lease.value == visible[0].value
        if visible[0].id is not None:
            assert lease.id == visible[0].id
        self.started(visible[0])
        visible[0].deadline, visible[0].claimed = self.now + seconds, self.turn()
        self.running[lease.token] = visible[0]
        return lease

    def live(self, lease: Lease[int]) -> Optional[Job]:
        """The job under ``lease``, if the lease has not ended."""
        job = self.running.get(lease.token)
        return None if job is None or self.ended(job) else job

    @rule()
    def pop(self) -> None:
        self.settle()
        visible = self.visible()
        got = self.q.pop(self.db)
        assert got == (visible[0].value if visible else None)
        if visible:
            self.started(visible[0])
            self.left(visible[0])

    @rule(lease=consumes(leases))
    def ack(self, lease: Lease[int]) -> None:
        if self.live(lease) is None:
            with pytest.raises(LeaseExpiredError):
                self.q.ack(self.db, lease)
            return
        self.q.ack(self.db, lease)
        self.left(self.running.pop(lease.token))

    @rule(lease=consumes(leases), delay=st.sampled_from([None, 1_000]))
    def release(self, lease: Lease[int], delay: Optional[int]) -> None:
        if self.live(lease) is None:
            assert not self.q.release(self.db, lease, delay=delay)
            return
        assert self.q.release(self.db, lease, delay=delay)
        job = self.running.pop(lease.token)
        if job.deliveries >= DELIVERIES:
            self.died(job, self.now, self.turn())  # its last delivery: a dead letter
        else:
            job.state, job.visible_at = "waiting", self.now + (delay or 0)

    @rule(lease=consumes(leases))
    def bury(self, lease: Lease[int]) -> None:
        if self.live(lease) is None:
            assert not self.q.bury(self.db, lease, "buried")
            return
        assert self.q.bury(self.db, lease, "buried")
        self.died(self.running.pop(lease.token), self.now, self.turn())

    @rule()
    def requeue_dead(self) -> None:
        self.settle()  # (ended leases that go back stay visible as they were)
        assert self.q.requeue_dead(self.db) == len(self.dead)
        for job in sorted(self.dead, key=lambda j: (j.died, j.place)):
            self.places += 1
            job.place, job.state, job.visible_at, job.deliveries = (
                self.places, "waiting", self.now, 0)
            if job.key is None:
                continue
            held = self.holders.get(job.key)
            if held is None or held[0] == job.id or (
                    held[1] is not None and held[1] + WINDOW <= self.now):
                self.holders[job.key] = (job.id or b"", None)  # it holds its key again
        self.dead.clear()

    @rule()
    def advance(self) -> None:
        self.clock.advance(STEP)
        self.now += STEP

    @invariant()
    def agrees(self) -> None:
        for key, finishes in self.either.items():  # learn which finish was kept
            got = self.q.unique_job(self.db, key)
            for id_, at in finishes:
                if got == id_:
                    self.holders[key] = (id_, at)
        self.either.clear()
        for key in COVERS:
            assert self.q.unique_job(self.db, key) == self.holder(key), key
        assert self.q.items(self.db) == [j.value for j in self.visible()]


def test_unique_keys_follow_the_model(fdb_database: Any) -> None:
    run_state_machine_as_test(lambda: UniqueMachine(fdb_database),
                              settings=settings(max_examples=20, stateful_step_count=30,
                                                deadline=None))


class Step:
    """A job of the sequence model: its id, sequence key (None: a plain job), value and
    place in the queue (None while it waits for its turn)."""

    def __init__(self, id_: Optional[bytes], key: Optional[str], value: int) -> None:
        self.id, self.key, self.value = id_, key, value
        self.place: Optional[int] = None
        self.deliveries = 0


class SequenceMachine(RuleBasedStateMachine):
    """Sequences against a model: pushes of two keys and plain jobs, claims, acks,
    releases (dead on the second delivery, which blocks the sequence), pops,
    ``unblock`` and ``requeue_dead``; after every step the visible order and each
    sequence's state agree with the model."""

    leases = Bundle("leases")

    def __init__(self, db: Any) -> None:
        super().__init__()
        self.db = db
        self.space = fdb.Subspace(("fdbrecipes-test", "sequence-machine", uuid.uuid4().hex))
        self.q: Queue[int] = Queue(self.space, max_deliveries=2)
        self.places = 0
        self.queued: List[Step] = []  # in the queue, not leased
        self.running: Dict[bytes, Step] = {}
        self.waiting: Dict[str, List[Step]] = {"x": [], "y": []}
        self.heads: Dict[str, Optional[Step]] = {"x": None, "y": None}
        self.blocked: Dict[str, bool] = {"x": False, "y": False}
        self.dead: List[Step] = []

    def teardown(self) -> None:
        r = self.space.range()
        self.db.clear_range(r.start, r.stop)

    def enter(self, step: Step) -> None:
        self.places += 1
        step.place = self.places
        self.queued.append(step)

    def promote(self, key: str) -> None:
        if self.waiting[key]:
            step = self.waiting[key].pop(0)
            self.heads[key] = step
            self.enter(step)
        else:
            self.heads[key] = None
        self.blocked[key] = False

    def ended(self, step: Step, died: bool) -> None:
        if step.key is None or self.heads[step.key] is not step:
            return
        if died:
            self.blocked[step.key] = True
        else:
            self.promote(step.key)

    def front(self) -> Optional[Step]:
        return min(self.queued, key=lambda s: s.place or 0) if self.queued else None

    @rule(key=st.sampled_from(["x", "y"]), value=st.integers(0, 99))
    def push(self, key: str, value: int) -> None:
        step = Step(self.q.push(self.db, value, sequence=key), key, value)
        if self.heads[key] is None:
            self.heads[key] = step
            self.enter(step)
        else:
            self.waiting[key].append(step)

    @rule(value=st.integers(100, 199))
    def push_plain(self, value: int) -> None:
        self.q.push(self.db, value)
        self.enter(Step(None, None, value))

    @rule(target=leases)
    def claim(self) -> Any:
        step = self.front()
        lease = self.q.claim(self.db, LEASE)
        if step is None:
            assert lease is None
            return multiple()
        assert lease is not None and lease.value == step.value
        self.queued.remove(step)
        step.deliveries += 1
        self.running[lease.token] = step
        return lease

    @rule()
    def pop(self) -> None:
        step = self.front()
        assert self.q.pop(self.db) == (None if step is None else step.value)
        if step is not None:
            self.queued.remove(step)
            self.ended(step, False)

    @rule(lease=consumes(leases))
    def ack(self, lease: Lease[int]) -> None:
        self.q.ack(self.db, lease)
        self.ended(self.running.pop(lease.token), False)

    @rule(lease=consumes(leases))
    def release(self, lease: Lease[int]) -> None:
        assert self.q.release(self.db, lease)
        step = self.running.pop(lease.token)
        if step.deliveries >= 2:
            self.dead.append(step)
            self.ended(step, True)
        else:
            self.queued.append(step)  # back at its place

    @rule(key=st.sampled_from(["x", "y"]))
    def unblock(self, key: str) -> None:
        head = self.heads[key]
        got = self.q.unblock(self.db, key)
        if self.blocked[key]:
            assert head is not None and got == head.id
            self.promote(key)
        else:
            assert got is None

    @rule()
    def requeue_dead(self) -> None:
        assert self.q.requeue_dead(self.db) == len(self.dead)
        for step in self.dead:
            step.deliveries = 0
            self.enter(step)
            if step.key is not None and self.heads[step.key] is step:
                self.blocked[step.key] = False  # it runs again: not blocked
        self.dead.clear()

    @invariant()
    def agrees(self) -> None:
        assert self.q.items(self.db) == [s.value for s in sorted(
            self.queued, key=lambda s: s.place or 0)]
        for key in ("x", "y"):
            head = self.heads[key]
            assert self.q.sequence(self.db, key) == (
                None if head is None else head.id, self.blocked[key], len(self.waiting[key]))


def test_sequences_follow_the_model(fdb_database: Any) -> None:
    run_state_machine_as_test(lambda: SequenceMachine(fdb_database),
                              settings=settings(max_examples=20, stateful_step_count=30,
                                                deadline=None))
