"""The operator commands (stats, peek, dead, requeue-dead, purge-dead), run for real
(``python -m fdbrecipes ... --cluster-file <the test cluster>``) against structures
filled through the library; what they change is checked through the library."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List

import fdb
import pytest

from fdbrecipes import FairQueue, PriorityQueue, Queue, WeightTree
from tests.helpers import dump, everything

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def fdbrecipes(cluster_file: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m fdbrecipes argv... --cluster-file cluster_file``."""
    return subprocess.run(
        [sys.executable, "-m", "fdbrecipes", *argv, "--cluster-file", cluster_file],
        capture_output=True, text=True, check=False, timeout=120, cwd=ROOT)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    """The output of a command that succeeded, with nothing on stderr."""
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def answer(done: subprocess.CompletedProcess[str]) -> Dict[str, Any]:
    """The JSON object a ``--json`` command printed."""
    out = ok(done)
    assert out.count("\n") == 1
    data: Dict[str, Any] = json.loads(out)
    return data


def failed(done: subprocess.CompletedProcess[str], status: int) -> str:
    """The one line on stderr of a command that failed with ``status``."""
    assert done.returncode == status, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert done.stderr.endswith("\n") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr.rstrip("\n")


def place(subspace: Any) -> List[str]:
    """``--tuple`` naming ``subspace`` (a tuple subspace)."""
    return ["--tuple", repr(fdb.tuple.unpack(subspace.key()))]


def b64(data: bytes) -> Dict[str, str]:
    return {"bytes": base64.b64encode(data).decode("ascii")}


def bury(db: Any, q: Any, claim: str = "claim") -> None:
    """Make the front item of ``q`` (built with ``max_deliveries=1``) a dead letter."""
    lease = getattr(q, claim)(db, 30)
    assert lease is not None
    assert q.release(db, lease) is True


# -- reading -------------------------------------------------------------------------


def test_queue_stats_peek_dead_read_only(db: Any, fdb_subspace: Any,
                                         fdb_cluster_file: str) -> None:
    q = Queue(fdb_subspace, max_deliveries=1)
    q.push_many(db, [b"first", "second", 3, (1, b"x", None), uuid.UUID(int=5), 2.5])
    bury(db, q)
    where = [*place(fdb_subspace), "--kind", "queue"]
    before = dump(db, fdb_subspace)

    stats = answer(fdbrecipes(fdb_cluster_file, "stats", *where, "--json"))
    assert {k: stats[k] for k in ("size", "visible", "delayed", "in_flight", "dead")} == {
        "size": 5, "visible": 5, "delayed": 0, "in_flight": 0, "dead": 1}
    assert stats["kind"] == "queue" and stats["oldest_age"] >= 0
    text = ok(fdbrecipes(fdb_cluster_file, "stats", *where))
    assert text.splitlines()[0] == f"queue at tuple {fdb.tuple.unpack(fdb_subspace.key())!r}"
    assert "visible     5" in text and "dead        1" in text and "size        5" in text

    items = answer(fdbrecipes(fdb_cluster_file, "peek", *where, "--json"))["items"]
    assert items == ["second", 3, {"tuple": [1, b64(b"x"), None]},
                     {"uuid": str(uuid.UUID(int=5))}, 2.5]
    assert answer(fdbrecipes(fdb_cluster_file, "peek", *where, "--limit", "2", "--json")
                  )["items"] == ["second", 3]
    lines = ok(fdbrecipes(fdb_cluster_file, "peek", *where, "--limit", "2")).splitlines()
    assert lines[1:] == ["#  value", "1  'second'", "2  3",
                         "(--limit 2 reached: there may be more)"]

    letters = answer(fdbrecipes(fdb_cluster_file, "dead", *where, "--json"))["dead_letters"]
    assert len(letters) == 1 and letters[0]["value"] == b64(b"first")
    assert letters[0]["deliveries"] == 1
    died = datetime.fromisoformat(letters[0]["died_at"])
    assert abs(died.timestamp() - letters[0]["died_at_epoch"]) < 1
    lines = ok(fdbrecipes(fdb_cluster_file, "dead", *where)).splitlines()
    assert lines[1].split() == ["#", "deliveries", "died", "at", "(UTC)", "id", "value",
                                "reason"]
    assert lines[2].startswith("1  ") and lines[2].endswith("b'first'  -")
    assert letters[0]["reason"] is None

    assert dump(db, fdb_subspace) == before  # the reading commands wrote nothing
    assert q.items(db) == ["second", 3, (1, b"x", None), uuid.UUID(int=5), 2.5]


