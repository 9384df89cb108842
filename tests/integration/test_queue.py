"""Queue against a real FoundationDB server."""

from __future__ import annotations

import uuid
from typing import Any, Callable, List

import fdb
import pytest

from fdbrecipes import Queue
from tests.helpers import dump, everything

pytestmark = pytest.mark.integration


@pytest.fixture
def q(fdb_subspace: Any) -> Queue:
    return Queue(fdb_subspace)


def test_fifo_order_and_empty_pop(db: Any, q: Queue) -> None:
    for value in [b"a", "b", 3, (4, b"x"), 5.5, True, uuid.UUID(int=7)]:
        q.push(db, value)
    out = [q.pop(db) for _ in range(7)]
    assert out == [b"a", "b", 3, (4, b"x"), 5.5, True, uuid.UUID(int=7)]
    assert [type(v) for v in out] == [bytes, str, int, tuple, float, bool, uuid.UUID]
    assert q.pop(db) is None
    assert q.pop_many(db, 3) == []
    assert q.peek(db) is None
    assert q.is_empty(db)


def test_values_round_trip_exactly(db: Any, q: Queue) -> None:
    values = [b"\x00\xff", "\u00e9\u4e2d", -(2**100), 2**64, -0.0, 1, 1.0, False,
              (None, (b"", ())), b"x" * (100_000 - 5)]
    q.push_many(db, values)
    out = q.pop_many(db, len(values))
    assert out == values
    assert [type(v) for v in out] == [type(v) for v in values]
    assert str(out[4]) == "-0.0"


def test_push_many_and_pop_many_keep_order(db: Any, q: Queue) -> None:
    q.push_many(db, range(10))
    q.push(db, 10)
    q.push_many(db, [11, 12])
    q.push_many(db, [])
    assert q.items(db) == list(range(13))
    assert q.items(db, limit=3) == [0, 1, 2]
    assert q.items(db, limit=0) == []
    assert q.pop_many(db, 4) == [0, 1, 2, 3]
    assert q.pop_many(db, 0) == []
    assert q.pop_many(db, 100) == list(range(4, 13))


def test_items_given_a_database_run_across_pages(db: Any, q: Queue) -> None:
    """Given a Database, items() reads pages of 1,000, each in its own transaction;
    the pages join up, also when the last one is exactly full."""
    for start in range(0, 2_000, 500):
        q.push_many(db, range(start, start + 500))
    assert q.items(db) == list(range(2_000))
    assert q.items(db, limit=1_000) == list(range(1_000))
    assert q.items(db, limit=1_999) == list(range(1_999))


def test_peek_does_not_remove(db: Any, q: Queue) -> None:
    q.push(db, b"first")
    q.push(db, b"second")
    assert q.peek(db) == b"first"
    assert q.peek(db) == b"first"
    assert q.size(db) == 2
    assert q.pop(db) == b"first"
    assert q.peek(db) == b"second"


def test_size_under_every_operation(db: Any, q: Queue) -> None:
    assert q.size(db) == 0
    q.push(db, 1)
    assert q.size(db) == 1
    q.push_many(db, [2, 3, 4, 5])
    assert q.size(db) == 5
    q.pop(db)
    assert q.size(db) == 4
    q.pop_many(db, 2)
    assert q.size(db) == 2
    lease = q.claim(db, 60)
    assert lease is not None and q.size(db) == 2  # a leased item is still held
    assert q.release(db, lease) and q.size(db) == 2
    lease = q.claim(db, 60)
    assert lease is not None
    q.ack(db, lease)
    assert q.size(db) == 1
    q.push(db, 6, id=b"once")
    q.push(db, 6, id=b"once")
    assert q.size(db) == 2
    q.pop(db)
    q.pop(db)
    assert q.size(db) == 0
    assert q.pop(db) is None and q.size(db) == 0
    q.push_many(db, [7, 8])
    q.clear(db)
    assert q.size(db) == 0 and q.is_empty(db)


def test_operations_compose_with_the_callers_transaction(db: Any, q: Queue) -> None:
    done = q.subspace["app-done"]

    @fdb.transactional
    def take(tr: Any) -> Any:
        job = q.pop(tr)
        if job is not None:
            tr[done.pack((job,))] = b""
        return job

    q.push_many(db, [b"j1", b"j2"])
    assert take(db) == b"j1"
    assert db[done.pack((b"j1",))] == b""
    assert q.items(db) == [b"j2"]


