"""LocalCluster with several processes, on the real server: localities, roles from
status JSON, faults (kill, pause, restart, exclude), health, cleanup (also when the
Python process that started it is killed or interrupted), and ``fdbrecipes
cluster``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from functools import partial
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

from fdbrecipes.testing import LocalCluster, open_database
from tests.helpers import eventually, warm_up

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_each_process_is_a_machine_and_a_zone_of_its_own(double_cluster: LocalCluster) -> None:
    status = double_cluster.status()
    localities = {p["address"]: p["locality"] for p in status["cluster"]["processes"].values()}
    assert sorted(localities) == sorted(p.address for p in double_cluster.processes)
    assert len({loc["machineid"] for loc in localities.values()}) == 5
    assert len({loc["zoneid"] for loc in localities.values()}) == 5
    assert status["cluster"]["configuration"]["redundancy_mode"] == "double"
    assert status["cluster"]["configuration"]["storage_engine"] == "memory"


def test_roles_name_one_master_the_current_logs_and_the_coordinators(
        double_cluster: LocalCluster) -> None:
    roles = double_cluster.wait_healthy(60)
    addresses = {p.address for p in double_cluster.processes}
    assert roles.master in addresses and roles.cluster_controller in addresses
    assert roles.recovery_state == "fully_recovered"
    assert len(roles.logs) >= 2 and set(roles.logs) <= addresses
    assert len(roles.storage) >= 2 and set(roles.storage) <= addresses
    assert roles.coordinators == tuple(sorted(p.address for p in double_cluster.processes[:3]))
    assert roles.commit_proxies and roles.grv_proxies and roles.resolvers
    for log in roles.logs:
        assert "log" in roles.of(log)
    assert roles.holding("master") == (roles.master,)


def test_killing_the_master_recovers_into_a_new_generation(double_cluster: LocalCluster) -> None:
    before = double_cluster.wait_healthy(60)
    assert before.master is not None
    double_cluster.kill(before.master)
    assert not double_cluster.running(before.master)
    double_cluster.restart(before.master)
    after = double_cluster.wait_healthy(120)
    assert after.generation > before.generation
    assert double_cluster.running(before.master)


def test_pause_resume_kill_restart(double_cluster: LocalCluster) -> None:
    roles = double_cluster.wait_healthy(60)
    target = roles.holding("storage", without=("log", "master", "cluster_controller"))[0]
    double_cluster.pause(target)
    assert [p.address for p in double_cluster.paused()] == [target]
    assert double_cluster.running(target)
    double_cluster.resume(target)
    assert double_cluster.paused() == ()
    double_cluster.kill(target)
    assert not double_cluster.running(target)
    with pytest.raises(ValueError, match="is not running"):
        double_cluster.pause(target)
    double_cluster.restart(target)
    double_cluster.wait_healthy(120)


def test_exclude_moves_the_data_off_and_include_brings_the_process_back(
        double_cluster: LocalCluster) -> None:
    double_cluster.wait_healthy(60)
    target = eventually(partial(storage_without_log, double_cluster), 60,
                        "a storage process without a log")[0]  # a coordinator: allowed
    double_cluster.exclude(target)
    try:
        excluded = double_cluster.roles()
        assert target in excluded.excluded
        assert "storage" not in excluded.of(target)
    finally:
        double_cluster.include()
    roles = double_cluster.wait_healthy(120)
    assert roles.excluded == frozenset()


def storage_without_log(cluster: LocalCluster) -> Tuple[str, ...]:
    """The storage processes holding no log, now.  Right after a storage process was
    killed and restarted (the test before), the data distributor may not have
    recruited a storage server on it again yet, leaving only the storage processes
    that also hold a log: the exclude test polls this until one is back."""
    return cluster.roles().holding("storage", without=("log",))


def test_processes_are_named_by_index_address_or_themselves(double_cluster: LocalCluster) -> None:
    third = double_cluster.processes[2]
    assert double_cluster.process(2) is third
    assert double_cluster.process(third.address) is third
    assert double_cluster.process(third) is third
    with pytest.raises(ValueError, match="p must be 0 to 4"):
        double_cluster.process(5)
    with pytest.raises(ValueError, match="no process of this cluster"):
        double_cluster.process("127.0.0.1:1")
    with pytest.raises(TypeError, match="p must be an index"):
        double_cluster.process(2.0)  # type: ignore[arg-type]


def test_cleanup_kills_every_process_and_removes_the_directory(
        fdb_local_cluster: Any) -> None:
    made: LocalCluster = fdb_local_cluster(processes=2, redundancy="double")
    db = open_database(made.cluster_file)
    warm_up(db)
    db[b"k"] = b"v"
    assert db[b"k"] == b"v"
    pids = server_pids(made.cluster_file)
    made.cleanup()
    assert not made.directory.exists()
    assert not [pid for pid in pids if alive(pid)]
    made.cleanup()  # again: nothing left to do


def server_pids(cluster_file: str) -> List[int]:
    """The pids of the fdbserver processes of ``cluster_file`` (from /proc: their
    command line names it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cluster_file.encode() in command and b"--datadir" in command:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


STARTS = textwrap.dedent("""
    import sys, time
    from fdbrecipes.testing import LocalCluster
    with LocalCluster(processes=2, redundancy="double") as cluster:
        print(cluster.cluster_file, flush=True)
        time.sleep(600)  # until killed or interrupted
""")


@pytest.fixture
def starter(double_cluster: LocalCluster) -> Iterator[List[subprocess.Popen[str]]]:
    """Python processes that start a cluster (killed at the end if still running).
    Asks for the module's cluster, which skips where there is no server."""
    made: List[subprocess.Popen[str]] = []
    yield made
    for process in made:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_a_cluster_is_cleaned_up_when_its_python_process_dies_or_is_interrupted(
        how: str, starter: List[subprocess.Popen[str]]) -> None:
    """SIGKILL: the watchdog kills the servers and removes the folder; SIGINT
    (Ctrl-C): the ``with`` block does."""
    process = subprocess.Popen([sys.executable, "-c", STARTS], stdout=subprocess.PIPE,
                               text=True, cwd=ROOT)
    starter.append(process)
    assert process.stdout is not None
    cluster_file = process.stdout.readline().strip()
    assert cluster_file, "the cluster did not start"
    folder = Path(cluster_file).parent
    pids = server_pids(cluster_file)
    assert len(pids) == 2
    os.kill(process.pid, getattr(signal, how))
    process.wait(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (folder.exists() or any(map(alive, pids))):
        time.sleep(0.05)  # other processes clean up: poll them, with a deadline
    assert not [pid for pid in pids if alive(pid)], "a server outlived its cluster"
    assert not folder.exists()


def test_the_cluster_command_serves_until_ctrl_c(starter: List[subprocess.Popen[str]]
                                                 ) -> None:
    process = subprocess.Popen([sys.executable, "-m", "fdbrecipes", "cluster", "--processes",
                                "3", "--redundancy", "double", "--classes",
                                "storage,storage,stateless"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=ROOT)
    starter.append(process)
    assert process.stdout is not None
    lines = []
    while not lines or not lines[-1].startswith("Ctrl-C"):
        line = process.stdout.readline()
        assert line, f"it ended early: {process.stderr.read() if process.stderr else ''}"
        lines.append(line.rstrip("\n"))
    cluster_file = next(x.split(": ", 1)[1] for x in lines if x.startswith("cluster file: "))
    assert f"  export FDB_CLUSTER_FILE={cluster_file}" in lines
    assert sum(1 for x in lines if "127.0.0.1:" in x) == 3
    assert any("stateless" in x and "master" in x for x in lines)
    assert sum(1 for x in lines if "storage" in x and "log" in x) == 2
    db = open_database(cluster_file)
    warm_up(db)
    db[b"dev"] = b"ok"
    assert db[b"dev"] == b"ok"
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert "fdbrecipes cluster: stopped" in out
    assert not Path(cluster_file).parent.exists()
