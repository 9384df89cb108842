"""The benchmark's figures and what a run leaves behind, without a server: summaries,
ratios, CPU per item, latencies, tables, results.json and the chart."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import List, Optional

import pytest

from fdbrecipes.bench import chart, report, results, targets
from fdbrecipes.bench.machine import format_machine
from fdbrecipes.bench.results import Latency, Report, Results, Row, Tail
from fdbrecipes.bench.settings import (
    CLAIM_ACK,
    HC_POP,
    LIMIT,
    LIMIT_BATCH,
    POP,
    PQ_POP_MAX,
    PQ_POP_MIN,
    PUSH,
    PUSH_TR,
    RECIPE_POP,
    RECIPE_PUSH,
    SPREAD_POP,
    TREE_POP,
    Kind,
    add_arguments,
    settings_from_args,
)


def row(kind: Kind, clients: int, rate: float, retries: Optional[int] = 0,
        cpu: Optional[float] = None, server: Optional[float] = None) -> Row:
    """A row of ``kind`` whose rate is ``rate`` (count over one second)."""
    return Row(kind.label, clients, int(rate), 1.0, retries, kind.unit, kind.recipe,
               cpu_seconds=cpu, server_cpu_seconds=server)


def sample_rows() -> List[Row]:
    """A run at 1 and 16 clients, with round figures (18 rows)."""
    return results.with_ratios([
        row(LIMIT, 1, 600, cpu=0.3, server=0.6), row(LIMIT, 16, 2000, cpu=1.6, server=0.9),
        row(LIMIT_BATCH, 1, 30000, cpu=0.5),
        row(PUSH, 1, 540, cpu=0.54), row(PUSH, 16, 1800, cpu=1.8),
        row(PUSH_TR, 1, 560, cpu=0.5), row(RECIPE_PUSH, 1, 500, None, cpu=0.5),
        row(RECIPE_PUSH, 16, 1000, None, cpu=1.0),
        row(RECIPE_POP, 1, 500), row(RECIPE_POP, 16, 200, 124),
        row(POP, 16, 250, 300), row(SPREAD_POP, 16, 1000, 300),
        row(HC_POP, 1, 450), row(HC_POP, 16, 1200, 120, cpu=2.4, server=0.6),
        row(CLAIM_ACK, 16, 12000, cpu=1.2), row(TREE_POP, 16, 900),
        row(PQ_POP_MIN, 16, 300), row(PQ_POP_MAX, 16, 150),
    ])


LATENCIES = [Latency(10**3, 500, 2.0, 3.0), Latency(10**4, 500, 2.4, 3.5),
             Latency(10**5, 500, 2.8, 4.0), Latency(10**6, 500, 3.2, 5.0)]


# -- summaries, ratios and CPU -------------------------------------------------------------


def test_summarize_takes_the_longest_client_as_wall_time() -> None:
    reports = [Report(0, 100, 2.0, 3, 0.5, (10.0, 11.0)),
               Report(1, 300, 4.0, 1, 1.5, (10.2, 12.0))]
    summary = results.summarize(HC_POP, 2, reports)
    assert (summary.count, summary.seconds, summary.retries) == (400, 4.0, 4)
    assert summary.rate == 100.0
    assert summary.retries_per_op == 0.01
    assert (summary.name, summary.unit, summary.recipe) == (HC_POP.label, "pops/s",
                                                            RECIPE_POP.label)
    assert summary.cpu_seconds == 2.0 and summary.cpu_ms_per_op == pytest.approx(5.0)
    assert summary.server_cpu_seconds == pytest.approx(2.0)  # 10.0 to 12.0
    assert summary.server_cpu_ms_per_op == pytest.approx(5.0)


def test_summarize_without_retry_counts_or_server_cpu() -> None:
    summary = results.summarize(RECIPE_PUSH, 2,
                                [Report(0, 10, 1.0, None, 0.1, (1.0, 2.0)),
                                 Report(1, 10, 1.0, 2, 0.1)])
    assert summary.retries is None
    assert summary.retries_per_op is None
    assert summary.server_cpu_seconds is None and summary.server_cpu_ms_per_op is None
    assert summary.cpu_ms_per_op == pytest.approx(10.0)

def test_combined_rounds_sum_only_what_every_round_measured() -> None:
    rounds = [row(PUSH, 1, 500, 2, cpu=0.25, server=0.5), row(PUSH, 1, 300, 1, cpu=0.15)]
    total = results.combined(rounds)
    assert (total.count, total.seconds, total.retries) == (800, 2.0, 3)
    assert total.cpu_seconds == pytest.approx(0.4)
    assert total.server_cpu_seconds is None  # the second round did not measure it
    unmeasured = results.combined([rounds[0], row(PUSH, 1, 300, None)])
    assert unmeasured.retries is None and unmeasured.cpu_seconds is None



def test_cpu_per_op() -> None:
    assert results.per_op_ms(0.5, 1000) == pytest.approx(0.5)
    assert results.per_op_ms(2.0, 400) == pytest.approx(5.0)
    assert results.per_op_ms(None, 1000) is None
    assert results.per_op_ms(0.5, 0) is None
    assert Row("x", 1, 0, 1.0, 0, "tx/s", cpu_seconds=0.2).cpu_ms_per_op is None
    assert Row("x", 1, 10, 1.0, 0, "tx/s").cpu_ms_per_op is None


def test_empty_measurement_has_rate_zero() -> None:
    assert Row("x", 1, 0, 0.0, 0, "tx/s").rate == 0.0


def test_ratios_compare_with_the_same_client_count() -> None:
    rows = {(r.name, r.clients): r for r in sample_rows()}
    hc16 = rows[(HC_POP.label, 16)]
    assert hc16.ratio_limit == pytest.approx(1200 / 2000)
    assert hc16.ratio_recipe == pytest.approx(1200 / 200)
    assert rows[(PUSH.label, 1)].ratio_recipe == pytest.approx(540 / 500)
    assert rows[(PUSH_TR.label, 1)].ratio_recipe == pytest.approx(560 / 500)
    assert rows[(SPREAD_POP.label, 16)].ratio_recipe == pytest.approx(5.0)
    assert rows[(CLAIM_ACK.label, 16)].ratio_limit == pytest.approx(6.0)
    assert rows[(PQ_POP_MIN.label, 16)].ratio_recipe == pytest.approx(1.5)
    assert rows[(TREE_POP.label, 16)].ratio_recipe is None
    assert rows[(RECIPE_POP.label, 16)].ratio_recipe == 1.0
    assert rows[(LIMIT.label, 16)].ratio_limit == 1.0
    assert rows[(LIMIT.label, 16)].ratio_recipe is None
    assert rows[(LIMIT_BATCH.label, 1)].ratio_limit == pytest.approx(50.0)


def test_missing_reference_gives_no_ratio() -> None:
    (only,) = results.with_ratios([row(HC_POP, 4, 100)])
    assert only.ratio_limit is None and only.ratio_recipe is None
    assert results.ratio(1.0, 0.0) is None


def test_latency() -> None:
    lat = results.latency(1000, [0.001, 0.003, 0.002, 0.010])
    assert (lat.n, lat.samples) == (1000, 4)
    assert lat.median_ms == pytest.approx(2.5)
    assert lat.p90_ms == pytest.approx(7.9)  # within the samples, never past the largest
    assert results.latency(10, [0.005]).p90_ms == pytest.approx(5.0)


def test_tail() -> None:
    seconds = [i / 1000 for i in range(1, 101)]  # 1 .. 100 ms
    t = results.tail("Queue.claim", 10, seconds)
    assert (t.name, t.keys, t.samples) == ("Queue.claim", 10, 100)
    assert t.median_ms == pytest.approx(50.5)
    assert t.p99_ms == pytest.approx(99.01)  # within the samples, never past the largest
    assert results.tail("x", 1, [0.004]).p99_ms == pytest.approx(4.0)


def test_growth_is_largest_over_smallest() -> None:
    assert results.growth(LATENCIES) == pytest.approx(1.6)
    assert results.growth(list(reversed(LATENCIES))) == pytest.approx(1.6)
    assert results.growth(LATENCIES[:1]) is None


# -- printing ------------------------------------------------------------------------------


def test_table_has_every_row_ratio_and_cpu_column() -> None:
    text = report.format_table(sample_rows())
    lines = text.splitlines()
    assert len(lines) == 2 + 18
    assert lines[0].split()[:3] == ["measurement", "clients", "rate"]
    assert lines[0].endswith("client CPU ms/op server CPU ms/op")
    hc16 = next(line for line in lines if line.startswith(HC_POP.label) and " 16 " in line)
    assert hc16.split()[-7:] == ["1,200", "pops/s", "0.60", "6.00", "0.100", "2.000",
                                 "0.500"]
    limit = next(line for line in lines if line.startswith(LIMIT.label))
    assert limit.split()[-5:] == ["1.00", "-", "0.000", "0.500", "1.000"]
    recipe_push = next(line for line in lines if line.startswith(RECIPE_PUSH.label))
    assert recipe_push.split()[-3:] == ["-", "1.000", "-"]
    spread = next(line for line in lines if line.startswith(SPREAD_POP.label))
    assert spread.split()[-3:] == ["0.300", "-", "-"]
    assert all(len(line) <= len(lines[0]) for line in lines)


def test_cpu_note_says_whether_the_server_was_measured() -> None:
    assert "2 fdbserver processes" in report.format_cpu_note({"server_processes_sampled": 2})
    assert "1 fdbserver process on" in report.format_cpu_note({"server_processes_sampled": 1})
    assert "server: not measured" in report.format_cpu_note({})


def test_latency_and_target_text() -> None:
    text = report.format_latencies(LATENCIES)
    assert "1,000,000" in text and "1.60x" in text
    assert report.format_latencies([]) == "WeightTree.pop latency: not measured"
    text = report.format_targets(targets.check_targets([], LATENCIES, 16))
    assert "SKIP  pop spread=16, 16 poppers: x limit: - (target >= 0.5)" in text
    assert "PASS  WeightTree" in text and "<= 2" in text


def test_flow_latency_text() -> None:
    text = report.format_flow([Tail("Queue.claim, plain", 10**4, 500, 2.0, 5.5),
                               Tail("Queue.claim, keyed concurrency(1)", 10**4, 500, 3.0,
                                    9.25)])
    lines = text.splitlines()
    assert lines[1].split() == ["queue", "keys", "claims", "median", "ms", "p99", "ms"]
    assert lines[3].split()[-4:] == ["10,000", "500", "3.00", "9.25"]
    assert report.format_flow([]) == "Queue.claim latency, keyed limit: not measured"


def test_machine_line() -> None:
    machine = {"platform": "Linux", "cpu_count": 4, "python": "CPython 3.11",
               "fdb_api_version": 730, "fdb_bindings_version": "7.3.79",
               "fdb_client_version": "7.3.79", "cluster": "local",
               "server": {"versions": ["7.3.79"], "storage_engine": "memory"}}
    text = format_machine(machine)
    assert "4 CPUs" in text and "server 7.3.79 (memory)" in text
    assert "server unknown" in format_machine({**machine, "server": {}})


# -- files ---------------------------------------------------------------------------------


def sample_results(out: Path, *argv: str) -> Results:
    """The sample rows and latencies of a run with ``argv`` writing to ``out``."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = settings_from_args(parser.parse_args([f"--out={out}", *argv]))
    return Results({"platform": "test", "server_processes_sampled": 1}, settings,
                   sample_rows(), LATENCIES)


