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
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Tuple, cast

import fdb
import pytest

from fdbrecipes import Queue
from fdbrecipes.testing import LocalCluster
from fdbrecipes.testing.placement import (
    StorageInput,
    landed,
    shards,
    status_json,
    storage_input,
    teams,
)
from tests.conftest import DOUBLE_KNOBS, start_double, warm_database
from tests.helpers import eventually

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
#: 600 KB a shard of the sharded one), ten to a transaction; items pushed while the
#: storage processes' input is measured (100 KB): into the sharded queue one to a
#: transaction (each lands in a shard drawn at random: with 100 of them, every shard
#: gets its share), into the unsharded one ten to a transaction (each transaction also
#: writes the structure's own keys once: its call's receipt, its counters, its wake
#: key, in pieces of their own that may be on another team; one to a transaction,
#: they gave a process outside the tail's team a quarter of what the team got, about
#: 1.3 KB of input a push, and failed the test about half its runs); should the
#: pushes make the data distributor split and move the piece they land in, the
#: measurement is made again: see :func:`measured_still`.
VALUE_BYTES, PREFILL, PREFILL_BATCH, MEASURED = 1_000, 2_400, 10, 100
#: Bounds on the waits for the data distributor and the status counters (a run under
#: load takes what it needs; each wait ends as soon as its condition holds, and fails
#: naming it when its bound passes): seconds to split and move the pre-filled ranges,
#: to stop moving before a measurement, and for the storage processes' counters (in
#: status JSON, reported every few seconds) to count what was pushed.
PLACE_DEADLINE, SETTLE_DEADLINE, COUNTERS_DEADLINE = 300.0, 60.0, 60.0
#: Tries at most until a measurement sees nothing move while it runs; items pushed
#: (ten to a transaction) into the measured queue when a try finds its tails not where
#: the test needs them within :data:`SETTLE_DEADLINE`: the data distributor may have
#: moved them all onto one team, and waiting brings them back no sooner than the next
#: split, which only more items make.
MEASURE_TRIES, REFILL = 6, 1_200
#: Seconds between two looks at status JSON or the shard map (each look asks the
#: cluster for a status document or a shard map: not every 50 ms).
POLL = 1.0


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


def still(db: Any) -> bool:
    """Whether the data distributor moves nothing."""
    return not moving(db)


def push(db: Any, q: Queue[bytes], items: int, batch: int) -> None:
    """``items`` values of :data:`VALUE_BYTES`, ``batch`` to a transaction."""
    for start in range(0, items, batch):
        q.push_many(db, [bytes([i % 256]) * VALUE_BYTES for i in range(start, start + batch)])


def read_version(db: Any) -> int:
    """A read version: every commit that ended before the call is at or below it.
    (The transaction is kept until the answer comes: one dropped at once cancels
    it, and the wait fails with ``transaction_cancelled``.)"""
    tr = db.create_transaction()
    while True:
        try:
            return int(tr.get_read_version().wait())
        except fdb.FDBError as e:
            tr.on_error(e).wait()


def counting(db: Any, version: int) -> Optional[StorageInput]:
    """The storage processes' input counters if they count everything committed at or
    before ``version`` (else None: their last report is older)."""
    found = storage_input(db)
    return found if found.version >= version else None


def counted(db: Any) -> StorageInput:
    """The input counters once they count everything committed before the call (the
    storage processes report them every few seconds: polled, with a deadline)."""
    version = read_version(db)
    return cast(StorageInput, eventually(partial(counting, db, version), COUNTERS_DEADLINE,
                                         f"storage counters at version {version:,}", POLL))


def measured(db: Any, q: Queue[bytes], batch: int) -> Dict[str, int]:
    """Push :data:`MEASURED` items into ``q``, ``batch`` to a transaction; the bytes each
    storage process received from a reading of the counters that counts everything
    before the pushes to one that counts them all (nothing half-counted)."""
    before = counted(db)
    push(db, q, MEASURED, batch)
    return landed(before.bytes, counted(db).bytes)


def shard_map(db: Any, ranges: List[Tuple[bytes, bytes]]) -> List[Any]:
    """The pieces of ``ranges`` and their teams, as the shard map has them now."""
    return [shards(db, begin, end) for begin, end in ranges]


def whole_map(db: Any) -> List[Any]:
    """Every piece of the keys outside the system's and its team: a move of any of
    them changes it (and sends its bytes to the servers it goes to)."""
    return shards(db, b"", b"\xff")


