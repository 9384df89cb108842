"""The benchmark suite's pure parts, without a server: summaries, ratios, targets,
tables, the chart, results.json, the client loop and the command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator, List, Optional

import pytest

from fdbrecipes import bench, cli
from fdbrecipes.bench import (
    HC_POP,
    LIMIT,
    LIMIT_BATCH,
    POP,
    PUSH,
    RECIPE_POP,
    RECIPE_PUSH,
    BenchError,
    Client,
    Kind,
    Latency,
    Report,
    Results,
    Row,
    Settings,
)
from fdbrecipes.testing import ServerNotFoundError

ROOT = Path(__file__).resolve().parents[2]


def row(kind: Kind, clients: int, rate: float, retries: Optional[int] = 0) -> Row:
    """A row of ``kind`` whose rate is ``rate`` (count over one second)."""
    return Row(kind.label, clients, int(rate), 1.0, retries, kind.unit, kind.recipe)


def sample_rows() -> List[Row]:
    """A run at 1 and 16 clients, with round figures."""
    return bench.with_ratios([
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


def settings(**changes: Any) -> Settings:
    args = parse([f"--{k}={v}" for k, v in changes.items()])
    return bench.settings_from_args(args)


def parse(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args(argv)


# -- summaries and ratios ----------------------------------------------------------------


def test_summarize_takes_the_longest_client_as_wall_time() -> None:
    reports = [Report(0, 100, 2.0, 3), Report(1, 300, 4.0, 1)]
    summary = bench.summarize(HC_POP, 2, reports)
    assert (summary.count, summary.seconds, summary.retries) == (400, 4.0, 4)
    assert summary.rate == 100.0
    assert summary.retries_per_op == 0.01
    assert (summary.name, summary.unit, summary.recipe) == (HC_POP.label, "pops/s",
                                                            RECIPE_POP.label)


def test_summarize_without_retry_counts() -> None:
    summary = bench.summarize(RECIPE_PUSH, 2, [Report(0, 10, 1.0, None), Report(1, 10, 1.0, 2)])
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
    (only,) = bench.with_ratios([row(HC_POP, 4, 100)])
    assert only.ratio_limit is None and only.ratio_recipe is None
    assert bench.ratio(1.0, 0.0) is None


def test_percentile_and_latency() -> None:
    values = [float(v) for v in range(1, 11)]
    assert bench.percentile(values, 90) == 9.0
    assert bench.percentile(values, 100) == 10.0
    assert bench.percentile([5.0], 90) == 5.0
    lat = bench.latency(1000, [0.001, 0.003, 0.002, 0.010])
    assert (lat.n, lat.samples) == (1000, 4)
    assert lat.median_ms == pytest.approx(2.5)
    assert lat.p90_ms == pytest.approx(10.0)


def test_growth_is_largest_over_smallest() -> None:
    assert bench.growth(LATENCIES) == pytest.approx(1.6)
    assert bench.growth(list(reversed(LATENCIES))) == pytest.approx(1.6)
    assert bench.growth(LATENCIES[:1]) is None


def test_chunks_cover_the_range() -> None:
    assert list(bench.chunks(0, 2500, 1000)) == [range(0, 1000), range(1000, 2000),
                                                 range(2000, 2500)]
    assert list(bench.chunks(5, 5, 10)) == []


# -- targets -------------------------------------------------------------------------------


def statuses(rows: List[Row], latencies: List[Latency], most: int = 16) -> List[str]:
    return [t.status for t in bench.check_targets(rows, latencies, most)]


def test_targets_pass() -> None:
    assert statuses(sample_rows(), LATENCIES) == ["PASS"] * 6


def test_targets_fail() -> None:
    rows = bench.with_ratios([
        row(LIMIT, 1, 600), row(LIMIT, 16, 2000), row(PUSH, 1, 300), row(PUSH, 16, 1800),
        row(RECIPE_POP, 16, 300), row(HC_POP, 16, 900, 500),
    ])
    slow = [Latency(10**3, 500, 1.0, 1.0), Latency(10**6, 500, 2.5, 3.0)]
    assert statuses(rows, slow) == ["FAIL", "FAIL", "FAIL", "FAIL", "PASS", "FAIL"]


def test_unmeasured_targets_are_skipped() -> None:
    assert statuses([], []) == ["SKIP"] * 6


def test_targets_say_when_the_scope_is_smaller() -> None:
    targets = bench.check_targets(sample_rows(), LATENCIES[:3], 8)
    assert all("the target is at 16" in t.note for t in targets[:3])
    assert targets[3].note == ""  # push at 1 client
    assert "10^6" in targets[-1].note
    assert "1,000 to 100,000 items" in targets[-1].name
    full = bench.check_targets(sample_rows(), LATENCIES, 16)
    assert [t.note for t in full] == [""] * 6


def test_a_target_at_the_threshold_passes() -> None:
    assert bench.Target("x", 2.0, 2.0, at_most=True).status == "PASS"
    assert bench.Target("x", 0.5, 0.5).status == "PASS"


# -- printing ------------------------------------------------------------------------------


def test_table_has_every_row_and_ratio() -> None:
    text = bench.format_table(sample_rows())
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
    text = bench.format_latencies(LATENCIES)
    assert "1,000,000" in text and "1.60x" in text
    assert bench.format_latencies([]) == "WeightTree pop latency: not measured"
    targets = bench.format_targets(bench.check_targets([], LATENCIES, 16))
    assert "SKIP" in targets and "PASS  WeightTree" in targets and "<= 2" in targets


def test_machine_line() -> None:
    machine = {"platform": "Linux", "cpu_count": 4, "python": "CPython 3.11",
               "fdb_api_version": 730, "fdb_bindings_version": "7.3.79",
               "fdb_client_version": "7.3.79", "cluster": "local",
               "server": {"versions": ["7.3.79"], "storage_engine": "memory"}}
    text = bench.format_machine(machine)
    assert "4 CPUs" in text and "server 7.3.79 (memory)" in text
    assert "server unknown" in bench.format_machine({**machine, "server": {}})


# -- files ---------------------------------------------------------------------------------


def results(out: Path) -> Results:
    return Results({"platform": "test"}, settings(out=out), sample_rows(), LATENCIES)


def test_results_json(tmp_path: Path) -> None:
    data = results(tmp_path)
    path = tmp_path / "results.json"
    bench.write_json(data, bench.check_targets(data.rows, data.latencies, 16), path)
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
    bench.write_chart(sample_rows(), LATENCIES, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_publish_prints_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nested" / "out"
    bench.publish(results(out))
    printed = capsys.readouterr().out
    assert "measurement" in printed and "Targets" in printed
    assert (out / "results.json").exists()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "No chart" in printed
    else:
        assert (out / "bench.png").exists()


# -- clients -------------------------------------------------------------------------------


def counting_client(limit: int) -> Client:
    """A client that moves 2 items per step, ``limit`` times, then nothing."""
    steps = [0]

    def step() -> int:
        if steps[0] == limit:
            return 0
        steps[0] += 1
        return 2

    return Client(step, lambda: steps[0])


def test_run_loop_drains() -> None:
    client = counting_client(5)
    count, seconds = bench.run_loop(client, None)
    assert count == 10 and seconds >= 0 and client.retries() == 5


def test_run_loop_runs_for_the_duration() -> None:
    count, seconds = bench.run_loop(counting_client(10**9), 0.05)
    assert count > 0 and seconds >= 0.05


class FakeProcess:
    def __init__(self, exitcode: Optional[int]) -> None:
        self.exitcode = exitcode


def processes(*exitcodes: Optional[int]) -> Any:
    """Stand-ins for client processes, with these exit codes (None: running)."""
    return [FakeProcess(code) for code in exitcodes]


def reports_queue(*reports: Report) -> Any:
    """A queue holding ``reports``, standing in for the clients' multiprocessing queue."""
    results: queue.Queue[Report] = queue.Queue()
    for report in reports:
        results.put(report)
    return results


