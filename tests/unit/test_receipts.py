"""Commit receipts' bookkeeping (no server needed): receipt slots per thread, their
values, and when a structure looks for slots left behind.  What receipts achieve
against a real server is in tests/integration/test_unknown_results.py and
test_exactly_once.py."""

from __future__ import annotations

import os
import threading
import tracemalloc
from typing import Any, List

import pytest
from fdb.subspace_impl import Subspace

from fdbrecipes._receipts import (
    FENCE,
    RECEIPT_GC_EVERY,
    Process,
    Receipts,
    read_receipt,
    receipt,
    this_process,
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


def test_a_million_calls_from_ever_new_threads_keep_the_bookkeeping_flat() -> None:
    """A long-running worker makes calls from threads that come and go: the slots in
    use, and the memory behind them, stay as many as the calls running at once."""
    process, receipts = Process(), Receipts(S)

    def calls(n: int) -> None:
        for _ in range(n):
            outer = process.acquire()
            inner = process.acquire()  # a callback's call inside it
            receipts.key(outer), receipts.key(inner)
            process.release(inner, False)
            process.release(outer, False)

    def round_of_threads(per_thread: int) -> None:
        threads = [threading.Thread(target=calls, args=(per_thread,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    round_of_threads(1_000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(60):  # 480 new threads, 960,000 calls in all
            round_of_threads(1_000)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"the receipt bookkeeping grew by {grown:,} bytes"
    assert [process.acquire()[2] for _ in range(3)] == [0, 1, 2]  # no slot leaked


def test_call_ids_are_never_made_twice() -> None:
    """A call id is the process's token and a number: 16 bytes, as a receipt holds."""
    process = Process()
    ids = [process.call_id() for _ in range(1000)]
    assert len(set(ids)) == 1000 and {len(i) for i in ids} == {16}
    assert {i[:8] for i in ids} == {process.token} != {Process().call_id()[:8]}
    assert read_receipt(receipt(ids[-1], 7, 1)) == (ids[-1], 7, 1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_forked_child_has_a_receipt_identity_of_its_own() -> None:
    """Its slots and call ids would otherwise be its parent's (without asking the
    process id at every call)."""
    parent = this_process()
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report its token, and whether it is stable
        mine = this_process()
        os.write(writing, mine.token + bytes([mine is this_process()]))
        os._exit(0)
    os.close(writing)
    try:
        got = os.read(reading, 9)
    finally:
        os.close(reading)
        os.waitpid(child, 0)
    assert len(got) == 9 and got[:8] != parent.token and got[8] == 1
    assert this_process() is parent


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
