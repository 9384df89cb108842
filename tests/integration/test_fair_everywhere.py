"""FairQueue everywhere a Queue is, on a real server: a Worker and an AsyncWorker serve
it within its limits, claim_many and claimed, the stuck-work listings per group, the
index of groups that tenants leave, a Schedule, the metrics and their adapters, and
the asyncio twin."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any, Dict, List

import pytest

from fdbrecipes import (
    FairLease,
    FairQueue,
    Job,
    JobFinished,
    LeaseExpiredError,
    Schedule,
    Worker,
    aio,
    drive,
)
from fdbrecipes.metrics import ITEMS, collect
from tests.helpers import Tracer

pytestmark = pytest.mark.integration

GROUPS = ("a", "b", "c")


class Overlap:
    """How many jobs of each group run at once, at most (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: Counter[Any] = Counter()
        self.most: Counter[Any] = Counter()
        self.done: List[Any] = []

    def enter(self, job: Job) -> None:
        with self.lock:
            group = job.lease.group  # type: ignore[attr-defined]
            self.now[group] += 1
            self.most[group] = max(self.most[group], self.now[group])

    def leave(self, job: Job) -> None:
        with self.lock:
            group = job.lease.group  # type: ignore[attr-defined]
            self.now[group] -= 1
            self.done.append((group, job.value))


def drain(worker: Worker, seconds: float = 120) -> None:
    """``worker.run(burst=True)``, failing (not hanging) if it has not returned in time."""
    runner = threading.Thread(target=worker.run, kwargs={"burst": True}, daemon=True)
    runner.start()
    runner.join(seconds)
    if runner.is_alive():
        worker.stop()
        worker.stop()
        runner.join(30)
        pytest.fail(f"the worker did not drain its queue in {seconds} s")


def fill(db: Any, q: Any) -> None:
    for g in GROUPS:
        q.push_many(db, range(20), group=g)


def check_served(db: Any, q: FairQueue, overlap: Overlap) -> None:
    assert sorted(overlap.done) == sorted((g, i) for g in GROUPS for i in range(20))
    assert max(overlap.most.values()) <= 2, overlap.most
    assert q.stats(db) == {}  # every group left the index with its last item
    assert q.groups(db) == []


def test_a_worker_serves_a_fair_queue_within_its_limits(db: Any, fdb_subspace: Any) -> None:
    q = FairQueue(fdb_subspace, default_limit=2)
    fill(db, q)
    overlap = Overlap()

    def handler(job: Job) -> None:
        overlap.enter(job)
        time.sleep(0.005)  # the work: jobs of one group would overlap without the limit
        overlap.leave(job)

    drain(Worker(db, q, handler, concurrency=8))
    check_served(db, q, overlap)


def test_an_async_worker_serves_a_fair_queue_within_its_limits(
        db: Any, fdb_subspace: Any) -> None:
    q = aio.AsyncFairQueue(fdb_subspace, default_limit=2)
    sync = FairQueue(fdb_subspace)
    fill(db, sync)
    overlap = Overlap()

    async def handler(job: Job) -> None:
        overlap.enter(job)
        await asyncio.sleep(0.005)  # the work, as the sync handler's above
        overlap.leave(job)

    asyncio.run(asyncio.wait_for(
        aio.AsyncWorker(db, q, handler, concurrency=8).run(burst=True), 120))
    check_served(db, sync, overlap)


def test_claim_many_honours_limits_and_claimed_acks(db: Any, fdb_subspace: Any) -> None:
    q = FairQueue(fdb_subspace, default_limit=3)
    q.push_many(db, range(5), group="a")
    q.push_many(db, range(5), group="b")
    leases = q.claim_many(db, 10, 30)
    assert Counter(lease.group for lease in leases) == {"a": 3, "b": 3}
    assert all(isinstance(lease, FairLease) for lease in leases)
    assert q.claim_many(db, 1, 30) == []  # both groups at their limit
    assert q.ack_many(db, leases) == [True] * 6
    with q.claimed(db, 30, timeout=10) as lease:
        assert lease is not None and lease.value == 3
    assert sorted(q.items(db, lease.group)) == [4]
    assert q.stats(db, lease.group).in_flight == 0  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="at most 100"):
        q.claim_many(db.create_transaction(), 101, 30)


