"""The WeightTree's pick arithmetic, run over in-memory sums (no server needed).

``descend`` is the function the tree uses against FoundationDB; here its children come
from dictionaries built the way pushes build the stored sums."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fdbrecipes import FdbRecipesError, drive
from fdbrecipes._fdb import Gen, read_le64, sum_le64
from fdbrecipes._tree.engine import FANOUT, LEVELS, descend, node_index, top_level

Item = Tuple[int, bytes, int]  # seq, random, weight


class Sums:
    """The stored tree in memory: leaves by (seq, random), sums by (level, index)."""

    def __init__(self, items: List[Item]) -> None:
        self.leaves = sorted(items)
        self.nodes: Dict[Tuple[int, int], int] = defaultdict(int)
        for seq, _, weight in items:
            for level in range(1, LEVELS + 1):
                self.nodes[(level, node_index(level, seq))] += weight

    def children(self, level: int, parent: Optional[int]) -> Iterator[Tuple[Any, int]]:
        if level == 0:
            for seq, suffix, weight in self.leaves:
                if parent is None or parent * FANOUT <= seq < (parent + 1) * FANOUT:
                    yield (seq, suffix), weight
            return
        for (lv, index), total in sorted(self.nodes.items()):
            if lv == level and (parent is None or parent * FANOUT <= index < (parent + 1) * FANOUT):
                yield index, total

    def size(self, level: int) -> int:
        return sum(1 for _ in self.children(level, None))

    # The tree's operations read as they go; here they read from memory, at once.

    def read_children(self, level: int, parent: Optional[int]
                      ) -> Gen[Iterator[Tuple[Any, int]]]:
        yield from ()
        return self.children(level, parent)

    def read_size(self, level: int) -> Gen[int]:
        yield from ()
        return self.size(level)

    def top(self) -> int:
        return drive(top_level(self.read_size))

    def pick(self, point: int, top: Optional[int] = None) -> Tuple[Any, int]:
        return drive(descend(self.read_children, point, self.top() if top is None else top))


def linear(items: List[Item], point: int) -> Tuple[Tuple[int, bytes], int]:
    for seq, suffix, weight in sorted(items):
        if point < weight:
            return (seq, suffix), point
        point -= weight
    raise AssertionError("point beyond total")


seqs = st.one_of(st.integers(0, 200), st.integers(0, 2**20), st.integers(0, 2**40))
trees = st.lists(
    st.tuples(seqs, st.binary(min_size=20, max_size=20), st.integers(1, 2**32)),
    min_size=1, max_size=60, unique_by=lambda t: (t[0], t[1]),
)


@given(trees, st.data())
def test_descend_agrees_with_a_linear_scan(items: List[Item], data: st.DataObject) -> None:
    sums = Sums(items)
    total = sum(w for _, _, w in items)
    top = sums.top()
    for point in {0, total - 1, data.draw(st.integers(0, total - 1))}:
        assert sums.pick(point) == linear(items, point)
        # Starting higher than needed changes nothing: the same nodes, in key order.
        for level in range(top, LEVELS + 1):
            assert sums.pick(point, level) == linear(items, point)


@given(st.lists(st.integers(1, 9), min_size=1, max_size=30), st.integers(0, 3))
def test_each_item_owns_an_interval_as_long_as_its_weight(weights: List[int], spread: int) -> None:
    items = [(i * (7**spread), os.urandom(20), w) for i, w in enumerate(weights)]
    sums = Sums(items)
    owners: List[Tuple[int, bytes]] = [sums.pick(p)[0] for p in range(sum(weights))]
    # Contiguous runs, in key order, each exactly as long as the item's weight.
    runs: List[Tuple[Tuple[int, bytes], int]] = []
    for owner in owners:
        if runs and runs[-1][0] == owner:
            runs[-1] = (owner, runs[-1][1] + 1)
        else:
            runs.append((owner, 1))
    assert runs == [((s, r), w) for s, r, w in sorted(items)]


def test_concurrent_pushes_share_a_sequence_number() -> None:
    """Two pushes that read the same last seq write (seq, r1) and (seq, r2)."""
    items = [(5, b"\x01" * 20, 2), (5, b"\x02" * 20, 3), (6, b"\x00" * 20, 1)]
    sums = Sums(items)
    assert [sums.pick(p)[0][1][0] for p in range(6)] == [1, 1, 2, 2, 2, 0]


def test_top_level_is_the_lowest_with_at_most_a_fanout_of_nodes() -> None:
    def sums(n: int) -> Sums:
        return Sums([(seq, b"\x00" * 20, 1) for seq in range(n)])

    assert sums(1).top() == 0 and sums(FANOUT).top() == 0
    assert sums(FANOUT + 1).top() == 1 and sums(FANOUT**2).top() == 1
    assert sums(FANOUT**2 + 1).top() == 2
    # Few items spread over a wide range of sequence numbers: the leaves themselves.
    assert Sums([(seq * 10**6, b"\x00" * 20, 1) for seq in range(30)]).top() == 0
    # Counting starts where asked (the level the last operation used).
    assert drive(top_level(sums(FANOUT * 3).read_size, 1)) == 1


def test_round_trips_grow_slowly() -> None:
    """Levels a pick reads below its first: 1 at a thousand items, 3 at a million
    (sequence numbers 0 .. n - 1; level L holds n / 64**L nodes)."""
    def top(n: int) -> int:
        def nodes(level: int) -> Gen[int]:
            yield from ()
            return -(-n // FANOUT**level)

        return drive(top_level(nodes))

    assert top(10**3) == 1
    assert top(10**6) == 3
    assert top(2**40) == LEVELS  # more than 64 top nodes: read them all


def test_inconsistent_sums_are_reported() -> None:
    sums = Sums([(1, b"\x00" * 20, 4)])
    sums.nodes[(1, 0)] = 9  # claims more weight than its leaves hold
    with pytest.raises(FdbRecipesError, match="disagree"):
        drive(descend(sums.read_children, 6, 1))


@given(st.lists(st.one_of(st.none(), st.binary(max_size=16)), max_size=120))
def test_a_level_s_sums_add_up_as_each_sum_reads(values: List[Optional[bytes]]) -> None:
    """The sum of a level's stored sums (the tree's total) is what reading each gives."""
    assert sum_le64(values) == sum(read_le64(value) for value in values)
