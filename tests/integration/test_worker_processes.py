"""Worker processes on a real server, driven as an operator would: ``fdbrecipes worker``
(its log, its defaults, ``--processes`` and its supervisor), ``fdbrecipes job``,
``cancel`` and ``workers``, workers SIGKILLed mid-job, and chains of jobs that finish
exactly once while workers are killed at random."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import textwrap
import time
from typing import Any, Dict, Iterator, List

import fdb
import pytest

from fdbrecipes import JobFailedError, Queue
from tests.helpers import eventually, stop

pytestmark = pytest.mark.integration

HANDLERS = textwrap.dedent(
    """
    import os, sys, threading, time
    import fdb
    from fdbrecipes import Discard, Queue

    PREFIX = bytes.fromhex(os.environ["TEST_PREFIX"])
    steps = Queue(fdb.Subspace(rawPrefix=PREFIX), history=3600)
    done = Queue(fdb.Subspace(rawPrefix=PREFIX + b"done"))
    never = threading.Event()
    here = set()  # the jobs whose handler runs in this process
    here_lock = threading.Lock()
    FORGED = "1999-01-01 00:00:00,000 INFO fdbrecipes.worker[1]: forged line"

    def until(done, seconds):
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline:
            never.wait(0.01)

    def beside():
        with here_lock:
            return len(here) - 1

    def alone_for(seconds):
        since = time.monotonic()
        while time.monotonic() - since < seconds:
            if beside():
                since = time.monotonic()
            never.wait(0.01)

    def crash_or_good(value):
        # "crash" kills its process: the first time once two good jobs run beside it,
        # later once every good job ran and it has run alone for a while; a good job's
        # first run lasts 5 s, the next ones none
        with here_lock:
            here.add(value)
        try:
            if value == "crash":
                if os.path.exists("crashed-once"):
                    until(lambda: len([f for f in os.listdir() if f.startswith("done-")])
                          == 6, 60)
                    alone_for(0.3)
                else:
                    until(lambda: beside() >= 2, 30)
                    open("crashed-once", "w").close()
                os._exit(3)
            if not os.path.exists("ran-" + value):
                open("ran-" + value, "w").close()
                never.wait(5)
            open("done-" + value, "w").close()
            return value.upper()
        finally:
            with here_lock:
                here.discard(value)

    def handle(job):
        value = job.value
        if value == "fail":
            raise ValueError("this job always fails")
        if value == "crash" or str(value).startswith("good-"):
            return crash_or_good(value)
        if value == "forge":
            raise ValueError("bad row\\n" + FORGED)
        if value == "discard":
            raise Discard("bad row\\r" + FORGED)
        if value == "stuck":
            return sum(range(10**14))  # C code holding the GIL: the process stops
        if value == "block":
            while True:  # long work, looking between steps
                job.check()
                never.wait(0.05)
        if value == "slow":
            never.wait(1.5)
            return "slow done"
        if isinstance(value, tuple):  # a chain's step
            chain, step = value
            if step < 3:
                job.then(steps, (chain, step + 1))
            else:
                job.then(done, chain)
            return step
        return value.upper()
    """
)


@pytest.fixture
def workdir(tmp_path: Any, fdb_subspace: Any) -> Iterator[Any]:
    (tmp_path / "handlers.py").write_text(HANDLERS)
    yield tmp_path


def cli(fdb_cluster_file: str, subspace: Any, *args: str) -> List[str]:
    place = repr(fdb.tuple.unpack(subspace.key()))
    return [sys.executable, "-m", "fdbrecipes", *args, "--tuple", place,
            "--cluster-file", fdb_cluster_file]


def env(subspace: Any) -> Dict[str, str]:
    return {**os.environ, "TEST_PREFIX": subspace.key().hex()}


def run(command: List[str], subspace: Any, workdir: Any) -> Any:
    return subprocess.run(command, capture_output=True, text=True, timeout=120,
                          cwd=workdir, env=env(subspace))


def start(command: List[str], subspace: Any, workdir: Any) -> Any:
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=workdir, env=env(subspace))


def supervised(fdb_cluster_file: str, subspace: Any, workdir: Any, concurrency: int,
               *options: str) -> Any:
    """``fdbrecipes worker --processes 2`` of the test's handlers, with job records."""
    return start(cli(fdb_cluster_file, subspace, "worker", "handlers:handle", "--processes",
                     "2", "--concurrency", str(concurrency), "--history", "3600", *options),
                 subspace, workdir)


