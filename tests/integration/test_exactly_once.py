"""Exactly-once at the edges: calls that stop in doubt, id collection, mass expiry,
clear, extend and work too big for one transaction (issue 11).

Faults come from ``tests.helpers.Faulty``: the real database, with chosen commits
reporting an error after really committing ("applied") or after dropping the
transaction ("dropped").
"""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Callable, List, Tuple

import fdb
import pytest

from fdbrecipes import (
    FdbRecipesError,
    IncompleteBatchError,
    InterruptedCall,
    LeaseExpiredError,
    PriorityQueue,
    Queue,
    UnknownResultError,
    WeightTree,
)
from fdbrecipes.testing.hooks import hooks
from tests.helpers import Faulty, TestClock, dump

pytestmark = pytest.mark.integration


# -- 1. a call that stops in doubt settles first ------------------------------------------


@pytest.mark.parametrize("report", ["1031", "1025"])  # timed out, cancelled: not retryable
def test_a_non_retryable_error_after_a_landed_commit_returns_its_result(
    db: Any, fdb_cluster_file: str, fdb_subspace: Any, report: str
) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, [1, 2, 3])
    faulty = Faulty(fdb_cluster_file)
    # The commit landed, then the client reported an error it does not retry: the
    # call settles (the receipt is there) and returns what that commit did.
    batch = [f"item-{i}" for i in range(88)]
    assert faulty.once(f"applied:{report}", lambda d: q.push_many(d, batch)) == []
    assert faulty.once(f"applied:{report}", q.pop) == 1
    assert q.items(db) == [2, 3, *batch] and q.size(db) == 90


@pytest.mark.parametrize("report", ["1031", "1025"])
def test_a_non_retryable_error_after_a_dropped_commit_raises_and_fences(
    db: Any, fdb_cluster_file: str, fdb_subspace: Any, report: str
) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, [1, 2])
    faulty = Faulty(fdb_cluster_file)
    with pytest.raises(fdb.FDBError) as raised:
        faulty.once(f"dropped:{report}", q.pop)
    assert raised.value.code == int(report)
    assert q.items(db) == [1, 2] and q.size(db) == 2  # nothing was popped


def test_an_exhausted_retry_limit_settles(db: Any, fdb_cluster_file: str,
                                         fdb_subspace: Any) -> None:
    """With a retry limit of 0, on_error re-raises the 1021 itself."""
    q = Queue(fdb_subspace)
    faulty = Faulty(fdb_cluster_file)
    faulty.db.options.set_transaction_retry_limit(0)
    faulty.once("applied", lambda d: q.push(d, b"once"))
    assert q.items(db) == [b"once"]
    with pytest.raises(fdb.FDBError):
        faulty.once("dropped", lambda d: q.push(d, b"never"))
    assert q.items(db) == [b"once"]


def test_ctrl_c_during_a_commit_loses_nothing(db: Any, fdb_cluster_file: str,
                                              fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, [b"first", b"second"])
    faulty = Faulty(fdb_cluster_file)
    with pytest.raises(InterruptedCall) as landed:
        faulty.once("applied:interrupt", q.pop)
    assert isinstance(landed.value, KeyboardInterrupt)
    assert landed.value.outcome is not None
    assert landed.value.outcome.committed and landed.value.outcome.result == b"first"
    with pytest.raises(InterruptedCall) as dropped:
        faulty.once("dropped:interrupt", q.pop)
    assert dropped.value.outcome is not None and not dropped.value.outcome.committed
    assert q.items(db) == [b"second"]


def test_a_doubtful_ack_whose_lease_then_expires_still_returns(
    db: Any, fdb_cluster_file: str, fdb_subspace: Any
) -> None:
    """The first ack lands but reports 1021 and the lease's deadline passes before
    the retry: the retry finds the receipt and returns, without LeaseExpiredError."""
    clock = TestClock()
    q = Queue(fdb_subspace, clock=clock)
    q.push(db, b"job")
    lease = q.claim(db, 5)
    assert lease is not None
    faulty = Faulty(fdb_cluster_file, between=lambda: clock.advance(10))
    faulty.once("applied", lambda d: q.ack(d, lease))
    assert q.size(db) == 0


