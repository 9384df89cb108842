"""The benchmark's targets, without a server: each passes at its threshold, fails just
past it, is skipped when not measured, and says when it was measured at another scope."""

from __future__ import annotations

from typing import List, Optional, Sequence

import pytest

from fdbrecipes.bench import results, targets
from fdbrecipes.bench.results import Latency, NoisyNeighbour, Row, Tail
from fdbrecipes.bench.settings import (
    AWAITED_READ,
    BARE_CLAIMS,
    BLOCKING_READ,
    CLAIM_ACK,
    FAIR_CLAIM,
    HC_POP,
    HISTORY_WORKER,
    HOT_LIMIT,
    HOT_SPREAD_POP,
    HOT_TREE_POP,
    ID_PUSH,
    IDLE_STARTED,
    IDLE_STORED,
    IDLE_WORKER,
    LIMIT,
    LIMITED_CLAIMS,
    PLAIN_CLAIMS,
    POP,
    PROBE_POP,
    PUSH,
    QUEUE_CLAIM,
    RAW_PUSH,
    RAW_WORKER,
    RECIPE_POP,
    RECIPE_PUSH,
    SHARD_PAIRS,
    SPREAD_POP,
    TASK_PUSH,
    TASK_WORKER,
    THREAD_PUSH,
    THREAD_PUSH_ALONE,
    THREAD_PUSH_UNSHARED,
    TREE_POP,
    UNIQUE_PUSH,
    WORKER,
    WORKFLOW_CREATE,
    WORKFLOW_FANIN,
    WORKFLOW_JOBS,
    WORKFLOW_PUSH_MANY,
    Kind,
    aio_kinds,
)
from fdbrecipes.bench.targets import Target

AIO_PUSH, AIO_POP, AIO_CLAIM = aio_kinds(64)


def row(kind: Kind, clients: int, rate: float, retries: Optional[int] = 0) -> Row:
    """A row of ``kind`` whose rate is ``rate`` (count over one second)."""
    return Row(kind.label, clients, int(rate), 1.0, retries, kind.unit, kind.recipe)


def sample_rows() -> List[Row]:
    """A run at 1 and 16 clients, with round figures meeting every target."""
    return results.with_ratios([
        row(LIMIT, 1, 600), row(LIMIT, 16, 2000),
        row(PUSH, 1, 540), row(PUSH, 16, 1800),
        row(RECIPE_PUSH, 1, 500, None), row(RECIPE_PUSH, 16, 1000, None),
        row(RECIPE_POP, 1, 500), row(RECIPE_POP, 16, 200, 124),
        row(POP, 16, 250, 300),
        row(SPREAD_POP, 16, 1000, 300),
        row(HC_POP, 1, 450), row(HC_POP, 16, 1200, 120),
        row(CLAIM_ACK, 1, 4000), row(CLAIM_ACK, 16, 12000),
        row(TREE_POP, 16, 900),
        row(PROBE_POP, 16, 1000), row(HOT_SPREAD_POP, 16, 900),
        row(HOT_LIMIT, 16, 2000), row(HOT_TREE_POP, 16, 500),
        row(AIO_PUSH, 1, 4000), row(AIO_POP, 1, 1000), row(AIO_CLAIM, 1, 12000),
        row(THREAD_PUSH_UNSHARED, 1, 900), row(THREAD_PUSH_ALONE, 1, 1000),
        row(THREAD_PUSH, 1, 3000),
        Row(AWAITED_READ.label, 1, 1000, 1.0, 0, "reads/s", cpu_seconds=0.30),
        Row(BLOCKING_READ.label, 1, 1000, 1.0, 0, "reads/s", cpu_seconds=0.28),
        row(WORKER, 16, 4000), row(BARE_CLAIMS, 16, 5000), row(HISTORY_WORKER, 16, 3600),
        Row(IDLE_WORKER.label, 1, 0, 3.0, 0, "items/s", cpu_seconds=0.015),
        Row(IDLE_STARTED.label, 1, 0, 3.0, 0, "items/s", cpu_seconds=0.010),
        Row(IDLE_STORED.label, 1, 0, 3.0, 0, "items/s", cpu_seconds=0.015),
        row(QUEUE_CLAIM, 1, 400), row(QUEUE_CLAIM, 16, 1000),
        row(FAIR_CLAIM, 1, 300), row(FAIR_CLAIM, 16, 600),
        *(row(kind, 16, 1000) for pair in SHARD_PAIRS for kind in pair),
        row(RAW_PUSH, 4, 500), row(TASK_PUSH, 4, 450),
        row(RAW_WORKER, 4, 1600), row(TASK_WORKER, 4, 1440),
        row(PLAIN_CLAIMS, 16, 5000), row(LIMITED_CLAIMS, 16, 4500),
        row(ID_PUSH, 4, 1000), row(UNIQUE_PUSH, 4, 900),
        row(WORKFLOW_JOBS, 4, 3000), row(WORKFLOW_FANIN, 4, 2000),
        row(WORKFLOW_PUSH_MANY, 1, 30_000), row(WORKFLOW_CREATE, 1, 20_000),
    ])


