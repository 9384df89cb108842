"""How a workflow's nodes are stored, many to a key (fdbrecipes._workflow.defs):
whatever the nodes, written from any first node (an open batch's add begins
mid-block), every one reads back as it was given, in keys no larger than a value may
be."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Set, Tuple

import fdb.tuple
from fdb.subspace_impl import Subspace
from hypothesis import given, settings
from hypothesis import strategies as st

from fdbrecipes._store_layout import WORKFLOW_ID_HEAD, WorkflowLayout, forgotten_at_once
from fdbrecipes._values import MAX_VALUE_BYTES
from fdbrecipes._workflow.defs import (
    BLOCK,
    INLINE,
    SMALL,
    Record,
    Stored,
    decode,
    pack_deps,
    unpack_deps,
    write_nodes,
)
from fdbrecipes._workflow.graph import POLICIES, Spec, expander_id, node_id

W = b"a workflow's id!"


class KV(NamedTuple):
    """A key and its value, as a range read gives them."""

    key: bytes
    value: bytes


edges = st.lists(st.tuples(st.integers(-1, 60_000), st.integers(0, 200),
                           st.sampled_from(POLICIES), st.integers(0, 200)),
                 max_size=2 * INLINE + 2)
specs = st.builds(
    Spec,
    target=st.sampled_from([b"\x01one\x00", b"\x01two\x00\x02q\x00", b"\xff/sub"]),
    value=st.one_of(st.binary(max_size=60), st.binary(min_size=SMALL - 1, max_size=SMALL + 1),
                    st.just(b"x" * 40_000)),
    where=st.sampled_from([(), (("priority", 3),), (("group", "g"),), (("group", "h\x00"),)]),
    delay=st.sampled_from([None, 0.5]),
    time_limit=st.sampled_from([None, 10.0]),
    name=st.sampled_from(["", "custom", "a name \x00 with a nul", "é" * 200]),
    when=st.sampled_from(["always", "success", "failure"]),
    deps=st.sampled_from([[], [(0, "fail")]]),  # a root has none (and is no join)
)


@settings(max_examples=60, deadline=None)
@given(first=st.integers(0, 3 * BLOCK), nodes=st.lists(st.tuples(specs, edges), max_size=80),
       joins=st.sets(st.integers(0, 4 * BLOCK)))
def test_nodes_read_back_as_written(first: int, nodes: List[Tuple[Spec, List[Any]]],
                                    joins: Set[int]) -> None:
    keys = WorkflowLayout(Subspace(("t",)))
    written: Dict[bytes, bytes] = {}
    given_specs = []
    for k, (spec, _) in enumerate(nodes):  # "" stands for the default name, its number
        given_specs.append(spec._replace(name=spec.name or str(first + k)))
    write_nodes(written.__setitem__, keys, W, first, given_specs, [out for _, out in nodes],
                joins)
    assert all(len(value) <= MAX_VALUE_BYTES for value in written.values())
    segments = [KV(k, v) for k, v in sorted(written.items())
                if keys.nodes.contains(k)]
    large = {keys.values.unpack(k)[1]: v for k, v in written.items() if keys.values.contains(k)}
    read: Dict[int, Record] = {}
    decode(keys, segments, large, read)
    assert sorted(read) == list(range(first, first + len(nodes)))
    for k, ((_, out), spec) in enumerate(zip(nodes, given_specs)):
        record = read[first + k]
        root = not spec.deps and first + k not in joins  # pushed without a state key
        assert record.stored == Stored(*spec[:7], root=root)
        if len(out) > INLINE:  # apart: in we keys of 128 each
            assert record.edges is None
            apart = [kv for key, kv in sorted(written.items()) if keys.edges.contains(key)
                     and keys.edges.unpack(key)[:2] == (W, first + k)]
            assert [e for raw in apart for e in fdb.tuple.unpack(raw)] == out
        else:
            assert record.edges == tuple(out)
    for kv in segments:  # a segment holds nodes of its block only, from its offset on
        _, block, offset = keys.nodes.unpack(kv.key)
        one: Dict[int, Record] = {}
        decode(keys, [kv], large, one)
        assert min(one) == block * BLOCK + offset
        assert {i // BLOCK for i in one} == {block}


@given(st.lists(st.tuples(st.integers(0, 50_000), st.sampled_from(POLICIES),
                          st.one_of(st.none(), st.text(min_size=1, max_size=20)))))
def test_dependencies_read_back_as_written(deps: List[Tuple[int, str, Any]]) -> None:
    named = [(d, policy, str(d) if name is None else name) for d, policy, name in deps]
    assert unpack_deps(pack_deps(named)) == named


@given(st.binary(min_size=4, max_size=4), st.binary(min_size=1, max_size=20),
       st.integers(min_value=0, max_value=50_000), st.integers(min_value=-1, max_value=100))
def test_a_node_id_is_forgotten_when_its_job_leaves_an_expander_id_retired(
        tag: bytes, w: bytes, i: int, chunk: int) -> None:
    """The queues clear a workflow node's id key when its job leaves (pushed once, by
    the workflow's counters: nothing to keep it for); an expander's, or any other
    id, is retired as ever."""
    assert forgotten_at_once(node_id(tag, w, i))
    assert not forgotten_at_once(expander_id(tag, w, i - 1, chunk))
    assert not forgotten_at_once(fdb.tuple.pack(("fdbwf", tag)))
    assert not forgotten_at_once(b"fdbwf" + w)
    assert not forgotten_at_once(WORKFLOW_ID_HEAD + b"\xff")
