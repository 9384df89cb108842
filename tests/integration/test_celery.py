"""Celery on the fdbrecipes transport and result backend, with real ``celery worker``
processes on a real server: results, retries, chains, groups, chords, large results,
ETA, priorities, remote control and events; a worker SIGKILLed in the middle of an
``acks_late`` task; workers SIGKILLed at random under load; a task whose ETA lies
far past the lease (kombu#337: on Redis it runs more than once); and messages that are
not kombu messages, claimed with good tasks (dead at once, the worker runs on).

Each test has its own directory (removed afterwards) and its own worker processes,
killed when it ends; every wait has a deadline."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import fdb
import pytest

from fdbrecipes import Queue

from .frameworks import Setup, crash_run, run_example, settled, wait_until

celery = pytest.importorskip("celery", reason="the celery extra needs Python >= 3.10")

pytestmark = pytest.mark.integration

APP = '''
import os, time
import fdb
fdb.api_version(730)
from celery import Celery
from kombu import Queue

PATH = os.environ["FDBRECIPES_TEST_DIRECTORY"]
app = Celery("celeryapp", broker="fdbrecipes://", backend="fdbrecipes://")
app.conf.update(
    broker_transport="fdbrecipes.contrib.celery:Transport",
    broker_transport_options={
        "cluster_file": os.environ["FDB_CLUSTER_FILE"],
        "directory": PATH + "/broker",
        "lease_seconds": float(os.environ.get("FDBRECIPES_TEST_LEASE", "30")),
    },
    result_backend_transport_options={"cluster_file": os.environ["FDB_CLUSTER_FILE"],
                                      "directory": PATH + "/results"},
    result_expires=3600,
    task_acks_late=True,
    worker_prefetch_multiplier=int(os.environ.get("FDBRECIPES_TEST_PREFETCH", "4")),
    worker_pool_start_method="spawn",   # FoundationDB's client does not survive a fork
    broker_connection_retry_on_startup=True,
    task_queues=[Queue("celery"), Queue("prio", max_priority=9)],
)


def _record(*args, **kwargs):
    from effects import record
    return record(*args, **kwargs)


def _seen(key):
    from effects import seen
    return seen(key)


@app.task
def add(x, y):
    return x + y


@app.task
def total(values):
    return sum(values)


@app.task
def tally(values, key):
    """A chord's callback: record the run."""
    _record(key, "start", "callback")
    return sum(values)


@app.task
def boom(x):
    raise ValueError(f"boom {x}")


@app.task
def chord_failed(request, exc, traceback):
    """A callback's errback (Celery calls it with the failed request)."""
    _record("errback", "start", "errback", note=type(exc).__name__)


@app.task
def big(n):
    return "x" * n


@app.task(bind=True, max_retries=5)
def flaky(self, key, failures):
    _record(key, "start", self.request.hostname)
    if self.request.retries < failures:
        raise self.retry(countdown=0.2)
    return self.request.retries


@app.task(bind=True)
def work(self, key, seconds=0.0, first_only=False):
    """Record a run, work ``seconds`` (on a first delivery only, with first_only)."""
    redelivered = bool(self.request.delivery_info.get("redelivered"))
    slow = seconds and not (first_only and _seen(key))
    run = _record(key, "start", self.request.hostname, note=str(redelivered))
    if slow:
        time.sleep(seconds)   # the work itself
    _record(key, "end", self.request.hostname, run)
    return key
