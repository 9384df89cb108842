"""The class of bug behind issue 21: many clients doing random mixes of every public
operation, with Ctrl-C-style interrupts and ``commit_unknown_result`` injected on
random commits, checked at every barrier and after every run against the guarantees.

Each client (a thread with structure objects of its own) runs a seeded random mix of
pushes (ids with a short retention, delays), pops (plain, ``spread``, high-contention),
batches given a Database that span transactions, claims, acks, extends (longer and
shorter), releases (with delay) and waits, on one shared Queue or PriorityQueue.  One
commit of each call may be faulty: applied or dropped, then reported as
``commit_unknown_result``, ``transaction_timed_out`` or Ctrl-C.  A :class:`Ledger`
records what each call certainly did (its result, ``InterruptedCall.outcome``,
``IncompleteBatchError.result``, or what ``UnknownResultError.settle`` finds).

At barriers (every client paused) the test checks the counters, may ``clear()`` the
structure, probes what a fresh high-contention popper sets aside, re-pushes an id past
its retention, and wakes a waiter by extending a lease shorter; then it advances the
shared test clock.  At the end it drains everything and checks that every pushed item
was, exactly once, popped or acked, dead, cleared or still there, and nothing twice.

The seed comes from ``FDBRECIPES_FAULT_SEED`` (else a random one) and is in every
failure message: ``FDBRECIPES_FAULT_SEED=<seed> pytest ...`` replays its choices (the
threads' interleaving aside).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import threading
from collections import Counter
from typing import Any, Callable, ClassVar, Dict, List, Optional, Set, Tuple

import fdb
import pytest

from fdbrecipes import (
    IncompleteBatchError,
    InterruptedCall,
    Lease,
    LeaseExpiredError,
    PriorityQueue,
    Queue,
    UnknownResultError,
)
from fdbrecipes.testing.hooks import hooks
from tests.helpers import TestClock, run_threads, unknown_results

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("FDBRECIPES_FAULT_SEED", random.randrange(2**32)))
#: Clock seconds: leases, delays and high-contention holds outlast a run's real time,
#: so only the test clock's steps end them.
LEASE, DELAY, RESULT_TIMEOUT, RETENTION = 200.0, 150.0, 200.0, 100.0
FAULTS = ("applied", "dropped", "applied:1031", "dropped:1031", "applied:interrupt",
          "dropped:interrupt")


class Plan:
    """Which commit is faulty: at most one per call (so a call's settling is never
    faulty itself), each with probability ``rate``, from a generator per thread."""

    def __init__(self, seed: int, rate: float) -> None:
        self.seed, self.rate = seed, rate
        self.local = threading.local()

    def arm(self, rng: random.Random) -> None:
        """The next call of this thread may have one faulty commit."""
        self.local.rng, self.local.left = rng, 1

    def __call__(self) -> Optional[str]:
        if getattr(self.local, "left", 0) <= 0:
            return None
        rng: random.Random = self.local.rng
        if rng.random() >= self.rate:
            return None
        self.local.left = 0
        return rng.choice(FAULTS)


class Ledger:
    """What the calls certainly did, and the checks against it."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.lock = threading.Lock()
        self.stored: Dict[Any, str] = {}  # value -> "yes", "no", "maybe" (an id push)
        self.removed: List[Any] = []  # popped, or acked
        self.cleared: Set[Any] = set()
        self.ids: Dict[Any, bytes] = {}
        self.unknown: List[Any] = []  # (what, UnknownResultError, context) to settle
        self.violations: List[str] = []

    def fail(self, what: str) -> None:
        with self.lock:
            self.violations.append(what)

    def check(self) -> None:
        assert not self.violations, f"seed {self.seed}: {self.violations[:5]}"

    def pushed(self, values: List[Any], landed: Optional[bool], id_: Optional[bytes]) -> None:
        """``landed``: True, False, or None (not known yet)."""
        with self.lock:
            for value in values:
                if id_ is not None:
                    self.ids[value] = id_
                if landed is None or (landed and id_ is not None):
                    self.stored[value] = "maybe"
                else:
                    self.stored[value] = "yes" if landed else "no"

    def announce(self, values: List[Any]) -> None:
        """Values about to be pushed: another client may take them before the pusher
        learns that its push landed."""
        with self.lock:
            for value in values:
                self.stored.setdefault(value, "maybe")

    def took(self, values: List[Any]) -> None:
        with self.lock:
            for value in values:
                if value not in self.stored:
                    self.violations.append(f"{value!r} was taken but never pushed")
                if value in self.cleared:
                    self.violations.append(f"{value!r} was taken after a clear removed it")
                self.removed.append(value)