def test_a_pop_in_a_failed_transaction_leaves_the_item(db: Any, q: Queue) -> None:
    q.push_many(db, [b"keep", b"other"])

    class Boom(Exception):
        pass

    @fdb.transactional
    def pop_then_fail(tr: Any) -> None:
        assert q.pop(tr) == b"keep"
        raise Boom

    with pytest.raises(Boom):
        pop_then_fail(db)
    tr = db.create_transaction()
    assert q.pop(tr) == b"keep"
    tr.cancel()  # never committed
    assert q.items(db) == [b"keep", b"other"]
    assert q.size(db) == 2


def test_push_and_pop_in_one_transaction(db: Any, q: Queue) -> None:
    @fdb.transactional
    def both(tr: Any) -> List[Any]:
        q.push(tr, b"x")
        q.push(tr, b"y")
        return [q.pop(tr), q.size(tr)]

    assert both(db) == [b"x", 1]
    assert q.items(db) == [b"y"]


def test_bad_inputs_leave_the_subspace_unchanged(db: Any, q: Queue, fdb_subspace: Any) -> None:
    q.push_many(db, [b"a", b"b"])
    lease = q.claim(db, 60)
    before = dump(db, fdb_subspace)
    bad: List[Callable[[], Any]] = [
        lambda: q.push(db, None),
        lambda: q.push(db, [1]),
        lambda: q.push(db, b"x" * 100_000),
        lambda: q.push(db, b"x", id=""),
        lambda: q.push_many(db, [b"ok", b"ok", None]),
        lambda: q.push_many(db, [b"y" * 95_000] * 100),
        lambda: q.pop_many(db, -1),
        lambda: q.claim(db, -5),
        lambda: q.ack(db, b"junk"),
        lambda: q.extend(db, lease, 0),
        lambda: q.push(42, b"x"),
        lambda: q.pop("db"),
        lambda: q.pop_wait(db.create_transaction(), timeout=1),
    ]
    for call in bad:
        with pytest.raises((TypeError, ValueError)):
            call()
    assert dump(db, fdb_subspace) == before


def test_works_in_a_directory_subspace(db: Any) -> None:
    path = ("fdbrecipes-test", "dir", uuid.uuid4().hex)
    directory = fdb.directory.create_or_open(db, path)
    try:
        q = Queue(directory)
        q.push_many(db, [1, 2])
        assert q.pop(db) == 1
        assert all(directory.contains(k) for k in dump(db, directory))
    finally:
        fdb.directory.remove(db, path)


def test_nothing_is_written_outside_the_subspace(db: Any, q: Queue, fdb_subspace: Any) -> None:
    def outside() -> Any:
        return {k: v for k, v in everything(db).items() if not fdb_subspace.contains(k)}

    before = outside()
    q.push_many(db, range(20))
    q.push(db, b"id'd", id=b"k1")
    for _ in range(5):
        q.pop(db)
    lease = q.claim(db, 30)
    assert lease is not None
    q.extend(db, lease, 40)
    other = q.claim(db, 30)
    assert other is not None
    q.release(db, other)
    q.pop_many(db, 7)
    q.items(db)
    Queue(fdb_subspace, high_contention=True).pop(db)
    assert outside() == before
    q.clear(db)
    # clear() keeps the counters "pushed" (the wake key: waiters must see it change)
    # and "taken" (set to match it) and the receipts of calls that may be in flight;
    # nothing else.
    counters = {fdb_subspace.pack(("n", "pushed")), fdb_subspace.pack(("n", "taken"))}
    kept = [k for k in dump(db, fdb_subspace)
            if k not in counters and not fdb_subspace["c"].contains(k)]
    assert kept == [] and q.size(db) == 0


def test_read_methods_accept_a_snapshot_view(db: Any, q: Queue) -> None:
    q.push_many(db, [1, 2])
    tr = db.create_transaction()
    assert q.peek(tr.snapshot) == 1
    assert q.items(tr.snapshot) == [1, 2]
    assert q.size(tr.snapshot) == 2
    assert not q.is_empty(tr.snapshot)
    with pytest.raises(TypeError, match="^tr must be"):
        q.pop(tr.snapshot)
    tr.cancel()
