"""Shared limits through the Celery transport and the Dramatiq broker (issue 40): a
task's (actor's) rate and a queue's concurrency, checked in the claims' transactions,
with two real worker processes sharing them.

Each task records, in its own transactions, the cluster's clock (a read version) when
it starts and when it ends.  A start's reading is at or after its claim's (the claim
committed before the worker got the message), an end's at or before its ack's commit:
so each recorded run lies inside the time its claim held its slot, and no more runs
overlap than slots do (the concurrency check is exact in the direction it asserts).
For a rate of ``n`` per ``W`` whose tasks were all sent after the reading ``P``, the
claims up to any reading ``T`` are at most ``n * ceil((T - P) / W)`` (the windows
``(P, P + W]``, ``(P + W, P + 2W]``...), and the starts up to ``T`` at most as many:
that is the rate check, exact in the same direction.  Without the limits, each check
fails (every task starts within the first window, the slow ones all at once)."""

from __future__ import annotations

import math
import sys
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import fdb
import pytest

from fdbrecipes import Limits, concurrency, rate

from .frameworks import Setup, wait_until

pytestmark = pytest.mark.integration

#: The task (actor) rate: starts per window of PER seconds.
RATE, PER = 3, 1.0
#: Tasks of the rate-limited task, and of the slow one under a queue's concurrency.
PACED, SLOW, NARROW = 10, 8, 2

#: What the worker modules record with: the cluster's clock at a task's start and end.
CLOCKS = '''
import os, uuid
import fdb
fdb.api_version(730)
_db = fdb.open()
_fx = fdb.Subspace(tuple(os.environ["FDBRECIPES_TEST_DIRECTORY"].split("/")) + ("clocks",))


def clock(key, event, run=None):
    """Write (key, run, event) -> the read version of the writing transaction."""
    run = run or uuid.uuid4().hex
    tr = _db.create_transaction()
    while True:
        try:
            tr[_fx.pack((key, run, event))] = fdb.tuple.pack((tr.get_read_version().wait(),))
            tr.commit().wait()
            return run
        except fdb.FDBError as e:
            tr.on_error(e).wait()
'''

CELERY_APP = CLOCKS + '''
import time
from celery import Celery
from kombu import Queue

PATH = os.environ["FDBRECIPES_TEST_DIRECTORY"]
app = Celery("celerylimits", broker="fdbrecipes://")
app.conf.update(
    broker_transport="fdbrecipes.contrib.celery:Transport",
    broker_transport_options={
        "cluster_file": os.environ["FDB_CLUSTER_FILE"],
        "directory": PATH + "/broker",
        "limits": PATH + "/limits",
        "task_limits": {"celerylimits.paced": {"rate": "@RATE@/s"}},
        "queue_limits": {"narrow": {"concurrency": @NARROW@}},
    },
    task_acks_late=True,
    worker_disable_rate_limits=True,    # the cluster's limits, not each worker's bucket
    worker_prefetch_multiplier=4,
    broker_connection_retry_on_startup=True,
    task_queues=[Queue("celery"), Queue("narrow")],
    task_routes={"celerylimits.slow": {"queue": "narrow"}},
)


@app.task(name="celerylimits.paced")
def paced(key):
    clock(key, "start")


@app.task(name="celerylimits.slow")
def slow(key):
    run = clock(key, "start")
    time.sleep(0.3)   # the work itself
    clock(key, "end", run)
'''.replace("@RATE@", str(RATE)).replace("@NARROW@", str(NARROW))

DRAMATIQ_APP = CLOCKS + '''
import time
import dramatiq
from fdbrecipes.contrib.dramatiq import FdbBroker

broker = FdbBroker(cluster_file=os.environ["FDB_CLUSTER_FILE"],
                   directory=os.environ["FDBRECIPES_TEST_DIRECTORY"] + "/broker",
                   limits=os.environ["FDBRECIPES_TEST_DIRECTORY"] + "/limits",
                   actor_limits={"paced": {"rate": "@RATE@/s"}},
                   queue_limits={"narrow": {"concurrency": @NARROW@}})
dramatiq.set_broker(broker)


@dramatiq.actor(max_retries=0)
def paced(key):
    clock(key, "start")


@dramatiq.actor(max_retries=0, queue_name="narrow")
def slow(key):
    run = clock(key, "start")
    time.sleep(0.3)   # the work itself
    clock(key, "end", run)
'''.replace("@RATE@", str(RATE)).replace("@NARROW@", str(NARROW))


