"""The suite's order and groups, without a server: which measurements a run makes, with
how many clients, on how many pre-filled items, for each ``--only``."""

from __future__ import annotations

import argparse
from typing import Any, Dict, List, Tuple

import pytest

from fdbrecipes.bench import suite
from fdbrecipes.bench.clients import Job
from fdbrecipes.bench.results import Report
from fdbrecipes.bench.settings import add_arguments, settings_from_args

Measured = Tuple[str, int, int, Any]  # op, batch, clients, duration


class FakeDatabase:
    """Only clears the measurements' subspaces."""

    def __init__(self) -> None:
        self.cleared = 0

    def clear_range(self, _start: bytes, _stop: bytes) -> None:
        self.cleared += 1


class Recorder:
    """Stands in for the fills and the client processes; records what the suite asked."""

    def __init__(self) -> None:
        self.filled: Dict[Tuple[str, ...], Tuple[str, int, int]] = {}
        self.jobs: List[Measured] = []
        self.fills: List[Tuple[str, int]] = []

    def fill(self, op: str) -> Any:
        def fill(_db: Any, subspace: Any, items: int, seed: int) -> None:
            self.filled[subspace.key()] = (op, items, seed)
            self.fills.append((op, items))

        return fill

    def run_clients(self, _context: Any, job: Job, clients: int) -> List[Report]:
        self.jobs.append((job.op, job.batch, clients, job.duration))
        assert job.server_pids == (4242,)
        total = 100 * clients
        for key, (op, items, _seed) in self.filled.items():
            if key.startswith(suite.Subspace(job.prefix).key()):
                assert op == job.op
                total = items
        share, rest = divmod(total, clients)
        return [Report(i, share + (rest if i == 0 else 0), 1.0, 0, 0.01, (1.0, 1.5))
                for i in range(clients)]


def fake_database(_cluster_file: str) -> FakeDatabase:
    return FakeDatabase()


def fake_pids(_cluster_file: str) -> Tuple[int, ...]:
    return (4242,)


def fake_machine(_db: Any, cluster: str) -> Dict[str, Any]:
    return {"cluster": cluster}


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def runtime(rec: Recorder, **changes: Any) -> suite.Runtime:
    """The suite's documented testing hook: every contact with the world replaced."""
    parts: Dict[str, Any] = dict(
        open_database=fake_database, server_pids=fake_pids, machine_info=fake_machine,
        format_machine=str, run_clients=rec.run_clients,
        fills={op: rec.fill(op) for op in suite.FILLS}, latency=False)
    parts.update(changes)
    return suite.Runtime(**parts)


def run(rec: Recorder, *argv: str, **changes: Any) -> Any:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = settings_from_args(parser.parse_args(["--duration", "2", *argv]))
    return suite.Suite("/fake/fdb.cluster", settings, runtime(rec, **changes)).run("fake")


#: The hot group's kinds at 16 clients, in the order of its first round (drains: None).
HOT = [("probe-pop", None), ("spread-pop", None), ("write", 2 / 3), ("tree-pop", None)]

LIMITS: List[Measured] = [("write", 1, c, 2.0) for c in (1, 2, 4, 8, 16)] + [
    ("write", 100, 1, 2.0), ("write", 100, 16, 2.0)]


#: The threads rows, in their first round's order.
THREADED = ("thread-push-unshared", "thread-push-alone", "thread-push", "thread-write")

