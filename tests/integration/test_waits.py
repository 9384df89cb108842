"""Blocking pops wake on a watch, not a sleep loop."""

from __future__ import annotations

import threading
import time
from typing import Any, List

import pytest

from fdbrecipes import PriorityQueue, Queue, WeightTree
from fdbrecipes._waiting import LOOK_AGAIN, MAX_WATCH_FAILURE_BACKOFF
from fdbrecipes.testing.hooks import hooks
from tests.helpers import Blocks, eventually, watch_limited

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
    # it blocks on the watch with the look-again bound as its timer (not its own 60 s):
    # woken well before that bound, the watch woke it
    assert timeouts and timeouts[0] == pytest.approx(LOOK_AGAIN, abs=0.5)
    assert latency < LOOK_AGAIN / 2


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


#: Threads waiting on a connection that allows one watch, and the seconds within which
#: every pushed item must be claimed (generous: in turns they take well under 1 s).
THREADS, WAKE_BOUND = 30, 30.0


def test_threads_beyond_the_watch_limit_share_a_watch_and_take_in_turns(
        fdb_cluster_file: str, fdb_subspace: Any) -> None:
    """Issue 43, item 11: 30 threads wait in claim_wait on a connection that allows one
    watch.  They share it: once they all block, 4 idle seconds see at most one look
    each (with a watch each, 29 failed with too_many_watches and polled; with a
    thread whose check was older than the shared watch setting one of its own, that
    one held the only watch, the shared one failed, and the others polled: 203
    looks).  Then 30 items pushed at once are claimed, every one, each once, within
    30 s, in turns: the claims do not conflict with each other."""
    db = watch_limited(fdb_cluster_file, 1)
    q = Queue(fdb_subspace)
    looks = Blocks(q)
    got: List[Any] = []
    lock = threading.Lock()

    def consumer() -> None:
        lease = q.claim_wait(db, 600, timeout=60)
        with lock:
            got.append(None if lease is None else (lease.value, lease.deliveries))

    threads = [threading.Thread(target=consumer) for _ in range(THREADS)]
    for t in threads:
        t.start()
    eventually(lambda: looks.count >= THREADS, 30, "the waiters blocking")
    idle = looks.count
    time.sleep(4)  # an idle span whose looks are counted: nothing to wait for
    idle = looks.count - idle
    retries = q.retry_stats.retries
    pushed_at = time.monotonic()
    q.push_many(db, list(range(THREADS)))
    for t in threads:
        t.join(max(0.0, pushed_at + WAKE_BOUND - time.monotonic()))
    late = sum(t.is_alive() for t in threads)
    for t in threads:
        t.join(90)  # the late ones end at their own timeout
    retries = q.retry_stats.retries - retries
    assert idle <= THREADS, f"{idle} looks in 4 idle seconds: polling, not sharing a watch"
    assert not late, f"{late} threads took nothing within {WAKE_BOUND:g} s"
    assert sorted(got) == [(i, 1) for i in range(THREADS)]
    assert retries <= THREADS // 3, f"{retries} retries: the threads' claims conflicted"


def test_a_connection_without_watches_polls_with_a_growing_backoff(
        fdb_cluster_file: str, fdb_subspace: Any) -> None:
    """Issue 43, item 11: on a connection that allows no watch at all (every watch
    fails with too_many_watches), a waiter looks again after a back-off that grows to
    a second (it used to look every 50 ms, 20 times a second, for as long as it
    waited), and still sees a push within about that second."""
    db = watch_limited(fdb_cluster_file, 0)
    q = Queue(fdb_subspace)
    looks = Blocks(q)
    got: List[Any] = []
    waiter = threading.Thread(target=lambda: got.append(q.pop_wait(db, timeout=60)))
    waiter.start()
    started = time.monotonic()
    time.sleep(4)  # an idle span whose looks are counted: the back-off grows meanwhile
    early = sum(1 for t in looks.at if t - started < 4)
    pushed_at = time.monotonic()
    q.push(db, b"job")
    waiter.join(30)
    took = time.monotonic() - pushed_at
    assert got == [b"job"]
    assert early <= 12, f"{early} looks in 4 s: polling, not backing off"
    assert took < MAX_WATCH_FAILURE_BACKOFF + 2, f"the push was seen {took:.1f} s late"
