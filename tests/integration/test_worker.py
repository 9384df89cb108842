"""The Worker on a real server: shutdown that strands nothing, heartbeats, retries and
dead letters, events once per job, periodic jobs without a leader, metrics over HTTP,
the async twin and the command line."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections import Counter
from typing import Any, List, Optional

import fdb
import pytest

from fdbrecipes import (
    Backoff,
    Discard,
    Job,
    JobFinished,
    JobStarted,
    PriorityQueue,
    Queue,
    Schedule,
    Snooze,
    Worker,
    aio,
)
from fdbrecipes.prometheus import serve
from fdbrecipes.testing.hooks import hooks

pytestmark = pytest.mark.integration


class Events:
    """A worker's on_event sink that records every event (thread-safe), and lets a
    test wait until a count is reached."""

    def __init__(self) -> None:
        self.seen: List[Any] = []
        self.changed = threading.Condition()

    def __call__(self, event: Any) -> None:
        with self.changed:
            self.seen.append(event)
            self.changed.notify_all()

    def finished(self) -> List[JobFinished]:
        with self.changed:
            return [e for e in self.seen if isinstance(e, JobFinished)]

    def started(self) -> List[JobStarted]:
        with self.changed:
            return [e for e in self.seen if isinstance(e, JobStarted)]

    def wait_finished(self, n: int, timeout: float = 60) -> None:
        with self.changed:
            assert self.changed.wait_for(
                lambda: sum(isinstance(e, JobFinished) for e in self.seen) >= n, timeout), \
                f"only {len(self.finished())} of {n} jobs finished"

    def outcomes(self) -> Counter[str]:
        return Counter(e.outcome for e in self.finished())


def test_jobs_retry_with_backoff_and_die_after_max_deliveries(db: Any, fdb_subspace: Any) -> None:
    """200 jobs, 10% always failing, max_deliveries=3: every job ends acked or dead,
    each started job finishes exactly once, and the counts are exact."""
    q = Queue(fdb_subspace, max_deliveries=3)
    q.push_many(db, range(200))
    failing = set(range(0, 200, 10))
    events = Events()

    def handler(job: Job) -> None:
        if job.value in failing:
            raise RuntimeError(f"job {job.value} fails")

    with Worker(db, q, handler, concurrency=8, lease_seconds=30,
                backoff=Backoff(base=0.01, cap=0.05), on_event=events):
        events.wait_finished(180 + 3 * 20)
    assert events.outcomes() == {"ok": 180, "retry": 40, "dead": 20}
    started = Counter(e.job.lease.token for e in events.started())
    finished = Counter(e.job.lease.token for e in events.finished())
    assert started == finished and set(started.values()) == {1}
    dead = q.dead(db)
    assert sorted(d.value for d in dead) == sorted(failing)  # type: ignore[type-var]
    assert {d.deliveries for d in dead} == {3}
    assert q.stats(db) == (0, 0, 0, 20, None)


def test_snooze_and_discard(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, max_deliveries=5)
    q.push_many(db, ["snooze", "discard", "fine"])
    events = Events()
    snoozed = threading.Event()

    def handler(job: Job) -> None:
        if job.value == "snooze" and not snoozed.is_set():
            snoozed.set()
            raise Snooze(0.2)
        if job.value == "discard":
            raise Discard("cannot be done")

    with Worker(db, q, handler, on_event=events):
        events.wait_finished(4)
    assert events.outcomes() == {"ok": 2, "snooze": 1, "discard": 1}
    again = [e.job for e in events.finished() if e.job.value == "snooze" and e.outcome == "ok"]
    assert again[0].deliveries == 1  # a snooze counts no delivery
    [letter] = q.dead(db)
    assert (letter.value, letter.reason, letter.deliveries) == ("discard", "cannot be done", 1)


class CountingOps:
    """A Queue's operations counting the heartbeats (extend_many calls) a worker sends:
    a structure of the test's own, served through the documented protocol
    (:class:`fdbrecipes.protocol.Workable`)."""

    def __init__(self, ops: Any) -> None:
        self.inner = ops
        self.beats: List[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def extend_many(self, tr: Any, leases: Any, seconds: float) -> Any:
        leases = list(leases)
        self.beats.append(len(leases))
        return self.inner.extend_many(tr, leases, seconds)


class Counting:
    """A structure whose operations are those of ``queue``, counted."""

    def __init__(self, queue: Queue) -> None:
        self.ops = CountingOps(queue.ops)


def test_a_heartbeat_keeps_50_one_second_leases_through_3_second_jobs(
        db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, range(50))
    counted = Counting(q)
    events = Events()
    all_started = threading.Barrier(50)

    def handler(job: Job) -> None:
        all_started.wait(30)
        time.sleep(3)  # the work itself: longer than the lease

    with Worker(db, counted, handler, concurrency=50, lease_seconds=1, on_event=events):
        events.wait_finished(50)
    assert events.outcomes() == {"ok": 50}
    assert all(e.job.deliveries == 1 for e in events.finished())
    beats = counted.ops.beats
    assert len(beats) >= 6 and max(beats) == 50  # all 50 in one transaction per beat


WORKER_PROCESS = textwrap.dedent(
    """
    import sys, threading
    import fdb
    fdb.api_version(int(sys.argv[3]))
    from fdbrecipes import Queue, Worker

    db = fdb.open(sys.argv[1])
    q = Queue(fdb.Subspace(rawPrefix=bytes.fromhex(sys.argv[2])))

    printing = threading.Lock()

    def handler(job):
        with printing:  # one whole line per job: handlers run on 8 threads
            print("started", job.value, flush=True)
        if job.value.startswith("slow"):
            threading.Event().wait()  # never returns by itself

    Worker(db, q, handler, concurrency=8, lease_seconds=float(sys.argv[4]),
           shutdown_timeout=2).run()
    print("stopped", flush=True)
    """
)


def start_worker(tmp_path: Any, cluster_file: str, subspace: Any, lease: float) -> Any:
    script = tmp_path / "worker.py"
    script.write_text(WORKER_PROCESS)
    return subprocess.Popen(
        [sys.executable, str(script), cluster_file, subspace.key().hex(),
         str(fdb.get_api_version()), str(lease)],
        stdout=subprocess.PIPE, text=True, env={**os.environ})


def read_started(child: Any, n: int, timeout: float = 120) -> List[str]:
    """The values of the first ``n`` "started" lines; the worker is killed (and the
    test fails) if they do not come within ``timeout`` seconds."""
    started: List[str] = []
    deadline = threading.Timer(timeout, child.kill)
    deadline.start()
    try:
        while len(started) < n:
            line = child.stdout.readline().split()
            assert line, f"the worker exited (or was killed) after {started}"
            assert len(line) == 2, f"a garbled line: {line}"
            if line[0] == "started":
                started.append(line[1])
    finally:
        deadline.cancel()
    return started


def test_sigterm_gives_back_running_jobs_and_exits_in_time(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, tmp_path: Any) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, [f"slow-{i}" for i in range(4)] + [f"fast-{i}" for i in range(6)])
    child = start_worker(tmp_path, fdb_cluster_file, fdb_subspace, 60)
    try:
        started = read_started(child, 10)  # 6 fast ones done, 4 slow ones running
        assert sorted(v for v in started if v.startswith("slow")) == [f"slow-{i}"
                                                                      for i in range(4)]
        signalled = time.monotonic()
        child.send_signal(signal.SIGTERM)
        assert child.wait(30) == 0
        took = time.monotonic() - signalled
    finally:
        if child.poll() is None:
            child.kill()
    assert took < 2 + 3, f"the worker took {took:.1f} s to stop"
    assert child.stdout.read().split()[-1] == "stopped"
    # Given back at once, not after the 60-second lease, with no delivery counted.
    stats = q.stats(db)
    assert (stats.visible, stats.in_flight) == (4, 0)
    leases = q.claim_many(db, 10, 60)
    assert sorted(lease.value for lease in leases) == [f"slow-{i}" for i in range(4)]  # type: ignore[type-var]
    assert {lease.deliveries for lease in leases} == {1}


def test_a_killed_workers_leases_come_back_after_expiry(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, tmp_path: Any) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, ["slow-a", "slow-b"])
    child = start_worker(tmp_path, fdb_cluster_file, fdb_subspace, 2)
    try:
        read_started(child, 2)
        child.kill()
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
    assert q.stats(db).in_flight == 2
    back = [q.claim_wait(db, 60, timeout=30) for _ in range(2)]
    assert sorted(lease.value for lease in back if lease) == ["slow-a", "slow-b"]  # type: ignore[type-var]
    assert {lease.deliveries for lease in back if lease} == {2}


def record_blocks(structure: Any, n: int, waited: Any) -> List[Optional[float]]:
    """The timeouts the waits on ``structure`` block with (the documented testing
    hook); ``waited.set()`` once there were ``n``."""
    timeouts: List[Optional[float]] = []

    def blocked(timeout: Optional[float]) -> None:
        timeouts.append(timeout)
        if len(timeouts) >= n:
            waited.set()

    hooks(structure).on_block = blocked
    return timeouts


def test_an_idle_worker_waits_on_the_watch_without_spinning(
        db: Any, fdb_subspace: Any) -> None:
    """With nothing to do and no schedules, a worker blocks on the watch for up to a
    second at a time (it once waited with timeout 0: a loop burning a core), and
    stopping it ends that wait at once."""
    q = Queue(fdb_subspace)
    waited = threading.Event()
    timeouts = record_blocks(q, 2, waited)
    worker = Worker(db, q, handler=lambda job: None)
    with worker:
        assert waited.wait(60)
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 0.5  # not the rest of a one-second wait
    assert len(timeouts) >= 2 and all(t is not None and t > 0.5 for t in timeouts)


def test_an_idle_async_worker_waits_on_the_watch_without_spinning(
        db: Any, fdb_subspace: Any) -> None:
    async def handler(job: Job) -> None:
        pass

    async def main() -> List[Optional[float]]:
        waited = asyncio.Event()
        q = aio.AsyncQueue(fdb_subspace)
        timeouts = record_blocks(q, 2, waited)
        async with aio.AsyncWorker(db, q, handler):
            await asyncio.wait_for(waited.wait(), 60)
        return timeouts

    timeouts = asyncio.run(main())
    assert all(t is not None and t > 0.5 for t in timeouts)


def test_four_workers_enqueue_each_slot_of_a_schedule_once(db: Any, fdb_subspace: Any) -> None:
    """Ten slots, half a second apart, then one far away: every one of the four
    workers pushes each slot's job; each ran exactly once."""
    start = time.time() + 0.5
    slots = [start + 0.5 * i for i in range(10)]
    far = start + 10_000  # the same far slot for every worker

    def next_time(after: float) -> float:
        return next((s for s in slots if s > after), far)

    q = Queue(fdb_subspace, id_retention=50_000)
    schedule = Schedule(q, "tick", at=next_time, value=b"tick")
    events = Events()
    workers = [Worker(db, q, lambda job: None, schedules=[schedule], on_event=events)
               for _ in range(4)]
    for w in workers:
        w.__enter__()
    try:
        events.wait_finished(10, timeout=60)
    finally:
        for w in workers:
            w.__exit__(None, None, None)
    assert events.outcomes() == {"ok": 10}
    stats = q.stats(db)  # no second job of a slot waiting or given back
    assert (stats.visible, stats.in_flight) == (0, 0)
    # delayed: at most the far slot's one job (pushed once its slot follows one begun)
    assert [d.value for d in q.delayed(db)] in ([], [b"tick"])


