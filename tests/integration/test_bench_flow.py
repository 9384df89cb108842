"""The benchmark's ``flow`` rows do what their names say, on a real server: the limited
drain's jobs carry a defined global limit and are all claimed and acked, the unique
pushes hold their keys, the id pushes their ids, and the keyed claim latency runs on
a queue whose keys are limited (a second job of a key waits for the first)."""

from __future__ import annotations

from typing import Any

import pytest
from fdb.subspace_impl import Subspace

from fdbrecipes import Queue, concurrency
from fdbrecipes.bench.flow import (
    GLOBAL,
    fill_global,
    id_pushes,
    keyed_queue,
    limited_claims,
    limits,
    unique_pushes,
)
from fdbrecipes.bench.keyed import claim_latencies
from fdbrecipes.bench.settings import CLAIM_BATCH, FLOW_GLOBAL_LIMIT

pytestmark = pytest.mark.integration


def test_the_limited_drain_claims_every_job_under_its_global_limit(
        db: Any, fdb_subspace: Subspace) -> None:
    fill_global(db, fdb_subspace, 250, 0)
    assert limits(fdb_subspace).get(db, GLOBAL) == concurrency(FLOW_GLOBAL_LIMIT)
    client = limited_claims(db, fdb_subspace, 0, CLAIM_BATCH)
    moved = [client.step() for _ in range(4)]
    assert moved == [100, 100, 50, 0]
    assert Queue(fdb_subspace["queue"]).size(db) == 0
    state = limits(fdb_subspace).state(db, GLOBAL)
    assert state is not None and state.running == 0  # every slot given back


def test_the_push_rows_push_with_fresh_unique_keys_and_ids(
        db: Any, fdb_subspace: Subspace) -> None:
    unique, ids = fdb_subspace["unique"], fdb_subspace["ids"]
    for index in (0, 1):
        for factory, space in ((unique_pushes, unique), (id_pushes, ids)):
            client = factory(db, space, index, 1)
            assert [client.step() for _ in range(3)] == [1, 1, 1]
    assert Queue(unique).size(db) == 6 and Queue(ids).size(db) == 6
    assert Queue(unique).unique_job(db, b"bench-1-2") is not None
    assert Queue(ids).push(db, "again", id=b"bench-1-2") == b"bench-1-2"
    assert Queue(ids).size(db) == 6  # the id was taken: the push stored nothing


def test_the_keyed_latency_claims_under_a_keyed_limit(db: Any, fdb_subspace: Subspace) -> None:
    plain, keyed = fdb_subspace["plain"], fdb_subspace["keyed"]
    tails = claim_latencies(db, plain, keyed, 20, 10)
    assert [(t.keys, t.samples) for t in tails] == [(20, 10), (20, 10)]
    assert all(0 < t.median_ms <= t.p99_ms for t in tails)
    queue = keyed_queue(keyed)
    assert queue.size(db) == 20  # every key still holds its one job
    queue.push(db, 7)  # a second job of key 7
    leases = queue.claim_many(db, 25, 30)
    assert sorted(lease.value for lease in leases) == list(range(20))  # the second waits
