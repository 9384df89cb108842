"""Job records on a real server: a job's state at every step of its life, exact at each
read (the record changes in the transactions that move the item, and what changes with
time alone is read as it is at the read version), its result and failure, waiting for
it, cancelling it, pruning finished records, and bad input."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from typing import Any, List

import fdb.tuple
import pytest

from fdbrecipes import (
    FairQueue,
    JobCancelledError,
    JobError,
    JobFailedError,
    PriorityQueue,
    Progress,
    Queue,
    ResultTooLargeError,
    UnknownJobError,
    aio,
    drive,
)
from fdbrecipes.protocol import Finished, encode_result
from tests.helpers import TestClock, dump

pytestmark = pytest.mark.integration

HOUR = 3600.0


def states(q: Any, db: Any, ids: List[bytes]) -> List[str]:
    return [q.job(db, id_).state for id_ in ids]


def test_push_makes_an_id_and_a_record_only_with_history(db: Any, fdb_subspace: Any) -> None:
    plain = Queue(fdb_subspace["plain"])
    assert plain.push(db, "a") is None
    assert plain.push(db, "b", id=b"given") == b"given"
    assert plain.push_many(db, ["c", "d"]) == []
    assert plain.job(db, b"given") is None  # no records without history
    with pytest.raises(ValueError, match="history"):
        plain.push(db, "e", time_limit=5)
    kept = Queue(fdb_subspace["kept"], history=HOUR)
    made = kept.push(db, "a")
    assert made is not None and len(made) == 32 and int(made, 16) >= 0
    assert kept.push(db, "b", id=b"given") == b"given"
    many = kept.push_many(db, ["c", "d", "e"])
    assert len(set(many)) == 3 and made not in many
    for id_ in [made, b"given", *many]:
        record = kept.job(db, id_)
        assert record is not None and record.state == "pending" and record.attempts == 0
        assert record.pushed_at is not None and record.started_at is None
    assert kept.job(db, b"never pushed") is None
    assert kept.pop_many(db, 10) == ["a", "b", "c", "d", "e"]
    assert states(kept, db, [made, b"given", *many]) == ["succeeded"] * 5


def test_a_job_through_its_whole_life(db: Any, fdb_subspace: Any, clock: TestClock) -> None:
    q = Queue(fdb_subspace, history=HOUR, clock=clock, max_deliveries=3)
    id_ = q.push(db, "work", delay=10)
    assert id_ is not None
    record = q.job(db, id_)
    assert (record.state, record.attempts) == ("delayed", 0)
    clock.advance(11)  # the delay passed: pending at once, before any write says so
    assert q.job(db, id_).state == "pending"
    lease = q.claim(db, 30)
    assert lease is not None and lease.id == id_
    record = q.job(db, id_)
    assert (record.state, record.attempts, record.finished_at) == ("running", 1, None)
    assert record.started_at is not None
    q.release(db, lease, error=JobError("ValueError", "bad row 7", "Traceback ...\n"))
    record = q.job(db, id_)
    assert (record.state, record.attempts) == ("retrying", 1)
    assert record.error == JobError("ValueError", "bad row 7", "Traceback ...\n")
    lease = q.claim(db, 30)
    assert lease is not None and q.job(db, id_).state == "running"
    clock.advance(31)  # the lease expired: retrying at once, before anyone puts it back
    assert (q.job(db, id_).state, q.job(db, id_).attempts) == ("retrying", 2)
    lease = q.claim(db, 30)  # puts the expired hold back, then claims it again
    assert lease is not None and lease.deliveries == 3
    assert q.job(db, id_).error.type == "LeaseExpired"
    assert drive(q.ops.finish_many(db, [Finished(lease, encode_result("done")[0],
                                                 progress=Progress(1.0, "all rows"))])) == [True]
    record = q.job(db, id_)
    assert (record.state, record.attempts, record.result) == ("succeeded", 3, "done")
    assert record.progress == Progress(1.0, "all rows") and record.finished_at is not None
    assert q.result(db, id_, timeout=5) == "done"
    assert q.cancel(db, id_) == "succeeded"  # finished: nothing changes
    assert q.job(db, id_).state == "succeeded"


def test_a_job_that_runs_out_of_deliveries_is_dead_with_its_reason(
        db: Any, fdb_subspace: Any, clock: TestClock) -> None:
    q = Queue(fdb_subspace, history=HOUR, clock=clock, max_deliveries=2)
    id_ = q.push(db, "doomed")
    for _ in range(2):
        lease = q.claim(db, 30)
        assert lease is not None
        q.release(db, lease, error=JobError("KeyError", "'customer'", "Traceback: ..."))
    record = q.job(db, id_)
    assert (record.state, record.attempts) == ("dead", 2)
    assert record.error.message == "'customer'"
    assert [d.reason for d in q.dead(db)] == ["KeyError: 'customer'"]
    with pytest.raises(JobFailedError, match="KeyError") as failed:
        q.result(db, id_, timeout=5)
    assert failed.value.record.error.traceback == "Traceback: ..."
    assert q.requeue_dead(db) == 1  # revived: pending again, its record with it
    assert q.job(db, id_).state == "pending"
    lease = q.claim(db, 30)
    q.bury(db, lease, "given up", error=JobError("RuntimeError", "boom"))
    assert q.job(db, id_).state == "dead"
    assert q.dead(db)[0].reason == "given up"


class Jobs:
    """One kind of structure with job records, seen the same way: the worker's object
    (``history``) and an operator's (none: as ``fdbrecipes requeue-dead`` and the
    dashboard make it), over the same keys."""

    def __init__(self, kind: str, space: Any) -> None:
        self.kind = kind
        self.group = {"group": "acme"} if "fair" in kind else {}
        shards = 3 if kind.startswith("sharded") else 1
        make: Any = {"queue": Queue, "sharded-queue": Queue, "priority-queue": PriorityQueue,
                     "fair-queue": FairQueue, "sharded-fair-queue": FairQueue}[kind]
        self.worker = make(space, history=HOUR, max_deliveries=1, shards=shards)
        self.operator = make(space, max_deliveries=1, shards=shards)

    def push(self, db: Any, value: str) -> bytes:
        if self.kind == "priority-queue":
            return self.worker.push(db, value, 3)  # type: ignore[no-any-return]
        return self.worker.push(db, value, **self.group)  # type: ignore[no-any-return]

    def claim(self, db: Any) -> Any:
        if self.kind == "priority-queue":
            return self.worker.claim_min(db, 30)
        return self.worker.claim(db, 30)

    def job(self, db: Any, id_: bytes) -> Any:
        return self.worker.job(db, id_, **self.group)

    def result(self, db: Any, id_: bytes, timeout: float) -> Any:
        return self.worker.result(db, id_, timeout=timeout, **self.group)

    def requeue(self, db: Any, by_token: bool) -> int:
        """The operator's requeue: every dead letter, or (as the dashboard) by token."""
        where = (self.group["group"],) if self.group else ()
        if not by_token:
            return self.operator.requeue_dead(db, *where)  # type: ignore[no-any-return]
        tokens = [d.token for d in self.operator.dead(db, *where)]
        return self.operator.requeue_dead(db, *where, tokens=tokens)  # type: ignore


