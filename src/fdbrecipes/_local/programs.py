"""Finding the FoundationDB server programs (``fdbserver``, ``fdbcli``), running
``fdbcli``, and free ports.

The programs are found by the one search order of :mod:`fdbrecipes.server.find`
(``$FDBSERVER``/``$FDBCLI``, ``PATH``, the copy ``fdbrecipes server install`` put in
place, the packages' places).  Nothing here loads ``libfdb_c`` or selects an API version.
"""

from __future__ import annotations

import socket
import subprocess
from typing import List, Optional, Tuple

from ..server.find import INSTALL_HINT
from ..server.find import find_program as _search

SERVER_HINT = f"{INSTALL_HINT}, or set FDB_CLUSTER_FILE to a running cluster"


class ServerNotFoundError(RuntimeError):
    """No ``fdbserver``/``fdbcli`` to start a throwaway cluster with."""


def find_program(name: str, env_var: str) -> Optional[str]:
    """The path of ``name`` by the search order (``$env_var`` first), or None."""
    return _search(name, env_var).path


def server_programs() -> Tuple[str, str]:
    """The paths of ``fdbserver`` and ``fdbcli``.

    Raises:
        ServerNotFoundError: either is missing (the message names which, where it
            looked, and what to do).
    """
    fdbserver = _search("fdbserver", "FDBSERVER")
    fdbcli = _search("fdbcli", "FDBCLI")
    if fdbserver.path is None or fdbcli.path is None:
        missing = [f for f in (fdbserver, fdbcli) if f.path is None]
        reasons = "; ".join(f"{f.name}: {f.why}" for f in missing)
        raise ServerNotFoundError(f"{' and '.join(f.name for f in missing)} not found "
                                  f"({reasons}): {SERVER_HINT}")
    return fdbserver.path, fdbcli.path


def run_fdbcli(fdbcli: str, cluster_file: str, command: str, timeout: float = 10.0,
               kill_after: Optional[float] = None) -> subprocess.CompletedProcess[str]:
    """Run ``fdbcli --exec command`` on ``cluster_file`` (fdbcli's own ``--timeout`` is
    ``timeout``, at least 1 s; the program is killed ``kill_after`` seconds after it
    started, default 10 s after its timeout).

    Raises:
        subprocess.TimeoutExpired: it was killed.
    """
    args: List[str] = [fdbcli, "-C", cluster_file, "--exec", command,
                       "--timeout", str(max(1, int(timeout)))]
    return subprocess.run(args, capture_output=True, text=True, check=False,
                          timeout=timeout + 10 if kill_after is None else kill_after)


def free_ports(n: int) -> List[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 now (held open together while they
    are picked, so none is handed out twice; another program may still take one
    before a server binds it)."""
    sockets: List[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()
