"""The benchmark's client processes, without a server: the client loop and its CPU
time, collecting the clients' reports, a client that cannot connect, and a whole client
run against a stand-in database."""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, Optional

import pytest

from fdbrecipes.bench import clients
from fdbrecipes.bench.clients import BenchError, Job
from fdbrecipes.bench.operations import Client
from fdbrecipes.bench.recipe import chunks
from fdbrecipes.bench.results import Report


def test_chunks_cover_the_range() -> None:
    assert list(chunks(0, 2500, 1000)) == [range(0, 1000), range(1000, 2000),
                                           range(2000, 2500)]
    assert list(chunks(5, 5, 10)) == []


class Counting(Client):
    """Moves 2 items per step, ``limit`` times, then nothing; counts its steps as
    retries (burning ``spin`` loop iterations of CPU per step)."""

    def __init__(self, limit: int, spin: int = 0) -> None:
        super().__init__(None)
        self.limit, self.spin, self.steps = limit, spin, 0

    def step(self) -> int:
        if self.steps == self.limit:
            return 0
        self.steps += 1
        sum(range(self.spin))
        return 2

    def retries(self) -> Optional[int]:
        return self.steps


def test_run_loop_drains() -> None:
    client = Counting(5)
    loop = clients.run_loop(client, None)
    assert loop.items == 10 and loop.seconds >= 0 and client.retries() == 5


def test_run_loop_runs_for_the_duration() -> None:
    loop = clients.run_loop(Counting(10**9), 0.05)
    assert loop.items > 0 and loop.seconds >= 0.05


def test_run_loop_measures_its_process_cpu_time() -> None:
    loop = clients.run_loop(Counting(200, spin=20_000), None)
    assert 0 < loop.cpu_seconds <= loop.seconds * (os.cpu_count() or 1) + 0.05


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
    results = reports_queue(*(Report(i, 10, 1.0, 0, 0.1) for i in range(3)))
    reports = clients.collect(results, processes(None, None, None))
    assert [r.client for r in reports] == [0, 1, 2]


def test_collect_raises_a_client_error() -> None:
    results = reports_queue(Report(0, 10, 1.0, 0),
                            Report(1, 0, 0.0, None, error="client 1: FDBError: boom"))
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
    assert report.cpu_seconds == 0.0 and report.server_cpu is None
    assert barrier.broken


class FakeDatabase:
    """Answers the warm-up read; nothing else is asked of it by a stand-in client."""

    def get(self, _key: bytes) -> None:
        return None


def counting_factory(_db: Any, _subspace: Any, _index: int, batch: int) -> Client:
    """A stand-in operation: ``batch`` steps of 2 items, burning some CPU."""
    return Counting(batch, spin=20_000)


@pytest.mark.parametrize("pids", [(), (os.getpid(),)])
def test_a_client_reports_its_cpu_and_the_servers(pids: Any) -> None:
    def connect(_cluster_file: str) -> Any:
        return FakeDatabase()

    results = reports_queue()
    job = Job("count", 50, "/nonexistent", ("p",), None, pids)
    clients.client_main(job, 0, threading.Barrier(1), results, connect=connect,
                        factories={"count": counting_factory})
    report = results.get_nowait()
    assert report.error is None
    assert (report.items, report.retries) == (100, 50)
    assert report.cpu_seconds > 0
    if pids:  # this process stands in for the server: its CPU time is read
        assert report.server_cpu is not None
        before, after = report.server_cpu
        assert 0 <= before <= after
    else:
        assert report.server_cpu is None
