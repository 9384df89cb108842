"""Limit keys given to the pushes made for you (issue 40): a schedule's jobs (stored,
code-defined, fired alone), a follow-up pushed with an ack (``Job.then``), a workflow's
nodes (its first nodes, pushed by ``create``, those an ack frees, in a Queue and a
FairQueue, and an open batch's members) carry the keys they were given, so a keyed
concurrency limit holds them; bad keys are refused naming ``limit_keys`` (the async
twins too), with nothing written."""

from __future__ import annotations

import asyncio
import math
from typing import Any, Callable, List, Tuple

import fdb
import pytest

from fdbrecipes import (
    FairQueue,
    Job,
    Limits,
    Queue,
    Schedule,
    Schedules,
    Worker,
    aio,
    concurrency,
)
from fdbrecipes.aio.workflow import AsyncWorkflows
from fdbrecipes.workflow import Workflows
from tests.helpers import dump, eventually

pytestmark = pytest.mark.integration

ACME = {"per-customer": "acme"}


def held(db: Any, subspace: Any, limits: Limits) -> Tuple[Queue[Any], Any]:
    """A Queue limited per customer (a key given at push only: its use has no key
    function), and the lease of a job of customer acme holding acme's one slot."""
    limits.set(db, "per-customer", concurrency(1))
    jobs: Queue[Any] = Queue(subspace, limits=limits.use("per-customer"))
    jobs.push(db, "holder", limit_keys=ACME)
    lease = jobs.claim(db, 30)
    assert lease is not None and lease.value == "holder"
    return jobs, lease


def parked(db: Any, limits: Limits) -> int:
    """How many jobs wait parked under acme's key."""
    state = limits.state(db, "per-customer", "acme")
    return 0 if state is None else state.parked


def nothing_claimable(db: Any, structure: Any, limits: Limits, jobs: int = 1) -> bool:
    """Whether a claim of ``structure`` finds nothing while ``jobs`` wait under acme's
    key (a claim that starts one fails the test: the keyed limit did not hold it)."""
    lease = structure.claim(db, 30)
    assert lease is None, f"{lease.value!r} started while acme's slot was taken"
    return parked(db, limits) >= jobs


def spaces(subspace: Any, *names: bytes) -> List[Any]:
    return [fdb.Subspace(rawPrefix=subspace.key() + name) for name in names]


def test_a_stored_schedules_jobs_carry_its_limit_keys(db: Any, fdb_subspace: Any,
                                                      limits: Limits) -> None:
    store_space, jobs_space, own_space = spaces(fdb_subspace, b"s", b"j", b"w")
    jobs, holder = held(db, jobs_space, limits)
    store = Schedules(store_space, targets=[jobs])
    store.add(db, "report", target=jobs, every=3600, value="report", limit_keys=ACME,
              paused=True)
    assert store.get(db, "report").limit_keys == ACME
    asked = store.run_now(db, "report")
    with Worker(db, Queue(own_space), Job.check, schedule_store=store):
        eventually(lambda: store.get(db, "report").fires, 10, "the run-now fire")
    eventually(lambda: nothing_claimable(db, jobs, limits), 10, "the job parked")
    jobs.ack(db, holder)
    lease = jobs.claim(db, 30)
    assert lease is not None and (lease.value, lease.id) == ("report", asked)


def test_a_code_defined_schedule_keeps_its_limit_keys_in_the_store(
        db: Any, fdb_subspace: Any, limits: Limits) -> None:
    store_space, jobs_space = spaces(fdb_subspace, b"s", b"j")
    jobs = FairQueue(jobs_space, limits=limits.use("per-customer"))
    store = Schedules(store_space)
    daily = Schedule(jobs, "daily", cron="0 3 * * *", group="g", limit_keys=ACME)
    assert store.upsert(db, daily)
    assert store.get(db, "daily").limit_keys == ACME
    assert not store.upsert(db, daily)  # says the same: nothing written
    other = Schedule(jobs, "daily", cron="0 3 * * *", group="g",
                     limit_keys={"per-customer": ("globex", 2)})
    assert store.upsert(db, other)  # the keys are part of what it says
    assert store.get(db, "daily").limit_keys == {"per-customer": ("globex", 2)}
    assert store.upsert(db, Schedule(jobs, "daily", cron="0 3 * * *", group="g"))
    assert store.get(db, "daily").limit_keys == {}


def every_tenth_of_a_second(after: float) -> float:
    return (math.floor(after * 10) + 1) / 10


def test_a_schedule_fired_alone_pushes_its_limit_keys(db: Any, fdb_subspace: Any,
                                                      limits: Limits) -> None:
    jobs_space, own_space = spaces(fdb_subspace, b"j", b"w")
    jobs, _ = held(db, jobs_space, limits)
    tick = Schedule(jobs, "tick", at=every_tenth_of_a_second, value="tick", limit_keys=ACME)
    with Worker(db, Queue(own_space), Job.check, schedules=[tick]):
        eventually(lambda: nothing_claimable(db, jobs, limits), 10, "a slot's job parked")


def follow_up(jobs: Queue[Any]) -> Callable[[Job], None]:
    def handle(job: Job) -> None:
        job.then(jobs, ("next", job.value), limit_keys=ACME)
    return handle


