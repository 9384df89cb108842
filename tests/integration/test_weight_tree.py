"""WeightTree against a real FoundationDB server."""

from __future__ import annotations

import random
import struct
import threading
from collections import Counter, defaultdict
from typing import Any, Dict, List, Tuple

import fdb
import pytest

from fdbrecipes import WeightTree
from fdbrecipes._drivers.blocking import drive
from fdbrecipes._fdb import ITERATOR, Range, Spans, kv_layout
from fdbrecipes._tree.engine import LEVELS, node_index
from tests.helpers import chi_square_p, dump, run_threads


def read_le64(data: bytes) -> int:
    """A counter written by FoundationDB's atomic ADD (little-endian int64)."""
    return int(struct.unpack("<q", data[:8].ljust(8, b"\x00"))[0])


pytestmark = pytest.mark.integration


@pytest.fixture
def tree(fdb_subspace: Any) -> WeightTree:
    return WeightTree(fdb_subspace, rng=random.Random(2024))


def owners(db: Any, tree: WeightTree) -> List[Any]:
    """The value owning each point 0..total-1, by peeking at every point."""
    return [tree.peek(db, point=p) for p in range(tree.total_weight(db))]


def check_sums(db: Any, tree: WeightTree, fdb_subspace: Any) -> None:
    """Every stored sum equals the sum of its leaves, recomputed from a full scan."""
    kvs = dump(db, fdb_subspace)
    leaves = {fdb_subspace["w"].unpack(k): read_le64(v) for k, v in kvs.items()
              if fdb_subspace["w"].contains(k)}
    expected: Dict[Tuple[int, int], int] = defaultdict(int)
    for (seq, _), weight in leaves.items():
        for level in range(1, LEVELS + 1):
            expected[(level, node_index(level, seq))] += weight
    stored = {fdb_subspace["s"].unpack(k): read_le64(v) for k, v in kvs.items()
              if fdb_subspace["s"].contains(k)}
    assert stored == {k: v for k, v in expected.items() if v}, "sums drifted"
    assert 0 not in stored.values(), "a zero sum was left behind"
    assert tree.total_weight(db) == sum(leaves.values())
    assert tree.size(db) == len(leaves)
    values = {fdb_subspace["v"].unpack(k) for k in kvs if fdb_subspace["v"].contains(k)}
    assert values == set(leaves)


def test_every_point_belongs_to_one_interval(db: Any, tree: WeightTree) -> None:
    weights = {"a": 3, "b": 1, "c": 5, "d": 2}
    for name, w in weights.items():
        tree.push(db, name, w)
    items = tree.items(db)
    assert [(v, w) for _, v, w in items] == list(weights.items())
    expected = [name for name, w in weights.items() for _ in range(w)]
    assert owners(db, tree) == expected
    for bad in (tree.total_weight(db), 10**6):
        with pytest.raises(ValueError, match="point must be <"):
            tree.peek(db, point=bad)


@pytest.mark.parametrize("n", [1, 2, 63, 64, 65, 200])
def test_exhaustive_points_across_node_boundaries(db: Any, tree: WeightTree, n: int) -> None:
    rng = random.Random(n)
    weights = [rng.randint(1, 4) for _ in range(n)]
    tree.push_many(db, [(i, w) for i, w in enumerate(weights)])
    assert owners(db, tree) == [i for i, w in enumerate(weights) for _ in range(w)]


def test_pop_with_a_point_removes_its_owner(db: Any, tree: WeightTree, fdb_subspace: Any) -> None:
    tree.push_many(db, [("a", 2), ("b", 3), ("c", 4)])
    assert tree.pop(db, point=4) == "b"
    assert [v for _, v, _ in tree.items(db)] == ["a", "c"]
    assert owners(db, tree) == ["a", "a", "c", "c", "c", "c"]
    with pytest.raises(ValueError):
        tree.pop(db, point=6)
    assert tree.pop(db, point=0) == "a"
    assert tree.pop(db, point=3) == "c"
    assert tree.pop(db) is None
    with pytest.raises(ValueError):
        tree.pop(db, point=0)  # an empty tree has no points
    assert tree.total_weight(db) == 0 and tree.size(db) == 0 and tree.is_empty(db)
    leftovers = [k for k in dump(db, fdb_subspace)
                 if fdb_subspace["s"].contains(k) or fdb_subspace["w"].contains(k)]
    assert leftovers == []