@pytest.mark.parametrize("fence", ["dropped:1031", "applied:1031"])
def test_when_settling_fails_the_error_can_settle_later(
    db: Any, fdb_cluster_file: str, fdb_subspace: Any, fence: str
) -> None:
    """The pop's commit is dropped with a timeout; the settling transaction's fence
    fails too (dropped, or landed but reported as timed out): the call raises
    UnknownResultError, whose settle() finds out later: not committed."""
    q = Queue(fdb_subspace)
    q.push(db, b"job")
    faulty = Faulty(fdb_cluster_file)
    with pytest.raises(UnknownResultError) as raised:
        faulty.each(["dropped:1031", fence], q.pop)
    assert raised.value.receipt and raised.value.results == {1: b"job"}
    outcome = raised.value.settle(db)
    assert not outcome.committed and outcome.result is None
    assert raised.value.settle(db) == outcome  # settled for good: the fence stays
    assert q.items(db) == [b"job"]


# -- 2. an id collector never forgets a live id ---------------------------------------


def test_a_collector_with_an_old_read_version_conflicts_with_a_new_use_of_the_id(
    db: Any, fdb_subspace: Any
) -> None:
    clock = TestClock()
    q = Queue(fdb_subspace, clock=clock, id_retention=1)
    q.push(db, b"old x", id=b"X")
    assert q.pop(db) == b"old x"
    clock.advance(5)  # X may now be forgotten
    stale = db.create_transaction()
    q.push(stale, b"y", id=b"Y")  # collects X, at an old read version
    q.push(db, b"z", id=b"Z")  # another collector forgets X and commits
    q.push(db, b"new x", id=b"X")  # X is free again: a new item, X remembered
    with pytest.raises(fdb.FDBError) as raised:
        stale.commit().wait()
    assert raised.value.code == 1020  # it conflicts instead of forgetting X
    q.push(db, b"new x again", id=b"X")  # a retried push: stored once
    assert q.items(db) == [b"z", b"new x"]


# -- 3. work too big for one transaction ------------------------------------------------