class Client:
    """One client thread: its structures, its leases, its random mix of calls."""

    def __init__(self, index: int, kind: str, space: Any, clock: TestClock, faulty_db: Any,
                 plan: Plan, ledger: Ledger) -> None:
        self.index, self.kind, self.db = index, kind, faulty_db
        self.rng = random.Random(SEED * 1_000 + index)
        self.fault_rng = random.Random(SEED * 1_000 + index + 500)
        self.plan, self.ledger = plan, ledger
        self.count = itertools.count()
        options = dict(clock=clock, id_retention=RETENTION, max_deliveries=3,
                       result_timeout=RESULT_TIMEOUT)
        cls = Queue if kind == "queue" else PriorityQueue
        self.s: Any = cls(space, **options)
        self.hc: Any = cls(space, high_contention=True, **options)
        for structure in (self.s, self.hc):
            hooks(structure).batch = 3
        hooks(self.hc).contended = index % 2 == 0
        self.leases: List[Lease] = []

    # -- the mix ------------------------------------------------------------------------

    def run(self, steps: int) -> None:
        for _ in range(steps):
            op = self.rng.choice(self.OPS)
            self.plan.arm(self.fault_rng)
            try:
                op(self)
            except Exception as e:
                self.ledger.fail(f"client {self.index}: {op.__name__} raised {e!r}")

    def value(self) -> Any:
        return (self.index, next(self.count))

    def push(self) -> None:
        value = self.value()
        id_ = None if self.rng.random() < 0.6 else b"id-%d" % self.rng.randrange(8)
        delay = None if self.rng.random() < 0.8 else DELAY
        args = (value,) if self.kind == "queue" else (value, self.rng.randrange(3))
        self.settled("push", self.s.push, args, dict(id=id_, delay=delay), [value], id_)

    def push_many(self) -> None:
        values = [self.value() for _ in range(self.rng.randrange(1, 5))]
        batch = values if self.kind == "queue" else [(v, self.rng.randrange(3)) for v in values]
        self.settled("push", self.s.push_many, (batch,), {}, values, None)

    def pop(self) -> None:
        structure = self.hc if self.rng.random() < 0.4 else self.s
        spread = 1 if structure is self.hc or self.rng.random() < 0.5 else 4
        method = structure.pop if self.kind == "queue" else self.rng.choice(
            [structure.pop_min, structure.pop_max])
        self.settled("pop", method, (), dict(spread=spread), [], None)

    def pop_many(self) -> None:
        method = self.s.pop_many if self.kind == "queue" else self.s.pop_max_many
        self.settled("pop_many", method, (self.rng.randrange(1, 8),),
                     dict(spread=self.rng.choice([1, 3])), [], None)

    def claim(self) -> None:
        method = self.s.claim_many if self.kind == "queue" else self.s.claim_min_many
        self.settled("claim", method, (), dict(n=self.rng.randrange(1, 6), lease_seconds=LEASE),
                     [], None)

    def ack(self) -> None:
        if self.leases:
            lease = self.leases.pop(self.rng.randrange(len(self.leases)))
            self.settled("ack", self.s.ack, (lease,), {}, [lease], None)

    def ack_many(self) -> None:
        if self.leases:
            k = self.rng.randrange(1, len(self.leases) + 1)
            batch, self.leases = self.leases[:k], self.leases[k:]
            self.settled("ack_many", self.s.ack_many, (batch,), {}, batch, None)

    def extend(self) -> None:
        if self.leases:
            at = self.rng.randrange(len(self.leases))
            seconds = self.rng.choice([LEASE / 2, LEASE, LEASE * 2])
            self.settled("extend", self.s.extend, (self.leases[at], seconds), {},
                         [self.leases.pop(at)], None)

    def release(self) -> None:
        if self.leases:
            lease = self.leases.pop(self.rng.randrange(len(self.leases)))
            delay = self.rng.choice([None, DELAY])
            self.settled("release", self.s.release, (lease,), dict(delay=delay), [lease], None)

    def wait(self) -> None:
        with contextlib.suppress(KeyboardInterrupt, fdb.FDBError):  # its check's commit
            self.s.wait(self.db, timeout=0.02)

    OPS: ClassVar[Tuple[Callable[[Client], None], ...]] = (
        push, push, push_many, pop, pop, pop_many, claim, claim, ack, ack_many, extend,
        release, wait)

    # -- what a call certainly did --------------------------------------------------------

    def settled(self, what: str, call: Callable[..., Any], args: Any, kwargs: Any,
                context: List[Any], id_: Optional[bytes]) -> None:
        if what == "push":
            self.ledger.announce(context)
        try:
            result = call(self.db, *args, **kwargs)
        except InterruptedCall as e:
            if e.outcome is None:
                assert e.unknown is not None
                self.defer(what, e.unknown, context, id_)
            else:
                self.landed(what, e.outcome.committed, e.outcome.result, context, id_)
                if e.unknown is not None and what in ("pop_many", "claim"):
                    # a batch: what its earlier transactions took, and its last in doubt
                    self.defer(what, e.unknown, context, id_)
            return
        except UnknownResultError as e:
            self.defer(what, e, context, id_)
            return
        except IncompleteBatchError as e:
            self.landed(what, True, e.result, context, id_)
            if isinstance(e.__cause__, UnknownResultError):
                self.defer(what, e.__cause__, context, id_)
            return
        except LeaseExpiredError:
            return
        except (fdb.FDBError, KeyboardInterrupt):  # settled, or no commit in flight: none
            self.landed(what, False, None, context, id_)
            return
        self.landed(what, True, result, context, id_)

    def defer(self, what: str, error: UnknownResultError, context: List[Any],
              id_: Optional[bytes]) -> None:
        if what == "push":
            self.ledger.pushed(context, None, id_)
        with self.ledger.lock:
            self.ledger.unknown.append((self, what, error, context, id_))

    def landed(self, what: str, committed: bool, result: Any, context: List[Any],
               id_: Optional[bytes]) -> None:
        if what == "push":
            self.ledger.pushed(context, committed, id_)
        elif not committed:
            if what in ("ack", "ack_many", "extend", "release"):
                self.leases.extend(context)  # still this client's
        elif what == "pop":
            if result is not None:
                self.ledger.took([result])
        elif what == "pop_many":
            self.ledger.took(list(result))
        elif what == "claim":
            for lease in result:
                if not isinstance(lease, Lease):
                    self.ledger.fail(f"a claim handed over {lease!r}, not a Lease")
                    continue
                self.leases.append(lease)
        elif what == "ack":
            self.ledger.took([context[0].value])
        elif what == "ack_many":
            self.ledger.took([lease.value for lease, ok in zip(context, result) if ok])
        elif what == "extend":
            self.leases.append(result)


