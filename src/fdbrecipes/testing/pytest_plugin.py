"""pytest fixtures for code that uses FoundationDB.

The plugin is loaded automatically when fdbrecipes is installed (``-p no:fdbrecipes``
turns it off). Fixtures:

* ``fdb_cluster_file`` (session): ``$FDB_CLUSTER_FILE``, or a throwaway local
  ``fdbserver`` started for the session (memory engine) and killed after it.
* ``fdb_database`` (session): ``fdb.open()`` on that cluster file. If no API version is
  selected yet it selects ``$FDB_API_VERSION`` (default 730, or the newest the installed
  bindings know if that is lower), as the ``fdbrecipes`` command does.
* ``fdb_subspace``: a fresh, empty ``fdb.Subspace`` per test, cleared afterwards.
* ``fdb_local_cluster``: a factory making extra
  :class:`~fdbrecipes.testing.LocalCluster` servers (other engines, killable,
  restartable), cleaned up after the test.

Where ``libfdb_c`` or a server is missing, tests using these fixtures are skipped with a
one-line reason; with ``FDBRECIPES_REQUIRE_SERVER=1`` that is a failure.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import Any, Callable, Iterator, List, NoReturn

import pytest

from .._cluster import (
    LocalCluster,
    ServerNotFoundError,
    client_library_problem,
    first_contact,
    local_cluster,
    open_database,
)

#: Why the tests needing a cluster were skipped in this session (said once, at the end).
_SKIPPED: List[str] = []
#: The short reason each of those tests is skipped with.
NO_CLUSTER = "no FoundationDB cluster (the reason is at the end of the run)"


def _unavailable(reason: str) -> NoReturn:
    """Skip the test (the full ``reason`` is printed once, at the end of the run);
    fail it instead with FDBRECIPES_REQUIRE_SERVER=1."""
    if os.environ.get("FDBRECIPES_REQUIRE_SERVER") == "1":
        pytest.fail(f"FDBRECIPES_REQUIRE_SERVER=1 but {reason}", pytrace=False)
    _SKIPPED.append(reason)
    pytest.skip(NO_CLUSTER)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say once why the tests needing a cluster were skipped."""
    if _SKIPPED:
        count = sum(1 for r in terminalreporter.stats.get("skipped", [])
                    if NO_CLUSTER in str(r.longrepr))
        terminalreporter.write_line(
            f"fdbrecipes: {count} test(s) needing a FoundationDB cluster skipped: "
            f"{_SKIPPED[0]}")


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``integration`` marker."""
    config.addinivalue_line(
        "markers", "integration: needs a FoundationDB server (see fdbrecipes.testing)"
    )


@pytest.fixture(scope="session")
def fdb_cluster_file() -> Iterator[str]:
    """Cluster file of a FoundationDB cluster the tests may write to."""
    problem = client_library_problem()
    if problem:
        _unavailable(problem)
    with contextlib.ExitStack() as stack:
        try:
            cluster_file = stack.enter_context(local_cluster())
        except ServerNotFoundError as e:
            _unavailable(str(e))
        unreachable = first_contact(cluster_file)
        if unreachable:
            _unavailable(unreachable)
        yield cluster_file


@pytest.fixture(scope="session")
def fdb_database(fdb_cluster_file: str) -> Any:
    """An open ``fdb.Database`` on :func:`fdb_cluster_file`."""
    return open_database(fdb_cluster_file)


@pytest.fixture
def fdb_subspace(fdb_database: Any) -> Iterator[Any]:
    """A fresh subspace ``("fdbrecipes-test", <random>)``, cleared after the test."""
    import fdb

    subspace = fdb.Subspace(("fdbrecipes-test", uuid.uuid4().hex))
    yield subspace
    r = subspace.range()
    fdb_database.clear_range(r.start, r.stop)


@pytest.fixture
def fdb_local_cluster() -> Iterator[Callable[..., LocalCluster]]:
    """Factory for extra throwaway servers: ``fdb_local_cluster(engine="ssd")``."""
    problem = client_library_problem()
    if problem:
        _unavailable(problem)
    made: List[LocalCluster] = []

    def make(**kwargs: Any) -> LocalCluster:
        try:
            cluster = LocalCluster(**kwargs)
        except ServerNotFoundError as e:
            _unavailable(str(e))
        made.append(cluster)
        cluster.start()
        return cluster

    yield make
    for cluster in made:
        cluster.cleanup()