LATENCIES = [Latency(10**3, 500, 2.0, 3.0), Latency(10**4, 500, 2.4, 3.5),
             Latency(10**5, 500, 2.8, 4.0), Latency(10**6, 500, 3.2, 5.0)]
FAIR = [Latency(10**2, 500, 5.0, 7.0), Latency(10**4, 500, 6.0, 8.0),
        Latency(10**5, 500, 7.0, 9.0)]
NOISY = NoisyNeighbour(claims=240, loud=40)
FLOW = [Tail("Queue.claim, plain", 10**4, 500, 2.0, 5.0),
        Tail("Queue.claim, keyed concurrency(1)", 10**4, 500, 3.0, 10.0)]

#: Every target's name at 16 clients and its threshold, in the order they are printed.
NAMES = [
    ("high-contention pop, 16 poppers: x recipe pop", 5.0),
    ("high-contention pop, 16 poppers: x recipe pop", 3.0),
    ("high-contention pop, 16 poppers: x limit", 0.5),
    ("high-contention pop, 16 poppers: conflicts per pop", 0.2),
    ("pop spread=16, 16 poppers: x limit", 0.5),
    ("pop spread=16, 16 poppers: x recipe pop", 2.5),
    ("pop spread=16, 16 poppers: retries per pop", 0.5),
    ("claim_many(100)+ack, 16 clients: x limit", 5.0),
    ("Queue.push(db), 1 client: x limit", 0.8),
    ("Queue.push(db), 1 client: x recipe push", 0.95),
    ("Queue.push(db), 16 clients: x limit", 0.8),
    ("Queue.push(db), 16 clients: x recipe push", 0.95),
    ("WeightTree.pop, 16 clients: x limit", 0.4),
    ("WeightTree pop median growth, 1,000 to 1,000,000 items", 2.0),
    ("hot: Queue.pop spread=16, 16 clients: x bare probe pop", 0.9),
    ("hot: WeightTree.pop, 16 clients: x limit, same rounds", 0.25),
    ("aio push(db), 64 tasks: x Queue.push(db), 16 sync clients", 1.0),
    ("aio pop spread=16, 64 tasks: x Queue.pop spread=16, 16 sync clients", 1.0),
    ("aio claim_many(100)+ack, 64 tasks: x claim_many(100)+ack, 16 sync clients", 1.0),
    ("aio push(db), 64 tasks: x limit, 16 sync clients", 2.0),
    ("Queue.push(db), 16 threads: x Queue.push(db) unshared (before), 16 threads", 3.0),
    ("an awaited read's client CPU over a blocking one's (ms)", 0.05),
    ("Worker(concurrency=8), 16 clients: x limit", 2.0),
    ("Worker(concurrency=8), 16 clients: x claim_many(8, spread=8)+ack", 0.8),
    ("Worker(concurrency=8), history, 16 clients: x Worker(concurrency=8)", 0.8),
    ("an idle worker: cores busy", 0.01),
    ("Worker, idle, 1,000 stored schedules: CPU x Worker, idle, started", 2.0),
    ("FairQueue.claim+ack 1,000 g, 1 client: x Queue.claim+ack", 0.5),
    ("FairQueue.claim+ack 1,000 g, 16 clients: x Queue.claim+ack", 0.5),
    ("FairQueue claim median growth, 100 to 100,000 groups", 2.0),
    ("noisy neighbour: the loud group's claims before the quiet groups were served", 300),
    ("Queue.push(db), 8 shards, 16 clients: x Queue.push(db), 1 shard", 0.9),
    ("claim_many(100)+ack, 8 shards, 16 clients: x claim_many(100)+ack, 1 shard", 0.9),
    ("Queue.claim+ack, 8 shards, 16 clients: x Queue.claim+ack, 1 shard", 0.9),
    ("tasks: task.defer(db), 4 clients: x tasks: Queue.push(db), history", 0.9),
    ("tasks: Worker(db, app), no-op task, concurrency=8, 4 clients: x tasks: "
     "Worker(queue, handler), history, concurrency=8", 0.9),
    ("flow: claim_many(100)+ack, concurrency(10,000), 16 clients: x flow: "
     "claim_many(100)+ack, no limit", 0.9),
    ("flow: Queue.claim p99, 10,000 keys under a keyed limit: x a plain Queue's", 2.0),
    ("flow: Queue.push(db, unique=), 4 clients: x flow: Queue.push(db, id=)", 0.9),
    ("workflow: fan-in of 1,000 and a callback, Worker(concurrency=8), 4 clients: time x "
     "workflow: 1,000 jobs, Worker(concurrency=8)", 1.5),
    ("workflow: Workflows.create, 10,000 nodes: time x workflow: Queue.push_many(10,000)", 1.5),
]


