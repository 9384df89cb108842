"""Write the docstrings of the async faces from the sync faces, so they are written once.

Each public method of ``fdbrecipes.Queue`` (and of every other sync public class) has an
``async def`` twin in ``fdbrecipes.aio`` with the same name, parameters and meaning
(``tests/unit/test_parity.py`` checks the names and parameters).  The docstring, what a
call reads, writes, conflicts with and costs, is written once, on the sync method; this
script writes each twin's docstring into the async source from it:

* a first line naming the sync method (``The async twin of :meth:`fdbrecipes.Queue.pop```
  and how it is called: awaited, or with ``async with``);
* the sync docstring, with the wording of :data:`WORDING` changed where it says
  *block* or *thread* (an async call awaits; its heartbeat is a task);
* and, where the async method truly differs (pushes and acks given a Database share
  transactions between the tasks of an event loop, ``fdbrecipes/aio/_combine.py``;
  takes given a Database are bounded per event loop), the edits of :data:`EDITS`, each
  checked to apply (an edit whose text the sync docstring no longer has fails the run).

The code of the async methods is their own (each awaits the operation its sync twin
drives); only the docstrings and the notice at the top of each file are written here.
``docs/asyncio.md`` lists the same differences for readers.

Usage (stdlib only, deterministic)::

    python tools/unasync.py          # rewrite the async faces' docstrings
    python tools/unasync.py --check  # exit 1 with a diff when a file is out of date

``.ci/run`` runs ``--check``, and so does ``tests/unit/test_unasync.py``.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "fdbrecipes"


class Pair(NamedTuple):
    """An async class (in ``aio/<module>``) and the sync class it twins."""

    async_module: str  # under src/fdbrecipes/
    async_class: str
    sync_module: str
    sync_class: str
    public: str  # the public sync class its docstrings name (``fdbrecipes.<public>``)


PAIRS: Tuple[Pair, ...] = (
    Pair("aio/_jobs_face.py", "AsyncJobMethods", "_jobs_face.py", "JobMethods", "Queue"),
    Pair("aio/_ordered_face.py", "AsyncOrderedFace", "_ordered_face.py", "OrderedFace",
         "Queue"),
    Pair("aio/queue.py", "AsyncQueue", "queue.py", "Queue", "Queue"),
    Pair("aio/priority_queue.py", "AsyncPriorityQueue", "priority_queue.py", "PriorityQueue",
         "PriorityQueue"),
    Pair("aio/weight_tree.py", "AsyncWeightTree", "weight_tree.py", "WeightTree", "WeightTree"),
    Pair("aio/fair_queue.py", "AsyncFairQueue", "fair_queue.py", "FairQueue", "FairQueue"),
    Pair("aio/schedules.py", "AsyncSchedules", "schedules.py", "Schedules", "Schedules"),
    Pair("aio/worker.py", "AsyncWorker", "worker.py", "Worker", "Worker"),
)

#: How a method of an async class is called, which its first line says.
COROUTINE, CONTEXT, PLAIN, PROPERTY = "coroutine", "context", "plain", "property"

#: Changes of wording in every docstring (where the sync text has them): a sync call
#: blocks, an async one awaits; a sync heartbeat is a thread, an async one a task.
WORDING: Tuple[Tuple[str, str], ...] = (
    ("Block until", "Wait until"),
    ("Blocks on a", "Awaits a"),
    ("    with jobs.claimed(", "    async with jobs.claimed("),
    ("a background thread extends the lease", "a task extends the lease"),
    ("(the process stalled past the deadline)", "(the event loop stalled past the deadline)"),
)


class Replace(NamedTuple):
    """Replace ``old`` (which the sync docstring must contain) with ``new``."""

    old: str
    new: str


class Note(NamedTuple):
    """A paragraph of the async method's own, before ``Raises:`` (or at the end)."""

    text: str


Edit = Union[Replace, Note]

_SHARED_PUSHES = Replace(
    "Given a Database, pushes that threads of this process make while one is in\n"
    "flight share the next transaction (one commit, one receipt: each stored\n"
    "exactly once; a thread alone runs its own at once; see\n"
    "``docs/guarantees.md``).",
    "Given a Database, pushes that tasks of this event loop make within about a\n"
    "millisecond share one transaction (one commit, one receipt: each stored\n"
    "exactly once; at most 256 calls or 2 MB; acks share theirs likewise; see\n"
    "``docs/asyncio.md``).")
