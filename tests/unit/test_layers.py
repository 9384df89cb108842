"""No import points up the layer table of docs/design.md (needs no server, imports
nothing of the library: every module's imports are read with ``ast``).

:data:`LAYERS` is the table of docs/design.md, top layer first: each layer names its
modules by path under ``src/fdbrecipes``, a file (``queue.py``) or a folder
(``_ops/``, every module under it); a module belongs to the most specific entry that
names it.  A module may import modules of its own layer and of the layers below it,
never one above.

Every import counts, wherever it stands: at the top of the module, inside a function
(a deferred import is still a dependency, only a later one), and under ``if
TYPE_CHECKING:`` (a type named in a signature is a dependency a reader follows as much
as a call is; only the interpreter skips it).  ``from X import name`` is an import of
the module ``X.name`` when there is one, else of ``X``; ``from .. import Queue`` is an
import of the package's ``__init__.py``.  The parent packages the interpreter runs
before a module (``aio/__init__.py`` before ``aio/queue.py``) are not imports of the
importer's own.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "fdbrecipes"
DESIGN = ROOT / "docs" / "design.md"

#: docs/design.md's layer table, top first: (the layer's name as the table says it,
#: the modules it holds).
LAYERS: List[Tuple[str, Tuple[str, ...]]] = [
    ("Tools", ("cli.py", "__main__.py", "admin/", "web/", "contrib/", "tasks/", "metrics.py",
               "prometheus.py", "otel.py", "_demo.py", "bench/", "testing/", "server/",
               "_cluster.py", "_local/")),
    ("The package", ("__init__.py", "aio/__init__.py", "types.py")),
    ("Jobs", ("_worker/", "worker.py", "aio/worker.py", "jobs.py", "schedule.py",
              "schedules.py", "aio/schedules.py", "_schedules/", "workflow.py", "aio/workflow.py",
              "_workflow/")),
    ('The public classes ("faces")', (
        "queue.py", "priority_queue.py", "_ordered_face.py", "weight_tree.py", "fair_queue.py",
        "_jobs_face.py", "_face.py", "_bases.py", "_heartbeat.py", "aio/", "limits.py")),
    ("What the tools need", ("protocol.py", "_kinds.py")),
    ("Operations objects", ("_ops/",)),
    ("Engines", ("_ordered/", "_tree/", "_fair/", "_limits/")),
    ("Job records", ("_records/",)),
    ("Keys", ("_layout.py", "_store_layout.py", "_ids.py")),
    ("Running a call", ("_retry.py", "_receipts.py", "_drivers/")),
    ("Waiting", ("_waiting.py",)),
    ("An operation and the clock", ("_attempt.py", "_clock.py")),
    ("Bindings and values", ("_fdb.py", "_values.py", "_codec.py", "errors.py", "_hooks.py")),
]


class Import(NamedTuple):
    """One import of a module of the package by another, and where it stands."""

    importer: str  # dotted: fdbrecipes._ops.base
    imported: str
    line: int


def modules() -> Dict[str, Path]:
    """Every module of the package by dotted name (``fdbrecipes._ops.base``; a
    package by its own name)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(known: Dict[str, Path]) -> Iterator[Import]:
    """Every import of a module of the package by another, as written (see the module
    docstring for what counts)."""
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                           for alias in node.names]
            for target in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    yield Import(name, target, node.lineno)


def dotted(entry: str) -> str:
    """The module an entry of :data:`LAYERS` names (a folder: the package, and what
    is under it): ``_ops/`` and ``_ops.py`` are both ``fdbrecipes._ops``."""
    parts = entry.rstrip("/").removesuffix(".py").split("/")
    return ".".join(["fdbrecipes", *(part for part in parts if part != "__init__")])


def layer_of(module: str) -> Optional[int]:
    """The index in :data:`LAYERS` of the most specific entry naming ``module``
    (dotted): the longest, and a file (``aio/__init__.py``) before the folder of the
    same name (``aio/``); None if no entry does."""
    naming = [(len(dotted(entry)), not entry.endswith("/"), index)
              for index, (_, entries) in enumerate(LAYERS) for entry in entries
              if module == dotted(entry)
              or (entry.endswith("/") and module.startswith(dotted(entry) + "."))]
    return max(naming)[2] if naming else None


def path_of(module: str, known: Dict[str, Path]) -> str:
    return known[module].relative_to(PACKAGE).as_posix()


def test_every_module_has_a_layer() -> None:
    known = modules()
    unplaced = sorted(path_of(name, known) for name in known if layer_of(name) is None)
    assert not unplaced, f"modules in no layer (add them here and to docs/design.md): {unplaced}"


def test_every_entry_of_the_table_is_there() -> None:
    missing = [entry for _, entries in LAYERS for entry in entries
               if not (PACKAGE / entry).exists()]
    assert not missing, f"the table names what is not there: {missing}"


def test_no_import_points_up() -> None:
    known = modules()
    up: List[str] = []
    for one in imports(known):
        mine, theirs = layer_of(one.importer), layer_of(one.imported)
        if mine is not None and theirs is not None and theirs < mine:
            line = (f"{path_of(one.importer, known)}:{one.line} ({LAYERS[mine][0]}) imports "
                    f"{path_of(one.imported, known)} ({LAYERS[theirs][0]})")
            up += [line] if line not in up else []
    assert not up, "imports that point up the layer table:\n" + "\n".join(up)


def design_table() -> List[Tuple[str, str]]:
    """The rows of docs/design.md's layer table: (layer, its modules' cell)."""
    rows = []
    for line in DESIGN.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("Layer", "---"):
            rows.append((cells[0], cells[1]))
        elif rows and not line.startswith("|"):
            break
    return rows


def test_the_table_is_docs_design_table() -> None:
    """The layers are the design's, in its order, and the design names each module
    entry in its layer's row (it may say more: files inside a folder, what they do)."""
    rows = design_table()
    assert [name for name, _ in rows] == [name for name, _ in LAYERS]
    for (name, cell), (_, entries) in zip(rows, LAYERS):
        named = set(re.findall(r"`([^`]+)`", cell))
        unnamed = [entry for entry in entries if entry not in named]
        assert not unnamed, f"docs/design.md's row {name!r} does not name {unnamed}"