def test_priority_queue_both_ends_and_dead(db: Any, fdb_subspace: Any,
                                           fdb_cluster_file: str) -> None:
    pq = PriorityQueue(fdb_subspace, max_deliveries=1)
    pq.push_many(db, [("low", 1), ("high", 9), ("mid", 5), ("high too", 9), ("doomed", 0)])
    bury(db, pq, "claim_min")
    where = [*place(fdb_subspace), "--kind", "priority-queue"]
    before = dump(db, fdb_subspace)

    top = answer(fdbrecipes(fdb_cluster_file, "peek", *where, "--end", "max", "--json"))
    assert (top["end"], top["items"]) == ("max", ["high", "high too", "mid", "low"])
    bottom = answer(fdbrecipes(fdb_cluster_file, "peek", *where, "--json"))
    assert (bottom["end"], bottom["items"]) == ("min", ["low", "mid", "high", "high too"])
    lines = ok(fdbrecipes(fdb_cluster_file, "peek", *where, "--end", "max", "--limit", "1")
               ).splitlines()
    assert lines[0].endswith(", in pop_max order") and lines[2] == "1  'high'"
    stats = answer(fdbrecipes(fdb_cluster_file, "stats", *where, "--json"))
    assert (stats["size"], stats["visible"], stats["dead"]) == (4, 4, 1)
    letters = answer(fdbrecipes(fdb_cluster_file, "dead", *where, "--json"))["dead_letters"]
    assert [d["value"] for d in letters] == ["doomed"]

    assert dump(db, fdb_subspace) == before


def test_weight_tree_stats_and_peek(db: Any, fdb_subspace: Any,
                                    fdb_cluster_file: str) -> None:
    tree = WeightTree(fdb_subspace)
    handles = tree.push_many(db, [("light", 1), (b"heavy", 9), ("mid", 5)])
    where = [*place(fdb_subspace), "--kind", "weight-tree"]
    before = dump(db, fdb_subspace)

    stats = answer(fdbrecipes(fdb_cluster_file, "stats", *where, "--json"))
    assert (stats["size"], stats["total_weight"]) == (3, 15)
    assert "total weight  15" in ok(fdbrecipes(fdb_cluster_file, "stats", *where))
    items = answer(fdbrecipes(fdb_cluster_file, "peek", *where, "--json"))["items"]
    assert items == [{"value": "light", "weight": 1, "handle": handles[0].hex()},
                     {"value": b64(b"heavy"), "weight": 9, "handle": handles[1].hex()},
                     {"value": "mid", "weight": 5, "handle": handles[2].hex()}]
    lines = ok(fdbrecipes(fdb_cluster_file, "peek", *where, "--limit", "2")).splitlines()
    assert lines[1].split() == ["#", "weight", "value", "handle"]
    assert lines[2].split() == ["1", "1", "'light'", handles[0].hex()]
    assert dump(db, fdb_subspace) == before
    for command in (["dead"], ["requeue-dead", "--yes"], ["purge-dead", "--yes"]):
        line = failed(fdbrecipes(fdb_cluster_file, *command, *where), 2)
        assert line == (f"fdbrecipes {command[0]}: error: a weight-tree has no leases, "
                        "delays or dead letters (queue, priority-queue and fair-queue have)")


def test_an_empty_place_is_an_empty_structure(db: Any, fdb_subspace: Any,
                                              fdb_cluster_file: str) -> None:
    where = place(fdb_subspace)
    stats = answer(fdbrecipes(fdb_cluster_file, "stats", *where, "--kind", "queue", "--json"))
    assert (stats["size"], stats["visible"], stats["dead"], stats["oldest_age"]) == (
        0, 0, 0, None)
    assert ok(fdbrecipes(fdb_cluster_file, "peek", *where, "--kind", "priority-queue")
              ).splitlines()[1] == "(no visible items)"
    assert ok(fdbrecipes(fdb_cluster_file, "dead", *where, "--kind", "queue")
              ).splitlines()[1] == "(no dead letters)"
    tree = answer(fdbrecipes(fdb_cluster_file, "stats", *where, "--kind", "weight-tree",
                             "--json"))
    assert (tree["size"], tree["total_weight"]) == (0, 0)
    assert dump(db, fdb_subspace) == {}


