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
