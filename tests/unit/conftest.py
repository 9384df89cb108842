"""Fixtures of the unit tests of the tools (command, benchmark, plugin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fdbrecipes.testing import client_library_problem


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """No cluster to be had, for this process and the ones it starts: no
    FDB_CLUSTER_FILE nor FDBRECIPES_REQUIRE_SERVER, and FDBSERVER and FDBCLI naming
    programs that do not exist.  Returns how the reason the tools then give begins:
    the client library's problem where ``libfdb_c`` is missing, else the server's."""
    monkeypatch.delenv("FDB_CLUSTER_FILE", raising=False)
    monkeypatch.delenv("FDBRECIPES_REQUIRE_SERVER", raising=False)
    monkeypatch.setenv("FDBSERVER", str(tmp_path / "no-fdbserver"))
    monkeypatch.setenv("FDBCLI", str(tmp_path / "no-fdbcli"))
    problem = client_library_problem()
    return problem.split(" (")[0] if problem else "fdbserver and fdbcli not found"
