"""The figures of a run: client reports combined into rows, ratios and latencies.

Everything here is arithmetic on what the clients reported: no database, no output.
The targets checked against these figures are in :mod:`~fdbrecipes.bench.targets`.
"""

from __future__ import annotations

import dataclasses
import operator
import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, TypeVar

from .settings import LIMIT, Kind, Settings


class Report(NamedTuple):
    """What one client process reports.

    Attributes:
        client: its index.
        items: items moved.
        seconds: from the barrier's release to its last operation's end.
        retries: retried transactions (None: not counted).
        cpu_seconds: the process's CPU time over those seconds (all its threads).
        server_cpu: the servers' total CPU seconds read at the start and at the end of
            its loop (None: no server process found on this machine).
        error: what went wrong, if it failed.
    """

    client: int
    items: int
    seconds: float
    retries: Optional[int]
    cpu_seconds: float = 0.0
    server_cpu: Optional[Tuple[float, float]] = None
    error: Optional[str] = None


def per_op_ms(seconds: Optional[float], count: int) -> Optional[float]:
    """``seconds`` per item moved, in milliseconds (None: not measured, or no item)."""
    if seconds is None or count <= 0:
        return None
    return seconds / count * 1000


def cores(cpu_seconds: Optional[float], seconds: float) -> Optional[float]:
    """CPU seconds over wall seconds: cores kept busy on average (None: not measured)."""
    return None if cpu_seconds is None else ratio(cpu_seconds, seconds)


@dataclass(frozen=True)
class Row:
    """One measurement: ``count`` items in ``seconds`` by ``clients`` processes, which
    used ``cpu_seconds`` of CPU between them while the servers used
    ``server_cpu_seconds`` (None: not measured)."""

    name: str
    clients: int
    count: int
    seconds: float
    retries: Optional[int]
    unit: str
    recipe: Optional[str] = None
    ratio_limit: Optional[float] = None
    ratio_recipe: Optional[float] = None
    cpu_seconds: Optional[float] = None
    server_cpu_seconds: Optional[float] = None

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

    @property
    def cpu_ms_per_op(self) -> Optional[float]:
        """Client CPU milliseconds per item moved, over all client processes."""
        return per_op_ms(self.cpu_seconds, self.count)

    @property
    def server_cpu_ms_per_op(self) -> Optional[float]:
        """Server CPU milliseconds per item moved (None: not measured)."""
        return per_op_ms(self.server_cpu_seconds, self.count)

    def to_json(self) -> Dict[str, Any]:
        """The row's fields and derived figures, for results.json.

        Besides the rate, the retries and the CPU per item, ``client_cpu_cores`` and
        ``server_cpu_cores`` are the CPU seconds over the wall seconds: how many cores
        the clients (all together) and the servers kept busy on average.
        """
        data = dataclasses.asdict(self)
        data.update(
            rate=self.rate,
            retries_per_op=self.retries_per_op,
            client_cpu_ms_per_op=self.cpu_ms_per_op,
            server_cpu_ms_per_op=self.server_cpu_ms_per_op,
            client_cpu_cores=cores(self.cpu_seconds, self.seconds),
            server_cpu_cores=cores(self.server_cpu_seconds, self.seconds),
        )
        return data


@dataclass(frozen=True)
class Latency:
    """WeightTree pop latency with ``n`` live items, over ``samples`` pops."""

    n: int
    samples: int
    median_ms: float
    p90_ms: float


@dataclass(frozen=True)
class NoisyNeighbour:
    """A FairQueue's noisy neighbour, claimed and acked one item at a time: by
    ``claims``, every item of the quiet groups was served, and ``loud`` of those
    claims served the loud group."""

    claims: int
    loud: int


@dataclass(frozen=True)
class Tail:
    """Claim latency of ``name`` with ``keys`` keys holding work, over ``samples``
    claims: the median and the 99th percentile."""

    name: str
    keys: int
    samples: int
    median_ms: float
    p99_ms: float


