"""High-contention pops: many poppers, each item delivered once, order kept, nothing
stranded when a popping client dies holding items set aside for it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter, defaultdict
from typing import Any, Dict, List, Tuple

import pytest

from fdbrecipes import InterruptedCall, PriorityQueue, Queue, QueueStats
from fdbrecipes.testing.hooks import hooks
from tests.helpers import Faulty, dump, run_threads

pytestmark = pytest.mark.integration


def held_left(db: Any, subspace: Any) -> List[bytes]:
    """Keys of items still set aside (held) for some popper."""
    return [k for k in dump(db, subspace) if subspace["h"].contains(k)]


@pytest.mark.slow
def test_8_producers_16_consumers_20000_items(db: Any, fdb_subspace: Any) -> None:
    producers, consumers, per_producer = 8, 16, 2_500
    total = producers * per_producer
    received: Dict[int, List[Tuple[int, int]]] = defaultdict(list)
    done = threading.Event()
    count = [0]
    lock = threading.Lock()
    errors: List[BaseException] = []
    queues: List[Queue] = []

    def producer(p: int) -> None:
        try:
            q = Queue(fdb_subspace)
            for i in range(0, per_producer, 50):
                if i % 100 == 0:
                    q.push_many(db, [(p, j) for j in range(i, i + 50)])
                else:
                    for j in range(i, i + 50):
                        q.push(db, (p, j))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def consumer(c: int) -> None:
        try:
            q = Queue(fdb_subspace, high_contention=True)
            queues.append(q)
            while not done.is_set():
                value = q.pop_wait(db, timeout=0.5)
                if value is None:
                    continue
                received[c].append(value)
                with lock:
                    count[0] += 1
                    if count[0] == total:
                        done.set()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
            done.set()

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(producers)]
    threads += [threading.Thread(target=consumer, args=(c,)) for c in range(consumers)]
    run_threads(threads, errors, timeout=1200)
    everything = [v for values in received.values() for v in values]
    duplicates = [v for v, n in Counter(everything).items() if n > 1]
    assert not duplicates, f"delivered twice: {duplicates[:5]}"
    assert set(everything) == {(p, j) for p in range(producers) for j in range(per_producer)}
    for c, values in received.items():
        for p in range(producers):
            mine = [j for q, j in values if q == p]
            assert mine == sorted(mine), f"consumer {c} got producer {p}'s items out of order"
    assert Queue(fdb_subspace).size(db) == 0
    assert held_left(db, fdb_subspace) == []
    retries = sum(q.retry_stats.retries for q in queues)
    print(f"high-contention retries per pop: {retries / total:.3f}")


def test_empty_queue_returns_none_promptly_and_leaves_no_request(db: Any,
                                                                  fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, high_contention=True)
    assert q.pop(db) is None
    hooks(q).contended = True  # behave as if contended: register at once
    assert q.pop(db) is None
    q.push(db, b"one")
    assert q.pop(db) == b"one"
    assert q.pop(db) is None
    assert held_left(db, fdb_subspace) == []


def test_requests_are_served_in_order_with_items_in_order(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, high_contention=True)
    hooks(q).contended = True
    q.push_many(db, range(10))
    assert [q.pop(db) for _ in range(10)] == list(range(10))
    assert held_left(db, fdb_subspace) == []


def test_priority_queue_high_contention(db: Any, fdb_subspace: Any) -> None:
    pq = PriorityQueue(fdb_subspace, high_contention=True)
    hooks(pq).contended = True
    pq.push_many(db, [("a", 1), ("b", 9), ("c", 5), ("d", 9)])
    assert pq.pop_max(db) == "b"
    assert pq.pop_min(db) == "a"
    assert pq.pop_max(db) == "d"
    assert pq.pop_max(db) == "c"
    assert pq.pop_max(db) is None
    assert held_left(db, fdb_subspace) == []


def test_given_a_transaction_pop_is_the_plain_pop(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, high_contention=True)
    q.push(db, b"x")
    tr = db.create_transaction()
    assert q.pop(tr) == b"x"
    tr.commit().wait()
    assert held_left(db, fdb_subspace) == []


STUCK_POPPER = textwrap.dedent(
    """
    import sys, threading
    import fdb
    fdb.api_version(int(sys.argv[3]))
    from fdbrecipes import Queue
    from fdbrecipes.testing.hooks import hooks

    db = fdb.open(sys.argv[1])
    q = Queue(fdb.Subspace(rawPrefix=bytes.fromhex(sys.argv[2])), high_contention=True,
              result_timeout=3)
    hooks(q).contended = True  # fetch a batch: pop one item, set the next ones aside

    def stuck(count):
        print("fetched", count, flush=True)
        threading.Event().wait()  # never collects them: killed here

    hooks(q).on_fetch = stuck
    q.pop(db)
    """
)


def test_a_killed_popper_strands_nothing(db: Any, fdb_subspace: Any, fdb_cluster_file: str,
                                        tmp_path: Any) -> None:
    """A popping client fetches a batch (it pops item 0 and sets items 1..4 aside for
    itself) and dies before collecting them.  Once their holds' deadline passes, the
    items are visible again at their places, before newer items, and another popper
    gets every one of them."""
    import fdb

    q = Queue(fdb_subspace, high_contention=True)
    q.push_many(db, range(5))
    script = tmp_path / "stuck.py"
    script.write_text(STUCK_POPPER)
    child = subprocess.Popen(
        [sys.executable, str(script), fdb_cluster_file, fdb_subspace.key().hex(),
         str(fdb.get_api_version())],
        stdout=subprocess.PIPE, text=True, env={**os.environ},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().split() == ["fetched", "4"]
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
    assert len(held_left(db, fdb_subspace)) == 4, "the dead client's items are held"
    assert q.size(db) == 4 and q.stats(db).in_flight == 4
    q.push(db, 5)
    assert q.pop(db) == 5  # the held items are not visible yet
    hooks(q).contended = True
    got = []
    while len(got) < 4:
        value = q.pop_wait(db, timeout=30)
        assert value is not None, f"items stranded; got {got}"
        got.append(value)
    assert got == [1, 2, 3, 4]
    assert q.size(db) == 0 and held_left(db, fdb_subspace) == []


# -- the holes issue 21 closed ---------------------------------------------------------


def test_after_a_clear_a_popper_hands_out_nothing_it_had_set_aside(db: Any,
                                                                    fdb_subspace: Any) -> None:
    """Issue 21, 1: another client's clear() removes the items set aside for a popper;
    its next pop must not return one, and the counters stay exact."""
    q = Queue(fdb_subspace, high_contention=True)
    hooks(q).contended = True
    q.push_many(db, [1, 2, 3, 4])
    assert q.pop(db) == 1  # a fetch: 2, 3 and 4 set aside for this popper
    Queue(fdb_subspace).clear(db)
    assert q.pop(db) is None
    assert q.size(db) == 0
    assert q.stats(db) == QueueStats(0, 0, 0, 0, None)
    q.push(db, 5)
    assert q.pop(db) == 5 and q.pop(db) is None
    assert q.size(db) == 0 and held_left(db, fdb_subspace) == []


def test_after_a_clear_nothing_set_aside_comes_back_at_the_other_end(
        db: Any, fdb_subspace: Any) -> None:
    """Issue 21, 1: a popper switching ends gives back what it set aside; what a clear
    removed meanwhile must stay removed."""
    pq = PriorityQueue(fdb_subspace, high_contention=True)
    hooks(pq).contended = True
    pq.push_many(db, [("a", 1), ("b", 1), ("c", 1)])
    assert pq.pop_min(db) == "a"  # b and c set aside at the min end
    PriorityQueue(fdb_subspace).clear(db)
    assert pq.pop_max(db) is None  # gives back b and c: they are gone
    assert pq.items(db) == [] and pq.size(db) == 0
    assert pq.stats(db) == QueueStats(0, 0, 0, 0, None)


def test_a_lone_popper_sets_nothing_aside(db: Any, fdb_subspace: Any) -> None:
    """Issue 21, 3: without contention a high-contention popper pops plainly: the next
    item stays visible to every consumer, in order, and nothing is in flight, also
    after many polls of an empty queue."""
    q = Queue(fdb_subspace, high_contention=True)
    for _ in range(20):
        assert q.pop(db) is None  # an idle waiter polling
    q.push_many(db, [1, 2, 3])
    assert q.pop(db) == 1
    assert q.stats(db).in_flight == 0 and held_left(db, fdb_subspace) == []
    assert Queue(fdb_subspace).pop(db) == 2  # another consumer: the next in order
    assert q.pop(db) == 3


@pytest.mark.parametrize("fault", ["applied:interrupt", "dropped:interrupt"])
def test_ctrl_c_during_a_fetch_hands_over_the_item_and_strands_nothing(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any, fault: str) -> None:
    """Issue 21, 6: Ctrl-C while a fetch commits: InterruptedCall carries the popped
    item itself, and what the fetch set aside is this popper's next pops."""
    q = Queue(fdb_subspace, high_contention=True)
    hooks(q).contended = True
    q.push_many(db, range(5))
    faulty = Faulty(fdb_cluster_file)
    with pytest.raises(InterruptedCall) as raised:
        faulty.once(fault, q.pop)
    outcome = raised.value.outcome
    assert outcome is not None
    if fault.startswith("applied"):
        assert outcome == (True, 0)
        assert [q.pop(db) for _ in range(4)] == [1, 2, 3, 4]
    else:
        assert outcome == (False, None)
        assert [q.pop(db) for _ in range(5)] == [0, 1, 2, 3, 4]
    assert q.pop(db) is None
    assert q.size(db) == 0 and held_left(db, fdb_subspace) == []


@pytest.mark.parametrize("fault", ["applied:interrupt", "dropped:interrupt"])
def test_ctrl_c_during_a_collect_hands_over_the_item_or_keeps_it_next(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any, fault: str) -> None:
    """Issue 21, 6: Ctrl-C while a collect commits: the item is in the outcome if the
    collect landed, else it is the popper's next pop."""
    q = Queue(fdb_subspace, high_contention=True)
    hooks(q).contended = True
    q.push_many(db, range(4))
    assert q.pop(db) == 0  # a fetch: 1, 2, 3 set aside
    faulty = Faulty(fdb_cluster_file)
    with pytest.raises(InterruptedCall) as raised:
        faulty.once(fault, q.pop)
    landed = fault.startswith("applied")
    assert raised.value.outcome == ((True, 1) if landed else (False, None))
    assert [q.pop(db) for _ in range(3)] == ([2, 3, None] if landed else [1, 2, 3])
    assert q.pop(db) is None
    assert q.size(db) == 0 and held_left(db, fdb_subspace) == []
