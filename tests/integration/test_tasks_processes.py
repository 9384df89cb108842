"""Apps of tasks run by real worker processes (``fdbrecipes worker myapp:app``) on a
real server: a sync and an async app each run 1,000 tasks (results, retries,
follow-ups, unknown task names dead-lettered), and 1,000 encrypted tasks leave no
argument's plaintext in the subspace; then keys rotate (old items still run) and the
old key is dropped (its items become dead letters whose reason names its key id)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from functools import partial
from typing import Any, Dict, List

import fdb
import pytest

from fdbrecipes import Worker
from fdbrecipes.tasks import App, Encrypted, TaskHandle
from fdbrecipes.tasks.envelope import seal
from tests.helpers import dump, eventually, stop

pytestmark = pytest.mark.integration

#: The apps, written to the test's directory: the sync one (``myapp``) and, with the
#: same tasks as ``async def`` functions, ``myasyncapp``.  The subspace and the keys
#: come from the environment, as a deployment's configuration would.
APP = textwrap.dedent(
    """
    import json, os
    import fdb
    fdb.api_version(730)
    from fdbrecipes import Backoff
    from fdbrecipes.tasks import App, Encrypted, JSON, current_job

    keys = json.loads(os.environ.get("TEST_KEYS", "null"))
    codec = None if keys is None else Encrypted(
        JSON(), {k: bytes.fromhex(v) for k, v in keys["keys"].items()}, keys["current"])
    app = App(fdb.Subspace(rawPrefix=bytes.fromhex(os.environ["TEST_PREFIX"])),
              codec=codec, max_deliveries=3)

    @app.task(name="add")
    {ASYNC}def add(a: int, b: int, note: str = "") -> int:
        return a + b

    @app.task(name="flaky", backoff=Backoff(base=0.05, cap=0.1))
    {ASYNC}def flaky(n: int) -> str:
        job = current_job()
        if job.deliveries < 2:
            raise RuntimeError(f"first run of {n} fails")
        return f"{n} ran {job.deliveries} times"

    @app.task(name="chain")
    {ASYNC}def chain(n: int) -> str:
        return leaf.then(n, f"leaf of {n}").id.decode()  # the follow-up's id

    @app.task(name="leaf")
    {ASYNC}def leaf(n: int, text: str) -> str:
        return text.upper()
    """
)


def write_apps(directory: Any) -> None:
    (directory / "myapp.py").write_text(APP.replace("{ASYNC}", ""))
    (directory / "myasyncapp.py").write_text(APP.replace("{ASYNC}", "async "))


def load(directory: Any, name: str, prefix: bytes, keys: Any = None) -> App:
    """The test's own copy of the app (to defer and read), made as the workers make
    it."""
    env = {"TEST_PREFIX": prefix.hex(), "TEST_KEYS": json.dumps(keys)}
    namespace: Dict[str, Any] = {"__name__": name}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        exec(compile((directory / f"{name}.py").read_text(), name, "exec"), namespace)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    app: App = namespace["app"]
    return app


def start_worker(cluster_file: str, directory: Any, target: str, prefix: bytes,
                 keys: Any = None, *options: str) -> Any:
    env = {**os.environ, "TEST_PREFIX": prefix.hex(), "TEST_KEYS": json.dumps(keys)}
    return subprocess.Popen(
        [sys.executable, "-m", "fdbrecipes", "worker", target, "--cluster-file",
         cluster_file, "--concurrency", "8", *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=directory, env=env)


def stop_worker(process: Any) -> str:
    """Stop a worker process; its log, once it exited cleanly."""
    log = stop(process)
    assert process.returncode == 0, log
    return log


def defer_all(db: Any, app: App, n: int) -> Dict[str, List[Any]]:
    """``n`` calls: mostly add, every 10th flaky, every 25th a chain; 100 a
    transaction (each its caller's, as a web request's would be)."""
    handles: Dict[str, List[Any]] = {"add": [], "flaky": [], "chain": []}

    @fdb.transactional
    def batch(tr: Any, start: int) -> List[Any]:
        out = []
        for i in range(start, min(n, start + 100)):
            if i % 10 == 0:
                out.append(("flaky", i, app.tasks["flaky"].defer(tr, i)))
            elif i % 25 == 1:
                out.append(("chain", i, app.tasks["chain"].defer(tr, n=i)))
            else:
                out.append(("add", i, app.tasks["add"].defer(tr, i, b=1,
                                                               note=f"secret-{i:04d}-text")))
        return out

    for start in range(0, n, 100):
        for kind, i, handle in batch(db, start):
            handles[kind].append((i, handle))
    return handles


def check_results(db: Any, app: App, handles: Dict[str, List[Any]]) -> None:
    for i, handle in handles["add"]:
        assert handle.result(db, timeout=120) == i + 1
    for i, handle in handles["flaky"]:
        assert handle.result(db, timeout=60) == f"{i} ran 2 times"
    for i, handle in handles["chain"]:
        leaf = TaskHandle(app.tasks["leaf"], handle.result(db, timeout=60).encode())
        assert leaf.result(db, timeout=60) == f"LEAF OF {i}"


@pytest.mark.parametrize("module", ["myapp", "myasyncapp"])
def test_1000_tasks_through_worker_processes(fdb_cluster_file: str, fdb_database: Any,
                                            fdb_subspace: Any, tmp_path: Any,
                                            module: str) -> None:
    db = fdb_database
    write_apps(tmp_path)
    prefix = fdb_subspace.key()
    app = load(tmp_path, module, prefix)
    assert app.asynchronous == (module == "myasyncapp")
    queue = app.structure("default")
    for name in ("retired.task", "typo.tsak"):
        queue.push(db, seal(name, b"{}", None))
    began = time.monotonic()
    handles = defer_all(db, app, 1_000)
    workers = [start_worker(fdb_cluster_file, tmp_path, f"{module}:app", prefix)
               for _ in range(2)]
    try:
        check_results(db, app, handles)
    finally:
        logs = [stop_worker(worker) for worker in workers]
    seconds = time.monotonic() - began
    dead = sorted(d.reason for d in queue.dead(db))
    assert dead == [f"unknown task {name!r}: no task of that name in this worker's app"
                    for name in ("retired.task", "typo.tsak")]
    stats = queue.stats(db)
    assert (stats.visible, stats.delayed, stats.in_flight) == (0, 0, 0)
    flaky = handles["flaky"][0][1]
    record = queue.job(db, flaky.id)
    assert record.attempts == 2 and record.error.message.startswith("first run of 0 fails")
    assert all(f"fdbrecipes worker: app {module}:app" in log for log in logs)
    assert sum(log.count("failed (delivery 1)") for log in logs) == len(handles["flaky"])
    print(f"{module}: 1,000 tasks and 40 follow-ups by 2 worker processes in {seconds:.1f} s")


KEYS = {"k1": "11" * 32, "k2": "22" * 32}
SECRET = re.compile(rb"secret-\d{4}-text|SECRET-\d{4}-TEXT")


def test_encrypted_tasks_leave_no_plaintext_and_keys_rotate(fdb_cluster_file: str,
                                                          fdb_database: Any, fdb_subspace: Any,
                                                          tmp_path: Any) -> None:
    db = fdb_database
    write_apps(tmp_path)
    prefix = fdb_subspace.key()
    old = {"keys": {"k1": KEYS["k1"]}, "current": "k1"}
    app = load(tmp_path, "myapp", prefix, old)
    assert isinstance(app.codec, Encrypted)
    handles = defer_all(db, app, 1_000)
    stored = dump(db, fdb_subspace)
    assert not [kv for kv in stored.items() if SECRET.search(kv[0] + kv[1])]
    worker = start_worker(fdb_cluster_file, tmp_path, "myapp:app", prefix, old)
    try:
        check_results(db, app, handles)
    finally:
        stop_worker(worker)
    stored = dump(db, fdb_subspace)
    assert len(stored) > 3_000  # items gone, records with their (encrypted) results kept
    leaks = [kv for kv in stored.items() if SECRET.search(kv[0] + kv[1])]
    assert not leaks, leaks[:3]
    assert not [kv for kv in stored.items() if b"leaf of" in kv[1].lower()]

    # rotation: items sealed under k1 run under a worker holding k1 and k2 (current)
    sealed_by_k1 = [app.tasks["add"].defer(db, i, 1) for i in range(20)]
    both = load(tmp_path, "myapp", prefix, {"keys": KEYS, "current": "k2"})
    sealed_by_k2 = [both.tasks["add"].defer(db, i, 2) for i in range(20)]
    Worker(db, both).run(burst=True)
    results = [TaskHandle(both.tasks["add"], h.id).result(db, timeout=10)  # sealed by k2
               for h in sealed_by_k1]
    assert results == [i + 1 for i in range(20)]
    assert [h.result(db, timeout=10) for h in sealed_by_k2] == [i + 2 for i in range(20)]

    # the old key dropped: what k1 sealed is a dead letter naming k1; k2's items run
    stale = [app.tasks["add"].defer(db, i, 3) for i in range(5)]
    fresh = [both.tasks["add"].defer(db, i, 4) for i in range(5)]
    only_k2 = load(tmp_path, "myapp", prefix, {"keys": {"k2": KEYS["k2"]}, "current": "k2"})
    Worker(db, only_k2).run(burst=True)
    assert [h.result(db, timeout=10) for h in fresh] == [i + 4 for i in range(5)]
    for handle in stale:
        assert handle.status(db) == "dead"
    reasons = {d.reason for d in only_k2.structure("default").dead(db)}
    assert reasons == {"task add: its arguments cannot be read: CodecError: encrypted under "
                       "key id 'k1', which this codec does not hold (it holds 'k2')"}


def fired_and_run(db: Any, store: Any, task: Any, n: int) -> Any:
    """The schedule ``tick``'s fires once there are ``n`` of them and each one's job
    has finished, else None."""
    fires = store.get(db, "tick").fires
    if len(fires) < n:
        return None
    done = all(TaskHandle(task, fire.job_id).status(db) == "succeeded" for fire in fires)
    return fires if done else None


def test_a_worker_process_of_an_app_fires_a_schedule_store(fdb_cluster_file: str,
                                                          fdb_database: Any, fdb_subspace: Any,
                                                          tmp_path: Any) -> None:
    """``fdbrecipes worker myapp:app --schedules-tuple ...``: the worker process fires
    the store's schedule of a task's calls (made by ``Task.item``) into the app's
    queue and runs them; each slot once."""
    from fdbrecipes import Schedules

    db = fdb_database
    write_apps(tmp_path)
    prefix = fdb_subspace["app"].key()
    app = load(tmp_path, "myapp", prefix)
    store = Schedules(fdb_subspace["cron"])
    queue = app.structure("default")
    store.add(db, "tick", target=queue, every=0.2,
              value=app.tasks["add"].item(40, b=2, note="scheduled"))
    with pytest.raises(TypeError, match="b"):
        app.tasks["add"].item(40, b="two")  # type: ignore[arg-type]
    literal = repr(fdb.tuple.unpack(fdb_subspace["cron"].key()))
    worker = start_worker(fdb_cluster_file, tmp_path, "myapp:app", prefix, None,
                          "--schedules-tuple", literal)
    try:
        fires = eventually(partial(fired_and_run, db, store, app.tasks["add"], 3), 60,
                           "three slots fired and their jobs run")
    finally:
        log = stop_worker(worker)
    assert "fdbrecipes worker: app myapp:app" in log
    for fire in fires:  # each slot's job ran once, and returned a + b
        assert TaskHandle(app.tasks["add"], fire.job_id).result(db, timeout=10) == 42
    assert queue.dead(db) == []
