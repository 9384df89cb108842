"""What job-queue users expect (issue 13): delays, retries with backoff, dead letters,
heartbeats and stats, on Queue and PriorityQueue."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any, Dict, List, Set

import pytest

from fdbrecipes import LeaseExpiredError, PriorityQueue, Queue, QueueStats
from tests.helpers import Faulty, RandomFaults, TestClock, run_threads, unknown_results

pytestmark = pytest.mark.integration


# -- delays ----------------------------------------------------------------------------


def test_a_delayed_item_counts_at_once_and_shows_after_its_delay(db: Any,
                                                                  fdb_subspace: Any) -> None:
    clock = TestClock()
    q = Queue(fdb_subspace, clock=clock)
    q.push(db, b"now")
    q.push(db, b"later", delay=60)
    q.push_many(db, [b"much later", b"much later too"], delay=600)
    q.push(db, b"after")
    assert q.size(db) == 5
    assert q.items(db) == [b"now", b"after"]
    assert q.stats(db)[:4] == (2, 3, 0, 0)
    assert q.pop(db) == b"now"
    clock.advance(100)
    assert q.items(db) == [b"later", b"after"]  # in push order, once visible
    lease = q.claim(db, 30)
    assert lease is not None and lease.value == b"later" and q.peek(db) == b"after"
    q.ack(db, lease)
    clock.advance(1000)
    assert q.pop_many(db, 10) == [b"much later", b"much later too", b"after"]


def test_delays_at_both_ends_of_a_priority_queue(db: Any, fdb_subspace: Any) -> None:
    clock = TestClock()
    pq = PriorityQueue(fdb_subspace, clock=clock)
    pq.push(db, "urgent later", 9, delay=50)
    pq.push(db, "low", 1)
    pq.push(db, "urgent", 9)
    assert pq.pop_max(db) == "urgent"
    assert pq.pop_max(db) == "low"
    assert pq.pop_min(db) is None
    clock.advance(60)
    assert pq.pop_min(db) == "urgent later"


def test_delays_are_honoured_under_concurrency(db: Any, fdb_subspace: Any) -> None:
    """4 producers push items with delays of 0, 100 or 300 test-clock seconds while 4
    consumers pop; after each step of the clock, nothing delayed longer has come out,
    and in the end everything came out exactly once."""
    clock = TestClock()
    producers, per_producer = 4, 150
    delays = [0, 100, 300]
    popped: List[Any] = []
    progress = threading.Condition()
    errors: List[BaseException] = []
    stop = threading.Event()

    def producer(p: int) -> None:
        try:
            q = Queue(fdb_subspace, clock=clock)
            for i in range(per_producer):
                q.push(db, (p, i, delays[i % 3]), delay=delays[i % 3] or None)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def consumer() -> None:
        try:
            q = Queue(fdb_subspace, clock=clock)
            while not stop.is_set():
                got = q.pop_many(db, 5, spread=3)
                with progress:
                    popped.extend(got)
                    progress.notify_all()
                if not got:
                    q.wait(db, timeout=0.2)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(producers)]
    run_threads(threads, errors, timeout=300)
    consumers = [threading.Thread(target=consumer, daemon=True) for _ in range(4)]
    for t in consumers:
        t.start()
    total = producers * per_producer
    shown = 0
    for at in (0, 150, 350):  # clock readings never on a delay's boundary
        clock.advance(at - shown)
        shown = at
        expected = producers * sum(1 for i in range(per_producer) if delays[i % 3] <= at)
        with progress:
            assert progress.wait_for(lambda n=expected: len(popped) >= n, timeout=60), \
                f"{len(popped)} of {expected} items came out by t={at}"
            assert all(d <= at for _, _, d in popped), "a delayed item came out early"
            assert len(popped) == expected
    stop.set()
    for t in consumers:
        t.join(30)
    assert not errors, errors
    counts = Counter(popped)
    assert len(counts) == total and max(counts.values()) == 1
    assert Queue(fdb_subspace).size(db) == 0


# -- retries with backoff ----------------------------------------------------------------


def test_release_with_a_delay_is_a_retry_with_backoff(db: Any, fdb_subspace: Any) -> None:
    clock = TestClock()
    q = Queue(fdb_subspace, clock=clock)
    q.push_many(db, [b"flaky", b"next"])
    lease = q.claim(db, 30)
    assert lease is not None and lease.value == b"flaky"
    assert q.release(db, lease, delay=10) is True
    assert q.stats(db)[:3] == (1, 1, 0)
    assert q.pop(db) == b"next"
    assert q.claim(db, 30) is None
    clock.advance(11)
    again = q.claim(db, 30)
    assert again is not None and again.value == b"flaky" and again.deliveries == 2
    q.ack(db, again)
    assert q.size(db) == 0


# -- dead letters ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["queue", "priority"])
def test_an_item_that_always_fails_dies_after_max_deliveries(db: Any, fdb_subspace: Any,
                                                             kind: str) -> None:
    clock = TestClock()
    if kind == "queue":
        q: Any = Queue(fdb_subspace, clock=clock, max_deliveries=3)
        q.push_many(db, [b"poison", b"fine"])

        def claim() -> Any:
            return q.claim(db, 5)
    else:
        q = PriorityQueue(fdb_subspace, clock=clock, max_deliveries=3)
        q.push_many(db, [(b"poison", 9), (b"fine", 1)])

        def claim() -> Any:
            return q.claim_max(db, 5)
    deliveries = []
    for attempt in range(3):
        lease = claim()
        assert lease is not None and lease.value == b"poison"
        deliveries.append(lease.deliveries)
        if attempt == 1:
            clock.advance(10)  # this one times out instead of failing
        else:
            assert q.release(db, lease, delay=1) is True
        clock.advance(2)
    assert deliveries == [1, 2, 3]
    lease = claim()
    assert lease is not None and lease.value == b"fine"
    [letter] = q.dead(db)
    assert letter.value == b"poison" and letter.deliveries == 3
    assert abs(letter.died_at - time.time()) < 60 and letter.token
    assert q.stats(db)[:4] == (0, 0, 1, 1) and q.size(db) == 1
    assert q.requeue_dead(db) == 1
    assert q.dead(db) == [] and q.stats(db).dead == 0
    lease = claim()
    assert lease is not None and lease.value == b"poison" and lease.deliveries == 1


def test_an_expired_lease_dies_when_the_next_claim_would_redeliver_it(
    db: Any, fdb_subspace: Any
) -> None:
    clock = TestClock()
    q = Queue(fdb_subspace, clock=clock, max_deliveries=1)
    q.push_many(db, [b"once", b"other"])
    assert q.claim(db, 5) is not None
    clock.advance(10)
    assert q.stats(db)[:4] == (1, 0, 0, 1)  # counted dead already
    lease = q.claim(db, 5)
    assert lease is not None and lease.value == b"other"
    assert [d.value for d in q.dead(db)] == [b"once"]
    # the reason says what happened (no error was given: its lease expired)
    assert [d.reason for d in q.dead(db)] == [
        "LeaseExpired: the lease ended before the job was settled (its worker died, "
        "stalled or ran past the lease)"]
    q.ack(db, lease)
    assert q.purge_dead(db) == 1 and q.dead(db) == [] and q.size(db) == 0


def test_dead_letters_in_bulk(db: Any, fdb_subspace: Any) -> None:
    clock = TestClock()
    q = Queue(fdb_subspace, clock=clock, max_deliveries=1)
    q.push_many(db, range(2_500))
    assert len(q.claim_many(db, 2_500, 5)) == 2_500
    clock.advance(10)
    assert q.stats(db).dead == 2_500
    assert q.pop(db) is None  # meets the backlog, buries some
    assert q.pop(db) is None  # buries the rest first, in batches
    assert len(q.dead(db)) == 2_500
    tr = db.create_transaction()
    with pytest.raises(ValueError, match="^purge_dead: more than 1,000"):
        q.purge_dead(tr)
    with pytest.raises(ValueError, match="^limit: at most 1,000"):
        q.requeue_dead(tr, 1_001)
    tr.cancel()
    assert q.requeue_dead(db, 1_200) == 1_200
    assert q.pop_many(db, 2_000) == list(range(1_200))
    assert q.purge_dead(db) == 1_300
    assert q.stats(db) == QueueStats(0, 0, 0, 0, None)


# -- heartbeats -----------------------------------------------------------------------


def test_a_heartbeat_keeps_a_1_second_lease_through_a_3_second_job(db: Any,
                                                                   fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push(db, b"long job")
    other = Queue(fdb_subspace)
    with q.claimed(db, 1, timeout=5) as lease:
        assert lease is not None and lease.value == b"long job"
        for _ in range(6):  # 3 s, during which nobody else may take it
            time.sleep(0.5)  # the job's work
            assert other.claim(db, 1) is None
    assert q.size(db) == 0 and q.dead(db) == []


def test_a_failing_job_is_released_with_its_delay(db: Any, fdb_subspace: Any) -> None:
    clock = TestClock()
    q = Queue(fdb_subspace, clock=clock)
    q.push(db, b"fails")
    with pytest.raises(RuntimeError, match="boom"), q.claimed(db, 30, release_delay=60):
        raise RuntimeError("boom")
    assert q.stats(db)[:3] == (0, 1, 0)
    clock.advance(61)
    lease = q.claim(db, 30)
    assert lease is not None and lease.deliveries == 2


def test_a_lost_lease_makes_the_block_exit_raise(db: Any, fdb_subspace: Any) -> None:
    clock = TestClock()
    q = Queue(fdb_subspace, clock=clock)
    q.push(db, b"stalled")
    with pytest.raises(LeaseExpiredError), q.claimed(db, 1.5) as lease:
        assert lease is not None
        clock.advance(10)  # the process "stalled" past its deadline
        # The thing under test: the heartbeat thread's next extension (every 0.5 s)
        # finds the lease gone; no public hook says when, so three intervals pass.
        time.sleep(1.5)
    assert q.stats(db).visible == 1  # not acked


def test_claimed_yields_none_at_the_timeout(db: Any, fdb_subspace: Any) -> None:
    pq = PriorityQueue(fdb_subspace)
    with pq.claimed_max(db, 5, timeout=0.1) as lease:
        assert lease is None
    pq.push(db, b"x", 1)
    with pq.claimed_min(db, 5, timeout=1) as lease:
        assert lease is not None and lease.value == b"x"
    assert pq.size(db) == 0


# -- stats -----------------------------------------------------------------------------


def test_stats_report_the_oldest_age(db: Any, fdb_subspace: Any) -> None:
    clock = TestClock()
    q = Queue(fdb_subspace, clock=clock)
    assert q.stats(db) == QueueStats(0, 0, 0, 0, None)
    q.push(db, b"a")
    clock.advance(30)
    q.push(db, b"b")
    age = q.stats(db).oldest_age
    assert age is not None and 30 <= age < 40


def test_stats_equal_a_model_after_random_workloads_with_faults(
    db: Any, fdb_cluster_file: str, fdb_subspace: Any
) -> None:
    """Random pushes (some delayed), claims, acks, releases and pops, a fifth of all
    commits reporting commit_unknown_result (half of them applied): the counters stay
    exact."""
    rng = random.Random(13)
    clock = TestClock()
    faulty = unknown_results(fdb_cluster_file, RandomFaults(13))
    q = Queue(fdb_subspace, clock=clock, max_deliveries=2)
    visible: Set[int] = set()
    delayed: Dict[int, float] = {}
    leases: Dict[bytes, Any] = {}
    dead = 0
    now = 0.0
    for step in range(300):  # ticks of 1,000 s, delays of 1,500 s: never on a boundary
        action = rng.choice(["push", "push", "delay", "claim", "ack", "release", "pop",
                             "tick"])
        if action == "push":
            q.push(faulty, step)
            visible.add(step)
        elif action == "delay":
            q.push(faulty, step, delay=1_500)
            delayed[step] = now + 1_500
        elif action == "claim":
            lease = q.claim(faulty, 10**7)  # never expires during the run
            assert (lease is None) == (not visible)
            if lease is not None:
                visible.discard(lease.value)
                leases[lease.token] = lease
        elif action in ("ack", "release") and leases:
            token = rng.choice(sorted(leases))
            lease = leases.pop(token)
            if action == "ack":
                q.ack(faulty, lease)
            else:
                assert q.release(faulty, lease) is True
                if lease.deliveries >= 2:
                    dead += 1
                else:
                    visible.add(lease.value)
        elif action == "pop":
            value = q.pop(faulty)
            assert (value is None) == (not visible)
            visible.discard(value)
        elif action == "tick":
            clock.advance(1_000)
            now += 1_000
            for value, at in list(delayed.items()):
                if at <= now:
                    visible.add(value)
                    del delayed[value]
        stats = q.stats(db)
        assert stats[:4] == (len(visible), len(delayed), len(leases), dead), (step, action)
    assert q.size(db) == len(visible) + len(delayed) + len(leases)


def test_faulty_helper_still_reports_each_fault(db: Any, fdb_cluster_file: str,
                                               fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    Faulty(fdb_cluster_file).once("applied", lambda d: q.push(d, b"x"))
    assert q.items(db) == [b"x"]
