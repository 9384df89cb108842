"""The dashboard's limits and workflows parts that need no server: a workflow's graph
laid out by depth and drawn as SVG (capped, escaped, coloured by state), and the
actions on a limit or workflow store checked whole before anything is done."""

from __future__ import annotations

import re
from typing import Any, Dict, List

import pytest

pytest.importorskip("markupsafe", reason="the dashboard's extra: pip install 'fdbrecipes[web]'")

from fdbrecipes import concurrency, rate
from fdbrecipes.web import FULL, READ_ONLY
from fdbrecipes.web.checks import check
from fdbrecipes.web.dag import COLOURS, draw, layers
from fdbrecipes.web.forms import BadRequest
from fdbrecipes.workflow import GraphNode


def node(i: int, name: str, state: str = "waiting", *deps: str) -> GraphNode:
    return GraphNode(i, name, state, tuple(deps), "Boom: <b>x</b>" if state == "failed" else None)


def names(columns: List[List[GraphNode]]) -> List[List[str]]:
    return [[n.name for n in column] for column in columns]


def test_layers_by_dependency_depth() -> None:
    diamond = [node(0, "a"), node(1, "b", "waiting", "a"), node(2, "c", "waiting", "a"),
               node(3, "d", "waiting", "b", "c"), node(4, "e", "waiting", "a", "d")]
    assert names(layers(diamond)) == [["a"], ["b", "c"], ["d"], ["e"]]
    # a dependency added later (a higher number) still goes first; one not read is left out
    late = [node(0, "x", "waiting", "y"), node(1, "y"), node(2, "z", "waiting", "unread")]
    assert names(layers(late)) == [["y", "z"], ["x"]]
    assert layers([]) == []
    chain = [node(i, str(i), "waiting", *([str(i - 1)] if i else [])) for i in range(5_000)]
    assert len(layers(chain)) == 5_000  # no recursion


def test_the_drawing_is_capped_escaped_and_coloured() -> None:
    hostile = '<script>alert(1)</script>"'
    nodes = [node(0, hostile, "succeeded")] + [
        node(i, f"kid {i}", "queued" if i % 2 else "failed", hostile) for i in range(1, 46)]
    nodes.append(node(46, "sink", "skipped", *(f"kid {i}" for i in range(1, 46))))
    drawing = draw(nodes, per_layer=20)
    svg = str(drawing.svg)
    assert (drawing.drawn, drawing.total, drawing.depth) == (22, 47, 3)
    assert "<script>" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in svg
    assert "<b>" not in svg and ": failed (Boom: &lt;b&gt;x&lt;/b&gt;)</title>" in svg
    assert "+25 more" in svg and svg.count('class="edge"') == 40
    boxes: Dict[str, Any] = {state: fill for state, fill in re.findall(
        r'<g class="node ([a-z]+)">.*?fill="(#[0-9a-f]+)"', svg)}
    assert boxes == {s: COLOURS[s][0] for s in ("succeeded", "queued", "failed", "skipped")}
    wide = draw([node(i, str(i), "waiting", *([str(i - 1)] if i else [])) for i in range(100)],
                most_layers=30)
    assert (wide.drawn, wide.depth) == (30, 100)  # 30 columns drawn of 100


def test_a_node_links_to_its_job_page_when_given_one() -> None:
    nodes = [node(0, "a", "queued"), node(1, "b", "waiting", "a")]
    svg = str(draw(nodes, links={"a": '/job?s=q&id=00"><script>'}).svg)
    assert svg.count('<a class="job"') == 1
    assert '<a class="job" href="/job?s=q&amp;id=00&#34;&gt;&lt;script&gt;"><g class="node ' \
        'queued"><title>a: queued</title>' in svg and "<script>" not in svg
    assert '<a class="job"' not in str(draw(nodes).svg)


def test_an_action_on_a_limit_store_is_checked_whole() -> None:
    store = object()  # check() only picks the store; it reads and writes nothing
    form = {"action": "set-limit", "store": "0", "name": "api", "kind": "rate", "n": "10",
            "per": "60"}
    got = check(form, FULL, {}, limits=[store])
    assert (got.name, got.structure, got.target(), got.change) == (
        "limits 0", store, "api", ("api", rate(10, 60)))
    assert check({**form, "kind": "concurrency", "per": ""}, FULL, {},
                 limits=[store]).change == ("api", concurrency(10))
    for bad, status in (({"store": "1"}, 404), ({"store": ""}, 404), ({"name": ""}, 400),
                        ({"name": "a b"}, 400), ({"n": "0"}, 400), ({"n": ""}, 400),
                        ({"n": "100001"}, 400), ({"per": "-1"}, 400), ({"per": "nan"}, 400),
                        ({"per": "86401"}, 400), ({"kind": ""}, 400)):
        with pytest.raises(BadRequest) as refused:
            check({**form, **bad}, FULL, {}, limits=[store])
        assert refused.value.status == status, bad
    delete = {"action": "delete-limit", "store": "0", "name": "api"}
    with pytest.raises(BadRequest, match="confirmation"):
        check(delete, FULL, {}, limits=[store])
    assert check({**delete, "yes": "1"}, FULL, {}, limits=[store]).change == ("api", None)
    with pytest.raises(BadRequest) as denied:
        check(form, READ_ONLY, {}, limits=[store])
    assert denied.value.status == 403


def test_an_action_on_a_workflow_store_is_checked_whole() -> None:
    store = object()
    form = {"action": "cancel-workflow", "store": "0", "id": "ab" * 16, "yes": "1"}
    got = check(form, FULL, {}, workflows=[store])
    assert (got.name, got.workflow, got.target(), got.id) == (
        "workflows 0", bytes.fromhex("ab" * 16), "ab" * 16, None)
    for bad, status in (({"store": "1"}, 404), ({"id": ""}, 400), ({"id": "xyz"}, 400),
                        ({"id": "00" * 101}, 400), ({"yes": ""}, 400)):
        with pytest.raises(BadRequest) as refused:
            check({**form, **bad}, FULL, {}, workflows=[store])
        assert refused.value.status == status, bad
