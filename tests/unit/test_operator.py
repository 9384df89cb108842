"""The operator commands without a server: parsing, usage errors, the JSON encoding,
tables, kind detection (on a stand-in transaction holding keys the library's layouts
make) and each command's output (with the library's methods standing in)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, List

import fdb.tuple
import pytest
from fdb.subspace_impl import Subspace

from fdbrecipes import FairQueue, PriorityQueue, Queue, WeightTree, cli
from fdbrecipes._layout import (
    FAIR_FOOTPRINT,
    LEFT_BEHIND,
    ORDERED_FOOTPRINT,
    TREE_FOOTPRINT,
    FairLayout,
    OrderedLayout,
    RecordLayout,
    TreeLayout,
)
from fdbrecipes.admin import arguments, commands, places
from fdbrecipes.admin.output import cut, id_json, id_text, iso_time, json_value, printable, table
from fdbrecipes.admin.places import Place, UsageError

#: What tells each structure's keys, by the first element of its keys (the layout's
#: footprints, which the kind records and the operator commands read).
QUEUE_RANGES, QUEUE_KEYS = ORDERED_FOOTPRINT.ranges, ORDERED_FOOTPRINT.keys
TREE_RANGES, TREE_KEYS = TREE_FOOTPRINT.ranges, TREE_FOOTPRINT.keys
FAIR_RANGES, (FAIR_WAKES, RECORDS_INDEX) = FAIR_FOOTPRINT.ranges, FAIR_FOOTPRINT.traces
NEUTRAL, QUEUE_ITEM_LEN = LEFT_BEHIND, OrderedLayout.ITEM_LEN

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
) -> None:
    """Exit 2 and the --tuple line: refused before connecting (a connection to the
    default cluster would end otherwise)."""
    with pytest.raises(UsageError, match="--tuple"):
        arguments.parse_tuple(literal)
    assert cli.main(["stats", "--tuple", literal, "--kind", "queue"]) == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert line.startswith("fdbrecipes stats: error: --tuple ") and message in line
    assert captured.out == ""


# -- usage errors: refused before any connection -----------------------------------


@pytest.mark.parametrize(("argv", "message"), [
    (["requeue-dead", *JOBS, "--kind", "queue"],
     "refusing to move dead letters back into the queue without --yes"),
    (["requeue-dead", *JOBS, "--kind", "priority-queue", "--limit", "5"],
     "refusing to move dead letters back into the queue without --yes"),
    (["purge-dead", "--directory", "app/jobs", "--kind", "queue"],
     "refusing to delete dead letters for good without --yes"),
    (["dead", *JOBS, "--kind", "weight-tree"],
     "a weight-tree has no leases, delays or dead letters"),
    (["requeue-dead", *JOBS, "--kind", "weight-tree", "--yes"],
     "a weight-tree has no leases, delays or dead letters"),
    (["purge-dead", *JOBS, "--kind", "weight-tree", "--yes"],
     "a weight-tree has no leases, delays or dead letters"),
    (["peek", *JOBS, "--kind", "queue", "--end", "max"],
     "--end applies to --kind priority-queue only"),
    (["stats", *JOBS, "--kind", "weight-tree", "--max-deliveries", "3"],
     "--max-deliveries applies to queue kinds only"),
    (["stats", "--directory", "a//b", "--kind", "queue"], "path like app/jobs"),
    (["dead", *JOBS, "--kind", "fair-queue"],
     "a fair-queue keeps a queue per group: give --group GROUP"),
    (["remove", *JOBS, "--kind", "fair-queue", "--id", "x", "--yes"],
     "a fair-queue keeps a queue per group: give --group GROUP"),
    (["peek", *JOBS, "--kind", "queue", "--group", "acme"],
     "--group applies to --kind fair-queue only"),
])
def test_usage_errors_refuse_without_connecting(
    argv: List[str], message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """Exit 2 with the usage line: refused before connecting (the subprocess test
    below shows that not even the client library is loaded)."""
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


# -- what is stored at a place (the rest runs against a server: test_operator_cli.py) --


def test_markers_follow_the_library_layout() -> None:
    q, pq, t = OrderedLayout(S, 0), OrderedLayout(S, 1), TreeLayout(S)
    assert [s.key() for s in (q.items, q.held, q.due, q.dead)] == [
        S[m].key() for m in QUEUE_RANGES]
    assert q.items.contains(q.floor_key)  # a Queue's floor is among its items
    assert [pq.floor_key, q.paused] == [S.pack((m,)) for m in QUEUE_KEYS]
    assert q.paused == pq.paused == q.due.key()  # the deadlines' prefix: before them all
    assert q.paused < q.due_range.start
    assert FairLayout(S).paused == S.pack(("z",)) and "z" in NEUTRAL
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
    assert [FairLayout(S).active.key()] == [S[m].key() for m in FAIR_RANGES]
    fair = FairLayout(S)
    assert (fair.wakes.key(), fair.expiry.key()) == (S[FAIR_WAKES].key(),
                                                     S[RECORDS_INDEX].key())
    assert fair.wake_key(7, "acme") == S[FAIR_WAKES].pack((7, "acme"))  # a time, a group
    records = RecordLayout(fair.groups["acme"], fair.expiry, ("acme",))
    assert records.expiry_key(1.5, b"x") == S[RECORDS_INDEX].pack((1.5, "acme", b"x"))
    assert RecordLayout(S, S["o"]).expiry_key(1.5, b"x") == S["o"].pack((1.5, b"x"))


def test_a_schedule_store_is_told_by_a_key_no_structure_writes() -> None:
    from fdbrecipes._store_layout import SCHEDULES, ScheduleLayout

    store = ScheduleLayout(S)
    assert store.version == S.pack((SCHEDULES,))
    structures = set(QUEUE_RANGES + QUEUE_KEYS + TREE_RANGES + TREE_KEYS + FAIR_RANGES + NEUTRAL)
    firsts = {SCHEDULES, *(S.unpack(s.key())[0] for s in (store.definitions, store.states))}
    assert not firsts & structures
    assert store.definitions.contains(store.definition("a"))
    assert store.states.contains(store.state("a"))


def test_open_place_of_a_tuple_needs_no_reads() -> None:
    subspace = places.open_place(None, Place(prefix=("jobs", 1)))
    assert subspace.key() == Subspace(("jobs", 1)).key()
    assert isinstance(places.make_structure("queue", S, 2), Queue)
    assert isinstance(places.make_structure("priority-queue", S, None), PriorityQueue)
    assert isinstance(places.make_structure("weight-tree", S, None), WeightTree)
    assert isinstance(places.make_structure("fair-queue", S, None), FairQueue)


# -- what reaches the terminal ------------------------------------------------------------

#: What a stored reason or error may hold to act on a terminal: an escape sequence, a
#: carriage return over the line, NUL, backspace, a C1 control (CSI), a right-to-left
#: override and an isolate, the line separator, and a lone surrogate.
HOSTILE = "ok\x1b[31mred\rover\x00\x08\x9b2J\u202eevil\u2066\u2028\udcff"


def test_printable_escapes_what_a_terminal_acts_on() -> None:
    shown = printable(HOSTILE)
    assert shown == ("ok\\x1b[31mred\\x0dover\\x00\\x08\\x9b2J\\u202eevil\\u2066\\u2028"
                     "\\udcff")
    assert shown.isprintable() and shown.isascii()
    assert printable("line 1\nline 2\r\n", newlines=True) == "line 1\nline 2\\x0d\n"
    assert printable("a\nb") == "a\\x0ab"
    plain = "café 東京 \\x1b ✓ 'quoted' (1, b'\\xff')"
    assert printable(plain) == plain and printable(plain, newlines=True) == plain


def test_tables_and_cuts_show_no_control_character() -> None:
    text = table([("1", HOSTILE), ("2", "forged\nfdbrecipes: line")], ("#", "reason"))
    assert text.isascii() and len(text.splitlines()) == 3
    assert all(line.isprintable() for line in text.splitlines())
    assert "forged\\x0afdbrecipes: line" in text
    assert cut("\x1b" * 30, 10) == "\\x1b\\x1..."  # escaped first, then cut to its width
    assert cut(HOSTILE, 200).isprintable()


def test_ids_are_shown_as_text_or_bytes() -> None:
    assert (id_text(b"cat-1"), id_json(b"cat-1")) == ("cat-1", "cat-1")
    assert (id_text(b"\xff\xfe"), id_json(b"\xff\xfe")) == ("b'\\xff\\xfe'", {"bytes": "//4="})
    assert (id_text(None), id_json(None)) == ("-", None)


# -- push's value and ids: checked before connecting -----------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


@pytest.mark.parametrize(("argv", "message"), [
    (["--type", "json", nested(30_000)], "nests deeper than 32"),
    (["--type", "json", nested(400)], "nests deeper than 32 arrays"),
    (["--type", "json", nested(33)], "nests deeper than 32 arrays"),
    (["--type", "json", "null"], "VALUE must not be None"),
    (["--type", "json", str(2**3000)], "VALUE cannot be tuple-encoded"),
    (["--type", "int", str(2**3000)], "VALUE cannot be tuple-encoded"),
    (["--type", "json", "NaN"], "NaN is not JSON (--type float reads it)"),
    (["--type", "json", "[-Infinity]"], "-Infinity is not JSON"),
    (["--type", "json", "1e400"], "a number too large for a float"),
    (["--type", "json", '{"a": 1}'], "a JSON object is not a value"),
    (["x" * 120_000], "VALUE encodes to 120,002 bytes; FoundationDB stores at most 100,000"),
    (["--type", "bytes", "x" * 100_000], "VALUE encodes to 100,002 bytes"),
    (["v", "--id", "x" * 1_001], "--id must be 1 to 1,000 bytes, got 1,001"),
    (["v", "--id", ""], "--id must be 1 to 1,000 bytes, got 0"),
    (["\udcff"], "VALUE '\\udcff' is not UTF-8 text (--type bytes takes any bytes)"),
    (["v", "--id", "\ud800"], "--id '\\ud800' is not text of this system's encoding"),
])
def test_push_refuses_what_cannot_be_stored_in_one_line(
    argv: List[str], message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["push", *JOBS, "--kind", "queue", *argv]) == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert line.startswith("fdbrecipes push: error: ") and message in line, line
    assert len(line) < 300 and line.isprintable() and captured.out == ""


@pytest.mark.parametrize(("argv", "message"), [
    (["job", "x" * 1_001, *JOBS], "ID must be 1 to 1,000 bytes, got 1,001"),
    (["cancel", "\ud800", *JOBS, "--yes"], "ID '\\ud800' is not text"),
    (["remove", *JOBS, "--kind", "queue", "--id", "x" * 1_001, "--yes"],
     "--id must be 1 to 1,000 bytes"),
    (["peek", *JOBS, "--kind", "fair-queue", "--group", "\udcff"],
     "--group '\\udcff' is not UTF-8 text"),
    (["workers", *JOBS, "--stop", "w\udcff\x1b[2J"], "--stop 'w\\udcff\\x1b[2J' is not UTF-8"),
    (["stats", "--directory", "app/\udcff", "--kind", "queue"],
     "--directory 'app/\\udcff' is not UTF-8 text"),
    (["stats", "--tuple", "(" * 30_000, "--kind", "queue"], "is not a Python literal"),
])
def test_ids_and_names_are_checked_before_connecting(
    argv: List[str], message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert message in line and len(line) < 300 and line.isprintable(), line


def test_what_push_reads() -> None:
    assert arguments.parse_value(nested(32), "json") == eval("(" * 32 + "1" + ",)" * 32)
    assert arguments.parse_value('["a", [1, 2.5, true, null]]', "json") == (
        "a", (1, 2.5, True, None))
    assert arguments.parse_value("nan", "float") != arguments.parse_value("nan", "float")
    assert arguments.parse_value("\udcff\udcfe", "bytes") == b"\xff\xfe"  # as the shell gave
    assert arguments.parse_value("é", "bytes") == "é".encode()
    assert arguments.id_bytes("\udcff\udcfe") == b"\xff\xfe"
    assert arguments.id_bytes("x" * 1_000) == b"x" * 1_000
    assert arguments.parse_value("x" * 99_990, "str") == "x" * 99_990


def test_a_failure_line_shows_no_control_character(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A failure's line may hold text from the cluster or the command line (a
    directory's name): one line, nothing a terminal acts on."""
    commands.say("fdbrecipes stats:", "no such directory: app/\x1b[2J\u202e\nforged\rline")
    line = one_line(capsys.readouterr().err)
    assert line == "fdbrecipes stats: no such directory: app/\\x1b[2J\\u202e forged line"


def test_a_report_prints_text_escaped_and_json_exact() -> None:
    report = commands.Report({"reason": HOSTILE}, f"title\nreason  {HOSTILE}\nTraceback:\n  x")
    text = report.rendered(False)
    assert text.splitlines()[0] == "title" and text.splitlines()[2:] == ["Traceback:", "  x"]
    assert text.isascii() and all(line.isprintable() for line in text.splitlines())
    as_json = report.rendered(True)
    assert "\n" not in as_json and as_json.isascii() and as_json.isprintable()
    assert json.loads(as_json) == {"reason": HOSTILE}


def test_the_options_to_follow_a_job() -> None:
    assert parse("finished", *JOBS).limit == 100
    assert parse("job", "cat-1", *JOBS, "--wait", "60").wait == 60.0
    assert parse("job", "cat-1", *JOBS).wait is None
    push = parse("push", *JOBS, "v", "--history", "86400")
    assert (push.history, push.id, push.kind) == (86400.0, None, None)