def test_batches_given_a_database_span_transactions(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"])
    for start in range(0, 12_000, 3_000):
        q.push_many(db, range(start, start + 3_000))
    assert q.pop_many(db, 11_000) == list(range(11_000))
    leases = q.claim_many(db, 2_500, 60)
    assert [lease.value for lease in leases] == list(range(11_000, 12_000))
    assert q.ack_many(db, leases) == [True] * 1_000
    assert q.size(db) == 0
    tree = WeightTree(fdb_subspace["t"])
    for start in range(0, 3_000, 1_000):
        tree.push_many(db, [(i, 1 + i % 7) for i in range(start, start + 1_000)])
    taken = tree.pop_many(db, 3_000)
    assert sorted(taken) == list(range(3_000))  # type: ignore[type-var]
    assert tree.size(db) == 0 and tree.total_weight(db) == 0


BATCHES = {
    # kind: (a structure filled with 0..24, its batch call, what a result names)
    "pop_many": (Queue, Queue.push_many, "pop_many"),
    "claim_many": (Queue, Queue.push_many, "claim_many"),
    "pop_max_many": (PriorityQueue, PriorityQueue.push_many, "pop_max_many"),
    "claim_min_many": (PriorityQueue, PriorityQueue.push_many, "claim_min_many"),
    "tree": (WeightTree, WeightTree.push_many, "pop_many"),
}


def filled_batch(db: Any, subspace: Any, kind: str) -> Tuple[Any, Callable[[Any], Any]]:
    """A structure holding 0..24 whose batch calls given a Database take 10 items per
    transaction, and its batch call of all 25."""
    cls, push_many, name = BATCHES[kind]
    s = cls(subspace)
    hooks(s).batch = 10
    push_many(s, db, range(25) if cls is Queue else [(i, 1) for i in range(25)])
    method = getattr(s, name)
    if name.startswith("claim"):
        return s, functools.partial(claim_all, method)
    return s, functools.partial(pop_all, method)


def pop_all(method: Callable[..., Any], db: Any) -> Any:
    return method(db, 25)


def claim_all(method: Callable[..., Any], db: Any) -> Any:
    return [lease.value for lease in method(db, 25, 60)]


def values_of(taken: List[Any]) -> List[Any]:
    """The values of what a batch took: popped values, or leases' values."""
    return [getattr(t, "value", t) for t in taken]


@pytest.mark.parametrize("kind", sorted(BATCHES))
@pytest.mark.parametrize("fault", ["applied:interrupt", "dropped:interrupt"])
def test_ctrl_c_in_a_later_transaction_of_a_batch_hands_over_everything_taken(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any, kind: str, fault: str) -> None:
    """Issue 21, 2: the items the earlier, committed transactions of a batch took are
    in the InterruptedCall's outcome, with the last one's if it landed; the rest stay."""
    s, call = filled_batch(db, fdb_subspace, kind)
    faulty = Faulty(fdb_cluster_file)
    with pytest.raises(InterruptedCall) as raised:
        faulty.each([None, fault], call)  # the second transaction's commit
    outcome = raised.value.outcome
    assert outcome is not None and outcome.committed
    taken = 20 if fault.startswith("applied") else 10
    assert len(outcome.result) == taken
    claims = kind.startswith("claim")
    assert s.size(db) == (25 if claims else 25 - taken)  # size counts what is in flight
    if kind == "tree":
        assert sorted(outcome.result + s.pop_many(db, 25)) == list(range(25))
    else:  # one priority: both ends take the oldest first
        assert values_of(outcome.result) == list(range(taken))
        assert s.stats(db).in_flight == (taken if claims else 0)


@pytest.mark.parametrize("kind", sorted(BATCHES))
@pytest.mark.parametrize("fault", ["dropped:1031", "dropped:1021"])
def test_an_error_in_a_later_transaction_of_a_batch_hands_over_everything_taken(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any, kind: str, fault: str) -> None:
    """Issue 21, 2: a batch stopped by an error after its first transaction
    committed raises IncompleteBatchError carrying what that transaction took."""
    s, call = filled_batch(db, fdb_subspace, kind)
    faulty = Faulty(fdb_cluster_file)
    faulty.db.options.set_transaction_retry_limit(0)  # 1021 is not retried then
    with pytest.raises(IncompleteBatchError) as raised:
        faulty.each([None, fault], call)
    assert isinstance(raised.value.__cause__, fdb.FDBError)
    assert raised.value.__cause__.code == int(fault.split(":")[1])
    assert len(raised.value.result) == 10
    assert s.size(db) == (25 if kind.startswith("claim") else 15)  # in flight is counted
    if kind.startswith("claim"):
        assert s.stats(db).in_flight == 10


def test_batches_that_cannot_fit_a_transaction_are_refused_up_front(
    db: Any, fdb_subspace: Any
) -> None:
    q, tree = Queue(fdb_subspace["q"]), WeightTree(fdb_subspace["t"])
    q.push(db, b"untouched")
    tr = db.create_transaction()
    with pytest.raises(ValueError, match="^n: at most 10,000"):
        q.pop_many(tr, 10_001)
    with pytest.raises(ValueError, match="^n: at most 10,000"):
        q.claim_many(tr, 20_000, 30)
    with pytest.raises(ValueError, match="^n: at most 1,000 picks"):
        tree.pop_many(tr, 1_001)
    tr.cancel()
    assert q.items(db) == [b"untouched"]


MEMORY_PROBE = textwrap.dedent(
    """
    import resource, sys
    import fdb
    fdb.api_version(int(sys.argv[3]))
    from fdbrecipes import Queue
    db = fdb.open(sys.argv[1])
    q = Queue(fdb.Subspace(rawPrefix=bytes.fromhex(sys.argv[2])))
    n = int(sys.argv[4])
    q.size(db)  # connected
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    value = "x" * 150
    for start in range(0, n, 2000):
        q.push_many(db, [value] * min(2000, n - start))
    taken = q.pop_many(db, n)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert len(taken) == n, len(taken)
    print((after - before) // 1024)
    """
)


@pytest.mark.slow
def test_pop_many_memory_grows_linearly(fdb_cluster_file: str, fdb_subspace: Any,
                                       tmp_path: Any) -> None:
    """Measured peak client memory of pop_many (in a fresh process): it was 96 MB /
    862 MB / 3.5 GB at n = 2,000 / 8,000 / 16,000 items of ~155 bytes (quadratic)."""
    script = tmp_path / "probe.py"
    script.write_text(MEMORY_PROBE)

    def peak_mb(n: int, name: str) -> int:
        out = subprocess.run(
            [sys.executable, str(script), fdb_cluster_file, fdb_subspace[name].key().hex(),
             str(fdb.get_api_version()), str(n)],
            capture_output=True, text=True, check=True, timeout=600)
        return int(out.stdout.split()[-1])

    small, large = peak_mb(4_000, "small"), peak_mb(16_000, "large")
    assert large < 150, f"pop_many(16,000) grew the client by {large} MB"
    assert large <= 4 * max(small, 8) + 40, f"{small} MB at 4,000, {large} MB at 16,000"


# -- 4. a mass expiry restores every item in order ------------------------------------


@pytest.mark.parametrize("short", [17, 150])
def test_many_expired_holds_come_back_in_order(db: Any, fdb_subspace: Any,
                                              short: int) -> None:
    clock = TestClock()
    q = Queue(fdb_subspace, clock=clock)
    q.push_many(db, range(short + 1))
    assert q.claim(db, 100) is not None  # item 0: a long lease
    for _ in range(short):
        assert q.claim(db, 1) is not None  # items 1..short: short leases
    clock.advance(200)  # every lease has expired, item 0's last
    assert q.peek(db) == 0
    assert q.items(db) == list(range(short + 1))
    assert q.pop(db) == 0
    assert q.pop_many(db, short) == list(range(1, short + 1))
    assert q.size(db) == 0


@pytest.mark.parametrize("take", ["pop", "claim", "pop_many"])
def test_a_stop_while_putting_back_a_backlog_never_hides_what_a_take_took(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any, take: str) -> None:
    """A take that meets a backlog of expired holds leaves it to be put back in a
    transaction of its own.  Ctrl-C in that transaction used to be reported as the
    take's outcome (the number of holds put back, in place of the item popped, which
    reached nobody); now a take's outcome is its own, and a stop while putting back
    says that the call took nothing."""
    clock = TestClock()
    q = Queue(fdb_subspace, clock=clock)
    q.push_many(db, range(150))
    assert len(q.claim_many(db, 150, 1)) == 150
    clock.advance(5)  # 150 expired holds: more than a take puts back itself
    faulty = Faulty(fdb_cluster_file)
    call = {"pop": q.pop, "claim": functools.partial(q.claim, lease_seconds=60),
            "pop_many": functools.partial(q.pop_many, n=1)}[take]
    first = faulty.each([None, "applied:interrupt"], call)  # no second commit now
    got = [first.value if take == "claim" else first[0] if take == "pop_many" else first]
    with pytest.raises(InterruptedCall) as stopped:  # putting back, before the take
        faulty.each(["applied:interrupt"], call)
    assert stopped.value.outcome == (False, None)
    assert got == [0]
    assert q.pop_many(db, 200) == list(range(1, 150))
    assert q.size(db) == (1 if take == "claim" else 0)


def test_a_priority_queue_restores_expired_holds_at_both_ends(db: Any,
                                                              fdb_subspace: Any) -> None:
    clock = TestClock()
    pq = PriorityQueue(fdb_subspace, clock=clock)
    pq.push_many(db, [(f"p{p}-{i}", p) for p in range(3) for i in range(30)])
    leases = pq.claim_min_many(db, 90, 1)
    assert len(leases) == 90
    clock.advance(5)
    assert pq.items(db, reverse=True)[:3] == ["p2-0", "p2-1", "p2-2"]
    assert pq.pop_max(db) == "p2-0" and pq.pop_min(db) == "p0-0"
    assert pq.size(db) == 88


# -- 5. clear keeps waiters awake --------------------------------------------------------


def test_a_waiter_wakes_for_the_push_after_a_clear(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push(db, b"a")
    assert q.pop(db) == b"a"
    asleep = threading.Event()
    hooks(q).on_block = lambda timeout: asleep.set()
    got: List[Any] = []
    waiter = threading.Thread(target=lambda: got.append(q.pop_wait(db, timeout=60)))
    waiter.start()
    assert asleep.wait(30)
    q.clear(db)  # the wake counter must not return to the value the watch holds
    q.push(db, b"b")
    waiter.join(20)
    assert not waiter.is_alive(), "the push after clear() did not wake the waiter"
    assert got == [b"b"]


# -- 6. a lease keeps its identity across extend --------------------------------------


def test_the_original_lease_works_after_extend(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, [b"x", b"y"])
    lease = q.claim(db, 30)
    assert lease is not None
    renewed = q.extend(db, lease, 60)
    assert renewed == lease and renewed.token == lease.token
    assert renewed.deadline > lease.deadline
    q.extend(db, lease.token, 90)  # the token too
    assert q.release(db, lease) is True  # not "expired"
    again = q.claim(db, 30)
    assert again is not None and again.value == b"x" and again.deliveries == 2
    q.extend(db, again, 60)
    q.ack(db, again)  # not LeaseExpiredError
    with pytest.raises(LeaseExpiredError):
        q.ack(db, again)
    assert q.items(db) == [b"y"] and q.size(db) == 1


# -- 7. clear leaves other clients' receipts -----------------------------------------


def test_clear_during_an_uncertain_commit_does_not_double_a_pop(
    db: Any, fdb_cluster_file: str, fdb_subspace: Any
) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, [1, 2])

    def meanwhile() -> None:
        other = Queue(fdb_subspace)
        other.clear(db)
        other.push(db, 3)

    faulty = Faulty(fdb_cluster_file, between=meanwhile)
    assert faulty.once("applied", q.pop) == 1  # not 3: the receipt survived the clear
    assert q.items(db) == [3]


# -- 9. read-only calls stay read-only ------------------------------------------------


def test_a_call_that_writes_nothing_commits_nothing(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    for i in range(5):
        q.push(db, i)
    assert q.pop_many(db, 5) == [0, 1, 2, 3, 4]
    before = dump(db, fdb_subspace)
    assert q.pop(db) is None and q.claim(db, 5) is None
    assert dump(db, fdb_subspace) == before  # no receipt clears, no receipt


# -- 11. WeightTree in a transaction that hides its own writes from snapshots -------------


def test_weight_tree_refuses_snapshot_ryw_disable(db: Any, fdb_subspace: Any) -> None:
    tree = WeightTree(fdb_subspace)
    tree.push_many(db, [(b"light", 1), (b"heavy", 1000)])
    tr = db.create_transaction()
    tr.options.set_snapshot_ryw_disable()
    assert tree.pop(tr, point=500) == b"heavy"
    with pytest.raises(FdbRecipesError, match="snapshot_ryw_disable"):
        tree.pop(tr, point=500)  # the stale sums still point at "heavy"
    tr.cancel()
    assert tree.size(db) == 2
    tr = db.create_transaction()
    tr.options.set_snapshot_ryw_disable()
    assert sorted(tree.pop_many(tr, 2)) == [b"heavy", b"light"]  # one call: it copes
    tr.commit().wait()
    assert tree.size(db) == 0


# -- the wake-up of a clock-only change ------------------------------------------------


def test_wait_returns_when_a_lease_expires(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push(db, b"x")
    assert q.claim(db, 1) is not None
    started = time.monotonic()
    assert q.wait(db, timeout=30)
    assert time.monotonic() - started < 15
