"""Unique jobs and debounce (issue 40) on a real server: what each ``covers`` holds the
key through, ``skip``/``raise``/``replace`` in each state, a running job never
duplicated, 1,000 debounced pushes giving one run with the last value."""

from __future__ import annotations

import asyncio
from typing import Any

import fdb
import pytest

from fdbrecipes import PriorityQueue, Queue, Unique, UniqueConflictError
from fdbrecipes.aio import AsyncQueue
from tests.helpers import Faulty, TestClock, eventually_async

pytestmark = pytest.mark.integration


def queue(subspace: Any, clock: Any = None, **options: Any) -> Queue[Any]:
    return Queue(subspace, clock=clock, history=3600, **options)


def test_skip_returns_the_holder_while_pending_delayed_and_running(
        db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace)
    first = q.push(db, "a", unique="k")
    assert first is not None and first.startswith(b"unique:")
    assert q.push(db, "b", unique="k") == first  # pending
    assert q.unique_job(db, "k") == first
    assert q.items(db) == ["a"]
    lease = q.claim(db, 30)
    assert lease is not None and lease.id == first
    assert q.push(db, "c", unique="k") == first  # running
    assert q.size(db) == 1
    q.ack(db, lease)
    assert q.unique_job(db, "k") is None
    second = q.push(db, "d", unique="k")
    assert second not in (None, first)
    assert q.items(db) == ["d"]
    # delayed
    assert q.push(db, "e", unique=b"other", delay=60) == q.push(db, "f", unique=b"other")
    assert q.stats(db).delayed == 1
    # "k" and b"k" are different keys
    assert q.push(db, "g", unique=b"k") not in (first, second)


def test_raise_names_the_holder_and_pushes_nothing(db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace)
    first = q.push(db, 1, unique=Unique("k", on_conflict="raise"))
    with pytest.raises(UniqueConflictError) as caught:
        q.push(db, 2, unique=Unique("k", on_conflict="raise"))
    assert caught.value.job == first and caught.value.key == "k"
    assert q.items(db) == [1]
    lease = q.claim(db, 30)
    assert lease is not None
    with pytest.raises(UniqueConflictError):
        q.push(db, 3, unique=Unique("k", on_conflict="raise"))
    q.ack(db, lease)
    q.push(db, 4, unique=Unique("k", on_conflict="raise"))
    assert q.items(db) == [4]


def test_covers_queued_frees_the_key_at_the_claim(db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace)
    key = Unique("k", covers="queued")
    first = q.push(db, 1, unique=key)
    assert q.push(db, 2, unique=key) == first
    lease = q.claim(db, 30)
    assert lease is not None and q.unique_job(db, "k") is None
    second = q.push(db, 3, unique=key)
    assert second != first
    # the first job's end does not touch the key the second holds
    q.release(db, lease)
    again = q.claim(db, 30)
    assert again is not None and again.id == first  # back at its place, before 3
    q.ack(db, again)
    assert q.unique_job(db, "k") == second


def test_covers_finished_holds_the_key_for_its_window(db: Any, fdb_subspace: Any) -> None:
    clock = TestClock()
    q = queue(fdb_subspace, clock)
    key = Unique("k", covers="finished", window=60)
    first = q.push(db, 1, unique=key)
    lease = q.claim(db, 30)
    assert lease is not None
    q.ack(db, lease)
    assert q.push(db, 2, unique=key) == first  # finished, within its window
    assert q.size(db) == 0 and q.unique_job(db, "k") == first
    with pytest.raises(UniqueConflictError):
        q.push(db, 2, unique=Unique("k", covers="finished", window=60, on_conflict="raise"))
    # replace leaves a finished holder alone
    assert q.push(db, 2, unique=Unique("k", covers="finished", window=60,
                                       on_conflict="replace")) == first
    clock.advance(61)
    assert q.unique_job(db, "k") is None
    second = q.push(db, 3, unique=key)
    assert second != first and q.items(db) == [3]


