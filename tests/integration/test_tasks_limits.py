"""A task's limits (issue 40): ``@app.task(limits=[...])``, keyed by a function of the
call's arguments, shared by two Workers (and by any structure using the same store),
checked in the claims' transactions."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List

import pytest

from fdbrecipes import Limits, Queue, Worker, concurrency, rate
from fdbrecipes.tasks import App, current_job

pytestmark = pytest.mark.integration

#: The rate: starts per window of PER seconds.
RATE, PER = 3, 1.0


def customer_of(customer: str, n: int) -> Any:
    """A report's key: its customer (the house customer's reports are not limited)."""
    return None if customer == "house" else customer


def weight(n: int) -> int:
    """What a call weighs against the rate: 1, or 2 for the even ones."""
    return 2 if n % 2 == 0 else 1


def test_two_workers_keep_a_tasks_keyed_concurrency_and_rate(fdb_database: Any,
                                                             fdb_subspace: Any) -> None:
    db = fdb_database
    limits = Limits(fdb_subspace["limits"])
    limits.set(db, "per-customer", concurrency(1))
    limits.set(db, "api", rate(RATE, PER))
    app = App(fdb_subspace["app"])
    lock = threading.Lock()
    running: Dict[str, int] = {}
    peaks: Dict[str, int] = {}
    claims: List[Any] = []
    done = threading.Semaphore(0)

    @app.task(limits=limits.use("per-customer", key=customer_of))
    def report(customer: str, n: int) -> None:
        with lock:
            running[customer] = running.get(customer, 0) + 1
            peaks[customer] = max(peaks.get(customer, 0), running[customer])
        time.sleep(0.05)  # the work, holding its slot
        with lock:
            running[customer] -= 1
        done.release()

    @app.task(limits=[limits.use("api", cost=weight)])
    def call(n: int) -> None:
        job = current_job()
        assert job is not None
        with lock:
            claims.append((job.lease.claimed_at, weight(n)))
        done.release()

    for i in range(12):
        report.defer(db, ("a", "b", "house")[i % 3], i)
    for i in range(8):
        call.defer(db, i)
    with Worker(db, app, concurrency=4, lease_seconds=30), \
            Worker(db, app, concurrency=4, lease_seconds=30):
        for _ in range(20):
            assert done.acquire(timeout=60), "the tasks did not all run"
    assert peaks["a"] == peaks["b"] == 1
    assert peaks["house"] >= 1  # not limited (it ran; how many at once is up to them)
    window = int(PER * 1_000_000)
    for at, _ in claims:  # by the clock readings the claims made: what the rate counts
        started = sum(cost for when, cost in claims if at - window < when <= at)
        assert started <= RATE, f"{started} started in a window of {PER} s"
    assert app.structure("default").size(db) == 0


def test_a_tasks_limit_is_shared_with_a_plain_queue(fdb_database: Any,
                                                    fdb_subspace: Any) -> None:
    """A global limit a task carries counts the jobs of a Queue using it too."""
    db = fdb_database
    limits = Limits(fdb_subspace["limits"])
    limits.set(db, "reports", concurrency(1))
    app = App(fdb_subspace["app"])

    @app.task(limits=limits.use("reports"))
    def report(n: int) -> int:
        return n

    @app.task
    def free(n: int) -> int:
        return n

    plain: Queue[Any] = Queue(fdb_subspace["plain"], limits=limits.use("reports"))
    plain.push(db, "x")
    held = plain.claim(db, 30)
    assert held is not None
    report.defer(db, 1)
    free.defer(db, 2)
    queue = app.structure("default")
    leases = queue.claim_many(db, 5, 30)
    assert [lease.value[1] for lease in leases] == [free.name]  # the report waits
    state = limits.state(db, "reports")
    assert state is not None and state.running == 1 and state.parked == 1
    plain.ack(db, held)  # its slot moves the report back
    (lease,) = queue.claim_many(db, 5, 30)
    assert lease.value[1] == report.name


def test_a_fair_queues_task_carries_its_limits(fdb_database: Any,
                                               fdb_subspace: Any) -> None:
    """A FairQueue's task: its calls wait for their customer's slot, whatever group
    (tenant) they are in, beside the groups' own limits."""
    db = fdb_database
    limits = Limits(fdb_subspace["limits"])
    limits.set(db, "per-customer", concurrency(1))
    app = App(fdb_subspace["app"])

    @app.task(queue="fair", group="tenant",
              limits=limits.use("per-customer", key=customer_in_tenant))
    def export(tenant: str, customer: str) -> None: ...

    export.defer(db, "t1", "a")
    export.defer(db, "t2", "a")
    export.defer(db, "t1", "b")
    fair = app.structure("fair")
    leases = [fair.claim(db, 30) for _ in range(4)]
    got = [lease for lease in leases if lease is not None]
    assert len(got) == 2  # a's second call parked: a has one running
    state = limits.state(db, "per-customer", "a")
    assert state is not None and state.running == 1 and state.parked == 1
    for lease in got:
        fair.ack(db, lease)  # a's slot back: its parked call moves back, its group looked at
    again = fair.claim(db, 30)
    assert again is not None and fair.claim(db, 30) is None
    assert limits.state(db, "per-customer", "a").running == 1


def customer_in_tenant(tenant: str, customer: str) -> Any:
    """An export's key: its customer."""
    return customer


def test_bad_task_limits_are_refused_naming_them(fdb_subspace: Any) -> None:
    limits = Limits(fdb_subspace["limits"])
    other = Limits(fdb_subspace["other"])
    app = App(fdb_subspace["app"])

    def f(n: int) -> None: ...

    with pytest.raises(TypeError, match="task bad: limits must be a LimitUse"):
        app.task(name="bad", limits="api")(f)  # type: ignore[arg-type]
    app.task(name="one", limits=limits.use("a"))(f)
    with pytest.raises(ValueError, match="one store"):
        app.task(name="two", limits=other.use("b"))(f)
    assert sorted(app.tasks) == ["one"]
    keyed = app.task(name="keyed", queue="k", limits=limits.use("a", key=bad_key))(f)
    with pytest.raises(TypeError, match="key function of limit 'a'"):
        keyed.defer(fdb_subspace, 1)  # refused before anything is written
    costly = app.task(name="costly", queue="c", limits=limits.use("a", cost=bad_cost))(f)
    with pytest.raises(ValueError, match="cost of a call under limit 'a'"):
        costly.defer(fdb_subspace, 1)


def bad_key(n: int) -> Any:
    """A key the tuple layer cannot encode."""
    return object()


def bad_cost(n: int) -> int:
    """A cost below 1."""
    return 0