def resolve(ledger: Ledger, db: Any) -> None:
    """Settle every call left unknown, on the real database."""
    for client, what, error, context, id_ in ledger.unknown:
        outcome = error.settle(db)
        client.landed(what, outcome.committed, outcome.result, context, id_)
    ledger.unknown.clear()


def check_counters(s: Any, db: Any, ledger: Ledger, where: str) -> None:
    stats, size = s.stats(db), s.size(db)
    if size != stats.visible + stats.delayed + stats.in_flight or min(stats[:4]) < 0:
        ledger.fail(f"{where}: size {size} and stats {stats} disagree")
    if stats.dead != len(s.dead(db)):
        ledger.fail(f"{where}: stats count {stats.dead} dead letters, dead() lists "
                    f"{len(s.dead(db))}")


def check_ids(s: Any, db: Any, ledger: Ledger, where: str) -> None:
    """At most one item per id among those that can be listed (visible and dead)."""
    listed = list(s.items(db)) + [d.value for d in s.dead(db)]
    ids = Counter(ledger.ids[v] for v in listed if v in ledger.ids)
    doubled = [i for i, n in ids.items() if n > 1]
    if doubled:
        ledger.fail(f"{where}: id(s) {doubled} stored twice")


def barrier(round_: int, kind: str, space: Any, db: Any, clock: TestClock, ledger: Ledger,
            clients: List[Client], rng: random.Random) -> None:
    """Every client paused: check, maybe clear, probe, advance the clock."""
    resolve(ledger, db)
    cls = Queue if kind == "queue" else PriorityQueue
    plain = cls(space["mix"], clock=clock, id_retention=RETENTION, max_deliveries=3)
    where = f"round {round_}"
    check_counters(plain, db, ledger, where)
    check_ids(plain, db, ledger, where)
    if rng.random() < 0.3:  # issue 21, 1: a clear under everyone's feet
        with ledger.lock:
            gone = {v for v, how in ledger.stored.items() if how != "no"} - set(ledger.removed)
            ledger.cleared |= gone
        plain.clear(db)
        for client in clients:
            client.leases.clear()
        if plain.size(db) or plain.stats(db) != (0, 0, 0, 0, None):
            ledger.fail(f"{where}: not empty after clear: {plain.stats(db)}")
    probe_hc(plain, cls, space["mix"], db, clock, ledger, where)
    probe_retention(space["probe"], db, clock, ledger, where, kind)
    clock.advance(rng.choice([0, 0, 120, 250, 450]))


def probe_hc(plain: Any, cls: Any, space: Any, db: Any, clock: TestClock, ledger: Ledger,
             where: str) -> None:
    """Issue 21, 3: a fresh high-contention popper that saw no conflict sets nothing
    aside."""
    fresh = cls(space, clock=clock, high_contention=True, result_timeout=RESULT_TIMEOUT,
                max_deliveries=3)
    before = plain.stats(db).in_flight
    popped = fresh.pop(db) if cls is Queue else fresh.pop_min(db)
    if popped is not None:
        ledger.took([popped])
    after = plain.stats(db).in_flight
    if after != before:
        ledger.fail(f"{where}: a lone high-contention pop left {after - before} in flight")


