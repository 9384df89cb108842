"""Waiting for a local cluster through ``fdbcli``: its database created, a commit
going through, a command such as ``exclude`` done; for :class:`~fdbrecipes.testing.LocalCluster`
and ``fdbrecipes server start`` alike.

``fdbcli`` is an external program, with nothing to wait on: it is run again every
:data:`POLL` seconds, up to a deadline, while the server processes started for it are
watched (one that exits ends the wait at once).
"""

from __future__ import annotations

import subprocess
import time
from typing import Callable, Mapping

from .plan import ServerProcess
from .programs import run_fdbcli

#: Seconds between two looks at a cluster being waited for (each look runs fdbcli:
#: an external program, with nothing to wait on).
POLL = 0.25
#: The key a start (and ``LocalCluster.wait_healthy``) writes and clears to see a
#: commit go through.
PROBE = "writemode on; set fdbrecipes/probe 1; clear fdbrecipes/probe"


class ClusterNotReadyError(RuntimeError):
    """A server process exited, or ``fdbcli`` did not get what was waited for in time
    (:func:`run_fdbcli_until`; the message says which)."""


def created(_code: int, out: str) -> bool:
    """Whether ``fdbcli``'s ``configure new`` left a database (new or existing)."""
    return "Database created" in out or "already exists" in out


def succeeded(code: int, out: str) -> bool:
    """Whether an ``fdbcli`` command succeeded."""
    return code == 0 and "ERROR" not in out


def run_fdbcli_until(fdbcli: str, cluster_file: str, command: str,
                     ok: Callable[[int, str], bool], deadline: float,
                     watched: Mapping[ServerProcess, subprocess.Popen[bytes]]) -> None:
    """Run ``fdbcli --exec command`` on ``cluster_file`` until ``ok(returncode,
    output)`` (its stdout and stderr, stripped; :func:`created`, :func:`succeeded`),
    every :data:`POLL` seconds (fdbcli is an external program: there is nothing to
    wait on), each run given what is left before ``deadline`` (``time.monotonic()``),
    at most 30 s.

    Raises:
        ClusterNotReadyError: a process of ``watched`` (started as its ``Popen``)
            exited (the message names its output and logs), or ``deadline`` passed
            (the message holds fdbcli's last words).
    """
    last = ""
    while time.monotonic() < deadline:
        for process, popen in watched.items():
            if popen.poll() is not None:
                raise ClusterNotReadyError(f"fdbserver {process.address} exited with "
                                           f"{popen.returncode}; see {process.output} and "
                                           f"{process.logs}")
        try:
            done = run_fdbcli(fdbcli, cluster_file, command,
                              max(1.0, min(30.0, deadline - time.monotonic())))
            last = (done.stdout + done.stderr).strip()
            if ok(done.returncode, last):
                return
        except subprocess.TimeoutExpired:
            last = "fdbcli timed out"
        time.sleep(POLL)
    raise ClusterNotReadyError(f"fdbcli {command!r} did not succeed in time: {last[:300]}")