def test_the_cli_worker_logs_and_serves_a_new_queue(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, workdir: Any) -> None:
    # A new place: no --kind needed, and --burst finds nothing to do.
    first = run(cli(fdb_cluster_file, fdb_subspace, "worker", "handlers:handle", "--burst"),
                fdb_subspace, workdir)
    assert first.returncode == 0, first.stderr
    assert "fdbrecipes worker: queue at" in first.stderr and "max deliveries 5" in first.stderr
    q = Queue(fdb_subspace, history=3600)
    fails, works = q.push(db, "fail"), q.push(db, "works")
    worker = start(cli(fdb_cluster_file, fdb_subspace, "worker", "handlers:handle",
                       "--history", "3600", "--max-deliveries", "2", "--lease", "5",
                       "--log-format", "json"), fdb_subspace, workdir)
    try:
        assert q.result(db, works, timeout=60) == "WORKS"
        with pytest.raises(JobFailedError, match="always fails"):
            q.result(db, fails, timeout=60)
    finally:
        err = stop(worker)
    lines = [json.loads(line) for line in err.splitlines()]
    messages = [line["message"] for line in lines]
    assert any(m.startswith("worker ") and "started" in m for m in messages)
    failures = [line for line in lines if "failed (delivery" in line["message"]]
    assert [f["level"] for f in failures] == ["ERROR", "ERROR"]
    assert "ValueError: this job always fails" in failures[-1]["traceback"]
    assert "dead letter" in failures[-1]["message"]
    dead = run(cli(fdb_cluster_file, fdb_subspace, "dead", "--json"), fdb_subspace, workdir)
    assert [d["reason"] for d in json.loads(dead.stdout)["dead_letters"]] == [
        "ValueError: this job always fails"]
    shown = run(cli(fdb_cluster_file, fdb_subspace, "job", fails.decode(), "--json"),
                fdb_subspace, workdir)
    record = json.loads(shown.stdout)["job"]
    assert (record["state"], record["attempts"]) == ("dead", 2)
    assert "raise ValueError" in record["error"]["traceback"]
    missing = run(cli(fdb_cluster_file, fdb_subspace, "job", "nope"), fdb_subspace, workdir)
    assert missing.returncode == 1 and "no job 'nope'" in missing.stderr


def test_operators_see_cancel_quiet_and_stop_a_cli_worker(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, workdir: Any) -> None:
    q = Queue(fdb_subspace, history=3600)
    blocked = q.push(db, "block")
    worker = start(cli(fdb_cluster_file, fdb_subspace, "worker", "handlers:handle",
                       "--history", "3600", "--lease", "3"), fdb_subspace, workdir)
    try:
        eventually(lambda: q.job(db, blocked).state == "running", 60, "the job runs")

        def listed() -> Any:
            found = json.loads(run(cli(fdb_cluster_file, fdb_subspace, "workers", "--json"),
                                   fdb_subspace, workdir).stdout)["workers"]
            return found if found and found[0]["running"] else None
        found = eventually(listed, 30, "the worker lists its job")
        assert len(found) == 1 and found[0]["pid"] == worker.pid
        worker_id = found[0]["id"]
        assert [j["id"] for j in found[0]["running"]] == [blocked.decode()]
        assert q.job(db, blocked).worker == worker_id
        said = run(cli(fdb_cluster_file, fdb_subspace, "cancel", blocked.decode()),
                   fdb_subspace, workdir)
        assert said.returncode == 2 and "--yes" in said.stderr
        said = run(cli(fdb_cluster_file, fdb_subspace, "cancel", blocked.decode(), "--yes",
                       "--json"), fdb_subspace, workdir)
        assert json.loads(said.stdout)["answer"] == "cancelling"
        eventually(lambda: q.job(db, blocked).state == "cancelled", 30, "cancelled")
        quiet = run(cli(fdb_cluster_file, fdb_subspace, "workers", "--quiet", worker_id),
                    fdb_subspace, workdir)
        assert quiet.returncode == 0, quiet.stderr
        eventually(lambda: [w for w in q.workers(db) if w.state == "quiet"], 30, "quiet")
        waiting = q.push(db, "works")
        stopped = run(cli(fdb_cluster_file, fdb_subspace, "workers", "--stop", worker_id),
                      fdb_subspace, workdir)
        assert stopped.returncode == 0, stopped.stderr
        assert worker.wait(60) == 0
    finally:
        err = stop(worker)
    assert q.job(db, waiting).state == "pending"  # the quiet worker took nothing more
    assert q.workers(db) == []
    assert "an operator asked it to stop" in err
    gone = run(cli(fdb_cluster_file, fdb_subspace, "workers", "--stop", worker_id),
               fdb_subspace, workdir)
    assert gone.returncode == 1 and "no live worker" in gone.stderr


