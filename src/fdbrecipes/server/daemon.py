"""``fdbrecipes server start|stop|status``: a persistent local development server.

Unlike the throwaway servers of :class:`~fdbrecipes.testing.LocalCluster`, this one
keeps its data: ``start`` runs ``N`` ``fdbserver`` processes in the background (found
by the search order, :mod:`.find`) on 127.0.0.1, ssd storage engine, everything under
one folder::

    DIR/fdb.cluster     the cluster file (export FDB_CLUSTER_FILE=DIR/fdb.cluster)
    DIR/server.json     its ports and identity, kept; the processes' ids while it runs
    DIR/p0/data, logs   each process's data and trace logs (p0/fdbserver.out: its output)

The first ``start`` creates the database (``configure new single ssd``); later ones
start the same processes on the same ports and files, so the data survives a
``stop``.  ``stop`` ends only the processes its own ``start`` recorded, and only
while their command line still names this folder's cluster file: it never touches a
server it did not start.  ``status`` answers in well under a second.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Dict, List, Optional, Tuple

from .._local.plan import ClusterPlan, ServerProcess, check_processes, make_plan
from .._local.programs import free_ports, run_fdbcli, server_programs
from .._local.ready import PROBE, created, run_fdbcli_until, succeeded
from .find import data_home
from .lock import locked

__all__ = ["ENGINE", "ServerError", "Started", "Status", "default_directory", "start", "status",
           "stop"]

#: The storage engine of the development server, whose data stays on disk across restarts.
ENGINE = "ssd"
#: The file holding the server's layout and its processes' ids.
STATE = "server.json"
#: Seconds ``stop`` waits for a process to end after SIGTERM, before SIGKILL.
STOP_GRACE = 10.0
#: Seconds ``status`` gives fdbcli to say the database is available.
STATUS_BUDGET = 0.8


class ServerError(RuntimeError):
    """The server cannot be started, stopped or read (the message says why)."""


def default_directory() -> Path:
    """Where the server lives unless told: ``data_home() / "server"``."""
    return data_home() / "server"


@dataclass
class ServerState:
    """What ``server.json`` holds: the layout (kept) and the running processes' ids."""

    ports: List[int]
    cluster_id: str
    configured: bool = False
    pids: List[Optional[int]] = field(default_factory=list)

    def plan(self, directory: Path) -> ClusterPlan:
        """The processes' layout under ``directory``, as the first start made it."""
        processes = tuple(ServerProcess(i, port, "unset", directory / f"p{i}")
                          for i, port in enumerate(self.ports))
        return ClusterPlan(processes, "single", ENGINE, self.cluster_id, MappingProxyType({}))

    @classmethod
    def read(cls, directory: Path) -> Optional[ServerState]:
        """The state in ``directory``, or None where no server was ever started.

        Raises:
            ServerError: the file is unreadable.
        """
        path = directory / STATE
        if not path.is_file():
            return None
        try:
            raw: Dict[str, Any] = json.loads(path.read_text())
            return cls([int(p) for p in raw["ports"]], str(raw["cluster_id"]),
                       bool(raw.get("configured")),
                       [None if p is None else int(p) for p in raw.get("pids", [])])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ServerError(f"{path} is not a server's state ({e})") from None

    def write(self, directory: Path) -> None:
        """Save the state (a new file renamed over the old one)."""
        path = directory / STATE
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps({"ports": self.ports, "cluster_id": self.cluster_id,
                                       "configured": self.configured, "pids": self.pids},
                                      indent=2) + "\n")
        partial.replace(path)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (an ended child of this process is reaped first)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _command_line(pid: int) -> Optional[List[str]]:
    """The command line of process ``pid``, or None if it is not running (or not
    readable: someone else's)."""
    if not _alive(pid):
        return None
    proc = Path(f"/proc/{pid}/cmdline")
    if proc.exists():
        with contextlib.suppress(OSError):
            return [a for a in proc.read_bytes().decode(errors="replace").split("\0") if a]
        return None
    done = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True,
                          text=True, check=False)
    return done.stdout.split() if done.returncode == 0 and done.stdout.strip() else None


def _ours(pid: Optional[int], cluster_file: Path) -> bool:
    """Whether ``pid`` runs an ``fdbserver`` on ``cluster_file`` (not some other
    program that took its number)."""
    if pid is None:
        return False
    args = _command_line(pid)
    if not args or os.path.basename(args[0]) != "fdbserver":
        return False
    return any(a == "--cluster-file" and b == str(cluster_file) for a, b in zip(args, args[1:]))


def _running(state: ServerState, directory: Path) -> List[int]:
    """The ids of the recorded processes that still run this folder's server."""
    cluster_file = directory / "fdb.cluster"
    return [pid for pid in state.pids if pid is not None and _ours(pid, cluster_file)]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class Started:
    """What :func:`start` did: the cluster file, the processes' addresses, the
    ``fdbserver`` used, and whether it was running already."""

    cluster_file: Path
    addresses: Tuple[str, ...]
    fdbserver: str
    already: bool


