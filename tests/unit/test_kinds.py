"""The kind records (fdbrecipes._kinds): one per structure, declared beside it, and the
lookups the tools make on them (by name, by object, by the keys at a place, on a
stand-in of the first keys read); and no tool testing a structure's class."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Tuple

import pytest
from fdb.subspace_impl import Subspace

from fdbrecipes import FairQueue, PriorityQueue, Queue, WeightTree, _kinds, aio
from fdbrecipes._layout import FairLayout, OrderedLayout, RecordLayout, TreeLayout
from fdbrecipes.admin.arguments import KINDS
from fdbrecipes.admin.places import ANY_QUEUE
from fdbrecipes.admin.schedules import TARGET_KINDS

ROOT = Path(__file__).resolve().parents[2]
S = Subspace(("kinds",))
#: Every structure's classes, as the kinds name them.
CLASSES = {"queue": (Queue, aio.AsyncQueue),
           "priority-queue": (PriorityQueue, aio.AsyncPriorityQueue),
           "fair-queue": (FairQueue, aio.AsyncFairQueue),
           "weight-tree": (WeightTree, aio.AsyncWeightTree)}


class KV(NamedTuple):
    """A key-value pair, as a range read returns it."""

    key: bytes
    value: bytes


def test_every_structure_has_one_kind_in_the_order_the_tools_list_them() -> None:
    assert _kinds.names() == KINDS == ("queue", "priority-queue", "fair-queue", "weight-tree")
    assert TARGET_KINDS == ("queue", "priority-queue", "fair-queue")  # those with jobs
    for name, (sync, twin) in CLASSES.items():
        kind = _kinds.kind_named(name)
        assert (kind.sync, kind.async_class()) == (sync, twin)
        assert _kinds.of(sync(S)) is _kinds.of(twin(S)) is kind
        assert _kinds.find(twin(S), twins=False) is None
        assert isinstance(kind.make(S), sync)
    with pytest.raises(ValueError, match="no kind of structure is named 'stack'"):
        _kinds.kind_named("stack")
    with pytest.raises(TypeError, match="not a structure of fdbrecipes: Subspace"):
        _kinds.of(S)
    with pytest.raises(ValueError, match="registered already"):
        _kinds.register(_kinds.kind_named("queue"))


def test_what_each_kind_offers() -> None:
    offers = {k.name: (k.jobs, k.groups, k.priorities, k.weights, k.sequences)
              for k in _kinds.kinds()}
    assert offers == {"queue": (True, False, False, False, True),
                      "priority-queue": (True, False, True, False, True),
                      "fair-queue": (True, True, False, False, False),
                      "weight-tree": (False, False, False, True, False)}
    where = {k.name: k.where("acme", 3) for k in _kinds.kinds()}
    assert where == {"queue": {}, "priority-queue": {"priority": 3},
                     "fair-queue": {"group": "acme"}, "weight-tree": {}}
    fair, queue = _kinds.kind_named("fair-queue"), _kinds.kind_named("queue")
    assert fair.one_queue("acme") and not fair.one_queue() and queue.one_queue()
    assert not _kinds.kind_named("weight-tree").one_queue()
    made = _kinds.kind_named("priority-queue").make(S, 3, 60.0, 2)
    assert (made.ops.max_deliveries, made.ops.shards) == (3, 2)


def _told(keys: Dict[str, List[KV]], found: Tuple[str, ...] = ()) -> Tuple[Any, ...]:
    """What :func:`_kinds.recognise` tells of the first keys ``keys`` (by range)."""
    ranges, _ = _kinds.reads()
    firsts = {m: keys.get(m, []) for m in ranges}
    seen = _kinds.recognise(S, firsts, found)
    return tuple(k.name for k in seen.kinds), seen.wrong


def test_the_keys_at_a_place_tell_its_kind() -> None:
    q, pq, tree, fair = OrderedLayout(S, 0), OrderedLayout(S, 1), TreeLayout(S), FairLayout(S)
    item = q.new_item((), 1, None, 0)
    assert _told({}) == ((), None)
    assert _told({"i": [KV(q.item_key(item), b"")]}) == (("queue",), None)
    assert _told({"i": [KV(q.floor_key, b"")]}) == (("queue",), None)
    pq_item = pq.new_item((7,), 1, None, 0)
    assert _told({"i": [KV(pq.item_key(pq_item), b"")]}) == (("priority-queue",), None)
    held, _ = pq.hold_keys(b"h", pq_item, 5, 0)
    assert _told({"h": [KV(held, b"")]}) == (("priority-queue",), None)
    both = ("queue", "priority-queue")
    assert _told({}, ("d",)) == (both, None)  # a pause flag: either queue
    assert " or ".join(both) == ANY_QUEUE  # what the operator commands say of it
    assert _told({}, ("f",)) == (both, None)
    assert _told({"w": [KV(bytes(tree.leaves.pack((1, b"r"))), b"\x01")]}) == (
        ("weight-tree",), None)
    assert _told({}, ("t",)) == (("weight-tree",), None)
    look = KV(fair.wake_key(7, "acme"), b"")
    assert _told({"w": [look]}) == (("fair-queue",), None)  # not a weight-tree's leaf
    assert _told({"a": [KV(bytes(fair.active.pack(("acme",))), b"")]}) == (
        ("fair-queue",), None)
    records = RecordLayout(fair.groups["acme"], fair.expiry, ("acme",))
    assert _told({"o": [KV(records.expiry_key(1.5, b"x"), b"")]}) == (("fair-queue",), None)
    queue_record = RecordLayout(S, S["o"]).expiry_key(1.5, b"x")
    assert _told({"o": [KV(queue_record, b"")]}) == ((), None)  # a queue's: tells nothing
    assert _told({"i": [KV(q.item_key(item), b"")], "w": [look]}) == (
        (), "keys of both a queue and a fair-queue")
    assert _told({}, ("f", "t")) == ((), "keys of both a queue and a weight-tree")


#: A tool's test of a structure's class: ``isinstance(x, Queue)`` and the like.
CLASS_TEST = re.compile(r"isinstance\([^)]*\b(Async)?(Queue|PriorityQueue|FairQueue|WeightTree)\b")


def test_no_tool_tests_a_structure_class() -> None:
    tools = [ROOT / "src/fdbrecipes" / name for name in ("admin", "web", "contrib")]
    files = [p for d in tools for p in d.rglob("*.py")]
    files += [ROOT / "src/fdbrecipes/metrics.py"]
    found = [f"{p.relative_to(ROOT)}:{n}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), 1) if CLASS_TEST.search(line)]
    assert found == []
