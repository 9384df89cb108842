"""The benchmark's figures and what a run leaves behind, without a server: summaries,
ratios, latencies, targets, tables, results.json and the chart."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import List, Optional

import pytest

from fdbrecipes.bench import report, results
from fdbrecipes.bench.machine import format_machine
from fdbrecipes.bench.results import Latency, Report, Results, Row, Target
from fdbrecipes.bench.settings import (
    HC_POP,
    LIMIT,
    LIMIT_BATCH,
    POP,
    PUSH,
    RECIPE_POP,
    RECIPE_PUSH,
    Kind,
    add_arguments,
    settings_from_args,
)


def row(kind: Kind, clients: int, rate: float, retries: Optional[int] = 0) -> Row:
    """A row of ``kind`` whose rate is ``rate`` (count over one second)."""
    return Row(kind.label, clients, int(rate), 1.0, retries, kind.unit, kind.recipe)


def sample_rows() -> List[Row]:
    """A run at 1 and 16 clients, with round figures."""
    return results.with_ratios([
        row(LIMIT, 1, 600), row(LIMIT, 16, 2000),
        row(LIMIT_BATCH, 1, 30000),
        row(PUSH, 1, 540), row(PUSH, 16, 1800),
        row(RECIPE_PUSH, 1, 500, None), row(RECIPE_PUSH, 16, 1000, None),
        row(RECIPE_POP, 1, 500), row(RECIPE_POP, 16, 200, 124),
        row(POP, 16, 250, 300),
        row(HC_POP, 1, 450), row(HC_POP, 16, 1200, 120),
    ])


LATENCIES = [Latency(10**3, 500, 2.0, 3.0), Latency(10**4, 500, 2.4, 3.5),
             Latency(10**5, 500, 2.8, 4.0), Latency(10**6, 500, 3.2, 5.0)]


# -- summaries and ratios ----------------------------------------------------------------


def test_summarize_takes_the_longest_client_as_wall_time() -> None:
    reports = [Report(0, 100, 2.0, 3), Report(1, 300, 4.0, 1)]
    summary = results.summarize(HC_POP, 2, reports)
    assert (summary.count, summary.seconds, summary.retries) == (400, 4.0, 4)
    assert summary.rate == 100.0
    assert summary.retries_per_op == 0.01
    assert (summary.name, summary.unit, summary.recipe) == (HC_POP.label, "pops/s",
                                                            RECIPE_POP.label)


def test_summarize_without_retry_counts() -> None:
    summary = results.summarize(RECIPE_PUSH, 2,
                                [Report(0, 10, 1.0, None), Report(1, 10, 1.0, 2)])
    assert summary.retries is None
    assert summary.retries_per_op is None


def test_empty_measurement_has_rate_zero() -> None:
    assert Row("x", 1, 0, 0.0, 0, "tx/s").rate == 0.0


def test_ratios_compare_with_the_same_client_count() -> None:
    rows = {(r.name, r.clients): r for r in sample_rows()}
    hc16 = rows[(HC_POP.label, 16)]
    assert hc16.ratio_limit == pytest.approx(1200 / 2000)
    assert hc16.ratio_recipe == pytest.approx(1200 / 200)
    assert rows[(PUSH.label, 1)].ratio_recipe == pytest.approx(540 / 500)
    assert rows[(RECIPE_POP.label, 16)].ratio_recipe == 1.0
    assert rows[(LIMIT.label, 16)].ratio_limit == 1.0
    assert rows[(LIMIT.label, 16)].ratio_recipe is None
    assert rows[(LIMIT_BATCH.label, 1)].ratio_limit == pytest.approx(50.0)


def test_missing_reference_gives_no_ratio() -> None:
    (only,) = results.with_ratios([row(HC_POP, 4, 100)])
    assert only.ratio_limit is None and only.ratio_recipe is None
    assert results.ratio(1.0, 0.0) is None


def test_percentile_and_latency() -> None:
    values = [float(v) for v in range(1, 11)]
    assert results.percentile(values, 90) == 9.0
    assert results.percentile(values, 100) == 10.0
    assert results.percentile([5.0], 90) == 5.0
    lat = results.latency(1000, [0.001, 0.003, 0.002, 0.010])
    assert (lat.n, lat.samples) == (1000, 4)
    assert lat.median_ms == pytest.approx(2.5)
    assert lat.p90_ms == pytest.approx(10.0)


def test_growth_is_largest_over_smallest() -> None:
    assert results.growth(LATENCIES) == pytest.approx(1.6)
    assert results.growth(list(reversed(LATENCIES))) == pytest.approx(1.6)
    assert results.growth(LATENCIES[:1]) is None


# -- targets -------------------------------------------------------------------------------


def statuses(rows: List[Row], latencies: List[Latency], most: int = 16) -> List[str]:
    return [t.status for t in results.check_targets(rows, latencies, most)]


def test_targets_pass() -> None:
    assert statuses(sample_rows(), LATENCIES) == ["PASS"] * 6


def test_targets_fail() -> None:
    rows = results.with_ratios([
        row(LIMIT, 1, 600), row(LIMIT, 16, 2000), row(PUSH, 1, 300), row(PUSH, 16, 1800),
        row(RECIPE_POP, 16, 300), row(HC_POP, 16, 900, 500),
    ])
    slow = [Latency(10**3, 500, 1.0, 1.0), Latency(10**6, 500, 2.5, 3.0)]
    assert statuses(rows, slow) == ["FAIL", "FAIL", "FAIL", "FAIL", "PASS", "FAIL"]


def test_unmeasured_targets_are_skipped() -> None:
    assert statuses([], []) == ["SKIP"] * 6


def test_targets_say_when_the_scope_is_smaller() -> None:
    targets = results.check_targets(sample_rows(), LATENCIES[:3], 8)
    assert all("the target is at 16" in t.note for t in targets[:3])
    assert targets[3].note == ""  # push at 1 client
    assert "10^6" in targets[-1].note
    assert "1,000 to 100,000 items" in targets[-1].name
    full = results.check_targets(sample_rows(), LATENCIES, 16)
    assert [t.note for t in full] == [""] * 6


def test_a_target_at_the_threshold_passes() -> None:
    assert Target("x", 2.0, 2.0, at_most=True).status == "PASS"
    assert Target("x", 0.5, 0.5).status == "PASS"


# -- printing ------------------------------------------------------------------------------


def test_table_has_every_row_and_ratio() -> None:
    text = report.format_table(sample_rows())
    lines = text.splitlines()
    assert len(lines) == 2 + 12
    assert lines[0].split()[:3] == ["measurement", "clients", "rate"]
    hc16 = next(line for line in lines if line.startswith(HC_POP.label) and " 16 " in line)
    assert hc16.split()[-5:] == ["1,200", "pops/s", "0.60", "6.00", "0.100"]
    limit = next(line for line in lines if line.startswith(LIMIT.label))
    assert limit.split()[-3:] == ["1.00", "-", "0.000"]
    recipe_push = next(line for line in lines if line.startswith(RECIPE_PUSH.label))
    assert recipe_push.endswith(" -")


def test_latency_and_target_text() -> None:
    text = report.format_latencies(LATENCIES)
    assert "1,000,000" in text and "1.60x" in text
    assert report.format_latencies([]) == "WeightTree pop latency: not measured"
    targets = report.format_targets(results.check_targets([], LATENCIES, 16))
    assert "SKIP" in targets and "PASS  WeightTree" in targets and "<= 2" in targets


def test_machine_line() -> None:
    machine = {"platform": "Linux", "cpu_count": 4, "python": "CPython 3.11",
               "fdb_api_version": 730, "fdb_bindings_version": "7.3.79",
               "fdb_client_version": "7.3.79", "cluster": "local",
               "server": {"versions": ["7.3.79"], "storage_engine": "memory"}}
    text = format_machine(machine)
    assert "4 CPUs" in text and "server 7.3.79 (memory)" in text
    assert "server unknown" in format_machine({**machine, "server": {}})


# -- files ---------------------------------------------------------------------------------


def sample_results(out: Path) -> Results:
    """The sample rows and latencies of a default run writing to ``out``."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = settings_from_args(parser.parse_args([f"--out={out}"]))
    return Results({"platform": "test"}, settings, sample_rows(), LATENCIES)


