"""The limits' slot bookkeeping (``fdbrecipes._limits.slots``): what a claim records
for its leases, read back exactly; runs of slots and of lease ids; slots drawn free."""

from __future__ import annotations

from typing import Any, List, NamedTuple, Set, Tuple

from fdb.subspace_impl import Subspace
from hypothesis import given
from hypothesis import strategies as st

from fdbrecipes._limits.slots import (
    RUN_ALIGN,
    Run,
    Tag,
    Usage,
    aligned,
    claim_runs,
    id_runs,
    live_slots,
    pack_batch,
    run_value,
    runs,
    slot_runs,
    slot_span,
    slot_value,
    unpack_batch,
)
from fdbrecipes._limits.specs import concurrency
from fdbrecipes._store_layout import LimitLayout
from fdbrecipes._values import batch_ids

limits = st.tuples(st.sampled_from(["a", "b", "c"]),
                   st.one_of(st.none(), st.text(max_size=5), st.integers(-5, 5)),
                   st.integers(1, 3), st.sampled_from(["concurrency", "rate"]))


@given(st.lists(st.lists(st.tuples(limits, st.integers(-1, 99_999)), max_size=3),
                min_size=1, max_size=40))
def test_a_claims_record_gives_back_each_leases_tags(carried: List[List[tuple]]) -> None:
    ids = batch_ids(len(carried), 123)
    tags = [[Tag(*limit, slot=slot) for limit, slot in lease] for lease in carried]
    record = [(int.from_bytes(h[16:], "big"), t) for h, t in zip(ids, tags) if t]
    assert unpack_batch(ids[0][:16], pack_batch(77, record)) == (
        77, {h: t for h, t in zip(ids, tags) if t})


@given(st.integers(0, 500), st.integers(1, 200), st.integers(0, 3))
def test_a_claims_record_of_runs_is_short_and_exact(first: int, count: int, skip: int) -> None:
    """Leases numbered one after the other in slots one after the other (what a claim
    mostly takes) are stored as a few numbers, and read back exactly."""
    ids = batch_ids(count, 5)
    tags = [[Tag("g", None, 1, "concurrency", first + i + (skip if i >= count // 2 else 0)),
             Tag("r", "k", 2, "rate")] for i in range(count)]
    packed = pack_batch(9, [(i, t) for i, t in enumerate(tags)])
    assert len(packed) < 80
    assert unpack_batch(ids[0][:16], packed) == (9, dict(zip(ids, tags)))


@given(st.sets(st.integers(0, 1_000)))
def test_claim_runs_cover_the_slots_without_crossing_an_alignment(numbers: Set[int]) -> None:
    found = claim_runs(list(numbers))
    assert [n for low, high in found for n in range(low, high + 1)] == sorted(numbers)
    assert all(aligned(low) == aligned(high) for low, high in found)
    assert len(found) <= len(runs(list(numbers))) + 1_001 // RUN_ALIGN


def test_a_slots_key_says_its_deadline_and_last_slot() -> None:
    assert slot_span(7, slot_value(100, b"lease")) == (100, 7)
    assert slot_span(7, run_value(100, b"claim", 19)) == (100, 19)


class KeyValue(NamedTuple):
    """A key-value as a range read gives it."""

    key: bytes
    value: bytes


limit_keys = st.one_of(st.none(), st.text(max_size=5), st.integers(-5, 5),
                       st.tuples(st.text(max_size=3), st.integers(0, 9)))


@given(st.lists(st.tuples(limit_keys, st.integers(0, 500), st.integers(0, 3),
                          st.integers(0, 20), st.booleans()), max_size=30))
def test_a_limits_slot_keys_read_back_as_runs(written: List[Tuple[Any, int, int, int, bool]]
                                              ) -> None:
    """What a claim and the ends of leases write of a limit's slots (a key a run or a
    slot, :func:`run_value` / :func:`slot_value`) reads back as those runs, from the
    limit's whole range or a key's, and counts its live slots."""
    keys = LimitLayout(Subspace(("t", 1)))
    stored = {}  # by the slot key written: the limit's key, the run it stands for
    for key, first, extra, deadline, alone in written:
        last = first if alone else first + extra
        value = slot_value(deadline, b"lease") if alone else run_value(deadline, b"c", last)
        slot_key = keys.running_key("lim", key, first)
        stored[slot_key] = (key, Run(first, last, deadline, slot_key, value))
    expected = [stored[slot_key][1] for slot_key in sorted(stored)]
    kvs = [KeyValue(run.key, run.value) for run in expected]  # as a range read gives them
    assert list(slot_runs(keys, ("lim",), kvs)) == expected
    for key in {key for key, _ in stored.values()}:
        mine = [run for run in expected if stored[run.key][0] == key]
        assert list(slot_runs(keys, ("lim", key),
                              [KeyValue(run.key, run.value) for run in mine])) == mine
    assert live_slots(keys, ("lim",), kvs, 10) == sum(
        run.last - run.first + 1 for run in expected if run.deadline >= 10)


@given(st.sets(st.integers(0, 300)))
def test_runs_cover_the_numbers_exactly(numbers: Set[int]) -> None:
    found = runs(list(numbers))
    covered = [n for low, high in found for n in range(low, high + 1)]
    assert covered == sorted(numbers)
    assert all(b[0] > a[1] + 1 for a, b in zip(found, found[1:]))  # merged


@given(st.sets(st.integers(0, 60), min_size=1))
def test_id_runs_name_only_the_ids_given(numbers: Set[int]) -> None:
    ids = batch_ids(61, 7)
    chosen = [ids[n] for n in numbers]
    for low, high in id_runs(chosen):
        assert {h for h in ids if low <= h <= high} <= set(chosen)
    assert {h for low, high in id_runs(chosen) for h in ids if low <= h <= high} == set(chosen)


@given(st.sets(st.integers(0, 49)), st.integers(1, 50))
def test_slots_drawn_are_free_distinct_and_in_runs(taken: Set[int], want: int) -> None:
    usage = Usage(concurrency(50))
    usage.live, usage.taken = len(taken), set(taken)
    drawn = []
    while len(drawn) < want and usage.fits(1, 0):
        drawn.append(usage.add(1, 0))
    assert len(set(drawn)) == len(drawn) and not set(drawn) & taken
    assert len(drawn) == min(want, 50 - len(taken))
    assert len(runs(drawn)) <= len(runs(sorted(taken))) + 2  # one run a gap, at most
