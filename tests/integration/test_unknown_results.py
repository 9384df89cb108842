"""``commit_unknown_result`` in the library's own retry loops is settled exactly.

A commit whose outcome is unknown either happened or did not, and other clients may
act in between.  ``tests.helpers.unknown_results`` is the real database with 1021
reported on chosen commits, after really committing ("applied") or after dropping
the transaction ("dropped"), with another client's work run in that window.  Each
test passes under both outcomes only if the retry tells them apart (receipts, see
``fdbrecipes._receipts``): checking whether the item is still there is not
enough once another client may have taken it.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any, List

import fdb
import pytest

from fdbrecipes import PriorityQueue, Queue, UnknownResultError, WeightTree
from fdbrecipes._cluster import open_database
from fdbrecipes._fdb import VERSIONS_PER_SECOND
from fdbrecipes._receipts import RECEIPT_RETENTION, TRUST_ABSENCE, Receipts, receipt
from tests.helpers import Faulty, RandomFaults, dump, run_threads, unknown_results

pytestmark = pytest.mark.integration

OUTCOMES = ["applied", "dropped"]


@pytest.mark.parametrize("fault", OUTCOMES)
def test_push_is_stored_once_even_if_popped_in_between(
    db: Any, fdb_cluster_file: str, fdb_subspace: Any, fault: str
) -> None:
    q = Queue(fdb_subspace)
    popped: List[Any] = []
    faulty = Faulty(fdb_cluster_file,
                    between=lambda: popped.append(Queue(fdb_subspace).pop(db)))
    faulty.once(fault, lambda d: q.push(d, b"job"))
    # An applied push was taken by the other consumer in the window; a retry that
    # only looked for the item would push it again.
    delivered = [v for v in popped if v is not None] + q.items(db)
    assert delivered == [b"job"]
    assert q.size(db) == len(q.items(db))


@pytest.mark.parametrize("fault", OUTCOMES)
def test_pop_returns_an_item_nobody_else_got(
    db: Any, fdb_cluster_file: str, fdb_subspace: Any, fault: str
) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, [1, 2, 3])
    other: List[Any] = []
    faulty = Faulty(fdb_cluster_file,
                    between=lambda: other.append(Queue(fdb_subspace).pop(db)))
    mine = faulty.once(fault, q.pop)
    # A dropped pop's item went to the other consumer; a retry that took "the item
    # is gone" for "I took it" would return it a second time.
    everyone = [mine, *other, *q.pop_many(db, 10)]
    assert sorted(everyone) == [1, 2, 3]
    assert mine == (1 if fault == "applied" else 2)
    assert q.size(db) == 0


@pytest.mark.parametrize("fault", OUTCOMES)
def test_every_writing_call_settles(
    db: Any, fdb_cluster_file: str, fdb_subspace: Any, fault: str
) -> None:
    """Each call meets a faulty first commit; results are those of one clean run."""
    one = Faulty(fdb_cluster_file).once

    def sub(name: str) -> Any:
        return fdb_subspace[name]

    pq = PriorityQueue(sub("pq"))
    one(fault, lambda d: pq.push_many(d, [(b"low", 1), (b"high", 9), (b"mid", 5)]))
    assert one(fault, pq.pop_max) == b"high"
    assert one(fault, pq.pop_min) == b"low"
    assert pq.items(db) == [b"mid"] and pq.size(db) == 1

    q = Queue(sub("q"))
    one(fault, lambda d: q.push_many(d, [b"a", b"b"]))
    lease = one(fault, lambda d: q.claim(d, 30))
    assert lease is not None and lease.value == b"a" and lease.deliveries == 1
    lease = one(fault, lambda d: q.extend(d, lease, 60))
    assert one(fault, lambda d: q.release(d, lease)) is True
    again = one(fault, lambda d: q.claim(d, 30))
    assert again is not None and again.value == b"a" and again.deliveries == 2
    one(fault, lambda d: q.ack(d, again))  # no LeaseExpiredError: the ack committed
    one(fault, lambda d: q.push(d, b"x", id=b"order-1"))
    q.push(db, b"x", id=b"order-1")
    assert q.items(db) == [b"b", b"x"] and q.size(db) == 2

    tree = WeightTree(sub("tree"))
    handle = one(fault, lambda d: tree.push(d, "x", 3))
    assert tree.items(db) == [(handle, "x", 3)]
    assert one(fault, lambda d: tree.set_weight(d, handle, 5)) == 3
    [h2] = one(fault, lambda d: tree.push_many(d, [("y", 2)]))
    assert tree.total_weight(db) == 7 and tree.size(db) == 2
    assert one(fault, lambda d: tree.remove(d, h2)) == "y"
    assert one(fault, lambda d: tree.pop(d, point=4)) == "x"
    assert tree.total_weight(db) == 0 and tree.size(db) == 0
    assert not [k for k in dump(db, sub("tree")) if sub("tree")["s"].contains(k)]


@pytest.mark.slow
@pytest.mark.parametrize("high_contention", [False, True])
def test_many_clients_under_unknown_results(
    db: Any, fdb_cluster_file: str, fdb_subspace: Any, high_contention: bool
) -> None:
    """4 producers x 8 consumers, 2,000 items; a fifth of all commits report 1021
    (half of them applied): every item is delivered exactly once."""
    producers, consumers, per_producer = 4, 8, 500
    total = producers * per_producer
    lock = threading.Lock()
    faulty = unknown_results(fdb_cluster_file, RandomFaults(1021))
    received: List[Any] = []
    done = threading.Event()
    errors: List[BaseException] = []

    def producer(p: int) -> None:
        try:
            q = Queue(fdb_subspace)
            for i in range(per_producer):
                q.push(faulty, (p, i))
        except BaseException as e:  # pragma: no cover - reported by run_threads
            errors.append(e)
            done.set()

    def consumer() -> None:
        try:
            q = Queue(fdb_subspace, high_contention=high_contention)
            while not done.is_set():
                value = q.pop_wait(faulty, timeout=0.5)
                if value is None:
                    continue
                with lock:
                    received.append(value)
                    if len(received) >= total:
                        done.set()
        except BaseException as e:  # pragma: no cover - reported by run_threads
            errors.append(e)
            done.set()

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(producers)]
    threads += [threading.Thread(target=consumer) for _ in range(consumers)]
    run_threads(threads, errors, timeout=600)
    counts = Counter(received)
    assert [v for v, n in counts.items() if n > 1] == []
    assert len(counts) == total
    assert Queue(fdb_subspace).size(db) == 0


def test_receipts_left_behind_are_swept_and_live_ones_kept(db: Any, fdb_subspace: Any) -> None:
    """A structure object's first call clears receipt slots not written for
    RECEIPT_RETENTION (left by processes that exited), and only those."""
    receipts = Receipts(fdb_subspace)
    tr = db.create_transaction()
    now = tr.get_read_version().wait()
    stale, live = (receipts.key((os.urandom(8), 1, 0)), receipts.key((os.urandom(8), 1, 0)))
    db[stale] = receipt(os.urandom(16), now - 2 * RECEIPT_RETENTION * VERSIONS_PER_SECOND, 1)
    db[live] = receipt(os.urandom(16), now, 1)
    Queue(fdb_subspace).push(db, b"job")
    assert db[stale] is None and db[live] is not None, "swept the wrong slots"


@pytest.mark.parametrize("fault", OUTCOMES)
def test_a_receipt_too_old_to_trust_leaves_the_call_unknown(fdb_local_cluster: Any,
                                                            fault: str) -> None:
    """Receipts left behind are swept after RECEIPT_RETENTION, so a retry that finds
    none more than TRUST_ABSENCE after the doubtful attempt cannot tell "it never
    committed" from "it committed and the receipt was swept since".  Between the
    faulty commit and the retry, the cluster's version is advanced past that age
    (``fdbcli advanceversion``, on a server of this test's own).  A receipt that is
    there still proves the commit; an absent one makes the call raise
    UnknownResultError instead of pushing a second time, and settling it later
    fences the receipt slot."""
    cluster = fdb_local_cluster()
    db = open_database(cluster.cluster_file)
    q = Queue(fdb.Subspace(("fdbrecipes-test", "trust-absence", fault)))

    def age_past_trust() -> None:
        tr = db.create_transaction()
        now = tr.get_read_version().wait()
        target = now + int((TRUST_ABSENCE + 60) * VERSIONS_PER_SECOND)
        done = cluster.cli(f"advanceversion {target}")
        assert done.returncode == 0, done.stdout + done.stderr

    faulty = Faulty(cluster.cluster_file, between=age_past_trust)
    if fault == "applied":
        faulty.once(fault, lambda d: q.push(d, b"job"))
    else:
        with pytest.raises(UnknownResultError) as unknown:
            faulty.once(fault, lambda d: q.push(d, b"job"))
        outcome = unknown.value.settle(db)
        assert not outcome.committed
    assert q.items(db) == ([b"job"] if fault == "applied" else [])
    assert q.size(db) == len(q.items(db))