@dataclass
class Results:
    """Everything one run measured (the fair queue's latencies, by groups, and its
    noisy neighbour when the "fair" group ran; ``Queue.job`` latency when the
    "worker" group ran; the claim latencies with and without a keyed limit when the
    "flow" group ran)."""

    machine: Dict[str, Any]
    settings: Settings
    rows: List[Row]
    latencies: List[Latency]
    fair_latencies: List[Latency] = dataclasses.field(default_factory=list)
    noisy: Optional[NoisyNeighbour] = None
    job_latencies: List[Latency] = dataclasses.field(default_factory=list)
    flow_latencies: List[Tail] = dataclasses.field(default_factory=list)


def server_window(reports: Sequence[Report]) -> Optional[float]:
    """The servers' CPU seconds from the earliest start to the latest end the clients
    read (None unless every client read both)."""
    windows = [r.server_cpu for r in reports if r.server_cpu is not None]
    if not reports or len(windows) < len(reports):
        return None
    return max(end for _, end in windows) - min(start for start, _ in windows)


N = TypeVar("N", int, float)


def known_sum(values: Sequence[Optional[N]]) -> Optional[N]:
    """The sum of ``values``, or None if any of them was not measured (None)."""
    known = [v for v in values if v is not None]
    return sum(known) if len(known) == len(values) else None


def summarize(kind: Kind, clients: int, reports: Sequence[Report]) -> Row:
    """Combine the clients' reports into one row.

    All clients leave the barrier together, so the wall time is the longest client's
    time: from the release to the last client finishing.  Retries and client CPU are
    summed (retries None if any client could not count them); the server CPU is read
    over the same window (:func:`server_window`).
    """
    return Row(
        name=kind.label,
        clients=clients,
        count=sum(r.items for r in reports),
        seconds=max((r.seconds for r in reports), default=0.0),
        retries=known_sum([r.retries for r in reports]),
        unit=kind.unit,
        recipe=kind.recipe,
        cpu_seconds=sum(r.cpu_seconds for r in reports),
        server_cpu_seconds=server_window(reports),
    )


def combined(rows: Sequence[Row]) -> Row:
    """Rounds of one measurement as one row: their items, seconds, retries and CPU
    summed (retries, client or server CPU None if any round lacks them)."""
    return dataclasses.replace(
        rows[0],
        count=sum(row.count for row in rows),
        seconds=sum(row.seconds for row in rows),
        retries=known_sum([row.retries for row in rows]),
        cpu_seconds=known_sum([row.cpu_seconds for row in rows]),
        server_cpu_seconds=known_sum([row.server_cpu_seconds for row in rows]),
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


def latency(n: int, seconds: Sequence[float]) -> Latency:
    """Median and p90, in milliseconds, of pop times measured with ``n`` live items
    (the p90: the ninth of :func:`statistics.quantiles`' deciles, inclusive of the
    extremes; one sample alone is its own)."""
    p90 = (statistics.quantiles(seconds, n=10, method="inclusive")[8] if len(seconds) > 1
           else seconds[0])
    return Latency(n, len(seconds), statistics.median(seconds) * 1000, p90 * 1000)


def tail(name: str, keys: int, seconds: Sequence[float]) -> Tail:
    """Median and p99, in milliseconds, of claim times measured with ``keys`` keys
    holding work (the p99: the 99th of :func:`statistics.quantiles`' percentiles,
    inclusive of the extremes; one sample alone is its own)."""
    p99 = (statistics.quantiles(seconds, n=100, method="inclusive")[98] if len(seconds) > 1
           else seconds[0])
    return Tail(name, keys, len(seconds), statistics.median(seconds) * 1000, p99 * 1000)


def growth(latencies: Sequence[Latency]) -> Optional[float]:
    """Median pop latency at the largest size over that at the smallest."""
    if len(latencies) < 2:
        return None
    ordered = sorted(latencies, key=operator.attrgetter("n"))
    return ratio(ordered[-1].median_ms, ordered[0].median_ms)


def plural(count: int, word: str) -> str:
    """``"1 client"``, ``"4 clients"``."""
    return f"{count} {word}{'' if count == 1 else 's'}"
