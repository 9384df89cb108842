"""``fdbrecipes server install`` and ``server start|stop|status``, as a new user runs
them, against a release-like tree served on 127.0.0.1.

The tree is built here from the FoundationDB programs this machine has (real Debian
packages made with ``dpkg-deb --build``, each with its ``.sha256``; nothing of it is
kept).  Every command runs in a fresh virtual environment: made without pip, with
fdbrecipes (built from this checkout as a wheel, not editable), the ``foundationdb``
bindings, pytest and hypothesis installed into it by this environment's pip (``pip
--python``, from its usual index and cache: seconds instead of a minute), and run with
``PATH`` holding only that environment's ``bin`` and no ``LD_LIBRARY_PATH``,
``FDBSERVER``, ``FDBCLI`` or ``FDB_CLUSTER_FILE``; ``XDG_DATA_HOME`` is a temporary
folder, so the per-user folders are the defaults' and this machine's are not touched.
FoundationDB may be installed on this machine too (in ``/usr/sbin``, ``/usr/lib``):
the search order puts the installed copy before those places, and the tests check
that the commands used the installed copy.

Linux only (the tree is made of ``.deb`` packages); skipped with a reason where no
FoundationDB programs or no ``dpkg-deb`` exist (a failure with
``FDBRECIPES_REQUIRE_SERVER=1``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, NoReturn, Optional

import pytest

from fdbrecipes.server import find_program, loaded_client_library
from fdbrecipes.server.daemon import status
from fdbrecipes.server.find import bindings_version
from fdbrecipes.server.releases import platform_key, release
from fdbrecipes.testing import client_library_problem
from tests.release_tree import build_release, environment_without_foundationdb, serving

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: The integration test file run in the fresh environment (quick, and through the
#: plugin's throwaway server).
INTEGRATION_FILE = "tests/integration/test_idempotency.py"


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("FDBRECIPES_REQUIRE_SERVER") == "1":
        pytest.fail(f"FDBRECIPES_REQUIRE_SERVER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


class Tree(NamedTuple):
    base: Path  # holds <version>/<assets>
    version: str
    platform: str


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    """A release-like tree of this machine's FoundationDB programs."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the release-like tree is made of .deb packages (Linux); the macOS "
                    ".pkg route runs on GitHub's macOS runners")
    if shutil.which("dpkg-deb") is None:
        _unavailable("dpkg-deb is not installed (it builds the release-like packages)")
    fdbserver = find_program("fdbserver", "FDBSERVER").path
    fdbcli = find_program("fdbcli", "FDBCLI").path
    problem = client_library_problem()
    library = loaded_client_library()
    if fdbserver is None or fdbcli is None or problem or library is None:
        _unavailable(f"no FoundationDB programs to build the release from "
                     f"(fdbserver {fdbserver}, fdbcli {fdbcli}, libfdb_c {library or problem})")
    said = subprocess.run([fdbserver, "--version"], capture_output=True, text=True,
                          timeout=60, check=True).stdout
    version = re.search(r"\(v(\d+\.\d+\.\d+)", said) or re.search(r"(\d+\.\d+\.\d+)", said)
    assert version is not None, said
    base = tmp_path_factory.mktemp("release")
    platform = platform_key()
    build_release(base, version.group(1), platform, {
        "fdbserver": Path(fdbserver), "fdbcli": Path(fdbcli),
        "libfdb_c.so": Path(os.path.realpath(library))})
    return Tree(base, version.group(1), platform)


class Fresh(NamedTuple):
    python: Path
    bin: Path
    env: Dict[str, str]
    home: Path  # XDG_DATA_HOME

    def run(self, *args: str, timeout: float = 300,
            **extra: str) -> subprocess.CompletedProcess[str]:
        """``fdbrecipes ARGS`` in the fresh environment."""
        return subprocess.run([str(self.bin / "fdbrecipes"), *args], capture_output=True,
                              text=True, timeout=timeout, env={**self.env, **extra},
                              cwd=str(self.home), check=False)

    def python_code(self, code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.python), "-c", code], capture_output=True, text=True,
                              timeout=timeout, env=self.env, cwd=str(self.home), check=False)


@pytest.fixture(scope="module")
def fresh(tree: Tree, tmp_path_factory: pytest.TempPathFactory) -> Fresh:
    """A fresh virtual environment with fdbrecipes and the bindings, no FoundationDB."""
    folder = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=120)
    python = folder / "bin" / "python"
    bindings = bindings_version()
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "-q", str(ROOT), f"foundationdb=={bindings}", "pytest",
                           "hypothesis"], capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    home = tmp_path_factory.mktemp("xdg")
    env = environment_without_foundationdb(os.environ, folder / "bin")
    env["XDG_DATA_HOME"] = str(home)
    return Fresh(python, folder / "bin", env, home)


