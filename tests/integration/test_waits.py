"""Blocking pops wake on a watch, not a sleep loop."""

from __future__ import annotations

import threading
import time
from typing import Any, List

import pytest

from fdbrecipes import PriorityQueue, Queue, WeightTree
from fdbrecipes.testing.hooks import hooks

pytestmark = pytest.mark.integration


def test_returns_at_once_when_an_item_is_there(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push(db, b"ready")
    assert q.pop_wait(db, timeout=0) == b"ready"
    assert q.pop_wait(db, timeout=0) is None


def test_times_out_with_none(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    started = time.monotonic()
    assert q.pop_wait(db, timeout=0.3) is None
    assert time.monotonic() - started >= 0.3
    assert q.claim_wait(db, 10, timeout=0.2) is None


@pytest.mark.parametrize("kind", ["queue", "priority", "tree"])
def test_a_push_wakes_a_waiting_consumer(db: Any, fdb_subspace: Any, kind: str) -> None:
    """The waiter has a 60 s timeout and no timer: only the watch can wake it."""
    blocked = threading.Event()
    timeouts: List[Any] = []

    def asleep(timeout: Any) -> None:
        timeouts.append(timeout)
        blocked.set()  # the watch is set: the waiter is about to block on it

    if kind == "queue":
        q: Any = Queue(fdb_subspace)
        wait, push = (lambda: q.pop_wait(db, timeout=60)), (lambda: q.push(db, b"job"))
    elif kind == "priority":
        q = PriorityQueue(fdb_subspace)
        wait, push = (lambda: q.pop_max_wait(db, timeout=60)), (lambda: q.push(db, b"job", 3))
    else:
        q = WeightTree(fdb_subspace)
        wait, push = (lambda: q.pop_wait(db, timeout=60)), (lambda: q.push(db, b"job", 3))
    hooks(q).on_block = asleep
    got: List[Any] = []
    woke = threading.Event()
    waiting = threading.Thread(target=lambda: (got.append(wait()), woke.set()))
    waiting.start()
    assert blocked.wait(30), "the waiter never blocked"
    assert not woke.is_set()
    pushed_at = time.monotonic()
    push()
    assert woke.wait(30), "the push did not wake the waiter"
    latency = time.monotonic() - pushed_at
    waiting.join()
    assert got == [b"job"]
    assert latency < 5, f"woke {latency:.2f} s after the push"
    assert timeouts and timeouts[0] > 50, "the waiter should block on the watch, not a timer"


def test_claim_wait_wakes_when_a_lease_expires(db: Any, fdb_subspace: Any) -> None:
    """An expiring lease makes its item visible without any write: the waiter wakes
    at the deadline (real clock here)."""
    q = Queue(fdb_subspace)
    q.push(db, b"x")
    first = q.claim(db, 1)
    assert first is not None
    started = time.monotonic()
    again = q.claim_wait(db, 10, timeout=30)
    assert again is not None and again.value == b"x" and again.deliveries == 2
    assert time.monotonic() - started < 15


def test_many_waiters_each_get_one_item(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    got: List[Any] = []
    lock = threading.Lock()

    def consumer() -> None:
        value = q.pop_wait(db, timeout=60)
        with lock:
            got.append(value)

    threads = [threading.Thread(target=consumer) for _ in range(5)]
    for t in threads:
        t.start()
    for i in range(5):
        q.push(db, i)
    for t in threads:
        t.join(timeout=90)
    assert sorted(got) == [0, 1, 2, 3, 4]


def test_a_lease_extended_shorter_wakes_a_waiter_by_its_new_deadline(
        db: Any, fdb_subspace: Any) -> None:
    """Issue 21, 4: a waiter asleep until a 60-second lease ends looks again when the
    lease is extended to 1 second, and gets the item soon after (not at its own
    15-second timeout)."""
    q = Queue(fdb_subspace)
    q.push(db, b"job")
    lease = q.claim(db, 60)
    assert lease is not None
    blocked = threading.Event()
    hooks(q).on_block = lambda _timeout: blocked.set()
    got: List[Any] = []
    waiter = threading.Thread(target=lambda: got.append(q.pop_wait(db, timeout=15)))
    waiter.start()
    assert blocked.wait(10), "the waiter never blocked"
    extended_at = time.monotonic()
    q.extend(db, lease, 1)
    waiter.join(30)
    took = time.monotonic() - extended_at
    assert got == [b"job"]
    assert took < 6, f"the waiter returned {took:.1f} s after the extend"