def test_a_full_run_measures_every_group_in_order(recorder: Recorder) -> None:
    results = run(recorder)
    pops = [(op, 1, c, None) for c in (1, 2, 4, 8, 16)
            for op in ("recipe-pop", "pop", "spread-pop", "hc-pop")]
    pushes = [("push", 1), ("push-tr", 1), ("push", 100), ("recipe-push", 1)]
    rotated = [(op, batch, c, 0.5) for c in (1, 16) for turn in range(4)
               for op, batch in pushes[turn:] + pushes[:turn]]
    assert recorder.jobs == LIMITS + rotated + pops + [
        ("claim-ack", 100, 1, None), ("claim-ack", 100, 16, None),
        ("tree-pop", 1, 1, None), ("tree-pop", 1, 4, None), ("tree-pop", 1, 16, None),
    ] + [(op, 1, c, None) for c in (1, 4, 16) for op in ("pq-pop-min", "pq-pop-max")] + [
        (op, 1, 16, duration) for turn in range(3)
        for op, duration in (HOT[turn:] + HOT[:turn])
    ] + [
        (op, tasks, 1, duration) for tasks in (16, 64)
        for op, duration in (("aio-push", 2.0), ("aio-spread-pop", None),
                             ("aio-claim-ack", None))
    ] + [(op, 16, 1, 2.0 / 4) for turn in range(4)
         for op in THREADED[turn:] + THREADED[:turn]] + [
        ("blocking-read", 1, 1, 2.0), ("awaited-read", 1, 1, 2.0)] + [
        (op, 8, c, None) for c in (1, 16)
        for op in ("worker", "history-worker", "spread-claim-ack")
    ] + [("idle-worker", 8, 1, 3.0), ("idle-started", 8, 1, 3.0),
         ("idle-schedules", 8, 1, 3.0)] + [
        (op, 1, c, None) for c in (1, 16) for op in ("claim-one", "fair-claim-one")
    ] + [("push", 1, 16, 1.0), ("sharded-push", 1, 16, 1.0),
         ("sharded-push", 1, 16, 1.0), ("push", 1, 16, 1.0)] + [
        (op, batch, 16, None) for plain, batch in (("claim-ack", 100), ("claim-one", 1))
        for op in (plain, "sharded-" + plain, "sharded-" + plain, plain)
    ] + [(op, 1, 4, 1.0) for op in ("task-raw-push", "task-push", "task-push",
                                    "task-raw-push")] + [
        (op, 8, 4, None) for op in ("history-worker", "task-worker", "task-worker",
                                    "history-worker")
    ] + [(op, 1, 1, 2.0) for op in ("codec-json", "codec-msgpack", "codec-encrypted")] + [
        (op, 100, 16, None) for op in ("claim-ack", "limited-claim-ack", "limited-claim-ack",
                                       "claim-ack")
    ] + [(op, 1, 4, 1.0) for op in ("id-push", "unique-push", "unique-push", "id-push")] + [
        (op, 8, 4, None) for op in ("worker", "workflow-fan-in", "workflow-fan-in", "worker")
    ] + [(op, 10_000, 1, 1.0) for op in ("push", "workflow-create", "workflow-create",
                                         "push")]
    claims = [items for op, items in recorder.fills if op == "claim-ack"]
    assert claims == [2000, 16_000, 16_000, 16_000, 16_000, 16_000]  # claim, shards, flow
    assert [items for op, items in recorder.fills if op == "limited-claim-ack"] == [16_000] * 2
    assert [items for op, items in recorder.fills if op == "sharded-claim-ack"] == [16_000] * 2
    big = ("claim-ack", "aio-claim-ack", "worker", "history-worker", "spread-claim-ack",
           "sharded-claim-ack", "task-worker", "limited-claim-ack", "workflow-fan-in")
    assert [items for op, items in recorder.fills if op == "aio-claim-ack"] == [16_000] * 2
    assert [items for op, items in recorder.fills if op == "worker"] == [
        2000, 16_000, 1000, 1000]  # the worker group's, then the workflow group's jobs
    assert [items for op, items in recorder.fills if op == "workflow-fan-in"] == [1001] * 2
    assert [items for op, items in recorder.fills if op == "history-worker"] == [
        2000, 16_000, 4000, 4000]  # the worker group's, then the tasks group's
    assert [items for op, items in recorder.fills if op == "task-worker"] == [4000, 4000]
    hot = [items for op, items in recorder.fills if op in ("probe-pop", "tree-pop")]
    assert hot == [2000] * 3 + [4000] * 6  # the tree group's drains, then the hot rounds
    assert [items for op, items in recorder.fills if op == "spread-pop"] == [2000] * 5 + [4000] * 3
    assert {items for op, items in recorder.fills
            if op not in big + ("probe-pop", "spread-pop", "tree-pop")} == {2000}
    # push rounds: one row; the hot group's rounds likewise; a shard pair's two rounds
    # of each: one row each; the threads rows' rounds and the tasks group's push
    # rounds and drains, one row each; the flow group's drains and push rounds likewise,
    # and the workflow group's
    assert len(results.rows) == (len(recorder.jobs) - 3 * 2 * 4 - 2 * 4 - 6 - 4 * 3 - 4 - 4
                                 - 2 - 2)
    fan_in = next(r for r in results.rows if r.name.startswith("workflow: fan-in"))
    assert fan_in.clients == 4 and fan_in.count == 2 * 1001
    assert fan_in.ratio_recipe is not None  # against the same run's independent jobs
    create = next(r for r in results.rows if r.name.startswith("workflow: Workflows.create"))
    assert create.clients == 1 and create.ratio_recipe == pytest.approx(1.0)
    limited = next(r for r in results.rows if r.name.startswith("flow: claim_many(100)+ack, c"))
    assert (limited.count, limited.seconds) == (2 * 16_000, 2.0)
    assert limited.ratio_recipe == pytest.approx(1.0)  # against the same run's drains
    unique = next(r for r in results.rows if r.name == "flow: Queue.push(db, unique=)")
    assert unique.clients == 4 and unique.ratio_recipe == pytest.approx(1.0)
    spread = next(r for r in results.rows if r.name == "hot: Queue.pop spread=16")
    assert (spread.count, spread.ratio_recipe) == (3 * 4000, pytest.approx(1.0))
    tree = next(r for r in results.rows if r.name == "hot: WeightTree.pop")
    limit = next(r for r in results.rows if r.name == "hot: limit 1-key write tx")
    assert (limit.count, limit.seconds) == (3 * 1600, 3.0)
    assert tree.ratio_recipe == pytest.approx(4000 / 1600)  # against the rounds' limit
    push = next(r for r in results.rows if r.name == "Queue.push(db)" and r.clients == 16)
    assert (push.count, push.seconds, push.retries) == (4 * 1600, 4.0, 0)
    assert push.cpu_seconds == pytest.approx(4 * 0.16)
    assert push.server_cpu_seconds == pytest.approx(4 * 0.5)
    hc = next(r for r in results.rows if r.name == "Queue.pop high_contention"
              and r.clients == 16)
    assert hc.count == 2000 and hc.cpu_seconds == pytest.approx(0.16)
    assert hc.server_cpu_seconds == pytest.approx(0.5)
    assert hc.ratio_recipe == pytest.approx(1.0) and hc.ratio_limit is not None
    assert results.machine["server_processes_sampled"] == 1


