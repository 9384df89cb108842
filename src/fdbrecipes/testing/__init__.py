"""Throwaway FoundationDB servers for tests.

``local_cluster()`` yields a cluster file: the one ``FDB_CLUSTER_FILE`` names, or that
of a fresh single-process ``fdbserver`` on a free 127.0.0.1 port with a temporary data
directory, configured ``single memory`` and killed on exit.  :class:`LocalCluster`
gives tests more control (another storage engine, SIGKILL, restart on the same data).
The pytest plugin in :mod:`fdbrecipes.testing.pytest_plugin` wraps both as fixtures.

Nothing here selects an FDB API version or imports ``libfdb_c`` at import time; the
server is driven through the ``fdbserver`` and ``fdbcli`` programs.
``open_database(cluster_file)`` is for scripts and examples that are applications: it
selects the API version the library's own tools use (730, or ``$FDB_API_VERSION``)
and opens the database.  These names are defined in ``fdbrecipes._cluster``, which
the ``fdbrecipes`` command shares.
"""

from __future__ import annotations

from .._cluster import (
    LocalCluster,
    ServerNotFoundError,
    client_library_problem,
    find_program,
    local_cluster,
    open_database,
)

__all__ = [
    "LocalCluster",
    "ServerNotFoundError",
    "client_library_problem",
    "find_program",
    "local_cluster",
    "open_database",
]