_TREE_PUSHES = Note(
    "Given a Database, pushes that tasks of this event loop make within about a "
    "millisecond share one transaction (one commit, one receipt: each stored exactly "
    "once; at most 256 calls or 2 MB; see ``docs/asyncio.md``).  The sync WeightTree "
    "runs each push in a transaction of its own.")
_SHARED_ACKS = Note(
    "Given a Database, acks that tasks of this event loop make within about a "
    "millisecond share one transaction (one commit, one receipt: each settled exactly "
    "once; at most 256 calls or 2 MB; pushes share theirs likewise; see "
    "``docs/asyncio.md``).  The sync class runs each ack in a transaction of its own.")
_BOUNDED_TAKES = Note(
    "Given a Database, one event loop runs at most ``spread`` takes (pops and claims) "
    "with that ``spread`` of this structure at once, times its shards (one at a time "
    "for ``spread=1`` unsharded); the others wait for a turn (see ``docs/asyncio.md``).")

#: Where an async method truly differs from its sync twin: (async class, method) -> edits.
EDITS: Dict[Tuple[str, str], Tuple[Edit, ...]] = {
    ("AsyncQueue", "push"): (_SHARED_PUSHES,),
    ("AsyncPriorityQueue", "push"): (_SHARED_PUSHES,),
    ("AsyncWeightTree", "push"): (_TREE_PUSHES,),
    ("AsyncWeightTree", "push_many"): (_TREE_PUSHES,),
    ("AsyncOrderedFace", "ack"): (_SHARED_ACKS,),
    ("AsyncOrderedFace", "ack_many"): (_SHARED_ACKS,),
    **{("AsyncQueue", name): (_BOUNDED_TAKES,)
       for name in ("pop", "pop_many", "claim", "claim_many")},
    **{("AsyncPriorityQueue", f"{verb}_{end}{many}"): (_BOUNDED_TAKES,)
       for verb in ("pop", "claim") for end in ("min", "max") for many in ("", "_many")},
}

#: The width a note is wrapped to (a method's docstring is indented by 8).
NOTE_WIDTH = 84


def first_line(public: str, name: str, kind: str) -> str:
    """The line naming the sync twin, and how the async method is called."""
    twin = f":meth:`fdbrecipes.{public}.{name}`"
    if kind == CONTEXT:
        line = f"The async twin of {twin}, used with ``async with`` (its heartbeat is a task)."
    elif kind == PLAIN:
        line = f"The twin of {twin} (a plain call, not awaited)."
    else:
        line = f"The async twin of {twin}, awaited without blocking the event loop."
    return fill(line)


def fill(text: str) -> str:
    """``text`` wrapped to :data:`NOTE_WIDTH`, never inside a literal or between a
    figure and its unit."""
    kept = re.sub(r"``[^`]*``| MB", lambda m: m.group().replace(" ", "\0"), text)
    return textwrap.fill(kept, NOTE_WIDTH).replace("\0", " ")


def adapt(async_class: str, name: str, public: str, sync_doc: str, kind: str) -> str:
    """The docstring of ``async_class.name`` made from ``sync_doc`` (as
    :func:`inspect.cleandoc` gives it), the docstring of ``fdbrecipes.<public>.name``.

    Raises:
        ValueError: an edit of :data:`EDITS` no longer applies to ``sync_doc``.
    """
    if kind == PROPERTY:
        return sync_doc
    doc = sync_doc
    for old, new in WORDING:
        doc = doc.replace(old, new)
    for edit in EDITS.get((async_class, name), ()):
        if isinstance(edit, Replace):
            if doc.count(edit.old) != 1:
                raise ValueError(f"{async_class}.{name}: the sync docstring no longer says "
                                 f"{edit.old!r} (once): update EDITS in tools/unasync.py")
            doc = doc.replace(edit.old, edit.new)
        else:
            note = fill(edit.text)
            head, raises, tail = doc.partition("\n\nRaises:")
            doc = f"{head}\n\n{note}{raises}{tail}"
    return f"{first_line(public, name, kind)}\n\n{doc}"


Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]


def find_class(tree: ast.Module, name: str, path: Path) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise SystemExit(f"{path}: no class {name}")


