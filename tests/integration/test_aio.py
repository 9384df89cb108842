"""fdbrecipes.aio on a real server: the bridge, the async twins, cancellation,
shared transactions, many waiters on one watch, sync and async clients together.

Every test runs its coroutine with ``asyncio.run(..., debug=True)`` (asyncio's debug
mode, as ``PYTHONASYNCIODEBUG=1``) and fails on any "never awaited" warning."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from functools import partial
from typing import Any, Awaitable, Callable, Iterator, List, TypeVar

import fdb
import pytest

from fdbrecipes import LeaseExpiredError, PriorityQueue, Queue, WeightTree, aio
from tests.helpers import Blocks, Faulty, eventually_async, watch_limited

HOUR = 3600.0

pytestmark = pytest.mark.integration

T = TypeVar("T")


@pytest.fixture(autouse=True)
def nothing_left_unawaited() -> Iterator[None]:
    """Fail the test on any coroutine that was never awaited."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
        gc.collect()
    never = [w for w in caught if "never awaited" in str(w.message)]
    assert not never, [str(w.message) for w in never]


def run(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main()`` on a new event loop in asyncio's debug mode."""
    async def wrapped() -> T:
        return await main()
    return asyncio.run(wrapped(), debug=True)


# -- the bridge ----------------------------------------------------------------------


def test_a_future_ready_before_the_await(db: Any, fdb_subspace: Any) -> None:
    db[fdb_subspace.pack(("k",))] = b"v"
    tr = db.create_transaction()
    future = tr.get(fdb_subspace.pack(("k",)))
    future.wait()

    async def main() -> Any:
        return await aio.wait(future)

    assert run(main) == b"v"


def test_a_future_resolved_from_another_thread(db: Any, fdb_subspace: Any) -> None:
    """A watch fires on FoundationDB's network thread after another thread writes."""
    key = fdb_subspace.pack(("watched",))
    tr = db.create_transaction()
    watch = tr.watch(key)
    tr.commit().wait()

    async def main() -> None:
        waiting = asyncio.ensure_future(aio.wait(watch))
        await asyncio.sleep(0)  # one turn of the loop: the task now awaits the future
        assert not waiting.done()
        writer = threading.Thread(target=db.set, args=(key, b"changed"))
        writer.start()
        await asyncio.wait_for(waiting, 30)
        writer.join()

    run(main)


def test_a_range_read_awaits_to_its_key_values(db: Any, fdb_subspace: Any) -> None:
    """A range read (what ``tr.get_range`` returns) awaits to its list, every batch
    awaited: its limit, direction and streaming mode kept, also past one batch."""
    big = b"x" * 2_000
    for start in range(0, 3_000, 500):
        tr = db.create_transaction()
        for i in range(start, start + 500):
            tr[fdb_subspace.pack((i,))] = big
        tr.commit().wait()
    r = fdb_subspace.range()

    async def main() -> List[List[Any]]:
        tr = db.create_transaction()
        return [await aio.wait(tr.get_range(r.start, r.stop)),
                await aio.wait(tr.get_range(r.start, r.stop, limit=10, reverse=True)),
                await aio.wait(tr.get_range(r.start, r.stop, limit=2_500,
                                            streaming_mode=fdb.StreamingMode.small)),
                await aio.wait(tr.snapshot.get_range(r.start, r.stop, limit=3))]

    whole, last, small, snapshot = run(main)
    expected = list(db.get_range(r.start, r.stop))
    assert [kv.key for kv in whole] == [kv.key for kv in expected] and len(whole) == 3_000
    assert [kv.key for kv in last] == [kv.key for kv in reversed(expected)][:10]
    assert [kv.key for kv in small] == [kv.key for kv in expected][:2_500]
    assert [kv.value for kv in snapshot] == [big] * 3


def test_an_error_is_raised_where_awaited(db: Any, fdb_subspace: Any) -> None:
    tr = db.create_transaction()
    tr.cancel()
    future = tr.get(fdb_subspace.pack(("k",)))

    async def main() -> None:
        with pytest.raises(fdb.FDBError) as raised:
            await aio.wait(future)
        assert raised.value.code == 1025  # transaction_cancelled

    run(main)


def test_a_future_cancelled_before_and_after_it_is_ready(db: Any, fdb_subspace: Any) -> None:
    key = fdb_subspace.pack(("read",))
    tr = db.create_transaction()
    watch = tr.watch(fdb_subspace.pack(("never written",)))
    tr.commit().wait()
    db[key] = b"v"
    reader = db.create_transaction()  # kept: a transaction's futures die with it
    done = reader.get(key)
    done.wait()

    async def main() -> None:
        awaiting = asyncio.ensure_future(aio.wait(watch))
        await asyncio.sleep(0)  # one turn of the loop: the task now awaits the future
        watch.cancel()  # before it is ready: the await raises operation_cancelled
        with pytest.raises(fdb.FDBError) as raised:
            await asyncio.wait_for(awaiting, 30)
        assert raised.value.code == 1101
        done.cancel()  # after: nothing changes
        assert await aio.wait(done) == b"v"

    run(main)


def test_a_task_cancelled_while_it_awaits_a_future(db: Any, fdb_subspace: Any) -> None:
    tr = db.create_transaction()
    watch = tr.watch(fdb_subspace.pack(("never",)))
    tr.commit().wait()

    async def main() -> None:
        awaiting = asyncio.ensure_future(aio.wait(watch))
        await asyncio.sleep(0)  # one turn of the loop: the task now awaits the future
        awaiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await awaiting

    run(main)
    watch.cancel()


def test_the_loop_closed_while_a_future_is_awaited(db: Any, fdb_subspace: Any,
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    """The future becomes ready after its loop closed: its callback finds the loop
    closed and does nothing (no traceback from FoundationDB's network thread)."""
    key = fdb_subspace.pack(("watched",))
    tr = db.create_transaction()
    watch = tr.watch(key)
    tr.commit().wait()
    loop = asyncio.new_event_loop()
    task = loop.create_task(aio.wait(watch))
    loop.run_until_complete(asyncio.sleep(0))  # the task now awaits the watch
    task.cancel()
    loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
    loop.close()
    db[key] = b"changed"
    watch.block_until_ready()
    fired = db.create_transaction()
    fired.get(key).wait()  # the network thread has run the callback by now
    assert "Discarding uncaught exception" not in capfd.readouterr().err


# -- the async twins ------------------------------------------------------------------


def test_every_sync_method_has_an_async_twin() -> None:
    for sync, twin in ((Queue, aio.AsyncQueue), (PriorityQueue, aio.AsyncPriorityQueue),
                       (WeightTree, aio.AsyncWeightTree)):
        public = {name for name in dir(sync) if not name.startswith("_")}
        assert public <= set(dir(twin)), public - set(dir(twin))
        for name in public:
            if callable(getattr(sync, name)) and not name.startswith("claimed"):
                assert asyncio.iscoroutinefunction(getattr(twin, name)), name


def test_the_async_queue_works_like_the_sync_one(db: Any, fdb_subspace: Any) -> None:
    async def main() -> None:
        q = aio.AsyncQueue(fdb_subspace, max_deliveries=2)
        await q.push(db, b"a")
        await q.push_many(db, [b"b", b"c", b"d"])
        assert await q.size(db) == 4 and await q.peek(db) == b"a"
        assert await q.items(db) == [b"a", b"b", b"c", b"d"]
        assert await q.pop(db) == b"a"
        assert await q.pop_many(db, 1) == [b"b"]
        lease = await q.claim(db, 30)
        assert lease is not None and lease.value == b"c"
        lease = await q.extend(db, lease, 60)
        await q.ack(db, lease)
        with pytest.raises(LeaseExpiredError):
            await q.ack(db, lease)
        async with q.claimed(db, 30) as held:
            assert held is not None and held.value == b"d"
        assert (await q.stats(db)).visible == 0 and await q.is_empty(db)
        await q.push(db, b"e")
        leases = await q.claim_many(db, 5, 30)
        assert await q.release(db, leases[0])
        assert await q.pop_wait(db, timeout=5) == b"e"
        assert await q.claim_wait(db, 30, timeout=0.1) is None

        @aio.transactional
        async def take_and_record(tr: Any) -> Any:
            value = await q.pop(tr)
            tr[fdb_subspace.pack(("done", value))] = b""
            return value

        await q.push(db, b"f")
        assert await take_and_record(db) == b"f"
        assert db[fdb_subspace.pack(("done", b"f"))] == b""

    run(main)


def test_the_async_priority_queue_and_weight_tree(db: Any, fdb_subspace: Any) -> None:
    async def main() -> None:
        pq = aio.AsyncPriorityQueue(fdb_subspace["pq"])
        await pq.push_many(db, [("low", 1), ("high", 9)])
        await pq.push(db, "mid", 5)
        assert await pq.items(db, reverse=True) == ["high", "mid", "low"]
        assert await pq.pop_max(db) == "high" and await pq.pop_min(db) == "low"
        tree = aio.AsyncWeightTree(fdb_subspace["t"])
        handle = await tree.push(db, "x", 3, id=b"x")
        assert await tree.push(db, "x again", 3, id=b"x") == handle
        assert await tree.get(db, handle) == ("x", 3)
        assert await tree.set_weight(db, handle, 5) == 3
        assert await tree.total_weight(db) == 5 and await tree.size(db) == 1
        assert await tree.pop(db) == "x" and await tree.is_empty(db)

    run(main)


def test_aio_transactional_refuses_a_plain_function() -> None:
    def plain(tr: Any) -> None:
        pass

    with pytest.raises(TypeError, match="async def"):
        aio.transactional(plain)


def test_sync_and_async_clients_share_one_queue(db: Any, fdb_subspace: Any) -> None:
    sync = Queue(fdb_subspace)
    sync.push_many(db, range(10))

    async def main() -> List[Any]:
        q = aio.AsyncQueue(fdb_subspace)
        got = [await q.pop(db) for _ in range(5)]
        await q.push_many(db, range(10, 15))
        return got

    assert run(main) == [0, 1, 2, 3, 4]
    assert sync.pop_many(db, 20) == list(range(5, 15))
    assert sync.size(db) == 0


# -- cancellation ----------------------------------------------------------------------


async def cancelled_in_flight(faulty: Faulty, call: Awaitable[Any], fault: str,
                              what: str) -> None:
    """Run ``call`` (a call on ``faulty.db``) with ``fault`` at its commit, cancel it
    once the commit is under way (it reads first), and check that it raises
    CancelledError."""
    faulty.pending[:] = [fault]
    task = asyncio.ensure_future(call)
    await eventually_async(lambda: not faulty.pending, 30, what, every=0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("fault", ["applied:hang", "dropped:hang"])
def test_a_pop_cancelled_with_its_commit_in_flight_gives_its_item_back(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any, fault: str) -> None:
    """Settled first: if the pop landed, its item goes back to its place; either way
    the queue ends as it was, and the task raises CancelledError."""
    Queue(fdb_subspace).push_many(db, [1, 2, 3])
    faulty = Faulty(fdb_cluster_file)

    async def main() -> None:
        q = aio.AsyncQueue(fdb_subspace)
        await cancelled_in_flight(faulty, q.pop(faulty.db), fault, "the pop's commit")

    run(main)
    assert Queue(fdb_subspace).items(db) == [1, 2, 3]


def test_a_pop_of_a_job_with_a_record_cancelled_with_its_commit_applied_gives_it_back(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any) -> None:
    """The pop landed, so it is undone: the item is back at its place, its record
    pending again, and its id (made by its push, kept in its record: no id key is
    written for it, then or at the undo) names a job that is there."""
    made = Queue(fdb_subspace, history=HOUR).push(db, "job")
    faulty = Faulty(fdb_cluster_file)

    async def main() -> None:
        q = aio.AsyncQueue(fdb_subspace, history=HOUR)
        await cancelled_in_flight(faulty, q.pop(faulty.db), "applied:hang",
                                  "the pop's commit")

    run(main)
    q = Queue(fdb_subspace, history=HOUR)
    assert q.items(db) == ["job"] and q.job(db, made).state == "pending"
    assert q.push(db, "again", id=made) == made and q.size(db) == 1  # it is there
    ids = fdb_subspace["k"].range()
    assert list(db.get_range(ids.start, ids.stop)) == []


@pytest.mark.parametrize("fault", ["applied:hang", "dropped:hang"])
def test_a_claim_cancelled_with_its_commit_in_flight_counts_no_delivery(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any, fault: str) -> None:
    q = Queue(fdb_subspace)
    q.push(db, b"job")
    faulty = Faulty(fdb_cluster_file)

    async def main() -> None:
        aq = aio.AsyncQueue(fdb_subspace)
        faulty.pending[:] = [fault]
        claiming = asyncio.ensure_future(aq.claim(faulty.db, 60))
        await eventually_async(lambda: not faulty.pending, 30, "the claim's commit",
                               every=0.01)
        claiming.cancel()
        claiming.cancel()  # cancelled again while it settles: settling goes on
        with pytest.raises(asyncio.CancelledError):
            await claiming

    run(main)
    lease = q.claim(db, 60)
    assert lease is not None and lease.value == b"job" and lease.deliveries == 1
    assert q.stats(db).in_flight == 1


def test_a_push_cancelled_with_its_commit_in_flight_stays_pushed(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any) -> None:
    faulty = Faulty(fdb_cluster_file)

    async def main() -> None:
        q = aio.AsyncQueue(fdb_subspace)
        await cancelled_in_flight(faulty, q.push(faulty.db, b"landed"), "applied:hang",
                                  "the push's commit")

    run(main)
    assert Queue(fdb_subspace).items(db) == [b"landed"]


def test_cancelled_before_the_commit_nothing_is_written(db: Any, fdb_subspace: Any) -> None:
    """A waiter cancelled, and a timeout (asyncio.wait_for) while it waits: no write,
    and the queue serves the next consumer as if nothing happened."""
    async def main() -> None:
        q = aio.AsyncQueue(fdb_subspace)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(q.claim_wait(db, 30), 0.2)
        await q.push(db, b"x")
        assert await q.pop(db) == b"x"

    run(main)
    assert Queue(fdb_subspace).size(db) == 0


def test_an_unknown_result_is_settled_by_the_async_api_too(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any) -> None:
    Queue(fdb_subspace).push_many(db, [1, 2])
    faulty = Faulty(fdb_cluster_file)

    async def main() -> List[Any]:
        q = aio.AsyncQueue(fdb_subspace)
        faulty.pending[:] = ["applied"]
        first = await q.pop(faulty.db)
        faulty.pending[:] = ["dropped"]
        second = await q.pop(faulty.db)
        faulty.pending[:] = ["applied"]
        await q.push(faulty.db, 3)
        return [first, second]

    assert run(main) == [1, 2]
    assert Queue(fdb_subspace).items(db) == [3]


# -- shared transactions ------------------------------------------------------------


def test_concurrent_pushes_share_transactions_exactly_once(db: Any, fdb_cluster_file: str,
                                                           fdb_subspace: Any) -> None:
    """64 tasks push 20 items each; a fifth of the commits report an unknown result
    (half of them after really committing): every item is stored once."""
    from tests.helpers import RandomFaults, unknown_results

    faulty_db = unknown_results(fdb_cluster_file, RandomFaults(seed=7))

    async def main() -> int:
        q = aio.AsyncQueue(fdb_subspace)

        async def pusher(task: int) -> None:
            for i in range(20):
                await q.push(faulty_db, (task, i))

        await asyncio.gather(*(pusher(t) for t in range(64)))
        return q.retry_stats.retries

    run(main)
    values = Queue(fdb_subspace).items(db)
    assert sorted(values) == sorted((t, i) for t in range(64) for i in range(20))  # type: ignore[type-var]
    for t in range(64):  # each task's items in its order
        mine = [i for task, i in values if task == t]  # type: ignore[misc]
        assert mine == sorted(mine)


def test_a_bad_push_fails_alone(db: Any, fdb_subspace: Any) -> None:
    async def main() -> None:
        q = aio.AsyncQueue(fdb_subspace)
        results = await asyncio.gather(q.push(db, b"good"), q.push(db, None),  # type: ignore[arg-type]
                                       q.push(db, b"also good"), return_exceptions=True)
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], ValueError)

    run(main)
    assert sorted(Queue(fdb_subspace).items(db)) == [b"also good", b"good"]  # type: ignore[type-var]


def test_a_shared_transaction_failing_for_good_runs_each_push_alone(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any) -> None:
    """Six tasks' pushes share a transaction that fails for good, writing nothing
    (``transaction_too_large`` at its commit): each runs again in a transaction of its
    own; the first of those fails too, and only its push raises; the five others are
    stored, once each."""
    from tests.helpers import unknown_results

    # the shared commit, its settling, the first push alone (its settling: normal)
    plan = iter(["dropped:2101", None, "dropped:2101"])
    faulty_db = unknown_results(fdb_cluster_file, partial(next, plan, None))

    async def main() -> List[Any]:
        q = aio.AsyncQueue(fdb_subspace)
        return await asyncio.gather(*(q.push(faulty_db, b"v%d" % i) for i in range(6)),
                                    return_exceptions=True)

    outcomes = run(main)
    failed = [i for i, o in enumerate(outcomes) if isinstance(o, BaseException)]
    assert len(failed) == 1, outcomes
    assert isinstance(outcomes[failed[0]], fdb.FDBError) and outcomes[failed[0]].code == 2101
    assert sorted(Queue(fdb_subspace).items(db)) == sorted(  # type: ignore[type-var]
        b"v%d" % i for i in range(6) if i not in failed)


def test_concurrent_acks_share_transactions(db: Any, fdb_subspace: Any) -> None:
    Queue(fdb_subspace).push_many(db, range(100))

    async def main() -> None:
        q = aio.AsyncQueue(fdb_subspace)
        leases = await q.claim_many(db, 100, 60)
        await asyncio.gather(*(q.ack(db, lease) for lease in leases))
        again = await asyncio.gather(*(q.ack(db, lease) for lease in leases[:3]),
                                     return_exceptions=True)
        assert all(isinstance(e, LeaseExpiredError) for e in again)

    run(main)
    assert Queue(fdb_subspace).stats(db) == (0, 0, 0, 0, None)


def test_one_loops_takes_are_bounded_by_their_spread(db: Any, fdb_subspace: Any) -> None:
    """64 tasks of one loop claim strict batches, then pop with spread=4: every item
    goes to exactly one task, and the strict claims never conflict with each other
    (one runs at a time), where unbounded they would retry again and again."""
    Queue(fdb_subspace).push_many(db, range(1_000))

    async def main() -> None:
        q = aio.AsyncQueue(fdb_subspace)

        async def claims() -> List[Any]:
            got: List[Any] = []
            while batch := await q.claim_many(db, 10, 60):
                got += [lease.value for lease in batch]
                await q.ack_many(db, batch)
                if len(got) >= 5:
                    return got
            return got

        async def pops() -> List[Any]:
            got: List[Any] = []
            while (value := await q.pop(db, spread=4)) is not None:
                got.append(value)
            return got

        claimed = await asyncio.gather(*(claims() for _ in range(64)))
        assert q.retry_stats.retries == 0
        popped = await asyncio.gather(*(pops() for _ in range(64)))
        values = [v for got in claimed + popped for v in got]
        assert sorted(values) == list(range(1_000))
        with pytest.raises(ValueError, match="spread"):
            await q.pop(db, spread=0)

    run(main)
    assert Queue(fdb_subspace).size(db) == 0


# -- waiting ------------------------------------------------------------------------------


def test_a_thousand_waiters_share_one_watch_and_no_threads(db: Any, fdb_cluster_file: str,
                                                            fdb_subspace: Any) -> None:
    """1,000 tasks wait in claim_wait on a database that allows 20 watches: they share
    one (more would fail with too_many_watches), and the process starts no thread for
    them.  Pushes wake them; each item goes to exactly one of them, and the others
    wait on until their timeout."""
    db = watch_limited(fdb_cluster_file, 20)

    async def main() -> List[Any]:
        q = aio.AsyncQueue(fdb_subspace)
        asleep = Blocks(q)
        threads = threading.active_count()
        waiters = [asyncio.ensure_future(q.claim_wait(db, 60, timeout=20))
                   for _ in range(1_000)]
        await eventually_async(lambda: asleep.count >= 1_000, 120, "1,000 waiters blocked")
        assert threading.active_count() == threads
        await q.push_many(db, range(50))
        leases = await asyncio.wait_for(asyncio.gather(*waiters), 120)
        assert threading.active_count() == threads
        return [lease.value for lease in leases if lease is not None]

    got = run(main)
    assert sorted(got) == list(range(50))


#: Waiters beyond a connection's watches, the watches it allows, the seconds within
#: which every pushed item must be claimed (generous: 400 claims in turns take about
#: 2 s on a 2-core machine shared with other runs), and the seconds they have to block.
CROWD, WATCH_LIMIT, WAKE_BOUND, BLOCK_BOUND = 400, 5, 60.0, 60.0


def test_a_crowd_beyond_the_watch_limit_takes_a_push_in_turns(
        fdb_cluster_file: str, fdb_subspace: Any) -> None:
    """Issue 43, item 11: 400 tasks wait in claim_wait on a connection that allows 5
    watches; 400 items pushed at once are claimed, every one, each once, within 60 s,
    and the crowd's claims did not conflict with each other: they take in turns.
    Woken together, each claim of the front conflicted with every one that committed
    first: about 4,000 retries for 400 claims (10 each), and with 1,000 waiters under
    load the last claims came after the first leases (120 s) ended, took those items
    again, and left the last items pushed unclaimed (what the issue saw)."""
    db = watch_limited(fdb_cluster_file, WATCH_LIMIT)

    async def main() -> List[Any]:
        q = aio.AsyncQueue(fdb_subspace)
        asleep = Blocks(q)
        waiters = [asyncio.ensure_future(q.claim_wait(db, 600, timeout=600))
                   for _ in range(CROWD)]
        await eventually_async(lambda: asleep.count >= CROWD, BLOCK_BOUND,
                               f"{CROWD} waiters blocked")  # once each: they share a watch
        retries = q.retry_stats.retries
        await q.push_many(db, range(CROWD))
        done, left = await asyncio.wait(waiters, timeout=WAKE_BOUND)
        for waiter in left:
            waiter.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        assert not left, f"{len(left)} waiters took nothing within {WAKE_BOUND:g} s"
        retries = q.retry_stats.retries - retries
        assert retries <= CROWD // 10, f"{retries} retries: the crowd's claims conflicted"
        leases = [task.result() for task in done]
        assert all(lease.deliveries == 1 for lease in leases)
        return [lease.value for lease in leases]

    got = run(main)
    assert sorted(got) == list(range(CROWD))