def _installed_folder(fresh: Fresh, version: str, root: Optional[Path] = None) -> Path:
    return (root or fresh.home / "fdbrecipes" / "foundationdb") / version


def test_install_then_the_demo_and_an_integration_file_use_the_installed_copy(
        tree: Tree, fresh: Fresh) -> None:
    with serving(tree.base) as server:
        started = time.monotonic()
        done = fresh.run("server", "install", "--version", tree.version, "--from", server.url)
        assert done.returncode == 0, done.stderr
        first_took = time.monotonic() - started
        folder = _installed_folder(fresh, tree.version)
        assert f"FoundationDB {tree.version} installed in {folder}" in done.stdout
        for asset in release(tree.version, tree.platform).assets:
            assert f"{asset.name}: " in done.stderr and "(100%)" in done.stderr  # progress
        again = fresh.run("server", "install", "--version", tree.version, "--from",
                          server.url)
    assert again.returncode == 0 and "is already installed" in again.stdout
    assert "(100%)" not in again.stderr
    print(f"install: {first_took:.1f} s")

    info = json.loads(fresh.run("server", "info", "--json").stdout)
    for name in ("fdbserver", "fdbcli", "libfdb_c"):
        assert info[name]["source"] == "installed", info[name]
        assert info[name]["path"].startswith(str(folder)), info[name]
    assert [i["version"] for i in info["installed"]] == [tree.version]

    loaded = fresh.python_code(
        "import fdbrecipes.server as s\nf = s.use_installed()\nprint(f.source, f.path)\n"
        "import fdb\nfdb.api_version(730)\nprint(s.loaded_client_library())")
    assert loaded.returncode == 0, loaded.stderr
    source, path, really = loaded.stdout.split()
    assert source == "installed" and path == really == str(folder / "lib" / "libfdb_c.so")

    demo = fresh.run("demo", timeout=300)
    assert demo.returncode == 0, demo.stderr
    assert "Demo finished." in demo.stdout

    tests = subprocess.run([str(fresh.python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            INTEGRATION_FILE], capture_output=True, text=True, timeout=600,
                           cwd=str(ROOT), env={**fresh.env, "FDBRECIPES_REQUIRE_SERVER": "1"},
                           check=False)
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert " passed" in tests.stdout and "skipped" not in tests.stdout


def _tampered_tree(tree: Tree, tmp_path: Path) -> str:
    """A copy of the tree (links to its packages) whose server package's published sum
    is wrong; the wrong sum."""
    version = tmp_path / "tampered" / tree.version
    version.mkdir(parents=True)
    for item in (tree.base / tree.version).iterdir():
        (version / item.name).symlink_to(item)
    wrong = "0" * 63 + "1"
    server = release(tree.version, tree.platform).assets[1].name
    (version / f"{server}.sha256").unlink()
    (version / f"{server}.sha256").write_text(f"{wrong}  {server}\n")
    return wrong


def test_a_tampered_checksum_is_refused_with_both_sums_and_nothing_installed(
        tree: Tree, fresh: Fresh, tmp_path: Path) -> None:
    wrong = _tampered_tree(tree, tmp_path)
    server_deb = release(tree.version, tree.platform).assets[1].name
    actual = (tree.base / tree.version / f"{server_deb}.sha256").read_text().split()[0]
    root = tmp_path / "root"
    with serving(tmp_path / "tampered") as server:
        done = fresh.run("server", "install", "--version", tree.version, "--dir", str(root),
                         "--from", server.url)
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("fdbrecipes server install: ") and actual in line and wrong in line
    assert "refused" in line and "nothing installed" in line
    assert sorted(p.name for p in root.iterdir()) == [".lock"]


def test_a_download_killed_halfway_leaves_nothing_installed_and_a_rerun_completes(
        tree: Tree, fresh: Fresh, tmp_path: Path) -> None:
    root = tmp_path / "root"
    server_deb = release(tree.version, tree.platform).assets[1].name
    with serving(tree.base, stall={server_deb}) as server:
        args = [str(fresh.bin / "fdbrecipes"), "server", "install", "--version", tree.version,
                "--dir", str(root), "--from", server.url]
        killed = subprocess.Popen(args, env=fresh.env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            assert server.stalled.wait(300), "the download never reached its middle"
        finally:
            killed.send_signal(signal.SIGKILL)
            killed.wait(60)
        assert not (root / tree.version).exists()
        info = json.loads(fresh.run("server", "info", "--json", "--dir", str(root)).stdout)
        assert info["installed"] == [] and info["fdbserver"]["source"] != "installed"

        server.stall.clear()
        done = fresh.run("server", "install", "--version", tree.version, "--dir", str(root),
                         "--from", server.url)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in root.iterdir()) == [".lock", tree.version]
    assert f"export FDBRECIPES_SERVER_DIR={root}" in done.stdout


def test_an_unreachable_host_fails_within_seconds_naming_the_url_and_from(
        fresh: Fresh, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    done = fresh.run("server", "install", "--dir", str(tmp_path / "root"), "--from",
                     f"http://127.0.0.1:{port}/", timeout=60)
    assert done.returncode == 1 and time.monotonic() - started < 10
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"http://127.0.0.1:{port}/" in lines[0] and "--from" in lines[0]


@pytest.fixture
def server_dir(tree: Tree, fresh: Fresh, tmp_path: Path) -> Iterator[Path]:
    """A folder for ``server start`` with the installed copy in place; whatever runs
    there is stopped afterwards."""
    if not _installed_folder(fresh, tree.version).is_dir():
        with serving(tree.base) as server:
            done = fresh.run("server", "install", "--version", tree.version, "--from",
                             server.url)
        assert done.returncode == 0, done.stderr
    folder = tmp_path / "server"
    try:
        yield folder
    finally:
        if (folder / "server.json").exists():
            fresh.run("server", "stop", "--dir", str(folder), timeout=120)


def _key(fresh: Fresh, cluster_file: Path, write: bool) -> List[str]:
    """Write (or read) the key ``survives`` through the bindings and the installed copy."""
    code = ("import fdbrecipes.server as s\ns.use_installed()\nimport fdb\nfdb.api_version(730)\n"
            f"db = fdb.open({str(cluster_file)!r})\n"
            "db.options.set_transaction_timeout(20000)\n"
            + ("db[b'survives'] = b'yes'\n" if write else "print(db[b'survives'])\n"))
    done = fresh.python_code(code)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_started_server_keeps_its_data_across_stop_and_start(
        fresh: Fresh, server_dir: Path) -> None:
    started = fresh.run("server", "start", "--dir", str(server_dir))
    assert started.returncode == 0, started.stderr
    cluster_file = server_dir / "fdb.cluster"
    assert f"export FDB_CLUSTER_FILE={cluster_file}" in started.stdout
    assert "is up" in started.stdout and "ssd engine" in started.stdout

    began = time.monotonic()
    up = fresh.run("server", "status", "--dir", str(server_dir), timeout=30)
    took = time.monotonic() - began
    assert up.returncode == 0 and "is available" in up.stdout, up.stdout + up.stderr
    began = time.monotonic()
    seen = status(str(server_dir))  # what the command does once Python has started
    answered = time.monotonic() - began
    assert seen.up and answered < 1.0, (seen, answered)
    print(f"server status: {took:.2f} s as a command, {answered:.2f} s its own work")

    _key(fresh, cluster_file, write=True)
    stopped = fresh.run("server", "stop", "--dir", str(server_dir), timeout=60)
    assert stopped.returncode == 0 and "stopped 1 process(es)" in stopped.stdout
    down = fresh.run("server", "status", "--dir", str(server_dir), timeout=30)
    assert down.returncode == 1 and "not up: stopped" in down.stdout

    again = fresh.run("server", "start", "--dir", str(server_dir))
    assert again.returncode == 0, again.stderr
    assert _key(fresh, cluster_file, write=False) == ["b'yes'"]
    twice = fresh.run("server", "start", "--dir", str(server_dir))
    assert twice.returncode == 0 and "was already running" in twice.stdout


def test_a_process_exiting_as_it_starts_is_said_in_one_line(fresh: Fresh,
                                                            server_dir: Path) -> None:
    """Here fdbserver exits at once (its cluster file was overwritten): ``start``
    fails in one line naming the process's output, and leaves nothing running."""
    started = fresh.run("server", "start", "--dir", str(server_dir))
    assert started.returncode == 0, started.stderr
    stopped = fresh.run("server", "stop", "--dir", str(server_dir), timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    (server_dir / "fdb.cluster").write_text("not a cluster file\n")
    failed = fresh.run("server", "start", "--dir", str(server_dir))
    lines = failed.stderr.strip().splitlines()
    assert failed.returncode == 1 and len(lines) == 1, failed.stderr
    output = (server_dir / "p0" / "fdbserver.out").resolve()
    assert "exited with" in lines[0] and str(output) in lines[0], lines[0]
    down = fresh.run("server", "status", "--dir", str(server_dir), timeout=30)
    assert down.returncode == 1 and "not up: stopped" in down.stdout, down.stdout


def test_stop_refuses_a_server_it_did_not_start(fresh: Fresh, fdb_cluster_file: str,
                                                fdb_database: Any) -> None:
    """Here, the folder of the tests' own throwaway server: stop leaves it running."""
    folder = Path(fdb_cluster_file).parent
    done = fresh.run("server", "stop", "--dir", str(folder), timeout=60)
    assert done.returncode == 1
    assert f"no server was started in {folder.resolve()}" in done.stderr
    status = fresh.run("server", "status", "--dir", str(folder), timeout=30)
    assert status.returncode == 1 and "no server was started" in status.stdout
    fdb_database[b"fdbrecipes-test/still-up"] = b"yes"  # it still answers
