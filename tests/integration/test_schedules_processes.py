"""1,000 stored schedules fired by 5 worker processes, one of them SIGKILLed and
restarted at every slot: exactly one job per schedule per slot, none missing.

The schedules fire every 3 seconds (a cron expression with a seconds field, in
Europe/Berlin); the workers serve a queue of their own and push the schedules' jobs
into another (the store's ``targets``), which nothing consumes, so every job pushed is
still there to count.  Each schedule keeps its latest 40 fires, so a slot of the
window fired twice would also show twice there (the queue's idempotency ids alone
would hide it).  The default run lasts 20 slots; the soak (``FDBRECIPES_SOAK=1``) 150.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from typing import Any, Dict, List, Set, Tuple

import fdb
import pytest

from fdbrecipes import Queue, Schedules
from tests.helpers import eventually

pytestmark = pytest.mark.integration
pytest.importorskip("cronsim")

WORKER = textwrap.dedent("""
    import os, fdb
    fdb.api_version(730)
    from fdbrecipes import Queue, Schedules, Worker
    prefix = bytes.fromhex(os.environ["TEST_PREFIX"])
    db = fdb.open(os.environ["FDB_CLUSTER_FILE"])
    jobs = Queue(fdb.Subspace(rawPrefix=prefix + b"j"))
    store = Schedules(fdb.Subspace(rawPrefix=prefix + b"s"), targets=[jobs], recent=40)

    def handle(job):
        pass

    Worker(db, Queue(fdb.Subspace(rawPrefix=prefix + b"w")), handle,
           schedule_store=store).run()
""")
SCHEDULES = 1_000
PROCESSES = 5
PERIOD = 3


def start(script: Any, cluster_file: str, prefix: bytes) -> subprocess.Popen[bytes]:
    environment = {**os.environ, "TEST_PREFIX": prefix.hex(), "FDB_CLUSTER_FILE": cluster_file}
    return subprocess.Popen([sys.executable, str(script)], env=environment,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def next_slot(after: float) -> float:
    return (int(after) // PERIOD + 1) * PERIOD


def fired_slots(store: Schedules, db: Any) -> Dict[str, List[float]]:
    return {s.name: [f.slot for f in s.fires if f.how == "slot"] for s in store.list(db)}


def run(db: Any, subspace: Any, cluster_file: str, tmp_path: Any, slots: int) -> None:
    prefix = subspace.key()
    jobs = Queue(fdb.Subspace(rawPrefix=prefix + b"j"))
    store = Schedules(fdb.Subspace(rawPrefix=prefix + b"s"), recent=40)

    @fdb.transactional
    def add(tr: Any, names: List[str]) -> None:
        for name in names:
            store.add(tr, name, target=jobs, cron=f"*/{PERIOD} * * * * *",
                      tz="Europe/Berlin", value=name)

    names = [f"s{i:04d}" for i in range(SCHEDULES)]
    for at in range(0, SCHEDULES, 100):
        add(db, names[at:at + 100])
    script = tmp_path / "scheduled_worker.py"
    script.write_text(WORKER)
    workers = [start(script, cluster_file, prefix) for _ in range(PROCESSES)]
    rng = random.Random(42)
    kills = 0
    try:
        # a slot's jobs pushed: the workers are up; the window starts after it
        eventually(lambda: jobs.size(db) >= SCHEDULES, 120, "a first slot's jobs", 0.5)
        first = next_slot(time.time())
        for _ in range(slots):
            slot = next_slot(time.time())
            time.sleep(max(0.0, slot - time.time()) + rng.uniform(0.0, PERIOD))  # kill time
            victim = rng.randrange(PROCESSES)
            workers[victim].kill()
            workers[victim].communicate()
            kills += 1
            workers[victim] = start(script, cluster_file, prefix)
        last = next_slot(time.time())  # fired by the workers still running
        eventually(lambda: all(last in f for f in fired_slots(store, db).values()), 60,
                   f"every schedule fired the slot at {last}", 1.0)
    finally:
        errors = []
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                _, err = worker.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
                _, err = worker.communicate()
            errors.append(err.decode(errors="replace"))
    assert kills == slots
    window = [float(s) for s in range(int(first), int(last) + 1, PERIOD)]
    assert len(window) >= slots
    pushed: Counter[Tuple[str, float]] = Counter()
    for item in jobs.pending(db):
        _, name, slot = fdb.tuple.unpack(item.id)
        assert item.value == name
        pushed[(name, float(slot))] += 1
    assert max(pushed.values()) == 1
    fires = fired_slots(store, db)
    missing: Set[Tuple[str, float]] = set()
    for name in names:
        assert len(fires[name]) == len(set(fires[name])), f"{name}: a slot fired twice"
        assert sorted(fires[name]) == fires[name]
        missing |= {(name, s) for s in window if (name, s) not in pushed}
        assert set(fires[name]) <= {s for (n, s) in pushed if n == name}
    assert not missing, f"{len(missing)} slots missing, e.g. {sorted(missing)[:5]}\n" + \
        "\n".join(e[-2000:] for e in errors)


def test_a_thousand_schedules_fire_once_per_slot_while_workers_are_killed(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, tmp_path: Any) -> None:
    run(db, fdb_subspace, fdb_cluster_file, tmp_path, slots=20)


@pytest.mark.soak
def test_soak_a_thousand_schedules_over_150_slots_of_kills(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, tmp_path: Any) -> None:
    run(db, fdb_subspace, fdb_cluster_file, tmp_path, slots=150)