def test_a_dead_job_frees_its_key(db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace, max_deliveries=1)
    first = q.push(db, 1, unique="k")
    lease = q.claim(db, 30)
    assert lease is not None
    q.bury(db, lease, "broken")
    assert q.unique_job(db, "k") is None
    assert q.push(db, 2, unique="k") != first


def test_replace_gives_a_pending_job_the_new_value_at_its_place(
        db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace)
    q.push(db, "before")
    first = q.push(db, "v1", unique=Unique("k", on_conflict="replace"))
    q.push(db, "after")
    assert q.push(db, "v2", unique=Unique("k", on_conflict="replace")) == first
    assert q.items(db) == ["before", "v2", "after"]
    assert q.size(db) == 3


def test_replace_restarts_the_delay(db: Any, fdb_subspace: Any) -> None:
    clock = TestClock()
    q = queue(fdb_subspace, clock)
    debounced = Unique("k", on_conflict="replace")
    first = q.push(db, "v1", unique=debounced, delay=10)
    clock.advance(8)
    assert q.push(db, "v2", unique=debounced, delay=10) == first
    clock.advance(8)  # 16 s after the first push, 8 after the second
    assert q.claim(db, 30) is None
    clock.advance(3)
    lease = q.claim(db, 30)
    assert lease is not None and lease.value == "v2" and lease.id == first
    q.ack(db, lease)
    assert q.size(db) == 0 and q.stats(db).delayed == 0
    record = q.job(db, first)
    assert record is not None and record.state == "succeeded"


def test_replace_makes_a_delayed_job_visible_without_delay(db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace)
    debounced = Unique("k", on_conflict="replace")
    first = q.push(db, "v1", unique=debounced, delay=60)
    assert q.push(db, "v2", unique=debounced) == first
    assert q.items(db) == ["v2"]
    stats = q.stats(db)
    assert (stats.visible, stats.delayed) == (1, 0)


def test_replace_never_duplicates_a_running_job(db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace)
    debounced = Unique("k", on_conflict="replace")
    first = q.push(db, "v1", unique=debounced)
    lease = q.claim(db, 30)
    assert lease is not None
    assert q.push(db, "v2", unique=debounced) == first
    assert q.push(db, "v3", unique=debounced, delay=5) == first
    assert q.size(db) == 1 and q.claim(db, 30) is None and q.stats(db).delayed == 0
    q.ack(db, lease)
    assert q.size(db) == 0 and q.unique_job(db, "k") is None


def test_1000_debounced_pushes_give_one_run_with_the_last_value(
        db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace)
    debounced = Unique("search-index", on_conflict="replace")
    ids = {q.push(db, n, unique=debounced, delay=3) for n in range(1000)}
    assert len(ids) == 1
    [job] = ids
    assert q.size(db) == 1
    lease = q.claim_wait(db, 30, timeout=30)
    assert lease is not None and lease.value == 999 and lease.id == job
    q.ack(db, lease)
    assert q.size(db) == 0 and q.claim(db, 30) is None
    assert q.unique_job(db, "search-index") is None
    record = q.job(db, job)
    assert record is not None and record.state == "succeeded" and record.attempts == 1


def test_pushes_in_one_transaction_meet_each_other(db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace)

    @fdb.transactional
    def twice(tr: Any) -> Any:
        return (q.push(tr, 1, unique=Unique("k", on_conflict="replace")),
                q.push(tr, 2, unique=Unique("k", on_conflict="replace")))

    first, second = twice(db)
    assert first == second and q.items(db) == [2]


def test_a_cancelled_pending_job_frees_its_key(db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace)
    first = q.push(db, 1, unique="k")
    assert first is not None
    assert q.remove(db, id=first) == 1
    assert q.unique_job(db, "k") is None
    assert q.push(db, 2, unique="k") != first