def first_within(check: Callable[[], Any], timeout: float) -> Any:
    """``check()``'s first truthy answer within ``timeout`` seconds, asked every
    :data:`POLL` seconds; None if it gives none (the caller acts on that: unlike
    :func:`tests.helpers.eventually`, no failure)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() >= deadline:
            return found or None
        time.sleep(POLL)


def ready_to_measure(db: Any, ranges: List[Tuple[bytes, bytes]],
                     enough: Callable[[List[Tuple[str, ...]]], bool]
                     ) -> Optional[Tuple[List[Any], List[Tuple[str, ...]]]]:
    """(the whole shard map, the teams holding the last piece of each of ``ranges``)
    when the data distributor moves nothing and those tails are ``enough``; else
    None."""
    if moving(db):
        return None
    ends = [pieces[-1].team for pieces in shard_map(db, ranges)]
    return (whole_map(db), ends) if enough(ends) else None


def measured_still(db: Any, q: Queue[bytes], batch: int, ranges: List[Tuple[bytes, bytes]],
                   enough: Callable[[List[Tuple[str, ...]]], bool]
                   ) -> Tuple[Dict[str, int], List[Tuple[str, ...]]]:
    """:func:`measured` while nothing moves: the pushes themselves can make the data
    distributor split the piece they land in and move a part (its writes then reach
    the teams it leaves and the one it goes to, and the move's copy counts as input
    too), and a move of any other range sends its bytes to a process that should get
    none.  So each try waits (bounded) until nothing moves and the tails of
    ``ranges`` are ``enough``, measures, waits again until nothing moves, and keeps
    the measurement only if the whole shard map is as it was (a move that ran
    meanwhile changed it); up to :data:`MEASURE_TRIES` tries.  A try whose wait ends
    without the tails where the test needs them pushes :data:`REFILL` more items, for
    the data distributor to split and move again.  The input bytes and the tails'
    teams of the measurement kept."""
    for attempt in range(MEASURE_TRIES):
        ready = first_within(partial(ready_to_measure, db, ranges, enough), SETTLE_DEADLINE)
        if ready is None:
            print(f"placement: try {attempt + 1}: the tails {tails(db, ranges)} not where "
                  f"needed, or data moving, after {SETTLE_DEADLINE:.0f} s; {REFILL:,} more "
                  f"items pushed", flush=True)
            push(db, q, REFILL, PREFILL_BATCH)
            continue
        before, ends = ready
        got = measured(db, q, batch)
        eventually(partial(still, db), SETTLE_DEADLINE, "the data distributor moving nothing "
                   "after the measurement", POLL)
        if whole_map(db) == before:
            return got, ends
        print(f"placement: try {attempt + 1} saw data move; again", flush=True)
    raise AssertionError(f"the data distributor moved data during each of {MEASURE_TRIES} "
                         f"tries, or left the tails where the test cannot measure")


def anywhere(ends: List[Tuple[str, ...]]) -> bool:
    """Any tails will do (the unsharded queue's one tail is wherever it is)."""
    return bool(ends)


def on_two_teams(ends: List[Tuple[str, ...]]) -> bool:
    """The tails are on at least two teams (of the three storage processes' pairs:
    then every process holds one)."""
    return len(set(ends)) >= 2


def placed(db: Any, plain: Tuple[bytes, bytes], sharded: List[Tuple[bytes, bytes]]) -> bool:
    """Whether the data distributor has split the unsharded queue's range and each of
    the sharded queue's, and moves nothing.  Where the sharded queue's tails went is
    the data distributor's draw (all on one team a few runs in a hundred): its
    measurement waits for them on two teams, and pushes more for it to split and move
    again while they are not (:func:`measured_still`)."""
    return (len(shards(db, *plain)) > 1
            and all(len(shards(db, *r)) > 1 for r in sharded) and not moving(db))


@pytest.mark.soak  # the data distributor's pace: see tests/README.md
def test_an_unsharded_queue_lands_on_one_team_a_sharded_one_on_several(
        placement_db: Any) -> None:
    """Both queues pre-filled (2.4 MB each), their ranges split and moved by the data
    distributor (until nothing moves; for the sharded queue, until its tails are on
    two teams: see :func:`measured_still`), then 100 KB pushed into each: the unsharded
    queue's reach the two storage processes of one team (every other gets less than a
    tenth of what they get); the sharded queue's reach all three (at least two teams:
    each process of each team holding a shard's last piece gets its share)."""
    root = fdb.Subspace(("fdbrecipes-test", "placement", uuid.uuid4().hex))
    plain: Queue[bytes] = Queue(root["plain"])
    sharded: Queue[bytes] = Queue(root["sharded"], shards=SHARDS)
    started = time.monotonic()
    push(placement_db, plain, PREFILL, PREFILL_BATCH)
    push(placement_db, sharded, PREFILL, PREFILL_BATCH)
    plain_ranges = item_ranges(root["plain"], 1)
    sharded_ranges = item_ranges(root["sharded"], SHARDS)
    eventually(partial(placed, placement_db, plain_ranges[0], sharded_ranges), PLACE_DEADLINE,
               "the data distributor splitting the queues' ranges and moving nothing", POLL)
    plain_pieces = shards(placement_db, *plain_ranges[0])
    print(f"placement: pre-filled and split in {time.monotonic() - started:.1f} s; "
          f"unsharded range: {len(plain_pieces)} piece(s) on teams "
          f"{sorted(teams(plain_pieces))}; sharded tails: "
          f"{tails(placement_db, sharded_ranges)}", flush=True)

    got, [team] = measured_still(placement_db, plain, PREFILL_BATCH, plain_ranges, anywhere)
    payload = MEASURED * VALUE_BYTES
    print(f"placement: unsharded, {payload:,} bytes pushed; input bytes by storage "
          f"process: {dict(sorted(got.items()))}; last piece's team {sorted(team)}",
          flush=True)
    least = min(got.get(a, 0) for a in team)  # input bytes count each write about 3x
    assert least >= payload, got
    assert all(n < least / 10 for a, n in got.items() if a not in team), got

    got, ends = measured_still(placement_db, sharded, 1, sharded_ranges, on_two_teams)
    share: Dict[str, float] = {}
    for tail in ends:
        for address in tail:
            share[address] = share.get(address, 0.0) + 1 / SHARDS
    print(f"placement: sharded ({SHARDS} shards), {payload:,} bytes pushed; input bytes by "
          f"storage process: {dict(sorted(got.items()))}; the shards' last pieces' "
          f"teams {ends}", flush=True)
    assert len(share) == 3  # two teams of the three processes' pairs hold them all
    reached = [a for a in share if got.get(a, 0) >= payload * share[a] / 2]
    assert len(reached) == 3, (got, share)  # every process of at least two teams
    r = root.range()
    placement_db.clear_range(r.start, r.stop)
