"""Client and server CPU time, without a server: finding the fdbserver processes of a
cluster file in a stand-in /proc, and reading their CPU time."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List

import pytest

from fdbrecipes.bench import cpu

CLUSTER = "/tmp/fdbrecipes-x/fdb.cluster"


@pytest.mark.parametrize("args, named", [
    (["fdbserver", "--cluster-file", CLUSTER], True),
    (["fdbserver", f"--cluster_file={CLUSTER}"], True),
    (["fdbserver", "-C", CLUSTER, "--datadir", "/d"], True),
    (["fdbserver", "--cluster-file", "/other/fdb.cluster"], False),
    (["fdbserver", "--datadir", CLUSTER], False),
    (["fdbserver", "--cluster-file"], False),
])
def test_names_cluster_file(args: List[str], named: bool) -> None:
    assert cpu.names_cluster_file(args, CLUSTER) is named


def stat_line(comm: str, utime: int, stime: int) -> str:
    """A /proc/<pid>/stat line: pid (comm) state, then fields 4.. with utime/stime."""
    fields = ["S", "1"] + ["0"] * 9 + [str(utime), str(stime)] + ["0"] * 30
    return f"4242 ({comm}) {' '.join(fields)}\n"


def fake_proc(root: Path, pid: int, args: List[str], utime: int = 0, stime: int = 0) -> None:
    """A process ``pid`` in the stand-in /proc at ``root``."""
    directory = root / str(pid)
    directory.mkdir(parents=True)
    (directory / "cmdline").write_bytes(b"\0".join(a.encode() for a in args) + b"\0")
    (directory / "stat").write_text(stat_line(os.path.basename(args[0]), utime, stime))


def test_stat_cpu_seconds_counts_user_and_system_time() -> None:
    assert cpu.stat_cpu_seconds(stat_line("fdbserver", 250, 50), 100) == 3.0
    assert cpu.stat_cpu_seconds(stat_line("a (b) c", 7, 3), 10) == 1.0


def test_server_pids_and_their_cpu(tmp_path: Path) -> None:
    fake_proc(tmp_path, 10, ["/usr/sbin/fdbserver", "--cluster-file", CLUSTER], 100, 100)
    fake_proc(tmp_path, 11, ["/usr/sbin/fdbserver", "--cluster-file", "/other"], 500, 0)
    fake_proc(tmp_path, 12, ["/usr/bin/python", "--cluster-file", CLUSTER])
    fake_proc(tmp_path, 13, ["fdbserver", f"--cluster_file={CLUSTER}"], 300, 0)
    (tmp_path / "self").mkdir()
    (tmp_path / "14").mkdir()  # a process gone while listing: no cmdline
    pids = cpu.server_pids(CLUSTER, proc=tmp_path)
    assert pids == (10, 13)
    ticks = cpu.ticks_per_second()
    assert cpu.server_cpu(pids, proc=tmp_path) == pytest.approx(500 / ticks)


def test_no_server_no_figure(tmp_path: Path) -> None:
    assert cpu.server_pids(CLUSTER, proc=tmp_path / "missing") == ()
    assert cpu.server_cpu((), proc=tmp_path) is None
    assert cpu.server_cpu((99,), proc=tmp_path) is None  # exited


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_server_cpu_of_a_real_process() -> None:
    sum(range(200_000))
    seconds = cpu.server_cpu((os.getpid(),))
    assert seconds is not None and seconds >= 0