def test_a_schedule_needs_a_retention_of_a_period(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, id_retention=10)
    with pytest.raises(ValueError, match="id_retention"):
        Worker(db, q, lambda job: None, schedules=[Schedule(q, "hourly", every=3600)])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_prometheus_endpoint_is_scraped_over_http(db: Any, fdb_subspace: Any) -> None:
    pytest.importorskip("prometheus_client")
    q = Queue(fdb_subspace)
    q.push_many(db, [1, 2, 3])
    q.claim(db, 60)
    port = free_port()
    server, thread = serve(db, {"jobs": q}, port)
    try:
        assert server.server_address[0] == "127.0.0.1"  # this machine only by default
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)
    text = body.decode()
    assert 'fdbrecipes_queue_items{queue="jobs",state="visible"} 2.0' in text
    assert 'fdbrecipes_queue_items{queue="jobs",state="in_flight"} 1.0' in text
    assert "fdbrecipes_queue_oldest_item_age_seconds{queue=\"jobs\"}" in text


def test_the_async_worker(db: Any, fdb_subspace: Any) -> None:
    q = aio.AsyncQueue(fdb_subspace)
    events = Events()

    async def handler(job: Job) -> None:
        await asyncio.sleep(0.01)  # the work itself
        if job.value == 3:
            raise Discard("three")

    async def main() -> None:
        await q.push_many(db, range(10))
        await q.push(db, "later", delay=3600)
        await aio.AsyncWorker(db, q, handler, concurrency=4, on_event=events).run(burst=True)

    asyncio.run(main())  # a burst run returns once nothing is visible nor running
    assert events.outcomes() == {"ok": 9, "discard": 1}
    assert Queue(fdb_subspace).stats(db)[:4] == (0, 1, 0, 1)  # the delayed item stays