def check(rows: Sequence[Row], latencies: Sequence[Latency] = LATENCIES,
          most: int = 16, fair: Sequence[Latency] = FAIR,
          noisy: Optional[NoisyNeighbour] = NOISY,
          flow: Sequence[Tail] = FLOW) -> List[Target]:
    return targets.check_targets(rows, latencies, most, fair, noisy, flow)


def test_every_target_in_order_and_passing() -> None:
    checked = check(sample_rows())
    assert [(t.name, t.threshold) for t in checked] == NAMES
    assert [t.status for t in checked] == ["PASS"] * len(NAMES)
    notes = {t.name: t.note for t in checked if t.note}
    assert notes == {"Queue.push(db), 16 threads: x Queue.push(db) unshared (before), "
                     "16 threads": "3.00x push(tr) a transaction each"}  # beside it


def test_unmeasured_targets_are_skipped() -> None:
    assert [t.status for t in check([], [], fair=[], noisy=None, flow=[])] == [
        "SKIP"] * len(NAMES)


def test_targets_fail() -> None:
    rows = results.with_ratios([
        row(LIMIT, 1, 600), row(LIMIT, 16, 2000), row(PUSH, 1, 300), row(PUSH, 16, 1800),
        row(RECIPE_PUSH, 1, 500, None), row(RECIPE_PUSH, 16, 2000, None),
        row(RECIPE_POP, 16, 300), row(HC_POP, 16, 1200, 500),
        row(SPREAD_POP, 16, 600, 700), row(CLAIM_ACK, 16, 9000), row(TREE_POP, 16, 600),
        row(QUEUE_CLAIM, 1, 400), row(FAIR_CLAIM, 1, 199),
        row(PROBE_POP, 16, 1000), row(HOT_SPREAD_POP, 16, 899),
        row(HOT_LIMIT, 16, 2000), row(HOT_TREE_POP, 16, 499),
        row(PLAIN_CLAIMS, 16, 1000), row(LIMITED_CLAIMS, 16, 899),
        row(ID_PUSH, 4, 1000), row(UNIQUE_PUSH, 4, 899),
    ])
    slow_claims = [Tail("plain", 10**4, 500, 1.0, 5.0), Tail("keyed", 10**4, 500, 1.0, 10.1)]
    slow = [Latency(10**3, 500, 1.0, 1.0), Latency(10**6, 500, 2.5, 3.0)]
    slow_fair = [Latency(10**2, 500, 1.0, 1.0), Latency(10**5, 500, 2.1, 3.0)]
    loud = NoisyNeighbour(claims=600, loud=301)
    assert [t.status for t in check(rows, slow, fair=slow_fair, noisy=loud,
                                    flow=slow_claims)] == [
        "FAIL", "PASS", "PASS", "FAIL",  # hc: 4x recipe, 0.6x limit, 0.42 conflicts
        "FAIL", "FAIL", "FAIL",  # spread: 0.3x limit, 2x recipe, 1.17 retries
        "FAIL",  # claim: 4.5x limit
        "FAIL", "FAIL", "PASS", "FAIL",  # push: 0.5x limit at 1, 0.9x recipe at 16
        "FAIL",  # WeightTree.pop 0.3x limit
        "FAIL",  # growth 2.5x
        "FAIL", "FAIL",  # hot: spread 0.899x the probe, tree 0.2495x the limit
        *["SKIP"] * 11,  # no async, threads or worker rows
        "FAIL", "SKIP",  # FairQueue.claim 0.4975x Queue.claim at 1; none at 16
        "FAIL", "FAIL",  # growth 2.1x, the loud group 301 claims
        *["SKIP"] * 3,  # no sharded rows
        *["SKIP"] * 2,  # no task rows
        "FAIL", "FAIL", "FAIL",  # flow: claims 0.899x, p99 2.02x, unique pushes 0.899x
        "SKIP", "SKIP",  # no workflow rows
    ]