def test_results_json(tmp_path: Path) -> None:
    data = sample_results(tmp_path, "--only=pops,claim")
    path = tmp_path / "results.json"
    report.write_json(data, targets.check_targets(data.rows, data.latencies, 16), path)
    written = json.loads(path.read_text())
    assert written["machine"] == {"platform": "test", "server_processes_sampled": 1}
    assert written["settings"]["out"] == str(tmp_path)
    assert written["settings"]["clients"] == [1, 2, 4, 8, 16]
    assert written["settings"]["only"] == ["limit", "pops", "claim"]
    assert len(written["throughput"]) == 18
    hc = [r for r in written["throughput"] if r["name"] == HC_POP.label and r["clients"] == 16]
    assert hc[0]["rate"] == 1200 and hc[0]["retries_per_op"] == 0.1
    assert hc[0]["cpu_seconds"] == 2.4 and hc[0]["client_cpu_ms_per_op"] == pytest.approx(2.0)
    assert hc[0]["server_cpu_seconds"] == 0.6
    assert hc[0]["server_cpu_ms_per_op"] == pytest.approx(0.5)
    assert hc[0]["client_cpu_cores"] == pytest.approx(2.4)
    assert hc[0]["server_cpu_cores"] == pytest.approx(0.6)
    pq = [r for r in written["throughput"] if r["name"] == PQ_POP_MAX.label]
    assert pq[0]["client_cpu_ms_per_op"] is None and pq[0]["server_cpu_cores"] is None
    assert written["weight_tree"][0] == {"n": 1000, "samples": 500, "median_ms": 2.0,
                                         "p90_ms": 3.0}
    assert written["weight_tree_growth"] == pytest.approx(1.6)
    statuses = {t["name"]: t["status"] for t in written["targets"]}
    assert {s for n, s in statuses.items() if "aio" not in n and "orker" not in n
            and "awaited" not in n and "Fair" not in n and "noisy" not in n
            and "shard" not in n and "threads" not in n
            and not n.startswith(("hot:", "tasks:", "flow:", "workflow:"))} == {"PASS"}
    assert written["fair_queue"] == [] and written["noisy_neighbour"] is None
    assert written["flow_claim_latency"] == []