def public_functions(cls: ast.ClassDef) -> List[Function]:
    return [node for node in cls.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not node.name.startswith("_")]


def kind_of(node: Function) -> str:
    if any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
        return PROPERTY
    if isinstance(node, ast.AsyncFunctionDef):
        return COROUTINE
    return CONTEXT if node.name.startswith("claimed") else PLAIN


def sync_docs(pair: Pair) -> Dict[str, str]:
    """The docstrings of the sync class's public methods and properties, by name."""
    path = PACKAGE / pair.sync_module
    cls = find_class(ast.parse(path.read_text()), pair.sync_class, path)
    docs = {}
    for node in public_functions(cls):
        doc = ast.get_docstring(node)
        if not doc:
            raise SystemExit(f"{path}: {pair.sync_class}.{node.name} has no docstring")
        docs[node.name] = doc
    return docs


def render(doc: str, indent: str) -> List[str]:
    """The source lines of a docstring ``doc`` at ``indent``."""
    if '"""' in doc or "\\" in doc:
        raise SystemExit(f"a docstring this script cannot quote: {doc[:60]!r}")
    lines = doc.split("\n")
    if len(lines) == 1:
        return [f'{indent}"""{doc}"""']
    out = [f'{indent}"""{lines[0]}']
    out += [f"{indent}{line}" if line else "" for line in lines[1:]]
    out.append(f'{indent}"""')
    return out


def notice(pair: Pair) -> List[str]:
    """The comment at the top of a generated file."""
    return [
        "# The docstrings of this module's public methods are generated by tools/unasync.py",
        f"# from those of src/fdbrecipes/{pair.sync_module}: edit those, then run",
        "# `python tools/unasync.py` (`--check` in .ci/run fails when they are out of date).",
        "# The code is this module's own.",
    ]


def generate(pair: Pair, source: str) -> str:
    """``source`` (the async module) with every public method's docstring written."""
    path = PACKAGE / pair.async_module
    theirs = sync_docs(pair)
    lines = source.split("\n")
    top = notice(pair)
    if lines[:1] == top[:1]:  # the notice of the last run
        del lines[:len(top)]
    tree = ast.parse("\n".join(lines))
    cls = find_class(tree, pair.async_class, path)
    for node in reversed(public_functions(cls)):
        if node.name not in theirs:
            raise SystemExit(f"{path}: {pair.async_class}.{node.name} has no sync twin in "
                             f"{pair.sync_class}")
        doc = adapt(pair.async_class, node.name, pair.public, theirs[node.name],
                    kind_of(node))
        body = node.body[0]
        indent = " " * body.col_offset
        new = render(doc, indent)
        if (isinstance(body, ast.Expr) and isinstance(body.value, ast.Constant)
                and isinstance(body.value.value, str)):
            assert body.end_lineno is not None
            lines[body.lineno - 1:body.end_lineno] = new
        else:
            lines[body.lineno - 1:body.lineno - 1] = new
    return "\n".join(notice(pair) + lines)


def run(check: bool, pairs: Sequence[Pair] = PAIRS) -> int:
    """Write (or, with ``check``, compare) every async face; 1 when one is out of date."""
    written = {(pair.async_class, node.name) for pair in pairs
               for node in public_functions(find_class(
                   ast.parse((PACKAGE / pair.async_module).read_text()), pair.async_class,
                   PACKAGE / pair.async_module))}
    unused = sorted(set(EDITS) - written)
    if unused and pairs is PAIRS:
        raise SystemExit(f"EDITS names methods no async class has: {unused}")
    stale = 0
    for pair in pairs:
        path = PACKAGE / pair.async_module
        current = path.read_text()
        wanted = generate(pair, current)
        if wanted == current:
            continue
        shown = str(path.relative_to(ROOT))
        if check:
            stale = 1
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(keepends=True), wanted.splitlines(keepends=True),
                f"{shown} (as it is)", f"{shown} (as tools/unasync.py writes it)"))
        else:
            path.write_text(wanted)
            print(f"wrote {shown}")
    if stale:
        print("\nout of date: run `python tools/unasync.py`", file=sys.stderr)
    return stale


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 with a diff when a file is out of date")
    return run(parser.parse_args(argv).check)


if __name__ == "__main__":
    sys.exit(main())