def test_collect_returns_one_report_per_process() -> None:
    results = reports_queue(*(Report(i, 10, 1.0, 0) for i in range(3)))
    reports = bench.collect(results, processes(None, None, None))
    assert [r.client for r in reports] == [0, 1, 2]


def test_collect_raises_a_client_error() -> None:
    results = reports_queue(Report(0, 10, 1.0, 0),
                            Report(1, 0, 0.0, None, "client 1: FDBError: boom"))
    with pytest.raises(BenchError, match="boom"):
        bench.collect(results, processes(0, 0))


def test_collect_notices_a_dead_client() -> None:
    with pytest.raises(BenchError, match="exit code -9"):
        bench.collect(reports_queue(), processes(-9))


def test_a_failing_client_breaks_the_barrier(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(_cluster_file: str) -> Any:
        raise RuntimeError("no cluster")

    monkeypatch.setattr(bench, "open_database", refuse)
    barrier: Any = threading.Barrier(2)
    results = reports_queue()
    job = bench.Job("write", 1, "/nonexistent", ("p",), 1.0)
    bench.client_main(job, 3, barrier, results)
    report = results.get_nowait()
    assert report.client == 3 and report.error == "client 3: RuntimeError: no cluster"
    assert barrier.broken


def test_every_operation_has_a_client() -> None:
    kinds = [k for k in vars(bench).values() if isinstance(k, Kind)]
    assert len(kinds) == 8
    assert {k.op for k in kinds} == set(bench.FACTORIES)


# -- command line --------------------------------------------------------------------------


def test_defaults() -> None:
    s = bench.settings_from_args(parse([]))
    assert s.clients == (1, 2, 4, 8, 16) and s.most == 16 and s.ends == (1, 16)
    assert (s.duration, s.items, s.samples) == (5.0, 2000, 500)
    assert s.sizes == (10**3, 10**4, 10**5, 10**6)
    assert s.out == Path("bench-results")


def test_quick_and_explicit_values() -> None:
    quick = bench.settings_from_args(parse(["--quick", "--clients", "6"]))
    assert quick.duration == 1.0 and quick.sizes[-1] == 10**5
    assert quick.clients == (1, 2, 4, 6) and quick.ends == (1, 6)
    explicit = bench.settings_from_args(parse(["--quick", "--duration", "2.5", "--out", "x"]))
    assert explicit.duration == 2.5 and explicit.out == Path("x")
    one = bench.settings_from_args(parse(["--clients", "1"]))
    assert one.clients == (1,) and one.ends == (1,)


@pytest.mark.parametrize("argv", [["--clients", "0"], ["--clients", "2.5"],
                                  ["--duration", "-1"], ["--duration", "nan"],
                                  ["--items", "many"]])
def test_bad_values_are_refused(argv: List[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(argv)
    assert "error: argument" in capsys.readouterr().err


def test_client_counts() -> None:
    assert bench.client_counts(16) == (1, 2, 4, 8, 16)
    assert bench.client_counts(3) == (1, 2, 3)
    assert bench.client_counts(32) == (1, 2, 4, 8, 16, 32)


def test_cli_help_needs_no_client_library(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--help"])
    assert exit_info.value.code == 0
    assert "--clients" in capsys.readouterr().out


def test_benchmarks_run_py_help() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--help"],
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout


def test_missing_client_library_is_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "client_library_problem", lambda: "libfdb_c is missing")
    assert bench.run_bench(parse([])) == 1
    assert "libfdb_c is missing" in capsys.readouterr().err


def test_missing_server_is_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    @contextlib.contextmanager
    def no_server() -> Iterator[str]:
        raise ServerNotFoundError("fdbserver not found")
        yield ""  # pragma: no cover

    monkeypatch.setattr(cli, "client_library_problem", lambda: None)
    monkeypatch.setattr(cli, "local_cluster", no_server)
    assert bench.run_bench(parse([])) == 1
    assert "fdbserver not found" in capsys.readouterr().err