def test_stuck_work_per_group(db: Any, fdb_subspace: Any) -> None:
    q = FairQueue(fdb_subspace, max_deliveries=1)
    q.push(db, "now", group="g", id=b"now")
    q.push(db, "later", group="g", id=b"later", delay=3600)
    q.push(db, "other", group="h")
    assert q.peek(db, "g") == "now" and q.items(db, "g") == ["now"]
    assert [d.value for d in q.delayed(db, "g")] == ["later"]
    lease = q.claim(db, 60)
    assert lease is not None
    infos = q.leases(db, lease.group)
    assert [i.value for i in infos] == [lease.value] and infos[0].token == lease.token
    assert q.leases(db, "g" if lease.group == "h" else "h") == []
    assert q.remove(db, group="g", id=b"later") == "later"  # a delayed push, cancelled
    assert q.remove(db, group="g", id=b"later") is None
    assert q.delayed(db, "g") == []
    q.ack(db, infos[0].token)  # the listing's token finishes the work
    with pytest.raises(LeaseExpiredError):
        q.ack(db, lease)
    other = q.claim(db, 60)
    assert other is not None
    assert q.bury(db, other, "malformed")
    assert [d.reason for d in q.dead(db, other.group)] == ["malformed"]
    assert other.group in q.groups(db)  # a dead letter keeps its group in the index
    assert q.purge_dead(db, other.group) == 1
    assert other.group not in q.groups(db)


def group_keys(db: Any, subspace: Any) -> Dict[Any, List[Any]]:
    """The keys left under each group's queue (``S/"q"/(group,)/...``), unpacked."""
    groups = subspace["q"]
    r = groups.range()
    found: Dict[Any, List[Any]] = {}
    for kv in db.get_range(r.start, r.stop):
        group, *rest = groups.unpack(kv.key)
        found.setdefault(group, []).append(tuple(rest))
    return found


def test_the_index_of_groups_shrinks_as_tenants_leave(db: Any, fdb_subspace: Any) -> None:
    """300 tenants come and go: the index is empty again (but for a group with a
    policy), and their keys are gone but for the ids still remembered; a group whose
    ids expire later loses them at a claim's look at that time."""
    q = FairQueue(fdb_subspace)
    tenants = [f"t{i}" for i in range(300)]
    with_ids = {f"t{i}" for i in range(0, 300, 17)}
    for t in tenants:
        q.push(db, t, group=t, id=b"x" if t in with_ids else None)
    q.set_group(db, "vip", share=2)
    assert len(q.groups(db)) == 301
    while True:
        leases = q.claim_many(db, 50, 30)
        if not leases:
            break
        assert all(q.ack_many(db, leases))
    assert q.groups(db) == ["vip"]
    left = group_keys(db, fdb_subspace)
    assert set(left) == with_ids  # remembered for an hour: their ids only
    assert {key[0] for keys in left.values() for key in keys} == {"k", "g"}
    brief = FairQueue(fdb_subspace, id_retention=0.5)
    brief.push(db, "short-lived", group="brief", id=b"once")
    lease = brief.claim(db, 30)
    assert lease is not None and lease.group == "brief"
    brief.ack(db, lease)
    assert "brief" in group_keys(db, fdb_subspace) and "brief" not in brief.groups(db)
    deadline = time.monotonic() + 30
    while "brief" in group_keys(db, fdb_subspace) and time.monotonic() < deadline:
        assert brief.claim(db, 30) is None  # each claim looks at the groups due
        time.sleep(0.05)  # a poll, with its deadline: the cluster's clock moves in steps
    assert set(group_keys(db, fdb_subspace)) == with_ids


