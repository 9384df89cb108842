"""What a run leaves behind: the tables and targets on stdout, ``results.json`` and
``bench.png`` (:mod:`~fdbrecipes.bench.chart`) in ``--out``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from .chart import write_chart
from .results import Latency, NoisyNeighbour, Results, Row, Tail, growth
from .settings import NOISY_ITEMS, QUIET_GROUPS, QUIET_ITEMS
from .targets import Target, check_targets

# --------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------


def _cell(value: Optional[float], spec: str) -> str:
    """``value`` formatted by ``spec``, or "-" when there is none."""
    return "-" if value is None else format(value, spec)


def format_table(rows: Sequence[Row]) -> str:
    """The throughput table: measurement, clients, rate, ratios, retries per item, and
    the client and server CPU milliseconds per item."""
    head = (f"{'measurement':<27} {'clients':>7} {'rate':>11} {'unit':<7} "
            f"{'x limit':>8} {'x recipe':>8} {'retries/op':>10} "
            f"{'client CPU ms/op':>16} {'server CPU ms/op':>16}")
    lines = [head, "-" * len(head)]
    for row in rows:
        lines.append(
            f"{row.name:<27} {row.clients:>7} {row.rate:>11,.0f} {row.unit:<7} "
            f"{_cell(row.ratio_limit, '.2f'):>8} {_cell(row.ratio_recipe, '.2f'):>8} "
            f"{_cell(row.retries_per_op, '.3f'):>10} "
            f"{_cell(row.cpu_ms_per_op, '.3f'):>16} {_cell(row.server_cpu_ms_per_op, '.3f'):>16}"
        )
    return "\n".join(lines)


def format_cpu_note(machine: Dict[str, Any]) -> str:
    """How the CPU columns were measured, and why the server's may be missing."""
    sampled = machine.get("server_processes_sampled") or 0
    server = (f"server: {sampled} fdbserver process{'' if sampled == 1 else 'es'} on this "
              "machine" if sampled else
              "server: not measured (no fdbserver process for this cluster file here)")
    return ("CPU ms/op: CPU time over the measured loop / items moved.  Client: all client "
            f"processes,\nnetwork threads included; {server}.")


def format_latencies(latencies: Sequence[Latency], title: str = "WeightTree.pop latency",
                     kept: str = "n kept constant by a push after each pop",
                     n: str = "items", calls: str = "pops") -> str:
    """A latency table (the WeightTree's unless told) and the growth from the
    smallest to the largest n."""
    if not latencies:
        return f"{title}: not measured"
    lines = [f"{title} ({kept})",
             f"{n:>11} {calls:>6} {'median ms':>10} {'p90 ms':>8}"]
    for lat in latencies:
        lines.append(f"{lat.n:>11,} {lat.samples:>6} {lat.median_ms:>10.2f} {lat.p90_ms:>8.2f}")
    lines.append(f"median growth from {latencies[0].n:,} to {latencies[-1].n:,} {n}: "
                 f"{_cell(growth(latencies), '.2f')}x")
    return "\n".join(lines)


def format_fair(latencies: Sequence[Latency], noisy: Optional[NoisyNeighbour]) -> str:
    """The FairQueue claim latency table and the noisy neighbour's figure."""
    table = format_latencies(latencies, "FairQueue.claim latency",
                             "one item per group, pushed again after each ack",
                             "groups", "claims")
    if noisy is None:
        return table + "\nNoisy neighbour: not measured"
    return (f"{table}\nNoisy neighbour: one group of {NOISY_ITEMS:,} items beside "
            f"{QUIET_GROUPS} groups of {QUIET_ITEMS}: the quiet groups' "
            f"{QUIET_GROUPS * QUIET_ITEMS} items were all served by claim {noisy.claims}, "
            f"the loud group got {noisy.loud} of those claims")


def format_flow(tails: Sequence[Tail]) -> str:
    """The flow group's claim latency table: plain, then under a keyed limit."""
    if not tails:
        return "Queue.claim latency, keyed limit: not measured"
    lines = ["Queue.claim latency (one job per key, acked and pushed again after each "
             "claim; claims alternating)",
             f"{'queue':<36} {'keys':>7} {'claims':>6} {'median ms':>10} {'p99 ms':>8}"]
    for t in tails:
        lines.append(f"{t.name:<36} {t.keys:>7,} {t.samples:>6} {t.median_ms:>10.2f} "
                     f"{t.p99_ms:>8.2f}")
    return "\n".join(lines)


def format_targets(targets: Sequence[Target]) -> str:
    """One line per target: PASS/FAIL/SKIP, the figure and the threshold."""
    lines = ["Targets (a miss is reported, it does not fail the command)"]
    for t in targets:
        sign = "<=" if t.at_most else ">="
        note = f"  ({t.note})" if t.note else ""
        lines.append(f"  {t.status:<4}  {t.name}: {_cell(t.value, '.2f')} "
                     f"(target {sign} {t.threshold:g}){note}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


def write_json(results: Results, targets: Sequence[Target], path: Path) -> None:
    """Write every figure, the targets, the settings and the machine to ``path``."""
    data = {
        "machine": results.machine,
        "settings": {**dataclasses.asdict(results.settings), "out": str(results.settings.out)},
        "throughput": [row.to_json() for row in results.rows],
        "weight_tree": [dataclasses.asdict(lat) for lat in results.latencies],
        "weight_tree_growth": growth(results.latencies),
        "fair_queue": [dataclasses.asdict(lat) for lat in results.fair_latencies],
        "fair_queue_growth": growth(results.fair_latencies),
        "noisy_neighbour": None if results.noisy is None else dataclasses.asdict(results.noisy),
        "job_records": [dataclasses.asdict(lat) for lat in results.job_latencies],
        "flow_claim_latency": [dataclasses.asdict(t) for t in results.flow_latencies],
        "targets": [{**dataclasses.asdict(t), "status": t.status} for t in targets],
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def publish(results: Results) -> None:
    """Print the tables and targets; write results.json and bench.png to ``--out``."""
    targets = check_targets(results.rows, results.latencies, results.settings.most,
                            results.fair_latencies, results.noisy, results.flow_latencies)
    print(format_table(results.rows))
    print(format_cpu_note(results.machine))
    print()
    print(format_latencies(results.latencies))
    if results.settings.runs("fair"):
        print()
        print(format_fair(results.fair_latencies, results.noisy))
    if results.settings.runs("worker"):
        print()
        print(format_latencies(results.job_latencies, "Queue.job latency",
                               "a Queue made with history, half its jobs finished",
                               "records", "reads"))
    if results.settings.runs("flow"):
        print()
        print(format_flow(results.flow_latencies))
    print()
    print(format_targets(targets))
    out = results.settings.out
    out.mkdir(parents=True, exist_ok=True)
    write_json(results, targets, out / "results.json")
    print(f"\nFigures written to {out / 'results.json'}")
    try:
        write_chart(results.rows, results.latencies, out / "bench.png")
    except ImportError:
        print("No chart: matplotlib is not installed (pip install 'fdbrecipes[bench]')")
        return
    print(f"Chart written to {out / 'bench.png'}")
