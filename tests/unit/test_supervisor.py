"""``fdbrecipes worker --processes`` without a server: what a worker process tells its
supervisor over its pipe, and which jobs of a process that died are charged."""

from __future__ import annotations

import os
from typing import Any, List

import pytest

from fdbrecipes import JobError, Lease
from fdbrecipes.admin.pipe import Heard, HeldJob, PipeTell, identity
from fdbrecipes.admin.supervisor import (
    RESTART_FIRST,
    RESTART_MAX,
    STEADY,
    Restarts,
    Suspects,
    charge,
    past_limit,
)

DIED = JobError("WorkerDied", "the worker process running it died (exit status 3)")


def lease(token: bytes, value: Any = "v", id_: Any = None) -> Lease[Any]:
    return Lease(value, 1, 0, token, id=id_)


def hear(*calls: Any) -> Heard:
    """A Heard fed, through a real pipe, by a PipeTell making ``calls`` ((name,
    arguments) pairs); returned once the pipe closed and everything was read."""
    read, write = os.pipe()
    ended: List[str] = []
    heard = Heard(read, lambda: None, ended.append)
    tell = PipeTell(write)
    for name, *args in calls:
        getattr(tell, name)(*args)
    tell.flush()
    os.close(write)
    heard.finished(30)
    assert not heard.thread.is_alive(), "the pipe was not read to its end"
    return heard


def test_a_supervisor_hears_what_its_worker_holds() -> None:
    a, b, c = lease(b"\x01a"), lease(b"\x02b", "w"), lease(b"\x03c", id_=b"job-7")
    heard = hear(("hello", "host-12-ab01"), ("held", [a, b, c]),
                 ("started", [(a.token, 100.5, 2.0), (b.token, 100.5, None)]),
                 ("returned", b.token), ("ended", c.token), ("alive",))
    assert heard.worker == "host-12-ab01"
    jobs = {job.token: job for job in heard.held()}
    assert set(jobs) == {a.token, b.token}  # c ended
    assert jobs[a.token].running() and jobs[a.token].deadline() == 102.5
    assert not jobs[b.token].running() and jobs[b.token].deadline() is None
    assert jobs[a.token].identity == identity(a) != identity(b)
    assert heard.silent_for() < 30


def test_a_job_is_known_across_its_deliveries_by_its_id_or_its_value() -> None:
    assert identity(lease(b"1", "v")) == identity(lease(b"2", "v"))
    assert identity(lease(b"1", "v")) != identity(lease(b"1", "w"))
    assert identity(lease(b"1", "v", b"id")) == identity(lease(b"2", "w", b"id"))
    assert identity(lease(b"1", "\udc80")) != identity(lease(b"1", "\udc81"))


def held(token: bytes, value: str, running: bool = True) -> HeldJob:
    job = HeldJob(token, identity(lease(token, value)))
    if running:
        job.started_at, job.limit = 1.0, None
    return job


def test_of_a_dead_process_only_the_job_that_killed_it_is_charged() -> None:
    suspects = Suspects()
    poison, waiting = held(b"p", "poison"), held(b"w", "waiting", running=False)
    alone = charge([poison, waiting], suspects, DIED)
    assert alone.counted == [(poison, DIED)] and alone.given_back == [waiting]
    # several ran at its death: none counted the first time
    goods = [held(b"g1", "good-1"), held(b"g2", "good-2")]
    again = held(b"p2", "poison")
    first = charge([held(b"x", "x"), *goods], suspects, DIED)
    assert first.counted == [] and len(first.given_back) == 3
    # ...one that runs at a second death is charged, unless it ended in between
    suspects.ended(goods[1].identity)
    second = charge([again, held(b"g1b", "good-1"), held(b"g2b", "good-2"),
                     held(b"n", "new")], suspects, DIED)
    assert [job.token for job, _ in second.counted] == [b"p2", b"g1b"]
    assert [job.token for job in second.given_back] == [b"g2b", b"n"]


