"""The multi-process LocalCluster without a server: its arguments, its layout and
command lines, the watchdog that kills its servers when their parent dies, and the
``fdbrecipes cluster`` command's answers where it cannot start."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Dict

import pytest

from fdbrecipes import cli
from fdbrecipes._local.plan import TEST_KNOBS, make_plan
from fdbrecipes._local.reaper import serve
from fdbrecipes.testing import LocalCluster, ServerNotFoundError

PORTS = [4500, 4501, 4502, 4503, 4504]


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    (dict(processes=0), ValueError, "processes must be 1 to 32"),
    (dict(processes=33), ValueError, "processes must be 1 to 32"),
    (dict(processes=True), TypeError, "processes must be an int"),
    (dict(processes=2.0), TypeError, "processes must be an int"),
    (dict(redundancy="quadruple"), ValueError, "redundancy must be one of single, double"),
    (dict(redundancy=2), TypeError, "redundancy must be a str"),
    (dict(processes=1, redundancy="double"), ValueError, "processes must be at least 2"),
    (dict(processes=2, redundancy="triple"), ValueError, "processes must be at least 3"),
    (dict(engine="memory; clear all"), ValueError, "engine must be a storage engine name"),
    (dict(engine=b"memory"), TypeError, "engine must be a str"),
    (dict(processes=2, classes=["storage"]), ValueError, "one class per process"),
    (dict(processes=2, classes="storage"), TypeError, "classes must be None or a sequence"),
    (dict(processes=2, classes=["storage", "proxy"]), ValueError, r"classes\[1\] must be"),
    (dict(knobs="fast"), TypeError, "knobs must be None or a mapping"),
    (dict(knobs={"Bad-Name": 1}), ValueError, "is not a knob name"),
    (dict(knobs={"min_trace_severity": "1 --class log"}), ValueError, "without spaces"),
    (dict(knobs={"min_trace_severity": True}), ValueError, "must be a str or number"),
    (dict(startup_timeout=0), ValueError, "startup_timeout must be seconds > 0"),
    (dict(startup_timeout="5"), TypeError, "startup_timeout must be a number"),
])
def test_bad_arguments_are_refused_before_anything_is_looked_up(
        kwargs: Dict[str, Any], error: type, message: str, no_cluster: str) -> None:
    """Checked before the programs are looked for (here they are missing) and before
    a directory is made."""
    with pytest.raises(error, match=message):
        LocalCluster(**kwargs)


def test_good_arguments_then_need_the_server_programs(no_cluster: str) -> None:
    with pytest.raises(ServerNotFoundError, match="fdbserver and fdbcli not found"):
        LocalCluster(processes=5, redundancy="double", classes=["storage"] * 3 + ["log"] * 2)


@pytest.mark.parametrize(("redundancy", "processes", "coordinators"), [
    ("single", 1, 1), ("single", 3, 1), ("double", 2, 1), ("double", 3, 3),
    ("double", 4, 3), ("double", 5, 3), ("triple", 3, 3), ("triple", 4, 3),
    ("triple", 5, 5), ("triple", 9, 5),
])
def test_coordinators_follow_the_redundancy_and_are_odd(
        redundancy: str, processes: int, coordinators: int, tmp_path: Path) -> None:
    plan = make_plan(processes, redundancy, "memory", None, tmp_path,
                     list(range(4500, 4500 + processes)))
    assert [p.index for p in plan.coordinators] == list(range(coordinators))
    addresses = ",".join(f"127.0.0.1:{4500 + i}" for i in range(coordinators))
    assert plan.cluster_file_text() == f"fdbrecipes:{plan.cluster_id}@{addresses}\n"
    assert plan.configure_command() == f"configure new {redundancy} memory"


def test_each_process_has_its_port_folder_machine_and_zone(tmp_path: Path) -> None:
    plan = make_plan(5, "double", "ssd", ["storage", "storage", "storage", "transaction",
                                          "unset"], tmp_path, PORTS)
    assert len({p.machine_id for p in plan.processes}) == 5
    assert len({p.zone_id for p in plan.processes}) == 5
    assert len({p.directory for p in plan.processes}) == 5
    first, last = plan.processes[0], plan.processes[4]
    assert first.command("/usr/sbin/fdbserver", "/x/fdb.cluster") == [
        "/usr/sbin/fdbserver",
        "--public-address", "127.0.0.1:4500",
        "--listen-address", "public",
        "--cluster-file", "/x/fdb.cluster",
        "--datadir", str(tmp_path / "p0" / "data"),
        "--logdir", str(tmp_path / "p0" / "logs"),
        "--locality-machineid", "machine-0",
        "--locality-zoneid", "zone-0",
        "--class", "storage",
    ]
    assert "--class" not in last.command("fdbserver", "c")  # unset: FoundationDB chooses
    assert last.address == "127.0.0.1:4504"
    assert last.output == tmp_path / "p4" / "fdbserver.out"


def test_knobs_go_on_every_command_line(tmp_path: Path) -> None:
    default = make_plan(2, "double", "memory", None, tmp_path, PORTS[:2])
    assert default.knobs == TEST_KNOBS
    assert default.command(default.processes[1], "fdbserver", "c")[-3:] == [
        "--knob_check_team_delay=1", "--knob_initial_failure_reaction_delay=1",
        "--knob_log_on_completion_delay=0"]
    stock = make_plan(2, "double", "memory", None, tmp_path, PORTS[:2], {})
    assert not [a for a in stock.command(stock.processes[0], "fdbserver", "c")
                if a.startswith("--knob")]
    chosen = make_plan(1, "single", "memory", None, tmp_path, PORTS[:1],
                       {"max_storage_commit_time": 2.5})
    assert chosen.command(chosen.processes[0], "fdbserver", "c")[-1] == \
        "--knob_max_storage_commit_time=2.5"


def test_ports_must_be_distinct(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ports must be 2 distinct ports"):
        make_plan(2, "double", "memory", None, tmp_path, [4500, 4500])


def test_the_watchdog_leaves_everything_when_told_done(tmp_path: Path) -> None:
    (tmp_path / "kept").mkdir()
    assert serve(io.StringIO("done\n"), str(tmp_path / "kept")) is False
    assert (tmp_path / "kept").exists()


#: A parent that starts a watched process (in a session of its own, as the servers
#: are) and dies without cleaning up.
ORPHAN = textwrap.dedent("""
    import os, subprocess, sys
    from fdbrecipes._local.reaper import Reaper
    reaper = Reaper(sys.argv[1])
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    reaper.watch(child.pid)
    print(child.pid, flush=True)
    os._exit(0)  # no cleanup: the pipe closes as a SIGKILL would close it
