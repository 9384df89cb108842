"""FairQueue on a real server: a noisy neighbour waits its turn, shares hold, limits
hold at every moment (also when consumers die), rates hold, the lottery always matches
the groups' states (a state machine), and bad input is refused before any write."""

from __future__ import annotations

import bisect
import random
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from typing import Any, Dict, List, Optional, Set, Tuple

import fdb
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
    run_state_machine_as_test,
)

from fdbrecipes import FairLease, FairQueue, Worker
from tests.helpers import chi_square_p, run_threads

pytestmark = pytest.mark.integration


def test_groups_are_served_and_counted(db: Any, fdb_subspace: Any) -> None:
    q = FairQueue(fdb_subspace)
    q.push_many(db, [1, 2], group="a")
    q.push(db, 3, group=b"b", id=b"three")
    q.push(db, 3, group=b"b", id=b"three")  # the same id: stored once
    assert sorted(q.groups(db), key=repr) == sorted(["a", b"b"], key=repr)
    assert q.lottery(db) == {"a": 1, b"b": 1}
    taken: Dict[Any, List[Any]] = {"a": [], b"b": []}
    for _ in range(3):
        lease = q.claim(db, 30)
        assert isinstance(lease, FairLease)
        taken[lease.group].append(lease.value)
        q.ack(db, lease)
    assert taken == {"a": [1, 2], b"b": [3]}
    assert q.claim(db, 30) is None and q.lottery(db) == {}
    assert q.stats(db, "a") == (0, 0, 0, 0, None, 1)


def test_a_noisy_neighbour_waits_its_turn(db: Any, fdb_subspace: Any) -> None:
    """Group A holds 20,000 items, groups B..K 20 each; 8 consumers claim and ack.
    Every item of B..K is served within its fair share of the first claims, and A
    still progresses."""
    q = FairQueue(fdb_subspace)
    for start in range(0, 20_000, 2_000):
        q.push_many(db, range(start, start + 2_000), group="A")
    others = [chr(c) for c in range(ord("B"), ord("K") + 1)]
    for g in others:
        q.push_many(db, range(20), group=g)
    served: List[Any] = []
    lock = threading.Lock()
    done = threading.Event()
    errors: List[BaseException] = []

    def consumer() -> None:
        try:
            while not done.is_set():
                lease = q.claim(db, 60)
                assert lease is not None
                q.ack(db, lease)
                with lock:
                    served.append(lease.group)
                    if sum(1 for g in served if g != "A") == 200:
                        done.set()
        except BaseException as e:  # pragma: no cover - reported by run_threads
            errors.append(e)
            done.set()

    run_threads([threading.Thread(target=consumer) for _ in range(8)], errors, 300)
    last = max(i for i, g in enumerate(served) if g != "A")
    a_before = served[: last + 1].count("A")
    print(f"noisy neighbour: B..K's 200 items done by claim {last + 1}, "
          f"A served {a_before} meanwhile")
    assert a_before < 300 and a_before >= 1


def test_claims_follow_the_shares(db: Any, fdb_subspace: Any) -> None:
    q = FairQueue(fdb_subspace)
    shares = {"one": 1, "two": 2, "three": 3, "four": 4}
    for g, share in shares.items():
        q.set_group(db, g, share=share)
        q.push_many(db, range(1_000), group=g)
    counts: Counter[Any] = Counter()
    for _ in range(1_000):  # every group stays backlogged
        lease = q.claim(db, 60)
        assert lease is not None
        counts[lease.group] += 1
        q.ack(db, lease)
    expected = [1_000 * s / 10 for s in shares.values()]
    assert chi_square_p([counts[g] for g in shares], expected) > 0.001, counts


CONSUMER = textwrap.dedent(
    """
    import sys
    import fdb
    fdb.api_version(int(sys.argv[3]))
    from fdbrecipes import FairQueue, LeaseExpiredError

    db = fdb.open(sys.argv[1])
    q = FairQueue(fdb.Subspace(rawPrefix=bytes.fromhex(sys.argv[2])), default_limit=3)
    while True:
        lease = q.claim_wait(db, 1.0, timeout=5)
        if lease is None:
            continue
        print("claimed", lease.group, lease.value, flush=True)
        try:
            q.ack(db, lease)
        except LeaseExpiredError:
            print("expired", lease.group, lease.value, flush=True)
            continue
        print("acked", lease.group, lease.value, flush=True)
    """
)


