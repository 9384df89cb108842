"""Consumer processes SIGKILLed at random points of unique jobs' lives (pushed, replaced,
claimed, acked, released, buried, lease left to expire) leave no unique entry without
its job, and never two live jobs of one key (issue 40).  The default run kills 40
times; the slow one (``-m slow``) 1,000 times."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any, Dict, List

import pytest

from fdbrecipes import Queue, Unique
from tests.helpers import eventually

pytestmark = pytest.mark.integration

#: The keys and what each covers: 0-5 running, 6-10 queued, 11-15 finished for 1 s.
KEYS = 16


def unique_of(k: int, on_conflict: str = "skip") -> Unique:
    if k < 6:
        return Unique(f"key-{k}", on_conflict=on_conflict)
    if k < 11:
        return Unique(f"key-{k}", covers="queued", on_conflict=on_conflict)
    return Unique(f"key-{k}", covers="finished", window=1, on_conflict=on_conflict)


CONSUMER = textwrap.dedent(
    """
    import os, random, sys
    import fdb
    fdb.api_version(int(sys.argv[3]))
    from fdbrecipes import Queue, UniqueConflictError
    sys.path.insert(0, sys.argv[4])
    from tests.integration.test_unique_kills import KEYS, unique_of

    db = fdb.open(sys.argv[1])
    q = Queue(fdb.Subspace(rawPrefix=bytes.fromhex(sys.argv[2])), history=3600,
              max_deliveries=3)
    rng = random.Random()
    print("ready", flush=True)
    while True:
        k = rng.randrange(KEYS)
        how = rng.choice(["skip", "replace", "raise"])
        try:
            q.push(db, (k, rng.random()), unique=unique_of(k, how),
                   delay=rng.choice([None, 0.2]))
        except UniqueConflictError:
            pass
        lease = q.claim(db, 1)
        if lease is None:
            continue
        end = rng.random()
        if end < 0.5:
            q.ack(db, lease)
        elif end < 0.7:
            q.release(db, lease)
        elif end < 0.8:
            q.bury(db, lease, "buried")
        # else: left to expire
    """
)

LIVE = ("pending", "delayed", "running", "retrying")


def check_entries(q: Queue[Any], db: Any) -> None:
    """Every key's holder is a job in a state its key covers."""
    for k in range(KEYS):
        job = q.unique_job(db, f"key-{k}")
        if job is None:
            continue
        record = q.job(db, job)
        assert record is not None, f"key-{k} names job {job!r}, which has no record"
        if k < 6 and record.state == "dead":
            # its lease ended on its last delivery and no writer has met it yet: the
            # job is still there, under its lease's hold, and holds its key until a
            # claim buries it (then its key is free); a buried job never holds one
            assert job not in {d.id for d in q.dead(db)}, (k, "buried, still holding")
        elif k < 6:
            assert record.state in LIVE, (k, record.state)
        elif k < 11:
            assert record.state in ("pending", "delayed"), (k, record.state)


def kill_consumers(db: Any, subspace: Any, cluster_file: str, kills: int,
                   processes: int) -> None:
    import fdb

    script = textwrap.dedent(CONSUMER)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    argv = [sys.executable, "-c", script, cluster_file, subspace.key().hex(),
            str(fdb.get_api_version()), root]
    rng = random.Random()
    running: List[subprocess.Popen[str]] = []
    killed = 0
    try:
        while killed < kills:
            while len(running) < processes:
                child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True,
                                         env={**os.environ})
                assert child.stdout is not None
                line = child.stdout.readline()
                assert line.strip() == "ready", f"a consumer did not start: {line!r}"
                running.append(child)
            victim = running.pop(rng.randrange(len(running)))
            time.sleep(rng.uniform(0.0, 0.3))  # a random point of the jobs' lives
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(timeout=30)
            assert victim.returncode == -signal.SIGKILL, "a consumer died of an error"
            killed += 1
    finally:
        for child in running:
            child.kill()
            child.wait()


def drain_and_check(q: Queue[Any], db: Any) -> None:
    check_entries(q, db)
    # every lease left behind expires within a second, every delay within 0.2 s
    drained: Dict[int, int] = {}
    while True:
        lease = q.claim_wait(db, 30, timeout=3)
        if lease is None:
            break
        k = lease.value[0]
        drained[k] = drained.get(k, 0) + 1
        check_entries(q, db)
        q.ack(db, lease)
    assert q.size(db) == 0
    doubled = {k: n for k, n in drained.items() if n > 1 and (k < 6 or k >= 11)}
    assert not doubled, f"two live jobs of one key: {doubled}"
    for k in range(11):
        assert q.unique_job(db, f"key-{k}") is None, f"key-{k} held without its job"
    eventually(lambda: all(q.unique_job(db, f"key-{k}") is None for k in range(11, KEYS)),
               10, "the finished keys' windows pass")


def test_killed_consumers_leave_no_entry_without_its_job(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    q: Queue[Any] = Queue(fdb_subspace, history=3600, max_deliveries=3)
    kill_consumers(db, fdb_subspace, fdb_cluster_file, kills=40, processes=2)
    drain_and_check(q, db)


@pytest.mark.slow
@pytest.mark.soak
def test_1000_kills_leave_no_entry_without_its_job(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    q: Queue[Any] = Queue(fdb_subspace, history=3600, max_deliveries=3)
    kill_consumers(db, fdb_subspace, fdb_cluster_file, kills=1000, processes=2)
    drain_and_check(q, db)