@pytest.mark.parametrize("by_token", [False, True], ids=["all", "tokens"])
@pytest.mark.parametrize("kind", ["queue", "priority-queue", "sharded-queue", "fair-queue",
                                  "sharded-fair-queue"])
def test_a_dead_job_requeued_by_an_operator_is_pending_again(
        db: Any, fdb_subspace: Any, kind: str, by_token: bool) -> None:
    """Issue 43, item 12: requeued by an object without history (the operator's
    commands, the dashboard), the record moves with the item, in its transaction:
    pending, and ``result()`` waits for the run to come instead of raising."""
    jobs = Jobs(kind, fdb_subspace)
    id_ = jobs.push(db, "doomed")
    lease = jobs.claim(db)
    assert lease is not None and lease.id == id_
    jobs.worker.release(db, lease, error=JobError("KeyError", "'customer'"))
    assert jobs.job(db, id_).state == "dead"
    with pytest.raises(JobFailedError):
        jobs.result(db, id_, 5)
    assert jobs.requeue(db, by_token) == 1
    record = jobs.job(db, id_)
    assert (record.state, record.attempts) == ("pending", 0)
    assert record.error == JobError("KeyError", "'customer'")  # its last error stays
    assert record.token is not None  # where its item is now: pending
    with pytest.raises(TimeoutError):  # about to run again: not failed
        jobs.result(db, id_, 0.2)
    lease = jobs.claim(db)
    assert lease is not None and lease.id == id_ and jobs.job(db, id_).state == "running"
    assert drive(jobs.worker.ops.finish_many(db, [Finished(lease, encode_result("ok")[0])])) \
        == [True]
    assert jobs.result(db, id_, 5) == "ok"


