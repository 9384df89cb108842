"""What each benchmark client does, without a server: every kind has an operation (and
a fill when it drains), and each operation, run against stand-ins, calls what it
should and counts what it moved and retried."""

from __future__ import annotations

import functools
import itertools
from typing import Any, List, Optional

import pytest
from fdb.subspace_impl import Subspace

from fdbrecipes import PriorityQueue, Queue, RetryStats, WeightTree
from fdbrecipes.bench import operations, settings
from fdbrecipes.bench.fill import FILLS
from fdbrecipes.bench.flow import FLOW_FACTORIES, FLOW_FILLS
from fdbrecipes.bench.operations import (
    FACTORIES,
    ClaimAcker,
    Popper,
    Pusher,
    RecipePusher,
    TxPusher,
    Writer,
)
from fdbrecipes.bench.settings import (
    AIO_KINDS,
    CLAIM_ACK,
    KINDS,
    PQ_POP_MAX,
    PQ_POP_MIN,
    PUSH_TR,
    SHARD_KINDS,
    SPREAD,
    SPREAD_POP,
    TREE_POP,
    Kind,
)
from fdbrecipes.bench.tasks import TASK_FACTORIES, TASK_FILLS
from fdbrecipes.bench.threads import THREAD_FACTORIES, Threads
from fdbrecipes.bench.workflows import WORKFLOW_FACTORIES, WORKFLOW_FILLS

SUBSPACE = Subspace(("bench-test",))


def test_every_kind_has_an_operation_and_every_drain_a_fill() -> None:
    kinds = [k for k in vars(settings).values() if isinstance(k, Kind)]
    assert len(kinds) == 44 and set(kinds) | set(AIO_KINDS) | set(SHARD_KINDS) | set(
        settings.CODEC_KINDS) == set(KINDS)
    assert len(SHARD_KINDS) == 6 and {k.op for k in SHARD_KINDS[1::2]} == {
        "sharded-" + k.op for k in SHARD_KINDS[::2]}
    assert len(AIO_KINDS) == 6 and {k.tasks for k in AIO_KINDS} == {16, 64}
    assert len({k.label for k in KINDS}) == len(KINDS)
    assert {k.op for k in KINDS} == set(FACTORIES) | set(TASK_FACTORIES) | set(
        THREAD_FACTORIES) | set(FLOW_FACTORIES) | set(WORKFLOW_FACTORIES)
    assert {k.op for k in KINDS if k.drains} == set(FILLS) | set(TASK_FILLS) | set(
        FLOW_FILLS) | set(WORKFLOW_FILLS)
    for kind in (SPREAD_POP, CLAIM_ACK, TREE_POP, PQ_POP_MIN, PQ_POP_MAX):
        assert kind.drains
    assert not PUSH_TR.drains and PUSH_TR.recipe == "recipe push"


def test_the_threads_rows_are_timed_and_report_a_threads_error() -> None:
    def fails() -> int:
        raise ValueError("the step failed")

    with pytest.raises(TypeError, match="timed"):
        Threads(None, 2, fails).loop(None)
    with pytest.raises(ValueError, match="the step failed"):
        Threads(None, 2, fails).loop(0.5)
    counted = itertools.count()
    assert Threads(None, 4, functools.partial(next, counted)).loop(0.05) > 0


def test_every_factory_makes_a_client() -> None:
    for op, factory in FACTORIES.items():
        client = factory(object(), SUBSPACE, 0, 1)
        assert isinstance(client, operations.Client), op
        expected = None if op in ("recipe-push", "blocking-read") else 0
        assert client.retries() == expected, op