def test_a_directory(db: Any, fdb_cluster_file: str) -> None:
    root = ("fdbrecipes-test", uuid.uuid4().hex)
    try:
        directory = fdb.directory.create_or_open(db, (*root, "app", "jobs"))
        q = Queue(directory)
        q.push_many(db, [b"a", b"b"])
        path = "/".join((*root, "app", "jobs"))
        before = everything(db)
        stats = answer(fdbrecipes(fdb_cluster_file, "stats", "--directory", path, "--kind",
                                  "queue", "--json"))
        assert (stats["place"], stats["size"], stats["visible"]) == (
            f"directory {path}", 2, 2)
        items = answer(fdbrecipes(fdb_cluster_file, "peek", "--directory", f"/{path}/",
                                  "--kind", "queue", "--json"))["items"]
        assert items == [b64(b"a"), b64(b"b")]
        missing = "/".join((*root, "app", "nothing"))
        line = failed(fdbrecipes(fdb_cluster_file, "stats", "--directory", missing,
                                 "--kind", "queue"), 1)
        assert line == f"fdbrecipes stats: no such directory: {missing}"
        line = failed(fdbrecipes(fdb_cluster_file, "purge-dead", "--directory", missing,
                                 "--kind", "queue", "--yes"), 1)
        assert line == f"fdbrecipes purge-dead: no such directory: {missing}"
        assert not fdb.directory.exists(db, (*root, "app", "nothing"))  # never created
        assert everything(db) == before  # nothing written, directory layer included
    finally:
        fdb.directory.remove_if_exists(db, root)


# -- writing -------------------------------------------------------------------------


def test_requeue_and_purge_need_yes(db: Any, fdb_subspace: Any,
                                    fdb_cluster_file: str) -> None:
    q = Queue(fdb_subspace, max_deliveries=1)
    q.push_many(db, [b"one", b"two", b"three", b"alive"])
    for _ in range(3):
        bury(db, q)
    where = [*place(fdb_subspace), "--kind", "queue"]
    before = dump(db, fdb_subspace)

    line = failed(fdbrecipes(fdb_cluster_file, "requeue-dead", *where, "--limit", "1"), 2)
    assert line == ("fdbrecipes requeue-dead: error: refusing to move dead letters back "
                    "into the queue without --yes")
    line = failed(fdbrecipes(fdb_cluster_file, "purge-dead", *where), 2)
    assert line == ("fdbrecipes purge-dead: error: refusing to delete dead letters for "
                    "good without --yes")
    assert dump(db, fdb_subspace) == before

    done = answer(fdbrecipes(fdb_cluster_file, "requeue-dead", *where, "--limit", "1",
                             "--yes", "--json"))
    assert done["requeued"] == 1
    assert [d.value for d in q.dead(db)] == [b"two", b"three"]
    assert q.items(db) == [b"alive", b"one"]  # back at the tail

    text = ok(fdbrecipes(fdb_cluster_file, "purge-dead", *where, "--yes"))
    assert text.endswith(": purged 2 dead letter(s)\n")
    assert q.dead(db) == [] and q.stats(db).dead == 0
    assert q.items(db) == [b"alive", b"one"]


def test_requeue_all_of_a_priority_queue(db: Any, fdb_subspace: Any,
                                         fdb_cluster_file: str) -> None:
    pq = PriorityQueue(fdb_subspace, max_deliveries=1)
    pq.push_many(db, [("a", 1), ("b", 2), ("c", 3)])
    bury(db, pq, "claim_max")
    bury(db, pq, "claim_max")
    where = [*place(fdb_subspace), "--kind", "priority-queue", "--yes"]
    assert ok(fdbrecipes(fdb_cluster_file, "requeue-dead", *where)).endswith(
        ": requeued 2 dead letter(s)\n")
    assert pq.dead(db) == []
    assert pq.items(db) == ["a", "b", "c"]  # each back at its own priority
    assert answer(fdbrecipes(fdb_cluster_file, "purge-dead", *where, "--json")
                  )["purged"] == 0