@pytest.mark.parametrize("concurrency", [32, 1_000])
def test_a_wide_worker_claims_on_after_it_learnt_to_hold_jobs_ahead(
        db: Any, fdb_subspace: Any, concurrency: int) -> None:
    """A worker of many slots claims for its slots and the jobs it holds ahead, in
    blocks drawn among as many as it has slots: its claims stay within the spread a
    claim accepts.  (Its claims once asked for a spread of 17,408 after its first
    jobs ran, were refused, and it claimed nothing more: the follow-ups of its first
    job waited for ever.)"""
    q = Queue(fdb_subspace)
    events = Events()

    def handler(job: Job) -> None:
        if job.value == "root":
            for i in range(3):
                job.then(q, i)

    q.push(db, "root")
    worker = Worker(db, q, handler, concurrency=concurrency, on_event=events)
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        events.wait_finished(4, timeout=30)
        q.push_many(db, range(3, 203))
        events.wait_finished(204, timeout=60)
    finally:
        worker.stop()
        runner.join(60)
    assert not runner.is_alive()
    assert sorted(e.job.value for e in events.finished() if e.job.value != "root") == \
        list(range(203))
    assert events.outcomes() == {"ok": 204}


def test_a_burst_run_drains_what_is_visible_and_returns(db: Any, fdb_subspace: Any) -> None:
    """run(burst=True) returns once a fetch finds nothing visible and no handler runs:
    every visible job ran once, a retry delayed past that point and a delayed push stay
    queued, nothing is in flight."""
    q = Queue(fdb_subspace)
    q.push_many(db, range(20))
    q.push(db, "later", delay=3600)
    events = Events()

    def handler(job: Job) -> None:
        if job.value == 7:
            raise Snooze(3600)

    Worker(db, q, handler, concurrency=4, on_event=events).run(burst=True)
    assert events.outcomes() == {"ok": 19, "snooze": 1}
    assert sorted(e.job.value for e in events.finished()) == list(range(20))
    assert q.stats(db)[:4] == (0, 2, 0, 0)
    with pytest.raises(TypeError, match="burst"):
        Worker(db, q, handler).run(burst=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("end", ["min", "max"])
def test_one_slot_runs_jobs_in_order_at_either_end(db: Any, fdb_subspace: Any,
                                                  end: str) -> None:
    """A worker of one slot claims in strict order (its claims draw among one block,
    however many it claims ahead): a Queue's jobs oldest first, a PriorityQueue's at
    the MAX end highest priority first."""
    events = Events()
    if end == "min":
        structure: Any = Queue(fdb_subspace)
        structure.push_many(db, range(60))
        expected = list(range(60))
    else:
        structure = PriorityQueue(fdb_subspace)
        structure.push_many(db, [(i, i % 7) for i in range(60)])
        expected = [v for _, v in sorted(((-(i % 7), i), i) for i in range(60))]
    Worker(db, structure, noop, concurrency=1, on_event=events, end=end).run(burst=True)
    assert [e.job.value for e in events.started()] == expected


def noop(job: Job) -> None:
    """A handler that does nothing."""


def test_the_worker_command_with_burst_exits_when_done(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, tmp_path: Any) -> None:
    (tmp_path / "burst_jobs_for_test.py").write_text("def handle(job):\n    pass\n")
    q = Queue(fdb_subspace)
    q.push_many(db, ["a", "b", "c"])
    done = subprocess.run(
        [sys.executable, "-m", "fdbrecipes", "worker", "burst_jobs_for_test:handle",
         "--tuple", repr(fdb.tuple.unpack(fdb_subspace.key())), "--kind", "queue",
         "--cluster-file", fdb_cluster_file, "--burst"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert q.stats(db)[:3] == (0, 0, 0)


def test_the_worker_command(db: Any, fdb_subspace: Any, fdb_cluster_file: str,
                            tmp_path: Any) -> None:
    (tmp_path / "jobs_for_test.py").write_text(textwrap.dedent(
        """
        import threading

        printing = threading.Lock()

        def handle(job):
            with printing:  # one whole line per job: handlers run on 8 threads
                print("done", job.value, flush=True)
        """))
    q = Queue(fdb_subspace)
    q.push_many(db, ["a", "b", "c"])
    child = subprocess.Popen(
        [sys.executable, "-m", "fdbrecipes", "worker", "jobs_for_test:handle",
         "--tuple", repr(fdb.tuple.unpack(fdb_subspace.key())), "--kind", "queue",
         "--cluster-file", fdb_cluster_file],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert child.stdout is not None
        deadline = threading.Timer(120, child.kill)  # a hang fails the test, in time
        deadline.start()
        try:
            done = sorted(child.stdout.readline().split()[1] for _ in range(3))
        finally:
            deadline.cancel()
        child.send_signal(signal.SIGTERM)
        assert child.wait(30) == 0
    finally:
        if child.poll() is None:
            child.kill()
    assert done == ["a", "b", "c"]
    assert q.size(db) == 0
