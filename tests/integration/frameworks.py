"""Helpers of the Celery and Dramatiq tests: worker processes with deadlines, the
effects tasks record in FoundationDB, and the modules the workers import.

Tasks record each run in the cluster (``effects``): a "start" key when a run begins and
an "end" key when it ends, each naming the run, the worker and the time, so a test
counts runs exactly, whoever ran them and whatever was killed."""

from __future__ import annotations

import contextlib
import importlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set, Tuple

import fdb

from tests.helpers import eventually

#: What the worker modules import to record their runs (written next to them).
EFFECTS_MODULE = '''
import os, time, uuid
import fdb
fdb.api_version(730)
_db = fdb.open()
_fx = fdb.Subspace(tuple(os.environ["FDBRECIPES_TEST_EFFECTS"].split("/")))

def record(key, event, worker, run=None, note=""):
    """Write one effect: (key, run, event) -> (worker, wall time, note)."""
    run = run or uuid.uuid4().hex
    _db[_fx.pack((key, run, event))] = fdb.tuple.pack((worker, time.time(), note))
    return run

def seen(key):
    """Whether a run of ``key`` started before (a redelivery)."""
    r = _fx.range((key,))
    return any(True for _ in _db.get_range(r.start, r.stop, limit=1))
'''


class Run(NamedTuple):
    """One run of a task: who ran it, when it started, when it ended (None: never),
    and what the task noted when it started."""

    worker: str
    started: float
    ended: Optional[float]
    note: str


def runs(db: Any, effects: Any) -> Dict[str, List[Run]]:
    """Every recorded run, by task key, oldest start first."""
    r = effects.range()
    found: Dict[Any, Dict[str, Any]] = defaultdict(dict)
    for kv in db.get_range(r.start, r.stop):
        key, run, event = effects.unpack(kv.key)
        found[(key, run)][event] = fdb.tuple.unpack(kv.value)
    by_key: Dict[str, List[Run]] = defaultdict(list)
    for (key, _), events in found.items():
        start = events.get("start") or events["end"]
        end = events.get("end")
        by_key[key].append(Run(start[0], start[1], end[1] if end else None, start[2]))
    for r_ in by_key.values():
        r_.sort(key=lambda run: run.started)
    return dict(by_key)


def wait_until(check: Callable[[], Any], timeout: float, what: str,
               every: float = 0.1) -> Any:
    """:func:`tests.helpers.eventually`, looking every 0.1 s: ``check``'s first true
    answer, failing with ``what`` after ``timeout`` seconds."""
    return eventually(check, timeout, what, every)


def settled(db: Any, structure: Any) -> bool:
    """Nothing waits, is delayed or is in flight in ``structure`` (a Queue or
    PriorityQueue): every message was acked or buried.  1 snapshot read."""
    stats = structure.stats(db)
    return bool(stats.visible + stats.delayed + stats.in_flight == 0)