def test_a_pop_frees_the_key_and_works_without_history(db: Any, fdb_subspace: Any) -> None:
    q: Queue[int] = Queue(fdb_subspace)
    first = q.push(db, 1, unique="k")
    assert first is not None and q.push(db, 2, unique="k") == first
    assert q.pop(db) == 1
    assert q.unique_job(db, "k") is None and q.pop(db) is None


def test_priority_queue_keeps_the_holders_priority(db: Any, fdb_subspace: Any) -> None:
    q: PriorityQueue[str] = PriorityQueue(fdb_subspace)
    debounced = Unique("k", on_conflict="replace")
    first = q.push(db, "low", 5, unique=debounced)
    q.push(db, "other", 3)
    assert q.push(db, "new", 1, unique=debounced) == first
    assert q.pop_min(db) == "other" and q.pop_min(db) == "new"


def test_the_async_twin(db: Any, fdb_subspace: Any) -> None:
    async def main() -> None:
        q: AsyncQueue[int] = AsyncQueue(fdb_subspace)
        first = await q.push(db, 1, unique=Unique("k", on_conflict="replace"))
        assert await q.push(db, 2, unique=Unique("k", on_conflict="replace")) == first
        assert await q.unique_job(db, "k") == first
        assert await q.items(db) == [2]

    asyncio.run(main())


def test_bad_arguments_write_nothing(db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace)
    with pytest.raises(ValueError, match="unique and id"):
        q.push(db, 1, unique="k", id=b"x")
    with pytest.raises(ValueError, match="id must not begin"):
        q.push(db, 1, id=b"unique:forged")
    with pytest.raises(TypeError, match="unique"):
        q.push(db, 1, unique=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="covers"):
        q.push(db, 1, unique=Unique("k", covers="done"))
    with pytest.raises(ValueError, match="unsharded"):
        queue(fdb_subspace, shards=2).push(db, 1, unique="k")
    assert q.size(db) == 0 and q.unique_job(db, "k") is None


def test_a_unique_jobs_id_finds_its_item_without_an_id_key(db: Any, fdb_subspace: Any) -> None:
    """A unique push covering "running" or "finished" writes no id key (its entry tells
    where the job is): the job's record still names its item pending, delayed, running,
    dead and requeued (which writes the id key), and removal by id finds it."""
    q = queue(fdb_subspace, max_deliveries=1)
    job = q.push(db, "waits", unique="k")

    def token() -> Any:
        record = q.job(db, job)
        assert record is not None
        return record.token

    assert token() == q.pending(db)[0].token
    lease = q.claim(db, 30)
    assert lease is not None and token() == lease.token
    assert q.bury(db, lease, "broken")
    assert token() == q.dead(db)[0].token
    assert q.requeue_dead(db, tokens=[token()]) == 1
    assert token() == q.pending(db)[0].token
    assert q.remove(db, id=job) == "waits" and q.size(db) == 0
    later = q.push(db, "later", unique=Unique("d", covers="finished", window=60), delay=60)
    record = q.job(db, later)
    assert record is not None and record.token == q.delayed(db)[0].token
    assert q.remove(db, id=later) == "later" and q.stats(db).delayed == 0
    queued = q.push(db, "queued", unique=Unique("q", covers="queued"))
    assert q.remove(db, id=queued) == "queued"