def clocks(setup: Setup) -> Dict[str, List[Tuple[int, int]]]:
    """Each key's runs as (start, end) readings (end -1: none recorded)."""
    space = fdb.Subspace((*setup.path, "clocks"))
    r = space.range()
    found: Dict[Tuple[str, str], Dict[str, int]] = {}
    for kv in setup.db.get_range(r.start, r.stop):
        key, run, event = space.unpack(kv.key)
        found.setdefault((key, run), {})[event] = fdb.tuple.unpack(kv.value)[0]
    out: Dict[str, List[Tuple[int, int]]] = {}
    for (key, _), events in found.items():
        out.setdefault(key, []).append((events["start"], events.get("end", -1)))
    return out


def reading(db: Any) -> int:
    """The cluster's clock now (a read version)."""
    tr = db.create_transaction()
    return int(tr.get_read_version().wait())


def check_rate(starts: List[int], since: int) -> None:
    """At most RATE starts in every window of PER seconds after ``since`` (see the
    module docstring)."""
    window = int(PER * 1_000_000)
    for k, at in enumerate(sorted(starts), 1):
        allowed = RATE * math.ceil((at - since) / window)
        assert k <= allowed, (f"start {k} came {(at - since) / 1e6:.3f} s after the sends: "
                              f"more than {RATE} per {PER} s")


def most_at_once(runs: List[Tuple[int, int]]) -> int:
    """The most runs overlapping at one reading."""
    events = sorted([(s, 1) for s, _ in runs] + [(e, -1) for _, e in runs])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def check_runs(setup: Setup, since: int) -> None:
    """Every task ran once; the rate and the concurrency held."""
    done = clocks(setup)
    paced = [f"p{i}" for i in range(PACED)]
    slow = [f"s{i}" for i in range(SLOW)]
    assert sorted(done) == sorted(paced + slow)
    assert all(len(done[k]) == 1 for k in done), done
    check_rate([done[k][0][0] for k in paced], since)
    runs = [done[k][0] for k in slow]
    assert all(end > start for start, end in runs)
    assert most_at_once(runs) <= NARROW


def everything_ran(setup: Setup) -> bool:
    found = clocks(setup)
    return len(found) == PACED + SLOW and all(e > 0 for k, v in found.items()
                                              if k.startswith("s") for _, e in v)


