"""The figures of a run: client reports combined into rows, ratios, latencies, and the
project's performance targets checked against them.

Everything here is arithmetic on what the clients reported: no database, no output.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from .settings import HC_POP, LIMIT, PUSH, Kind, Settings


class Report(NamedTuple):
    """What one client process reports: items moved, seconds from the barrier's
    release to its last operation's end, retried transactions (None: not counted),
    and an error message if it failed."""

    client: int
    items: int
    seconds: float
    retries: Optional[int]
    error: Optional[str] = None


@dataclass(frozen=True)
class Row:
    """One measurement: ``count`` items in ``seconds`` by ``clients`` processes."""

    name: str
    clients: int
    count: int
    seconds: float
    retries: Optional[int]
    unit: str
    recipe: Optional[str] = None
    ratio_limit: Optional[float] = None
    ratio_recipe: Optional[float] = None

    @property
    def rate(self) -> float:
        """Items per second over the wall time."""
        return self.count / self.seconds if self.seconds > 0 else 0.0

    @property
    def retries_per_op(self) -> Optional[float]:
        """Retried transactions per item moved (None when not counted)."""
        if self.retries is None:
            return None
        return self.retries / self.count if self.count else float(self.retries)

    def to_json(self) -> Dict[str, Any]:
        """The row's fields, its rate and its retries per item, for results.json."""
        data = dataclasses.asdict(self)
        data.update(rate=self.rate, retries_per_op=self.retries_per_op)
        return data


@dataclass(frozen=True)
class Latency:
    """WeightTree pop latency with ``n`` live items, over ``samples`` pops."""

    n: int
    samples: int
    median_ms: float
    p90_ms: float


@dataclass
class Results:
    """Everything one run measured."""

    machine: Dict[str, Any]
    settings: Settings
    rows: List[Row]
    latencies: List[Latency]


def summarize(kind: Kind, clients: int, reports: Sequence[Report]) -> Row:
    """Combine the clients' reports into one row.

    All clients leave the barrier together, so the wall time is the longest client's
    time: from the release to the last client finishing.  Retries are summed (None if
    any client could not count them).
    """
    retries = [r.retries for r in reports]
    return Row(
        name=kind.label,
        clients=clients,
        count=sum(r.items for r in reports),
        seconds=max((r.seconds for r in reports), default=0.0),
        retries=None if None in retries else sum(r or 0 for r in retries),
        unit=kind.unit,
        recipe=kind.recipe,
    )


def ratio(value: float, reference: Optional[float]) -> Optional[float]:
    """``value / reference``, or None when there is no (positive) reference."""
    if reference is None or reference <= 0:
        return None
    return value / reference


def with_ratios(rows: Sequence[Row]) -> List[Row]:
    """The rows with their ratios to the limit and to the recipe at the same client count."""
    rates = {(row.name, row.clients): row.rate for row in rows}
    return [
        dataclasses.replace(
            row,
            ratio_limit=ratio(row.rate, rates.get((LIMIT.label, row.clients))),
            ratio_recipe=ratio(row.rate, rates.get((row.recipe or "", row.clients))),
        )
        for row in rows
    ]


def find(rows: Sequence[Row], kind: Kind, clients: int) -> Optional[Row]:
    """The row of ``kind`` at ``clients``, if measured."""
    for row in rows:
        if row.name == kind.label and row.clients == clients:
            return row
    return None


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of non-empty ``values``."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def latency(n: int, seconds: Sequence[float]) -> Latency:
    """Median and p90, in milliseconds, of pop times measured with ``n`` live items."""
    return Latency(n, len(seconds), statistics.median(seconds) * 1000,
                   percentile(seconds, 90) * 1000)


def growth(latencies: Sequence[Latency]) -> Optional[float]:
    """Median pop latency at the largest size over that at the smallest."""
    if len(latencies) < 2:
        return None
    ordered = sorted(latencies, key=lambda lat: lat.n)
    return ratio(ordered[-1].median_ms, ordered[0].median_ms)


# --------------------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One of the project's performance targets, checked against this run."""

    name: str
    value: Optional[float]
    threshold: float
    at_most: bool = False
    note: str = ""

    @property
    def status(self) -> str:
        """PASS, FAIL, or SKIP when the run did not measure the figure."""
        if self.value is None:
            return "SKIP"
        met = self.value <= self.threshold if self.at_most else self.value >= self.threshold
        return "PASS" if met else "FAIL"


def plural(count: int, word: str) -> str:
    """``"1 client"``, ``"4 clients"``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def _scope_note(clients: int) -> str:
    """Why a target measured at ``clients`` (not 16) speaks of a smaller scope."""
    return "" if clients == 16 else f"measured at {plural(clients, 'client')}; the target is at 16"


def _field(row: Optional[Row], name: str) -> Optional[float]:
    """The figure ``name`` of ``row``, or None when the row was not measured."""
    value: Optional[float] = None if row is None else getattr(row, name)
    return value


def check_targets(rows: Sequence[Row], latencies: Sequence[Latency], most: int) -> List[Target]:
    """The issue's targets, checked against ``rows`` (with ratios) and ``latencies``.

    Client-count targets are checked at K = ``most`` (16 by default); the WeightTree
    target over the sizes measured (10^3 to 10^6 by default).  A figure the run did not
    measure gives SKIP.
    """
    hc = find(rows, HC_POP, most)
    note = _scope_note(most)
    poppers = plural(most, "popper")
    targets = [
        Target(f"high-contention pop, {poppers}: x recipe pop", _field(hc, "ratio_recipe"),
               5.0, note=note),
        Target(f"high-contention pop, {poppers}: x limit", _field(hc, "ratio_limit"),
               0.5, note=note),
        Target(f"high-contention pop, {poppers}: conflicts per pop",
               _field(hc, "retries_per_op"), 0.2, at_most=True, note=note),
    ]
    for clients in sorted({1, most}):
        targets.append(Target(f"Queue.push, {plural(clients, 'client')}: x limit",
                              _field(find(rows, PUSH, clients), "ratio_limit"), 0.8,
                              note="" if clients == 1 else note))
    sizes = sorted(lat.n for lat in latencies) or [10**3, 10**6]
    full = sizes[0] <= 10**3 and sizes[-1] >= 10**6
    targets.append(Target(
        f"WeightTree pop median growth, {sizes[0]:,} to {sizes[-1]:,} items",
        growth(latencies), 2.0, at_most=True,
        note="" if full else "the target is from 10^3 to 10^6 items",
    ))
    return targets
