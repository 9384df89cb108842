"""A workflow's graph drawn as inline SVG, server-side: pure functions, no I/O.

:func:`layers` puts each node in the column of its dependency depth (0: no
dependency among the nodes given; else one more than its deepest dependency), in
Python, without recursion (Kahn's order), so a chain of 50,000 nodes is laid out as
well as a fan-out.  :func:`draw` draws the first :data:`PER_LAYER` nodes of the first
:data:`LAYERS` columns as boxes coloured by state (:data:`COLOURS`), the edges between
drawn nodes as arrows, and a "+k more" box under a column that holds more (a box's
tooltip: the node's name, state and what it failed with; a link to its job's page when
one is given); every name, error and link is escaped (``markupsafe.escape``), so the
SVG is safe to put in a page as it is.
Its size grows with what is drawn, never with the graph: at most ``PER_LAYER x
LAYERS`` boxes and :data:`EDGES` arrows.
"""

from __future__ import annotations

from collections import deque
from typing import Deque, Dict, List, Mapping, NamedTuple, Sequence, Tuple

from markupsafe import Markup, escape

from ..workflow import GraphNode

__all__ = ["COLOURS", "EDGES", "LAYERS", "PER_LAYER", "Drawing", "draw", "layers"]

#: Nodes drawn at most in one column (the others are "+k more").
PER_LAYER = 20
#: Columns (depths) drawn at most.
LAYERS = 30
#: Arrows drawn at most.
EDGES = 3_000
#: A node's fill and stroke by state (states of :class:`fdbrecipes.workflow.NodeStatus`).
COLOURS = {"waiting": ("#f6f8fa", "#8c959f"), "queued": ("#ddf4ff", "#0969da"),
           "succeeded": ("#dafbe1", "#1a7f37"), "failed": ("#ffebe9", "#cf222e"),
           "cancelled": ("#fff1e5", "#bc4c00"), "skipped": ("#fbefff", "#8250df")}
#: What a state no colour is known for is drawn with.
OTHER = ("#ffffff", "#57606a")
#: A box's size, and the gaps between boxes, in pixels.
BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 150, 26, 60, 10, 10
#: Characters of a name a box shows, and of a name or an error its tooltip shows.
LABEL, TITLE = 19, 200


class Drawing(NamedTuple):
    """A graph drawn: the SVG (markup, escaped), how many nodes it draws of how many
    it was given, and its number of columns (depths)."""

    svg: Markup
    drawn: int
    total: int
    depth: int


def layers(nodes: Sequence[GraphNode]) -> List[List[GraphNode]]:
    """``nodes`` by dependency depth, each column in the order the nodes were given.
    A dependency not among ``nodes`` is left out; nodes on a cycle (never in a
    workflow: ``create`` refuses one) go in the column after the deepest others."""
    by_name = {node.name: node for node in nodes}
    deps = {node.name: [d for d in node.deps if d in by_name] for node in nodes}
    dependents: Dict[str, List[str]] = {node.name: [] for node in nodes}
    for name, found in deps.items():
        for dep in found:
            dependents[dep].append(name)
    left = {name: len(found) for name, found in deps.items()}
    depth = dict.fromkeys(by_name, 0)
    ready: Deque[str] = deque(name for name, n in left.items() if n == 0)
    while ready:
        name = ready.popleft()
        for dependent in dependents[name]:
            depth[dependent] = max(depth[dependent], depth[name] + 1)
            left[dependent] -= 1
            if left[dependent] == 0:
                ready.append(dependent)
    if any(left.values()):
        after = max((depth[n] for n, k in left.items() if k == 0), default=-1) + 1
        depth.update((n, after) for n, k in left.items() if k)
    out: List[List[GraphNode]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node in nodes:
        out[depth[node.name]].append(node)
    return out


def _cut(text: str) -> str:
    """``text`` cut to :data:`TITLE` characters (a tooltip's)."""
    return text if len(text) <= TITLE else text[:TITLE - 1] + "…"


def _label(name: str) -> str:
    return name if len(name) <= LABEL else name[:LABEL - 1] + "…"


def draw(nodes: Sequence[GraphNode], per_layer: int = PER_LAYER,
         most_layers: int = LAYERS, links: Mapping[str, str] = {}) -> Drawing:
    """The SVG of ``nodes`` (see the module docstring): columns left to right by
    depth, each node a box named and coloured by its state, with a tooltip of its
    name and state (a link to ``links[name]``, when there is one), each dependency
    an arrow from it to its dependent."""
    columns = layers(nodes)
    shown = columns[:most_layers]
    at: Dict[str, Tuple[int, int]] = {}
    parts: List[str] = []
    tallest = 0
    for c, column in enumerate(shown):
        x = MARGIN + c * (BOX_W + GAP_X)
        for r, node in enumerate(column[:per_layer]):
            y = MARGIN + r * (BOX_H + GAP_Y)
            at[node.name] = (x, y)
            fill, stroke = COLOURS.get(node.state, OTHER)
            why = "" if node.error is None else f" ({_cut(node.error)})"
            box = (f'<g class="node {escape(node.state)}"><title>{escape(_cut(node.name))}: '
                   f'{escape(node.state)}{escape(why)}</title><rect x="{x}" y="{y}" '
                   f'width="{BOX_W}" height="{BOX_H}" rx="5" fill="{fill}" '
                   f'stroke="{stroke}"/><text x="{x + 8}" y="{y + 17}" font-size="12" '
                   f'fill="#1f2328">{escape(_label(node.name))}</text></g>')
            link = links.get(node.name)
            parts.append(box if link is None else
                         f'<a class="job" href="{escape(link)}">{box}</a>')
        rows = min(len(column), per_layer)
        if len(column) > per_layer:
            y = MARGIN + rows * (BOX_H + GAP_Y)
            parts.append(f'<text class="more" x="{x + 8}" y="{y + 17}" font-size="12" '
                         f'fill="#57606a">+{len(column) - per_layer:,} more</text>')
            rows += 1
        tallest = max(tallest, rows)
    arrows: List[str] = []
    for node in nodes:
        if node.name not in at:
            continue
        x2, y2 = at[node.name]
        for dep in node.deps:
            if dep not in at or len(arrows) >= EDGES:
                continue
            x1, y1 = at[dep]
            arrows.append(f'<path class="edge" d="M{x1 + BOX_W},{y1 + BOX_H // 2} '
                          f'L{x2 - 2},{y2 + BOX_H // 2}" fill="none" stroke="#8c959f" '
                          'stroke-width="1" marker-end="url(#arrow)"/>')
    width = 2 * MARGIN + max(1, len(shown)) * (BOX_W + GAP_X) - GAP_X
    height = 2 * MARGIN + max(1, tallest) * (BOX_H + GAP_Y) - GAP_Y
    svg = (f'<svg class="dag" width="{width}" height="{height}" viewBox="0 0 {width} '
           f'{height}" role="img" aria-label="the workflow\'s graph">'
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
           'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
           '<path d="M0,0 L10,5 L0,10 z" fill="#8c959f"/></marker></defs>'
           + "".join(arrows) + "".join(parts) + "</svg>")
    depth = len(columns)
    drawn = sum(min(len(column), per_layer) for column in shown)
    return Drawing(Markup(svg), drawn, len(nodes), depth)
