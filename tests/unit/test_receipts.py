"""Commit receipts' bookkeeping (no server needed): which spent receipts a call
clears, and when a structure looks for receipts left behind.  What receipts achieve
against a real server is in tests/integration/test_unknown_results.py."""

from __future__ import annotations

import os

from fdb.subspace_impl import Subspace

from fdbrecipes._receipts import RECEIPT_CLEARS, RECEIPT_GC_EVERY, Receipts, spent_of


class FakeDatabase:
    """Stands for an fdb Database as a key of the bookkeeping (never used)."""


def test_spent_receipts_are_kept_per_database() -> None:
    """Two databases (or tenants) never clear each other's receipts, whatever the
    prefixes; any call on one database clears a bounded number of its receipts."""
    one, two = FakeDatabase(), FakeDatabase()
    assert spent_of(one) is spent_of(one) and spent_of(one) is not spent_of(two)
    keys = [os.urandom(8) for _ in range(RECEIPT_CLEARS + 3)]
    spent_of(one).give_back(keys)
    assert spent_of(two).take() == []
    assert spent_of(one).take() == keys[:RECEIPT_CLEARS]
    assert spent_of(one).take() == keys[RECEIPT_CLEARS:]
    assert spent_of(one).take() == []


def test_each_structure_object_sweeps_at_calls_1_17_33() -> None:
    space = Subspace(("receipts-test", os.urandom(8)))
    receipts = Receipts(space)
    assert receipts.space.key() == space["c"].key()
    looks = [receipts.sweeps() for _ in range(2 * RECEIPT_GC_EVERY + 1)]
    assert [n + 1 for n, sweeps in enumerate(looks) if sweeps] == [
        1, 1 + RECEIPT_GC_EVERY, 1 + 2 * RECEIPT_GC_EVERY]
