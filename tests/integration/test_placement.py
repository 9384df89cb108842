"""Where a queue's writes land on a 5-process ``double`` cluster (issue 31, part 3:
the measuring tool, and what it says of an unsharded Queue today).

``fdbrecipes.testing.placement`` reads the shard map (which storage team holds each
piece of a key range) and the storage processes' ``input_bytes`` counters from status
JSON.  An unsharded Queue appends every push at the end of one key range: today all
its items sit in one shard, on one team of two storage processes, and those two
receive its bytes."""

from __future__ import annotations

import time
import uuid
from typing import Any, Dict

import fdb
import pytest

from fdbrecipes import Queue
from fdbrecipes.testing import LocalCluster
from fdbrecipes.testing.placement import (
    landed,
    shards,
    shards_of,
    storage_input_bytes,
    teams,
)

pytestmark = pytest.mark.integration

#: Items pushed and the bytes of each value.
ITEMS, VALUE_BYTES = 2_000, 1_000
#: Seconds the status counters have to show the pushes (status is gathered from the
#: storage processes on request, and may lag them a little).
COUNTERS_DEADLINE = 30.0


def test_every_shard_of_the_key_space_has_a_team_of_two(double_cluster: LocalCluster,
                                                         double_db: Any) -> None:
    found = shards(double_db, b"", b"\xff")
    addresses = {p.address for p in double_cluster.processes}
    assert found[0].begin == b"" and found[-1].end == b"\xff"
    for before, after in zip(found, found[1:]):
        assert before.end == after.begin
    for shard in found:
        assert len(shard.team) == 2 and set(shard.team) <= addresses, shard
    with pytest.raises(ValueError, match="begin must be before end"):
        shards(double_db, b"b", b"a")


def test_an_unsharded_queue_lands_on_one_team(double_db: Any) -> None:
    space = fdb.Subspace(("fdbrecipes-test", "placement", uuid.uuid4().hex))
    q: Queue[bytes] = Queue(space)
    before = storage_input_bytes(double_db)
    payload = ITEMS * VALUE_BYTES
    for start in range(0, ITEMS, 100):
        q.push_many(double_db, [bytes([i % 256]) * VALUE_BYTES
                                 for i in range(start, start + 100)])
    held = shards_of(double_db, space)
    print(f"placement: queue {space.key()!r}: {len(held)} shard(s), teams {teams(held)}")
    assert len(teams(held)) == 1, held
    team = set(next(iter(teams(held))))
    got: Dict[str, int] = {}
    deadline = time.monotonic() + COUNTERS_DEADLINE
    while time.monotonic() < deadline:
        got = landed(before, storage_input_bytes(double_db))
        if all(got.get(a, 0) >= payload for a in team):
            break
        time.sleep(0.5)  # status counters are read on request: poll, with a deadline
    print(f"placement: {payload:,} bytes of values pushed; input bytes by storage process: "
          f"{dict(sorted(got.items()))}; team {sorted(team)}", flush=True)
    assert all(got.get(a, 0) >= payload for a in team), got
    others = {a: n for a, n in got.items() if a not in team}
    assert all(n < payload / 10 for n in others.values()), others
    r = space.range()
    double_db.clear_range(r.start, r.stop)