def test_results_json(tmp_path: Path) -> None:
    data = sample_results(tmp_path)
    path = tmp_path / "results.json"
    report.write_json(data, results.check_targets(data.rows, data.latencies, 16), path)
    written = json.loads(path.read_text())
    assert written["machine"] == {"platform": "test"}
    assert written["settings"]["out"] == str(tmp_path)
    assert written["settings"]["clients"] == [1, 2, 4, 8, 16]
    assert len(written["throughput"]) == 12
    hc = [r for r in written["throughput"] if r["name"] == HC_POP.label and r["clients"] == 16]
    assert hc[0]["rate"] == 1200 and hc[0]["retries_per_op"] == 0.1
    assert written["weight_tree"][0] == {"n": 1000, "samples": 500, "median_ms": 2.0,
                                         "p90_ms": 3.0}
    assert written["weight_tree_growth"] == pytest.approx(1.6)
    assert {t["status"] for t in written["targets"]} == {"PASS"}


def test_chart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    report.write_chart(sample_rows(), LATENCIES, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_publish_prints_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nested" / "out"
    report.publish(sample_results(out))
    printed = capsys.readouterr().out
    assert "measurement" in printed and "Targets" in printed
    assert (out / "results.json").exists()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "No chart" in printed
    else:
        assert (out / "bench.png").exists()
