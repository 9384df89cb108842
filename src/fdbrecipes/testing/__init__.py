"""Throwaway FoundationDB servers for tests.

``local_cluster()`` yields a cluster file: the one ``FDB_CLUSTER_FILE`` names, or that
of a fresh single-process ``fdbserver`` on a free 127.0.0.1 port with a temporary data
directory, configured ``single memory`` and killed on exit.  :class:`LocalCluster`
gives tests more control: several processes (``processes=5, redundancy="double"``),
another storage engine, roles read from status JSON (:class:`ClusterRoles`), faults
(kill, pause, restart, exclude) and :meth:`LocalCluster.wait_healthy`.  The pytest
plugin in :mod:`fdbrecipes.testing.pytest_plugin` wraps them as fixtures, and
:mod:`fdbrecipes.testing.placement` says which storage processes hold a key range.

Nothing here selects an FDB API version or imports ``libfdb_c`` at import time; the
servers are driven through the ``fdbserver`` and ``fdbcli`` programs.
``open_database(cluster_file)`` is for scripts and examples that are applications: it
selects the API version the library's own tools use (730, or ``$FDB_API_VERSION``)
and opens the database.
"""

from __future__ import annotations

from .._cluster import client_library_problem, local_cluster, open_database
from .._local.cluster import LocalCluster
from .._local.plan import TEST_KNOBS, ServerProcess
from .._local.programs import ServerNotFoundError, find_program
from .._local.status import ClusterRoles

__all__ = [
    "ClusterRoles",
    "LocalCluster",
    "ServerNotFoundError",
    "ServerProcess",
    "TEST_KNOBS",
    "client_library_problem",
    "find_program",
    "local_cluster",
    "open_database",
]