# -- errors --------------------------------------------------------------------------


def test_another_kind_is_refused(db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    name = repr(fdb.tuple.unpack(fdb_subspace.key()))
    queue_place, tree_place = fdb_subspace["q"], fdb_subspace["t"]
    pq_place = fdb_subspace["p"]
    Queue(queue_place).push(db, b"x")
    WeightTree(tree_place).push(db, b"x", 1)
    PriorityQueue(pq_place).push(db, b"x", 1)
    cases = [
        (tree_place, "queue", "keys of a weight-tree"),
        (tree_place, "priority-queue", "keys of a weight-tree"),
        (queue_place, "weight-tree", "keys of a queue"),
        (queue_place, "priority-queue", "keys of a queue"),
        (pq_place, "queue", "keys of a priority-queue"),
        (pq_place, "weight-tree", "keys of a priority-queue"),
    ]
    before = dump(db, fdb_subspace)
    for subspace, kind, found in cases:
        for command in (["stats"], ["purge-dead", "--yes"]):
            if kind == "weight-tree" and command[0] == "purge-dead":
                continue
            line = failed(fdbrecipes(fdb_cluster_file, *command, *place(subspace), "--kind",
                                     kind), 1)
            there = repr(fdb.tuple.unpack(subspace.key()))
            assert line == f"fdbrecipes {command[0]}: no {kind} at tuple {there}: found {found}"
    line = failed(fdbrecipes(fdb_cluster_file, "stats", "--tuple", name, "--kind", "queue"), 1)
    assert line.startswith(f"fdbrecipes stats: no queue at tuple {name}: found keys of no "
                           "fdbrecipes structure (first: 'p')")
    assert dump(db, fdb_subspace) == before


@pytest.mark.parametrize(("literal", "message"), [
    ('("jobs")', "is a str, not a tuple"),
    ("[1, 2]", "is a list, not a tuple"),
    ("(1,", "is not a Python literal"),
    ("({1},)", "cannot be tuple-encoded"),
])
def test_bad_tuples(db: Any, fdb_cluster_file: str, literal: str, message: str) -> None:
    line = failed(fdbrecipes(fdb_cluster_file, "stats", "--tuple", literal, "--kind",
                             "queue"), 2)
    assert line.startswith(f"fdbrecipes stats: error: --tuple {literal!r} {message}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_cluster_that_does_not_answer(db: Any, tmp_path: Path) -> None:
    cluster_file = tmp_path / "nobody.cluster"
    cluster_file.write_text(f"nobody:nobody@127.0.0.1:{free_port()}\n")
    done = subprocess.run(
        [sys.executable, "-m", "fdbrecipes", "stats", "--tuple", "('jobs',)", "--kind",
         "queue", "--cluster-file", str(cluster_file), "--timeout", "1"],
        capture_output=True, text=True, check=False, timeout=60, cwd=ROOT)
    line = failed(done, 1)
    assert line == (f"fdbrecipes stats: the cluster (cluster file {cluster_file}) did not "
                    "answer within 1 s: is it running and reachable? (--timeout SECONDS "
                    "waits longer)")


def test_a_missing_cluster_file(db: Any, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.cluster")
    line = failed(fdbrecipes(missing, "stats", "--tuple", "('jobs',)", "--kind", "queue"), 1)
    assert line == f"fdbrecipes stats: cluster file {missing} does not exist"


#: Runs the command in a process where loading libfdb_c fails, as it does where the
#: client library is not installed.
WITHOUT_LIBFDB_C = """
import ctypes, ctypes.util, sys
real = ctypes.CDLL
class NoFdb(real):
    def __init__(self, name, *args, **kwargs):
        if name and "fdb_c" in str(name):
            raise OSError(f"{name}: cannot open shared object file")
        super().__init__(name, *args, **kwargs)
ctypes.CDLL = NoFdb
ctypes.util.find_library = lambda name: None
from fdbrecipes.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_missing_client_library(fdb_cluster_file: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_LIBFDB_C, "dead", "--tuple", "('jobs',)", "--kind",
         "queue", "--cluster-file", fdb_cluster_file],
        capture_output=True, text=True, check=False, timeout=60, cwd=ROOT)
    line = failed(done, 1)
    assert line.startswith("fdbrecipes dead: cannot run: libfdb_c is not loadable: ")
    assert "run 'fdbrecipes server install'" in line


def test_max_deliveries_counts_an_expired_last_delivery_as_dead(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    q = Queue(fdb_subspace, max_deliveries=1)
    q.push(db, b"once")
    assert q.claim(db, 0.2) is not None
    # Without the limit, the expired lease's item is visible again: wait for that.
    assert Queue(fdb_subspace).wait(db, timeout=30)
    where = [*place(fdb_subspace), "--kind", "queue"]
    plain = answer(fdbrecipes(fdb_cluster_file, "stats", *where, "--json"))
    assert (plain["visible"], plain["dead"]) == (1, 0)  # the tool cannot know the limit
    told = answer(fdbrecipes(fdb_cluster_file, "stats", *where, "--max-deliveries", "1",
                             "--json"))
    assert (told["visible"], told["dead"], told["size"]) == (0, 1, 0)


# -- a fair queue: every command, one group at a time ----------------------------------


def test_every_command_works_on_a_fair_queue(db: Any, fdb_subspace: Any,
                                             fdb_cluster_file: str, tmp_path: Any) -> None:
    q = FairQueue(fdb_subspace, max_deliveries=1)
    q.set_group(db, "globex", limit=0)  # claims take acme's items only, for now
    q.push_many(db, ["a1", "a2", "a3"], group="acme")
    q.push(db, "later", group="acme", id=b"later", delay=3600)
    q.push(db, "g1", group="globex", id=b"g1")
    first = q.claim(db, 30)
    assert first is not None and q.release(db, first)  # a dead letter of acme
    assert q.claim(db, 300) is not None  # in flight
    where = place(fdb_subspace)
    run = [fdb_cluster_file]
    totals = answer(fdbrecipes(*run, "stats", *where, "--json"))  # the kind recognised
    assert totals["kind"] == "fair-queue"
    assert {k: totals[k] for k in ("groups", "visible", "delayed", "in_flight", "dead")} == {
        "groups": 2, "visible": 2, "delayed": 1, "in_flight": 1, "dead": 1}
    acme = answer(fdbrecipes(*run, "stats", *where, "--group", "acme", "--json"))
    assert (acme["group"], acme["visible"], acme["limit"], acme["share"]) == ("acme", 1, None, 1)
    assert answer(fdbrecipes(*run, "peek", *where, "--group", "globex", "--json"))[
        "items"] == ["g1"]
    assert len(answer(fdbrecipes(*run, "leases", *where, "--group", "acme", "--json"))[
        "leases"]) == 1
    assert [d["value"] for d in answer(fdbrecipes(
        *run, "delayed", *where, "--group", "acme", "--json"))["delayed"]] == ["later"]
    assert [d["value"] for d in answer(fdbrecipes(
        *run, "dead", *where, "--group", "acme", "--json"))["dead_letters"]] == ["a1"]
    ok(fdbrecipes(*run, "push", *where, "--group", "globex", "g2"))
    assert q.items(db, "globex") == ["g1", "g2"]
    assert answer(fdbrecipes(*run, "remove", *where, "--group", "globex", "--id", "g1",
                             "--yes", "--json"))["removed"] is True
    assert answer(fdbrecipes(*run, "requeue-dead", *where, "--group", "acme", "--yes",
                             "--json"))["requeued"] == 1
    assert answer(fdbrecipes(*run, "purge-dead", *where, "--group", "acme", "--yes",
                             "--json"))["purged"] == 0
    assert "give --group GROUP" in failed(fdbrecipes(*run, "dead", *where), 2)
    assert "found keys of a fair-queue" in failed(
        fdbrecipes(*run, "stats", *where, "--kind", "queue"), 1)
    q.set_group(db, "globex", limit=5)
    (tmp_path / "fair_jobs_for_test.py").write_text("def handle(job):\n    pass\n")
    done = subprocess.run(
        [sys.executable, "-m", "fdbrecipes", "worker", "fair_jobs_for_test:handle", *where,
         "--cluster-file", fdb_cluster_file, "--burst"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert q.items(db, "acme") == [] and q.items(db, "globex") == []
    assert [d.value for d in q.delayed(db, "acme")] == ["later"]
