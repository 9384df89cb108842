"""Where a queue's writes land on a 5-process ``double`` cluster (issue 31, part 3): an
unsharded Queue's pushes reach one storage team, a sharded one's several.

``fdbrecipes.testing.placement`` reads the shard map (which storage team holds each
piece of a key range) and the storage processes' ``input_bytes`` counters from status
JSON.  The cluster's data distributor is told to split shards small, so that what a
test pushes is enough to be split and moved (see :data:`PLACEMENT_KNOBS`):

* an unsharded Queue appends every push at the end of one key range: once its range
  is split over teams, its pushes still reach only the team holding the last piece;
* a Queue of :data:`SHARDS` shards appends at the end of :data:`SHARDS` ranges: once
  those are split and moved, its pushes reach the teams holding each range's last
  piece, at least two of them.

FoundationDB splits a shard by size (past its maximum, ``min_shard_bytes`` x 4 when
the size does not grow with the database) or by write rate; the pieces but one are
moved to the team with the least data.  ``fdbcli rangeconfig ... teamID`` (7.3.79)
only splits at range boundaries when data distribution starts and moved nothing
here, hence the knobs and the pre-fill."""

from __future__ import annotations

import time
import uuid
from typing import Any, Dict, List, Set, Tuple

import fdb
import pytest

from fdbrecipes import Queue
from fdbrecipes.testing import LocalCluster
from fdbrecipes.testing.placement import (
    landed,
    shards,
    status_json,
    storage_input_bytes,
    teams,
)
from tests.conftest import DOUBLE_KNOBS, start_double, warm_database

pytestmark = pytest.mark.integration

#: The double cluster's knobs, and a data distributor that splits any shard past 400
#: KB: ``min_shard_bytes`` 100,000 (FoundationDB's: 10,000,000) times
#: ``shard_bytes_ratio`` 4, with ``shard_bytes_per_sqrt_bytes`` 0 (FoundationDB's: 45)
#: so the bound does not grow with the database.
PLACEMENT_KNOBS = {**DOUBLE_KNOBS, "min_shard_bytes": "100000",
                   "shard_bytes_per_sqrt_bytes": "0"}
#: Shards of the sharded queue.
SHARDS = 4
#: Bytes of each value; items pre-filled into each queue (enough to be split: 2.4 MB,
#: 600 KB a shard of the sharded one); items pushed while the storage processes' input
#: is measured (100 KB; should they make the data distributor split and move the piece
#: they land in, the measurement is made again: see :func:`measured_still`).
VALUE_BYTES, PREFILL, MEASURED = 1_000, 2_400, 100
#: Seconds the data distributor has to split and move the pre-filled ranges, and the
#: status counters to show the measured pushes (gathered on request, a little late).
MOVE_DEADLINE, COUNTERS_DEADLINE = 90.0, 30.0
#: Measurements made at most until one sees the shard map unchanged, and the seconds
#: each waits at most for the data distributor to stop moving first (each its own
#: wait: one long move must not leave the tries after it to measure while it goes on).
MEASURE_TRIES, SETTLE_DEADLINE = 6, 45.0


@pytest.fixture(scope="module")
def placement_cluster(fdb_cluster_factory: Any) -> Any:
    """A 5-process ``double`` LocalCluster (three storage processes) whose data
    distributor splits shards past 400 KB (:data:`PLACEMENT_KNOBS`)."""
    return start_double(fdb_cluster_factory, PLACEMENT_KNOBS)


@pytest.fixture(scope="module")
def placement_db(placement_cluster: LocalCluster) -> Any:
    return warm_database(placement_cluster)


def test_every_shard_of_the_key_space_has_a_team_of_two(placement_cluster: LocalCluster,
                                                         placement_db: Any) -> None:
    found = shards(placement_db, b"", b"\xff")
    addresses = {p.address for p in placement_cluster.processes}
    assert found[0].begin == b"" and found[-1].end == b"\xff"
    for before, after in zip(found, found[1:]):
        assert before.end == after.begin
    for shard in found:
        assert len(shard.team) == 2 and set(shard.team) <= addresses, shard
    with pytest.raises(ValueError, match="begin must be before end"):
        shards(placement_db, b"b", b"a")


def item_ranges(space: Any, count: int) -> List[Tuple[bytes, bytes]]:
    """The item ranges of a queue of ``count`` shards at ``space`` (the documented
    layout: ``S/"i"``, then ``S/"l"/(k,)/"i"``)."""
    subspaces = [space["i"]] + [space["l"][k]["i"] for k in range(1, count)]
    return [(bytes(s.range().start), bytes(s.range().stop)) for s in subspaces]


def tails(db: Any, ranges: List[Tuple[bytes, bytes]]) -> List[Tuple[str, ...]]:
    """The team holding the last piece of each range: where its appends land."""
    return [shards(db, begin, end)[-1].team for begin, end in ranges]


def moving(db: Any) -> int:
    """Bytes the data distributor is moving or about to move (status JSON): while
    a shard moves, its writes reach the servers it leaves and those it goes to."""
    data = status_json(db).get("cluster", {}).get("data", {}).get("moving_data", {})
    return int(data.get("in_flight_bytes", 0)) + int(data.get("in_queue_bytes", 0))


def push(db: Any, q: Queue[bytes], items: int) -> None:
    """``items`` values of :data:`VALUE_BYTES`, ten to a transaction (each of a sharded
    queue's transactions lands in a shard drawn at random)."""
    for start in range(0, items, 10):
        q.push_many(db, [bytes([i % 256]) * VALUE_BYTES for i in range(start, start + 10)])


