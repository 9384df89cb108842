"""What a take with a spread chooses, and how a lease token names its lease (need no
server): a take of ``n`` takes ``n`` entries in a row, a block starting at a multiple
of ``n`` (or ending with the entries), within the first ``n + spread - 1``, and every
such block can be drawn; a lease id read from its token without the tuple layer is
the one the tuple layer reads, and a token that is not a lease's is refused alike."""

from __future__ import annotations

from typing import Any, List, cast

import fdb.tuple
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fdbrecipes._ordered.front import blocks, choose
from fdbrecipes._ordered.leases import lease_id, token_of
from fdbrecipes._worker.ahead import claim_spread


def chosen(length: int, n: int, spread: int) -> List[int]:
    """What a take of ``n`` with ``spread`` chooses among entries numbered 0, 1, ...
    (only their order matters to :func:`choose`)."""
    return cast(List[int], choose(cast(Any, list(range(length))), n, spread))


@given(st.integers(0, 300), st.integers(0, 50), st.integers(1, 400))
def test_a_take_chooses_a_block_in_a_row_within_the_bound(length: int, n: int,
                                                          spread: int) -> None:
    window = list(range(length))[: n + spread - 1]
    taken = chosen(length, n, spread)
    assert len(taken) == min(n, len(window))  # none for n = 0
    if not taken:
        return
    start = taken[0]
    assert taken == list(range(start, start + len(taken)))  # in a row, in order
    assert start <= spread - 1  # at most spread - 1 older ones stay
    assert start % n == 0 or start == len(window) - n  # a block, or the last one


@pytest.mark.parametrize(("length", "n", "spread", "starts"), [
    (1000, 10, 40, {0, 10, 20, 30}),  # four whole blocks
    (25, 10, 40, {0, 10, 15}),  # the window ends in the third: it ends with the entries
    (1000, 1, 5, {0, 1, 2, 3, 4}),  # one item: one of the spread oldest
    (1000, 40, 8, {0}),  # a spread under n: the first block only
])
def test_every_block_can_be_drawn(length: int, n: int, spread: int,
                                  starts: set[int]) -> None:
    drawn = {chosen(length, n, spread)[0] for _ in range(400)}  # one missed: < 1e-38
    assert drawn == starts


def test_a_workers_spread_is_as_many_blocks_as_slots() -> None:
    assert [blocks(n, claim_spread(n, 8)) for n in (1, 8, 72)] == [8, 8, 8]
    assert blocks(40, claim_spread(40, 1)) == 1  # one slot: strict order
    assert claim_spread(72, 8, "max") == 8  # a window read whole: n + 7, as before
    assert blocks(16, 8) == 1 and blocks(1, 16) == 16 and blocks(10, 40) == 4


@given(st.binary(max_size=40))
def test_a_lease_id_read_from_its_token_is_the_tuple_layers(hold_id: bytes) -> None:
    token = token_of(hold_id)
    assert lease_id(token) == hold_id == fdb.tuple.unpack(token)[1]


@pytest.mark.parametrize("parts", [
    ("lease", b"ab", b""), ("lease", b"a\x00", 1), ("lease", "ab"), ("lease",),
    ("job", b"ab"), ("lease", None), ("lease", b"\x00\xff", b"\x00"),
])
def test_a_token_that_is_not_a_leases_is_refused(parts: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match="not a lease token"):
        lease_id(fdb.tuple.pack(parts))
    with pytest.raises(TypeError):
        lease_id("lease")
