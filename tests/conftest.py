"""Shared test helpers.  The FoundationDB fixtures (``fdb_database``,
``fdb_subspace``, ``fdb_local_cluster``) come from fdbrecipes' pytest plugin, which
skips integration tests with a one-line reason where no server can be found (and fails
them instead with ``FDBRECIPES_REQUIRE_SERVER=1``)."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from fdbrecipes import Limits
from fdbrecipes.testing import TEST_KNOBS, open_database
from tests.helpers import TestClock

settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile("ci", parent=settings.get_profile("default"), max_examples=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

#: Soaks (tests marked ``soak``: minutes of load and faults) run only with this set to 1;
#: the default run, and CI, leave them out.
SOAK = "FDBRECIPES_SOAK"


def pytest_collection_modifyitems(config: Any, items: Any) -> None:
    """Leave out the soaks unless ``FDBRECIPES_SOAK=1``."""
    if os.environ.get(SOAK) == "1":
        return
    skip = pytest.mark.skip(reason=f"a soak: {SOAK}=1 runs it")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def clock() -> TestClock:
    return TestClock()


@pytest.fixture
def db(fdb_database: Any) -> Any:
    """The test database (an ``fdb.Database``), from the plugin's fixture."""
    return fdb_database


@pytest.fixture
def limits(fdb_subspace: Any) -> Limits:
    """A limit store in the test's subspace, at ``fdb_subspace["limits"]`` (the limits
    tests' structures use it)."""
    return Limits(fdb_subspace["limits"])


#: The classes of :func:`double_cluster`'s processes: three storage processes (two of
#: which FoundationDB also gives a log), one transaction process (a log), and one
#: stateless process (master, cluster controller, proxies, resolver, ...), so a fault
#: can hit a storage process, a log or the master alone.
DOUBLE_CLASSES = ("storage", "storage", "storage", "transaction", "stateless")
#: The knobs of :func:`double_cluster`: LocalCluster's, and a data distributor that
#: counts a dead storage process failed (and copies its data again) after 2 s instead
#: of 60 s, so a killed storage process is re-replicated while the fault tests run.
DOUBLE_KNOBS = {**TEST_KNOBS, "data_distribution_failure_reaction_time": "2"}


def start_double(fdb_cluster_factory: Any, knobs: Any = DOUBLE_KNOBS) -> Any:
    """A 5-process ``double`` LocalCluster (:data:`DOUBLE_CLASSES`) with ``knobs``,
    from the module's factory (its start-up time is printed)."""
    started = time.monotonic()
    made = fdb_cluster_factory(processes=5, redundancy="double", classes=DOUBLE_CLASSES,
                               knobs=knobs)
    print(f"cluster-start 5 processes double: {time.monotonic() - started:.1f} s", flush=True)
    return made


def warm_database(cluster: Any) -> Any:
    """A Database on ``cluster``, its first commit behind it (a fresh Database's first
    commits can end in ``commit_unknown_result``)."""
    from tests.helpers import warm_up

    db = open_database(cluster.cluster_file)
    warm_up(db)
    return db


@pytest.fixture(scope="module")
def double_cluster(fdb_cluster_factory: Any) -> Any:
    """A 5-process ``double`` LocalCluster (:data:`DOUBLE_CLASSES`), one per test module
    that asks for it (its start-up time is printed)."""
    return start_double(fdb_cluster_factory)


@pytest.fixture(scope="module")
def double_db(double_cluster: Any) -> Any:
    """A Database on :func:`double_cluster` (see :func:`warm_database`)."""
    return warm_database(double_cluster)
