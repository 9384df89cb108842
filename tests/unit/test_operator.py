"""The operator commands without a server: parsing, usage errors, the JSON encoding,
tables, kind detection (on a stand-in transaction holding keys the library's layouts
make) and each command's output (with the library's methods standing in)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
import uuid
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import fdb.tuple
import pytest
from fdb.subspace_impl import Subspace

from fdbrecipes import DeadLetter, PriorityQueue, Queue, QueueStats, WeightTree, cli
from fdbrecipes._layout import OrderedLayout, TreeLayout
from fdbrecipes.admin import arguments, commands, places
from fdbrecipes.admin.output import cut, iso_time, json_value, table
from fdbrecipes.admin.places import (
    NEUTRAL,
    QUEUE_ITEM_LEN,
    QUEUE_KEYS,
    QUEUE_RANGES,
    TREE_KEYS,
    TREE_RANGES,
    OperatorError,
    Place,
    UsageError,
)
from fdbrecipes.errors import FdbRecipesError

ROOT = Path(__file__).resolve().parents[2]
JOBS = ["--tuple", "('jobs',)"]
S = Subspace(("jobs",))


def one_line(text: str) -> str:
    """``text`` if it is exactly one line (ending in a newline)."""
    assert text.endswith("\n") and text.count("\n") == 1, text
    return text.rstrip("\n")


# -- parsing ---------------------------------------------------------------------------


def parse(*argv: str) -> Any:
    return cli.build_parser().parse_args(list(argv))


def test_defaults() -> None:
    args = parse("peek", *JOBS, "--kind", "queue")
    assert (args.limit, args.end, args.json, args.timeout, args.cluster_file,
            args.directory, args.tuple_literal, args.max_deliveries) == (
        10, None, False, 10.0, None, None, "('jobs',)", None)
    assert parse("dead", "--directory", "a/b", "--kind", "queue").limit == 100
    requeue = parse("requeue-dead", *JOBS, "--kind", "queue")
    assert (requeue.limit, requeue.yes) == (None, False)
    assert parse("purge-dead", *JOBS, "--kind", "queue", "--yes").yes is True
    full = parse("peek", "--directory", "app/jobs", "--kind", "priority-queue", "--end",
                 "max", "--limit", "3", "--json", "--cluster-file", "c", "--timeout", "2.5",
                 "--max-deliveries", "4")
    assert (full.directory, full.kind, full.end, full.limit, full.json, full.cluster_file,
            full.timeout, full.max_deliveries) == (
        "app/jobs", "priority-queue", "max", 3, True, "c", 2.5, 4)


@pytest.mark.parametrize("argv", [
    ["stats", "--kind", "queue"],                                  # no place
    ["stats", *JOBS, "--directory", "a", "--kind", "queue"],       # two places
    ["stats", *JOBS],                                              # no kind
    ["stats", *JOBS, "--kind", "stack"],
    ["peek", *JOBS, "--kind", "queue", "--limit", "0"],
    ["peek", *JOBS, "--kind", "queue", "--limit", "x"],
    ["peek", *JOBS, "--kind", "priority-queue", "--end", "middle"],
    ["stats", *JOBS, "--kind", "queue", "--timeout", "0"],
    ["stats", *JOBS, "--kind", "queue", "--max-deliveries", "-1"],
    ["purge-dead", *JOBS, "--kind", "queue", "--limit", "3"],      # purge takes all
    ["stats", *JOBS, "--kind", "queue", "--yes"],                  # reading: no --yes
])
def test_argparse_refuses(argv: List[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_parse_directory() -> None:
    assert arguments.parse_directory("app/jobs") == Place(directory=("app", "jobs"))
    assert arguments.parse_directory("/app/jobs/") == Place(directory=("app", "jobs"))
    assert str(arguments.parse_directory("app")) == "directory app"
    for bad in ("", "/", "a//b"):
        with pytest.raises(UsageError, match="path like app/jobs"):
            arguments.parse_directory(bad)


def test_parse_tuple() -> None:
    assert arguments.parse_tuple("('jobs',)") == Place(prefix=("jobs",))
    place = arguments.parse_tuple("('a', 1, b'\\x00', (2, None), True)")
    assert place.prefix == ("a", 1, b"\x00", (2, None), True)
    assert str(place) == "tuple ('a', 1, b'\\x00', (2, None), True)"
    assert arguments.parse_tuple("()").prefix == ()


@pytest.mark.parametrize(("literal", "message"), [
    ('("jobs")', "is a str, not a tuple"),
    ("[1]", "is a list, not a tuple"),
    ("7", "is a int, not a tuple"),
    ("(", "is not a Python literal"),
    ("jobs", "is not a Python literal"),
    ("__import__('os')", "is not a Python literal"),
    ("({1},)", "cannot be tuple-encoded"),
    ("({'a': 1},)", "cannot be tuple-encoded"),
])
def test_bad_tuples_are_one_line_usage_errors(
    literal: str, message: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(commands, "connect", never_connect)
    with pytest.raises(UsageError, match="--tuple"):
        arguments.parse_tuple(literal)
    assert cli.main(["stats", "--tuple", literal, "--kind", "queue"]) == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert line.startswith("fdbrecipes stats: error: --tuple ") and message in line
    assert captured.out == ""


# -- usage errors: refused before any connection -----------------------------------


def never_connect(args: Any) -> Any:
    pytest.fail("a command refused by its command line must not connect")


@pytest.mark.parametrize(("argv", "message"), [
    (["requeue-dead", *JOBS, "--kind", "queue"],
     "refusing to move dead letters back into the queue without --yes"),
    (["requeue-dead", *JOBS, "--kind", "priority-queue", "--limit", "5"],
     "refusing to move dead letters back into the queue without --yes"),
    (["purge-dead", "--directory", "app/jobs", "--kind", "queue"],
     "refusing to delete dead letters for good without --yes"),
    (["dead", *JOBS, "--kind", "weight-tree"], "a weight-tree has no dead letters"),
    (["requeue-dead", *JOBS, "--kind", "weight-tree", "--yes"],
     "a weight-tree has no dead letters"),
    (["purge-dead", *JOBS, "--kind", "weight-tree", "--yes"],
     "a weight-tree has no dead letters"),
    (["peek", *JOBS, "--kind", "queue", "--end", "max"],
     "--end applies to --kind priority-queue only"),
    (["stats", *JOBS, "--kind", "weight-tree", "--max-deliveries", "3"],
     "--max-deliveries applies to queue kinds only"),
    (["stats", "--directory", "a//b", "--kind", "queue"], "path like app/jobs"),
])
def test_usage_errors_refuse_without_connecting(
    argv: List[str], message: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(commands, "connect", never_connect)
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert line.startswith(f"fdbrecipes {argv[0]}: error: ") and message in line
    assert captured.out == ""


def test_a_refusal_loads_no_client_library() -> None:
    code = ("import sys; from fdbrecipes.cli import main; "
            "status = main(['purge-dead', '--tuple', \"('jobs',)\", '--kind', 'queue']); "
            "print(status, 'fdb.impl' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=60, cwd=ROOT)
    assert done.stdout.strip() == "2 False", done.stderr
    assert one_line(done.stderr).startswith("fdbrecipes purge-dead: error: refusing")


# -- connecting ----------------------------------------------------------------------


def test_a_missing_client_library_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(commands, "client_library_problem",
                        lambda: "libfdb_c is not loadable (gone): install it")
    assert cli.main(["stats", *JOBS, "--kind", "queue"]) == 1
    assert one_line(capsys.readouterr().err) == (
        "fdbrecipes stats: cannot run: libfdb_c is not loadable (gone): install it")


def test_the_real_client_library_check_is_one_line(tmp_path: Any) -> None:
    """Where libfdb_c is missing, the command says so in one line; where it is
    installed, it gets past that check (and fails, in one line, on a cluster file
    that does not exist)."""
    from fdbrecipes._cluster import client_library_problem

    problem = client_library_problem()
    missing = str(tmp_path / "no.cluster")
    done = subprocess.run([sys.executable, "-m", "fdbrecipes", "dead", *JOBS, "--kind",
                           "queue", "--cluster-file", missing], capture_output=True,
                          text=True, check=False, timeout=60, cwd=ROOT)
    assert done.returncode == 1 and done.stdout == ""
    if problem is not None:
        assert one_line(done.stderr) == f"fdbrecipes dead: cannot run: {problem}"
    else:
        assert "libfdb_c" not in done.stderr and missing in one_line(done.stderr)


def test_a_missing_cluster_file_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(commands, "client_library_problem", no_problem)
    missing = str(tmp_path / "none.cluster")
    assert cli.main(["peek", *JOBS, "--kind", "queue", "--cluster-file", missing]) == 1
    assert one_line(capsys.readouterr().err) == (
        f"fdbrecipes peek: cluster file {missing} does not exist")


def no_problem() -> Optional[str]:
    return None


class FakeFDBError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code
        self.description = "Operation aborted because the transaction timed out"


def test_fdb_errors_are_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "fdb.impl", types.SimpleNamespace(FDBError=FakeFDBError))
    monkeypatch.delenv("FDB_CLUSTER_FILE", raising=False)

    def timed_out(args: Any) -> Any:
        raise FakeFDBError(1031)

    def other(args: Any) -> Any:
        raise FakeFDBError(2104)

    monkeypatch.setattr(commands, "connect", timed_out)
    assert cli.main(["stats", *JOBS, "--kind", "queue", "--timeout", "3",
                     "--cluster-file", "x.cluster"]) == 1
    assert one_line(capsys.readouterr().err) == (
        "fdbrecipes stats: the cluster (cluster file x.cluster) did not answer within 3 s: "
        "is it running and reachable? (--timeout SECONDS waits longer)")
    monkeypatch.setattr(commands, "connect", other)
    assert cli.main(["stats", *JOBS, "--kind", "queue"]) == 1
    assert one_line(capsys.readouterr().err) == (
        "fdbrecipes stats: FoundationDB error 2104 (Operation aborted because the "
        "transaction timed out) with the default cluster file")


def test_other_errors_are_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: Any) -> Any:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(commands, "connect", broken)
    with pytest.raises(ZeroDivisionError):
        cli.main(["stats", *JOBS, "--kind", "queue"])


# -- the JSON encoding and tables ------------------------------------------------------


def test_json_values() -> None:
    u = uuid.UUID(int=7)
    assert json_value("é") == "é"
    assert json_value(-(2**100)) == -(2**100)
    assert json_value(True) is True and json_value(False) is False
    assert json_value(1.5) == 1.5 and str(json_value(-0.0)) == "-0.0"
    assert json_value(b"\x00\xff") == {"bytes": "AP8="}
    assert json_value(b"") == {"bytes": ""}
    assert json_value(u) == {"uuid": "00000000-0000-0000-0000-000000000007"}
    assert json_value((1, (b"a", None), ())) == {
        "tuple": [1, {"tuple": [{"bytes": "YQ=="}, None]}, {"tuple": []}]}
    assert json_value(float("nan")) == {"float": "nan"}
    assert json_value(float("inf")) == {"float": "inf"}
    assert json_value(float("-inf")) == {"float": "-inf"}
    assert json_value(fdb.tuple.SingleFloat(1.5)) == {"repr": "SingleFloat(1.5)"}
    stamp = fdb.tuple.Versionstamp(b"\x01" * 10)
    assert json_value(stamp) == {"repr": repr(stamp)}
    everything = [b"x", "s", 1, 2.5, True, u, (None, float("nan")), stamp]
    text = json.dumps([json_value(v) for v in everything], allow_nan=False)
    assert json.loads(text)[0] == {"bytes": "eA=="}


def test_tables() -> None:
    assert table([("1", "b'a'"), ("10", "'long value'")], ("#", "value")) == (
        "#   value\n1   b'a'\n10  'long value'")
    assert table([("size", "3"), ("visible", "12")]) == "size     3\nvisible  12"
    assert table([]) == ""
    assert cut("x" * 80) == "x" * 80
    assert cut("x" * 81) == "x" * 77 + "..."
    assert cut("abcdef", 5) == "ab..."
    assert iso_time(0) == "1970-01-01T00:00:00+00:00"
    assert iso_time(1_700_000_000.75) == "2023-11-14T22:13:20+00:00"


# -- what is stored at a place ---------------------------------------------------------


class KV(NamedTuple):
    key: bytes
    value: bytes


class Ready:
    """A future that is ready."""

    def __init__(self, value: Optional[bytes]) -> None:
        self.value = value

    def wait(self) -> Ready:
        return self


class Reader:
    """Stands in for a transaction over ``data``: the reads survey makes."""

    def __init__(self, data: Dict[bytes, bytes]) -> None:
        self.data = data
        self.snapshot = self

    def get(self, key: bytes) -> Ready:
        return Ready(self.data.get(bytes(key)))

    def get_range(self, begin: bytes, end: bytes, limit: int = 0) -> List[KV]:
        kvs = [KV(k, v) for k, v in sorted(self.data.items()) if begin <= k < end]
        return kvs[:limit] if limit else kvs


def queue_keys(group: Tuple[Any, ...] = (), where: str = "items") -> Dict[bytes, bytes]:
    layout = OrderedLayout(S, len(group))
    item = layout.new_item(group, 1, None, 0)
    key = {"items": layout.item_key(item),
           "held": layout.held_key(os.urandom(16), item, 10, 0),
           "dead": layout.dead_letter_key(10, item, 1.7e9)}[where]
    return {key: fdb.tuple.pack((b"v",)), layout.pushed: bytes(8), layout.taken: bytes(8)}


def tree_keys(items: bool = True) -> Dict[bytes, bytes]:
    t = TreeLayout(S)
    data = {t.total_key: bytes(8), t.pushed: bytes(8), t.taken: bytes(8)}
    if items:
        key = (1, os.urandom(20))
        data[t.leaves.pack(key)] = bytes(8)
        data[t.values.pack(key)] = fdb.tuple.pack((b"v",))
        data[t.nodes.pack((1, 0))] = bytes(8)
    return data


def survey(data: Dict[bytes, bytes], kind: str) -> Optional[str]:
    return places.survey(Reader(data), S, kind)


def test_markers_follow_the_library_layout() -> None:
    q, pq, t = OrderedLayout(S, 0), OrderedLayout(S, 1), TreeLayout(S)
    assert [s.key() for s in (q.items, q.held, q.due, q.dead)] == [
        S[m].key() for m in QUEUE_RANGES]
    assert q.items.contains(q.floor_key)  # a Queue's floor is among its items
    assert [pq.floor_key] == [S.pack((m,)) for m in QUEUE_KEYS]
    assert [s.key() for s in (t.leaves, t.values, t.nodes)] == [
        S[m].key() for m in TREE_RANGES]
    assert [t.total_key] == [S.pack((m,)) for m in TREE_KEYS]
    counters = (q.pushed, q.taken, q.held_in, q.held_out, q.delayed_in, q.delayed_out,
                q.dead_in, q.dead_out, t.pushed, t.taken)
    assert all(S["n"].contains(key) for key in counters) and "n" in NEUTRAL
    assert q.wake_key == q.pushed and t.wake_key == t.pushed
    assert {r[0] for r in q.kept_by_clear()} >= {S["c"].range().start}
    assert set(NEUTRAL) >= {"c", "g", "k"}
    assert len(q.new_item((), 0, None, 0)) == QUEUE_ITEM_LEN
    assert len(pq.new_item((3,), 0, None, 0)) == QUEUE_ITEM_LEN + 1


@pytest.mark.parametrize("kind", ["queue", "priority-queue", "weight-tree"])
def test_an_empty_place_is_any_kind(kind: str) -> None:
    assert survey({}, kind) is None
    neutral = {S.pack(("c", 5, b"id")): b"", S.pack(("n", "pushed")): bytes(8),
               S.pack(("n", "taken")): bytes(8), S.pack(("k", b"id")): b""}
    assert survey(neutral, kind) is None


@pytest.mark.parametrize("where", ["items", "held", "dead"])
def test_queue_and_priority_queue_told_apart(where: str) -> None:
    assert survey(queue_keys((), where), "queue") is None
    assert survey(queue_keys((), where), "priority-queue") == "keys of a queue"
    assert survey(queue_keys((), where), "weight-tree") == "keys of a queue"
    assert survey(queue_keys((5,), where), "priority-queue") is None
    assert survey(queue_keys((5,), where), "queue") == "keys of a priority-queue"
    assert survey(queue_keys((5,), where), "weight-tree") == "keys of a priority-queue"


def test_counters_alone_fit_every_kind() -> None:
    counters = {OrderedLayout(S, 0).pushed: bytes(8), OrderedLayout(S, 0).taken: bytes(8)}
    for kind in ("queue", "priority-queue", "weight-tree"):
        assert survey(counters, kind) is None
    assert survey({OrderedLayout(S, 1).floor_key: bytes(8)}, "weight-tree") == (
        "keys of a queue")


@pytest.mark.parametrize("items", [True, False])
def test_weight_tree_keys(items: bool) -> None:
    assert survey(tree_keys(items), "weight-tree") is None
    assert survey(tree_keys(items), "queue") == "keys of a weight-tree"
    assert survey(tree_keys(items), "priority-queue") == "keys of a weight-tree"


def test_both_kinds_or_foreign_keys_are_refused() -> None:
    mixed = {**queue_keys(), **tree_keys()}
    for kind in ("queue", "weight-tree"):
        assert survey(mixed, kind) == "keys of both a queue and a weight-tree"
    foreign = {S.pack(("q", "i", 1)): b""}
    assert survey(foreign, "queue") == "keys of no fdbrecipes structure (first: 'q')"
    raw = {S.key() + b"\x99raw": b""}
    assert (survey(raw, "queue") or "").startswith("keys of no fdbrecipes structure")
    # outside the place: not looked at
    assert survey({Subspace(("jobz",)).pack(("x",)): b""}, "queue") is None


# -- the commands, with the library's methods standing in ----------------------------


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Dict[bytes, bytes]:
    """Run the commands without a cluster: ``connect`` gives a stand-in database, and
    transactions read the returned dict (empty: an empty place)."""
    data: Dict[bytes, bytes] = {}

    def connect(args: Any) -> str:
        return "db"

    def read_only(db: Any, op: Any, *args: Any) -> Any:
        assert db == "db"
        return op(Reader(data), *args)

    monkeypatch.setattr(commands, "connect", connect)
    monkeypatch.setattr(commands, "read_only", read_only)
    return data


def run(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> str:
    assert cli.main(list(argv)) == status
    captured = capsys.readouterr()
    if status:
        assert captured.out == ""
        return one_line(captured.err)
    assert captured.err == ""
    return captured.out


def test_stats(offline: Dict[bytes, bytes], monkeypatch: pytest.MonkeyPatch,
               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(Queue, "stats", lambda self, tr: QueueStats(3, 1, 2, 4, 1.25))
    monkeypatch.setattr(Queue, "size", lambda self, tr: 6)
    assert run(capsys, "stats", *JOBS, "--kind", "queue") == (
        "queue at tuple ('jobs',)\nsize        6\nvisible     3\ndelayed     1\n"
        "in flight   2\ndead        4\noldest age  1.2 s\n")
    assert json.loads(run(capsys, "stats", *JOBS, "--kind", "queue", "--json")) == {
        "kind": "queue", "place": "tuple ('jobs',)", "size": 6, "visible": 3,
        "delayed": 1, "in_flight": 2, "dead": 4, "oldest_age": 1.25}
    monkeypatch.setattr(PriorityQueue, "stats", lambda self, tr: QueueStats(0, 0, 0, 0, None))
    monkeypatch.setattr(PriorityQueue, "size", lambda self, tr: 0)
    assert "oldest age  -\n" in run(capsys, "stats", *JOBS, "--kind", "priority-queue")
    monkeypatch.setattr(WeightTree, "size", lambda self, tr: 1234)
    monkeypatch.setattr(WeightTree, "total_weight", lambda self, tr: 10**6)
    assert run(capsys, "stats", *JOBS, "--kind", "weight-tree") == (
        "weight-tree at tuple ('jobs',)\nsize          1,234\ntotal weight  1,000,000\n")
    assert json.loads(run(capsys, "stats", *JOBS, "--kind", "weight-tree", "--json")) == {
        "kind": "weight-tree", "place": "tuple ('jobs',)", "size": 1234,
        "total_weight": 10**6}


def test_peek(offline: Dict[bytes, bytes], monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str]) -> None:
    calls: List[Any] = []

    def queue_items(self: Any, tr: Any, limit: Optional[int] = None) -> List[Any]:
        calls.append((tr, limit))
        return [b"a", "b", (1, uuid.UUID(int=1)), "x" * 100][: limit or 4]

    def pq_items(self: Any, tr: Any, limit: Optional[int] = None,
                 reverse: bool = False) -> List[Any]:
        calls.append((tr, limit, reverse))
        return ["high", "low"] if reverse else ["low", "high"]

    monkeypatch.setattr(Queue, "items", queue_items)
    monkeypatch.setattr(PriorityQueue, "items", pq_items)
    out = run(capsys, "peek", *JOBS, "--kind", "queue")
    assert calls.pop() == ("db", 10)
    assert out.splitlines() == [
        "queue at tuple ('jobs',)", "#  value", "1  b'a'", "2  'b'",
        "3  (1, UUID('00000000-0000-0000-0000-000000000001'))", "4  '" + "x" * 76 + "..."]
    out = run(capsys, "peek", *JOBS, "--kind", "queue", "--limit", "2")
    assert out.splitlines()[-1] == "(--limit 2 reached: there may be more)"
    assert json.loads(run(capsys, "peek", *JOBS, "--kind", "queue", "--json")) == {
        "kind": "queue", "place": "tuple ('jobs',)",
        "items": [{"bytes": "YQ=="}, "b", {"tuple": [1, {"uuid": str(uuid.UUID(int=1))}]},
                  "x" * 100]}
    out = run(capsys, "peek", *JOBS, "--kind", "priority-queue", "--end", "max")
    assert calls.pop() == ("db", 10, True)
    assert out.splitlines()[:3] == [
        "priority-queue at tuple ('jobs',), in pop_max order", "#  value", "1  'high'"]
    data = json.loads(run(capsys, "peek", *JOBS, "--kind", "priority-queue", "--json"))
    assert calls.pop() == ("db", 10, False)
    assert (data["end"], data["items"]) == ("min", ["low", "high"])


def test_peek_of_empty_structures(offline: Dict[bytes, bytes], monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(Queue, "items", lambda self, tr, limit=None: [])
    monkeypatch.setattr(WeightTree, "items", lambda self, tr, limit=None: [])
    assert run(capsys, "peek", *JOBS, "--kind", "queue") == (
        "queue at tuple ('jobs',)\n(no visible items)\n")
    assert run(capsys, "peek", *JOBS, "--kind", "weight-tree") == (
        "weight-tree at tuple ('jobs',), in point order\n(no items)\n")
    assert json.loads(run(capsys, "peek", *JOBS, "--kind", "queue", "--json"))["items"] == []


def test_peek_of_a_weight_tree(offline: Dict[bytes, bytes], monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    def items(self: Any, tr: Any, limit: Optional[int] = None) -> List[Any]:
        assert (tr, limit) == ("db", 5)
        return [(b"\x01\x02", "heavy", 9000), (b"\xff", b"light", 1)]

    monkeypatch.setattr(WeightTree, "items", items)
    assert run(capsys, "peek", *JOBS, "--kind", "weight-tree", "--limit", "5") == (
        "weight-tree at tuple ('jobs',), in point order\n"
        "#  weight  value     handle\n"
        "1  9,000   'heavy'   0102\n"
        "2  1       b'light'  ff\n")
    assert json.loads(run(capsys, "peek", *JOBS, "--kind", "weight-tree", "--limit", "5",
                          "--json"))["items"] == [
        {"value": "heavy", "weight": 9000, "handle": "0102"},
        {"value": {"bytes": "bGlnaHQ="}, "weight": 1, "handle": "ff"}]


def test_dead(offline: Dict[bytes, bytes], monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str]) -> None:
    def dead(self: Any, tr: Any, limit: Optional[int] = None) -> List[DeadLetter]:
        assert (tr, limit) == ("db", 100)
        return [DeadLetter(b"job", 3, 1_700_000_000.5, b"\x01t")]

    monkeypatch.setattr(Queue, "dead", dead)
    assert run(capsys, "dead", *JOBS, "--kind", "queue") == (
        "queue at tuple ('jobs',)\n"
        "#  deliveries  died at (UTC)              value\n"
        "1  3           2023-11-14T22:13:20+00:00  b'job'\n")
    assert json.loads(run(capsys, "dead", *JOBS, "--kind", "queue", "--json")) == {
        "kind": "queue", "place": "tuple ('jobs',)", "dead_letters": [
            {"value": {"bytes": "am9i"}, "deliveries": 3,
             "died_at": "2023-11-14T22:13:20+00:00", "died_at_epoch": 1_700_000_000.5,
             "token": "0174"}]}
    monkeypatch.setattr(PriorityQueue, "dead", lambda self, tr, limit=None: [])
    assert run(capsys, "dead", *JOBS, "--kind", "priority-queue") == (
        "priority-queue at tuple ('jobs',)\n(no dead letters)\n")


def test_requeue_and_purge(offline: Dict[bytes, bytes], monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    calls: List[Any] = []

    def requeue_dead(self: Any, tr: Any, limit: Optional[int] = None) -> int:
        calls.append(("requeue", type(self).__name__, tr, limit))
        return 2

    def purge_dead(self: Any, tr: Any) -> int:
        calls.append(("purge", type(self).__name__, tr))
        return 1234

    monkeypatch.setattr(Queue, "requeue_dead", requeue_dead)
    monkeypatch.setattr(PriorityQueue, "purge_dead", purge_dead)
    assert run(capsys, "requeue-dead", *JOBS, "--kind", "queue", "--yes", "--limit", "5") == (
        "queue at tuple ('jobs',): requeued 2 dead letter(s)\n")
    assert json.loads(run(capsys, "requeue-dead", *JOBS, "--kind", "queue", "--yes",
                          "--json")) == {"kind": "queue", "place": "tuple ('jobs',)",
                                         "requeued": 2}
    assert run(capsys, "purge-dead", *JOBS, "--kind", "priority-queue", "--yes") == (
        "priority-queue at tuple ('jobs',): purged 1,234 dead letter(s)\n")
    assert calls == [("requeue", "Queue", "db", 5), ("requeue", "Queue", "db", None),
                     ("purge", "PriorityQueue", "db")]


def test_max_deliveries_reaches_the_structure(
    offline: Dict[bytes, bytes], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen: List[Any] = []

    def items(self: Any, tr: Any, limit: Optional[int] = None) -> List[Any]:
        seen.append(self._engine.max_deliveries)
        return []

    monkeypatch.setattr(Queue, "items", items)
    run(capsys, "peek", *JOBS, "--kind", "queue", "--max-deliveries", "3")
    run(capsys, "peek", *JOBS, "--kind", "queue")
    assert seen == [3, None]


def test_another_kind_at_the_place_is_refused(
    offline: Dict[bytes, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    offline.update(tree_keys())
    assert run(capsys, "stats", *JOBS, "--kind", "queue", status=1) == (
        "fdbrecipes stats: no queue at tuple ('jobs',): found keys of a weight-tree")
    offline.clear()
    offline.update(queue_keys((7,)))
    assert run(capsys, "purge-dead", *JOBS, "--kind", "queue", "--yes", status=1) == (
        "fdbrecipes purge-dead: no queue at tuple ('jobs',): found keys of a priority-queue")


def test_no_such_directory_is_one_line(
    offline: Dict[bytes, bytes], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def no_directory(tr: Any, place: Place) -> Any:
        raise OperatorError("no such directory: app/jobs")

    monkeypatch.setattr(commands, "open_place", no_directory)
    assert run(capsys, "stats", "--directory", "app/jobs", "--kind", "queue",
               status=1) == "fdbrecipes stats: no such directory: app/jobs"


def test_library_errors_and_interrupts_are_one_line(
    offline: Dict[bytes, bytes], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def too_large(self: Any, tr: Any, limit: Optional[int] = None) -> int:
        raise FdbRecipesError("work too large:\nsplit it")

    def interrupted(self: Any, tr: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(Queue, "requeue_dead", too_large)
    monkeypatch.setattr(Queue, "purge_dead", interrupted)
    assert run(capsys, "requeue-dead", *JOBS, "--kind", "queue", "--yes", status=1) == (
        "fdbrecipes requeue-dead: work too large: split it")
    assert run(capsys, "purge-dead", *JOBS, "--kind", "queue", "--yes", status=130) == (
        "fdbrecipes purge-dead: interrupted")


def test_open_place_of_a_tuple_needs_no_reads() -> None:
    subspace = places.open_place(None, Place(prefix=("jobs", 1)))
    assert subspace.key() == Subspace(("jobs", 1)).key()
    assert isinstance(places.make_structure("queue", S, 2), Queue)
    assert isinstance(places.make_structure("priority-queue", S, None), PriorityQueue)
    assert isinstance(places.make_structure("weight-tree", S, None), WeightTree)
