"""How fdbrecipes' own tools get a cluster and a database.

The ``fdbrecipes`` command (demo, bench), the benchmark's client processes and the
pytest plugin share this module:

* a cluster: :func:`local_cluster` yields the cluster file ``FDB_CLUSTER_FILE`` names,
  or that of a throwaway single-process ``fdbserver`` (:class:`LocalCluster`, from
  :mod:`fdbrecipes._local`) on a free 127.0.0.1 port, driven through the
  ``fdbserver`` and ``fdbcli`` programs;
* the client library: :func:`client_library_problem` loads ``libfdb_c`` by the one
  search order (:func:`fdbrecipes.server.use_installed`: the installed copy too) and
  says why it cannot, if it cannot, and :func:`tools_client_problem` also why the
  installed bindings cannot use it (their version is newer than the library's);
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
import sys
from typing import Any, Callable, Iterator, Optional

from ._local.cluster import LocalCluster
from ._local.programs import SERVER_HINT, ServerNotFoundError, find_program
from .server.find import INSTALL_HINT as CLIENT_HINT

__all__ = ["API_VERSION", "BINDINGS_HINT", "CLIENT_HINT", "FIRST_CONTACT_SECONDS", "INSTALL_HINT",
           "SERVER_HINT", "LocalCluster", "ServerNotFoundError", "client_library_problem",
           "find_program", "first_contact", "local_cluster", "open_database",
           "select_api_version", "tools_client_problem", "wanted_api_version", "with_cluster"]

BINDINGS_HINT = (
    "install the Python bindings of the client library's version, for 7.3: "
    "pip install 'foundationdb==7.3.*'"
)
INSTALL_HINT = ("run 'fdbrecipes server install' (or install the FoundationDB 7.3 packages "
                "foundationdb-clients and foundationdb-server from "
                "https://github.com/apple/foundationdb/releases), or set FDB_CLUSTER_FILE "
                "to a running cluster")

#: The API version the tools select unless ``$FDB_API_VERSION`` names another (capped
#: at the newest the installed bindings know).
API_VERSION = 730


def client_library_problem() -> Optional[str]:
    """Why the fdb bindings cannot talk to a cluster here, or None if they can: loads
    ``libfdb_c`` by the search order (:func:`fdbrecipes.server.use_installed`)."""
    from .server.client import ClientLibraryNotFoundError, use_installed

    try:
        use_installed()
    except ClientLibraryNotFoundError as e:
        return f"libfdb_c is not loadable: {e}"
    return None


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
    the selected version.  Loads ``libfdb_c`` (by the search order, as
    :func:`client_library_problem` does)."""
    import fdb

    from .server.client import use_installed

    if not fdb.is_api_version_selected():
        use_installed()
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