def start(directory: Optional[str] = None, processes: Optional[int] = None,
          timeout: float = 120.0) -> Started:
    """Start the server in ``directory`` (default :func:`default_directory`) with
    ``processes`` processes (default: as before, or 1), creating its database the
    first time; return once a commit goes through.

    Raises:
        TypeError or ValueError: ``processes`` is not 1 to 32, or differs from the
            server's (kept in ``directory``).
        ServerNotFoundError: no ``fdbserver``/``fdbcli`` (see the search order).
        ServerError: a port is taken (nothing is started).
        RuntimeError: a process exited, or it was not up in time (a
            ``ClusterNotReadyError``; the processes started are stopped again).
    """
    if processes is not None:
        check_processes(processes)
    home = Path(directory).expanduser() if directory else default_directory()
    home.mkdir(parents=True, exist_ok=True)
    home = home.resolve()
    fdbserver, fdbcli = server_programs()
    cluster_file = home / "fdb.cluster"
    with locked(home):
        state = ServerState.read(home)
        if state is not None and processes is not None and processes != len(state.ports):
            raise ValueError(f"processes: the server in {home} has {len(state.ports)} "
                             f"process(es); start it with --processes {len(state.ports)}, "
                             "or use another --dir")
        if state is None:
            n = processes or 1
            plan = make_plan(n, "single", ENGINE, None, home, free_ports(n), {})
            state = ServerState([p.port for p in plan.processes], plan.cluster_id)
            cluster_file.write_text(plan.cluster_file_text())
            state.write(home)
        plan = state.plan(home)
        addresses = tuple(p.address for p in plan.processes)
        pids = (state.pids + [None] * len(plan.processes))[:len(plan.processes)]
        stopped = [p for p, pid in zip(plan.processes, pids) if not _ours(pid, cluster_file)]
        if not stopped:
            return Started(cluster_file, addresses, fdbserver, True)
        taken = [p.port for p in stopped if not _port_free(p.port)]
        if taken:
            raise ServerError(f"port(s) {', '.join(map(str, taken))} of the server in {home} "
                              "are taken by another program; stop it, or use another --dir")
        popens = _spawn(stopped, plan, fdbserver, str(cluster_file))
        for process, popen in zip(stopped, popens):
            pids[process.index] = popen.pid
        state.pids = pids
        state.write(home)
        try:
            deadline = time.monotonic() + timeout
            watched = dict(zip(stopped, popens))
            if not state.configured:
                run_fdbcli_until(fdbcli, str(cluster_file), plan.configure_command(),
                                 created, deadline, watched)
                state.configured = True
                state.write(home)
            run_fdbcli_until(fdbcli, str(cluster_file), PROBE, succeeded, deadline, watched)
        except BaseException:
            _end([p.pid for p in popens])
            state.pids = [None if pid in {p.pid for p in popens} else pid for pid in pids]
            state.write(home)
            raise
    return Started(cluster_file, addresses, fdbserver, False)


def _spawn(processes: List[ServerProcess], plan: ClusterPlan, fdbserver: str,
           cluster_file: str) -> List[subprocess.Popen[bytes]]:
    """Start ``processes`` of ``plan``, each in a session of its own (so it outlives
    this command and Ctrl-C in its terminal), its output appended to its
    ``fdbserver.out``."""
    popens = []
    for process in processes:
        process.data.mkdir(parents=True, exist_ok=True)
        process.logs.mkdir(parents=True, exist_ok=True)
        with open(process.output, "ab") as out:
            popens.append(subprocess.Popen(plan.command(process, fdbserver, cluster_file),
                                           stdin=subprocess.DEVNULL, stdout=out,
                                           stderr=subprocess.STDOUT, start_new_session=True))
    return popens


def _end(pids: List[int]) -> None:
    """SIGTERM each process, then SIGKILL those still there after :data:`STOP_GRACE`."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)  # another session's processes: nothing to wait on but their ids
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def stop(directory: Optional[str] = None) -> int:
    """Stop the server that :func:`start` started in ``directory``; how many processes
    it stopped (0: it was not running).  Its data stays.

    Raises:
        ServerError: no server was ever started there (nothing is touched).
    """
    home = (Path(directory).expanduser() if directory else default_directory()).resolve()
    state = ServerState.read(home)
    if state is None:
        raise ServerError(f"no server was started in {home}: nothing to stop (stop only "
                          "ends a server 'fdbrecipes server start' started there)")
    with locked(home):
        state = ServerState.read(home) or state
        ours = _running(state, home)
        _end(ours)
        state.pids = []
        state.write(home)
    return len(ours)


@dataclass(frozen=True)
class Status:
    """What :func:`status` saw.

    Attributes:
        up: the processes run and the database answered.
        running: the ids of the server's processes that run.
        addresses: the processes' addresses.
        cluster_file: the cluster file, or None where no server was ever started.
        detail: what the database said, or why it is not up.
    """

    up: bool
    running: Tuple[int, ...]
    addresses: Tuple[str, ...]
    cluster_file: Optional[Path]
    detail: str


def status(directory: Optional[str] = None, budget: float = STATUS_BUDGET) -> Status:
    """Whether the server in ``directory`` is up: its processes run, and fdbcli hears
    from the database within ``budget`` seconds.  Reads only."""
    home = (Path(directory).expanduser() if directory else default_directory()).resolve()
    state = ServerState.read(home)
    if state is None:
        return Status(False, (), (), None, f"no server was started in {home}")
    cluster_file = home / "fdb.cluster"
    addresses = tuple(p.address for p in state.plan(home).processes)
    running = tuple(_running(state, home))
    if not running:
        return Status(False, (), addresses, cluster_file, "stopped")
    if len(running) < len(state.ports):
        return Status(False, running, addresses, cluster_file,
                      f"{len(state.ports) - len(running)} of {len(state.ports)} processes "
                      "are not running")
    try:
        done = run_fdbcli(server_programs()[1], str(cluster_file), "status minimal",
                          kill_after=budget)
        said = (done.stdout + done.stderr).strip()
    except subprocess.TimeoutExpired:
        return Status(False, running, addresses, cluster_file,
                      f"the processes run, but the database did not answer within {budget:g} s")
    except RuntimeError as e:
        return Status(False, running, addresses, cluster_file, str(e))
    return Status("is available" in said, running, addresses, cluster_file,
                  said.splitlines()[0] if said else "fdbcli said nothing")