def test_only_one_group_keeps_the_limit(recorder: Recorder) -> None:
    run(recorder, "--only", "pops")
    assert recorder.jobs[:len(LIMITS)] == LIMITS
    assert {op for op, *_ in recorder.jobs[len(LIMITS):]} == {
        "recipe-pop", "pop", "spread-pop", "hc-pop"}


@pytest.mark.parametrize("only, counts", [("pq", (1, 4, 16)), ("claim", (1, 16)),
                                          ("claim,pq", (1, 4, 16)), ("push,tree", ())])
def test_without_pops_the_recipe_pop_is_measured_where_compared(
        recorder: Recorder, only: str, counts: Tuple[int, ...]) -> None:
    results = run(recorder, "--only", only)
    recipe = [c for op, _, c, _ in recorder.jobs if op == "recipe-pop"]
    assert tuple(recipe) == counts
    compared = [r for r in results.rows if r.recipe == "recipe pop" and r.name != "recipe pop"]
    assert all(r.ratio_recipe is not None for r in compared)


def short(_context: Any, job: Job, clients: int) -> List[Report]:
    """Client processes that each took only 10 items."""
    return [Report(i, 10, 1.0, 0) for i in range(clients)]


def test_a_drain_that_took_other_than_it_filled_warns(
        recorder: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    run(recorder, "--only", "limit,tree", "--clients", "1", run_clients=short)
    assert "warning: WeightTree.pop with 1 client took 10 of 2000 items" in \
        capsys.readouterr().err
