"""The operator commands that list and act on single items (leases, delayed, push,
remove), following a job from its push to its end (push's id, ``job --wait``,
``finished``), a push that starts a new queue, ``stats --watch``, plain ``fdbrecipes``,
and ``--kind`` recognised from the keys: run for real against structures filled
through the library, and checked through the library."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import uuid
from typing import Any, List

import fdb
import pytest

from fdbrecipes import Backoff, FairQueue, Job, PriorityQueue, Queue, WeightTree, Worker
from fdbrecipes._layout import FairLayout
from tests.helpers import dump, eventually
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


HOUR = "3600"


def test_a_job_is_followed_from_its_push_to_its_end(db: Any, fdb_subspace: Any,
                                                    fdb_cluster_file: str) -> None:
    where = place(fdb_subspace)
    pushed = answer(fdbrecipes(fdb_cluster_file, "push", *where, "resize", "--history", HOUR,
                               "--json"))  # nothing stored yet: a new queue
    made = pushed["id"]
    assert pushed["kind"] == "queue" and re.fullmatch("[0-9a-f]{32}", made), pushed
    said = ok(fdbrecipes(fdb_cluster_file, "push", *where, "crop", "--id", "job-2",
                         "--history", HOUR))
    assert said.endswith(": pushed 'crop', id job-2\n"), said
    assert "no id (--id names it" in ok(fdbrecipes(fdb_cluster_file, "push", *where, "x"))
    q = Queue(fdb_subspace, history=3600, max_deliveries=1)
    assert [q.job(db, id_).state for id_ in (made.encode(), b"job-2")] == ["pending"] * 2
    record = answer(fdbrecipes(fdb_cluster_file, "job", made, *where, "--json"))["job"]
    assert (record["id"], record["state"], record["attempts"]) == (made, "pending", 0)
    waited = fdbrecipes(fdb_cluster_file, "job", made, *where, "--wait", "0.5")
    assert waited.returncode == 1 and "pending" in waited.stdout
    assert waited.stderr == f"fdbrecipes job: job {made} is still pending after 0.5 s\n"
    assert "(no finished jobs" in ok(fdbrecipes(fdb_cluster_file, "finished", *where))

    def handler(job: Job) -> Any:
        if job.value == "crop":
            raise ValueError("no such image")
        return job.value.upper()

    worker = Worker(db, q, handler, concurrency=1, lease_seconds=10, backoff=Backoff(base=0.01))
    thread = threading.Thread(target=worker.run, kwargs={"burst": True}, daemon=True)
    thread.start()
    try:
        ended = fdbrecipes(fdb_cluster_file, "job", made, *where, "--wait", "60")
        assert ended.returncode == 0 and ended.stderr == "", ended.stderr
        rows = dict(line.split(None, 1) for line in ended.stdout.splitlines()[1:3])
        assert rows == {"state": "succeeded", "attempts": "1"}
        assert "'RESIZE'" in ended.stdout
        dead = fdbrecipes(fdb_cluster_file, "job", "job-2", *where, "--wait", "60")
        assert dead.returncode == 1 and "ValueError: no such image" in dead.stdout
        assert dead.stderr == "fdbrecipes job: job job-2 is dead\n"
    finally:
        thread.join(60)
    assert not thread.is_alive()
    finished = answer(fdbrecipes(fdb_cluster_file, "finished", *where, "--json"))["finished"]
    assert {(j["id"], j["state"], j["attempts"]) for j in finished} == {
        (made, "succeeded", 1), ("job-2", "dead", 1)}
    assert next(j["error"] for j in finished if j["id"] == "job-2")["message"] == "no such image"
    text = ok(fdbrecipes(fdb_cluster_file, "finished", *where))
    assert text.splitlines()[1].split() == ["#", "id", "state", "attempts", "finished", "at",
                                            "(UTC)", "error"]
    assert made in text and "ValueError: no such image" in text
    letters = answer(fdbrecipes(fdb_cluster_file, "dead", *where, "--json"))["dead_letters"]
    assert [(d["id"], d["value"], d["reason"]) for d in letters] == [
        ("job-2", "crop", "ValueError: no such image")]
    assert "job-2" in ok(fdbrecipes(fdb_cluster_file, "dead", *where))


def value_of(job: Job) -> Any:
    """A handler: the job's value is its result."""
    return job.value


