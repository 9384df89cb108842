"""The limits' slot bookkeeping (``fdbrecipes._limits.slots``): what a claim records
for its leases, read back exactly; runs of slots and of lease ids; slots drawn free."""

from __future__ import annotations

from typing import List, Set

from hypothesis import given
from hypothesis import strategies as st

from fdbrecipes._limits.slots import Tag, Usage, id_runs, pack_batch, runs, unpack_batch
from fdbrecipes._limits.specs import concurrency
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
    found = unpack_batch(ids[0][:16], pack_batch(record))
    assert found == {h: t for h, t in zip(ids, tags) if t}


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