def test_chart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    chart.write_chart(sample_rows(), LATENCIES, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    only_limit = [r for r in sample_rows() if r.name == LIMIT.label]
    chart.write_chart(only_limit, [], tmp_path / "sparse.png")  # --only limit: no error
    assert (tmp_path / "sparse.png").exists()


def test_chart_series() -> None:
    assert chart.series(sample_rows(), HC_POP) == ([1, 16], [450.0, 1200.0])
    assert chart.series(sample_rows(), PUSH_TR) == ([1], [560.0])
    assert chart.series([], POP) == ([], [])
    labels = {kind.label for kind, _ in chart.POP_SERIES + chart.CONSUMER_SERIES}
    assert {SPREAD_POP.label, CLAIM_ACK.label, TREE_POP.label, PQ_POP_MIN.label,
            PQ_POP_MAX.label} <= labels


def test_publish_prints_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nested" / "out"
    report.publish(sample_results(out))
    printed = capsys.readouterr().out
    assert "measurement" in printed and "Targets" in printed
    assert "client CPU ms/op" in printed and "CPU ms/op: CPU time" in printed
    assert (out / "results.json").exists()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "No chart" in printed
    else:
        assert (out / "bench.png").exists()


def test_rows_round_trip_through_json() -> None:
    original = sample_rows()[0]
    data = original.to_json()
    fields = {f.name for f in dataclasses.fields(Row)}
    assert Row(**{k: v for k, v in data.items() if k in fields}) == original