class Consumers:
    """Consumer processes of one fair queue, their output lines gathered as they come,
    and SIGKILL at random."""

    def __init__(self, script: Any, cluster_file: str, subspace: Any) -> None:
        self.argv = [sys.executable, str(script), cluster_file, subspace.key().hex(),
                     str(fdb.get_api_version())]
        self.running: List[subprocess.Popen[str]] = []
        self.killed: List[subprocess.Popen[str]] = []
        self.lines: List[Tuple[Any, str, str, str]] = []  # (process, what, group, value)
        self.changed = threading.Condition()

    def start(self, n: int) -> None:
        for _ in range(n):
            child = subprocess.Popen(self.argv, stdout=subprocess.PIPE, text=True)
            self.running.append(child)
            threading.Thread(target=self._read, args=(child,), daemon=True).start()

    def _read(self, child: Any) -> None:
        for line in child.stdout:
            parts = line.split()
            if len(parts) != 3:  # not a line the script prints (one run read a line of a
                continue         # single word from a child as it was killed): skipped
            what, group, value = parts
            with self.changed:
                self.lines.append((child, what, group, value))
                self.changed.notify_all()

    def kill(self, child: Any) -> None:
        child.kill()
        child.wait()
        self.running.remove(child)
        self.killed.append(child)

    def acked(self) -> int:
        with self.changed:
            return sum(1 for _, what, _, _ in self.lines if what == "acked")

    def wait_acked(self, n: int, timeout: float) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: sum(
                1 for _, what, _, _ in self.lines if what == "acked") >= n, timeout), \
                f"only {self.acked()} acked"

    def stop(self) -> None:
        for child in list(self.running):
            self.kill(child)


def test_limits_hold_at_every_moment_and_killed_consumers_free_their_slots(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str, tmp_path: Any) -> None:
    """16 consumer processes, limit 3 per group; consumers are SIGKILLed at random
    (holding leases or not), and once all of them at once.  In flight per group, read
    at any moment, never passes 3; nothing is lost or acked twice; the groups whose
    slots the dead held are served again after the 1-second leases."""
    q = FairQueue(fdb_subspace, default_limit=3)
    groups = ["g1", "g2", "g3", "g4"]
    for g in groups:
        q.push_many(db, range(40), group=g)
    script = tmp_path / "consumer.py"
    script.write_text(CONSUMER)
    consumers = Consumers(script, fdb_cluster_file, fdb_subspace)
    over: List[Any] = []
    done = threading.Event()

    def watcher() -> None:
        while not done.is_set():
            left = 0
            for g in groups:
                stats = q.stats(db, g)
                if stats.in_flight > 3:  # type: ignore[union-attr]
                    over.append((g, stats.in_flight))  # type: ignore[union-attr]
                left += stats.visible + stats.in_flight  # type: ignore[union-attr]
            if left == 0:
                done.set()

    rng = random.Random(7)
    watching = threading.Thread(target=watcher, daemon=True)
    watching.start()
    try:
        consumers.start(16)
        for step in range(1, 8):  # one at random after every 20 acks, all at 80
            consumers.wait_acked(20 * step, 120)
            if step == 4:
                consumers.stop()
                consumers.start(16)
            else:
                consumers.kill(rng.choice(consumers.running))
                consumers.start(1)
        assert done.wait(120), "items were left"
    finally:
        done.set()
        consumers.stop()
        watching.join(60)
    assert not over, over[:5]
    claimed = {(g, v) for _, what, g, v in consumers.lines if what == "claimed"}
    acked = Counter((g, v) for _, what, g, v in consumers.lines if what == "acked")
    everything = {(g, str(v)) for g in groups for v in range(40)}
    assert claimed == everything  # nothing lost
    assert set(acked.values()) == {1}  # nothing acked twice
    unreported = everything - set(acked)  # acked by a consumer killed before it said so
    killed_claims = {(g, v) for p, what, g, v in consumers.lines
                     if what == "claimed" and p in consumers.killed}
    assert unreported <= killed_claims
    assert len(consumers.killed) >= 16 + 6


def test_a_rate_limit_holds(db: Any, fdb_subspace: Any) -> None:
    """rate=(10, 1): over a run of ten seconds, no 11 claims of the group within one
    second of the cluster's clock, and the rate is reached (about 100 claims), also on
    an idle cluster, whose clock moves only with commits."""
    q = FairQueue(fdb_subspace)
    q.set_group(db, "limited", rate=(10, 1.0))
    q.push_many(db, range(500), group="limited")
    stamps: List[int] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lease = q.claim_wait(db, 60, timeout=max(0.0, deadline - time.monotonic()))
        if lease is None:
            break
        stamps.append(lease.claimed_at)
        q.ack(db, lease)
    assert len(stamps) >= 80, len(stamps)  # 41 to 50 before waiters moved the clock
    for first, eleventh in zip(stamps, stamps[10:]):
        assert eleventh - first > 1_000_000


