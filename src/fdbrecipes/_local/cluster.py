"""Throwaway FoundationDB clusters on 127.0.0.1: one ``fdbserver`` process or many,
with faults to inject (see :class:`LocalCluster`).

The servers are driven through the ``fdbserver`` and ``fdbcli`` programs: nothing
here loads ``libfdb_c`` or selects an API version.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from .plan import (
    ClusterPlan,
    ServerProcess,
    check_classes,
    check_engine,
    check_knobs,
    check_processes,
    check_redundancy,
    check_seconds,
    make_plan,
)
from .programs import free_ports, run_fdbcli, server_programs
from .ready import POLL, PROBE, created, run_fdbcli_until, succeeded
from .reaper import Reaper
from .status import ClusterRoles, health_problems, parse_roles, parse_status

#: What names a process of a LocalCluster: its index, its ``"127.0.0.1:port"``
#: address, or its :class:`ServerProcess`.
ProcessRef = Union[int, str, ServerProcess]


class LocalCluster:
    """A FoundationDB cluster of ``processes`` ``fdbserver`` processes on 127.0.0.1,
    for tests and local development.

    Each process has its own free port, its own folder (``p<i>/data``,
    ``p<i>/logs``, ``p<i>/fdbserver.out`` under ``directory``) and its own
    machine and zone locality, so FoundationDB spreads copies over them as over
    machines.  The cluster file names as many coordinators as the redundancy wants
    (1 for ``single``, 3 for ``double``, 5 for ``triple``; at most all processes,
    always an odd number).  The default, one process and ``single``, is the plain
    throwaway server of the pytest plugin.

    Faults: :meth:`kill` (SIGKILL), :meth:`pause` / :meth:`resume` (SIGSTOP /
    SIGCONT: a slow, not dead, process), :meth:`restart`, :meth:`exclude` /
    :meth:`include`; :meth:`roles` says which process is master, cluster controller,
    log, storage, ...; :meth:`wait_healthy` waits, with a deadline, for the cluster
    to be whole again.  A process is named by its index, its address or its
    :class:`ServerProcess` (:attr:`processes`).

    Cleanup is certain: :meth:`cleanup` (or leaving the ``with`` block, or the
    pytest fixture's teardown, also after a failure or Ctrl-C) kills every process
    and removes a temporary directory; if the Python process dies without it, a
    watchdog started with the first server does it.  Not thread-safe: drive one
    cluster from one thread at a time.

    Args:
        processes: how many ``fdbserver`` processes (1 to 32).
        redundancy: ``"single"``, ``"double"`` or ``"triple"`` (at least 1, 2, 3
            processes; one more than that survives the loss of one).
        engine: storage engine for ``configure new`` (``memory``, ``ssd``, ...).
        classes: one process class per process (``"storage"``, ``"transaction"``,
            ``"stateless"``, ``"log"``, ...; ``"unset"``: FoundationDB's choice),
            or None for all unset.
        knobs: server knobs for every process (``{"name": value}``, passed as
            ``--knob_name=value``).  None: ``initial_failure_reaction_delay=3``
            (FoundationDB's 30 s kept a fresh 5-process cluster 35 s longer from
            healthy, and again after recoveries); ``{}``: FoundationDB's defaults.
        directory: where data, logs and the cluster file go (default: a new
            temporary directory, removed by :meth:`cleanup`).
        startup_timeout: seconds :meth:`start` waits for the database to accept a
            commit (and, with several processes, to be healthy).

    Raises:
        TypeError or ValueError: an argument is wrong (the message names it).
        ServerNotFoundError: no ``fdbserver`` or no ``fdbcli`` program was found.
    """

    def __init__(
        self,
        *,
        processes: int = 1,
        redundancy: str = "single",
        engine: str = "memory",
        classes: Optional[Sequence[str]] = None,
        knobs: Optional[Mapping[str, Union[str, int, float]]] = None,
        directory: Optional[str] = None,
        startup_timeout: float = 60.0,
    ) -> None:
        n = check_processes(processes)
        self.redundancy = check_redundancy(redundancy, n)
        self.engine = check_engine(engine)
        check_classes(classes, n)
        check_knobs(knobs)
        self.startup_timeout = check_seconds(startup_timeout, "startup_timeout")
        self.fdbserver, self.fdbcli = server_programs()
        self._own_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="fdbrecipes-"))
        self.plan: ClusterPlan = make_plan(n, redundancy, engine, classes, self.directory,
                                           free_ports(n), knobs)
        self.cluster_file = str(self.directory / "fdb.cluster")
        Path(self.cluster_file).write_text(self.plan.cluster_file_text())
        self._running: Dict[int, subprocess.Popen[bytes]] = {}
        self._started: Dict[int, float] = {}  # time.monotonic() of each process's start
        self._paused: Set[int] = set()
        self._configured = False
        self._reaper: Optional[Reaper] = None

    # -- the processes -----------------------------------------------------------------

    @property
    def processes(self) -> Tuple[ServerProcess, ...]:
        """Every process of the cluster, by index."""
        return self.plan.processes

    @property
    def port(self) -> int:
        """The port of process 0 (the only one of a single-process cluster)."""
        return self.plan.processes[0].port

    def process(self, p: ProcessRef) -> ServerProcess:
        """The process ``p`` names (its index, its address, or itself).

        Raises:
            TypeError or ValueError: ``p`` names no process of this cluster.
        """
        if isinstance(p, ServerProcess):
            if p not in self.plan.processes:
                raise ValueError(f"p: {p.address} is not a process of this cluster")
            return p
        if isinstance(p, str):
            for candidate in self.plan.processes:
                if candidate.address == p:
                    return candidate
            raise ValueError(f"p: no process of this cluster has the address {p!r}")
        if type(p) is not int:
            raise TypeError(f"p must be an index, an address or a ServerProcess, not "
                            f"{type(p).__name__}")
        if not 0 <= p < len(self.plan.processes):
            raise ValueError(f"p must be 0 to {len(self.plan.processes) - 1}, got {p}")
        return self.plan.processes[p]

    def _chosen(self, p: Optional[ProcessRef]) -> List[ServerProcess]:
        return list(self.plan.processes) if p is None else [self.process(p)]

    def running(self, p: ProcessRef) -> bool:
        """Whether process ``p`` runs (a paused process runs)."""
        popen = self._running.get(self.process(p).index)
        return popen is not None and popen.poll() is None

    def _spawn(self, process: ServerProcess) -> None:
        if self.running(process):
            return
        self._end(process, signal.SIGKILL, 10.0)  # one that exited on its own: forget it
        process.data.mkdir(parents=True, exist_ok=True)
        process.logs.mkdir(parents=True, exist_ok=True)
        if self._reaper is None:
            self._reaper = Reaper(str(self.directory) if self._own_directory else None)
        with open(process.output, "ab") as out:
            popen = subprocess.Popen(self.plan.command(process, self.fdbserver,
                                                       self.cluster_file),
                                     stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._running[process.index] = popen
        self._started[process.index] = time.monotonic()
        self._reaper.watch(popen.pid)

    def _signal(self, process: ServerProcess, signum: int) -> None:
        popen = self._running.get(process.index)
        if popen is None or popen.poll() is not None:
            raise ValueError(f"p: process {process.index} ({process.address}) is not running")
        os.killpg(popen.pid, signum)

    def _end(self, process: ServerProcess, signum: int, grace: float) -> None:
        """Send ``signum`` to a running process, wait ``grace`` seconds for it to end,
        then SIGKILL it."""
        popen = self._running.pop(process.index, None)
        self._paused.discard(process.index)
        if popen is None:
            return
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signum)
                os.killpg(popen.pid, signal.SIGCONT)  # a paused process must see it
            try:
                popen.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(popen.pid, signal.SIGKILL)
                popen.wait()
        if self._reaper is not None:
            self._reaper.forget(popen.pid)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> str:
        """Start every process not running (and configure the database the first
        time); return the cluster file once a transaction commits and, with several
        processes, once the cluster is healthy (:meth:`wait_healthy`).

        Raises:
            RuntimeError: a process exited, or the database was not ready within
                ``startup_timeout`` seconds.
        """
        deadline = time.monotonic() + self.startup_timeout
        for process in self.plan.processes:
            self._spawn(process)
        if not self._configured:
            self._until(deadline, self.plan.configure_command(), created)
            self._configured = True
        self._until(deadline, PROBE, succeeded)
        if len(self.plan.processes) > 1:
            self.wait_healthy(max(1.0, deadline - time.monotonic()))
        return self.cluster_file

    def stop(self) -> None:
        """Stop every process gracefully (SIGTERM, then SIGKILL after 10 s)."""
        for process in self.plan.processes:
            self._end(process, signal.SIGTERM, 10.0)

    def kill(self, p: Optional[ProcessRef] = None) -> None:
        """SIGKILL process ``p`` (default: every process), as a crash would; its data
        stays for :meth:`restart`.  A process not running is left as it is."""
        for process in self._chosen(p):
            self._end(process, signal.SIGKILL, 10.0)

    def pause(self, p: ProcessRef) -> None:
        """SIGSTOP process ``p``: it holds its connections and answers nothing until
        :meth:`resume` (a slow process, not a dead one).

        Raises:
            ValueError: ``p`` is not running.
        """
        process = self.process(p)
        self._signal(process, signal.SIGSTOP)
        self._paused.add(process.index)

    def resume(self, p: ProcessRef) -> None:
        """SIGCONT process ``p`` (paused by :meth:`pause`).

        Raises:
            ValueError: ``p`` is not running.
        """
        process = self.process(p)
        self._signal(process, signal.SIGCONT)
        self._paused.discard(process.index)

    def paused(self) -> Tuple[ServerProcess, ...]:
        """The processes paused now."""
        return tuple(self.plan.processes[i] for i in sorted(self._paused))

    def restart(self, p: Optional[ProcessRef] = None) -> str:
        """Kill process ``p`` (if it runs) and start it again on the same folder and
        port; return the cluster file at once (:meth:`wait_healthy` waits for it to
        be part of the cluster again).  Without ``p``: the whole cluster, as
        :meth:`start` (which waits)."""
        if p is None:
            self.kill()
            return self.start()
        process = self.process(p)
        self._end(process, signal.SIGKILL, 10.0)
        self._spawn(process)
        return self.cluster_file

    def cleanup(self) -> None:
        """Kill every process and remove a temporary directory.  Safe to call more
        than once."""
        for process in self.plan.processes:
            self._end(process, signal.SIGKILL, 10.0)
        if self._reaper is not None:
            self._reaper.close()
            self._reaper = None
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        """Start the cluster; if it does not come up, clean up before raising."""
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    # -- the cluster's view ------------------------------------------------------------

    def status(self, timeout: float = 10.0) -> Dict[str, Any]:
        """The cluster's status JSON (``fdbcli status json``), parsed.

        Raises:
            RuntimeError: fdbcli printed no status within ``timeout`` seconds.
        """
        try:
            result = self.cli("status json", timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"fdbcli status json did not end within {timeout:g} s") from e
        try:
            return parse_status(result.stdout)
        except ValueError as e:
            raise RuntimeError(f"fdbcli status json: {e} {result.stderr.strip()}") from e

    def roles(self, timeout: float = 10.0) -> ClusterRoles:
        """Which process holds which role now (see :class:`ClusterRoles`): one
        ``status json``."""
        return parse_roles(self.status(timeout))

    def wait_healthy(self, timeout: float = 60.0) -> ClusterRoles:
        """Wait until the cluster is healthy: available, fully recovered, its data
        fully replicated, every running process part of it (as last started: right
        after a restart, status may still show the process killed), and a commit
        goes through.  Returns the roles then.

        Raises:
            TimeoutError: not healthy within ``timeout`` seconds (the message says
                what was still wrong).
        """
        deadline = time.monotonic() + check_seconds(timeout, "timeout")
        problems = ["no status yet"]
        while time.monotonic() < deadline:
            now = time.monotonic()
            expected = {p.address: now - self._started[p.index] for p in self.plan.processes
                        if self.running(p)}
            try:
                status = self.status(timeout=min(10.0, max(1.0, deadline - time.monotonic())))
                problems = health_problems(status, expected)
                if not problems:
                    probe = self.cli(PROBE, timeout=max(1.0, deadline - time.monotonic()))
                    if succeeded(probe.returncode, probe.stdout + probe.stderr):
                        return parse_roles(status)
                    problems = [f"a commit failed: {probe.stdout.strip()[:200]}"]
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                problems = [str(e)]
            time.sleep(POLL)  # polling an external program: nothing to wait on
        raise TimeoutError(f"the cluster was not healthy within {timeout:g} s: "
                           f"{'; '.join(problems)}")

    # -- exclusion ---------------------------------------------------------------------

    def exclude(self, p: ProcessRef, timeout: float = 120.0) -> None:
        """Exclude process ``p`` (``fdbcli exclude``): FoundationDB moves its data
        and roles to the other processes; returns once that is done.

        Raises:
            RuntimeError: fdbcli refused (say, too few processes would be left for
                the redundancy) or did not finish within ``timeout`` seconds.
        """
        process = self.process(p)
        self._until(time.monotonic() + check_seconds(timeout, "timeout"),
                    f"exclude {process.address}", succeeded)

    def include(self, p: Optional[ProcessRef] = None, timeout: float = 30.0) -> None:
        """Include process ``p`` again (default: every excluded process).

        Raises:
            RuntimeError: fdbcli did not succeed within ``timeout`` seconds.
        """
        target = "all" if p is None else self.process(p).address
        self._until(time.monotonic() + check_seconds(timeout, "timeout"),
                    f"include {target}", succeeded)

    # -- fdbcli ------------------------------------------------------------------------

    def cli(self, command: str, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
        """Run ``fdbcli --exec command`` against this cluster (fdbcli's own
        ``--timeout`` is ``timeout``; the program is killed 10 s after that)."""
        return run_fdbcli(self.fdbcli, self.cluster_file, command, timeout)

    def _until(self, deadline: float, command: str, ok: Callable[[int, str], bool]) -> None:
        """:func:`run_fdbcli_until` on this cluster, its running processes watched."""
        run_fdbcli_until(self.fdbcli, self.cluster_file, command, ok, deadline,
                         {self.plan.processes[i]: popen for i, popen in self._running.items()})