class Worker:
    """A worker process in its own process group (so a kill reaches its pool), its
    output in a file; :meth:`kill` SIGKILLs the group, :meth:`stop` SIGTERMs and
    waits, then kills."""

    def __init__(self, args: List[str], cwd: Path, env: Dict[str, str], name: str) -> None:
        self.name = name
        self.log = cwd / f"{name}.log"
        self._out = open(self.log, "w")  # noqa: SIM115 (closed by stop/kill)
        self.proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=self._out,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float) -> None:
        """Wait until the output shows ``text``; fail (with the output) if the
        process exits or ``timeout`` seconds pass first."""
        def seen() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n"
                                     f"{self.output()[-3000:]}")
            return text in self.output()
        try:
            wait_until(seen, timeout, f"{text!r} from {self.name}")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.output()[-3000:]}") from None

    def kill(self) -> None:
        """SIGKILL the whole group: the machine died."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._out.close()

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (a warm shutdown), then SIGKILL after ``timeout`` seconds."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        self.kill()


class Workers:
    """Worker processes of one test: every one is killed when the test ends."""

    def __init__(self, cwd: Path, env: Dict[str, str]) -> None:
        self.cwd = cwd
        self.env = env
        self.started: List[Worker] = []

    def start(self, args: List[str], name: str, **env: str) -> Worker:
        worker = Worker(args, self.cwd, {**self.env, **env}, name)
        self.started.append(worker)
        return worker

    def close(self) -> None:
        for worker in self.started:
            worker.kill()


def worker_env(cluster_file: str, effects: str, **extra: str) -> Dict[str, str]:
    """The environment of worker processes: the test's cluster, where effects go,
    the test directory importable."""
    env = {**os.environ, "FDB_CLUSTER_FILE": cluster_file,
           "FDBRECIPES_TEST_EFFECTS": effects, "PYTHONUNBUFFERED": "1", **extra}
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def write_module(directory: Path, name: str, text: str) -> None:
    """Write a module the workers import (dedented)."""
    (directory / f"{name}.py").write_text(textwrap.dedent(text))


class Setup:
    """One test's framework: a module of tasks written to ``tmp_path`` (and imported
    here too, to send them), the test's own directory and effects, and its worker
    processes.  The module reads ``FDBRECIPES_TEST_DIRECTORY`` and
    ``FDB_CLUSTER_FILE``; ``env`` adds more of its settings."""

    def __init__(self, db: Any, cluster_file: str, tmp_path: Path, monkeypatch: Any,
                 module: str, text: str, env: Dict[str, str]) -> None:
        self.db = db
        self.path: Tuple[str, ...] = ("fdbrecipes-test", uuid.uuid4().hex)
        self.effects = fdb.Subspace((*self.path, "effects"))
        self.name = f"{module}_{self.path[1][:12]}"
        write_module(tmp_path, self.name, text)
        write_module(tmp_path, "effects", EFFECTS_MODULE)
        env = {"FDBRECIPES_TEST_DIRECTORY": "/".join(self.path), **env}
        for key, value in {**env, "FDB_CLUSTER_FILE": cluster_file}.items():
            monkeypatch.setenv(key, value)
        monkeypatch.syspath_prepend(str(tmp_path))
        self.module: Any = importlib.import_module(self.name)
        self.workers = Workers(tmp_path, worker_env(cluster_file,
                                                    "/".join((*self.path, "effects")), **env))

    def runs(self) -> Dict[str, List[Run]]:
        return runs(self.db, self.effects)

    def close(self) -> None:
        self.workers.close()
        fdb.directory.remove_if_exists(self.db, self.path)
        r = self.effects.range()
        self.db.clear_range(r.start, r.stop)


def run_example(db: Any, cluster_file: str, monkeypatch: Any, module: str,
                worker: List[str], ready: str, use: Callable[[Any, Worker], None]) -> None:
    """Import ``docs/examples/<module>.py`` here, start ``worker`` (its command after
    the Python interpreter) in that directory, and once its output shows ``ready``
    call ``use(module, worker)``; then kill the worker, remove its log and the
    examples' directory ``fdbrecipes-example``."""
    examples = Path(__file__).resolve().parents[2] / "docs" / "examples"
    monkeypatch.setenv("FDB_CLUSTER_FILE", cluster_file)
    monkeypatch.syspath_prepend(str(examples))
    workers = Workers(examples, worker_env(cluster_file, "unused"))
    try:
        app = importlib.import_module(module)
        w = workers.start([sys.executable, "-m", *worker], "example-worker")
        w.wait_for(ready, 120)
        use(app, w)
    finally:
        workers.close()
        (examples / "example-worker.log").unlink(missing_ok=True)
        fdb.directory.remove_if_exists(db, ("fdbrecipes-example",))


def crash_run(setup: Setup, start: Callable[[str], Worker], send: Callable[[str], None],
              n: int, workers: int, kills: int, settled: Callable[[], bool]) -> None:
    """``n`` tasks (``send(key)``) on ``workers`` workers (``start(name)``); a random
    worker SIGKILLed, and replaced, at evenly spaced points of progress, ``kills``
    times.  Then: every task ran to its end at least once, and every run but a task's
    last was by a worker that was killed (no task ran twice unless a worker died
    running it, or before its ack)."""
    rng = random.Random(n)
    live = {f"w{i}": start(f"w{i}") for i in range(workers)}
    for i in range(n):
        send(f"t{i}")
    killed: Set[str] = set()
    started = workers

    def ended() -> int:
        return sum(any(r.ended for r in rs) for rs in setup.runs().values())

    for k in range(kills):
        target = n * (k + 1) // (kills + 1)
        wait_until(lambda target=target: ended() >= target, 300,
                   f"progress before kill {k + 1}", every=0.2)
        victim = rng.choice(sorted(live))
        live.pop(victim).kill()
        killed.add(victim)
        live[f"w{started}"] = start(f"w{started}")
        started += 1
    wait_until(lambda: ended() == n, 300, "every task to end", every=0.5)
    wait_until(settled, 120, "every task to be acked")
    twice = 0
    for key, rs in setup.runs().items():
        assert all(r.worker.split("@")[0] in killed for r in rs[:-1]), (key, rs)
        twice += len(rs) > 1
    print(f"{n} tasks, {kills} kills ({sorted(killed)}): {twice} ran more than once")
