"""What the Deploy page's container and Kubernetes routes run, run here against local
servers (Docker itself runs only on GitHub's runners): compose.yaml's one-shot init
script on a server with no database yet, its worker and dashboard commands, and the
exporter the KEDA ScaledObject reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, NoReturn

import fdb
import pytest
import yaml

from fdbrecipes import Queue
from fdbrecipes.testing import ServerProcess, find_program

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
INIT = ROOT / "deploy" / "compose" / "init-db.sh"


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("FDBRECIPES_REQUIRE_SERVER") == "1":
        pytest.fail(f"FDBRECIPES_REQUIRE_SERVER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bare_server(tmp_path: Path) -> Iterator[Dict[str, str]]:
    """One ``fdbserver`` with no database yet, as the official image starts one; its
    cluster file and the ``fdbcli`` to use."""
    fdbserver = find_program("fdbserver", "FDBSERVER")
    fdbcli = find_program("fdbcli", "FDBCLI")
    if fdbserver is None or fdbcli is None:
        _unavailable("no fdbserver/fdbcli on this machine")
    process = ServerProcess(0, _free_port(), "unset", tmp_path / "p0")
    process.data.mkdir(parents=True)
    process.logs.mkdir(parents=True)
    cluster_file = tmp_path / "fdb.cluster"
    cluster_file.write_text(f"init:test@{process.address}\n")
    server = subprocess.Popen(process.command(fdbserver, str(cluster_file)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        yield {"cluster_file": str(cluster_file), "fdbcli": fdbcli}
    finally:
        server.kill()
        server.wait(30)


def _init(server: Dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FDB_CLUSTER_FILE": server["cluster_file"],
           "FDBCLI": server["fdbcli"], "FDB_INIT_CONFIG": "single ssd",
           "FDB_INIT_TIMEOUT": "120"}
    return subprocess.run(["bash", str(INIT)], capture_output=True, text=True, env=env,
                          timeout=180, check=False)


def _cli(server: Dict[str, str], command: str) -> str:
    done = subprocess.run([server["fdbcli"], "-C", server["cluster_file"], "--exec", command,
                           "--timeout", "20"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_init_script_creates_the_database_once(bare_server: Dict[str, str]) -> None:
    first = _init(bare_server)
    assert first.returncode == 0, first.stderr
    assert "created a new database (single ssd)" in first.stdout
    status = _cli(bare_server, "status json")
    configuration = json.loads(status[status.index("{"):])["cluster"]["configuration"]
    assert configuration["redundancy_mode"] == "single"
    assert configuration["storage_engine"].startswith("ssd")
    _cli(bare_server, "writemode on; set fdbrecipes/kept yes")

    again = _init(bare_server)
    assert again.returncode == 0, again.stderr
    assert "the database exists; left as it is" in again.stdout
    assert "`fdbrecipes/kept' is `yes'" in _cli(bare_server, "get fdbrecipes/kept")


def _compose_command(service: str) -> List[str]:
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    command: List[str] = services[service]["command"]
    return command


def _replace(args: List[str], option: str, value: str) -> List[str]:
    out = list(args)
    out[out.index(option) + 1] = value
    return out


def _fdbrecipes(*args: str, cluster_file: str, cwd: Path = ROOT,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fdbrecipes", *args], capture_output=True,
                          text=True, cwd=str(cwd), timeout=timeout, check=False,
                          env={**os.environ, "FDB_CLUSTER_FILE": cluster_file})


def _get(url: str, server: subprocess.Popen[str], deadline: float) -> bytes:
    """GET ``url`` once ``server`` listens (polled: another process); fail with its
    output if it exits first."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body: bytes = response.read()
                return body
        except (urllib.error.URLError, ConnectionError):
            if server.poll() is not None:
                pytest.fail(f"{server.args} exited with {server.returncode}: "
                            f"{server.communicate()[1]}")
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_the_compose_worker_and_dashboard_commands_run(fdb_cluster_file: str) -> None:
    place = repr(("fdbrecipes-test", uuid.uuid4().hex, "jobs"))
    for value in ("first job", "second job"):
        pushed = _fdbrecipes("push", "--tuple", place, "--kind", "queue", value,
                             cluster_file=fdb_cluster_file)
        assert pushed.returncode == 0, pushed.stderr
    worker = _replace(_compose_command("worker"), "--tuple", place) + ["--burst"]
    done = _fdbrecipes(*worker, cluster_file=fdb_cluster_file, cwd=ROOT / "deploy" / "compose")
    assert done.returncode == 0, done.stderr
    assert "handled 'first job'" in done.stdout and "handled 'second job'" in done.stdout

    port = _free_port()
    dashboard = _replace(_replace(_compose_command("dashboard"), "--tuple", place),
                         "--host", "127.0.0.1") + ["--port", str(port)]
    web = subprocess.Popen([sys.executable, "-m", "fdbrecipes", *dashboard], cwd=str(ROOT),
                           env={**os.environ, "FDB_CLUSTER_FILE": fdb_cluster_file},
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        page = _get(f"http://127.0.0.1:{port}/", web, time.monotonic() + 60)
        assert b"jobs" in page or b"fdbrecipes" in page
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(30)


def test_the_exporter_serves_what_the_scaledobject_reads(fdb_cluster_file: str,
                                                         fdb_database: Any) -> None:
    """``fdbrecipes metrics --directory .../jobs`` (the Kubernetes manifest's command):
    ``/backlog`` holds ``jobs.backlog`` and ``jobs.oldest_age_seconds``; ``/metrics``
    the same for Prometheus."""
    path = ("fdbrecipes-test", uuid.uuid4().hex, "jobs")
    jobs = Queue(fdb.directory.create_or_open(fdb_database, path))
    try:
        jobs.push_many(fdb_database, [b"a", b"b", b"c"])
        assert jobs.claim(fdb_database, 60) is not None
        port = _free_port()
        exporter = subprocess.Popen(
            [sys.executable, "-m", "fdbrecipes", "metrics", "--directory", "/".join(path),
             "--port", str(port), "--addr", "127.0.0.1"], cwd=str(ROOT),
            env={**os.environ, "FDB_CLUSTER_FILE": fdb_cluster_file},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            numbers = json.loads(_get(f"http://127.0.0.1:{port}/backlog", exporter, deadline))
            assert numbers["jobs"]["backlog"] == 3.0
            assert numbers["jobs"]["visible"] == 2.0 and numbers["jobs"]["in_flight"] == 1.0
            assert numbers["jobs"]["oldest_age_seconds"] >= 0.0
            text = _get(f"http://127.0.0.1:{port}/metrics", exporter, deadline).decode()
            assert 'fdbrecipes_queue_backlog{queue="jobs"} 3.0' in text
        finally:
            exporter.send_signal(signal.SIGTERM)
            exporter.wait(30)
    finally:
        fdb.directory.remove_if_exists(fdb_database, path[:2])