def test_finished_lists_every_group_of_a_fair_queue(db: Any, fdb_subspace: Any,
                                                     fdb_cluster_file: str) -> None:
    q = FairQueue(fdb_subspace, history=3600)
    ids = {group: q.push(db, group.upper(), group=group) for group in ("acme", "globex")}
    Worker(db, q, value_of, concurrency=1, lease_seconds=10).run(burst=True)
    finished = answer(fdbrecipes(fdb_cluster_file, "finished", *place(fdb_subspace),
                                 "--json"))["finished"]
    assert {(j["group"], j["id"], j["state"]) for j in finished} == {
        (group, id_.decode(), "succeeded") for group, id_ in ids.items() if id_ is not None}
    text = ok(fdbrecipes(fdb_cluster_file, "finished", *place(fdb_subspace)))
    assert text.splitlines()[1].split()[:3] == ["#", "group", "id"] and "'globex'" in text
    waited = fdbrecipes(fdb_cluster_file, "job", ids["acme"].decode(), *place(fdb_subspace),
                        "--group", "acme", "--wait", "10")
    assert waited.returncode == 0 and "succeeded" in waited.stdout


def test_push_starts_a_queue_in_a_new_directory(db: Any, fdb_cluster_file: str) -> None:
    """push makes the directory it names and a queue there; the commands that only look
    never make one."""
    root = ("fdbrecipes-test", uuid.uuid4().hex)
    path = "/".join((*root, "app", "jobs"))
    try:
        line = failed(fdbrecipes(fdb_cluster_file, "stats", "--directory", path), 1)
        assert line == f"fdbrecipes stats: no such directory: {path}"
        assert not fdb.directory.exists(db, root)
        said = ok(fdbrecipes(fdb_cluster_file, "push", "--directory", path, "hello"))
        assert said.startswith(f"queue at directory {path}: pushed 'hello'")
        assert Queue(fdb.directory.open(db, (*root, "app", "jobs"))).items(db) == ["hello"]
        ok(fdbrecipes(fdb_cluster_file, "push", "--directory", path, "again"))
        assert answer(fdbrecipes(fdb_cluster_file, "stats", "--directory", path,
                                 "--json"))["size"] == 2
        tree = "/".join((*root, "pool"))
        ok(fdbrecipes(fdb_cluster_file, "push", "--directory", tree, "x", "--kind",
                      "weight-tree", "--weight", "3"))
        assert WeightTree(fdb.directory.open(db, (*root, "pool"))).total_weight(db) == 3
    finally:
        fdb.directory.remove_if_exists(db, root)


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


def test_a_drained_fair_queue_is_recognised(db: Any, fdb_subspace: Any,
                                            fdb_cluster_file: str) -> None:
    """Once every group drained, a fair queue's index of groups is empty: its looks
    asked for, then (once claims made them) its finished records say what it is."""
    q = FairQueue(fdb_subspace, history=3600, id_retention=1)
    ids = [q.push(db, group.upper(), group=group) for group in ("acme", "globex")]
    Worker(db, q, value_of, concurrency=1, lease_seconds=1).run(burst=True)
    assert q.groups(db) == []
    where = place(fdb_subspace)
    assert answer(fdbrecipes(fdb_cluster_file, "stats", *where, "--json"))["kind"] == (
        "fair-queue")  # it was taken for a weight-tree
    looks = FairLayout(fdb_subspace).wakes  # S/"w"/(time, group): docs/data-model.md

    def looked() -> bool:  # a claim makes the looks due (the leases', the ids' expiry)
        assert q.claim(db, 1) is None
        return not any(looks.contains(key) for key in dump(db, fdb_subspace))
    eventually(looked, 30, "every look asked for made")
    finished = answer(fdbrecipes(fdb_cluster_file, "finished", *where, "--json"))
    assert finished["kind"] == "fair-queue"  # it was "nothing is stored: give --kind"
    assert sorted(j["id"] for j in finished["finished"]) == sorted(
        i.decode() for i in ids if i is not None)


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