def test_a_requeued_finished_job_never_overwrites_a_newer_holder(
        db: Any, fdb_subspace: Any) -> None:
    """A dead job covering "finished" requeued while a newer job holds its key runs
    beside it; its ack leaves the holder's entry alone (no second job of the key)."""
    clock = TestClock()
    q = queue(fdb_subspace, clock, max_deliveries=1)
    key = Unique("k", covers="finished", window=5)
    first = q.push(db, 1, unique=key)
    lease = q.claim(db, 10)
    assert lease is not None and q.bury(db, lease, "broken")
    clock.advance(6)  # its window passed: the key is free
    second = q.push(db, 2, unique=key)
    assert second != first and q.unique_job(db, "k") == second
    assert q.requeue_dead(db) == 1
    assert q.unique_job(db, "k") == second  # it runs beside the holder
    running = q.claim(db, 100)
    assert running is not None and running.id == second
    lease = q.claim(db, 10)
    assert lease is not None and lease.id == first
    q.ack(db, lease)
    assert q.unique_job(db, "k") == second
    clock.advance(6)  # past the requeued job's window
    assert q.push(db, 3, unique="other") is not None  # collects finished entries
    assert q.push(db, 3, unique=key) == second and q.items(db) == [3]  # "other" only
    q.ack(db, running)
    assert q.push(db, 4, unique=key) == second  # finished, within its own window
    clock.advance(6)
    third = q.push(db, 4, unique=key)
    assert third not in (first, second) and q.unique_job(db, "k") == third


def test_a_requeued_job_never_clears_a_newer_holders_entry(db: Any, fdb_subspace: Any) -> None:
    q = queue(fdb_subspace, max_deliveries=1)
    first = q.push(db, 1, unique="k")
    lease = q.claim(db, 10)
    assert lease is not None and q.bury(db, lease, "broken")
    second = q.push(db, 2, unique="k")
    assert q.requeue_dead(db) == 1
    running = q.claim(db, 100)
    assert running is not None and running.id == second
    lease = q.claim(db, 10)
    assert lease is not None and lease.id == first
    q.ack(db, lease)
    assert q.unique_job(db, "k") == second and q.push(db, 3, unique="k") == second


def test_a_requeued_dead_job_takes_its_free_key_back(db: Any, fdb_subspace: Any) -> None:
    """A requeued dead job holds its key again when the key is free or still marked
    with its own finish; its own finish's forgetting is cancelled."""
    clock = TestClock()
    q = queue(fdb_subspace, clock, max_deliveries=1)
    first = q.push(db, 1, unique="k")
    key = Unique("f", covers="finished", window=5)
    finished = q.push(db, 2, unique=key)
    for _ in range(2):
        lease = q.claim(db, 10)
        assert lease is not None and q.bury(db, lease, "broken")
    assert q.unique_job(db, "k") is None and q.unique_job(db, "f") == finished
    assert q.requeue_dead(db) == 2
    assert q.unique_job(db, "k") == first and q.push(db, 3, unique="k") == first
    clock.advance(6)  # past the window of its first finish
    assert q.push(db, 3, unique="other") is not None  # collects finished entries
    assert q.unique_job(db, "f") == finished and q.push(db, 3, unique=key) == finished
    assert q.size(db) == 3
    for _ in range(2):  # then they leave as usual
        lease = q.claim(db, 10)
        assert lease is not None
        q.ack(db, lease)
    assert q.unique_job(db, "k") is None and q.unique_job(db, "f") == finished



def test_a_cancelled_pop_gives_the_key_back_with_its_job(
        db: Any, fdb_cluster_file: str, fdb_subspace: Any) -> None:
    """A pop cancelled with its commit in flight, which landed, is undone: the job
    holds its key again, and its finish's scheduled forgetting is cancelled."""
    clock = TestClock()
    key = Unique("k", covers="finished", window=5)
    job = queue(fdb_subspace, clock).push(db, 1, unique=key)
    faulty = Faulty(fdb_cluster_file)

    async def main() -> None:
        q = AsyncQueue(fdb_subspace, clock=clock, history=3600)
        faulty.pending[:] = ["applied:hang"]
        popping = asyncio.ensure_future(q.pop(faulty.db))
        await eventually_async(lambda: not faulty.pending, 30, "the pop's commit",
                               every=0.01)
        popping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await popping

    asyncio.run(main())
    q = queue(fdb_subspace, clock)
    assert q.items(db) == [1] and q.unique_job(db, "k") == job
    clock.advance(6)  # past the window the pop's finish set
    assert q.push(db, 2, unique="other") is not None  # collects finished entries
    assert q.unique_job(db, "k") == job and q.push(db, 2, unique=key) == job
