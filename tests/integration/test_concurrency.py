"""Many threads pushing and popping one queue: every item exactly once, in order."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from typing import Any, Dict, List, Tuple

import fdb
import pytest

from fdbrecipes import PriorityQueue, Queue
from tests.helpers import run_threads

pytestmark = pytest.mark.integration

PRODUCERS, CONSUMERS, ITEMS = 8, 8, 4_000


def pop_with_versionstamp(db: Any, q: Any, pop: str) -> Tuple[Any, bytes]:
    """Pop in our own transaction; return (value, versionstamp of the commit).

    Versionstamps order committed transactions, so sorting pops by them gives the
    order in which the database serialized them.
    """
    tr = db.create_transaction()
    while True:
        try:
            value = getattr(q, pop)(tr)
            if value is None:
                tr.cancel()
                return None, b""
            stamp = tr.get_versionstamp()
            tr.commit().wait()
            return value, bytes(stamp.wait())
        except fdb.FDBError as e:
            tr.on_error(e).wait()


def run_workload(db: Any, make: Any, push: Any, pop: str) -> List[Tuple[bytes, Any]]:
    per_producer = ITEMS // PRODUCERS
    popped: List[Tuple[bytes, Any]] = []
    lock = threading.Lock()
    errors: List[BaseException] = []

    def producer(p: int) -> None:
        try:
            q = make()
            for i in range(per_producer):
                push(q, p, i)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def consumer() -> None:
        try:
            q = make()
            while True:
                with lock:
                    if len(popped) >= ITEMS:
                        return
                value, stamp = pop_with_versionstamp(db, q, pop)
                if value is None:
                    # Nothing visible: block on the queue's watch (pushes touch it).
                    q.wait(db, timeout=0.5)
                    continue
                with lock:
                    popped.append((stamp, value))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(PRODUCERS)]
    threads += [threading.Thread(target=consumer) for _ in range(CONSUMERS)]
    run_threads(threads, errors, timeout=600)
    return popped


def check(popped: List[Tuple[bytes, Any]]) -> None:
    values = [v for _, v in popped]
    counts = Counter(values)
    assert not [v for v, c in counts.items() if c > 1], "popped twice"
    assert set(values) == {(p, i) for p in range(PRODUCERS) for i in range(ITEMS // PRODUCERS)}
    by_producer: Dict[int, List[int]] = defaultdict(list)
    for _, (p, i) in sorted(popped):
        by_producer[p].append(i)
    for p, seq in by_producer.items():
        assert seq == sorted(seq), f"producer {p}'s items came out of order"


def test_queue_8_pushers_8_poppers(fdb_database: Any, fdb_subspace: Any) -> None:
    db = fdb_database
    popped = run_workload(
        db, lambda: Queue(fdb_subspace), lambda q, p, i: q.push(db, (p, i)), "pop"
    )
    check(popped)
    assert Queue(fdb_subspace).size(db) == 0


def test_priority_queue_8_pushers_8_poppers(fdb_database: Any, fdb_subspace: Any) -> None:
    """One priority per producer: pop_min serves the lowest priorities first, and each
    producer's items still come out in push order."""
    db = fdb_database
    popped = run_workload(
        db,
        lambda: PriorityQueue(fdb_subspace),
        lambda q, p, i: q.push(db, (p, i), p % 3),
        "pop_min",
    )
    check(popped)


def test_pushes_never_conflict(fdb_database: Any, fdb_subspace: Any) -> None:
    """Twenty transactions that each read the same last index all commit."""
    db = fdb_database
    q = Queue(fdb_subspace)
    q.push(db, b"seed")
    trs = [db.create_transaction() for _ in range(20)]
    for n, tr in enumerate(trs):
        q.push(tr, n)
    for tr in trs:
        tr.commit().wait()
    assert sorted(q.items(db)[1:]) == list(range(20))
