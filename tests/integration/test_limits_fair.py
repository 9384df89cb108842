"""Shared limits on a FairQueue, and limit keys given at push (issue 40): a FairQueue's
claims check the shared limits in their own transaction beside the groups' own limit
and rate, park a job whose key is full (moved back, and its group looked at, by the
transaction that frees the slot), and every structure counts a job under the key its
push gave, from any consumer process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Tuple

import fdb
import pytest

from fdbrecipes import FairQueue, Limits, PriorityQueue, Queue, concurrency, rate
from fdbrecipes.aio import AsyncFairQueue, AsyncLimits, AsyncQueue
from tests.helpers import TestClock, dump, eventually
from tests.integration.test_limits import user
from tests.integration.test_limits_faults import most_in_a_window, read_events
from tests.limits_fair_consumer import structures

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fq(fdb_subspace: Any, clock: TestClock, limits: Limits) -> FairQueue:
    return FairQueue(fdb_subspace["fq"], clock=clock,
                     limits=[limits.use("per-user", key=user), limits.use("all")])


def claim_one(db: Any, q: Any) -> Any:
    """One claim of ``q`` (a PriorityQueue's at its minimum); its lease, or None."""
    return q.claim_min(db, 30) if isinstance(q, PriorityQueue) else q.claim(db, 30)


def claim_all(db: Any, q: Any, most: int = 50) -> List[Any]:
    """Claim until nothing more can start (each claim alone); the leases."""
    out = []
    for _ in range(most):
        lease = claim_one(db, q)
        if lease is None:
            return out
        out.append(lease)
    raise AssertionError(f"more than {most} claims")


# -- limits on a FairQueue -------------------------------------------------------------


def test_fair_queue_parks_a_full_key_without_blocking_its_group_or_others(
        db: Any, fq: FairQueue, limits: Limits) -> None:
    limits.set(db, "per-user", concurrency(1))
    fq.push_many(db, [("hog", i) for i in range(100)] + [("b", 0)], group="g1")
    fq.push(db, ("c", 0), group="g2")
    got = claim_all(db, fq)
    assert sorted(lease.value for lease in got) == [("b", 0), ("c", 0), ("hog", 0)]
    state = limits.state(db, "per-user", "hog")
    assert state is not None and state.running == 1 and state.parked == 99
    hog = next(lease for lease in got if lease.value[0] == "hog")
    fq.ack(db, hog)  # the slot back: the next hog job moved back, its group looked at
    again = claim_all(db, fq)
    assert [lease.value for lease in again] == [("hog", 1)]
    assert fq.stats(db, "g1").in_flight == 2 and fq.stats(db, "g2").in_flight == 1


def test_a_freed_slot_moves_back_a_job_of_another_group(db: Any, fq: FairQueue,
                                                        limits: Limits) -> None:
    limits.set(db, "per-user", concurrency(1))
    fq.push(db, ("hog", 0), group="g1")
    first = fq.claim(db, 30)
    assert first is not None and first.value == ("hog", 0)
    fq.push_many(db, [("hog", 1), ("c", 0)], group="g2")
    assert [lease.value for lease in claim_all(db, fq)] == [("c", 0)]  # hog 1 parked
    assert fq.lottery(db) == {}  # g2 has nothing visible left: out of the lottery
    fq.ack(db, first)  # in g1: moves hog 1 back in g2, and asks for a look at g2
    assert [lease.value for lease in claim_all(db, fq)] == [("hog", 1)]


def test_group_limits_and_shared_limits_combine(db: Any, fdb_subspace: Any,
                                                limits: Limits) -> None:
    fq = FairQueue(fdb_subspace["c"], default_limit=1, limits=limits.use("all"))
    limits.set(db, "all", concurrency(5))
    for g in ("a", "b", "c"):
        fq.push_many(db, [(g, i) for i in range(3)], group=g)
    got = claim_all(db, fq)
    assert sorted(lease.group for lease in got) == ["a", "b", "c"]  # each group's limit
    limits.set(db, "all", concurrency(2))  # lowered: the shared limit is the tighter
    for lease in got:
        fq.ack(db, lease)
    assert len(claim_all(db, fq)) == 2


def test_fair_rate_slots_release_bury_expiry_and_extend(db: Any, fdb_subspace: Any,
                                                        clock: TestClock,
                                                        limits: Limits) -> None:
    fq = FairQueue(fdb_subspace["r"], clock=clock, max_deliveries=2,
                   limits=[limits.use("api", key=user), limits.use("one")])
    limits.set(db, "api", rate(2, per_seconds=10))
    fq.push_many(db, [("x", i) for i in range(5)], group="g")
    got = claim_all(db, fq)
    assert len(got) == 2  # the rate: the others delayed until the window has room
    for lease in got:
        fq.ack(db, lease)
    assert fq.claim(db, 30) is None
    clock.advance(10.5)
    assert len(claim_all(db, fq)) == 2
    limits.delete(db, "api")
    limits.set(db, "one", concurrency(1))
    clock.advance(30.5)  # the leases above end; the last job comes back
    lease = fq.claim(db, 5)
    assert lease is not None and fq.claim(db, 5) is None
    clock.advance(4)
    lease = fq.extend(db, lease, 10)
    clock.advance(4)  # past the first deadline, before the extended one
    assert fq.claim(db, 5) is None
    assert fq.release(db, lease)  # its slot back
    lease = fq.claim(db, 5)
    assert lease is not None
    assert fq.bury(db, lease, "no")  # the slot back with a dead letter
    assert len(fq.dead(db, group="g")) >= 1
    assert fq.stats(db, "g").in_flight == 0


def test_a_sharded_fair_queue_parks_and_moves_back_in_its_shards(db: Any, fdb_subspace: Any,
                                                                limits: Limits) -> None:
    fq = FairQueue(fdb_subspace["s"], shards=3, limits=limits.use("per-user", key=user))
    limits.set(db, "per-user", concurrency(1))
    fq.push_many(db, [("hog", i) for i in range(15)] + [("b", 0)], group="g")
    got = claim_all(db, fq)
    assert sorted(lease.value[0] for lease in got) == ["b", "hog"]
    state = limits.state(db, "per-user", "hog")
    assert state is not None and state.running == 1 and state.parked == 14
    seen = {got[0].value, got[1].value}
    for _ in range(14):  # each ack moves the next hog job back, in whatever shard
        hog = next(lease for lease in got if lease.value[0] == "hog")
        fq.ack(db, hog)
        got = claim_all(db, fq)
        assert len(got) == 1 and got[0].value[0] == "hog"
        seen.add(got[0].value)
    assert len(seen) == 16


def test_async_fair_queue_with_limits(db: Any, fdb_subspace: Any) -> None:
    limits = AsyncLimits(fdb_subspace["al"])
    fq = AsyncFairQueue(fdb_subspace["af"], limits=limits.use("per-customer"))

    async def main() -> None:
        await limits.set(db, "per-customer", concurrency(1))
        await fq.push(db, "a1", group="g", limit_keys={"per-customer": "acme"})
        await fq.push(db, "a2", group="g", limit_keys={"per-customer": "acme"})
        await fq.push(db, "b1", group="h", limit_keys={"per-customer": "globex"})
        first = [await fq.claim(db, 30) for _ in range(3)]
        got = [lease for lease in first if lease is not None]
        assert sorted(lease.value for lease in got) == ["a1", "b1"]
        await fq.ack(db, next(lease for lease in got if lease.value == "a1"))
        lease = await fq.claim(db, 30)
        assert lease is not None and lease.value == "a2"

    asyncio.run(main())


# -- limit keys given at push ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["queue", "priority-queue", "fair-queue"])
def test_limit_keys_given_at_push(db: Any, fdb_subspace: Any, limits: Limits,
                                  kind: str) -> None:
    uses = [limits.use("per-customer"), limits.use("per-user", key=user)]
    limits.set(db, "per-customer", concurrency(1))
    limits.set(db, "per-user", concurrency(5))
    values = [("u1", "a"), ("u2", "b"), ("u3", "c")]
    keys = ["acme", "acme", "globex"]
    if kind == "queue":
        q: Any = Queue(fdb_subspace["q"], limits=uses)
        for value, key in zip(values, keys):
            q.push(db, value, limit_keys={"per-customer": key})
    elif kind == "priority-queue":
        q = PriorityQueue(fdb_subspace["p"], limits=uses)
        for value, key in zip(values, keys):
            q.push(db, value, 0, limit_keys={"per-customer": key})
    else:
        q = FairQueue(fdb_subspace["f"], limits=uses)
        for value, key in zip(values, keys):
            q.push(db, value, group="g", limit_keys={"per-customer": key})
    got = claim_all(db, q)
    assert [lease.value for lease in got] == [("u1", "a"), ("u3", "c")]  # the values alone
    acme = limits.state(db, "per-customer", "acme")
    assert acme is not None and acme.running == 1 and acme.parked == 1
    assert limits.state(db, "per-user", "u1").running == 1  # the use's own key still
    q.ack(db, got[0])
    lease = claim_one(db, q)
    assert lease is not None and lease.value == ("u2", "b")
    q.release(db, lease)
    assert claim_one(db, q).value == ("u2", "b")  # the keys moved with the job


def test_limit_keys_of_push_many_and_the_async_twin(db: Any, fdb_subspace: Any,
                                                    limits: Limits) -> None:
    q = Queue(fdb_subspace["m"], limits=limits.use("per-customer"))
    limits.set(db, "per-customer", concurrency(2))
    q.push_many(db, [1, 2, 3], limit_keys={"per-customer": ("acme", 7)})
    q.push(db, 4)  # no key given, and the use has no key function: the global key
    assert sorted(lease.value for lease in claim_all(db, q)) == [1, 2, 4]
    assert q.items(db) == [] and limits.state(db, "per-customer", ("acme", 7)).parked == 1
    aq: AsyncQueue[Any] = AsyncQueue(fdb_subspace["a"], limits=AsyncLimits(
        fdb_subspace["limits"]).use("per-customer"))

    async def main() -> None:
        await aq.push(db, "x", limit_keys={"per-customer": "acme2"})
        await aq.push_many(db, ["y", "z"], limit_keys={"per-customer": "acme2"})
        leases = await aq.claim_many(db, 3, 30)
        assert sorted(lease.value for lease in leases) == ["x", "y"]

    asyncio.run(main())


BAD_KEYS: List[Tuple[Any, type, str]] = [
    (["per-customer"], TypeError, "limit_keys must be None or a dict"),
    ({"nope": "a"}, ValueError, "'nope', a limit this structure does not use"),
    ({1: "a"}, TypeError, "limit_keys names must be str"),
    ({"per-customer": None}, TypeError, r"limit_keys\['per-customer'\] must be a key"),
    ({"per-customer": object()}, TypeError, r"limit_keys\['per-customer'\] must be bytes"),
    ({"per-customer": [1, 2]}, TypeError, r"limit_keys\['per-customer'\] must be bytes"),
    ({"per-customer": "k" * 1_000}, ValueError, "at most 1,000 bytes"),
]


@pytest.mark.parametrize("bad,error,message", BAD_KEYS)
def test_bad_limit_keys_are_refused_with_nothing_written(db: Any, fdb_subspace: Any,
                                                         limits: Limits, bad: Any,
                                                         error: type, message: str) -> None:
    uses = limits.use("per-customer")
    structures_ = [(Queue(fdb_subspace["q"], limits=uses), {}),
                   (PriorityQueue(fdb_subspace["p"], limits=uses), {"priority": 0}),
                   (FairQueue(fdb_subspace["f"], limits=uses), {"group": "g"})]
    for q, extra in structures_:
        with pytest.raises(error, match=message):
            if isinstance(q, PriorityQueue):
                q.push(db, "v", 0, limit_keys=bad)
            else:
                q.push(db, "v", limit_keys=bad, **extra)
        with pytest.raises(error, match=message):
            if isinstance(q, PriorityQueue):
                q.push_many(db, [("v", 0)], limit_keys=bad)
            else:
                q.push_many(db, ["v"], limit_keys=bad, **extra)
    plain = Queue(fdb_subspace["n"])
    with pytest.raises(ValueError, match="limits: none"):
        plain.push(db, "v", limit_keys={"per-customer": "a"})
    with pytest.raises(ValueError, match="100,000 bytes"):
        structures_[0][0].push(db, b"x" * 99_990, limit_keys={"per-customer": "a" * 20})
    assert dump(db, fdb_subspace) == {}


# -- many consumer processes -----------------------------------------------------------

#: Jobs, customers (keys given at push), groups; jobs of a customer at once; claims of
#: a parity (the rate's key) per second.
JOBS, CUSTOMERS, GROUPS, PER_CUSTOMER, RATE = 40, 4, 3, 2, 10


def test_fair_queue_limits_hold_across_consumer_processes(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, limits: Limits) -> None:
    limits.set(db, "per-customer", concurrency(PER_CUSTOMER))
    limits.set(db, "rate", rate(RATE, per_seconds=1))
    q, events = structures(fdb_subspace)
    customer = {i: f"c{i % CUSTOMERS}" for i in range(JOBS)}
    for i in range(JOBS):  # the customer is not in the value: only the push names it
        q.push(db, i, group=f"g{i % GROUPS}", limit_keys={"per-customer": customer[i]})
    consumers = [subprocess.Popen(
        [sys.executable, "-m", "tests.limits_fair_consumer", fdb_cluster_file,
         fdb_subspace.key().hex(),
         str(fdb.get_api_version())], cwd=ROOT) for _ in range(2)]
    try:
        def acked() -> bool:
            return sum(1 for e in read_events(db, events) if e[2] == "end") >= JOBS
        eventually(acked, 60, f"{JOBS} jobs acked")
    finally:
        for process in consumers:
            process.kill()
        for process in consumers:
            process.wait(timeout=10)
    found = read_events(db, events)
    starts = {(e[0], e[1]): e for e in found if e[2] == "start"}
    ends = {(e[0], e[1]): e for e in found if e[2] == "end"}
    assert sorted(value for value, _ in ends) == list(range(JOBS)), "lost or doubled"
    assert set(starts) == set(ends), "a job delivered twice"
    edges: List[Tuple[int, int, str]] = []  # (commit version, +1/-1, customer)
    for lease, start in starts.items():
        edges += [(start[3], 1, customer[lease[0]]), (ends[lease][3], -1, customer[lease[0]])]
    edges.sort(key=lambda e: (e[0], e[1]))  # at one version, an end before a start
    running: Dict[str, int] = defaultdict(int)
    for _, delta, key in edges:
        running[key] += delta
        assert running[key] <= PER_CUSTOMER, f"{running[key]} jobs of {key} at once"
    claimed: Dict[int, List[int]] = defaultdict(list)
    for (value, _), start in starts.items():
        claimed[value % 2].append(start[4])
    worst = max(most_in_a_window(times, 1_000_000) for times in claimed.values())
    assert worst <= RATE, f"{worst} claims of one key in a second (limit {RATE})"
    assert all(s.in_flight == 0 and s.visible == 0 for s in q.stats(db).values())


# -- a park racing with the free of its key's slot -----------------------------------


def test_a_park_committed_while_an_ack_frees_the_slot_is_moved_back(
        db: Any, fdb_subspace: Any, limits: Limits) -> None:
    """A claim parks job J (its key full) and commits while an ack of that key, whose
    read version came before the park, frees the key's slot: the ack must see J (its
    commit conflicts, and its retry moves J back), or J would wait for its park's
    deadline beside a free slot."""
    q = Queue(fdb_subspace["race"], limits=limits.use("one"))
    limits.set(db, "one", concurrency(1))
    q.push(db, "running")
    lease = q.claim(db, 30)
    assert lease is not None
    ack = db.create_transaction()
    ack.get_read_version().wait()  # the ack reads before the park below commits
    q.push(db, "J")
    assert q.claim(db, 30) is None  # J parked: its key is full
    assert limits.state(db, "one").parked == 1
    q.ack(ack, lease)
    with pytest.raises(fdb.FDBError) as raised:
        ack.commit().wait()
    assert raised.value.code == 1020  # not_committed: the park conflicts with the ack
    q.ack(db, lease)  # the retry sees J, and moves it back
    again = q.claim(db, 30)
    assert again is not None and again.value == "J"