def test_a_schedule_pushes_into_a_group(db: Any, fdb_subspace: Any) -> None:
    q = FairQueue(fdb_subspace)
    schedule = Schedule(q, "nightly", every=3600, value=b"report", group="ops")
    push, _slot = schedule.pushing(db, now=time.time() - 3600)
    drive(push)
    drive(schedule.pushing(db, now=time.time() - 3600)[0])  # the same slot: once
    assert [d.value for d in q.delayed(db, "ops")] + q.items(db, "ops") == [b"report"]
    with pytest.raises(TypeError, match="group="):
        Schedule(q, "nightly", every=3600)
    with pytest.raises(TypeError, match="priority"):
        Schedule(q, "nightly", every=3600, group="ops", priority=1)


def test_metrics_and_their_adapters_accept_a_fair_queue(db: Any, fdb_subspace: Any) -> None:
    q = FairQueue(fdb_subspace)
    q.push_many(db, range(3), group="a")
    q.push(db, 9, group="b", delay=3600)
    q.claim(db, 60)
    samples = {s.label_dict["state"]: s.value for s in collect(db, {"fair": q})
               if s.name == ITEMS}
    assert samples == {"visible": 2.0, "delayed": 1.0, "in_flight": 1.0, "dead": 0.0}
    prometheus = pytest.importorskip("prometheus_client")
    from fdbrecipes.otel import Tracing
    from fdbrecipes.prometheus import JobMetrics, QueueCollector

    registry = prometheus.CollectorRegistry()
    registry.register(QueueCollector(db, {"fair": aio.AsyncFairQueue(fdb_subspace)}))
    metrics = JobMetrics("fair", registry=registry)
    tracer = Tracer()
    tracing = Tracing("fair", tracer)
    finished: List[JobFinished] = []

    def sink(event: Any) -> None:
        metrics(event)
        tracing(event)
        if isinstance(event, JobFinished):
            finished.append(event)

    drain(Worker(db, q, handle_nothing, on_event=sink))
    text = prometheus.generate_latest(registry).decode()
    assert 'fdbrecipes_queue_items{queue="fair",state="delayed"} 1.0' in text
    assert f'fdbrecipes_jobs_total{{outcome="ok",queue="fair"}} {len(finished)}.0' in text
    assert [s.name for s in tracer.spans].count("settle fair") == len(finished) >= 2


def handle_nothing(_job: Job) -> None:
    """A handler that does nothing."""


def test_the_async_fair_queue_works_like_the_sync_one(db: Any, fdb_subspace: Any) -> None:
    async def main() -> Dict[str, Any]:
        q = aio.AsyncFairQueue(fdb_subspace, default_limit=1)
        await q.set_group(db, "a", share=2)
        await q.push_many(db, [1, 2], group="a")
        await q.push(db, 3, group="b", id=b"three")
        assert await q.lottery(db) == {"a": 2, "b": 1}
        leases = await q.claim_many(db, 5, 30)
        assert sorted(lease.value for lease in leases) == [1, 3]
        assert await q.claim_wait(db, 30, timeout=0.2) is None  # both at their limit
        renewed = await q.extend_many(db, leases, 60)
        assert [lease.token for lease in renewed] == [lease.token for lease in leases]
        assert await q.release(db, leases[0], delay=None)
        async with q.claimed(db, 30, timeout=10) as lease:
            assert lease is not None
        await q.ack(db, leases[1])
        rest = await q.claim(db, 30)
        assert rest is not None
        await q.ack(db, rest)
        return {"groups": await q.groups(db), "stats": await q.stats(db, "a"),
                "policy": await q.group_policy(db, "a"), "wait": await q.wait(db, 0.1)}

    found = asyncio.run(main())
    assert found["groups"] == ["a"]  # its policy keeps it listed
    assert found["stats"][:4] == (0, 0, 0, 0) and found["policy"].share == 2
    assert found["wait"] is False
