"""The ``fdbrecipes`` command without a server: help, dispatch, and the one-line reason
a command gives when it has no cluster to run on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from fdbrecipes import cli

ROOT = Path(__file__).resolve().parents[2]


def run_python(*args: str) -> subprocess.CompletedProcess[str]:
    """Run this interpreter with ``args`` in the project's root."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          check=False, timeout=60, cwd=ROOT)


def test_cli_help_needs_no_client_library(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--help"])
    assert exit_info.value.code == 0
    assert "--clients" in capsys.readouterr().out


def test_building_the_parser_loads_no_client_library() -> None:
    done = run_python("-c", "import sys; from fdbrecipes.cli import build_parser; "
                      "build_parser().format_help(); print('fdb.impl' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_python_m_fdbrecipes_help() -> None:
    done = run_python("-m", "fdbrecipes", "--help")
    assert done.returncode == 0, done.stderr
    assert "demo" in done.stdout and "bench" in done.stdout


def test_benchmarks_run_py_help() -> None:
    done = run_python(str(ROOT / "benchmarks" / "run.py"), "--help")
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout


#: Arguments each command needs besides its name.
REQUIRED = {"stats": ["--tuple", "('jobs',)", "--kind", "queue"]}


def test_each_command_runs_its_function() -> None:
    parser = cli.build_parser()
    assert [c.name for c in cli.COMMANDS] == [
        "demo", "bench", "cluster", "stats", "peek", "dead", "requeue-dead", "purge-dead",
        "push", "leases", "delayed", "remove", "unblock", "job", "cancel", "finished", "workers",
        "pause", "resume", "worker", "metrics", "schedules", "limits", "workflow", "web",
        "server"]
    for command in cli.COMMANDS:
        needs = REQUIRED["stats"] if command.name not in ("demo", "bench", "cluster",
                                                          "server") else []
        if command.name in ("worker", "push", "job", "cancel"):
            needs = [*needs, "app.jobs:handle"]
        if command.name == "remove":
            needs = [*needs, "--id", "x"]
        if command.name == "unblock":
            needs = [*needs, "--sequence", "x"]
        if command.name == "web":
            needs = ["--directory", "app"]
        if command.name == "schedules":
            needs = ["list", "--tuple", "('schedules',)"]
        if command.name == "limits":
            needs = ["list", "--tuple", "('limits',)"]
        if command.name == "workflow":
            needs = ["list", "--tuple", "('flows',)"]
        assert parser.parse_args([command.name, *needs]).run is command.run


def test_help_lists_the_operator_commands() -> None:
    done = run_python("-m", "fdbrecipes", "--help")
    assert done.returncode == 0, done.stderr
    for name in ("stats", "peek", "dead", "requeue-dead", "purge-dead", "--directory",
                 "--tuple", "--kind"):
        assert name in done.stdout


@pytest.mark.parametrize("name", ["stats", "peek", "dead", "requeue-dead", "purge-dead",
                                  "job", "cancel", "finished", "workers", "worker", "metrics"])
def test_operator_command_help_needs_no_client_library(name: str) -> None:
    done = run_python("-c", "import sys; from fdbrecipes.cli import main\n"
                      f"try:\n    main([{name!r}, '--help'])\n"
                      "except SystemExit as e:\n    assert e.code == 0\n"
                      "print('fdb.impl' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert "--cluster-file" in done.stdout and "--json" in done.stdout
    assert done.stdout.strip().endswith("False")


@pytest.mark.parametrize("argv", [["demo"], ["bench", "--quick"]])
def test_a_command_without_a_cluster_says_why(
    argv: List[str], no_cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"fdbrecipes {argv[0]}: cannot run: {no_cluster}")
    assert captured.err.count("\n") == 1


def test_benchmarks_run_py_without_a_cluster_says_why(no_cluster: str) -> None:
    done = run_python(str(ROOT / "benchmarks" / "run.py"), "--quick")
    assert done.returncode == 1
    assert done.stderr.startswith(f"fdbrecipes bench: cannot run: {no_cluster}")
    assert done.stdout == ""


def test_the_worker_command_has_finite_retries_and_a_free_metrics_port() -> None:
    parser = cli.build_parser()
    worker = parser.parse_args(["worker", "app.jobs:handle", "--tuple", "('jobs',)"])
    assert worker.max_deliveries == 5 and worker.kind is None and worker.processes == 1
    assert (worker.log_level, worker.log_format) == ("INFO", "text")
    assert parser.parse_args(["stats", "--tuple", "('jobs',)"]).max_deliveries is None
    metrics = parser.parse_args(["metrics", "--tuple", "('jobs',)"])
    assert not 9100 <= metrics.port <= 9999  # the range Prometheus gives exporters


def test_a_supervised_child_runs_the_same_command_without_processes() -> None:
    from fdbrecipes.admin.supervisor import child_argv

    argv = child_argv(["worker", "m:f", "--processes", "4", "--tuple", "('j',)",
                       "--processes=2", "--lease", "9"])
    assert argv[1:] == ["-m", "fdbrecipes", "worker", "m:f", "--tuple", "('j',)",
                        "--lease", "9"]


def test_json_log_lines_hold_the_traceback() -> None:
    import json
    import logging

    from fdbrecipes.admin.logs import JsonFormatter

    try:
        raise ValueError("bad row")
    except ValueError:
        record = logging.getLogger("fdbrecipes.worker").makeRecord(
            "fdbrecipes.worker", logging.ERROR, __file__, 1, "job %s failed", ("7",),
            sys.exc_info())
    line = json.loads(JsonFormatter().format(record))
    assert (line["level"], line["message"]) == ("ERROR", "job 7 failed")
    assert "ValueError: bad row" in line["traceback"] and line["pid"] > 0


FORGED = "2026-11-27 00:00:00,000 INFO fdbrecipes.worker[1]: forged line"


def test_a_text_log_record_is_one_line_whatever_a_job_holds() -> None:
    """A job's exception message or Discard reason cannot forge a record: control
    characters are escaped and a traceback's lines are indented."""
    import logging
    import re

    from fdbrecipes.admin.logs import TextFormatter

    logger = logging.getLogger("fdbrecipes.worker")
    try:
        raise ValueError(f"bad\n{FORGED}\r{FORGED}")
    except ValueError:
        failed = logger.makeRecord("fdbrecipes.worker", logging.ERROR, __file__, 1,
                                   "job %s failed", ("7",), sys.exc_info())
    discarded = logger.makeRecord("fdbrecipes.worker", logging.WARNING, __file__, 1,
                                  "job %s discarded: %s",
                                  ("7", f"no\n{FORGED}\x1b[31m\u202e\x00"), None)
    text = "\n".join(TextFormatter().format(r) for r in (failed, discarded))
    lines = text.split("\n")
    starts = [line for line in lines if re.match(r"\d{4}-\d\d-\d\d ", line)]
    assert len(starts) == 2 and not any("forged" in line for line in starts[:1])
    assert starts[0].endswith(": job 7 failed")
    assert starts[1].endswith("discarded: no\\x0a" + FORGED + "\\x1b[31m\\u202e\\x00")
    assert all(line.startswith("  ") for line in lines if line not in starts)
    assert "  ValueError: bad" in lines and not any("\r" in line for line in lines)
    assert f"  {FORGED}\\x0d{FORGED}" in lines  # the message's own lines, indented


@pytest.mark.parametrize("mistyped", [["--tok", "SECRET-TOKEN-4242-abcd"],
                                      ["--tok=SECRET-TOKEN-4242-abcd"],
                                      ["SECRET-TOKEN-4242-abcd"]])
def test_an_argument_no_parser_takes_is_not_repeated(
        capsys: pytest.CaptureFixture[str], mistyped: List[str]) -> None:
    """Issue 43, item 4: ``fdbrecipes web --tok SECRET`` (the dashboard's parser takes
    no abbreviation) printed 'unrecognized arguments: --tok SECRET': the options are
    named, their values never repeated."""
    with pytest.raises(SystemExit) as exited:
        cli.main(["web", "--directory", "app/jobs", *mistyped])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "SECRET" not in err
    assert ("--tok" in err) == mistyped[0].startswith("--") and "unrecognized" in err