@pytest.mark.parametrize("kind", ["queue", "fair-queue"])
def test_an_operators_calls_by_token_or_id_move_the_records(
        db: Any, fdb_subspace: Any, kind: str) -> None:
    """Issue 43, item 12, for every other call an operator makes on a job a worker with
    ``history`` pushed (the CLI and the dashboard keep no records themselves): ack,
    release and bury by token, remove by id and by token, and a purge of dead letters
    each move the record with the item, in the same transaction."""
    jobs = Jobs(kind, fdb_subspace)
    op = jobs.operator
    acked, released, buried, removed, listed = (jobs.push(db, v) for v in "abcde")
    lease = jobs.claim(db)
    assert lease.id == acked
    op.ack(db, lease.token)
    assert jobs.job(db, acked).state == "succeeded"
    lease = jobs.claim(db)
    assert lease.id == released
    op.release(db, lease.token, count=False)
    assert (jobs.job(db, released).state, jobs.job(db, released).attempts) == ("pending", 0)
    leases = [jobs.claim(db) for _ in range(2)]  # b again (back at its place), and c
    [dying] = [lease for lease in leases if lease.id == buried]
    op.bury(db, dying.token, "by hand")
    record = jobs.job(db, buried)
    assert record.state == "dead" and record.token is not None
    assert op.remove(db, id=removed, **jobs.group) == "d"
    assert jobs.job(db, removed).state == "cancelled"
    at = (jobs.group["group"],) if jobs.group else ()
    [row] = [r for r in op.pending(db, *at) if r.value == "e"]
    assert op.remove_many(db, *at, [row.token]) == ["e"]
    assert jobs.job(db, listed).state == "cancelled"
    assert op.purge_dead(db, *at) == 1
    record = jobs.job(db, buried)
    assert record.state == "dead" and record.token is None  # no dead letter to name


def test_an_operator_requeue_writes_no_record_for_a_job_without_one(
        db: Any, fdb_subspace: Any) -> None:
    """A dead letter pushed by an object without history has no record: the
    operator's requeue makes none."""
    q = Queue(fdb_subspace, max_deliveries=1)
    q.push(db, "plain", id=b"no-record")
    lease = q.claim(db, 30)
    assert lease is not None
    q.release(db, lease)
    assert q.requeue_dead(db) == 1
    assert Queue(fdb_subspace, history=HOUR).job(db, b"no-record") is None
    r = fdb_subspace["o"].range()
    assert list(db.get_range(r.start, r.stop)) == []