def probe_retention(space: Any, db: Any, clock: TestClock, ledger: Ledger, where: str,
                    kind: str) -> None:
    """Issue 21, 5: a push of an id whose retention has passed is a new push (on a
    structure of its own, beside the shared one, on the shared clock)."""
    cls = Queue if kind == "queue" else PriorityQueue
    probe = cls(space, clock=clock, id_retention=RETENTION)
    extra = () if kind == "queue" else (0,)
    probe.push(db, "first", *extra, id=b"probe")
    if probe.items(db) != ["first"]:
        ledger.fail(f"{where}: the retention probe's first push stored nothing")
    probe.clear(db)  # the item left (cleared), the id with it: push, pop, then wait
    probe.push(db, "again", *extra, id=b"probe")
    taken = probe.pop(db) if kind == "queue" else probe.pop_max(db)
    clock.advance(RETENTION + 1)
    probe.push(db, "after the retention", *extra, id=b"probe")
    if taken != "again" or probe.items(db) != ["after the retention"]:
        ledger.fail(f"{where}: a push of an id past its retention stored nothing")
    probe.clear(db)


def drain(plain: Any, db: Any, clock: TestClock, ledger: Ledger, kind: str) -> List[Any]:
    """Everything left, after every lease, delay and hold has ended."""
    clock.advance(10 * (LEASE + DELAY + RESULT_TIMEOUT + RETENTION))
    left: List[Any] = []
    while True:
        batch = plain.pop_many(db, 500) if kind == "queue" else plain.pop_min_many(db, 500)
        if not batch:
            return left
        left.extend(batch)


def account(ledger: Ledger, left: List[Any], dead: List[Any]) -> None:
    """Every item stored is, exactly once, taken, dead, cleared or left; none twice."""
    taken = Counter(ledger.removed)
    for value, n in taken.items():
        if n > 1:
            ledger.fail(f"{value!r} was taken {n} times")
    where = Counter(left) + Counter(dead)
    for value, n in where.items():
        if n > 1:
            ledger.fail(f"{value!r} is there {n} times")
        if taken[value]:
            ledger.fail(f"{value!r} was taken, yet is still there")
        if value in ledger.cleared:
            ledger.fail(f"{value!r} was cleared, yet is still there")
    for value, how in ledger.stored.items():
        found = taken[value] + where[value] + (value in ledger.cleared)
        if how == "yes" and found != 1:
            ledger.fail(f"{value!r} was pushed and is {'lost' if not found else 'doubled'}")
        if how == "no" and found:
            ledger.fail(f"{value!r} was not pushed (settled), yet it was found")
        if how == "maybe" and found > 1:
            ledger.fail(f"{value!r} (pushed maybe, or with an id) found {found} times")


def fault_mix(db: Any, cluster_file: str, space: Any, kind: str, clients_n: int,
              rounds: int, steps: int, seed: int) -> None:
    rng = random.Random(seed)
    clock = TestClock()
    plan = Plan(seed, rate=0.15)
    ledger = Ledger(seed)
    faulty_db = unknown_results(cluster_file, plan)
    clients = [Client(i, kind, space["mix"], clock, faulty_db, plan, ledger)
               for i in range(clients_n)]
    for round_ in range(rounds):
        errors: List[BaseException] = []
        threads = [threading.Thread(target=c.run, args=(steps,)) for c in clients]
        run_threads(threads, errors, timeout=600)
        barrier(round_, kind, space, db, clock, ledger, clients, rng)
        ledger.check()
    cls = Queue if kind == "queue" else PriorityQueue
    plain = cls(space["mix"], clock=clock, id_retention=RETENTION, max_deliveries=3)
    left = drain(plain, db, clock, ledger, kind)
    dead = [d.value for d in plain.dead(db)]
    account(ledger, left, dead)
    check_counters(plain, db, ledger, "the end")
    ledger.check()


@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_random_operations_with_faults(db: Any, fdb_cluster_file: str, fdb_subspace: Any,
                                       kind: str) -> None:
    """Seconds: 3 clients, 3 rounds of 25 calls each."""
    fault_mix(db, fdb_cluster_file, fdb_subspace, kind, 3, 3, 25, SEED)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_random_operations_with_faults_at_length(db: Any, fdb_cluster_file: str,
                                                 fdb_subspace: Any, kind: str) -> None:
    """Minutes: 6 clients, 12 rounds of 60 calls, for three seeds."""
    for offset in range(3):
        space = fdb_subspace[offset]
        fault_mix(db, fdb_cluster_file, space, kind, 6, 12, 60, SEED + offset)