def test_frequencies_follow_the_weights(db: Any, tree: WeightTree) -> None:
    """60,000 peeks at uniform random points: chi-square against 1/6, 1/3, 1/2."""
    for name, w in (("one", 1), ("two", 2), ("three", 3)):
        tree.push(db, name, w)
    rng = random.Random(7)
    counts: Counter[Any] = Counter()

    @fdb.transactional
    def peek_many(tr: Any, points: List[int]) -> List[Any]:
        return [tree.peek(tr, point=p) for p in points]

    batches = [[rng.randrange(6) for _ in range(200)] for _ in range(300)]
    lock = threading.Lock()

    def worker(mine: List[List[int]]) -> None:
        for points in mine:
            seen = peek_many(db, points)
            with lock:
                counts.update(seen)

    threads = [threading.Thread(target=worker, args=(batches[k::6],)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    observed = [counts["one"], counts["two"], counts["three"]]
    assert sum(observed) == 60_000
    assert chi_square_p(observed, [10_000, 20_000, 30_000]) > 0.001


def test_random_pops_follow_the_weights(db: Any, fdb_subspace: Any) -> None:
    """pop() draws its own point: the heavy item is popped first most often."""
    firsts: Counter[Any] = Counter()
    tree = WeightTree(fdb_subspace)  # SystemRandom
    for _ in range(300):
        tree.push_many(db, [("light", 1), ("heavy", 9)])
        firsts[tree.pop(db)] += 1
        tree.pop(db)
    assert chi_square_p([firsts["light"], firsts["heavy"]], [30, 270]) > 0.001


def test_get_remove_set_weight(db: Any, tree: WeightTree, fdb_subspace: Any) -> None:
    h1 = tree.push(db, "a", 5)
    h2, h3 = tree.push_many(db, [("b", 1), ("c", 2)])
    assert tree.get(db, h1) == ("a", 5)
    assert tree.set_weight(db, h1, 2) == 5
    assert tree.get(db, h1) == ("a", 2)
    assert owners(db, tree) == ["a", "a", "b", "c", "c"]
    assert tree.remove(db, h2) == "b"
    assert tree.remove(db, h2) is None
    assert tree.get(db, h2) is None
    assert tree.set_weight(db, h2, 9) is None
    assert owners(db, tree) == ["a", "a", "c", "c"]
    assert tree.total_weight(db) == 4 and tree.size(db) == 2
    assert [h for h, _, _ in tree.items(db)] == [h1, h3]
    check_sums(db, tree, fdb_subspace)


def test_sums_stay_exact_under_a_random_workload(db: Any, tree: WeightTree,
                                                 fdb_subspace: Any) -> None:
    rng = random.Random(11)
    live: Dict[bytes, Tuple[int, int]] = {}
    for step in range(400):
        action = rng.random()
        if action < 0.4 or not live:
            h = tree.push(db, step, rng.randint(1, 2**32))
            live[h] = (step, 0)
        elif action < 0.55:
            handles = tree.push_many(db, [(step + k / 10, rng.randint(1, 50)) for k in range(5)])
            live.update({h: (step, 0) for h in handles})
        elif action < 0.7:
            h = rng.choice(sorted(live))
            assert tree.remove(db, h) is not None
            del live[h]
        elif action < 0.85:
            h = rng.choice(sorted(live))
            assert tree.set_weight(db, h, rng.randint(1, 1000)) is not None
        else:
            value = tree.pop(db)
            assert value is not None
            live = {h: v for h, v in live.items() if tree.get(db, h) is not None}
    check_sums(db, tree, fdb_subspace)
    assert {h for h, _, _ in tree.items(db)} == set(live)


def test_sparse_sequence_numbers_use_more_levels(db: Any, tree: WeightTree,
                                                 fdb_subspace: Any) -> None:
    """Pushes after the last item is gone reuse numbers; a tree whose items span a wide
    range of sequence numbers still picks exactly."""
    handles = tree.push_many(db, [(i, 1) for i in range(5000)])
    for h in handles[1:4999]:
        tree.remove(db, h)
    tree.push_many(db, [("x", 2), ("y", 3)])
    assert owners(db, tree) == [0, 4999, "x", "x", "y", "y", "y"]
    check_sums(db, tree, fdb_subspace)


def test_picks_stay_exact_as_the_tree_grows_and_shrinks(db: Any, tree: WeightTree) -> None:
    """A pick starts at the lowest level with at most 64 nodes, where the object's
    previous operation started: one object follows the tree from 3 items (the leaves
    themselves) to 5,003 (79 level-1 nodes: it starts at level 2) and back to 3."""
    rng = random.Random(5)

    def check() -> None:
        rows = tree.items(db)
        starts, total = [], 0
        for _, _, weight in rows:
            starts.append(total)
            total += weight
        assert tree.total_weight(db) == total
        for i in {0, len(rows) - 1, *rng.sample(range(len(rows)), min(40, len(rows)))}:
            for point in (starts[i], starts[i] + rows[i][2] - 1):
                assert tree.peek(db, point=point) == rows[i][1]

    tree.push_many(db, [("a", 2), ("b", 3), ("c", 1)])
    check()
    handles = tree.push_many(db, [(i, rng.randint(1, 9)) for i in range(5000)])
    check()
    for handle in handles[:4990]:
        tree.remove(db, handle)
    check()
    for handle in handles[4990:]:
        tree.remove(db, handle)
    check()
    assert [tree.pop(db, point=0) for _ in range(3)] == ["a", "b", "c"]
    assert tree.pop(db) is None


def test_the_total_is_capped(db: Any, tree: WeightTree, fdb_subspace: Any) -> None:
    """A push that would take the total past 2**62 is refused, nothing written.

    Reaching 2**62 with weights <= 2**32 takes 2**30 pushes, so the test raises the
    stored total directly (an atomic add to the tree's own counter key)."""
    tree.push(db, "a", 1)
    total_key = fdb_subspace.pack(("t",))
    db.add(total_key, (2**62 - 10).to_bytes(8, "little", signed=True))
    before = dump(db, fdb_subspace)
    with pytest.raises(ValueError, match="2\\*\\*62"):
        tree.push(db, "b", 10)
    with pytest.raises(ValueError, match="2\\*\\*62"):
        tree.push_many(db, [("b", 5), ("c", 5)])
    assert dump(db, fdb_subspace) == before
    tree.push(db, "b", 9)  # exactly 2**62 is allowed


def test_two_picks_of_the_same_item_conflict(db: Any, tree: WeightTree) -> None:
    tree.push_many(db, [("a", 1), ("b", 1)])
    t1, t2 = db.create_transaction(), db.create_transaction()
    assert tree.pop(t1, point=0) == "a"
    assert tree.pop(t2, point=0) == "a"
    t1.commit().wait()
    with pytest.raises(fdb.FDBError) as e:
        t2.commit().wait()
    assert e.value.code == 1020


def test_picks_of_different_items_and_pushes_do_not_conflict(db: Any, tree: WeightTree) -> None:
    tree.push_many(db, [("a", 1), ("b", 1), ("c", 1)])
    t1, t2, t3 = (db.create_transaction() for _ in range(3))
    assert tree.pop(t1, point=0) == "a"
    assert tree.pop(t2, point=1) == "b"
    tree.push(t3, "d", 4)
    for t in (t1, t2, t3):
        t.commit().wait()
    assert [v for _, v, _ in tree.items(db)] == ["c", "d"]
    assert tree.total_weight(db) == 5


def test_a_pick_conflicts_with_a_reweight_of_its_item(db: Any, tree: WeightTree,
                                                      fdb_subspace: Any) -> None:
    (h,) = tree.push_many(db, [("a", 3)])
    t1 = db.create_transaction()
    assert tree.pop(t1, point=1) == "a"
    tree.set_weight(db, h, 7)
    with pytest.raises(fdb.FDBError):
        t1.commit().wait()
    check_sums(db, tree, fdb_subspace)


def test_8_threads_popping_and_pushing(db: Any, fdb_subspace: Any) -> None:
    pushed: List[Any] = []
    popped: List[Any] = []
    lock = threading.Lock()
    errors: List[BaseException] = []
    seed = WeightTree(fdb_subspace)
    seed.push_many(db, [(("seed", i), 1 + i % 5) for i in range(200)])
    pushed.extend(("seed", i) for i in range(200))

    def worker(n: int) -> None:
        try:
            tree = WeightTree(fdb_subspace)
            rng = random.Random(n)
            for i in range(150):
                if rng.random() < 0.5:
                    tree.push(db, (n, i), rng.randint(1, 10))
                    with lock:
                        pushed.append((n, i))
                else:
                    value = tree.pop(db)
                    if value is not None:
                        with lock:
                            popped.append(value)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    run_threads(threads, errors, timeout=600)
    remaining = [v for _, v, _ in seed.items(db)]
    assert len(popped) == len(set(popped)), "an item was popped twice"
    assert sorted(map(repr, popped + remaining)) == sorted(map(repr, pushed)), "lost or invented"
    check_sums(db, seed, fdb_subspace)


def test_idempotent_push_returns_the_first_handle(db: Any, tree: WeightTree) -> None:
    h = tree.push(db, "job", 3, id=b"job-1")
    assert tree.push(db, "job", 3, id=b"job-1") == h
    assert tree.size(db) == 1
    assert tree.pop(db) == "job"
    assert tree.push(db, "job", 3, id=b"job-1") == h  # still remembered after the pop
    assert tree.size(db) == 0


def test_read_methods_accept_a_snapshot_view(db: Any, tree: WeightTree) -> None:
    (h,) = tree.push_many(db, [("a", 2)])
    tr = db.create_transaction()
    assert tree.peek(tr.snapshot, point=1) == "a"
    assert tree.get(tr.snapshot, h) == ("a", 2)
    assert tree.total_weight(tr.snapshot) == 2
    assert tree.items(tr.snapshot) == [(h, "a", 2)]
    tr.cancel()


def test_items_given_a_database_run_across_pages(db: Any, tree: WeightTree) -> None:
    """Given a Database, items() reads pages of 1,000, each in its own transaction;
    the pages join up as one transaction's listing does."""
    handles: List[bytes] = []
    for start in range(0, 2_300, 500):
        chunk = range(start, min(start + 500, 2_300))
        handles += tree.push_many(db, [(i, i % 7 + 1) for i in chunk])
    listed = tree.items(db)
    assert [h for h, _, _ in listed] == handles
    assert [(v, w) for _, v, w in listed] == [(i, i % 7 + 1) for i in range(2_300)]
    assert tree.items(db, limit=1_200) == listed[:1_200]

    @fdb.transactional
    def in_one(tr: Any) -> Any:
        return tree.items(tr)

    assert in_one(db) == listed


@pytest.mark.parametrize("layout", ["known", "unknown"])
def test_sums_read_as_spans_match_the_bindings_key_values(db: Any, fdb_subspace: Any,
                                                          layout: str) -> None:
    """The tree reads its sums as Spans (values copied out, keys read from the
    client's memory when asked): over several batches, forward and in reverse, with
    the bindings' layout or (unknown) their KeyValues, the same keys and values as the
    bindings' range read."""
    space = fdb_subspace["spans"]
    for start in range(0, 3_000, 500):
        tr = db.create_transaction()
        for i in range(start, start + 500):
            tr[space.pack((i, b"k" * (i % 7)))] = b"v" * (i % 13) + struct.pack("<q", i)
        tr.commit().wait()
    r = space.range()
    for reverse in (False, True):
        for limit in (0, 65, 2_500):
            tr = db.create_transaction()
            # the iterator mode's small first batches: several batches per read
            read = Range(tr.snapshot, r.start, r.stop, limit, reverse, ITERATOR)
            kvs = drive(read.read())
            spans = Spans(kv_layout() if layout == "known" else None)
            drive(Range(tr.snapshot, r.start, r.stop, limit, reverse, ITERATOR).collect(spans))
            assert len(kvs) == (limit or 3_000) and len(spans) == len(kvs)
            assert spans.values == [kv.value for kv in kvs]
            assert [spans.key(i) for i in range(len(spans))] == [kv.key for kv in kvs]
            assert layout == "unknown" or limit == 65 or len(spans.futures) > 1
            tr.cancel()