def test_a_sigkilled_worker_disappears_and_its_job_runs_again(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, workdir: Any) -> None:
    q = Queue(fdb_subspace, history=3600)
    slow = q.push(db, "slow")
    lease = 3.0
    worker = start(cli(fdb_cluster_file, fdb_subspace, "worker", "handlers:handle",
                       "--history", "3600", "--lease", str(lease)), fdb_subspace, workdir)
    try:
        eventually(lambda: q.job(db, slow).state == "running", 60, "the job runs")
        eventually(lambda: q.workers(db), 30, "the worker's record")
        worker.kill()
        worker.wait(30)
        killed_at = time.monotonic()
        # Never succeeded: running until its lease ends, then retrying.
        states = set()
        while q.workers(db):
            states.add(q.job(db, slow).state)
            assert time.monotonic() - killed_at < lease + 2, "the dead worker still listed"
        record = eventually(lambda: q.job(db, slow) if q.job(db, slow).state == "retrying"
                            else None, 30, "retrying once the lease ended")
        states.add(record.state)
        assert states <= {"running", "retrying"} and record.attempts == 1
    finally:
        worker.kill()
        worker.communicate()
    again = start(cli(fdb_cluster_file, fdb_subspace, "worker", "handlers:handle",
                      "--history", "3600", "--lease", str(lease)), fdb_subspace, workdir)
    try:
        assert q.result(db, slow, timeout=60) == "slow done"
    finally:
        stop(again)
    record = q.job(db, slow)
    assert (record.state, record.attempts, record.error.type) == ("succeeded", 2,
                                                                  "LeaseExpired")


def test_processes_kill_a_child_stuck_in_c_and_drain_on_sigterm(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, workdir: Any) -> None:
    q = Queue(fdb_subspace, history=3600)
    stuck = q.push(db, "stuck")
    others = q.push_many(db, [f"job-{i}" for i in range(30)])
    supervisor = supervised(fdb_cluster_file, fdb_subspace, workdir, 1, "--time-limit", "1",
                            "--lease", "20", "--max-deliveries", "1")
    try:
        assert [q.result(db, id_, timeout=120) for id_ in others] == [
            f"JOB-{i}" for i in range(30)]  # the other child served them meanwhile
        with pytest.raises(JobFailedError, match="time limit of 1 s"):
            q.result(db, stuck, timeout=120)
        # killed at its limit (+ the 1 s the child's own limit gets), not heartbeats
        # later; its record and dead letter name the limit, as a thread's would
        record = q.job(db, stuck)
        assert record.finished_at - record.started_at < 1 + 1 + 2.5, record
        assert record.error.type == "fdbrecipes.jobs.TimeLimitExceeded"
        assert [d.reason for d in q.dead(db)] == [
            "TimeLimitExceeded: the job ran past its time limit of 1 s; its worker process "
            "was killed"]
        assert exited(int(record.worker.split("-")[-2]))  # its process is gone
        pids = eventually(lambda: {w.pid for w in q.workers(db)} if len(q.workers(db)) == 2
                          else None, 60, "two children again (the killed one restarted)")
        slow = q.push_many(db, ["slow"] * 4, time_limit=60)  # their own limit
        eventually(lambda: [q.job(db, id_).state for id_ in slow].count("running") == 2,
                   60, "two slow jobs run, one in each child")
        signalled = time.monotonic()
        err = stop(supervisor, 60)
        took = time.monotonic() - signalled
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
    assert supervisor.returncode == 0, err
    assert "killing worker process" in err and "was killed; started again" in err
    assert took < 25 + 15, f"the supervisor took {took:.0f} s to stop"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    # Drained: the slow jobs finished (or were given back), nothing is in flight.
    assert q.stats(db).in_flight == 0
    assert {q.job(db, id_).state for id_ in slow} <= {"succeeded", "pending"}
    assert q.workers(db) == []


def test_a_crashed_child_charges_the_job_that_killed_it_only(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, workdir: Any) -> None:
    """A handler that kills its process (os._exit: think of a segfaulting C extension)
    beside good jobs: the supervisor gives the good ones back uncounted at once, and
    the crashing job dies of its crashes with their reason."""
    q = Queue(fdb_subspace, history=3600)
    crash = q.push(db, "crash")
    goods = q.push_many(db, [f"good-{i}" for i in range(6)])
    supervisor = supervised(fdb_cluster_file, fdb_subspace, workdir, 4, "--lease", "10",
                            "--max-deliveries", "3")
    try:
        with pytest.raises(JobFailedError, match="died"):
            q.result(db, crash, timeout=120)
        assert [q.result(db, id_, timeout=120) for id_ in goods] == [
            f"GOOD-{i}" for i in range(6)]
    finally:
        err = stop(supervisor)
    for id_ in goods:
        record = q.job(db, id_)
        assert (record.state, record.attempts) == ("succeeded", 1), record  # never charged
    record = q.job(db, crash)
    assert (record.state, record.attempts, record.error.type) == ("dead", 3, "WorkerDied")
    assert [d.reason for d in q.dead(db)] == [
        "WorkerDied: the worker process running it died (exit status 3)"]
    deaths = re.findall(r"died \(exit status 3\): (\d+) of its jobs given back, (\d+) "
                        r"counted", err)
    # the first death: the crash and two good jobs or more ran, none was counted;
    # the next ones: it ran alone, and was counted
    assert int(deaths[0][0]) >= 3 and deaths[0][1] == "0", err
    assert [counted for _, counted in deaths[1:]] == ["1", "1", "1"], err


