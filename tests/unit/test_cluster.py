"""How the tools get a cluster, without a server: FDB_CLUSTER_FILE, a missing
``fdbserver``, a missing client library, and the API version they select."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import fdb
import pytest

from fdbrecipes import _cluster
from fdbrecipes._cluster import tools_client_problem, wanted_api_version, with_cluster
from fdbrecipes.testing import LocalCluster, ServerNotFoundError, local_cluster


def no_problem() -> Optional[str]:
    """A client library check that finds the library usable."""
    return None


@pytest.fixture
def cluster_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """FDB_CLUSTER_FILE naming a (never opened) cluster file."""
    path = str(tmp_path / "fdb.cluster")
    monkeypatch.setenv("FDB_CLUSTER_FILE", path)
    return path


def answers(_cluster_file: str) -> None:
    """The cluster answers (no libfdb_c needed to say so)."""


def test_with_cluster_runs_the_body_on_fdb_cluster_file(cluster_file: str) -> None:
    seen: List[str] = []

    def body(path: str) -> int:
        seen.append(path)
        return 7

    assert with_cluster("demo", body, check_client=no_problem, contact=answers) == 7
    assert seen == [cluster_file]


def test_with_cluster_reports_a_missing_client_library(
    cluster_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def body(path: str) -> int:
        raise AssertionError("the body must not run")

    assert with_cluster("bench", body, check_client=lambda: "libfdb_c is missing") == 1
    assert capsys.readouterr().err == "fdbrecipes bench: cannot run: libfdb_c is missing\n"


def test_the_tools_report_bindings_that_refuse_the_client_library(
    cluster_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bindings 8.0 over a 7.3 libfdb_c fail when the API version is selected: the
    tools say so in one line, with what to install, instead of a traceback."""
    refusal = ("This version of the FoundationDB Python binding is not supported by the "
               "installed FoundationDB C library.")

    def refuse() -> int:
        raise RuntimeError(refusal)

    monkeypatch.setattr(_cluster, "client_library_problem", no_problem)
    monkeypatch.setattr(_cluster, "select_api_version", refuse)
    problem = tools_client_problem()
    assert problem is not None and problem.startswith(refusal)
    assert "pip install 'foundationdb==7.3.*'" in problem

    def body(path: str) -> int:
        raise AssertionError("the body must not run")

    assert with_cluster("demo", body, check_client=tools_client_problem) == 1
    assert capsys.readouterr().err == f"fdbrecipes demo: cannot run: {problem}\n"


def test_with_cluster_reports_a_missing_server(
    no_cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def body(path: str) -> int:
        raise AssertionError("the body must not run")

    assert with_cluster("bench", body, check_client=no_problem) == 1
    err = capsys.readouterr().err
    assert err.startswith("fdbrecipes bench: cannot run: fdbserver and fdbcli not found")
    assert "FDB_CLUSTER_FILE" in err and err.count("\n") == 1


def test_local_cluster_is_fdb_cluster_file(cluster_file: str) -> None:
    with local_cluster() as path:
        assert path == cluster_file


def test_local_cluster_needs_fdbserver(no_cluster: str) -> None:
    missing = "fdbserver and fdbcli not found"
    with pytest.raises(ServerNotFoundError, match=missing), local_cluster():
        pass  # pragma: no cover
    with pytest.raises(ServerNotFoundError, match=missing):
        LocalCluster()


def test_the_tools_select_730_or_fdb_api_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FDB_API_VERSION", raising=False)
    assert wanted_api_version() == min(730, fdb.LATEST_API_VERSION)
    monkeypatch.setenv("FDB_API_VERSION", "710")
    assert wanted_api_version() == 710
    monkeypatch.setenv("FDB_API_VERSION", "100000")
    assert wanted_api_version() == fdb.LATEST_API_VERSION