def test_a_follow_up_carries_its_limit_keys(db: Any, fdb_subspace: Any,
                                            limits: Limits) -> None:
    source_space, jobs_space = spaces(fdb_subspace, b"src", b"j")
    jobs, holder = held(db, jobs_space, limits)
    source: Queue[Any] = Queue(source_space)
    source.push(db, "go")
    Worker(db, source, follow_up(jobs), lease_seconds=10).run(burst=True)
    assert nothing_claimable(db, jobs, limits)
    jobs.ack(db, holder)
    lease = jobs.claim(db, 30)
    assert lease is not None and lease.value == ("next", "go")


def test_workflow_nodes_carry_their_limit_keys(db: Any, fdb_subspace: Any,
                                               limits: Limits) -> None:
    jobs_space, fair_space, flows_space = spaces(fdb_subspace, b"j", b"f", b"w")
    jobs, holder = held(db, jobs_space, limits)
    fair = FairQueue(fair_space, limits=limits.use("per-customer"))
    flows = Workflows(flows_space, structures=[jobs, fair])
    flow = flows.new()
    flow.add(jobs, "r", limit_keys=ACME)  # a first node: pushed by create
    g = flow.add(jobs, "g", limit_keys={"per-customer": "globex"})
    flow.add(fair, "d", deps=[g], group="g", limit_keys=ACME)  # pushed by g's ack
    flows.create(db, flow)
    ran: List[Any] = []
    Worker(db, jobs, ran.append, lease_seconds=10).run(burst=True)
    assert [job.value for job in ran] == ["g"]  # r waits, parked under acme
    assert nothing_claimable(db, fair, limits, jobs=2)  # d too
    jobs.ack(db, holder)  # moves r back
    Worker(db, jobs, ran.append, lease_seconds=10).run(burst=True)  # r's ack: d back
    lease = fair.claim(db, 30)
    assert [job.value for job in ran] == ["g", "r"] and lease is not None
    assert lease.value == "d"


def test_an_open_batchs_members_carry_their_limit_keys(db: Any, fdb_subspace: Any,
                                                       limits: Limits) -> None:
    jobs_space, flows_space = spaces(fdb_subspace, b"j", b"w")
    jobs, holder = held(db, jobs_space, limits)
    flows = Workflows(flows_space, structures=[jobs])
    batch = flows.create(db, flows.open_batch(on_complete=(jobs, "done")))
    flows.add_to_batch(db, batch, jobs, ["m1"], limit_keys=ACME)
    flows.add_to_batch(db, batch, jobs, ["m2"], limit_keys={"per-customer": "globex"})
    lease = jobs.claim(db, 30)
    assert lease is not None and lease.value == "m2"  # m1 waits, parked under acme
    assert nothing_claimable(db, jobs, limits)
    jobs.ack(db, holder)
    lease = jobs.claim(db, 30)
    assert lease is not None and lease.value == "m1"


BAD: List[Tuple[Any, type, str]] = [
    (["per-customer"], TypeError, "limit_keys must be None or a dict"),
    ({"nope": "a"}, ValueError, "limit_keys names 'nope', a limit this structure"),
    ({"per-customer": None}, TypeError, r"limit_keys\['per-customer'\] must be a key"),
    ({"per-customer": [1]}, TypeError, r"limit_keys\['per-customer'\]"),
]


@pytest.mark.parametrize("bad,error,message", BAD)
def test_bad_limit_keys_are_refused_naming_the_argument_with_nothing_written(
        db: Any, fdb_subspace: Any, limits: Limits, bad: Any, error: type,
        message: str) -> None:
    store_space, jobs_space, flows_space, plain_space = spaces(fdb_subspace, b"s", b"j",
                                                               b"w", b"p")
    jobs, _ = held(db, jobs_space, limits)
    fair = FairQueue(fdb_subspace["f"], limits=limits.use("per-customer"))
    store = Schedules(store_space, targets=[jobs])
    flows = Workflows(flows_space, structures=[jobs, fair])
    batch = flows.create(db, flows.open_batch(on_complete=(jobs, "done")))
    plain: Queue[Any] = Queue(plain_space)
    plain.push(db, "x")
    job = Job.of(plain.claim(db, 30))
    before = dump(db, fdb_subspace)
    flow = flows.new()
    calls: List[Callable[[], Any]] = [
        lambda: store.add(db, "s", target=jobs, every=60, limit_keys=bad),
        lambda: Schedule(jobs, "s", every=60, limit_keys=bad),
        lambda: Schedule(fair, "s", at=every_tenth_of_a_second, group="g", limit_keys=bad),
        lambda: job.then(jobs, "next", limit_keys=bad),
        lambda: job.then(fair, "next", group="g", limit_keys=bad),
        lambda: flow.add(jobs, "v", limit_keys=bad),
        lambda: flow.add_many(fair, ["v", "w"], group="g", limit_keys=bad),
        lambda: flows.add_to_batch(db, batch, jobs, ["v"], limit_keys=bad),
        lambda: jobs.ops.push_job(db, "v", limit_keys=bad),
    ]
    for call in calls:
        with pytest.raises(error, match=message):
            call()
    async_store = aio.AsyncSchedules(store_space, targets=[jobs])
    async_flows = AsyncWorkflows(flows_space, structures=[jobs, fair])
    awaited: List[Callable[[], Any]] = [
        lambda: async_store.add(db, "s", target=jobs, every=60, limit_keys=bad),
        lambda: async_flows.add_to_batch(db, batch, jobs, ["v"], limit_keys=bad),
    ]
    for call in awaited:
        with pytest.raises(error, match=message):
            asyncio.run(call())
    assert flow.nodes == []
    assert job.reported()[1] == ()
    assert dump(db, fdb_subspace) == before