def measured(db: Any, q: Queue[bytes], expect: Set[str]) -> Dict[str, int]:
    """Push :data:`MEASURED` items into ``q``; the bytes each storage process received
    meanwhile, once every process of ``expect`` shows at least half of them."""
    before = storage_input_bytes(db)
    push(db, q, MEASURED)
    payload = MEASURED * VALUE_BYTES
    got: Dict[str, int] = {}
    deadline = time.monotonic() + COUNTERS_DEADLINE
    while time.monotonic() < deadline:
        got = landed(before, storage_input_bytes(db))
        if all(got.get(a, 0) >= payload / 2 for a in expect):
            break
        time.sleep(0.5)  # status counters are read on request: poll, with a deadline
    return got


def shard_map(db: Any, ranges: List[Tuple[bytes, bytes]]) -> List[Any]:
    """The pieces of ``ranges`` and their teams, as the shard map has them now."""
    return [shards(db, begin, end) for begin, end in ranges]


def settled(db: Any, deadline: float) -> None:
    """Wait until the data distributor moves nothing (or ``deadline`` passes)."""
    while moving(db) and time.monotonic() < deadline:
        time.sleep(1)  # the data distributor moves shards on its own: poll, with a deadline


def measured_still(db: Any, q: Queue[bytes], ranges: List[Tuple[bytes, bytes]],
                   expect: Any) -> Tuple[Dict[str, int], List[Tuple[str, ...]]]:
    """:func:`measured` while the shard map of ``ranges`` stays as it was: the pushes
    themselves can make the data distributor split the piece they land in and move a
    part (its writes then reach the teams it leaves and the one it goes to, and the
    move's copy counts as input too), so a measurement during which the map changed
    or data moved is made again once nothing moves, up to :data:`MEASURE_TRIES`
    times.  ``expect(tails)``: the processes that must show the pushes.  The input
    bytes and the tails' teams of the measurement kept."""
    for attempt in range(MEASURE_TRIES):
        settled(db, time.monotonic() + SETTLE_DEADLINE)
        before = shard_map(db, ranges)
        ends = [pieces[-1].team for pieces in before]
        got = measured(db, q, expect(ends))
        if shard_map(db, ranges) == before and not moving(db):
            return got, ends
        print(f"placement: measurement {attempt + 1} saw data move; again", flush=True)
    raise AssertionError(f"the data distributor moved data during each of {MEASURE_TRIES} "
                         f"measurements")


def team_of(ends: List[Tuple[str, ...]]) -> Set[str]:
    """The processes of the (one) team holding the tails ``ends``."""
    return set(ends[0])


def teams_of(ends: List[Tuple[str, ...]]) -> Set[str]:
    """Every process of a team holding one of the tails ``ends``."""
    return {address for tail in ends for address in tail}


def test_an_unsharded_queue_lands_on_one_team_a_sharded_one_on_several(
        placement_db: Any) -> None:
    """Both queues pre-filled (2.4 MB each), their ranges split and moved by the data
    distributor (until nothing moves), then 100 KB pushed into each: the unsharded
    queue's reach the two storage processes of one team (every other gets less than a
    tenth of what they get); the sharded queue's reach all three (at least two teams:
    each process of each team holding a shard's last piece gets its share)."""
    root = fdb.Subspace(("fdbrecipes-test", "placement", uuid.uuid4().hex))
    plain: Queue[bytes] = Queue(root["plain"])
    sharded: Queue[bytes] = Queue(root["sharded"], shards=SHARDS)
    started = time.monotonic()
    push(placement_db, plain, PREFILL)
    push(placement_db, sharded, PREFILL)
    plain_ranges = item_ranges(root["plain"], 1)
    sharded_ranges = item_ranges(root["sharded"], SHARDS)
    deadline = time.monotonic() + MOVE_DEADLINE
    while True:
        split = len(shards(placement_db, *plain_ranges[0])) > 1
        spread = set(tails(placement_db, sharded_ranges))
        if (split and len(spread) > 1 and not moving(placement_db)) or \
                time.monotonic() > deadline:
            break
        time.sleep(1)  # the data distributor moves shards on its own: poll, with a deadline
    placed = time.monotonic() - started
    plain_pieces = shards(placement_db, *plain_ranges[0])
    print(f"placement: pre-filled and split in {placed:.1f} s; unsharded range: "
          f"{len(plain_pieces)} piece(s) on teams {sorted(teams(plain_pieces))}; sharded "
          f"tails: {tails(placement_db, sharded_ranges)}", flush=True)
    assert split and len(spread) > 1, "the data distributor did not split and move in time"

    got, [team] = measured_still(placement_db, plain, plain_ranges, team_of)
    payload = MEASURED * VALUE_BYTES
    print(f"placement: unsharded, {payload:,} bytes pushed; input bytes by storage "
          f"process: {dict(sorted(got.items()))}; last piece's team {sorted(team)}",
          flush=True)
    least = min(got.get(a, 0) for a in team)  # input bytes count each write about 3x
    assert least >= payload, got
    assert all(n < least / 10 for a, n in got.items() if a not in team), got

    got, ends = measured_still(placement_db, sharded, sharded_ranges, teams_of)
    share: Dict[str, float] = {}
    for tail in ends:
        for address in tail:
            share[address] = share.get(address, 0.0) + 1 / SHARDS
    print(f"placement: sharded ({SHARDS} shards), {payload:,} bytes pushed; input bytes by "
          f"storage process: {dict(sorted(got.items()))}; the shards' last pieces' "
          f"teams {ends}", flush=True)
    assert len(set(ends)) >= 2 and len(share) == 3
    reached = [a for a in share if got.get(a, 0) >= payload * share[a] / 2]
    assert len(reached) == 3, (got, share)  # every process of at least two teams
    r = root.range()
    placement_db.clear_range(r.start, r.stop)
