"""How fdbrecipes' own tools get a cluster and a database.

The ``fdbrecipes`` command (demo, bench), the benchmark's client processes and the
pytest plugin share this module:

* a cluster: :func:`local_cluster` yields the cluster file ``FDB_CLUSTER_FILE`` names,
  or that of a throwaway single-process ``fdbserver`` (:class:`LocalCluster`) on a free
  127.0.0.1 port, driven through the ``fdbserver`` and ``fdbcli`` programs;
* the client library: :func:`client_library_problem` says why ``libfdb_c`` cannot be
  loaded, if it cannot, and :func:`tools_client_problem` also why the installed
  bindings cannot use it (their version is newer than the library's);
* the API version these tools select, chosen in one place (:func:`select_api_version`;
  the library itself never selects one), and :func:`open_database`;
* :func:`with_cluster`, which runs a command's body on a cluster or says in one line
  why it cannot.

Importing this module needs neither ``libfdb_c`` nor a selected API version.  The
public names for tests are re-exported by :mod:`fdbrecipes.testing`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

_SEARCH_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin",
                "/usr/local/libexec", "/usr/lib/foundationdb")

CLIENT_HINT = (
    "install the FoundationDB 7.3 client library (package foundationdb-clients from "
    "https://github.com/apple/foundationdb/releases)"
)
BINDINGS_HINT = (
    "install the Python bindings of the client library's version, for 7.3: "
    "pip install 'foundationdb==7.3.*'"
)
SERVER_HINT = (
    "install the FoundationDB 7.3 server (package foundationdb-server from "
    "https://github.com/apple/foundationdb/releases) or set FDB_CLUSTER_FILE to a running "
    "cluster"
)
INSTALL_HINT = ("install the FoundationDB 7.3 packages foundationdb-clients and "
                "foundationdb-server from https://github.com/apple/foundationdb/releases, "
                "or set FDB_CLUSTER_FILE to a running cluster")

#: The API version the tools select unless ``$FDB_API_VERSION`` names another (capped
#: at the newest the installed bindings know).
API_VERSION = 730


class ServerNotFoundError(RuntimeError):
    """No ``fdbserver``/``fdbcli`` to start a throwaway cluster with."""


def find_program(name: str, env_var: str) -> Optional[str]:
    """Locate ``name``: the path in ``env_var``, else PATH, else the usual sbin dirs."""
    configured = os.environ.get(env_var)
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    found = shutil.which(name)
    if found:
        return found
    for directory in _SEARCH_DIRS:
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def client_library_problem() -> Optional[str]:
    """Why the fdb bindings cannot talk to a cluster here, or None if they can."""
    try:
        import fdb.impl  # noqa: F401  (loads libfdb_c)
    except Exception as e:
        return f"libfdb_c is not loadable ({e}): {CLIENT_HINT}"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _created(_code: int, out: str) -> bool:
    """Whether ``fdbcli``'s ``configure new`` left a database (new or existing)."""
    return "Database created" in out or "already exists" in out


def _succeeded(code: int, out: str) -> bool:
    """Whether an ``fdbcli`` command succeeded."""
    return code == 0 and "ERROR" not in out