def test_a_job_past_its_limit_is_charged_with_its_limit() -> None:
    late, other = held(b"l", "late"), held(b"o", "other")
    late.limit = 1.5
    charges = past_limit([late], [late, other])
    [(job, error)] = charges.counted
    assert job is late and charges.given_back == [other]
    assert error.reason() == ("TimeLimitExceeded: the job ran past its time limit of 1.5 s; "
                              "its worker process was killed")
    assert past_limit([late], [other]).counted == []  # it ended before the kill


def test_telling_a_supervisor_that_is_gone_raises_nothing() -> None:
    read, write = os.pipe()
    os.close(read)
    tell = PipeTell(write)
    try:
        tell.hello("w")
        tell.held([lease(b"t")])
        assert tell.broken
    finally:
        os.close(write)


@pytest.mark.parametrize("line", [b"s 0g 1 2\n", b"h\n", b"s 01 x -\n", b"\xff\n"])
def test_a_garbled_line_is_ignored(line: bytes) -> None:
    read, write = os.pipe()
    heard = Heard(read, lambda: None, lambda _identity: None)
    os.write(write, b"h 01 abc\n" + line + b"s 01 5.0 -\n")
    os.close(write)
    heard.finished(30)
    [job] = heard.held()
    assert job.started_at == 5.0


def test_a_silent_child_is_killed_before_its_leases_can_expire() -> None:
    from fdbrecipes.admin.supervisor import silence

    for lease in (6.0, 30.0, 300.0):
        # its leases were extended at most a third of a lease before it fell silent
        assert silence(lease) < 2 * lease / 3
    assert silence(30.0) == 19.0 and silence(1.0) == 2.0


def test_a_child_finds_its_pipe_and_hides_it_from_its_own_children(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from fdbrecipes.admin.pipe import PIPE_ENV, pipe_from_env

    read, write = os.pipe()
    try:
        os.set_inheritable(write, True)
        monkeypatch.setenv(PIPE_ENV, str(write))
        tell = pipe_from_env()
        assert tell is not None and tell.fd == write and PIPE_ENV not in os.environ
        assert not os.get_inheritable(write)
        with open(tmp_path / "file", "w") as not_a_pipe:
            monkeypatch.setenv(PIPE_ENV, str(not_a_pipe.fileno()))
            assert pipe_from_env() is None
        monkeypatch.setenv(PIPE_ENV, "x")
        assert pipe_from_env() is None and PIPE_ENV not in os.environ
        assert pipe_from_env() is None
    finally:
        os.close(read)
        os.close(write)


def test_a_slot_whose_child_keeps_dying_quickly_is_started_again_ever_later() -> None:
    restarts = Restarts()
    now = 1000.0
    pauses = []
    for _ in range(10):
        pause = restarts.died(0, 0.5, now)
        pauses.append(pause)
        assert restarts.ready(now) == [] and restarts.next_in(now) == pause
        now += pause
        assert restarts.ready(now) == [0] and restarts.next_in(now) is None
    assert pauses[:3] == [RESTART_FIRST, 2 * RESTART_FIRST, 4 * RESTART_FIRST]
    assert max(pauses) == RESTART_MAX == pauses[-1]
    # another slot waits on its own pause, from the first
    assert restarts.died(1, 0.5, now) == RESTART_FIRST


def test_a_child_that_ran_steadily_is_started_again_at_once_and_its_pause_starts_over() -> None:
    restarts = Restarts()
    assert restarts.died(0, 1.0, 0.0) == RESTART_FIRST
    assert restarts.died(0, 1.0, 10.0) == 2 * RESTART_FIRST
    restarts.ready(100.0)
    assert restarts.died(0, STEADY, 100.0) == 0.0
    assert restarts.next_in(100.0) is None and restarts.ready(100.0) == []
    assert restarts.died(0, 1.0, 200.0) == RESTART_FIRST