def test_the_new_pops_pop_what_they_should() -> None:
    db = object()
    spread = operations.spread_pops(db, SUBSPACE, 0, 1)
    assert isinstance(spread, Popper) and isinstance(spread.pop, functools.partial)
    assert spread.pop.keywords == {"spread": SPREAD}
    assert isinstance(spread.pop.func.__self__, Queue)
    tree = operations.tree_pops(db, SUBSPACE, 0, 1)
    assert isinstance(tree, Popper) and isinstance(tree.pop.__self__, WeightTree)
    for factory, name in ((operations.pq_min_pops, "pop_min"),
                          (operations.pq_max_pops, "pop_max")):
        client = factory(db, SUBSPACE, 0, 1)
        assert isinstance(client, Popper)
        assert isinstance(client.pop.__self__, PriorityQueue)
        assert client.pop.__name__ == name
    assert isinstance(operations.claims(db, SUBSPACE, 0, 100), ClaimAcker)
    assert isinstance(operations.tx_pushes(db, SUBSPACE, 0, 1), TxPusher)


def test_popper_counts_items_until_empty() -> None:
    values: List[Optional[int]] = [1, 2, None]
    stats = RetryStats()

    def pop(_db: Any) -> Optional[int]:
        stats.retries += 1
        return values.pop(0)

    client = Popper(object(), pop, stats)
    assert [client.step(), client.step(), client.step()] == [1, 1, 0]
    assert client.retries() == 3


class FakeQueue:
    """Stands in for a Queue: records pushes, hands out leases from ``items``."""

    def __init__(self, items: int = 0) -> None:
        self.items = items
        self.pushed: List[Any] = []
        self.acked: List[Any] = []
        self.retry_stats = RetryStats()

    def push(self, tr: Any, value: Any) -> None:
        self.pushed.append((tr, value))

    def push_many(self, tr: Any, values: List[Any]) -> None:
        self.pushed.append((tr, list(values)))

    def claim_many(self, _tr: Any, n: int, lease_seconds: float, spread: int = 1) -> List[Any]:
        assert lease_seconds == settings.LEASE_SECONDS and spread == 1
        taken = min(n, self.items)
        self.items -= taken
        self.retry_stats.retries += 1
        return [object() for _ in range(taken)]

    def ack_many(self, _tr: Any, leases: List[Any]) -> List[bool]:
        self.acked.append(len(leases))
        return [True] * len(leases)


def test_claim_acker_claims_100_and_acks_them_together() -> None:
    queue = FakeQueue(items=250)
    client = ClaimAcker(object(), queue)  # type: ignore[arg-type]
    assert [client.step() for _ in range(4)] == [100, 100, 50, 0]
    assert queue.acked == [100, 100, 50]  # one ack_many per non-empty claim
    assert client.retries() == 4


def test_pusher_pushes_one_or_many() -> None:
    db, queue = object(), FakeQueue()
    assert Pusher(db, queue, 1).step() == 1  # type: ignore[arg-type]
    assert Pusher(db, queue, 3).step() == 3  # type: ignore[arg-type]
    assert queue.pushed == [(db, b"x"), (db, [b"x"] * 3)]


class FakeFuture:
    def wait(self) -> None:
        return None


class FakeTransaction(dict):  # type: ignore[type-arg]
    """Stores what is set and commits (a retry needs fdb.FDBError, hence libfdb_c)."""

    def __init__(self) -> None:
        super().__init__()
        self.commits = 0

    def commit(self) -> FakeFuture:
        self.commits += 1
        return FakeFuture()


class FakeDatabase:
    def __init__(self) -> None:
        self.tr = FakeTransaction()

    def create_transaction(self) -> FakeTransaction:
        return self.tr


def test_tx_pusher_pushes_in_its_own_transaction() -> None:
    db, queue = FakeDatabase(), FakeQueue()
    client = TxPusher(db, queue)  # type: ignore[arg-type]
    assert client.step() == 1 and client.step() == 1
    assert queue.pushed == [(db.tr, b"x")] * 2 and db.tr.commits == 2
    assert client.retries() == 0


def test_writer_writes_batch_fresh_keys() -> None:
    db = FakeDatabase()
    client = Writer(db, SUBSPACE, 7, 3)
    assert client.step() == 3 and client.step() == 3
    assert sorted(SUBSPACE.unpack(k) for k in db.tr) == [
        (7, s, j) for s in range(2) for j in range(3)]
    assert client.retries() == 0


def test_recipe_pusher_cannot_count_retries() -> None:
    assert RecipePusher(object(), operations.RecipeQueue(SUBSPACE)).retries() is None