'''


class Celery(Setup):
    """One test's Celery (see :class:`Setup`): the app, its queues, its workers."""

    def __init__(self, db: Any, cluster_file: str, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch, lease: float, prefetch: int = 4) -> None:
        super().__init__(db, cluster_file, tmp_path, monkeypatch, "celeryapp", APP,
                         {"FDBRECIPES_TEST_LEASE": str(lease),
                          "FDBRECIPES_TEST_PREFETCH": str(prefetch)})
        self.lease = lease
        self.app_module = self.name
        self.app = self.module.app

    def worker(self, name: str, pool: str = "threads", concurrency: int = 4,
               queues: str = "celery", *extra: str) -> Any:
        """Start ``celery worker`` named ``name`` and wait until it is ready."""
        w = self.workers.start([sys.executable, "-m", "celery", "-A", self.app_module,
                                "worker", "-P", pool, "-c", str(concurrency), "-n",
                                f"{name}@%h", "-Q", queues, "-l", "INFO", *extra], name)
        w.wait_for(" ready.", 120)
        return w

    def queue(self, name: str = "celery") -> Queue:
        """The transport's structure of queue ``name`` (layout: D/"q"/name)."""
        broker = fdb.directory.open(self.db, (*self.path, "broker"))
        return Queue(broker.subspace(("q", name)))

    def settled(self, name: str = "celery") -> bool:
        """Nothing waits, is delayed or is in flight in queue ``name``."""
        return settled(self.db, self.queue(name))

    def close(self) -> None:
        self.app.close()
        super().close()


@pytest.fixture
def make_celery(db: Any, fdb_cluster_file: str, tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    made: List[Celery] = []

    def make(lease: float = 30.0, prefetch: int = 4) -> Celery:
        made.append(Celery(db, fdb_cluster_file, tmp_path, monkeypatch, lease, prefetch))
        return made[-1]

    yield make
    for c in made:
        c.close()


def capture_events(app: Any, seen: List[Dict[str, Any]]) -> Any:
    """Start capturing every event (as ``celery events`` does) in a thread; returns
    ``stop()`` once the capture's queue is bound."""
    ready, conn = threading.Event(), app.connection_for_read()
    receiver = app.events.Receiver(conn, handlers={"*": seen.append})
    consume_ready = receiver.on_consume_ready

    def on_ready(*args: Any, **kwargs: Any) -> None:
        consume_ready(*args, **kwargs)
        ready.set()

    receiver.on_consume_ready = on_ready
    thread = threading.Thread(target=receiver.capture,
                              kwargs={"limit": None, "timeout": None, "wakeup": False},
                              daemon=True)
    thread.start()
    assert ready.wait(60), "the event capture did not start"

    def stop() -> None:
        receiver.should_stop = True
        thread.join(timeout=30)
        conn.release()

    return stop


@pytest.mark.parametrize("pool", ["threads", "prefork"])
def test_a_celery_worker_runs_tasks_end_to_end(make_celery: Any, pool: str) -> None:
    c = make_celery()
    m = c.module
    events: List[Dict[str, Any]] = []
    stop_capture = capture_events(c.app, events)
    try:
        c.worker("w1", pool, 2, "celery", "-E")
        added = m.add.delay(2, 3)
        assert added.get(timeout=60) == 5
        assert m.flaky.delay("flaky", 2).get(timeout=60) == 2          # retried twice
        assert len(c.runs()["flaky"]) == 3
        assert (m.add.s(1, 2) | m.add.s(3) | m.add.s(4)).delay().get(timeout=60) == 10
        assert celery.group(m.add.s(i, i) for i in range(10)).delay().get(timeout=60) \
            == [2 * i for i in range(10)]
        assert celery.chord(m.add.s(i, i) for i in range(10))(m.total.s()).get(timeout=60) \
            == 90
        assert len(m.big.delay(300_000).get(timeout=60)) == 300_000      # chunked result
        sent = time.time()
        assert m.work.apply_async(("eta",), countdown=3).get(timeout=60) == "eta"
        assert c.runs()["eta"][0].started >= sent + 3 - 0.05
        node = f"w1@{socket.gethostname()}"  # with a destination, a reply ends the wait
        ping = subprocess.run([sys.executable, "-m", "celery", "-A", c.app_module, "inspect",
                               "ping", "--timeout", "10", "--destination", node],
                              cwd=c.workers.cwd, env=c.workers.env, capture_output=True,
                              text=True, timeout=120)
        assert ping.returncode == 0 and "pong" in ping.stdout, ping.stdout + ping.stderr
        queues = c.app.control.inspect(destination=[node], timeout=10).active_queues()
        assert [q["name"] for q in queues[node]] == ["celery"]
        wait_until(lambda: {"task-received", "task-started", "task-succeeded"} <= {
            e["type"] for e in events if e.get("uuid") == added.id}, 30,
            "the add task's events")
    finally:
        stop_capture()
    assert c.settled()


def test_priorities_are_honoured(make_celery: Any) -> None:
    """Tasks sent with priorities before the worker starts run highest first, oldest
    first among equals (one at a time, prefetch 1)."""
    c = make_celery(prefetch=1)
    order = [0, 5, 9, 0, 9, 5, 9, 0, 5]
    for i, p in enumerate(order):
        c.module.work.apply_async((f"p{p}-{i}",), queue="prio", priority=p)
    c.worker("w1", "threads", 1, "prio")
    wait_until(lambda: len(c.runs()) == len(order), 60, "every task")
    done = sorted(c.runs().items(), key=lambda kv: kv[1][0].started)
    ran = [key for key, _ in done]
    expected = sorted((f"p{p}-{i}" for i, p in enumerate(order)),
                      key=lambda k: (-int(k[1]), int(k.split("-")[1])))
    assert ran == expected


def test_a_task_killed_mid_run_runs_again_after_its_lease_and_only_once(
        make_celery: Any) -> None:
    """An acks_late task of 4 leases on w1 or w2: nobody else starts it while its worker
    lives (the heartbeat); after a SIGKILL of that worker, the other runs it once
    more, not before the lease ends, and it is acked."""
    lease = 6.0
    c = make_celery(lease=lease)
    workers = {"w1": c.worker("w1"), "w2": c.worker("w2")}
    result = c.module.work.delay("long", 4 * lease, True)
    first = wait_until(lambda: c.runs().get("long"), 60, "the task to start")[0]
    wait_until(lambda: time.time() > first.started + 2 * lease, 3 * lease,
               "two lease lengths of work")
    assert len(c.runs()["long"]) == 1 and first.ended is None  # still its only run
    killed_at = time.time()
    workers[first.worker.split("@")[0]].kill()
    assert result.get(timeout=60) == "long"
    wait_until(c.settled, 30, "the task to be acked")
    first, second = c.runs()["long"]                            # exactly one more run
    assert second.worker != first.worker and second.ended is not None
    assert second.note == "True"                                # marked redelivered
    period = min(lease / 3, 3.0)                                # the heartbeat's
    assert second.started >= killed_at + lease - period - 1.0, (second.started - killed_at)


def test_undecodable_messages_die_at_once_and_the_worker_runs_on(make_celery: Any) -> None:
    """Messages that are not kombu messages claimed in one claim with good tasks: the
    worker does not exit (it did, "Unrecoverable error"), the good tasks run once
    each, the bad messages are dead letters after one delivery with their reasons, and
    a task sent afterwards runs."""
    c = make_celery(lease=5.0)
    m = c.module
    sent = [m.work.delay("t0")]                         # declares the queue
    poison = {b"\x80 not json": "DecodeError: UnicodeDecodeError: ",
              b"[1,2,3]": "DecodeError: not a kombu message: a JSON array, not an object",
              b'{"properties": 5}': "DecodeError: not a kombu message: its properties are"}
    for raw in poison:
        c.queue().push(c.db, raw)
    sent += [m.work.delay(f"t{i}") for i in range(1, 4)]
    w = c.worker("w1", "threads", 2)                    # a prefetch of 8: one claim

    def alive_and(check: Any) -> Any:
        def go() -> Any:
            assert w.proc.poll() is None, f"the worker exited:\n{w.output()[-3000:]}"
            return check()
        return go

    wait_until(alive_and(lambda: len(c.runs()) == 4 and all(
        r.ended for rs in c.runs().values() for r in rs)), 60, "the good tasks")
    assert [r.get(timeout=30) for r in sent] == ["t0", "t1", "t2", "t3"]
    assert all(len(rs) == 1 for rs in c.runs().values()), c.runs()
    assert {rs[0].note for rs in c.runs().values()} == {"False"}   # first deliveries
    assert m.work.delay("after").get(timeout=30) == "after"
    wait_until(alive_and(c.settled), 30, "every task to be acked")
    letters = {letter.value: letter for letter in c.queue().dead(c.db)}
    assert set(letters) == set(poison)
    for raw, reason in poison.items():
        assert letters[raw].reason.startswith(reason), letters[raw].reason
        assert letters[raw].deliveries == 1
    assert w.proc.poll() is None and "Unrecoverable error" not in w.output()


def celery_crash_run(c: Celery, n: int, workers: int, kills: int, pool: str) -> None:
    def start(name: str) -> Any:
        return c.worker(name, pool, 4)

    def send(key: str) -> None:
        c.module.work.delay(key, 0.2)

    crash_run(c, start, send, n, workers, kills, c.settled)


def test_workers_killed_at_random_lose_nothing(make_celery: Any) -> None:
    celery_crash_run(make_celery(lease=3.0), 200, 3, 3, "threads")


@pytest.mark.slow
@pytest.mark.parametrize("pool", ["threads", pytest.param("prefork", marks=pytest.mark.soak)])
def test_1000_tasks_with_workers_killed_at_random(make_celery: Any, pool: str) -> None:
    """The issue's crash test, in the default run with the threads pool (about 20 s);
    the prefork pool's run is a soak (FDBRECIPES_SOAK=1)."""
    celery_crash_run(make_celery(lease=3.0), 1_000, 4, 8, pool)


def test_an_eta_far_past_the_lease_runs_exactly_once(make_celery: Any) -> None:
    """kombu#337 as a test: ETAs of 3 to 5 leases.  The messages wait delayed in the
    cluster (no worker holds them: nothing in flight), each runs once, at its ETA."""
    lease = 2.0
    c = make_celery(lease=lease)
    c.worker("w1")
    c.worker("w2")
    sent = time.time()
    etas = {f"eta{i}": (3 + i / 2) * lease for i in range(5)}
    for key, countdown in etas.items():
        c.module.work.apply_async((key,), countdown=countdown)
    stats = c.queue().stats(c.db)
    assert (stats.delayed, stats.in_flight, stats.visible) == (5, 0, 0)
    wait_until(lambda: len(c.runs()) == 5 and all(r.ended for rs in c.runs().values()
                                                  for r in rs), 60, "every ETA task")
    wait_until(c.settled, 30, "every task to be acked")
    for key, rs in c.runs().items():
        assert len(rs) == 1, (key, rs)
        assert rs[0].started >= sent + etas[key] - 0.05


def test_the_documented_app_runs(db: Any, fdb_cluster_file: str,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/examples/celery_app.py, as docs/celery-dramatiq.md shows it: a worker
    started from its directory runs its tasks."""
    def use(app: Any, worker: Any) -> None:
        assert app.add.delay(2, 3).get(timeout=60) == 5
        assert celery.chord(app.add.s(i, i) for i in range(4))(app.total.s()).get(timeout=60) \
            == 12
        app.charge.delay("order 17").get(timeout=60)
        wait_until(lambda: "charging order 17" in worker.output(), 30, "the charge task's line")

    run_example(db, fdb_cluster_file, monkeypatch, "celery_app",
                ["celery", "-A", "celery_app", "worker", "-P", "threads", "-c", "2", "-n",
                 "example@%h", "-l", "INFO"], " ready.", use)


def test_a_chord_fires_its_callback_exactly_once(make_celery: Any) -> None:
    """A chord of 50 header tasks, 8 at a time racing on its counter: the callback is
    sent once, by the part whose result's transaction counted the 50th; with a header
    task that fails, the callback is failed (ChordError) and its errback called once,
    as Celery does it."""
    c = make_celery()
    m = c.module
    c.worker("w1", "threads", 8)
    done = celery.chord(m.add.s(i, i) for i in range(50))(m.tally.s("chord"))
    assert done.get(timeout=120) == sum(2 * i for i in range(50))
    failing = celery.chord([*(m.add.s(i, i) for i in range(49)), m.boom.s(49)])(
        m.tally.s("failed-chord").on_error(m.chord_failed.s()))
    # Celery's get() raises the header's own error if it sees the failed header before the
    # callback's result, the callback's ChordError (naming that error) if it sees the result
    # first: a race in Celery itself, decided by when get() polls. Either names "boom 49".
    with pytest.raises((ValueError, celery.exceptions.ChordError), match="boom 49"):
        failing.get(timeout=120)
    wait_until(lambda: failing.state == "FAILURE", 60, "the callback failed")
    assert isinstance(failing.result, celery.exceptions.ChordError)
    assert "boom 49" in str(failing.result)
    wait_until(c.settled, 60, "every message acked")
    runs = c.runs()
    assert len(runs["chord"]) == 1, "the callback ran once"
    assert "failed-chord" not in runs, "a chord with a failed part runs no callback"
    assert [run.note for run in runs["errback"]] == ["ChordError"], "one errback"


def test_a_part_delivered_again_is_not_counted_twice(make_celery: Any) -> None:
    """A header task run twice (delivered again after its worker died between storing
    its result and its ack) counts once: the chord fires when its other part ends,
    not before (Celery's incr counted it twice and fired early)."""
    from celery.app.task import Context

    c = make_celery()
    m = c.module
    backend = c.app.backend
    body = m.tally.s("again")
    body["chord_size"] = 2
    header = c.app.GroupResult("group-again", [c.app.AsyncResult("part-1"),
                                               c.app.AsyncResult("part-2")])
    backend.apply_chord(("group-again", header.results), body)
    first = Context(id="part-1", group="group-again", chord=body)
    second = Context(id="part-2", group="group-again", chord=body)
    with c.app.connection_for_write() as conn:
        conn.default_channel.queue_declare("celery")  # the broker's directory and queue
    backend.mark_as_done("part-1", 2, request=first)
    backend.mark_as_done("part-1", 2, request=first)  # delivered again
    assert c.queue().stats(c.db).visible == 0, "no callback sent before part-2 ended"
    backend.mark_as_done("part-2", 4, request=second)
    assert c.queue().stats(c.db).visible == 1, "the callback is sent when part-2 ends"
    backend.mark_as_done("part-2", 4, request=second)  # delivered again
    assert c.queue().stats(c.db).visible == 1, "and only then"
