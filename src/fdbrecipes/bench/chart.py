"""``bench.png``: pops per second against poppers, the other consumers against clients,
and WeightTree pop latency against n (needs matplotlib, the ``bench`` extra)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, List, Sequence, Tuple

from .results import Latency, Row
from .settings import (
    CLAIM_ACK,
    HC_POP,
    LIMIT,
    POP,
    PQ_POP_MAX,
    PQ_POP_MIN,
    RECIPE_POP,
    SPREAD_POP,
    TREE_POP,
    Kind,
)

#: The left panel's series: Queue pops while draining, and the limit for reference.
POP_SERIES = ((RECIPE_POP, "s-"), (POP, "o-"), (SPREAD_POP, "D-"), (HC_POP, "^-"),
              (LIMIT, "k--"))
#: The middle panel's series: the other consumers, and the limit.
CONSUMER_SERIES = ((CLAIM_ACK, "P-"), (TREE_POP, "v-"), (PQ_POP_MIN, "<-"),
                   (PQ_POP_MAX, ">-"), (LIMIT, "k--"))


def series(rows: Sequence[Row], kind: Kind) -> Tuple[List[int], List[float]]:
    """The client counts and rates of ``kind``'s rows, by client count."""
    points = sorted((row.clients, row.rate) for row in rows if row.name == kind.label)
    return [c for c, _ in points], [r for _, r in points]


def _rates(axes: Any, rows: Sequence[Row], lines: Sequence[Tuple[Kind, str]],
           xlabel: str, title: str, log_y: bool = False) -> None:
    """Plot the rate of each kind of ``lines`` against client processes on ``axes``
    (rates on a log axis with ``log_y``: for series of different units and scales)."""
    counts = set()
    for kind, style in lines:
        x, y = series(rows, kind)
        counts.update(x)
        if x:
            axes.plot(x, y, style, label=f"{kind.label} ({kind.unit})")
    if counts:
        axes.set_xscale("log", base=2)
        axes.set_xticks(sorted(counts))
        axes.set_xticklabels([str(c) for c in sorted(counts)])
        axes.legend(fontsize="small")
    axes.set(xlabel=xlabel, ylabel="per second" + (" (log scale)" if log_y else ""),
             title=title)
    axes.minorticks_off()
    if log_y and counts:
        axes.set_yscale("log")
    else:
        axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)


def write_chart(rows: Sequence[Row], latencies: Sequence[Latency], path: Path) -> None:
    """Write a PNG of three panels: Queue pops per second against poppers (the recipe's,
    plain, spread=16, high-contention, and the limit); claim_many+ack items, WeightTree
    and PriorityQueue pops against clients, with the limit, on a log axis (claims move
    100 items per transaction); WeightTree pop latency against n on a log axis.

    Raises:
        ImportError: matplotlib (the ``bench`` extra) is not installed.
    """
    # Imported by name: matplotlib is an optional extra, absent where mypy runs in CI.
    figure_module = importlib.import_module("matplotlib.figure")
    fig = figure_module.Figure(figsize=(18, 5.2), tight_layout=True)
    pops, consumers, tree = fig.subplots(1, 3)
    _rates(pops, rows, POP_SERIES, "client processes (poppers)",
           "Queue pops per second while draining")
    _rates(consumers, rows, CONSUMER_SERIES, "client processes",
           "Other consumers while draining", log_y=True)
    sizes = [lat.n for lat in latencies]
    tree.plot(sizes, [lat.median_ms for lat in latencies], "o-", label="median")
    tree.plot(sizes, [lat.p90_ms for lat in latencies], "^--", label="p90")
    tree.set_xscale("log")
    tree.set(xlabel="live items (n)", ylabel="ms per pop", title="WeightTree.pop latency")
    tree.set_ylim(bottom=0)
    tree.legend()
    tree.grid(True, alpha=0.3)
    fig.savefig(path, dpi=110)
