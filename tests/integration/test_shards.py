"""Structures spread over shards (``shards=N``, issue 31 part 3): the layout and its
marker, mismatches refused, and every guarantee of an unsharded structure kept: leases,
delays, dead letters, ids unique across shards, job records, pause, exact stats,
high-contention pops, batches, waits woken by a push to any shard, listings and the
operator's tools, receipts.  Order: FIFO within each shard (checked through the public
API: the popped sequence is a merge of at most N increasing runs), priority order
across shards for a strict PriorityQueue pop."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections import Counter
from typing import Any, List

import fdb
import pytest

from fdbrecipes import (
    FairQueue,
    JobError,
    LayoutError,
    PriorityQueue,
    Queue,
    Worker,
    aio,
    drive,
)
from fdbrecipes.admin.places import Place, make_structure, shards_of, stored
from fdbrecipes.testing.hooks import hooks
from fdbrecipes.web.command import discover
from tests.helpers import Blocks, Faulty, TestClock, dump, eventually_async, run_threads
from tests.integration.test_operator_cli import answer, fdbrecipes, place
from tests.integration.test_paging import paged, token

pytestmark = pytest.mark.integration

SHARDS = 4


def longest_decreasing(sequence: List[int]) -> int:
    """The length of the longest strictly decreasing subsequence of ``sequence``: the
    fewest increasing runs it is a merge of (so at most N when each of N shards is
    FIFO)."""
    tails: List[int] = []  # tails[k]: the largest last element of a decreasing run of k+1
    for x in sequence:
        lo, hi = 0, len(tails)
        while lo < hi:
            mid = (lo + hi) // 2
            if tails[mid] > x:
                lo = mid + 1
            else:
                hi = mid
        if lo == len(tails):
            tails.append(x)
        else:
            tails[lo] = x
    return len(tails)


def shard_keys(db: Any, space: Any, kind: str = "i") -> Counter[int]:
    """How many keys of ``kind`` (items "i", holds "h") each shard holds (the documented
    layout: shard 0's under ``S/kind``, shard k's under ``S/"l"/(k,)/kind``), a Queue's
    floor left out."""
    found: Counter[int] = Counter()
    for key in dump(db, space):
        parts = space.unpack(key)
        if parts[0] == kind and parts[1:] != (True,):
            found[0] += 1
        elif parts[0] == "l" and len(parts) > 2 and parts[2] == kind and parts[3:] != (True,):
            found[parts[1]] += 1
    return found


def test_one_shard_is_the_unsharded_layout(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace, shards=1)
    q.push_many(db, ["a", "b"])
    lease = q.claim(db, 60)
    assert lease is not None
    keys = {fdb_subspace.unpack(k)[0] for k in dump(db, fdb_subspace)}
    assert keys == {"i", "h", "d", "n", "c"}  # no marker, no shard
    assert Queue(fdb_subspace).items(db) == ["b"]  # the default object reads it
    assert q.shards == 1 and Queue(fdb_subspace, shards=1).stats(db)[:3] == (1, 0, 1)


def test_a_sharded_queue_spreads_its_pushes_and_keeps_each_shard_in_order(
        db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, shards=SHARDS)
    for i in range(120):
        q.push(db, i)
    marker = fdb.tuple.unpack(db[fdb_subspace.pack(("l",))])
    assert marker == (2, "queue", SHARDS)
    held = shard_keys(db, fdb_subspace)
    assert sorted(held) == list(range(SHARDS)) and sum(held.values()) == 120
    assert q.size(db) == 120 and q.stats(db).visible == 120
    assert sorted(q.items(db)) == list(range(120))
    popped = [q.pop(db) for _ in range(121)]
    assert popped[-1] is None and sorted(popped[:-1]) == list(range(120))  # type: ignore
    assert longest_decreasing(popped[:-1]) <= SHARDS  # type: ignore[arg-type]
    assert popped[:-1] != list(range(120))  # the shards were drawn at random


@pytest.mark.parametrize("take", ["pop_many", "claim_many"])
def test_takes_short_in_their_first_shard_take_the_rest_from_the_others(
        db: Any, fdb_subspace: Any, take: str) -> None:
    """Eight items pushed one by one (each to a shard drawn at random), then taken two
    at a time with a spread until none is left, ten times over: each taken once.  A
    take whose first shard holds one item takes the other from the next shard that
    has one, and nothing from the shards after it."""
    for trial in range(10):
        q: Queue[int] = Queue(fdb_subspace[trial], shards=SHARDS)
        for i in range(8):
            q.push(db, i)
        got: List[int] = []
        while True:
            if take == "pop_many":
                found = q.pop_many(db, 2, spread=4)
            else:
                found = [lease.value for lease in q.claim_many(db, 2, 30, spread=4)]
            if not found:
                break
            got.extend(found)
        assert sorted(got) == list(range(8)), (trial, got)


def test_a_strict_priority_pop_takes_the_best_priority_of_every_shard(
        db: Any, fdb_subspace: Any) -> None:
    pq: PriorityQueue[int] = PriorityQueue(fdb_subspace, shards=SHARDS)
    for i in range(60):
        pq.push(db, i, i * 7 % 11)
    assert len(shard_keys(db, fdb_subspace)) == SHARDS
    assert pq.peek_min(db) in {i for i in range(60) if i * 7 % 11 == 0}
    lows = [pq.pop_min(db) for _ in range(30)]
    highs = [pq.pop_max(db) for _ in range(30)]
    low_p = [v * 7 % 11 for v in lows]  # type: ignore[operator]
    high_p = [v * 7 % 11 for v in highs]  # type: ignore[operator]
    assert low_p == sorted(low_p) and high_p == sorted(high_p, reverse=True)
    assert max(low_p) <= min(high_p) and pq.pop_min(db) is None
    # within a priority, each shard is FIFO
    for p in range(11):
        order = [v for v in lows if v * 7 % 11 == p]  # type: ignore[operator]
        assert longest_decreasing(order) <= SHARDS  # type: ignore[arg-type]


def test_mismatched_layouts_are_refused_before_anything_is_written(
        db: Any, fdb_subspace: Any) -> None:
    plain, sharded = fdb_subspace["plain"], fdb_subspace["sharded"]
    Queue(plain).push(db, "x")
    before = dump(db, fdb_subspace)
    with pytest.raises(LayoutError, match="unsharded"):
        Queue(plain, shards=SHARDS).push(db, "y")
    with pytest.raises(LayoutError, match="unsharded"):
        Queue(plain, shards=SHARDS).stats(db)
    assert dump(db, fdb_subspace) == before
    Queue(sharded, shards=SHARDS).push(db, "z")
    before = dump(db, fdb_subspace)
    for wrong in (Queue(sharded), Queue(sharded, shards=2), PriorityQueue(sharded, shards=4),
                  FairQueue(sharded, shards=4)):
        with pytest.raises(LayoutError, match="shards=4"):
            wrong.stats(db)
    with pytest.raises(LayoutError, match="shards=4"):
        Queue(sharded, shards=2).push(db, "w")
    with pytest.raises(LayoutError, match="shards=4"):
        Queue(sharded).pop(db)
    assert dump(db, fdb_subspace) == before
    later = fdb_subspace["later"]
    db[later.pack(("l",))] = fdb.tuple.pack((3, "queue", 4, "more"))
    with pytest.raises(LayoutError, match="upgrade"):
        Queue(later, shards=4).pop(db)
    with pytest.raises(LayoutError, match="upgrade"):
        Queue(later).push(db, 1)
    fresh = fdb_subspace["fresh"]
    assert Queue(fresh, shards=SHARDS).stats(db).visible == 0  # reads write no marker
    assert dump(db, fresh) == {}


def test_two_first_pushes_of_different_layouts_cannot_both_commit(
        db: Any, fdb_subspace: Any) -> None:
    four, two = Queue(fdb_subspace, shards=4), Queue(fdb_subspace, shards=2)
    a, b = db.create_transaction(), db.create_transaction()
    four.push(a, "a")
    two.push(b, "b")
    a.commit().wait()
    with pytest.raises(fdb.FDBError) as raised:
        b.commit().wait()
    assert raised.value.code == 1020  # not_committed: it read the marker's absence
    with pytest.raises(LayoutError):
        two.push(db, "b")
    assert four.items(db) == ["a"]
    unsharded = Queue(fdb_subspace["u"])
    c, d = db.create_transaction(), db.create_transaction()
    Queue(fdb_subspace["u"], shards=3).push(c, "c")
    unsharded.push(d, "d")
    d.commit().wait()
    with pytest.raises(fdb.FDBError):
        c.commit().wait()  # a first unsharded push committed meanwhile
    assert unsharded.items(db) == ["d"]


def test_leases_delays_and_dead_letters_across_shards(db: Any, fdb_subspace: Any) -> None:
    clock = TestClock()
    q: Queue[int] = Queue(fdb_subspace, shards=3, clock=clock, max_deliveries=2)
    for i in range(30):
        q.push(db, i)
    q.push(db, 99, delay=50)
    leases = sorted(q.claim_many(db, 30, 10), key=lambda lease: lease.value)
    assert [lease.value for lease in leases] == list(range(30))
    assert len(shard_keys(db, fdb_subspace, "h")) == 3  # leases in every shard
    assert q.stats(db)[:4] == (0, 1, 30, 0)
    assert q.ack_many(db, leases[:10]) == [True] * 10
    assert q.ack_many(db, leases[:10]) == [False] * 10
    for lease in leases[10:15]:
        assert q.release(db, lease, delay=5)
    renewed = q.extend_many(db, leases[15:20], 60)
    assert all(r is not None for r in renewed)
    assert q.stats(db)[:4] == (0, 6, 15, 0)
    clock.advance(20)  # leases 20..29 expired (first delivery), 10..14 visible again
    assert q.stats(db)[:4] == (15, 1, 5, 0)
    again = q.claim_many(db, 20, 5)
    assert sorted(lease.value for lease in again) == list(range(10, 15)) + list(range(20, 30))
    assert {lease.deliveries for lease in again} == {2}
    clock.advance(10)  # their second deliveries ran out: dead letters
    assert q.stats(db)[:4] == (0, 1, 5, 15)
    assert sorted(d.value for d in q.dead(db)) == list(range(10, 15)) + list(range(20, 30))
    assert q.requeue_dead(db, 4) == 4
    assert q.purge_dead(db) == 11
    assert q.stats(db)[:4] == (4, 1, 5, 0)
    clock.advance(60)
    assert q.stats(db)[:4] == (4 + 1 + 5, 0, 0, 0)
    assert sorted(q.pop_many(db, 100))[-1] == 99 and q.size(db) == 0


def test_ids_are_unique_across_shards(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, shards=SHARDS)
    for _ in range(3):
        for i in range(40):
            q.push(db, i, id=b"job-%d" % i)
    assert q.size(db) == 40 and len(shard_keys(db, fdb_subspace)) == SHARDS
    assert sorted(q.remove(db, id=b"job-%d" % i) for i in range(0, 40, 2)) == list(range(0, 40, 2))
    assert q.remove(db, id=b"job-0") is None and q.size(db) == 20
    q.push(db, 7, id=b"job-7", delay=60)  # known: nothing
    assert q.size(db) == 20 and q.stats(db).delayed == 0
    q.push(db, 100, id=b"later", delay=60)
    assert q.remove(db, id=b"later") == 100  # a delayed item, in whichever shard


def test_job_records_and_cancels(db: Any, fdb_subspace: Any) -> None:
    q: Queue[str] = Queue(fdb_subspace, shards=3, history=3600)
    ids = [q.push(db, f"job {i}") for i in range(12)]
    assert all(q.job(db, i).state == "pending" for i in ids)  # type: ignore[union-attr]
    leases = q.claim_many(db, 6, 60)
    running = {lease.id for lease in leases}
    for lease in leases[:3]:
        q.ack(db, lease)
    states = Counter(q.job(db, i).state for i in ids)  # type: ignore[union-attr]
    assert states == Counter({"pending": 6, "running": 3, "succeeded": 3})
    waiting = [i for i in ids if i not in running]
    assert q.cancel(db, waiting[0]) == "cancelled"
    assert q.cancel(db, leases[3].id) == "cancelling"  # type: ignore[arg-type]
    assert q.release(db, leases[4], delay=60, error=JobError("E", "failed"))
    assert q.cancel(db, leases[4].id) == "cancelled"  # type: ignore[arg-type]
    assert q.job(db, leases[4].id).state == "cancelled"  # type: ignore[union-attr,arg-type]
    assert q.size(db) == 12 - 3 - 2


def test_pause_stops_every_take_of_every_shard(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, shards=SHARDS)
    for i in range(20):
        q.push(db, i)
    assert q.pause(db)
    # each shard's flag (the prefix of its deadline index): its takes read it alone
    assert shard_keys(db, fdb_subspace, "d") == Counter(range(SHARDS))
    assert q.pop(db) is None and q.claim(db, 30) is None and q.claim_many(db, 20, 30) == []
    assert q.pop_wait(db, timeout=0.2) is None
    assert q.resume(db) and shard_keys(db, fdb_subspace, "d") == Counter()
    assert sorted(q.pop_many(db, 30)) == list(range(20))


def test_listings_page_across_shards_and_tokens_find_their_shard(
        db: Any, fdb_subspace: Any) -> None:
    """The paged listings (``after=``) merge every shard's rows, and the calls that take
    a row's token (``lookup``, ``remove_many``, ``requeue_dead``/``purge_dead`` with
    tokens) go to the shard that holds it."""
    q: Queue[int] = Queue(fdb_subspace, shards=SHARDS, history=3600)
    q.push_many(db, range(10))  # one shard: a push_many lands in one
    for i in range(10, 40):
        q.push(db, i)
    assert len(shard_keys(db, fdb_subspace)) == SHARDS
    rows = paged(q.pending, 7, token, db)
    assert [r.value for r in rows] == q.items(db) and sorted(r.value for r in rows) == list(
        range(40))
    assert len({r.token for r in rows}) == 40
    assert q.lookup(db, rows[5].token) == rows[5]
    assert q.remove_many(db, [rows[5].token, rows[20].token, rows[5].token]) == [
        rows[5].value, rows[20].value, None]
    leases = q.claim_many(db, 12, 60)
    assert sorted(i.token for i in paged(q.leases, 5, token, db)) == sorted(
        lease.token for lease in leases)
    for i in range(6):
        q.push(db, 100 + i, delay=100 + i)
    assert [d.value for d in paged(q.delayed, 4, token, db)] == list(range(100, 106))
    for lease in leases[:8]:
        assert q.bury(db, lease, "why")
    dead = paged(q.dead, 3, token, db)
    assert sorted(d.value for d in dead) == sorted(lease.value for lease in leases[:8])
    assert q.lookup(db, dead[2].token) == dead[2]
    assert q.requeue_dead(db, tokens=[dead[0].token, dead[3].token]) == 2
    assert q.purge_dead(db, tokens=[dead[0].token, dead[5].token]) == 1  # dead[0] left
    assert sorted(d.value for d in q.dead(db)) == sorted(
        d.value for d in dead if d not in (dead[0], dead[3], dead[5]))
    assert q.stats(db)[:4] == (40 - 2 - 12 + 2, 6, 4, 5)
    pq: PriorityQueue[str] = PriorityQueue(fdb_subspace["pq"], shards=3)
    for i in range(4):
        for p in (3, 1, 2):
            pq.push(db, f"{p}-{i}", p)
    for reverse in (False, True):
        listed = paged(pq.pending, 2, token, db, reverse=reverse)
        assert [r.value for r in listed] == pq.items(db, reverse=reverse)
        assert [r.priority for r in listed] == sorted([1, 2, 3] * 4, reverse=reverse)
    fair: FairQueue[str] = FairQueue(fdb_subspace["f"], shards=3)
    for g in ("c", "a", "b"):
        for i in range(5):
            fair.push(db, f"{g} {i}", group=g)
    assert paged(fair.groups, 2, lambda g: g, db) == ["a", "b", "c"]
    a_rows = paged(fair.pending, 2, token, db, "a")
    assert sorted(r.value for r in a_rows) == [f"a {i}" for i in range(5)]
    assert fair.remove_many(db, "a", [r.token for r in a_rows]) == [r.value for r in a_rows]
    assert fair.groups(db) == ["b", "c"]


def test_concurrent_consumers_take_every_item_once(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, shards=SHARDS)
    hc: Queue[int] = Queue(fdb_subspace["hc"], shards=3, high_contention=True)
    hooks(hc).contended = True  # every pop fetches a batch
    q.push_many(db, range(0, 100))
    q.push_many(db, range(100, 200))
    for i in range(200):
        hc.push(db, i)
    got: List[int] = []
    errors: List[BaseException] = []
    lock = threading.Lock()

    def claimer() -> None:
        try:
            while True:
                leases = q.claim_many(db, 7, 30)
                if not leases:
                    return
                assert all(q.ack_many(db, leases))
                with lock:
                    got.extend(lease.value for lease in leases)
        except BaseException as e:  # reported by run_threads
            errors.append(e)

    def popper() -> None:
        try:
            while (value := hc.pop(db)) is not None:
                with lock:
                    got.append(value + 1000)
        except BaseException as e:
            errors.append(e)

    run_threads([threading.Thread(target=claimer) for _ in range(3)]
                + [threading.Thread(target=popper) for _ in range(3)], errors, 120)
    assert sorted(got) == list(range(200)) + list(range(1000, 1200))
    assert q.stats(db)[:4] == (0, 0, 0, 0) and hc.size(db) == 0


def test_a_push_to_any_shard_wakes_a_waiter(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, shards=SHARDS)
    blocked = threading.Semaphore(0)
    hooks(q).on_block = lambda _timeout: blocked.release()
    got: List[Any] = []
    for round_ in range(4):  # each push lands in a shard drawn at random
        waiter = threading.Thread(target=lambda: got.append(q.pop_wait(db, timeout=60)))
        waiter.start()
        assert blocked.acquire(timeout=30), "the waiter never blocked"
        pushed_at = time.monotonic()
        q.push(db, round_)
        waiter.join(30)
        assert got == list(range(round_ + 1)) and time.monotonic() - pushed_at < 5


def test_commits_in_doubt_are_settled_exactly(db: Any, fdb_cluster_file: str,
                                              fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, shards=3)
    q.push(db, 0)  # the layout settled: the faults below meet the calls' own commits
    assert q.pop(db) == 0
    one = Faulty(fdb_cluster_file).once
    for fault in ("applied", "dropped"):
        one(fault, lambda d, f=fault: q.push(d, 1 if f == "applied" else 2, id=f.encode()))
    assert sorted(q.items(db)) == [1, 2]
    for i in range(10):
        q.push(db, 10 + i)
    leases = one("applied", lambda d: q.claim_many(d, 12, 60))
    assert len(leases) == 12 and q.stats(db).in_flight == 12
    assert one("applied", lambda d: q.ack_many(d, leases)) == [True] * 12
    assert q.size(db) == 0


def test_clear_keeps_the_layout(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, shards=SHARDS)
    for i in range(20):
        q.push(db, i)
    q.clear(db)
    assert q.size(db) == 0 and q.items(db) == [] and shard_keys(db, fdb_subspace) == {}
    assert db[fdb_subspace.pack(("l",))] is not None
    with pytest.raises(LayoutError):
        Queue(fdb_subspace).push(db, 1)
    q.push(db, 5)
    assert q.pop(db) == 5


def test_a_sharded_fair_queue_keeps_limits_and_leaves_nothing_behind(
        db: Any, fdb_subspace: Any) -> None:
    fq = FairQueue(fdb_subspace, shards=3, history=3600)
    fq.set_group(db, "acme", limit=2)
    for i in range(12):
        fq.push(db, i, group="acme")
    fq.push_many(db, [100, 101], group="zen")
    assert fq.groups(db) == ["acme", "zen"] and drive(fq.ops.stats(db)).visible == 14
    held = [lease for lease in (fq.claim(db, 30) for _ in range(8)) if lease is not None]
    assert Counter(lease.group for lease in held) == Counter({"acme": 2, "zen": 2})
    while True:  # each ack frees a slot for the next acme item, in any shard
        for lease in held:
            fq.ack(db, lease)
        held = fq.claim_many(db, 5, 30)
        if not held:
            break
        assert fq.stats(db, "acme").in_flight <= 2
    assert drive(fq.ops.stats(db))[:4] == (0, 0, 0, 0)
    assert fq.groups(db) == ["acme"]  # zen, with nothing left, was retired: in every shard
    for key in dump(db, fdb_subspace):  # but for its ids and job records, kept their time
        parts = fdb_subspace.unpack(key)
        queue = parts[3:] if parts[0] == "l" and parts[2:3] == ("q",) else (
            parts[1:] if parts[0] == "q" else ())
        assert queue[:1] != ("zen",) or queue[1] in ("k", "g", "j"), parts
    fq.clear(db)
    left = {fdb_subspace.unpack(k)[0] for k in dump(db, fdb_subspace)}
    assert left <= {"n", "c", "l"}


def test_a_sharded_fair_queue_s_delays_and_dead_letters(db: Any, fdb_subspace: Any) -> None:
    clock = TestClock()
    fq = FairQueue(fdb_subspace, shards=3, clock=clock, max_deliveries=1)
    fq.push_many(db, [1, 2, 3], group="g")
    fq.push(db, 4, group="g", delay=60)
    leases = fq.claim_many(db, 5, 30)
    assert sorted(lease.value for lease in leases) == [1, 2, 3]
    assert fq.release(db, leases[0], delay=10)  # its last delivery: a dead letter
    assert fq.bury(db, leases[1], "no")
    clock.advance(40)  # the third lease expired: dead too
    assert sorted(d.value for d in fq.dead(db, "g")) == sorted(
        lease.value for lease in leases)
    assert fq.claim(db, 30) is None and fq.stats(db, "g")[:4] == (0, 1, 0, 3)
    assert fq.requeue_dead(db, "g") == 3 and fq.purge_dead(db, "g") == 0
    clock.advance(30)
    assert sorted(lease.value for lease in fq.claim_many(db, 9, 30)) == [1, 2, 3, 4]


def test_asyncio_twin(db: Any, fdb_subspace: Any) -> None:
    async def run() -> None:
        q: aio.AsyncQueue[int] = aio.AsyncQueue(fdb_subspace, shards=SHARDS)
        await asyncio.gather(*(q.push(db, i) for i in range(40)))  # shared transactions
        assert await q.size(db) == 40
        leases = await asyncio.gather(*(q.claim(db, 30) for _ in range(20)))
        await asyncio.gather(*(q.ack(db, lease) for lease in leases if lease is not None))
        rest = await q.pop_many(db, 40)
        assert sorted([lease.value for lease in leases if lease] + rest) == list(range(40))
        asleep = Blocks(q)
        waiting = asyncio.ensure_future(q.pop_wait(db, timeout=30))
        await eventually_async(lambda: asleep.count >= 1, 30, "the pop_wait blocked")
        await q.push(db, 77)  # wakes it on its watch
        assert await asyncio.wait_for(waiting, 30) == 77

    asyncio.run(run())


def test_a_worker_drains_a_sharded_queue(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace, shards=3, history=3600)
    ids = [q.push(db, i) for i in range(30)]
    done: List[int] = []
    Worker(db, q, lambda job: done.append(job.value), concurrency=4).run(burst=True)
    assert sorted(done) == list(range(30))
    assert {q.job(db, i).state for i in ids} == {"succeeded"}  # type: ignore[union-attr]


def test_the_operator_tools_read_a_sharded_structure(db: Any, fdb_subspace: Any,
                                                     fdb_cluster_file: str) -> None:
    q: PriorityQueue[int] = PriorityQueue(fdb_subspace, shards=SHARDS)
    for i in range(10):
        q.push(db, i, i % 3)
    tr = db.create_transaction()
    assert stored(tr, fdb_subspace) == ("priority-queue", None)
    assert shards_of(tr, fdb_subspace) == SHARDS
    seen = make_structure("priority-queue", fdb_subspace, None, shards=SHARDS)
    assert seen.stats(db) == q.stats(db)
    assert sorted(seen.items(db)) == list(range(10))  # type: ignore[call-arg]
    [shown] = discover(db, Place(prefix=fdb.tuple.unpack(fdb_subspace.key()))).values()
    assert shown.shards == SHARDS and sorted(shown.items(db)) == list(range(10))
    stats = answer(fdbrecipes(fdb_cluster_file, "stats", *place(fdb_subspace), "--json"))
    assert (stats["kind"], stats["visible"]) == ("priority-queue", 10)


def test_the_dashboard_pages_and_acts_on_a_sharded_queue(db: Any, fdb_subspace: Any) -> None:
    """The web dashboard's tabs page through every shard, and its actions on chosen rows
    reach the shards that hold them."""
    pytest.importorskip("starlette", reason="the dashboard's extra")
    from fdbrecipes.web import FULL
    from tests.integration.test_web import bury_one, client
    from tests.integration.test_web_rows import act, pages

    jobs: Queue[str] = Queue(fdb_subspace, shards=SHARDS, history=3600, max_deliveries=3)
    for i in range(6):
        bury_one(db, jobs, f"dead {i}")
    for i in range(9):
        jobs.push(db, f"p{i}")
    assert len(shard_keys(db, fdb_subspace)) > 1
    c = client(db, {"jobs": jobs}, access=FULL)
    shown = pages(c, "/structure?s=jobs&limit=4")
    assert [len(p) for p in shown] == [4, 4, 1]
    assert sorted(v for p in shown for v in p) == sorted(
        f"&#39;{v}&#39;" for v in jobs.items(db))
    assert sum(len(p) for p in pages(c, "/structure?s=jobs&tab=dead&limit=4")) == 6
    dead = c.get("/structure", params={"s": "jobs", "tab": "dead"}).text
    tokens = re.findall(r'form="chosen" name="token" value="([0-9a-f]+)"', dead)
    assert len(tokens) == 6
    answer = act(c, s="jobs", action="requeue", scope="chosen", token=tokens[:3], yes="1")
    assert "requeued 3 of 3 chosen" in c.get(answer.headers["location"]).text
    answer = act(c, s="jobs", action="purge", scope="matching", tab="dead", yes="1")
    assert "deleted 3 of 3" in c.get(answer.headers["location"]).text
    assert jobs.stats(db)[:4] == (12, 0, 0, 0)
