"""Commit receipts' bookkeeping (no server needed): which spent receipts a call
clears, and when it looks for receipts left behind.  What receipts achieve against a
real server is in tests/integration/test_unknown_results.py."""

from __future__ import annotations

import os

from fdb.subspace_impl import Subspace

from fdbrecipes._receipts import RECEIPT_CLEARS, RECEIPT_GC_EVERY, Receipts


def test_receipts_are_shared_per_structure_and_collected_periodically() -> None:
    """Spent receipts of one subspace are cleared by any object on it, a bounded
    number per call, and the scan for old receipts runs at calls 1, 17, 33..."""
    space = Subspace(("receipts-test", os.urandom(8)))
    first, second = Receipts(space), Receipts(space)
    other = Receipts(Subspace(("receipts-test", os.urandom(8))))
    assert first.spent is second.spent and first.spent is not other.spent
    assert first.space.key() == space["c"].key()
    keys = [first.space.pack((n, os.urandom(16))) for n in range(RECEIPT_CLEARS + 3)]
    first.give_back(keys)
    clearing, gc = second.start()
    assert clearing == keys[:RECEIPT_CLEARS] and gc
    assert other.start() == ([], True)
    looks = [second.start() for _ in range(2 * RECEIPT_GC_EVERY)]
    assert looks[0][0] == keys[RECEIPT_CLEARS:]
    assert [n + 2 for n, (_, gc) in enumerate(looks) if gc] == [
        1 + RECEIPT_GC_EVERY, 1 + 2 * RECEIPT_GC_EVERY]
