"""The benchmark's client side, without a server: the client loop, collecting the
clients' reports, a client that cannot connect, and an operation for every kind."""

from __future__ import annotations

import queue
import threading
from typing import Any, Optional

import pytest

from fdbrecipes.bench import clients, settings
from fdbrecipes.bench.clients import BenchError, Client, Job
from fdbrecipes.bench.results import Report
from fdbrecipes.bench.settings import Kind


def test_chunks_cover_the_range() -> None:
    assert list(clients.chunks(0, 2500, 1000)) == [range(0, 1000), range(1000, 2000),
                                                   range(2000, 2500)]
    assert list(clients.chunks(5, 5, 10)) == []


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
    count, seconds = clients.run_loop(client, None)
    assert count == 10 and seconds >= 0 and client.retries() == 5


def test_run_loop_runs_for_the_duration() -> None:
    count, seconds = clients.run_loop(counting_client(10**9), 0.05)
    assert count > 0 and seconds >= 0.05


class FakeProcess:
    """Stands in for a client process: only its exit code is read."""

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
    reports = clients.collect(results, processes(None, None, None))
    assert [r.client for r in reports] == [0, 1, 2]


def test_collect_raises_a_client_error() -> None:
    results = reports_queue(Report(0, 10, 1.0, 0),
                            Report(1, 0, 0.0, None, "client 1: FDBError: boom"))
    with pytest.raises(BenchError, match="boom"):
        clients.collect(results, processes(0, 0))


def test_collect_notices_a_dead_client() -> None:
    with pytest.raises(BenchError, match="exit code -9"):
        clients.collect(reports_queue(), processes(-9))


def test_a_failing_client_breaks_the_barrier() -> None:
    def refuse(_cluster_file: str) -> Any:
        raise RuntimeError("no cluster")

    barrier: Any = threading.Barrier(2)
    results = reports_queue()
    job = Job("write", 1, "/nonexistent", ("p",), 1.0)
    clients.client_main(job, 3, barrier, results, connect=refuse)
    report = results.get_nowait()
    assert report.client == 3 and report.error == "client 3: RuntimeError: no cluster"
    assert barrier.broken


def test_every_operation_has_a_client() -> None:
    kinds = [k for k in vars(settings).values() if isinstance(k, Kind)]
    assert len(kinds) == 8
    assert {k.op for k in kinds} == set(clients.FACTORIES)
