"""pytest fixtures for code that uses FoundationDB.

The plugin is loaded automatically when fdbrecipes is installed (``-p no:fdbrecipes``
turns it off). Fixtures:

* ``fdb_cluster_file`` (session): ``$FDB_CLUSTER_FILE``, or a throwaway local
  ``fdbserver`` started for the session (memory engine) and killed after it.
* ``fdb_database`` (session): ``fdb.open()`` on that cluster file. If no API version is
  selected yet it selects ``$FDB_API_VERSION`` (default 730, or the newest the installed
  bindings know if that is lower).
* ``fdb_subspace``: a fresh, empty ``fdb.Subspace`` per test, cleared afterwards.
* ``fdb_local_cluster``: a factory making extra :class:`LocalCluster` servers (other
  engines, killable, restartable), cleaned up after the test.

Where ``libfdb_c`` or a server is missing, tests using these fixtures are skipped with a
one-line reason; with ``FDBRECIPES_REQUIRE_SERVER=1`` that is a failure.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Callable, Iterator, List, NoReturn

import pytest

from . import LocalCluster, ServerNotFoundError, client_library_problem


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("FDBRECIPES_REQUIRE_SERVER") == "1":
        pytest.fail(f"FDBRECIPES_REQUIRE_SERVER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: needs a FoundationDB server (see fdbrecipes.testing)"
    )


@pytest.fixture(scope="session")
def fdb_cluster_file() -> Iterator[str]:
    """Cluster file of a FoundationDB cluster the tests may write to."""
    problem = client_library_problem()
    if problem:
        _unavailable(problem)
    configured = os.environ.get("FDB_CLUSTER_FILE")
    if configured:
        yield configured
        return
    try:
        cluster = LocalCluster()
    except ServerNotFoundError as e:
        _unavailable(str(e))
    try:
        cluster.start()
        yield cluster.cluster_file
    finally:
        cluster.cleanup()


def select_api_version() -> int:
    """Select ``$FDB_API_VERSION`` (default 730) unless a version is selected already."""
    import fdb

    if not fdb.is_api_version_selected():
        wanted = int(os.environ.get("FDB_API_VERSION", "730"))
        fdb.api_version(min(wanted, fdb.LATEST_API_VERSION))
    return int(fdb.get_api_version())


@pytest.fixture(scope="session")
def fdb_database(fdb_cluster_file: str) -> Any:
    """An open ``fdb.Database`` on :func:`fdb_cluster_file`."""
    select_api_version()
    import fdb

    return fdb.open(fdb_cluster_file)


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