def test_bad_input_is_refused_before_anything_is_written(db: Any, fdb_subspace: Any) -> None:
    q = FairQueue(fdb_subspace)
    bad = [
        (TypeError, lambda: q.set_group(db, 3, share=1)),  # type: ignore[arg-type]
        (ValueError, lambda: q.set_group(db, "", share=1)),
        (ValueError, lambda: q.set_group(db, "g", share=0)),
        (ValueError, lambda: q.set_group(db, "g", limit=-1)),
        (TypeError, lambda: q.set_group(db, "g", rate=10)),  # type: ignore[arg-type]
        (ValueError, lambda: q.set_group(db, "g", rate=(0, 1.0))),
        (TypeError, lambda: q.push(db, b"x", group=None)),  # type: ignore[arg-type]
        (ValueError, lambda: q.push(db, None, group="g")),  # type: ignore[arg-type]
        (ValueError, lambda: q.claim(db, 0)),
        (ValueError, lambda: q.ack(db, b"not a token")),
    ]
    for error, call in bad:
        with pytest.raises(error):
            call()
    with pytest.raises(ValueError, match="default_share"):
        FairQueue(fdb_subspace, default_share=0)
    r = fdb_subspace.range()
    assert list(db.get_range(r.start, r.stop)) == []


def test_a_worker_serves_a_fair_queue(db: Any, fdb_subspace: Any) -> None:
    q = FairQueue(fdb_subspace)
    for g in ("x", "y"):
        q.push_many(db, range(30), group=g)
    seen: List[Any] = []
    finished = threading.Semaphore(0)

    def handler(job: Any) -> None:
        seen.append((job.lease.group, job.value))
        finished.release()

    with Worker(db, q, handler, concurrency=4):
        for _ in range(60):
            assert finished.acquire(timeout=60)
    assert sorted(seen) == sorted((g, i) for g in ("x", "y") for i in range(30))


class FairMachine(RuleBasedStateMachine):
    """Random pushes, claims, acks, releases and policy changes against a model; after
    every step the lottery is exactly the groups that can be served."""

    leases = Bundle("leases")

    def __init__(self, db: Any) -> None:
        super().__init__()
        self.db = db
        self.space = fdb.Subspace(("fdbrecipes-test", "fair", uuid.uuid4().hex))
        self.q = FairQueue(self.space)
        self.visible: Dict[str, List[Any]] = {}
        self.in_flight: Dict[str, int] = {}
        self.limits: Dict[str, Optional[int]] = {}
        self.shares: Dict[str, int] = {}
        self.count = 0

    def teardown(self) -> None:
        r = self.space.range()
        self.db.clear_range(r.start, r.stop)

    def eligible(self) -> Set[str]:
        return {g for g, items in self.visible.items() if items
                and (self.limits.get(g) is None or self.in_flight.get(g, 0) < self.limits[g])}

    @rule(group=st.sampled_from(["a", "b", "c"]), n=st.integers(1, 3))
    def push(self, group: str, n: int) -> None:
        values = list(range(self.count, self.count + n))
        self.count += n
        self.q.push_many(self.db, values, group=group)
        self.visible.setdefault(group, []).extend(values)

    @rule(target=leases)
    def claim(self) -> Any:
        before = self.eligible()
        lease = self.q.claim(self.db, 1_000)
        if not before:
            assert lease is None
            return []
        assert lease is not None and lease.group in before
        assert lease.value == self.visible[lease.group].pop(0)
        self.in_flight[lease.group] = self.in_flight.get(lease.group, 0) + 1
        return lease

    @rule(lease=consumes(leases))
    def ack(self, lease: Any) -> None:
        if lease == []:
            return
        self.q.ack(self.db, lease)
        self.in_flight[lease.group] -= 1

    @rule(lease=consumes(leases))
    def release(self, lease: Any) -> None:
        if lease == []:
            return
        assert self.q.release(self.db, lease)
        self.in_flight[lease.group] -= 1
        bisect.insort(self.visible[lease.group], lease.value)  # back at its place

    @rule(group=st.sampled_from(["a", "b", "c"]), share=st.integers(1, 4),
          limit=st.none() | st.integers(0, 2))
    def set_group(self, group: str, share: int, limit: Optional[int]) -> None:
        self.q.set_group(self.db, group, share=share, limit=limit)
        self.shares[group], self.limits[group] = share, limit

    @invariant()
    def the_lottery_is_the_servable_groups(self) -> None:
        expected = {g: self.shares.get(g, 1) for g in self.eligible()}
        assert self.q.lottery(self.db) == expected
        for g, items in self.visible.items():
            stats = self.q.stats(self.db, g)
            assert (stats.visible, stats.in_flight) == (len(items),  # type: ignore[union-attr]
                                                        self.in_flight.get(g, 0))


def test_fair_state_machine(fdb_database: Any) -> None:
    run_state_machine_as_test(lambda: FairMachine(fdb_database),
                              settings=settings(max_examples=20, stateful_step_count=25,
                                                deadline=None))
