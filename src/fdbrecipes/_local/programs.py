"""Finding the FoundationDB server programs (``fdbserver``, ``fdbcli``) and free ports.

Nothing here loads ``libfdb_c`` or selects an API version.
"""

from __future__ import annotations

import os
import shutil
import socket
from typing import List, Optional, Tuple

SEARCH_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin",
               "/usr/local/libexec", "/usr/lib/foundationdb")

SERVER_HINT = (
    "install the FoundationDB 7.3 server (package foundationdb-server from "
    "https://github.com/apple/foundationdb/releases) or set FDB_CLUSTER_FILE to a running "
    "cluster"
)


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
    for directory in SEARCH_DIRS:
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def server_programs() -> Tuple[str, str]:
    """The paths of ``fdbserver`` and ``fdbcli``.

    Raises:
        ServerNotFoundError: either is missing (the message names which, where it
            looked, and what to install).
    """
    fdbserver = find_program("fdbserver", "FDBSERVER")
    fdbcli = find_program("fdbcli", "FDBCLI")
    missing = [n for n, p in (("fdbserver", fdbserver), ("fdbcli", fdbcli)) if not p]
    if fdbserver is None or fdbcli is None:
        raise ServerNotFoundError(
            f"{' and '.join(missing)} not found (looked at $FDBSERVER/$FDBCLI, PATH, "
            f"{', '.join(SEARCH_DIRS)}): {SERVER_HINT}"
        )
    return fdbserver, fdbcli


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