""")


def test_the_watchdog_kills_the_servers_and_removes_the_folder_when_the_parent_dies(
        tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    folder.mkdir()
    done = subprocess.run([sys.executable, "-c", ORPHAN, str(folder)], capture_output=True,
                          text=True, timeout=60, check=True)
    pid = int(done.stdout)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (folder.exists() or alive(pid)):
        time.sleep(0.05)  # the watchdog is another process: poll it, with a deadline
    assert not alive(pid), "the watched process outlived its parent"
    assert not folder.exists()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, which the watchdog cannot reap, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_the_cluster_command_without_a_server_says_why(
        no_cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cluster", "--processes", "5", "--redundancy", "double"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("fdbrecipes cluster: cannot run: fdbserver and fdbcli "
                                   "not found")
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["--processes", "0"], "processes must be 1 to 32"),
    (["--processes", "2", "--redundancy", "triple"], "processes must be at least 3"),
    (["--processes", "2", "--classes", "storage,banana"], r"classes[1] must be one of"),
])
def test_the_cluster_command_refuses_bad_options_in_one_line(
        argv: Any, message: str, no_cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cluster", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_the_cluster_command_has_help() -> None:
    done = subprocess.run([sys.executable, "-m", "fdbrecipes", "cluster", "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    for option in ("--processes", "--redundancy", "--engine", "--classes", "--directory"):
        assert option in done.stdout