# Each case: the kind, its rate, its retries and the recipe's rate (16 clients, limit
# 1000/s) that put one target exactly at its threshold; the target's index in NAMES.
AT_THRESHOLD = [
    (0, HC_POP, 1000, 0, 200),
    (1, HC_POP, 600, 0, 200),
    (2, HC_POP, 500, 0, 100),
    (3, HC_POP, 1000, 200, 100),
    (4, SPREAD_POP, 500, 0, 100),
    (5, SPREAD_POP, 1000, 0, 400),
    (6, SPREAD_POP, 1000, 500, 100),
    (7, CLAIM_ACK, 5000, 0, 100),
    (10, PUSH, 800, 0, 100),
    (11, PUSH, 950, 0, 1000),
    (12, TREE_POP, 400, 0, 100),
]


def at(kind: Kind, rate: int, retries: int, recipe: int) -> List[Row]:
    """Rows at 16 clients: the limit at 1000/s, the recipe, and ``kind``."""
    baseline = RECIPE_PUSH if kind is PUSH else RECIPE_POP
    return results.with_ratios([row(LIMIT, 16, 1000), row(baseline, 16, recipe),
                                row(kind, 16, rate, retries)])


@pytest.mark.parametrize("index, kind, rate, retries, recipe", AT_THRESHOLD)
def test_a_target_at_its_threshold_passes_and_just_past_it_fails(
        index: int, kind: Kind, rate: int, retries: int, recipe: int) -> None:
    target = check(at(kind, rate, retries, recipe))[index]
    assert target.value == pytest.approx(target.threshold)
    assert target.status == "PASS"
    past = (rate, retries + 1) if target.at_most else (rate - 1, retries)
    assert check(at(kind, *past, recipe))[index].status == "FAIL"
    assert check(results.with_ratios([row(LIMIT, 16, 1000)]))[index].status == "SKIP"


@pytest.mark.parametrize("index, kind, baseline, rate", [
    (14, HOT_SPREAD_POP, PROBE_POP, 900), (15, HOT_TREE_POP, HOT_LIMIT, 250)])
def test_a_hot_target_is_checked_against_its_own_rounds_baseline(
        index: int, kind: Kind, baseline: Kind, rate: int) -> None:
    def rows(rate: int) -> List[Row]:
        # the limit of the "limit" group is far higher: the hot rows use their own
        return results.with_ratios([row(LIMIT, 16, 4000), row(baseline, 16, 1000),
                                    row(kind, 16, rate)])

    target = check(rows(rate))[index]
    assert target.value == pytest.approx(target.threshold) and target.status == "PASS"
    assert check(rows(rate - 1))[index].status == "FAIL"
    assert check(results.with_ratios([row(kind, 16, rate)]))[index].status == "SKIP"


def test_a_target_at_the_threshold_passes() -> None:
    assert Target("x", 2.0, 2.0, at_most=True).status == "PASS"
    assert Target("x", 0.5, 0.5).status == "PASS"
    assert Target("x", 0.49, 0.5).status == "FAIL"
    assert Target("x", None, 0.5).status == "SKIP"


