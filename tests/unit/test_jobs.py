"""What a worker decides without a server: backoff delays, outcomes, schedules' slots,
metric names."""

from __future__ import annotations

import random
import re
import statistics

import pytest

from fdbrecipes import Backoff, Discard, Lease, Snooze
from fdbrecipes.jobs import Job, decide
from fdbrecipes.metrics import ITEMS, OLDEST_AGE
from fdbrecipes.prometheus import DURATION, JOBS, WAIT


def job(deliveries: int) -> Job:
    return Job.of(Lease(b"v", deliveries, 0, b"token", visible_since=1_000_000,
                        claimed_at=3_500_000))


def test_full_jitter_stays_in_its_window_and_fills_it() -> None:
    backoff = Backoff(base=1.0, cap=60.0, rng=random.Random(7))
    for n in range(12):
        end = min(60.0, 2.0**n)
        draws = [backoff.delay(n) for _ in range(2_000)]
        assert all(0.0 <= d <= end for d in draws)
        # uniform on [0, end]: mean end/2, standard deviation end/sqrt(12)
        assert abs(statistics.mean(draws) - end / 2) < 0.05 * end
        assert abs(statistics.pstdev(draws) - end / 12**0.5) < 0.05 * end


def test_backoff_is_deterministic_under_a_seeded_rng() -> None:
    first = [Backoff(rng=random.Random(3)).delay(n) for n in range(10)]
    again = [Backoff(rng=random.Random(3)).delay(n) for n in range(10)]
    assert first == again
    assert Backoff(base=2.0, cap=10.0, jitter="none").delay(5) == 10.0


def test_backoff_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Backoff(base=0)
    with pytest.raises(ValueError, match="jitter"):
        Backoff(jitter="half")
    with pytest.raises(TypeError, match="rng"):
        Backoff(rng=3)  # type: ignore[arg-type]


def test_what_becomes_of_a_finished_job() -> None:
    backoff = Backoff(base=1.0, jitter="none")
    assert decide(job(1), None, backoff, 3).outcome == "ok"
    retry = decide(job(1), RuntimeError("boom"), backoff, 3)
    assert (retry.action, retry.outcome, retry.delay, retry.count) == ("release", "retry",
                                                                       2.0, True)
    assert decide(job(3), RuntimeError("boom"), backoff, 3).outcome == "dead"
    assert decide(job(3), RuntimeError("boom"), backoff, None).outcome == "retry"
    snooze = decide(job(1), Snooze(5), backoff, 3)
    assert (snooze.outcome, snooze.delay, snooze.count) == ("snooze", 5.0, False)
    discard = decide(job(1), Discard("bad input"), backoff, 3)
    assert (discard.action, discard.outcome, discard.reason) == ("bury", "discard",
                                                                 "bad input")


def test_a_job_knows_how_long_it_waited() -> None:
    assert job(1).wait_seconds == 2.5


def test_metric_names_follow_prometheus_rules() -> None:
    """Names match Prometheus' grammar, are in the library's namespace, end in the
    base unit where they measure one, and counters end in _total."""
    for name in (ITEMS, OLDEST_AGE, JOBS, DURATION, WAIT):
        assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", name), name
        assert name.startswith("fdbrecipes_") and "__" not in name
    assert JOBS.endswith("_total")
    assert all(n.endswith("_seconds") for n in (OLDEST_AGE, DURATION, WAIT))


def test_a_job_reports_progress_and_follow_ups_and_checks_its_stop() -> None:
    from fdb.subspace_impl import Subspace

    from fdbrecipes import JobCancelled, PriorityQueue, Progress, Queue, TimeLimitExceeded

    j = job(1)
    assert j.reported() == (None, ())
    j.progress(0.25, "a" * 300)
    assert j.reported()[0] == Progress(0.25, "a" * 200)
    for bad in (-0.1, 1.5, True, "half"):
        with pytest.raises(ValueError, match="fraction"):
            j.progress(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="message"):
        j.progress(0.5, 7)  # type: ignore[arg-type]
    plain = Queue(Subspace(("a",)))
    kept = PriorityQueue(Subspace(("b",)), history=60)
    assert j.then(plain, "next") is None
    made = j.then(kept, "later", priority=3, delay=5)
    assert made is not None and len(made) == 32
    assert j.then(plain, "given", id=b"step-2") == b"step-2"
    with pytest.raises(TypeError, match="priority"):
        j.then(plain, "x", priority=1)
    with pytest.raises(ValueError, match="delay"):
        j.then(plain, "x", delay=-1)
    with pytest.raises(TypeError, match="structure"):
        j.then(object(), "x")
    assert [f.value for f in j.reported()[1]] == ["next", "later", "given"]
    j.check()  # not stopped: nothing raised
    assert not j.cancelled
    j.stop(JobCancelled("cancelled"))
    assert j.cancelled
    with pytest.raises(JobCancelled):
        j.check()
    other = job(1)
    other.stop(TimeLimitExceeded("past 1 s"))
    assert not other.cancelled
    with pytest.raises(TimeLimitExceeded):
        other.check()
    assert decide(j, JobCancelled("x"), Backoff(), 3).action == "cancel"
    assert decide(other, TimeLimitExceeded("x"), Backoff(jitter="none"), 1).outcome == "dead"


