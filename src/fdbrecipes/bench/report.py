"""What a run leaves behind: the tables and targets on stdout, ``results.json`` and
``bench.png`` in ``--out``."""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from .results import Latency, Results, Row, Target, check_targets, growth
from .settings import HC_POP, LIMIT, POP, RECIPE_POP, Kind

# --------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------


def _cell(value: Optional[float], spec: str) -> str:
    """``value`` formatted by ``spec``, or "-" when there is none."""
    return "-" if value is None else format(value, spec)


def format_table(rows: Sequence[Row]) -> str:
    """The throughput table: measurement, clients, rate, ratios, retries per item."""
    head = (f"{'measurement':<27} {'clients':>7} {'rate':>11} {'unit':<7} "
            f"{'x limit':>8} {'x recipe':>8} {'retries/op':>10}")
    lines = [head, "-" * len(head)]
    for row in rows:
        lines.append(
            f"{row.name:<27} {row.clients:>7} {row.rate:>11,.0f} {row.unit:<7} "
            f"{_cell(row.ratio_limit, '.2f'):>8} {_cell(row.ratio_recipe, '.2f'):>8} "
            f"{_cell(row.retries_per_op, '.3f'):>10}"
        )
    return "\n".join(lines)


def format_latencies(latencies: Sequence[Latency]) -> str:
    """The WeightTree latency table and the growth from the smallest to the largest n."""
    if not latencies:
        return "WeightTree pop latency: not measured"
    lines = ["WeightTree.pop latency (n kept constant by a push after each pop)",
             f"{'items':>11} {'pops':>6} {'median ms':>10} {'p90 ms':>8}"]
    for lat in latencies:
        lines.append(f"{lat.n:>11,} {lat.samples:>6} {lat.median_ms:>10.2f} {lat.p90_ms:>8.2f}")
    lines.append(f"median growth from {latencies[0].n:,} to {latencies[-1].n:,} items: "
                 f"{_cell(growth(latencies), '.2f')}x")
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
# Chart and JSON
# --------------------------------------------------------------------------------------


def _series(rows: Sequence[Row], kind: Kind) -> Tuple[List[int], List[float]]:
    """The client counts and rates of ``kind``'s rows, by client count."""
    points = sorted((row.clients, row.rate) for row in rows if row.name == kind.label)
    return [c for c, _ in points], [r for _, r in points]


def write_chart(rows: Sequence[Row], latencies: Sequence[Latency], path: Path) -> None:
    """Write a PNG: pops/s against poppers (three pops and the limit), and WeightTree
    pop latency against n on a log axis.

    Raises:
        ImportError: matplotlib (the ``bench`` extra) is not installed.
    """
    # Imported by name: matplotlib is an optional extra, absent where mypy runs in CI.
    figure_module = importlib.import_module("matplotlib.figure")
    fig = figure_module.Figure(figsize=(12, 4.8), tight_layout=True)
    pops, tree = fig.subplots(1, 2)
    for kind, style in ((RECIPE_POP, "s-"), (POP, "o-"), (HC_POP, "^-"), (LIMIT, "k--")):
        x, y = _series(rows, kind)
        if x:
            pops.plot(x, y, style, label=f"{kind.label} ({kind.unit})")
    counts = sorted({row.clients for row in rows})
    if counts:
        pops.set_xscale("log", base=2)
        pops.set_xticks(counts)
        pops.set_xticklabels([str(c) for c in counts])
    pops.set(xlabel="client processes (poppers)", ylabel="per second",
             title="Pops per second while draining a queue")
    pops.minorticks_off()
    pops.set_ylim(bottom=0)
    pops.legend()
    pops.grid(True, alpha=0.3)
    sizes = [lat.n for lat in latencies]
    tree.plot(sizes, [lat.median_ms for lat in latencies], "o-", label="median")
    tree.plot(sizes, [lat.p90_ms for lat in latencies], "^--", label="p90")
    tree.set_xscale("log")
    tree.set(xlabel="live items (n)", ylabel="ms per pop", title="WeightTree.pop latency")
    tree.set_ylim(bottom=0)
    tree.legend()
    tree.grid(True, alpha=0.3)
    fig.savefig(path, dpi=110)


def write_json(results: Results, targets: Sequence[Target], path: Path) -> None:
    """Write every figure, the targets, the settings and the machine to ``path``."""
    data = {
        "machine": results.machine,
        "settings": {**dataclasses.asdict(results.settings), "out": str(results.settings.out)},
        "throughput": [row.to_json() for row in results.rows],
        "weight_tree": [dataclasses.asdict(lat) for lat in results.latencies],
        "weight_tree_growth": growth(results.latencies),
        "targets": [{**dataclasses.asdict(t), "status": t.status} for t in targets],
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def publish(results: Results) -> None:
    """Print the tables and targets; write results.json and bench.png to ``--out``."""
    targets = check_targets(results.rows, results.latencies, results.settings.most)
    print(format_table(results.rows))
    print()
    print(format_latencies(results.latencies))
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