def test_targets_say_when_the_scope_is_smaller() -> None:
    rows = results.with_ratios([row(k, 8, r.rate) for r in sample_rows()
                                for k in (LIMIT, PUSH, RECIPE_PUSH, RECIPE_POP, HC_POP,
                                          SPREAD_POP, CLAIM_ACK, TREE_POP, QUEUE_CLAIM,
                                          FAIR_CLAIM, PROBE_POP, HOT_SPREAD_POP, HOT_LIMIT,
                                          HOT_TREE_POP)
                                if r.name == k.label and r.clients == 16])
    checked = check(rows, LATENCIES[:3], 8)
    scoped = [t for t in checked if "the target is at 16" in t.note]
    assert [t.name for t in scoped] == [
        "high-contention pop, 8 poppers: x recipe pop",
        "high-contention pop, 8 poppers: x recipe pop",
        "high-contention pop, 8 poppers: x limit",
        "high-contention pop, 8 poppers: conflicts per pop",
        "pop spread=16, 8 poppers: x limit",
        "pop spread=16, 8 poppers: x recipe pop",
        "pop spread=16, 8 poppers: retries per pop",
        "claim_many(100)+ack, 8 clients: x limit",
        "Queue.push(db), 8 clients: x limit",
        "Queue.push(db), 8 clients: x recipe push",
        "WeightTree.pop, 8 clients: x limit",
        "hot: Queue.pop spread=16, 8 clients: x bare probe pop",
        "hot: WeightTree.pop, 8 clients: x limit, same rounds",
        "aio push(db), 64 tasks: x Queue.push(db), 8 sync clients",
        "aio pop spread=16, 64 tasks: x Queue.pop spread=16, 8 sync clients",
        "aio claim_many(100)+ack, 64 tasks: x claim_many(100)+ack, 8 sync clients",
        "aio push(db), 64 tasks: x limit, 8 sync clients",
        "Worker(concurrency=8), 8 clients: x limit",
        "Worker(concurrency=8), 8 clients: x claim_many(8, spread=8)+ack",
        "Worker(concurrency=8), history, 8 clients: x Worker(concurrency=8)",
        "FairQueue.claim+ack 1,000 g, 8 clients: x Queue.claim+ack",
        "Queue.push(db), 8 shards, 8 clients: x Queue.push(db), 1 shard",
        "claim_many(100)+ack, 8 shards, 8 clients: x claim_many(100)+ack, 1 shard",
        "Queue.claim+ack, 8 shards, 8 clients: x Queue.claim+ack, 1 shard",
        "flow: claim_many(100)+ack, concurrency(10,000), 8 clients: x flow: "
        "claim_many(100)+ack, no limit",
    ]
    assert all(t.status == "PASS" for t in scoped[:13])
    push1 = [t for t in checked if t.name.startswith("Queue.push(db), 1 client")]
    assert [t.note for t in push1] == ["", ""] and {t.status for t in push1} == {"SKIP"}
    growth = next(t for t in checked if t.name.startswith("WeightTree pop median growth"))
    assert "10^6" in growth.note and "1,000 to 100,000 items" in growth.name


def test_one_client_checks_push_once() -> None:
    names = [t.name for t in check([], [], 1)]
    assert sum(n.startswith("Queue.push(db)") and "shard" not in n and "threads" not in n
               for n in names) == 2
    assert sum(n.startswith("FairQueue.claim+ack") for n in names) == 1
    assert len(names) == len(NAMES) - 3


def test_workflow_targets_at_their_thresholds() -> None:
    def flow(fan_in: int, create: int, clients: int = 4) -> List[Target]:
        rows = results.with_ratios([
            row(WORKFLOW_JOBS, clients, 1500), row(WORKFLOW_FANIN, clients, fan_in),
            row(WORKFLOW_PUSH_MANY, 1, 30_000), row(WORKFLOW_CREATE, 1, create)])
        return targets.workflow_targets(rows, 16 if clients == 4 else clients)

    assert [(t.value, t.status) for t in flow(1000, 20_000)] == [
        (pytest.approx(1.5), "PASS"), (pytest.approx(1.5), "PASS")]
    assert [t.status for t in flow(999, 19_999)] == ["FAIL"] * 2
    assert [t.status for t in targets.workflow_targets([], 16)] == ["SKIP"] * 2
    two = flow(1000, 20_000, clients=2)
    assert two[0].name.startswith("workflow: fan-in of 1,000 and a callback, "
                                  "Worker(concurrency=8), 2 clients: time x")
    assert (two[0].status, two[0].note) == ("PASS", "measured at 2 clients")


def test_flow_targets_at_their_thresholds() -> None:
    def flow(limited: int, keyed_p99: float, unique: int) -> List[Target]:
        rows = results.with_ratios([
            row(PLAIN_CLAIMS, 16, 1000), row(LIMITED_CLAIMS, 16, limited),
            row(ID_PUSH, 4, 1000), row(UNIQUE_PUSH, 4, unique)])
        tails = [Tail("plain", 10**4, 500, 1.0, 4.0), Tail("keyed", 10**4, 500, 1.0, keyed_p99)]
        return targets.flow_targets(rows, 16, tails)

    assert [(t.value, t.status) for t in flow(900, 8.0, 900)] == [
        (pytest.approx(0.9), "PASS"), (pytest.approx(2.0), "PASS"),
        (pytest.approx(0.9), "PASS")]
    assert [t.status for t in flow(899, 8.01, 899)] == ["FAIL"] * 3
    assert [t.status for t in targets.flow_targets([], 16, [])] == ["SKIP"] * 3
    two = targets.flow_targets([row(ID_PUSH, 2, 10), row(UNIQUE_PUSH, 2, 10)], 2, [])
    assert two[2].name == "flow: Queue.push(db, unique=), 2 clients: x flow: Queue.push(db, id=)"
    assert (two[2].status, two[2].note) == ("PASS", "measured at 2 clients")
