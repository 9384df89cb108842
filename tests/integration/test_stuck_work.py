"""Stuck work is visible and can be acted on: ``leases()``, ``delayed()`` and
``remove(id=)`` on Queue and PriorityQueue, and the ``fdbrecipes`` logger's lines for
dead letters, expired leases, long retry loops and unknown outcomes."""

from __future__ import annotations

import logging
from typing import Any, Iterator, Optional

import pytest

from fdbrecipes import LeaseExpiredError, PriorityQueue, Queue, UnknownResultError
from tests.helpers import Faulty, TestClock, unknown_results

pytestmark = pytest.mark.integration

SECOND = 1_000_000  # clock readings per second


@pytest.fixture
def q(fdb_subspace: Any, clock: TestClock) -> Queue:
    return Queue(fdb_subspace, clock=clock)


# -- leases() and delayed() ----------------------------------------------------------


def test_leases_list_what_is_in_flight_oldest_claim_first(db: Any, q: Queue,
                                                          clock: TestClock) -> None:
    q.push_many(db, ["a", "b", "c"])
    first = q.claim(db, 30)
    clock.advance(1)
    second = q.claim(db, 60)
    assert first is not None and second is not None
    infos = q.leases(db)
    assert [(i.value, i.deliveries, i.deadline, i.token) for i in infos] == [
        ("a", 1, first.deadline, first.token), ("b", 1, second.deadline, second.token)]
    assert infos[0].claimed_at is not None and infos[1].claimed_at is not None
    assert infos[0].deadline - infos[0].claimed_at == 30 * SECOND
    assert infos[1].claimed_at - infos[0].claimed_at >= SECOND  # oldest claim first
    assert [i.value for i in q.leases(db, limit=1)] == ["a"]
    q.ack(db, infos[0].token)  # an operator finishes work a consumer holds
    assert [i.value for i in q.leases(db)] == ["b"]
    assert q.stats(db)[:3] == (1, 0, 1)


def test_a_released_item_is_listed_with_its_deliveries(db: Any, q: Queue) -> None:
    q.push_many(db, ["a", "b"])
    lease = q.claim(db, 30)
    assert lease is not None
    assert q.release(db, lease, delay=600)
    again = q.claim(db, 30)
    assert again is not None and again.value == "b"
    [held] = q.leases(db)
    [waiting] = q.delayed(db)
    assert (held.value, held.deliveries) == ("b", 1)
    assert (waiting.value, waiting.deliveries) == ("a", 1)


def test_delayed_lists_the_soonest_first(db: Any, q: Queue, clock: TestClock) -> None:
    q.push(db, "in ten minutes", delay=600)
    q.push(db, "in five minutes", delay=300)
    q.push(db, "now")
    delayed = q.delayed(db)
    assert [(d.value, d.deliveries) for d in delayed] == [("in five minutes", 0),
                                                          ("in ten minutes", 0)]
    assert delayed[1].due_at - delayed[0].due_at >= 299 * SECOND
    assert [d.value for d in q.delayed(db, limit=1)] == ["in five minutes"]
    clock.advance(301)
    assert [d.value for d in q.delayed(db)] == ["in ten minutes"]
    assert q.leases(db) == []


def test_the_listings_of_a_priority_queue(db: Any, fdb_subspace: Any) -> None:
    pq = PriorityQueue(fdb_subspace)
    pq.push_many(db, [("low", 1), ("high", 9)])
    pq.push(db, "later", 5, delay=600)
    lease = pq.claim_max(db, 30)
    assert lease is not None and lease.value == "high"
    assert [i.value for i in pq.leases(db)] == ["high"]
    assert [d.value for d in pq.delayed(db)] == ["later"]


@pytest.mark.parametrize("limit", [-1, True, 1.5, "1"])
def test_bad_limits_are_refused(db: Any, q: Queue, limit: Any) -> None:
    for listing in (q.leases, q.delayed):
        with pytest.raises((TypeError, ValueError), match="limit"):
            listing(db, limit=limit)
        assert listing(db, limit=0) == []


# -- remove(id=) -------------------------------------------------------------------------


def test_remove_takes_out_the_pending_item_pushed_with_an_id(db: Any, q: Queue) -> None:
    q.push(db, "keep")
    q.push(db, "drop", id=b"order-1")
    q.push(db, "keep too")
    assert q.remove(db, id=b"order-1") == "drop"
    assert q.items(db) == ["keep", "keep too"] and q.size(db) == 2
    assert q.remove(db, id=b"order-1") is None  # already gone
    q.push(db, "drop again", id=b"order-1")  # the id is remembered, as after a pop
    assert q.size(db) == 2
    assert q.remove(db, id=b"never pushed") is None


