"""Fault injection: client buggify, killed consumers, a killed and restarted server.

These are the proofs behind docs/guarantees: nothing lost, nothing doubled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from typing import Any, List, Set

import fdb
import pytest

from fdbrecipes import LeaseExpiredError, Queue

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORKER = textwrap.dedent(
    """
    import sys
    import fdb
    fdb.api_version(int(sys.argv[1]))
    role, cluster_file, prefix = sys.argv[2], sys.argv[3], bytes.fromhex(sys.argv[4])
    if sys.argv[5] == "buggify":
        fdb.options.set_client_buggify_enable()
        fdb.options.set_client_buggify_section_activated_probability(100)
        fdb.options.set_client_buggify_section_fired_probability(5)
    from fdbrecipes import LeaseExpiredError, Queue

    db = fdb.open(cluster_file)
    space = fdb.Subspace(rawPrefix=prefix)
    q = Queue(space)
    done_key = space.pack(("test-producers-done",))

    def retry(call):
        while True:  # a non-retryable error escaped the library's loop: try again
            try:
                return call()
            except fdb.FDBError as e:
                print("error", e.code, flush=True)

    if role == "produce":
        for i in range(int(sys.argv[6]), int(sys.argv[7])):
            retry(lambda: q.push(db, i, id=b"item-%d" % i))
        print("produced", flush=True)
    elif role == "consume":
        while True:
            lease = retry(lambda: q.claim_wait(db, 5, timeout=1))
            if lease is None:
                if retry(lambda: db[done_key]) is not None and retry(lambda: q.size(db)) == 0:
                    break
                continue
            failed = False
            while True:
                try:
                    q.ack(db, lease)
                    print("acked", lease.value, flush=True)
                    break
                except LeaseExpiredError:
                    # After an error the first ack may have committed after all.
                    print("maybe" if failed else "expired", lease.value, flush=True)
                    break
                except fdb.FDBError as e:
                    failed = True
                    print("error", e.code, flush=True)
    elif role == "hold":
        for _ in range(int(sys.argv[6])):
            lease = q.claim(db, float(sys.argv[7]))
            print("holding", lease.value, flush=True)
        print("ready", flush=True)
        sys.stdin.read()  # killed while holding
    """
)


def spawn(tmp_path: Any, *args: str) -> subprocess.Popen[str]:
    script = tmp_path / "worker.py"
    if not script.exists():
        script.write_text(WORKER)
    return subprocess.Popen(
        [sys.executable, str(script), str(fdb.get_api_version()), *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )


def test_client_buggify_10000_items_none_lost_none_doubled(
    fdb_database: Any, fdb_subspace: Any, fdb_cluster_file: str, tmp_path: Any
) -> None:
    """Producers push with ids and consumers claim/ack through retry loops while the
    client injects commit_unknown_result and other errors."""
    prefix = fdb_subspace.key().hex()
    producers = [spawn(tmp_path, "produce", fdb_cluster_file, prefix, "buggify",
                       str(k * 5000), str((k + 1) * 5000)) for k in range(2)]
    consumers = [spawn(tmp_path, "consume", fdb_cluster_file, prefix, "buggify")
                 for _ in range(3)]
    try:
        for p in producers:
            out, _ = p.communicate(timeout=1800)
            assert p.returncode == 0 and "produced" in out
        fdb_database[fdb_subspace.pack(("test-producers-done",))] = b"1"
        acked: List[int] = []
        maybe: Set[int] = set()
        for c in consumers:
            out, _ = c.communicate(timeout=1800)
            assert c.returncode == 0
            for line in out.splitlines():
                if line.startswith("acked"):
                    acked.append(int(line.split()[1]))
                elif line.startswith("maybe"):
                    maybe.add(int(line.split()[1]))
    finally:
        for proc in producers + consumers:
            if proc.poll() is None:
                proc.kill()
    counts = Counter(acked)
    assert [v for v, n in counts.items() if n > 1] == [], "duplicated"
    assert set(counts) | maybe == set(range(10_000)), "lost"
    assert Queue(fdb_subspace).size(fdb_database) == 0


def test_a_killed_consumers_leases_are_delivered_again(
    fdb_database: Any, fdb_subspace: Any, fdb_cluster_file: str, tmp_path: Any
) -> None:
    db = fdb_database
    q = Queue(fdb_subspace)
    q.push_many(db, range(5))
    holder = spawn(tmp_path, "hold", fdb_cluster_file, fdb_subspace.key().hex(), "plain",
                   "3", "2")
    assert holder.stdout is not None
    held = [int(holder.stdout.readline().split()[1]) for _ in range(3)]
    assert holder.stdout.readline().strip() == "ready"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert held == [0, 1, 2]
    assert q.items(db) == [3, 4]
    got = []
    while len(got) < 5:
        lease = q.claim_wait(db, 30, timeout=30)
        assert lease is not None, f"stranded: got only {got}"
        assert lease.deliveries == (2 if lease.value in held else 1)
        q.ack(db, lease)
        got.append(lease.value)
    assert sorted(got) == [0, 1, 2, 3, 4]
    assert q.size(db) == 0


def test_server_killed_and_restarted_mid_run(fdb_local_cluster: Any) -> None:
    """SIGKILL the server (ssd engine) while producers and consumers run, restart it on
    the same data: every committed push is delivered, exactly once."""
    cluster = fdb_local_cluster(engine="ssd")
    db = fdb.open(cluster.cluster_file)
    db.options.set_transaction_timeout(3000)  # nothing hangs while the server is down
    space = fdb.Subspace(("fdbrecipes-test", "restart"))
    q = Queue(space)
    total = 1500
    committed: Set[int] = set()
    acked: List[int] = []
    maybe: Set[int] = set()
    third = threading.Event()
    produced = threading.Event()
    errors: List[BaseException] = []

    def producer() -> None:
        try:
            for i in range(total):
                while True:
                    try:
                        q.push(db, i, id=b"%d" % i)
                        break
                    except fdb.FDBError:  # timed out while the server was down: retry
                        continue
                committed.add(i)
                if len(committed) == total // 3:
                    third.set()
            produced.set()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
            produced.set()
            third.set()

    def consumer() -> None:
        try:
            while True:
                try:
                    lease = q.claim_wait(db, 5, timeout=1)
                    if lease is None:
                        if produced.is_set() and q.size(db) == 0:
                            return
                        continue
                except fdb.FDBError:  # timed out while the server was down
                    continue
                failed = False
                while True:
                    try:
                        q.ack(db, lease)
                        acked.append(lease.value)
                        break
                    except LeaseExpiredError:
                        if failed:  # the ack that timed out may have committed
                            maybe.add(lease.value)
                        break
                    except fdb.FDBError:
                        failed = True
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=producer), threading.Thread(target=consumer)]
    for t in threads:
        t.start()
    assert third.wait(600)
    cluster.kill()
    cluster.start()  # same data directory and port
    for t in threads:
        t.join(timeout=1200)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    assert committed == set(range(total))
    counts = Counter(acked)
    assert [v for v, n in counts.items() if n > 1] == [], "delivered and acked twice"
    assert set(counts) | maybe == committed, "a committed push was lost"
    assert q.size(db) == 0
