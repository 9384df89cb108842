"""Consumer processes SIGKILLed at random points of unique jobs' lives (pushed, replaced,
claimed, acked, released, buried, lease left to expire) leave no unique entry without
its job, and never two live jobs of one key (issue 40).  The default run kills 40
times; the soak (``FDBRECIPES_SOAK=1``) 1,000 times.

The consumers' and the killer's choices come from a seed, printed at the start
(``FDBRECIPES_UNIQUE_SEED``, else a random one): ``FDBRECIPES_UNIQUE_SEED=<seed> pytest
...`` replays them (consumer ``i`` draws from ``seed + 1 + i``; when the kills land, and
so the interleaving, is the machine's)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any, Callable, Dict, List, TypeVar

import fdb
import pytest

from fdbrecipes import Queue, Unique
from tests.helpers import TestClock, eventually

pytestmark = pytest.mark.integration

T = TypeVar("T")

#: The environment variable naming the seed to replay.
SEED_VARIABLE = "FDBRECIPES_UNIQUE_SEED"

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
    rng = random.Random(int(sys.argv[5]))
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


def in_one_transaction(db: Any, reads: Callable[..., T], *args: Any) -> T:
    """``reads(tr, *args)`` in one transaction of ``db``, tried again on a retryable
    error."""
    tr = db.create_transaction()
    while True:
        try:
            return reads(tr, *args)
        except fdb.FDBError as e:
            tr.on_error(e).wait()


def check_entries(q: Queue[Any], db: Any) -> Dict[str, bytes]:
    """Every key's holder is a job in a state its key covers, read in one transaction
    (a consumer's commit landing after its kill cannot come between the reads).  A
    holder whose job reads dead is one whose lease ended on its last delivery, still
    under that lease's hold (no writer has met it: ``lookup`` of its token finds no
    dead letter moved yet); those, by key, for :func:`check_buried`."""
    return in_one_transaction(db, entries_at, q)


def entries_at(tr: Any, q: Queue[Any]) -> Dict[str, bytes]:
    """:func:`check_entries` in transaction ``tr``."""
    dying: Dict[str, bytes] = {}
    for k in range(KEYS):
        key = f"key-{k}"
        job = q.unique_job(tr, key)
        if job is None:
            continue
        record = q.job(tr, job)
        assert record is not None, f"{key} names job {job!r}, which has no record"
        if k < 6 and record.state == "dead":
            # its lease ended on its last delivery and no writer has met it yet: the
            # job is still there, under its lease's hold, and holds its key until a
            # claim buries it (``dead`` lists it meanwhile, at the place it will take);
            # a job moved to the dead letters never holds one
            assert job in {d.id for d in q.dead(tr)}, (key, job, "dead, not listed")
            assert record.token is not None and q.lookup(tr, record.token) is None, (
                key, job, "buried, still holding its key")
            dying[key] = job
        elif k < 6:
            assert record.state in LIVE, (key, record.state)
        elif k < 11:
            assert record.state in ("pending", "delayed"), (key, record.state)
    return dying


def check_buried(q: Queue[Any], db: Any, dying: Dict[str, bytes]) -> None:
    """After a claim, which buries every expired lease on its last delivery it meets:
    the ``dying`` holders (by key, from :func:`check_entries` before it) are dead
    letters and hold their keys no more."""
    in_one_transaction(db, buried_at, q, dying)


def buried_at(tr: Any, q: Queue[Any], dying: Dict[str, bytes]) -> None:
    """:func:`check_buried` in transaction ``tr``."""
    dead = {d.id for d in q.dead(tr)}
    for key, job in dying.items():
        assert q.unique_job(tr, key) != job, (key, job, "buried, still holding its key")
        assert job in dead, (key, job, "not a dead letter")
        record = q.job(tr, job)
        assert record is not None and record.state == "dead", (key, job, record)
        assert record.token is not None and q.lookup(tr, record.token) is not None, (
            key, job, "not moved to the dead letters")


def kill_consumers(db: Any, subspace: Any, cluster_file: str, kills: int,
                   processes: int, seed: int) -> None:
    """Keep ``processes`` consumers running and SIGKILL one at random, ``kills`` times:
    the killer draws from ``seed``, the ``i``-th consumer started from ``seed + 1 + i``."""
    script = textwrap.dedent(CONSUMER)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    argv = [sys.executable, "-c", script, cluster_file, subspace.key().hex(),
            str(fdb.get_api_version()), root]
    rng = random.Random(seed)
    running: List[subprocess.Popen[str]] = []
    started = killed = 0
    try:
        while killed < kills:
            while len(running) < processes:
                started += 1
                child = subprocess.Popen(argv + [str(seed + started)], stdout=subprocess.PIPE,
                                         text=True, env={**os.environ})
                running.append(child)  # (killed by the finally, whatever happens next)
                assert child.stdout is not None
                line = child.stdout.readline()
                assert line.strip() == "ready", f"a consumer did not start: {line!r}"
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
    dying = check_entries(q, db)
    # every lease left behind expires within a second, every delay within 0.2 s
    drained: Dict[int, int] = {}
    while True:
        lease = q.claim_wait(db, 30, timeout=3)  # buries the dying leases it meets
        check_buried(q, db, dying)
        if lease is None:
            break
        k = lease.value[0]
        drained[k] = drained.get(k, 0) + 1
        dying = check_entries(q, db)
        q.ack(db, lease)
    assert q.size(db) == 0
    doubled = {k: n for k, n in drained.items() if n > 1 and (k < 6 or k >= 11)}
    assert not doubled, f"two live jobs of one key: {doubled}"
    for k in range(11):
        assert q.unique_job(db, f"key-{k}") is None, f"key-{k} held without its job"
    eventually(lambda: all(q.unique_job(db, f"key-{k}") is None for k in range(11, KEYS)),
               10, "the finished keys' windows pass")


def test_a_job_dead_on_its_last_delivery_holds_its_key_until_a_claim_buries_it(
        db: Any, fdb_subspace: Any) -> None:
    """The state the soak met (key-4's job read dead, listed by ``dead``, holding its
    key): its lease ended on its last delivery and no writer has met it yet.  The checks
    tell it from a buried job's (whose key the burial frees), and the next claim buries
    it and frees its key."""
    clock = TestClock()
    q: Queue[Any] = Queue(fdb_subspace, history=3600, max_deliveries=3, clock=clock)
    job = q.push(db, (4, 0.5), unique=unique_of(4))
    for _ in range(2):
        assert q.release(db, q.claim(db, 1))
    lease = q.claim(db, 1)
    assert lease is not None and lease.deliveries == 3
    clock.advance(2)  # its last lease ends, no writer meets it
    assert q.unique_job(db, "key-4") == job
    assert [d.id for d in q.dead(db)] == [job]
    dying = check_entries(q, db)
    assert dying == {"key-4": job}
    assert q.claim(db, 1) is None  # meets the expired lease: buries it
    check_buried(q, db, dying)
    assert q.unique_job(db, "key-4") is None
    assert check_entries(q, db) == {}


def seeded() -> int:
    """The run's seed (``FDBRECIPES_UNIQUE_SEED``, else a random one), printed."""
    seed = int(os.environ.get(SEED_VARIABLE) or random.randrange(2**32))
    print(f"seed {seed} ({SEED_VARIABLE}={seed} replays the consumers' choices)", flush=True)
    return seed


def test_killed_consumers_leave_no_entry_without_its_job(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    q: Queue[Any] = Queue(fdb_subspace, history=3600, max_deliveries=3)
    kill_consumers(db, fdb_subspace, fdb_cluster_file, kills=40, processes=2, seed=seeded())
    drain_and_check(q, db)


@pytest.mark.slow
@pytest.mark.soak
def test_1000_kills_leave_no_entry_without_its_job(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    q: Queue[Any] = Queue(fdb_subspace, history=3600, max_deliveries=3)
    kill_consumers(db, fdb_subspace, fdb_cluster_file, kills=1000, processes=2, seed=seeded())
    drain_and_check(q, db)
