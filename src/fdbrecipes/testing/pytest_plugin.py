"""pytest fixtures for code that uses FoundationDB.

The plugin is loaded automatically when fdbrecipes is installed (``-p no:fdbrecipes``
turns it off). Fixtures:

* ``fdb_cluster_file`` (session): ``$FDB_CLUSTER_FILE``, or a throwaway local
  ``fdbserver`` started for the session (memory engine) and killed after it (found by
  the search order of :mod:`fdbrecipes.server.find`); where there is none but Docker
  and the ``containers`` extra are, a server in a container
  (:mod:`fdbrecipes.testing.containers`).
* ``fdb_database`` (session): ``fdb.open()`` on that cluster file. If no API version is
  selected yet it selects ``$FDB_API_VERSION`` (default 730, or the newest the installed
  bindings know if that is lower), as the ``fdbrecipes`` command does.
* ``fdb_subspace``: a fresh, empty ``fdb.Subspace`` per test, cleared afterwards.
* ``fdb_local_cluster``: a factory making extra
  :class:`~fdbrecipes.testing.LocalCluster` clusters (several processes, other
  engines; killable, pausable, restartable), cleaned up after the test:
  ``fdb_local_cluster(processes=5, redundancy="double")``.
* ``fdb_cluster_factory`` (module): the same factory, whose clusters live until the
  end of the module, for a module-scoped fixture of your own (one cluster for the
  module's tests: starting a 5-process cluster takes seconds).

Where ``libfdb_c`` or a server is missing, tests using these fixtures are skipped with a
one-line reason; with ``FDBRECIPES_REQUIRE_SERVER=1`` that is a failure.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import Any, Callable, ContextManager, Iterator, List, NoReturn

import pytest

from .._cluster import client_library_problem, first_contact, local_cluster, open_database
from .._local.cluster import LocalCluster
from .._local.programs import ServerNotFoundError

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
            cluster_file = stack.enter_context(_in_a_container(str(e)))
        unreachable = first_contact(cluster_file)
        if unreachable:
            _unavailable(unreachable)
        yield cluster_file


def _in_a_container(no_server: str) -> ContextManager[str]:
    """A server in a container (see :mod:`.containers`), or skip the test saying why
    neither a local server nor a container can be had."""
    from .containers import container_cluster, docker_problem

    problem = docker_problem()
    if problem:
        _unavailable(f"{no_server}; and no server in a container: {problem}")
    return container_cluster()


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


class ClusterFactory:
    """Makes started :class:`LocalCluster` clusters (``factory(**kwargs)`` takes
    LocalCluster's arguments) and cleans them all up (:meth:`cleanup`).  Where
    ``libfdb_c`` or ``fdbserver`` is missing, the test asking is skipped (fails with
    FDBRECIPES_REQUIRE_SERVER=1)."""

    def __init__(self) -> None:
        problem = client_library_problem()
        if problem:
            _unavailable(problem)
        self.made: List[LocalCluster] = []

    def __call__(self, **kwargs: Any) -> LocalCluster:
        try:
            cluster = LocalCluster(**kwargs)
        except ServerNotFoundError as e:
            _unavailable(str(e))
        self.made.append(cluster)
        cluster.start()
        return cluster

    def cleanup(self) -> None:
        """Kill every cluster made and remove its directory."""
        for cluster in self.made:
            cluster.cleanup()


def _clusters() -> Iterator[ClusterFactory]:
    """A :class:`ClusterFactory` for a fixture, whose clusters are cleaned up when the
    fixture ends (also after a failure, or Ctrl-C: pytest tears fixtures down)."""
    factory = ClusterFactory()
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture
def fdb_local_cluster() -> Iterator[Callable[..., LocalCluster]]:
    """Factory of throwaway clusters, cleaned up after the test:
    ``fdb_local_cluster(engine="ssd")``, ``fdb_local_cluster(processes=5,
    redundancy="double")``."""
    yield from _clusters()


@pytest.fixture(scope="module")
def fdb_cluster_factory() -> Iterator[Callable[..., LocalCluster]]:
    """:func:`fdb_local_cluster` whose clusters live until the end of the module::

        @pytest.fixture(scope="module")
        def cluster(fdb_cluster_factory):
            return fdb_cluster_factory(processes=5, redundancy="double")
    """
    yield from _clusters()