def test_remove_cancels_a_delayed_push(db: Any, q: Queue) -> None:
    q.push(db, "reminder", id=b"reminder-7", delay=3600)
    assert q.stats(db)[:2] == (0, 1)
    assert q.remove(db, id=b"reminder-7") == "reminder"
    assert q.stats(db)[:3] == (0, 0, 0) and q.delayed(db) == []


def test_remove_leaves_an_item_in_flight_to_its_lease(db: Any, q: Queue) -> None:
    q.push(db, "busy", id=b"job-1")
    lease = q.claim(db, 30)
    assert lease is not None
    assert q.remove(db, id=b"job-1") is None
    q.ack(db, lease)
    assert q.size(db) == 0


def test_remove_in_a_callers_transaction_and_on_a_priority_queue(
        db: Any, fdb_subspace: Any) -> None:
    pq = PriorityQueue(fdb_subspace)
    pq.push(db, "x", 3, id=b"x")
    tr = db.create_transaction()
    assert pq.remove(tr, id=b"x") == "x"
    assert pq.size(db) == 1  # not committed yet
    tr.commit().wait()
    assert pq.size(db) == 0


@pytest.mark.parametrize("bad", [None, b"", "text", b"x" * 1001])
def test_bad_ids_are_refused(db: Any, q: Queue, bad: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="id"):
        q.remove(db, id=bad)


# -- logging -----------------------------------------------------------------------------


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG, logger="fdbrecipes")
    yield caplog


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "fdbrecipes" and r.levelno == level]


def test_a_dead_letter_is_logged_with_its_reason(db: Any, fdb_subspace: Any,
                                                 logged: pytest.LogCaptureFixture) -> None:
    q = Queue(fdb_subspace, max_deliveries=1)
    q.push_many(db, ["fails", "buried"])
    lease = q.claim(db, 30)
    assert lease is not None
    q.release(db, lease)  # its last delivery
    lease = q.claim(db, 30)
    assert lease is not None
    q.bury(db, lease, reason="cannot be done")
    dead = [m for m in lines(logged, logging.INFO) if "dead letter" in m]
    assert len(dead) == 2, dead
    assert dead[0].endswith("after 1 deliveries")
    assert dead[1].endswith("after 1 deliveries: 'cannot be done'")
    assert len(q.dead(db)) == 2


def test_an_ack_or_extend_of_an_expired_lease_is_logged(
        db: Any, q: Queue, clock: TestClock, logged: pytest.LogCaptureFixture) -> None:
    q.push(db, "slow")
    lease = q.claim(db, 1)
    assert lease is not None
    clock.advance(2)
    for call in (q.ack, q.extend):
        args = (db, lease) if call == q.ack else (db, lease, 30)
        with pytest.raises(LeaseExpiredError):
            call(*args)
    warnings = lines(logged, logging.WARNING)
    assert [m.split()[0] for m in warnings] == ["ack", "extend"], warnings
    assert all("expired lease" in m for m in warnings)


def test_a_long_retry_loop_is_logged_once(db: Any, fdb_subspace: Any, fdb_cluster_file: str,
                                         logged: pytest.LogCaptureFixture) -> None:
    faults = iter(["dropped:1009"] * 25)  # future_version: retried after 10 ms

    def plan() -> Optional[str]:
        return next(faults, None)

    faulty = unknown_results(fdb_cluster_file, plan)
    q = Queue(fdb_subspace)
    q.push(faulty, "patient")
    assert q.items(db) == ["patient"]
    warnings = lines(logged, logging.WARNING)
    assert len(warnings) == 1 and "retried 20 times" in warnings[0], warnings
    assert "1009" in warnings[0]


def test_a_successful_call_logs_nothing_at_info(db: Any, q: Queue,
                                                logged: pytest.LogCaptureFixture) -> None:
    q.push(db, "x")
    lease = q.claim(db, 30)
    assert lease is not None
    q.ack(db, lease)
    assert [r for r in logged.records if r.levelno >= logging.INFO] == []


def test_an_outcome_that_cannot_be_learnt_is_logged_as_an_error(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str,
        logged: pytest.LogCaptureFixture) -> None:
    """The pop's commit times out in doubt and so does the transaction settling it:
    one ERROR line, and the error settles later."""
    q = Queue(fdb_subspace)
    q.push(db, "x")
    with pytest.raises(UnknownResultError) as raised:
        Faulty(fdb_cluster_file).each(["dropped:1031", "dropped:1031"], q.pop)
    errors = lines(logged, logging.ERROR)
    assert len(errors) == 1 and "outcome is unknown" in errors[0], errors
    assert not raised.value.settle(db).committed and q.items(db) == ["x"]
