"""A worker's jobs on a real server, with job records: results, failures with their
tracebacks and reasons, progress, time limits (sync and async handlers), cancels of
running jobs, follow-up work committed with the ack, and the workers' records that
operators list, quiet and stop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List

import pytest

from fdbrecipes import (
    FairQueue,
    Job,
    JobCancelledError,
    JobFailedError,
    PriorityQueue,
    Progress,
    Queue,
    TimeLimitExceeded,
    Worker,
    aio,
)
from fdbrecipes.protocol import Finished
from tests.helpers import TestClock, eventually

pytestmark = pytest.mark.integration

HOUR = 3600.0


def drain(worker: Any, seconds: float = 120) -> threading.Thread:
    """Run ``worker`` in burst mode in a thread; the thread (joined by the caller)."""
    thread = threading.Thread(target=worker.run, kwargs={"burst": True}, daemon=True)
    thread.start()
    return thread


def finish(thread: threading.Thread, seconds: float = 120) -> None:
    thread.join(seconds)
    assert not thread.is_alive(), "the worker did not finish"


def test_results_failures_and_progress_are_recorded(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, history=HOUR, max_deliveries=2)
    ok, bad, discarded = q.push(db, 21), q.push(db, -1), q.push(db, 0)

    def handler(job: Job) -> Any:
        job.progress(0.5, "half way")
        if job.value < 0:
            raise ValueError(f"negative: {job.value}")
        if job.value == 0:
            from fdbrecipes import Discard
            raise Discard("zero is not a job")
        return {"doubled": job.value * 2}.get("doubled")

    finish(drain(Worker(db, q, handler, concurrency=2, lease_seconds=10,
                        backoff=__import__("fdbrecipes").Backoff(base=0.01))))
    record = q.job(db, ok)
    assert (record.state, record.result, record.attempts) == ("succeeded", 42, 1)
    assert record.progress == Progress(0.5, "half way")
    assert record.worker is not None and record.worker.count("-") >= 2
    failed = q.job(db, bad)
    assert (failed.state, failed.attempts) == ("dead", 2)
    assert failed.progress == Progress(0.5, "half way")  # kept when the job failed too
    assert q.job(db, discarded).progress == Progress(0.5, "half way")
    assert failed.error.type == "ValueError" and failed.error.message == "negative: -1"
    assert "Traceback" in failed.error.traceback and "raise ValueError" in failed.error.traceback
    reasons = sorted(d.reason for d in q.dead(db))
    assert reasons == ["ValueError: negative: -1", "zero is not a job"]
    assert q.job(db, discarded).state == "dead"
    with pytest.raises(JobFailedError, match="negative"):
        q.result(db, bad, timeout=5)


def test_a_sync_handler_past_its_time_limit_is_abandoned(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, history=HOUR, max_deliveries=1)
    stuck = q.push(db, "stuck")
    others = q.push_many(db, [f"job-{i}" for i in range(20)])
    own_limit = q.push(db, "slow but allowed", time_limit=60)
    release = threading.Event()
    late: List[str] = []

    def handler(job: Job) -> str:
        if job.value == "stuck":
            release.wait(120)  # ignores its time limit
            late.append("returned")
            return "too late"
        if job.value == "slow but allowed":
            assert job.time_limit == 60
            release.wait(120)
        return job.value

    worker = Worker(db, q, handler, concurrency=2, lease_seconds=5, time_limit=0.5)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        with pytest.raises(JobFailedError, match="time limit of 0.5 s"):
            q.result(db, stuck, timeout=60)
        # Its thread was replaced: the other jobs ran on two free threads meanwhile.
        assert [q.result(db, id_, timeout=60) for id_ in others] == [f"job-{i}"
                                                                    for i in range(20)]
        record = q.job(db, stuck)
        assert record.error.type == "fdbrecipes.jobs.TimeLimitExceeded"
        assert q.dead(db)[0].reason.startswith("TimeLimitExceeded: the job ran past")
        release.set()  # the abandoned handler returns now: its answer is ignored
        assert q.result(db, own_limit, timeout=60) == "slow but allowed"
        eventually(lambda: late, 60, "the abandoned handler returned")
    finally:
        release.set()
        worker.stop()
        thread.join(60)
    assert q.job(db, stuck).state == "dead" and q.job(db, stuck).result is None
    assert q.size(db) == 0


def test_an_async_handler_past_its_time_limit_is_cancelled(db: Any, fdb_subspace: Any) -> None:
    q = PriorityQueue(fdb_subspace, history=HOUR, max_deliveries=1)
    forever, quick = q.push(db, "forever", 1), q.push(db, "quick", 2, time_limit=30)
    cancelled: List[str] = []

    async def handler(job: Job) -> Any:
        if job.value == "forever":
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(job.value)
                raise
        return job.value

    async def main() -> None:
        worker = aio.AsyncWorker(db, q, handler, concurrency=2, lease_seconds=5,
                                 time_limit=0.3)
        await worker.run(burst=True)

    asyncio.run(main())
    assert cancelled == ["forever"]
    assert q.job(db, forever).error.type == "fdbrecipes.jobs.TimeLimitExceeded"
    assert q.job(db, forever).state == "dead"
    assert q.result(db, quick, timeout=5) == "quick"


def test_a_running_job_is_cancelled_sync_and_async(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["sync"], history=HOUR)
    id_ = q.push(db, "long")
    started, steps = threading.Event(), threading.Event()

    def handler(job: Job) -> None:
        started.set()
        while True:  # long work, looking between steps
            job.check()
            steps.wait(0.02)

    worker = Worker(db, q, handler, concurrency=1, lease_seconds=10)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert started.wait(60)
        assert q.cancel(db, id_) == "cancelling"
        with pytest.raises(JobCancelledError):
            q.result(db, id_, timeout=60)
    finally:
        worker.stop()
        thread.join(60)
    assert q.size(db) == 0 and q.dead(db) == []

    aq = aio.AsyncQueue(fdb_subspace["async"], history=HOUR)

    async def main() -> None:
        aid = await aq.push(db, "long")
        began = asyncio.Event()

        async def slow(job: Job) -> None:
            began.set()
            await asyncio.sleep(3600)

        async with aio.AsyncWorker(db, aq, slow, concurrency=1, lease_seconds=10):
            await asyncio.wait_for(began.wait(), 60)
            assert await aq.cancel(db, aid) == "cancelling"
            with pytest.raises(JobCancelledError):
                await aq.result(db, aid, timeout=60)
        assert await aq.size(db) == 0

    asyncio.run(main())


def test_a_cancel_asked_while_its_worker_died_is_honoured_at_the_next_claim(
        db: Any, fdb_subspace: Any, clock: TestClock) -> None:
    q = Queue(fdb_subspace, history=HOUR, clock=clock)
    id_ = q.push(db, "x")
    lease = q.claim(db, 30)  # a worker that dies holding it
    assert lease is not None and q.cancel(db, id_) == "cancelling"
    clock.advance(31)
    ran: List[Any] = []
    finish(drain(Worker(db, q, ran.append, concurrency=1, lease_seconds=10)))
    assert ran == [] and q.job(db, id_).state == "cancelled" and q.size(db) == 0


def test_follow_up_work_is_pushed_with_the_ack(db: Any, fdb_subspace: Any) -> None:
    steps = Queue(fdb_subspace["steps"], history=HOUR)
    fair = FairQueue(fdb_subspace["fair"])
    first = steps.push(db, ("resize", 1))

    def handler(job: Job) -> Any:
        kind, n = job.value
        if kind == "resize":
            return job.then(steps, ("upload", n + 1))  # its id: the result
        if kind == "upload":
            job.then(fair, ("notify", n + 1), group="acme")
            with pytest.raises(TypeError, match="group"):
                job.then(fair, "no group")
            return "uploaded"
        raise AssertionError(kind)

    finish(drain(Worker(db, steps, handler, concurrency=2, lease_seconds=10)))
    second = steps.result(db, first, timeout=5)
    assert steps.result(db, second, timeout=5) == "uploaded"
    assert fair.items(db, "acme") == [("notify", 3)]
    assert steps.size(db) == 0


def test_a_failed_job_pushes_no_follow_up(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"], max_deliveries=1)
    after = Queue(fdb_subspace["after"])
    q.push(db, "x")

    def handler(job: Job) -> None:
        job.then(after, "next")
        raise RuntimeError("failed after asking")

    finish(drain(Worker(db, q, handler, concurrency=1, lease_seconds=10)))
    assert after.size(db) == 0 and len(q.dead(db)) == 1


def test_workers_are_listed_quieted_and_stopped(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, history=HOUR)
    gate = threading.Event()

    def handler(job: Job) -> None:
        gate.wait(120)

    workers = [Worker(db, q, handler, concurrency=2, lease_seconds=3, name=f"w{i}")
               for i in range(2)]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for t in threads:
        t.start()
    try:
        listed = eventually(lambda: {w.id: w for w in q.workers(db)} if len(q.workers(db)) == 2
                            else None, 30, "both workers listed")
        assert set(listed) == {w.id for w in workers}
        assert {w.label for w in listed.values()} == {"w0", "w1"}
        assert {w.state for w in listed.values()} == {"running"}
        quiet, stopped = workers
        assert q.command(db, quiet.id, "quiet")
        eventually(lambda: [w for w in q.workers(db) if w.id == quiet.id
                            and w.state == "quiet"], 30, "the quiet worker says so")
        ids = q.push_many(db, ["a", "b"])
        running = eventually(lambda: [w for w in q.workers(db) if w.running], 30,
                             "a worker runs the jobs")
        assert [w.id for w in running] == [stopped.id]  # the quiet one claims nothing
        assert {j.id for j in running[0].running} == set(ids)
        gate.set()
        assert q.command(db, stopped.id, "stop")
        threads[1].join(60)
        assert not threads[1].is_alive()
        assert [w.id for w in q.workers(db)] == [quiet.id]  # a stopped worker leaves
        assert [q.job(db, id_).worker for id_ in ids] == [stopped.id] * 2
        assert not q.command(db, stopped.id, "quiet")  # no live worker has that id
        stats: Dict[str, int] = {}
        for w in q.workers(db):
            stats = {"processed": w.processed, "failed": w.failed}
        assert stats == {"processed": 0, "failed": 0}
    finally:
        gate.set()
        for w in workers:
            w.stop()
        for t in threads:
            t.join(60)
    assert q.workers(db) == []


def test_a_job_ends_once_however_it_is_settled(db: Any, fdb_subspace: Any) -> None:
    """finish_many of a lease already settled is refused, and the record keeps its
    first end."""
    q = Queue(fdb_subspace, history=HOUR)
    id_ = q.push(db, "x")
    lease = q.claim(db, 30)
    from fdbrecipes import drive

    assert drive(q.ops.finish_many(db, [Finished(lease), Finished(lease)])) == [True, False]
    assert q.job(db, id_).state == "succeeded" and q.job(db, id_).attempts == 1
    with pytest.raises(TypeError, match="Finished"):
        drive(q.ops.finish_many(db, [lease]))
    assert TimeLimitExceeded.__module__ == "fdbrecipes.jobs"


# -- bad data from a handler: its own job fails, never another ------------------------


def run_burst(worker: Any, seconds: float = 60) -> None:
    """Run ``worker`` (a Worker or an AsyncWorker) in burst mode in a thread; fail if it
    did not return within ``seconds`` (then stop it, skipping the wait for handlers)."""
    if isinstance(worker, Worker):
        thread = threading.Thread(target=worker.run, kwargs={"burst": True}, daemon=True)
    else:
        thread = threading.Thread(target=asyncio.run, args=(worker.run(burst=True),),
                                  daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        worker.stop()
        worker.stop()
        thread.join(30)
        raise AssertionError(f"the worker did not drain within {seconds} s")


def test_a_progress_message_that_cannot_be_written_is_refused_in_the_handler(
        db: Any, fdb_subspace: Any) -> None:
    """A lone surrogate (text decoded with surrogateescape) in a progress message
    raises in the handler; before, it failed the ack of every job of its batch."""
    q = Queue(fdb_subspace, history=HOUR, max_deliveries=3)
    values = ["good-0", "bad", "good-1", "good-2"]
    ids = q.push_many(db, values)
    refused: List[str] = []

    def handler(job: Job) -> str:
        if job.value == "bad":
            try:
                job.progress(0.5, "row \udc80 of 10")
            except ValueError as e:
                refused.append(str(e))
        job.progress(1.0, "done")
        return str(job.value).upper()

    run_burst(Worker(db, q, handler, concurrency=4, lease_seconds=30))
    assert len(refused) == 1 and refused[0].startswith("message cannot be tuple-encoded")
    for id_, value in zip(ids, values):
        record = q.job(db, id_)
        assert (record.state, record.attempts, record.result) == (
            "succeeded", 1, value.upper()), value
        assert record.progress == Progress(1.0, "done")


def test_an_ack_that_cannot_commit_fails_its_own_job_only(db: Any,
                                                          fdb_subspace: Any) -> None:
    """Acks go out together; one job whose ack cannot commit (follow-up work over
    FoundationDB's 10 MB a transaction) fails alone, with that error as its reason:
    the jobs acked with it succeed once, and none of its follow-ups is pushed."""
    q = Queue(fdb_subspace, history=HOUR, max_deliveries=1)
    out = Queue(fdb_subspace["out"])
    values = ["good-0", "huge", "good-1", "good-2"]
    ids = q.push_many(db, values)
    both_ran = threading.Barrier(4, timeout=60)  # the four acks go out together

    def handler(job: Job) -> str:
        if job.value == "huge":
            for _ in range(110):  # 110 x 95 KB: over the 10,000,000 bytes of one commit
                job.then(out, b"x" * 95_000)
        both_ran.wait()
        return str(job.value).upper()

    run_burst(Worker(db, q, handler, concurrency=4, lease_seconds=30))
    for id_, value in zip(ids, values):
        if value != "huge":
            record = q.job(db, id_)
            assert (record.state, record.attempts, record.result) == (
                "succeeded", 1, value.upper()), value
    huge = q.job(db, ids[1])
    assert (huge.state, huge.attempts, huge.error.type) == ("dead", 1, "fdb.impl.FDBError")
    [letter] = q.dead(db)
    assert letter.reason.startswith("FDBError: ") and "byte limit" in letter.reason
    assert out.size(db) == 0


class BadStr(Exception):
    """An exception whose ``__str__`` and ``__repr__`` raise (say, reading an
    attribute its ``__init__`` never set)."""

    def __str__(self) -> str:
        raise AttributeError("'BadStr' object has no attribute 'detail'")

    def __repr__(self) -> str:
        raise AttributeError("'BadStr' object has no attribute 'detail'")


@pytest.mark.parametrize("face", ["sync", "async"])
def test_an_exception_whose_str_raises_still_ends_its_job(db: Any, fdb_subspace: Any,
                                                          face: str) -> None:
    """Before, the worker's settle raised building the error record: the job stayed
    running forever, its lease extended, nothing logged."""
    q = Queue(fdb_subspace, history=HOUR, max_deliveries=1)
    id_ = q.push(db, "bad")

    def handler(job: Job) -> None:
        raise BadStr()

    async def async_handler(job: Job) -> None:
        raise BadStr()

    worker: Any = Worker(db, q, handler, lease_seconds=30, shutdown_timeout=1) \
        if face == "sync" else aio.AsyncWorker(db, q, async_handler, lease_seconds=30,
                                               shutdown_timeout=1)
    run_burst(worker, 30)
    record = q.job(db, id_)
    assert (record.state, record.attempts) == ("dead", 1)
    assert record.error.type.endswith("BadStr") and record.error.message == "<str() failed>"
    assert "raise BadStr()" in record.error.traceback
    assert [d.reason for d in q.dead(db)] == ["BadStr: <str() failed>"]


def test_an_error_message_that_cannot_be_written_is_kept_escaped(db: Any,
                                                                 fdb_subspace: Any) -> None:
    """A lone surrogate in an exception's message: its release used to fail, and the
    job died of an expired lease with no reason."""
    q = Queue(fdb_subspace, history=HOUR, max_deliveries=1)
    id_ = q.push(db, "bad")

    def handler(job: Job) -> None:
        raise ValueError("cannot parse \udc80\udcff")

    run_burst(Worker(db, q, handler, lease_seconds=30))
    record = q.job(db, id_)
    assert (record.state, record.error.message) == ("dead", "cannot parse \\udc80\\udcff")
    assert [d.reason for d in q.dead(db)] == ["ValueError: cannot parse \\udc80\\udcff"]