def test_an_expired_lease_on_the_last_delivery_reads_as_dead(
        db: Any, fdb_subspace: Any, clock: TestClock) -> None:
    q = PriorityQueue(fdb_subspace, history=HOUR, clock=clock, max_deliveries=1)
    id_ = q.push(db, "x", 5)
    assert q.claim_min(db, 10) is not None
    clock.advance(11)
    assert q.job(db, id_).state == "dead"  # before anything moved it
    assert q.stats(db).dead == 1
    assert q.pop_min(db) is None  # the take buries it
    assert q.job(db, id_).state == "dead" and q.job(db, id_).error.type == "LeaseExpired"


def test_result_waits_on_a_watch_and_answers_another_process(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    q = Queue(fdb_subspace, history=HOUR)
    id_ = q.push(db, "slow")
    with pytest.raises(TimeoutError):
        q.result(db, id_, timeout=0.2)
    prefix = fdb_subspace.key()
    waiter = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fdb
        fdb.api_version(730)
        from fdbrecipes import Queue
        db = fdb.open({fdb_cluster_file!r})
        q = Queue(fdb.Subspace(rawPrefix={prefix!r}), history=3600)
        print(q.result(db, {id_!r}, timeout=60), flush=True)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        lease = q.claim(db, 30)
        drive(q.ops.finish_many(db, [Finished(lease, encode_result(("answer", 42))[0])]))
        out, _ = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
    assert out.strip() == "('answer', 42)"
    with pytest.raises(UnknownJobError):
        q.result(db, b"nobody", timeout=1)


def test_cancel_of_pending_delayed_and_running_jobs(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, history=HOUR)
    pending, delayed, running = q.push(db, "p"), q.push(db, "d", delay=600), q.push(db, "r")
    assert q.cancel(db, pending) == "cancelled"
    assert q.cancel(db, delayed) == "cancelled"
    assert states(q, db, [pending, delayed]) == ["cancelled", "cancelled"]
    lease = q.claim(db, 30)
    assert lease is not None and lease.value == "r"
    assert q.cancel(db, running) == "cancelling"  # its worker is told; it still runs
    assert q.job(db, running).state == "running" and q.job(db, running).cancel_requested
    drive(q.ops.finish_many(db, [Finished(lease, state="cancelled")]))
    assert q.job(db, running).state == "cancelled"
    with pytest.raises(JobCancelledError):
        q.result(db, running, timeout=5)
    assert q.cancel(db, running) == "cancelled"  # already: nothing changes
    assert q.cancel(db, b"unknown") is None
    assert q.size(db) == 0 and q.stats(db).delayed == 0


def test_a_result_too_large_is_not_kept_and_the_ack_is_not_lost(
        db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, history=HOUR)
    id_ = q.push(db, "big")
    lease = q.claim(db, 30)
    encoded, error = encode_result("x" * 1_500_000)
    assert encoded is None and error is not None
    assert drive(q.ops.finish_many(db, [Finished(lease, encoded, error=error)])) == [True]
    assert q.size(db) == 0
    assert q.job(db, id_).state == "succeeded"
    with pytest.raises(ResultTooLargeError):
        q.result(db, id_, timeout=5)
    id_ = q.push(db, "fits")  # a result near the limit spans several keys
    lease = q.claim(db, 30)
    encoded, error = encode_result("y" * 900_000)
    drive(q.ops.finish_many(db, [Finished(lease, encoded)]))
    assert q.result(db, id_, timeout=5) == "y" * 900_000


def test_bad_input_is_refused_before_anything_is_written(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"], history=HOUR)
    other = Queue(fdb_subspace["other"])
    other.push(db, "x")
    lease = other.claim(db, 30)
    with pytest.raises(TypeError, match="id"):
        q.job(db, "text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="id"):
        q.cancel(db, b"")
    with pytest.raises(ValueError, match="time_limit"):
        q.push(db, "x", time_limit=0)
    with pytest.raises(TypeError, match="history"):
        Queue(fdb_subspace, history="1h")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="error"):
        q.release(db, lease, error="boom")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="command"):
        q.command(db, "worker-1", "pause")
    assert dump(db, fdb_subspace["q"]) == {}


def test_fair_queue_jobs_have_records_per_group(db: Any, fdb_subspace: Any) -> None:
    q = FairQueue(fdb_subspace, history=HOUR)
    a, b = q.push(db, "a", group="acme"), q.push(db, "b", group="bolt", time_limit=5)
    assert q.job(db, a, group="acme").state == "pending"
    assert q.job(db, a, group="bolt") is None  # ids are per group
    assert q.job(db, b, group="bolt").time_limit == 5
    assert q.cancel(db, a, group="acme") == "cancelled"
    assert q.groups(db) == ["bolt"]  # the cancel retired the group from the index
    lease = q.claim(db, 30)
    assert lease is not None and lease.id == b and q.job(db, b, group="bolt").state == "running"
    assert drive(q.ops.finish_many(db, [Finished(lease, encode_result(7)[0])])) == [True]
    assert q.result(db, b, group="bolt", timeout=5) == 7
    assert q.groups(db) == []  # retired, its records kept until pruned
    assert q.job(db, a, group="acme").state == "cancelled"


def test_pruning_forgets_finished_records_only(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, history=0.001)
    done = q.push_many(db, list(range(2_500)))
    waiting = q.push(db, "waits", delay=600)
    assert len(q.pop_many(db, 2_500)) == 2_500
    with pytest.raises(ValueError, match="1,000"):
        q.prune(db.create_transaction(), 1_001)
    assert q.prune(db, 1_000) == 1_000
    assert q.prune(db) == 1_500  # in transactions of 1,000
    assert q.prune(db) == 0
    assert all(q.job(db, id_) is None for id_ in done[:10] + done[-10:])
    assert q.job(db, waiting).state == "delayed"
    r = fdb_subspace["o"].range()
    assert list(db.get_range(r.start, r.stop)) == []


def test_the_async_twins_read_and_cancel_records(db: Any, fdb_subspace: Any) -> None:
    async def main() -> None:
        q = aio.AsyncQueue(fdb_subspace, history=HOUR)
        id_ = await q.push(db, "a")
        assert id_ is not None and (await q.job(db, id_)).state == "pending"
        waiter = asyncio.ensure_future(q.result(db, id_, timeout=30))
        assert await q.cancel(db, id_) == "cancelled"
        with pytest.raises(JobCancelledError):
            await waiter
        assert await q.prune(db) == 0
        assert await q.workers(db) == []
        fair = aio.AsyncFairQueue(fdb_subspace["fair"], history=HOUR)
        fid = await fair.push(db, "f", group="g")
        assert (await fair.job(db, fid, group="g")).state == "pending"

    asyncio.run(main())


def test_a_thread_waiting_for_a_result_wakes_when_the_job_ends(
        db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, history=HOUR)
    id_ = q.push(db, "x")
    got: List[Any] = []
    waiter = threading.Thread(target=lambda: got.append(q.result(db, id_, timeout=60)))
    waiter.start()
    assert q.pop(db) == "x"
    waiter.join(60)
    assert not waiter.is_alive() and got == [None]  # popped: succeeded, no result


def test_retention_prunes_100000_finished_jobs_in_bounded_transactions(
        db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, history=0.001)
    pending = q.push_many(db, ["still waiting"] * 10)
    for _ in range(100):
        q.push_many(db, list(range(1_000)))
    assert len(q.pop_many(db, 100_010)) == 100_010
    pending = q.push_many(db, ["still waiting"] * 10)  # pushed after: pending
    pruned, transactions = 0, 0
    while True:  # the pruning, one transaction at a time, each measured
        tr = db.create_transaction()
        n = q.prune(tr, 1_000)
        size = tr.get_approximate_size().wait()
        tr.commit().wait()
        if n == 0:
            break
        assert size < 2_000_000, f"a pruning transaction of {size:,} bytes"  # of 10 MB
        pruned += n
        transactions += 1
    assert pruned == 100_010 and transactions == 101
    assert [q.job(db, id_).state for id_ in pending] == ["pending"] * 10
    records = fdb_subspace["j"].range()
    left = list(db.get_range(records.start, records.stop))
    assert len({fdb_subspace["j"].unpack(kv.key)[0] for kv in left}) == 10  # the pending


def test_records_of_the_earlier_layout_read_as_before(db: Any, fdb_subspace: Any) -> None:
    # the layout before each step wrote one key (docs/data-model.md): every step
    # rewrote "s"; "b" had no attempts and "f" no state
    q = Queue(fdb_subspace, history=HOUR)
    jobs, index = fdb_subspace["j"], fdb_subspace["o"]
    old_done, old_dead, gone = b"old-done", b"old-dead", b"old-gone"
    written = {
        jobs.pack((old_done, "a")): (100.0, None),
        jobs.pack((old_done, "s")): ("succeeded", 2, None),
        jobs.pack((old_done, "b")): (101.0, "w-1-1", b"L" * 20),
        jobs.pack((old_done, "f")): (102.0, 4e9),
        jobs.pack((old_dead, "a")): (100.0, None), jobs.pack((old_dead, "s")): ("dead", 3, None),
        jobs.pack((old_dead, "f")): (103.0, 4e9 + 1),
        jobs.pack((gone, "a")): (100.0, None), jobs.pack((gone, "s")): ("cancelled", 0, None),
        jobs.pack((gone, "f")): (104.0, 1.0),  # its time is up
    }
    tr = db.create_transaction()
    for key, value in written.items():
        tr[key] = fdb.tuple.pack(value)
    tr[jobs.pack((old_done, "r", 0))] = encode_result("done")[0]
    for expires, id_ in ((4e9, old_done), (4e9 + 1, old_dead), (1.0, gone)):
        tr[index.pack((expires, id_))] = b""
    tr.commit().wait()
    record = q.job(db, old_done)
    assert (record.state, record.attempts, record.started_at, record.finished_at,
            record.worker, record.result) == ("succeeded", 2, 101.0, 102.0, "w-1-1", "done")
    assert q.result(db, old_done, timeout=5) == "done"
    with pytest.raises(JobFailedError):
        q.result(db, old_dead, timeout=5)
    assert [(f.id, f.state, f.attempts, f.finished_at) for f in q.finished(db)] == [
        (old_dead, "dead", 3, 103.0), (old_done, "succeeded", 2, 102.0),
        (gone, "cancelled", 0, 104.0)]
    assert q.prune(db) == 1 and q.job(db, gone) is None
    assert q.job(db, old_dead).state == "dead"


def test_an_attempts_start_stays_in_the_record_after_each_step(
        db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, history=HOUR)
    id_ = q.push(db, "work")
    lease = q.claim(db, 30)
    running = q.job(db, id_)
    assert (running.state, running.attempts) == ("running", 1) and running.started_at
    q.release(db, lease, delay=60)
    record = q.job(db, id_)  # a return keeps the attempt that began last
    assert (record.state, record.attempts, record.started_at) == (
        "retrying", 1, running.started_at)
    assert q.cancel(db, id_) == "cancelled"
    record = q.job(db, id_)
    assert (record.state, record.started_at, record.cancel_requested) == (
        "cancelled", running.started_at, False)
    second = q.push(db, "more")
    lease = q.claim(db, 30)
    assert q.cancel(db, second) == "cancelling" and q.job(db, second).cancel_requested
    q.ack(db, lease)  # it ran to its end all the same: succeeded, the cancel moot
    record = q.job(db, second)
    assert (record.state, record.cancel_requested) == ("succeeded", False)
    assert record.started_at is not None and record.finished_at >= record.started_at


def test_an_id_made_for_a_job_is_forgotten_when_it_leaves_a_given_one_is_kept(
        db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, history=HOUR)
    made = q.push(db, "made")
    assert q.push(db, "given", id=b"given") == b"given"
    assert made is not None and q.pop_many(db, 2) == ["made", "given"]
    assert q.push(db, "given again", id=b"given") == b"given"  # remembered: not stored
    assert q.size(db) == 0 and q.job(db, b"given").state == "succeeded"
    ids = fdb_subspace["k"].range()
    assert [fdb_subspace["k"].unpack(kv.key)[0] for kv in db.get_range(ids.start, ids.stop)] \
        == [b"given"]  # the made id's key went with its item, nothing to collect later
    assert q.job(db, made).state == "succeeded"  # its record stays its history
    assert q.push(db, "a new job", id=made) == made  # a push that gives it: a new job,
    record = q.job(db, made)                          # whose record starts afresh
    assert (record.state, record.attempts, record.finished_at, record.result) == (
        "pending", 0, None, None)
    assert q.pop(db) == "a new job" and q.job(db, made).state == "succeeded"


@pytest.mark.parametrize("kind", ["queue", "priority-queue", "sharded-queue", "fair-queue"])
def test_an_id_made_for_a_job_is_known_while_its_job_is_there(
        db: Any, fdb_subspace: Any, kind: str) -> None:
    """An id a push made is kept in its job's record (the push key holds the item's
    place), not in an id key of its own, so its ack clears none: the record's token
    says where the item is, and a push that gives the id stores nothing while the job
    is pending, running or dead (its dead letter there), as a remembered id does; once
    the dead letter is purged, or the job succeeded, a push that gives it is a new
    job."""
    jobs = Jobs(kind, fdb_subspace)
    at = (jobs.group["group"],) if jobs.group else ()

    def again() -> int:  # push with the made id; how many items are pending then
        if kind == "priority-queue":
            assert jobs.worker.push(db, "again", 3, id=id_) == id_
        else:
            assert jobs.worker.push(db, "again", id=id_, **jobs.group) == id_
        return len(jobs.operator.pending(db, *at))

    id_ = jobs.push(db, "first")
    whole = fdb_subspace.range()
    assert not [kv.key for kv in db.get_range(whole.start, whole.stop)
                if kv.key.endswith(fdb.tuple.pack((id_,)))]  # no id key
    [row] = jobs.operator.pending(db, *at)
    assert jobs.job(db, id_).token == row.token
    assert again() == 1  # pending: nothing stored
    lease = jobs.claim(db)
    assert lease.id == id_ and again() == 0  # running
    jobs.worker.release(db, lease, error=JobError("KeyError", "'customer'"))
    assert jobs.job(db, id_).state == "dead" and again() == 0  # dead, its letter there
    assert jobs.operator.purge_dead(db, *at) == 1
    assert again() == 1  # a new job
    record = jobs.job(db, id_)
    [row] = jobs.operator.pending(db, *at)
    assert (record.state, record.attempts, record.token) == ("pending", 0, row.token)
    assert jobs.operator.remove(db, id=id_, **jobs.group) == "again"  # by id: a given one's
    assert jobs.job(db, id_).state == "cancelled"


def test_an_id_made_for_a_job_by_the_earlier_layout_is_cleared_when_it_leaves(
        db: Any, fdb_subspace: Any) -> None:
    """An item pushed by the earlier layout (True in its id's stead, an id key holding
    its place, a push key without it) is found by its id, a push that gives the id
    stores nothing, and its id key is cleared when it leaves."""
    q = Queue(fdb_subspace, history=HOUR)
    made = q.push(db, "old")
    assert made is not None
    [kv] = [kv for kv in db.get_range(*_span(fdb_subspace["i"])) if kv.key
            != fdb_subspace["i"].pack((True,))]
    item = fdb_subspace["i"].unpack(kv.key)
    assert item[3] is False  # this layout's mark
    place = item[:2]
    pushed = fdb.tuple.unpack(db[fdb_subspace["j"].pack((made, "a"))])
    assert pushed[5] == place

    @fdb.transactional
    def earlier(tr: Any) -> None:  # as the earlier layout wrote it
        del tr[kv.key]
        tr[fdb_subspace["i"].pack(item[:3] + (True,) + item[4:])] = kv.value
        tr[fdb_subspace["k"].pack((made,))] = fdb.tuple.pack(place)
        tr[fdb_subspace["j"].pack((made, "a"))] = fdb.tuple.pack(pushed[:5])

    earlier(db)
    assert q.job(db, made).token == q.pending(db)[0].token
    assert q.push(db, "again", id=made) == made and q.size(db) == 1
    assert q.pop(db) == "old" and q.job(db, made).state == "succeeded"
    assert list(db.get_range(*_span(fdb_subspace["k"]))) == []  # cleared as it left


def _span(space: Any) -> Any:
    r = space.range()
    return r.start, r.stop


def test_the_jobs_one_transaction_finishes_share_a_key_of_the_index(
        db: Any, fdb_subspace: Any, clock: TestClock) -> None:
    q = Queue(fdb_subspace, history=0.001, clock=clock, max_deliveries=1)
    done = q.push_many(db, list(range(5)))
    q.ack_many(db, q.claim_many(db, 5, 30))
    index = fdb_subspace["o"].range()
    assert len(list(db.get_range(index.start, index.stop))) == 1  # one key names the 5
    rows, after = [], None
    while len(rows) < 6:  # one by one: a token names a place inside the key
        page = q.finished(db, 1, after=after)
        if not page:
            break
        rows += page
        after = page[0].token
    assert sorted(r.id for r in rows) == sorted(done) and len({r.token for r in rows}) == 5
    dying = q.push_many(db, ["a", "b", "c"])
    assert len(q.claim_many(db, 3, 30)) == 3
    clock.advance(31)
    assert q.claim(db, 30) is None  # the claim buried the three, in one transaction
    assert len(list(db.get_range(index.start, index.stop))) == 2
    revived = next(d for d in q.dead(db) if d.id == dying[1])
    assert q.requeue_dead(db, tokens=[revived.token]) == 1  # its entry is stale now
    assert sorted(r.id for r in q.finished(db)) == sorted(done + [dying[0], dying[2]])
    tr = db.create_transaction()
    assert q.prune(tr, 3) == 3  # a key's first three: the others written again
    tr.commit().wait()
    assert len(q.finished(db)) == 4 and q.job(db, dying[1]).state == "pending"
    assert q.prune(db) == 5 and q.finished(db) == []
    assert list(db.get_range(index.start, index.stop)) == []
    assert all(q.job(db, id_) is None for id_ in done + [dying[0], dying[2]])
    assert q.job(db, dying[1]).state == "pending"


def test_a_fair_queues_jobs_finished_together_share_a_key_per_group(
        db: Any, fdb_subspace: Any) -> None:
    q = FairQueue(fdb_subspace, history=0.001)
    ids = {q.push(db, f"{g} {i}", group=g): g for g in ("acme", "bolt") for i in range(2)}
    leases = q.claim_many(db, 4, 30)
    assert len(leases) == 4 and all(q.ack_many(db, leases))  # acked group by group
    index = fdb_subspace["o"].range()
    assert len(list(db.get_range(index.start, index.stop))) == 2
    first = q.finished(db, 3)
    rows = first + q.finished(db, after=first[-1].token)
    assert {r.id: r.group for r in rows} == ids and len(rows) == 4
    assert q.prune(db) == 4 and q.finished(db) == []
    assert all(q.job(db, id_, group=g) is None for id_, g in ids.items())
