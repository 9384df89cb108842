"""The operator commands that list and act on single items (leases, delayed, push,
remove), ``stats --watch``, plain ``fdbrecipes``, and ``--kind`` recognised from the
keys: run for real against structures filled through the library, and checked
through the library."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any, List

import pytest

from fdbrecipes import PriorityQueue, Queue, WeightTree
from tests.integration.test_operator_cli import ROOT, answer, failed, fdbrecipes, ok, place

pytestmark = pytest.mark.integration


def test_leases_and_delayed_list_stuck_work(db: Any, fdb_subspace: Any,
                                            fdb_cluster_file: str) -> None:
    q = Queue(fdb_subspace)
    q.push_many(db, ["held", "waiting"])
    q.push(db, "later", delay=600)
    lease = q.claim(db, 60)
    assert lease is not None
    leases = answer(fdbrecipes(fdb_cluster_file, "leases", *place(fdb_subspace), "--json"))
    [held] = leases["leases"]
    assert (leases["kind"], held["value"], held["deliveries"]) == ("queue", "held", 1)
    assert held["token"] == lease.token.hex() and 0 < held["ends_in_seconds"] <= 60
    delayed = answer(fdbrecipes(fdb_cluster_file, "delayed", *place(fdb_subspace), "--json"))
    [later] = delayed["delayed"]
    assert (later["value"], later["deliveries"]) == ("later", 0)
    assert 590 < later["due_in_seconds"] <= 600
    table = ok(fdbrecipes(fdb_cluster_file, "leases", *place(fdb_subspace)))
    assert "'held'" in table and lease.token.hex() in table
    assert "'later'" in ok(fdbrecipes(fdb_cluster_file, "delayed", *place(fdb_subspace)))
    # the token an operator reads finishes the work
    q.ack(db, bytes.fromhex(held["token"]))
    assert answer(fdbrecipes(fdb_cluster_file, "leases", *place(fdb_subspace),
                             "--json"))["leases"] == []


def test_push_and_remove_by_id(db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    q = Queue(fdb_subspace)
    q.push(db, "first")  # the kind is recognised from what is stored
    where = place(fdb_subspace)
    pushed = answer(fdbrecipes(fdb_cluster_file, "push", *where, "hello", "--id",
                               "greeting-1", "--json"))
    assert pushed["pushed"] == "hello"
    ok(fdbrecipes(fdb_cluster_file, "push", *where, "7", "--type", "int", "--delay", "600"))
    assert q.items(db) == ["first", "hello"] and q.stats(db)[:2] == (2, 1)
    line = failed(fdbrecipes(fdb_cluster_file, "remove", *where, "--id", "greeting-1"), 2)
    assert "without --yes" in line and q.size(db) == 3
    removed = answer(fdbrecipes(fdb_cluster_file, "remove", *where, "--id", "greeting-1",
                                "--yes", "--json"))
    assert (removed["removed"], removed["value"]) == (True, "hello")
    again = answer(fdbrecipes(fdb_cluster_file, "remove", *where, "--id", "greeting-1",
                              "--yes", "--json"))
    assert (again["removed"], again["value"]) == (False, None)
    assert q.items(db) == ["first"] and q.size(db) == 2


def test_push_to_a_priority_queue_and_a_weight_tree(db: Any, fdb_subspace: Any,
                                                    fdb_cluster_file: str) -> None:
    pq = PriorityQueue(fdb_subspace.subspace(("pq",)))
    pq.push(db, "low", 1)
    ok(fdbrecipes(fdb_cluster_file, "push", *place(fdb_subspace.subspace(("pq",))),
                  "urgent", "--priority", "9"))
    assert pq.pop_max(db) == "urgent"
    tree = WeightTree(fdb_subspace.subspace(("tree",)))
    tree.push(db, "a", 1)
    ok(fdbrecipes(fdb_cluster_file, "push", *place(fdb_subspace.subspace(("tree",))),
                  "b", "--weight", "5"))
    assert tree.total_weight(db) == 6
    line = failed(fdbrecipes(fdb_cluster_file, "push", *place(fdb_subspace.subspace(("tree",))),
                             "c", "--priority", "1"), 2)
    assert "--weight" in line and tree.size(db) == 2


def test_the_kind_is_recognised_from_the_keys(db: Any, fdb_subspace: Any,
                                              fdb_cluster_file: str) -> None:
    kinds = {"q": Queue, "pq": PriorityQueue, "tree": WeightTree}
    Queue(fdb_subspace.subspace(("q",))).push(db, "only delayed", delay=600)
    PriorityQueue(fdb_subspace.subspace(("pq",))).push(db, "x", 3)
    WeightTree(fdb_subspace.subspace(("tree",))).push(db, "x", 3)
    expected = {"q": "queue", "pq": "priority-queue", "tree": "weight-tree"}
    for name in kinds:
        stats = answer(fdbrecipes(fdb_cluster_file, "stats",
                                  *place(fdb_subspace.subspace((name,))), "--json"))
        assert stats["kind"] == expected[name], name


def test_stats_watch_prints_a_report_every_period(db: Any, fdb_subspace: Any,
                                                  fdb_cluster_file: str) -> None:
    q = Queue(fdb_subspace)
    q.push(db, "x")
    child = subprocess.Popen(
        [sys.executable, "-m", "fdbrecipes", "stats", *place(fdb_subspace), "--json",
         "--watch", "0.2", "--cluster-file", fdb_cluster_file],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = threading.Timer(120, child.kill)  # a hang fails the test, in time
    deadline.start()
    reports: List[str] = []
    try:
        assert child.stdout is not None
        reports.append(child.stdout.readline())
        q.push(db, "y")
        while '"size": 2' not in reports[-1]:
            reports.append(child.stdout.readline())
            assert reports[-1], "the watch stopped"
    finally:
        deadline.cancel()
        child.kill()
        child.wait()
    assert '"size": 1' in reports[0] and len(reports) >= 2


def test_plain_fdbrecipes_prints_the_help() -> None:
    done = subprocess.run([sys.executable, "-m", "fdbrecipes"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("usage: fdbrecipes")
    for command in ("stats", "leases", "delayed", "push", "remove", "worker"):
        assert command in done.stdout
