"""Listings that page by key (``after=``) and the calls that take their rows' tokens
(``remove_many``, ``requeue_dead(tokens=)``, ``purge_dead(tokens=)``), on a real
server: pages join up to the whole listing, never repeat a row when rows come and go
between them, and a token from elsewhere is refused before anything is read."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, List, Sequence

import fdb.tuple
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdbrecipes import FairQueue, PriorityQueue, Queue
from fdbrecipes.aio import AsyncFairQueue, AsyncQueue
from tests.helpers import TestClock

pytestmark = pytest.mark.integration


def paged(listing: Callable[..., Sequence[Any]], size: int, key: Callable[[Any], Any],
          *args: Any, **kwargs: Any) -> List[Any]:
    """Every row of ``listing(*args, limit=size, after=..., **kwargs)``, page after
    page, each ``after`` the ``key`` of the last row of the page before."""
    out: List[Any] = []
    after = None
    while True:
        page = listing(*args, limit=size, after=after, **kwargs)
        out += page
        if len(page) < size:
            return out
        after = key(page[-1])


def itself(row: Any) -> Any:
    return row


def token(row: Any) -> bytes:
    found: bytes = row.token
    return found


def bury(db: Any, q: Any, value: Any, **group: Any) -> None:
    q.push(db, value, **group)
    lease = q.claim(db, 60)
    assert lease is not None and lease.value == value
    assert q.bury(db, lease, f"bad {value}")


def test_pending_pages_join_up(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"])
    q.push_many(db, range(23))
    q.push(db, "with id", id=b"i-1")
    rows = paged(q.pending, 5, token, db)
    assert [r.value for r in rows] == [*range(23), "with id"] == q.items(db)
    assert rows[-1].id == b"i-1" and rows[0].id is None and rows[0].priority is None
    assert all(r.deliveries == 0 for r in rows)
    # an item taken after a page was read: the next page starts after it all the same
    first = q.pending(db, limit=3)
    assert q.pop(db) == 0 and q.pop(db) == 1 and q.pop(db) == 2
    assert [r.value for r in q.pending(db, limit=2, after=first[-1].token)] == [3, 4]
    # given a transaction: one read, as the listing's own
    tr = db.create_transaction()
    assert [r.value for r in q.pending(tr, limit=2, after=first[1].token)] == [3, 4]


def test_priority_pending_both_ways(db: Any, fdb_subspace: Any) -> None:
    pq = PriorityQueue(fdb_subspace["pq"])
    pq.push_many(db, [(f"{p}-{i}", p) for i in range(4) for p in (3, 1, 2)])
    for reverse in (False, True):
        rows = paged(pq.pending, 2, token, db, reverse=reverse)
        assert [r.value for r in rows] == pq.items(db, reverse=reverse)
        assert [r.priority for r in rows] == sorted([1, 2, 3] * 4, reverse=reverse)


def test_expired_leases_are_pending_where_they_were(db: Any, fdb_subspace: Any,
                                                    clock: TestClock) -> None:
    q = Queue(fdb_subspace["q"], clock=clock)
    q.push_many(db, ["a", "b", "c", "d"])
    assert q.claim(db, 10) is not None  # "a", then its lease ends
    clock.advance(11)
    rows = paged(q.pending, 1, token, db)
    assert [r.value for r in rows] == ["a", "b", "c", "d"]


def test_leases_delayed_dead_and_finished_pages(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"], history=3600)
    q.push_many(db, range(7))
    leases = q.claim_many(db, 7, 60)
    assert [i.token for i in paged(q.leases, 3, token, db)] == [
        lease.token for lease in leases]
    assert all(i.id is not None for i in q.leases(db))
    for i in range(5):
        q.push(db, f"later {i}", delay=100 + i)
    assert [d.value for d in paged(q.delayed, 2, token, db)] == [
        f"later {i}" for i in range(5)]
    for lease in leases[:4]:
        assert q.bury(db, lease, "why")
    dead = paged(q.dead, 3, token, db)
    assert [d.value for d in dead] == [0, 1, 2, 3] and all(d.id for d in dead)
    q.ack_many(db, leases[4:])
    done = paged(q.finished, 2, token, db)
    assert sorted((j.state, j.group) for j in done) == [("dead", None)] * 4 + [
        ("succeeded", None)] * 3
    assert [j.finished_at for j in done] == sorted((j.finished_at for j in done), reverse=True)
    record = q.job(db, done[0].id)
    assert record is not None and record.state == done[0].state
    # a dead job requeued: its entry is stale, the listing leaves it out
    assert q.requeue_dead(db, tokens=[dead[0].token]) == 1
    assert len(q.finished(db)) == 6 and dead[0].id not in {j.id for j in q.finished(db)}


def test_fair_queue_groups_and_a_groups_listings(db: Any, fdb_subspace: Any) -> None:
    fair = FairQueue(fdb_subspace["f"], history=3600)
    for g in ("c", "a", "b", b"raw"):
        fair.push(db, f"{g!r} 1", group=g)
        fair.push(db, f"{g!r} 2", group=g)
    assert paged(fair.groups, 2, itself, db) == fair.groups(db)
    assert [r.value for r in paged(fair.pending, 1, token, db, "a")] == [
        "'a' 1", "'a' 2"]
    lease = fair.claim(db, 60)
    assert lease is not None
    [info] = fair.leases(db, lease.group)
    assert fair.leases(db, lease.group, after=info.token) == []
    other = next(g for g in ("a", "b", "c") if g != lease.group)
    with pytest.raises(ValueError, match="another group"):
        fair.leases(db, other, after=info.token)
    fair.ack(db, lease)
    [job] = fair.finished(db)
    assert job.group == lease.group and job.state == "succeeded"
    assert fair.finished(db, after=job.token) == []
    alone = FairQueue(fdb_subspace["alone"])  # one group: a claim takes from it
    bury(db, alone, "dead", group="z")
    [letter] = alone.dead(db, "z")
    assert alone.dead(db, "z", after=letter.token) == []
    assert alone.requeue_dead(db, "z", tokens=[letter.token]) == 1
    assert alone.pending(db, "z")[0].value == "dead"
    rows = fair.pending(db, other)  # a group none of whose items was claimed
    assert fair.remove_many(db, other, [rows[0].token, rows[0].token]) == [
        f"{other!r} 1", None]
    assert fair.remove_many(db, other, [rows[1].token]) == [f"{other!r} 2"]
    assert other not in fair.groups(db)  # its last item went: it left the index


def test_remove_many_pending_and_delayed(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"], history=3600)
    q.push_many(db, ["a", "b", "c"])
    q.push(db, "later", delay=600, id=b"l-1")
    rows = q.pending(db)
    [later] = q.delayed(db)
    assert q.remove_many(db, [rows[1].token, later.token, rows[1].token]) == ["b", "later",
                                                                               None]
    assert q.items(db) == ["a", "c"] and q.delayed(db) == [] and q.size(db) == 2
    record = q.job(db, b"l-1")
    assert record is not None and record.state == "cancelled"
    lease = q.claim(db, 60)  # "a" in flight: not pending any more
    assert lease is not None
    assert q.remove_many(db, [rows[0].token]) == [None]
    assert q.remove_many(db, []) == []
    assert q.stats(db).in_flight == 1


def test_requeue_and_purge_chosen_dead_letters(db: Any, fdb_subspace: Any) -> None:
    q = Queue(fdb_subspace["q"], max_deliveries=3)
    for value in ("d0", "d1", "d2", "d3"):
        bury(db, q, value)
    letters = q.dead(db)
    assert q.requeue_dead(db, tokens=[letters[2].token, letters[0].token]) == 2
    assert q.items(db) == ["d0", "d2"]  # oldest first, as requeue_dead moves them
    assert q.purge_dead(db, tokens=[letters[3].token, letters[0].token]) == 1
    assert [d.value for d in q.dead(db)] == ["d1"]
    assert q.stats(db).dead == 1
    with pytest.raises(TypeError, match="not both"):
        q.requeue_dead(db, 3, tokens=[letters[1].token])
    assert q.purge_dead(db, tokens=[]) == 0


def test_async_twins_page_alike(db: Any, fdb_subspace: Any) -> None:
    async def main() -> None:
        q = AsyncQueue(fdb_subspace["q"])
        await q.push_many(db, range(5))
        first = await q.pending(db, limit=2)
        rest = await q.pending(db, after=first[-1].token)
        assert [r.value for r in first + rest] == list(range(5))
        assert await q.remove_many(db, [rest[0].token]) == [2]
        fair = AsyncFairQueue(fdb_subspace["f"])
        await fair.push(db, "x", group="g1")
        await fair.push(db, "y", group="g2")
        assert await fair.groups(db, after="g1") == ["g2"]
    asyncio.run(main())


HOSTILE = [b"", b"\xff" * 40, fdb.tuple.pack(("p",)), fdb.tuple.pack(("p", True, b"x")),
           fdb.tuple.pack(("p", 1, b"")), fdb.tuple.pack(("p", 1, b"x" * 65)),
           fdb.tuple.pack(("d", 1, 2)), fdb.tuple.pack(("dead", 1, (1, b"r"), 3)),
           fdb.tuple.pack(("dead", 1.5, (1, b"r"))), fdb.tuple.pack(("f", 1, b"id")),
           fdb.tuple.pack(("lease", 5)), fdb.tuple.pack(("p", 1, b"r" * 60)) + b"x" * 3000,
           fdb.tuple.pack(("p", 1, b"r", 3))]


def test_tokens_from_elsewhere_are_refused(db: Any, fdb_subspace: Any) -> None:
    q, pq = Queue(fdb_subspace["q"]), PriorityQueue(fdb_subspace["pq"])
    fair = FairQueue(fdb_subspace["f"])
    afters = [(q.pending, ()), (q.delayed, ()), (q.dead, ()), (q.leases, ()),
              (q.finished, ()), (pq.pending, ()), (fair.pending, ("g",)),
              (fair.finished, ()), (fair.dead, ("g",))]
    named = [(q.remove_many, {}), (q.requeue_dead, {"tokens": True}),
             (q.purge_dead, {"tokens": True})]
    for bad in [*HOSTILE, "a str"]:
        error = TypeError if isinstance(bad, str) else ValueError
        for listing, args in afters:
            with pytest.raises(error):
                listing(db, *args, after=bad)
        for call, how in named:
            with pytest.raises(error):
                call(db, tokens=[bad]) if how else call(db, [bad])
    q.push(db, "kept")
    pq.push(db, "p", priority=1)
    with pytest.raises(ValueError):  # a PriorityQueue's token in a Queue
        q.pending(db, after=pq.pending(db)[0].token)
    with pytest.raises(ValueError, match="at most 1,000"):
        q.remove_many(db, [q.pending(db)[0].token] * 1001)
    assert q.items(db) == ["kept"]


@settings(max_examples=25)
@given(st.lists(st.tuples(st.integers(1, 7), st.integers(0, 3)), min_size=1, max_size=8))
def test_paging_while_items_come_and_go(db: Any, fdb_subspace: Any,
                                        steps: List[Any]) -> None:
    """Against a model: page through a queue while, between pages, items are popped at
    the front and pushed at the tail.  No row is listed twice, rows come in push order,
    every item before the last one listed was listed or popped, and once a short page
    ends the listing, every item never popped was listed."""
    q = Queue(fdb_subspace["prop"])
    q.clear(db)
    q.push_many(db, range(20))
    popped: List[int] = []
    pushed = 20
    seen: List[int] = []
    after = None
    ended = False
    for size, churn in steps:
        page = q.pending(db, limit=size, after=after)
        seen += [r.value for r in page]
        if len(page) < size:
            ended = True
            break
        after = page[-1].token
        popped += q.pop_many(db, churn)
        q.push_many(db, range(pushed, pushed + churn))
        pushed += churn
    assert seen == sorted(set(seen))
    upto = seen[-1] + 1 if seen else 0
    assert set(range(upto)) <= set(seen) | set(popped)
    if ended:
        assert set(range(pushed)) == set(seen) | set(popped)


def test_a_jobs_record_tells_where_its_item_is(db: Any, fdb_subspace: Any,
                                               clock: TestClock) -> None:
    q = Queue(fdb_subspace["q"], history=3600, max_deliveries=1, clock=clock)
    fair = FairQueue(fdb_subspace["f"], history=3600)

    def token_of(id_: bytes) -> Any:
        record = q.job(db, id_)
        assert record is not None
        return record.token

    q.push(db, "waits", id=b"p")
    q.push(db, "later", id=b"d", delay=60)
    assert token_of(b"p") == q.pending(db)[0].token
    assert token_of(b"d") == q.delayed(db)[0].token
    lease = q.claim(db, 30)
    assert lease is not None and token_of(b"p") == lease.token
    assert q.bury(db, lease, "broken")
    assert token_of(b"p") == q.dead(db)[0].token
    assert q.requeue_dead(db, tokens=[token_of(b"p")]) == 1
    assert token_of(b"p") == q.pending(db)[0].token
    lease = q.claim(db, 30)
    assert lease is not None
    clock.advance(31)  # its lease ended on its last delivery: dead, not moved yet
    assert token_of(b"p") == q.dead(db)[0].token
    assert q.remove_many(db, [token_of(b"d")]) == ["later"]
    assert token_of(b"d") is None  # cancelled
    fair.push(db, "f", group="g", id=b"j")
    fair_lease = fair.claim(db, 30)
    assert fair_lease is not None
    record = fair.job(db, b"j", group="g")
    assert record is not None and record.token == fair_lease.token
    assert fair.release(db, record.token)


def test_lookup_a_row_by_its_token(db: Any, fdb_subspace: Any, clock: TestClock) -> None:
    q = PriorityQueue(fdb_subspace["pq"], clock=clock, history=60)
    q.push(db, "now", priority=2, id=b"n")
    q.push(db, "soon", priority=1, delay=5)
    [pending] = q.pending(db)
    [delayed] = q.delayed(db)
    assert q.lookup(db, pending.token) == pending
    assert q.lookup(db, delayed.token) == delayed
    clock.advance(6)  # its delay passed: a pending item now, at its place
    row = q.lookup(db, delayed.token)
    assert type(row).__name__ == "PendingItem" and row is not None and row.value == "soon"
    lease = q.claim_max(db, 30)
    assert lease is not None and lease.value == "now"
    [info] = q.leases(db)
    assert q.lookup(db, lease.token) == info and q.lookup(db, pending.token) is None
    assert q.bury(db, lease, "<why>")
    [letter] = q.dead(db)
    assert q.lookup(db, letter.token) == letter and q.lookup(db, lease.token) is None
    record = q.job(db, b"n")
    assert record is not None and q.lookup(db, record.token or b"") == letter
    fair = FairQueue(fdb_subspace["f"])
    fair.push(db, "x", group="g")
    fair_lease = fair.claim(db, 30)
    assert fair_lease is not None
    found = fair.lookup(db, "g", fair_lease.token)
    assert found is not None and found.token == fair_lease.token
    with pytest.raises(ValueError, match="another group"):
        fair.lookup(db, "h", fair_lease.token)