class LocalCluster:
    """A single-process FoundationDB cluster on 127.0.0.1, for tests and the tools.

    Args:
        engine: storage engine for ``configure new single <engine>`` (``memory``,
            ``ssd``, ...).
        directory: where data, logs and the cluster file go (default: a new temporary
            directory, removed by :meth:`cleanup`).
        startup_timeout: seconds to wait for the database to accept a commit.

    Raises:
        ServerNotFoundError: no ``fdbserver`` or no ``fdbcli`` program was found.
    """

    def __init__(
        self,
        *,
        engine: str = "memory",
        directory: Optional[str] = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.fdbserver = find_program("fdbserver", "FDBSERVER")
        self.fdbcli = find_program("fdbcli", "FDBCLI")
        missing = [n for n, p in (("fdbserver", self.fdbserver), ("fdbcli", self.fdbcli)) if not p]
        if missing:
            raise ServerNotFoundError(
                f"{' and '.join(missing)} not found (looked at $FDBSERVER/$FDBCLI, PATH, "
                f"{', '.join(_SEARCH_DIRS)}): {SERVER_HINT}"
            )
        self.engine = engine
        self.startup_timeout = startup_timeout
        self._own_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="fdbrecipes-"))
        self.port = _free_port()
        self.cluster_file = str(self.directory / "fdb.cluster")
        Path(self.cluster_file).write_text(
            f"fdbrecipes:{secrets.token_hex(8)}@127.0.0.1:{self.port}\n"
        )
        self._process: Optional[subprocess.Popen[bytes]] = None
        self._configured = False

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> str:
        """Start the server (configuring the database the first time); return the
        cluster file once a transaction commits."""
        if self._process is not None and self._process.poll() is None:
            return self.cluster_file
        data, logs = self.directory / "data", self.directory / "logs"
        data.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        assert self.fdbserver is not None
        with open(self.directory / "fdbserver.out", "ab") as out:
            self._process = subprocess.Popen(
                [
                    self.fdbserver,
                    "--public-address", f"127.0.0.1:{self.port}",
                    "--listen-address", "public",
                    "--cluster-file", self.cluster_file,
                    "--datadir", str(data),
                    "--logdir", str(logs),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.startup_timeout
        if not self._configured:
            self._until(deadline, f"configure new single {self.engine}", _created)
            self._configured = True
        self._until(deadline, "writemode on; set fdbrecipes/probe 1; clear fdbrecipes/probe",
                    _succeeded)
        return self.cluster_file

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """Kill the server with SIGKILL, as a crash would; data stays for restart()."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()

    def restart(self) -> str:
        """Start again on the same data directory and port (no reconfiguration)."""
        self.kill()
        return self.start()

    def cleanup(self) -> None:
        """Stop the server and remove a temporary directory."""
        self.stop()
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        """Start the server; if it does not come up, clean up before raising."""
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    # -- fdbcli --------------------------------------------------------------------------

    def cli(self, command: str, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
        """Run ``fdbcli --exec command`` against this cluster."""
        assert self.fdbcli is not None
        args: List[str] = [self.fdbcli, "-C", self.cluster_file, "--exec", command,
                           "--timeout", str(max(1, int(timeout)))]
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout + 10,
                              check=False)

    def _until(self, deadline: float, command: str, ok: Callable[[int, str], bool]) -> None:
        last = ""
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(
                    f"fdbserver exited with {self._process.returncode}; see "
                    f"{self.directory / 'fdbserver.out'} and {self.directory / 'logs'}"
                )
            try:
                result = self.cli(command, timeout=5)
                last = (result.stdout + result.stderr).strip()
                if ok(result.returncode, last):
                    return
            except subprocess.TimeoutExpired:
                last = "fdbcli timed out"
            time.sleep(0.2)  # polling an external program: nothing to wait on
        raise RuntimeError(f"fdbcli {command!r} did not succeed in time: {last}")


@contextlib.contextmanager
def local_cluster(engine: str = "memory") -> Iterator[str]:
    """Yield a cluster file: ``$FDB_CLUSTER_FILE``, or a throwaway local server's.

    Raises:
        ServerNotFoundError: no ``FDB_CLUSTER_FILE`` and no ``fdbserver``/``fdbcli``.
    """
    configured = os.environ.get("FDB_CLUSTER_FILE")
    if configured:
        yield configured
        return
    with LocalCluster(engine=engine) as cluster:
        yield cluster.cluster_file


# -- the API version and the database ----------------------------------------------------


def wanted_api_version() -> int:
    """The API version the tools select: ``$FDB_API_VERSION``, else 730, capped at the
    newest the installed bindings know (``fdb.LATEST_API_VERSION``)."""
    import fdb

    wanted = int(os.environ.get("FDB_API_VERSION", str(API_VERSION)))
    return min(wanted, int(fdb.LATEST_API_VERSION))


def tools_client_problem() -> Optional[str]:
    """Why the tools cannot use the client library here, or None: either
    :func:`client_library_problem`, or bindings that refuse the installed ``libfdb_c``
    (bindings 8.0 need an 8.0 library).  When there is no problem, the tools' API
    version is selected (:func:`select_api_version`): the check is the selection."""
    problem = client_library_problem()
    if problem:
        return problem
    try:
        select_api_version()
    except RuntimeError as e:
        return f"{e} ({BINDINGS_HINT})"
    return None


def select_api_version() -> int:
    """Select :func:`wanted_api_version` unless a version is selected already; return
    the selected version.  Loads ``libfdb_c``."""
    import fdb

    if not fdb.is_api_version_selected():
        fdb.api_version(wanted_api_version())
    return int(fdb.get_api_version())


def open_database(cluster_file: str) -> Any:
    """Select the API version (:func:`select_api_version`) and open ``cluster_file``."""
    select_api_version()
    import fdb

    return fdb.open(cluster_file)


#: Seconds the tools wait for a cluster's first answer before they say it does not
#: answer (the operator commands' ``--timeout`` default).
FIRST_CONTACT_SECONDS = 10.0


def first_contact(cluster_file: str, timeout: float = FIRST_CONTACT_SECONDS) -> Optional[str]:
    """Why the cluster of ``cluster_file`` cannot be used, in one line, or None when a
    read there came back within ``timeout`` seconds.  A client pointed at nothing
    waits forever by default: the tools bound their first contact with this instead."""
    import fdb

    database = open_database(cluster_file)
    tr = database.create_transaction()
    tr.options.set_timeout(int(timeout * 1000))
    while True:
        try:
            tr.get(b"fdbrecipes/first-contact").wait()  # a read: nothing is written
            return None
        except fdb.FDBError as e:
            if e.code == 1031:  # transaction_timed_out
                return (f"the cluster of cluster file {cluster_file} did not answer within "
                        f"{timeout:g} s: is it running and reachable from here? (check "
                        "FDB_CLUSTER_FILE, or unset it to start a throwaway server)")
            try:
                tr.on_error(e).wait()
            except fdb.FDBError as final:
                return (f"the cluster of cluster file {cluster_file} cannot be used: "
                        f"FoundationDB error {final.code} ({final.description})")


def with_cluster(
    command: str,
    body: Callable[[str], int],
    *,
    check_client: Callable[[], Optional[str]] = tools_client_problem,
    contact: Callable[[str], Optional[str]] = first_contact,
) -> int:
    """Run ``body(cluster_file)`` on FDB_CLUSTER_FILE or a throwaway local fdbserver.

    Returns what ``body`` returns, or 1 with a one-line reason on stderr
    (``fdbrecipes <command>: cannot run: <reason>``) when neither the client library
    nor a cluster can be had.  ``check_client`` says why the client library cannot be
    used (None: it can), and ``contact`` why the cluster does not answer (None: it
    does; by default :func:`first_contact`, bounded); tests pass their own to reach the
    server check on a machine without ``libfdb_c``.
    """
    problem = check_client()
    if problem:
        print(f"fdbrecipes {command}: cannot run: {problem}", file=sys.stderr)
        return 1
    try:
        with local_cluster() as cluster_file:
            unreachable = contact(cluster_file)
            if unreachable:
                print(f"fdbrecipes {command}: cannot run: {unreachable}", file=sys.stderr)
                return 1
            return body(cluster_file)
    except ServerNotFoundError as e:
        print(f"fdbrecipes {command}: cannot run: {e}", file=sys.stderr)
        return 1
