"""``codec=`` on every structure, on a real server: values pushed through it come back
decoded from every call that returns values (pops, peeks, listings, leases, dead
letters, job results kept by a worker), sync and async, in a Queue, PriorityQueue,
FairQueue and WeightTree; an encrypting codec leaves no plaintext in the subspace, and
a value it cannot open is an Undecodable (a worker makes its job a dead letter naming
the key id); without a codec nothing changes."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from fdbrecipes import (
    FairQueue,
    PriorityQueue,
    Queue,
    Undecodable,
    WeightTree,
    Worker,
    aio,
)
from fdbrecipes.tasks import JSON, Encrypted, MsgPack
from fdbrecipes.web.show import shown
from tests.helpers import dump

pytestmark = pytest.mark.integration


def test_a_queue_with_a_codec_returns_decoded_values_everywhere(fdb_database: Any,
                                                               fdb_subspace: Any) -> None:
    db = fdb_database
    q = Queue(fdb_subspace, codec=JSON(), history=3600, max_deliveries=2)
    q.push(db, {"order": 1, "items": ["a", "b"]})
    q.push_many(db, [{"order": 2}, {"order": 3}])
    q.push(db, {"order": 4}, id=b"four", delay=3600)
    assert q.peek(db) == {"order": 1, "items": ["a", "b"]}
    assert q.items(db) == [{"order": 1, "items": ["a", "b"]}, {"order": 2}, {"order": 3}]
    assert [row.value for row in q.pending(db)] == q.items(db)
    assert [row.value for row in q.delayed(db)] == [{"order": 4}]
    assert q.remove(db, id=b"four") == {"order": 4}
    assert q.pop(db) == {"order": 1, "items": ["a", "b"]}
    lease = q.claim(db, 30)
    assert lease is not None and lease.value == {"order": 2}
    assert [info.value for info in q.leases(db)] == [{"order": 2}]
    assert q.extend(db, lease, 30).value == {"order": 2}
    q.bury(db, lease, "no stock")
    assert [(d.value, d.reason) for d in q.dead(db)] == [({"order": 2}, "no stock")]
    assert q.lookup(db, q.dead(db)[0].token).value == {"order": 2}

    def handle(job: Any) -> Any:
        return {"total": job.value["order"] * 10}

    third = q.pending(db)[0].id
    Worker(db, q, handle).run(burst=True)
    assert q.result(db, third) == {"total": 30}
    assert q.job(db, third).result == {"total": 30}
    stored = dump(db, fdb_subspace)
    assert any(b'{"total":30}' in v for v in stored.values())  # JSON, as the codec wrote


def test_every_structure_and_its_async_twin_take_a_codec(fdb_database: Any,
                                                        fdb_subspace: Any) -> None:
    db = fdb_database
    pq = PriorityQueue(fdb_subspace["pq"], codec=MsgPack())
    pq.push_many(db, [([1, b"x"], 5), ({"k": None}, 1)])
    assert pq.pop_min(db) == {"k": None}
    assert pq.claim_max(db, 30).value == [1, b"x"]
    fair = FairQueue(fdb_subspace["fair"], codec=JSON())
    fair.push(db, {"report": "march"}, group="acme")
    assert fair.claim(db, 30).value == {"report": "march"}
    tree = WeightTree(fdb_subspace["tree"], codec=JSON())
    handle = tree.push(db, ["heavy"], weight=9)
    assert tree.get(db, handle) == (["heavy"], 9)
    assert [(v, w) for _, v, w in tree.items(db)] == [(["heavy"], 9)]
    assert tree.pop(db) == ["heavy"]
    twin = aio.AsyncQueue(fdb_subspace["q"], codec=JSON())
    same = Queue(fdb_subspace["q"], codec=JSON())

    async def main() -> Any:
        await twin.push(db, {"async": True})
        return await twin.pop(db)

    assert asyncio.run(main()) == {"async": True}
    same.push(db, {"sync": 1})
    assert asyncio.run(twin.peek(db)) == {"sync": 1}
    with pytest.raises(TypeError, match="value cannot be encoded by the codec"):
        same.push(db, {"an object": object()})
    with pytest.raises((TypeError, ValueError), match="items\\[1\\] value cannot be encoded"):
        pq.push_many(db, [(1, 1), (object(), 2)])
    with pytest.raises(TypeError, match="codec must have encode"):
        Queue(fdb_subspace, codec="json")  # type: ignore[arg-type]


def test_an_encrypting_codec_and_a_key_it_lacks(fdb_database: Any, fdb_subspace: Any) -> None:
    db = fdb_database
    old, new = os.urandom(32), os.urandom(32)
    writer = Queue(fdb_subspace, codec=Encrypted(JSON(), {"k1": old}, "k1"), history=3600,
                   max_deliveries=3)
    ids = [writer.push(db, {"card": f"4111-{i:04d}"}) for i in range(5)]
    stored = dump(db, fdb_subspace)
    assert not [kv for kv in stored.items() if b"4111" in kv[0] + kv[1]]
    rotated = Queue(fdb_subspace, codec=Encrypted(JSON(), {"k1": old, "k2": new}, "k2"),
                    history=3600, max_deliveries=3)
    assert rotated.peek(db) == {"card": "4111-0000"}
    rotated.push(db, {"card": "4111-new"})
    only_new = Queue(fdb_subspace, codec=Encrypted(JSON(), {"k2": new}, "k2"),
                     history=3600, max_deliveries=3)
    first = only_new.peek(db)
    assert isinstance(first, Undecodable) and "'k1'" in first.reason
    assert shown(first.data) == "<encrypted, key id 'k1'>"  # the dashboard, keyless
    seen = []
    Worker(db, only_new, lambda job: seen.append(job.value)).run(burst=True)
    assert seen == [{"card": "4111-new"}]
    dead = only_new.dead(db)
    assert len(dead) == 5 and all(isinstance(d.value, Undecodable) for d in dead)
    assert {d.reason for d in dead} == {
        "undecodable: CodecError: encrypted under key id 'k1', which this codec does not "
        "hold (it holds 'k2')"}
    assert only_new.job(db, ids[0]).state == "dead"
    assert [d.value for d in rotated.dead(db)] == [{"card": f"4111-{i:04d}"} for i in range(5)]
    assert rotated.requeue_dead(db) == 5
    Worker(db, rotated, lambda job: job.value["card"][-4:]).run(burst=True)
    assert [rotated.result(db, i) for i in ids] == [f"{i:04d}" for i in range(5)]
    stored = dump(db, fdb_subspace)
    assert not [kv for kv in stored.items() if b"4111" in kv[0] + kv[1]]
