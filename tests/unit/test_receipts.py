"""Commit receipts' bookkeeping (no server needed): receipt slots per thread, their
values, and when a structure looks for slots left behind.  What receipts achieve
against a real server is in tests/integration/test_unknown_results.py and
test_exactly_once.py."""

from __future__ import annotations

import os
import threading
from typing import Any, List

from fdb.subspace_impl import Subspace

from fdbrecipes._receipts import (
    FENCE,
    RECEIPT_GC_EVERY,
    Process,
    Receipts,
    read_receipt,
    receipt,
)

S = Subspace(("receipts-test", os.urandom(8)))


def test_each_running_call_has_its_own_slot() -> None:
    """A thread's calls reuse one slot; a call made inside another (a callback) gets
    the next; other threads and processes have their own."""
    process = Process()
    first = process.acquire()
    inner = process.acquire()
    assert first != inner and first[:2] == inner[:2]
    process.release(inner, False)
    process.release(first, False)
    assert process.acquire() == first
    theirs: List[Any] = []
    thread = threading.Thread(target=lambda: theirs.append(process.acquire()))
    thread.start()
    thread.join()
    assert theirs[0][1] != first[1] and theirs[0][2] == 0
    assert Process().token != process.token


def test_a_call_that_cannot_settle_leaves_its_slot_behind() -> None:
    process = Process()
    slot = process.acquire()
    process.release(slot, True)
    assert process.acquire() != slot


def test_slot_keys_live_inside_the_subspace() -> None:
    receipts = Receipts(S)
    slot = Process().acquire()
    assert S["c"].contains(receipts.key(slot)) and receipts.key(slot) == receipts.key(slot)


def test_receipt_values() -> None:
    call = os.urandom(16)
    assert read_receipt(receipt(call, 123456789, 3)) == (call, 123456789, 3)
    assert read_receipt(None) == (b"", 0, FENCE)
    assert read_receipt(b"garbage") == (b"", 0, FENCE)


def test_each_structure_object_sweeps_at_calls_1_17_33() -> None:
    receipts = Receipts(S)
    looks = [receipts.sweeps() for _ in range(2 * RECEIPT_GC_EVERY + 1)]
    assert [n + 1 for n, sweeps in enumerate(looks) if sweeps] == [
        1, 1 + RECEIPT_GC_EVERY, 1 + 2 * RECEIPT_GC_EVERY]