def test_what_a_job_record_keeps_of_an_error_and_a_result() -> None:
    from fdbrecipes import JobError
    from fdbrecipes._records.history import MAX_RESULT_BYTES, encode_result

    error = JobError.of(KeyError("customer"), "x" * 10_000)
    assert (error.type, error.message) == ("KeyError", "'customer'")
    assert len(error.traceback) == 8_000 and error.reason() == "KeyError: 'customer'"

    class Mine(Exception):
        pass

    mine = JobError.of(Mine("m" * 2_000))
    assert mine.type.endswith(".<locals>.Mine") and len(mine.message) == 1_000
    assert mine.reason().startswith("Mine: mmm") and len(mine.reason()) == 1_000
    assert JobError.of(RuntimeError()).reason() == "RuntimeError"
    assert encode_result(None) == (None, None)
    encoded, none = encode_result({"not": "a value"})
    assert encoded is None and none is not None and none[0] == "fdbrecipes.ResultTooLargeError"
    big, error_ = encode_result("x" * MAX_RESULT_BYTES)
    assert big is None and error_ is not None and "1,000,000" in error_[1]
    fits, ok = encode_result(("row", 7))
    assert fits is not None and ok is None


def test_an_abandoned_handler_thread_is_replaced() -> None:
    import threading

    from fdbrecipes._worker.threads import HandlerThreads

    threads = HandlerThreads(1)
    release = threading.Event()
    stuck = threads.submit(release.wait, 60)
    started = threading.Event()
    waiting = threads.submit(started.set)  # queued behind the stuck call
    assert not started.wait(0.2)  # one thread, and it is busy: a bounded look
    threads.abandon(stuck)
    assert started.wait(30) and waiting.result(30) is None  # a new thread took over
    release.set()
    assert stuck.result(30) is True  # the abandoned call returned; its thread ended
    queued = threads.submit(int, "7")
    threads.abandon(queued)  # cancelled if it has not started
    threads.shutdown()
    assert queued.cancelled() or queued.result(30) == 7


class BadStr(Exception):
    """An exception whose ``__str__`` and ``__repr__`` raise (a custom exception that
    reads an attribute it never set)."""

    def __str__(self) -> str:
        raise AttributeError("no attribute 'detail'")

    def __repr__(self) -> str:
        raise AttributeError("no attribute 'detail'")


def test_whatever_a_handler_raises_makes_a_record_that_can_be_written() -> None:
    import fdb.tuple

    from fdbrecipes import JobError
    from fdbrecipes._worker.running import job_error

    try:
        raise BadStr()
    except BadStr as e:
        broken = job_error(e)
    assert broken.type.endswith("BadStr") and broken.message == "<str() failed>"
    assert broken.reason() == "BadStr: <str() failed>" and "Traceback" in broken.traceback
    lone = job_error(ValueError("bad byte \udc80 in row\n2"))
    assert lone.message == "bad byte \\udc80 in row\n2"
    assert "\\udc80" in lone.traceback
    fdb.tuple.pack(tuple(lone) + tuple(broken))  # what a release writes: it encodes
    assert JobError.of(ValueError("plain")) == ("ValueError", "plain", "")


def test_a_handler_cannot_report_what_its_ack_could_not_write() -> None:
    j = job(1)
    with pytest.raises(ValueError, match="message cannot be tuple-encoded"):
        j.progress(0.5, "row \ud800")
    assert j.reported()[0] is None  # the last good progress, none here
    j.progress(0.5, "x" * 200 + "\ud800")  # past the 200 characters kept: fine
    assert j.reported()[0] is not None and j.reported()[0].message == "x" * 200
    with pytest.raises(ValueError, match="reason cannot be tuple-encoded"):
        Discard("bad \udc80 row")
    from fdbrecipes._values import check_reason, storable

    with pytest.raises(ValueError, match="reason"):
        check_reason("\ud800")
    assert storable("plain é") == "plain é" and storable("a\udc80") == "a\\udc80"