class Framework(Setup):
    """A test's app module and its workers (see :class:`Setup`)."""

    def __init__(self, db: Any, cluster_file: str, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> None:
        super().__init__(db, cluster_file, tmp_path, monkeypatch, name, text, {})

    def limits(self) -> Limits:
        return Limits(fdb.directory.open(self.db, (*self.path, "limits")))

    def close(self) -> None:
        app = getattr(self.module, "app", None)
        if app is not None:
            app.close()
        broker = getattr(self.module, "broker", None)
        if broker is not None:
            broker.close()
        super().close()
        r = fdb.Subspace((*self.path, "clocks")).range()
        self.db.clear_range(r.start, r.stop)


@pytest.fixture
def frameworks(db: Any, fdb_cluster_file: str, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    made: List[Framework] = []

    def make(name: str, text: str) -> Framework:
        made.append(Framework(db, fdb_cluster_file, tmp_path, monkeypatch, name, text))
        return made[-1]

    yield make
    for f in made:
        f.close()


def run_and_check(f: Framework, workers: List[List[str]], ready: str,
                  defined: Dict[str, Any], send: str) -> None:
    """Start ``workers`` (commands after the interpreter), wait for each to say
    ``ready``; send the tasks (``send``: the method that sends one, ``delay`` or
    ``send``); the store holds ``defined``; check what ran."""
    for i, command in enumerate(workers):
        f.workers.start([sys.executable, "-m", *command], f"w{i}")
    for w in f.workers.started:
        w.wait_for(ready, 120)
    since = reading(f.db)
    for i in range(SLOW):
        getattr(f.module.slow, send)(f"s{i}")
    for i in range(PACED):
        getattr(f.module.paced, send)(f"p{i}")
    assert f.limits().list(f.db) == defined  # written by the first to open the broker
    wait_until(lambda: everything_ran(f), 60, "every task to run")
    check_runs(f, since)


def test_celery_task_rate_and_queue_concurrency_hold_across_workers(frameworks: Any) -> None:
    pytest.importorskip("celery", reason="the celery extra needs Python >= 3.10")
    c = frameworks("celerylimits", CELERY_APP)
    workers = [["celery", "-A", c.name, "worker", "-P", "threads", "-c", "4", "-n",
                f"{name}@%h", "-Q", "celery,narrow", "-l", "INFO"] for name in ("w1", "w2")]
    run_and_check(c, workers, " ready.", {"task.rate:celerylimits.paced": rate(RATE, PER),
                                          "queue.concurrency:narrow": concurrency(NARROW)},
                  "delay")


def test_dramatiq_actor_rate_and_queue_concurrency_hold_across_workers(
        frameworks: Any) -> None:
    pytest.importorskip("dramatiq", reason="the dramatiq extra needs Python >= 3.10")
    d = frameworks("dramalimits", DRAMATIQ_APP)
    workers = [["dramatiq", d.name, "-p", "1", "-t", "4"]] * 2
    run_and_check(d, workers, "is ready for action",
                  {"actor.rate:paced": rate(RATE, PER),
                   "queue.concurrency:narrow": concurrency(NARROW)}, "send")


def test_kombu_claims_keep_a_tasks_and_a_queues_limits_chunked_messages_too(
        db: Any, fdb_cluster_file: str) -> None:
    """Through kombu, in process: a message too large for one value keeps its task's
    name beside its chunks, so its task's limit holds it back like any other; a queue's
    limit counts every message; an ack gives both slots back, and the message held back
    comes back at its place."""
    kombu = pytest.importorskip("kombu", reason="the celery extra needs Python >= 3.10")
    path = ("fdbrecipes-test", uuid.uuid4().hex)
    conn = kombu.Connection("fdbrecipes://", transport="fdbrecipes.contrib.celery:Transport",
                            transport_options={
                                "cluster_file": fdb_cluster_file, "spread": 1,
                                "directory": "/".join((*path, "broker")),
                                "limits": "/".join((*path, "limits")),
                                "task_limits": {"big": {"concurrency": 1}},
                                "queue_limits": {"jobs": {"concurrency": 2}}})
    try:
        q = kombu.Queue("jobs", kombu.Exchange("jobs", "direct"), routing_key="jobs")
        big = "y" * 250_000
        with conn.Producer() as producer:
            for i, task in enumerate(("big", "big", "small", "small")):
                producer.publish({"i": i, "big": big if task == "big" else ""},
                                 exchange=q.exchange, routing_key="jobs", declare=[q],
                                 headers={"task": task})
        channel = conn.channel()
        first = channel.basic_get("jobs")
        second = channel.basic_get("jobs")  # the second big one waits for the first
        assert (first.payload["i"], second.payload["i"]) == (0, 2)
        assert first.payload["big"] == big
        assert channel.basic_get("jobs") is None  # the queue runs 2 at once
        limits = Limits(fdb.directory.open(db, (*path, "limits")))
        state = limits.state(db, "task.concurrency:big", "big")
        assert state is not None and (state.running, state.parked) == (1, 1)
        channel.basic_ack(first.delivery_tag)  # committed by the acker's thread
        third = wait_until(lambda: channel.basic_get("jobs"), 30, "a slot back")
        assert third.payload["i"] == 1 and third.payload["big"] == big
        assert channel.basic_get("jobs") is None
        channel.basic_ack(second.delivery_tag)
        fourth = wait_until(lambda: channel.basic_get("jobs"), 30, "a slot back")
        assert fourth.payload["i"] == 3
        for message in (third, fourth):
            channel.basic_ack(message.delivery_tag)
    finally:
        conn.release()
        fdb.directory.remove_if_exists(db, path)