def test_a_child_silent_while_it_lives_is_killed_before_its_leases_expire(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, workdir: Any) -> None:
    """A handler holding the GIL with no time limit stops its process's heartbeats:
    the supervisor, which hears nothing more on the pipe, kills it two thirds of a
    lease (- 1 s) later, before its lease expires, whatever other workers' heartbeats
    did to its record, and the job dies of it with a reason."""
    q = Queue(fdb_subspace, history=3600)
    stuck = q.push(db, "stuck")
    supervisor = supervised(fdb_cluster_file, fdb_subspace, workdir, 1, "--lease", "6",
                            "--max-deliveries", "1")
    try:
        with pytest.raises(JobFailedError, match="stopped answering"):
            q.result(db, stuck, timeout=120)
    finally:
        err = stop(supervisor)
    record = q.job(db, stuck)
    assert record.error.type == "WorkerDied" and record.attempts == 1
    assert q.dead(db)[0].reason.startswith("WorkerDied: the worker process running it "
                                           "stopped answering for ")
    assert exited(int(record.worker.split("-")[-2]))
    assert "killing worker process" in err and "(stuck)" in err


def test_a_job_cannot_forge_lines_of_the_worker_log(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, workdir: Any) -> None:
    """A multi-line exception message and a Discard reason with a carriage return:
    in the text log, no line that starts a record comes from them."""
    q = Queue(fdb_subspace, history=3600)
    q.push_many(db, ["forge", "discard"])
    done = run(cli(fdb_cluster_file, fdb_subspace, "worker", "handlers:handle", "--burst",
                   "--history", "3600", "--max-deliveries", "1"), fdb_subspace, workdir)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert not [line for line in lines if line.startswith("1999-01-01")], done.stderr
    assert any("ValueError: bad row" in line and line.startswith("  ") for line in lines)
    assert any("discarded: 'bad row\\r1999-01-01" in line for line in lines), done.stderr
    assert len(q.dead(db)) == 2


def exited(pid: int) -> bool:
    """Whether process ``pid`` has exited (gone, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(") ")[2].startswith("Z")
    except FileNotFoundError:
        return True
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def test_children_stop_when_their_supervisor_is_killed(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, workdir: Any) -> None:
    q = Queue(fdb_subspace, history=3600)
    supervisor = supervised(fdb_cluster_file, fdb_subspace, workdir, 1)
    try:
        pids = eventually(lambda: {w.pid for w in q.workers(db)} if len(q.workers(db)) == 2
                          else None, 60, "two children running")
        supervisor.kill()
        # The children hold the supervisor's stderr: it ends when both have exited.
        _, err = supervisor.communicate(timeout=60)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
    assert err.count("is gone: this worker process stops") == 2, err
    eventually(lambda: all(exited(pid) for pid in pids), 30, "both children exited")
    assert q.workers(db) == []  # each drained and left its record


def test_chains_finish_exactly_once_while_workers_are_killed(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, workdir: Any) -> None:
    chains = 1_000
    steps = Queue(fdb_subspace, history=3600)
    done = Queue(fdb.Subspace(rawPrefix=fdb_subspace.key() + b"done"))
    for start_at in range(0, chains, 500):
        steps.push_many(db, [(c, 1) for c in range(start_at, start_at + 500)])
    command = cli(fdb_cluster_file, fdb_subspace, "worker", "handlers:handle", "--history",
                  "3600", "--lease", "2", "--concurrency", "16", "--max-deliveries", "100",
                  "--log-level", "WARNING")
    workers = [start(command, fdb_subspace, workdir) for _ in range(3)]
    rng = random.Random(29)
    kills = 0
    deadline = time.monotonic() + 600
    try:
        while done.size(db) < chains:
            assert time.monotonic() < deadline, f"{done.size(db)} of {chains} chains done"
            time.sleep(rng.uniform(0.3, 1.5))  # the fault schedule: when the next kill comes
            i = rng.randrange(len(workers))
            workers[i].kill()
            workers[i].communicate()
            kills += 1
            workers[i] = start(command, fdb_subspace, workdir)
    finally:
        for worker in workers:
            worker.kill()
            worker.communicate()
    finished = done.pop_many(db, chains + 10)
    assert sorted(finished) == list(range(chains)), "a chain finished twice, or not at all"
    assert kills >= 3 and steps.size(db) == 0
