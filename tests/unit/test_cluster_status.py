"""Status JSON read as LocalCluster reads it, without a server: three documents
captured from a real FoundationDB 7.3.79 cluster of 5 processes, ``double``
(``tests/unit/data/status-7.3.79-double-5-*.json``; how each was made is in the
``.meta.json`` beside them): healthy, in a recovery after the master was killed (a
storage process excluded), and after a log was killed (the old generation still
listed, its dead log without an address)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from fdbrecipes._local.command import describe
from fdbrecipes._local.plan import make_plan
from fdbrecipes._local.status import (
    health_problems,
    parse_roles,
    parse_status,
    plain_address,
    storage_counters,
)

DATA = Path(__file__).parent / "data"
META: Dict[str, Any] = json.loads((DATA / "status-7.3.79-double-5.meta.json").read_text())
CLASSES = ["storage", "storage", "storage", "transaction", "stateless"]


def capture(name: str) -> Dict[str, Any]:
    return parse_status((DATA / f"status-7.3.79-double-5-{name}.json").read_text())


def addresses(name: str) -> list:
    return [f"127.0.0.1:{port}" for port in META[name]["ports"]]


def test_a_healthy_cluster_roles() -> None:
    p = addresses("healthy")
    roles = parse_roles(capture("healthy"))
    assert roles.recovery_state == "fully_recovered"
    assert roles.master == roles.cluster_controller == p[4]  # the stateless process
    assert roles.logs == tuple(sorted([p[0], p[2], p[3]]))  # FoundationDB's choice
    assert roles.storage == tuple(sorted(p[:3]))
    assert roles.coordinators == tuple(sorted(p[:3]))
    assert roles.commit_proxies == roles.grv_proxies == roles.resolvers == (p[4],)
    assert roles.excluded == frozenset()
    assert roles.of(p[1]) == {"storage", "coordinator"}
    assert roles.of(p[3]) == {"log"}
    assert roles.of("127.0.0.1:1") == frozenset()
    assert roles.holding("storage", without=("log",)) == (p[1],)
    assert roles.holding("log", without=("storage", "master")) == (p[3],)
    with pytest.raises(ValueError, match="role must be one of"):
        roles.holding("proxy")


def test_a_healthy_cluster_is_healthy_when_every_process_is_as_started() -> None:
    status = capture("healthy")
    long_ago = {a: 3600.0 for a in addresses("healthy")}
    assert health_problems(status, long_ago) == []
    assert health_problems(status, {**long_ago, "127.0.0.1:1": 3600.0}) == [
        "not (yet) part of the cluster as last started: 127.0.0.1:1"]
    just_restarted = addresses("healthy")[1]
    assert health_problems(status, {**long_ago, just_restarted: 0.5}) == [
        f"not (yet) part of the cluster as last started: {just_restarted}"]


def test_a_recovery_is_not_healthy_and_names_why() -> None:
    status = capture("recovering")
    meta = META["recovering"]
    roles = parse_roles(status)
    assert roles.recovery_state == "all_logs_recruited"
    assert roles.excluded == {meta["excluded"]}
    assert meta["killed"] not in roles.processes
    assert roles.generation == 4
    running = {a: 3600.0 for a in addresses("recovering") if a != meta["killed"]}
    assert health_problems(status, running) == [
        "status incomplete", "recovery state all_logs_recruited", "data state initializing"]


def test_only_the_current_generations_logs_count() -> None:
    status = capture("log-killed")
    p = addresses("log-killed")
    generations = status["cluster"]["logs"]
    assert [g["current"] for g in generations] == [True, False]
    assert any("address" not in log for log in generations[1]["log_interfaces"])
    roles = parse_roles(status)
    assert roles.logs == tuple(sorted([p[0], p[1], p[2]]))  # p[2] took the dead log's place
    assert "log" not in roles.of(p[3])
    assert all("log" in roles.of(a) for a in roles.logs)


def test_storage_counters_say_what_each_storage_process_received() -> None:
    """The capture was taken once two storage processes showed input (the counters
    are reported every few seconds, so a fresh one shows 0)."""
    counters = storage_counters(capture("healthy"))
    assert sorted(counters) == sorted(addresses("healthy")[:3])
    received = [c for c in counters.values() if c.input_bytes > 0]
    assert len(received) >= 2 and all(c.mutations > 0 for c in received)
    processes = capture("healthy")["cluster"]["processes"].values()
    versions = {plain_address(p["address"]): r["data_version"]
                for p in processes for r in p["roles"] if r["role"] == "storage"}
    assert {a: c.version for a, c in counters.items()} == versions  # how far each goes


def test_status_output_is_found_after_a_warning_and_refused_when_missing() -> None:
    text = (DATA / "status-7.3.79-double-5-healthy.json").read_text()
    assert parse_status("WARNING: something\n" + text) == parse_status(text)
    with pytest.raises(ValueError, match="no status JSON"):
        parse_status("ERROR: the database is unavailable")


def test_the_cluster_command_table(tmp_path: Path) -> None:
    plan = make_plan(5, "double", "memory", CLASSES, tmp_path, META["healthy"]["ports"])
    lines = describe(plan.processes, parse_roles(capture("healthy")))
    assert lines[0].split() == ["process", "address", "class", "roles"]
    p = addresses("healthy")
    assert lines[1].split() == ["0", p[0], "storage", "log,", "storage,", "coordinator"]
    assert lines[2].split() == ["1", p[1], "storage", "storage,", "coordinator"]
    assert lines[4].split() == ["3", p[3], "transaction", "log"]
    assert lines[5].split()[:4] == ["4", p[4], "stateless", "master,"]
    assert "cluster_controller" in lines[5]
