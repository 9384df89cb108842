"""Write the async faces' methods from the sync faces', so each is written once.

Each public method of ``fdbrecipes.Queue`` (and of every other sync public class) has an
``async def`` twin in ``fdbrecipes.aio`` with the same name, parameters and meaning
(``tests/unit/test_parity.py`` checks the names and parameters).  Its signature, its
docstring (what a call reads, writes, conflicts with and costs) and its code (one
operation of the structure's operations object) are written once, on the sync method;
this script writes each twin into the async source from them (a twin the async class
lacks is appended to it):

* the signature, ``async def`` (``claimed*`` and ``AsyncWorker.stop`` stay plain
  ``def``; a context manager's return type is an ``AsyncContextManager``);

* a first line naming the sync method (``The async twin of :meth:`fdbrecipes.Queue.pop```
  and how it is called: awaited, or with ``async with``);
* the sync docstring, with the wording of :data:`WORDING` changed where it says
  *block* or *thread* (an async call awaits; its heartbeat is a task), and, where the
  async method truly differs (pushes and acks given a Database share transactions
  between the tasks of an event loop, ``fdbrecipes/aio/_combine.py``; takes given a
  Database are bounded per event loop), the edits of :data:`EDITS`, each checked to
  apply (an edit whose text the sync docstring no longer has stops the run);
* the sync code with each operation awaited (``drive(...)`` becomes ``await
  drive(...)``, the awaiting driver's), except for the methods of :data:`OWN_CODE`,
  whose code is written by hand in the async module (that is where they differ).

The rest of an async module (its imports, class docstring, decorators, private
helpers) is written by hand; ``docs/asyncio.md`` lists the differences for readers.

Usage (stdlib only, deterministic)::

    python tools/unasync.py          # rewrite the async faces
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
    Pair("aio/limits.py", "AsyncLimits", "limits.py", "Limits", "Limits"),
    Pair("aio/workflow.py", "AsyncWorkflows", "workflow.py", "Workflows", "Workflows"),
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
    "``docs/guarantees.md``).  Each push keeps its own id, options and error: one\n"
    "refused in it (a unique key held) raises in its own thread, and a shared",
    "Given a Database, pushes that tasks of this event loop make within about a\n"
    "millisecond share one transaction (one commit, one receipt: each stored\n"
    "exactly once; at most 256 calls or 2 MB; acks share theirs likewise; see\n"
    "``docs/asyncio.md``).  Each push keeps its own id, options and error: one\n"
    "refused in it (a unique key held) raises in its own task, and a shared")
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

#: The async methods whose code is their own, not their sync twin's with each operation
#: awaited: where the async call differs (see docs/asyncio.md), by async class.
OWN_CODE: Dict[Tuple[str, str], str] = {
    **{(cls, name): "pushes given a Database share transactions between tasks (_combine)"
       for cls in ("AsyncQueue", "AsyncPriorityQueue", "AsyncWeightTree")
       for name in ("push", "push_many")},
    **{("AsyncOrderedFace", name): "acks given a Database share transactions between tasks"
       for name in ("ack", "ack_many")},
    **{("AsyncQueue", name): "takes given a Database are bounded per event loop (Takers)"
       for name in ("pop", "pop_many", "claim", "claim_many")},
    **{("AsyncPriorityQueue", f"{verb}_{end}{many}"): "takes are bounded per event loop"
       for verb in ("pop", "claim") for end in ("min", "max") for many in ("", "_many")},
    ("AsyncWorker", "run"): "runs on the caller's event loop (the sync one starts its own)",
}

#: The longest line (ruff's line-length).
LINE_WIDTH = 100

#: The async methods called without ``await`` besides the ``claimed*`` context managers.
PLAIN_CALLS = {("AsyncWorker", "stop")}

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


def kind_of(async_class: str, sync: SyncMethod, name: str) -> str:
    """How the twin of the sync method ``name`` is called."""
    if any(line.strip() == "@property" for line in sync.decorators):
        return PROPERTY
    if name.startswith("claimed"):
        return CONTEXT
    return PLAIN if (async_class, name) in PLAIN_CALLS else COROUTINE


class SyncMethod(NamedTuple):
    """What the script takes of a sync method: its docstring and its code."""

    doc: str
    decorators: List[str]  # their source lines
    signature: List[str]  # the source lines from ``def`` to the colon
    body: List[str]  # the source lines after the docstring (imports one package down)
    awaited: List[str]  # those lines as an ``async def`` has them
    indent: int


def sync_methods(pair: Pair) -> Dict[str, SyncMethod]:
    """The public methods and properties of the sync class, by name."""
    path = PACKAGE / pair.sync_module
    source = path.read_text()
    lines = source.split("\n")
    cls = find_class(ast.parse(source), pair.sync_class, path)
    methods = {}
    for node in public_functions(cls):
        doc = ast.get_docstring(node)
        if not doc or len(node.body) < 2:
            raise SystemExit(f"{path}: {pair.sync_class}.{node.name} has no docstring "
                             "or no code")
        end = node.body[-1].end_lineno
        assert end is not None
        start = node.body[1].lineno
        decorated = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        methods[node.name] = SyncMethod(
            doc, lines[decorated - 1:node.lineno - 1],
            lines[node.lineno - 1:node.body[0].lineno - 1],
            [moved(line) for line in lines[start - 1:end]], awaited(node, lines, start),
            node.body[0].col_offset)
    return methods


def async_signature(lines: List[str], kind: str) -> List[str]:
    """A sync method's signature as its twin has it: ``async def`` (an aligned
    continuation moved along), an ``AsyncContextManager`` where it returns a context
    manager; a return annotation that no longer fits on its line on one of its own."""
    out = [re.sub(r"(?<!Async)\bContextManager\[", "AsyncContextManager[", line)
           for line in lines]
    if kind == COROUTINE:
        hanging = out[0].endswith("(")
        out = [out[0].replace("def ", "async def ", 1)] + [
            line if hanging else " " * len("async ") + line for line in out[1:]]
    fitted = []
    for line in out:
        if len(line) > LINE_WIDTH and ") -> " in line:
            at = line.rindex(") -> ")
            indent = len(line) - len(line.lstrip())
            line, rest = line[:at], " " * indent + line[at:]
            fitted.append(line)
            line = rest
        if len(line) > LINE_WIDTH:
            raise SystemExit(f"a signature line this script cannot fit: {line.strip()!r}")
        fitted.append(line)
    return fitted


#: A call of the driver, which the async code awaits.
DRIVE = re.compile(r"(?<![\w.])drive\(")


def moved(line: str) -> str:
    """A line of sync code as it stands one package further down (``aio/``)."""
    return re.sub(r"^(\s*)from \.", r"\1from ..", line)


def awaited(node: Function, lines: List[str], start: int) -> List[str]:
    """The code of a sync method (from line ``start``) as its async twin has it: each
    operation awaited (the lines continuing a statement moved as far as its first
    line grew), relative imports from one package further down."""
    end = node.end_lineno
    assert end is not None
    out = {number: moved(lines[number - 1]) for number in range(start, end + 1)}
    for statement in ast.walk(node):
        if (not isinstance(statement, ast.stmt) or hasattr(statement, "body")
                or statement.lineno < start):
            continue
        first = out[statement.lineno]
        out[statement.lineno] = DRIVE.sub("await drive(", first)
        grown = len(out[statement.lineno]) - len(first)
        for number in range(statement.lineno + 1, (statement.end_lineno or 0) + 1):
            line = DRIVE.sub("await drive(", out[number])
            out[number] = " " * grown + line if line else ""
    return [out[number] for number in range(start, end + 1)]


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
        "# Generated in part by tools/unasync.py from src/fdbrecipes/"
        f"{pair.sync_module}: the",
        "# public methods (signature, docstring, code), but the code of those the script",
        "# lists in OWN_CODE.  Edit the sync module (or OWN_CODE's methods here), then run",
        "# `python tools/unasync.py`; `--check` (in .ci/run) fails while a file is stale.",
    ]


def is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def twin_lines(pair: Pair, name: str, sync: SyncMethod, own: Optional[List[str]]) -> List[str]:
    """The twin of the sync method ``name``, from ``def`` to its end: its signature,
    docstring and code (``own``: the code of a method of :data:`OWN_CODE`)."""
    kind = kind_of(pair.async_class, sync, name)
    new = async_signature(sync.signature, kind)
    new += render(adapt(pair.async_class, name, pair.public, sync.doc, kind),
                  " " * sync.indent)
    if own is not None:
        return new + own
    if kind == COROUTINE:
        return new + sync.awaited
    if any(DRIVE.search(line) for line in sync.body):
        raise SystemExit(f"{pair.async_class}.{name} is not awaited, but its sync twin "
                         "drives an operation: list its code in OWN_CODE")
    return new + sync.body


def generate(pair: Pair, source: str) -> str:
    """``source`` (the async module) with every public method of the async class
    written from its sync twin (those the sync class has and it has not yet appended
    to it): all but the decorators of the twins already there, and the code of the
    methods of :data:`OWN_CODE`."""
    path = PACKAGE / pair.async_module
    theirs = sync_methods(pair)
    lines = source.split("\n")
    top = notice(pair)
    if lines[:1] == top[:1]:  # the notice of the last run
        del lines[:len(top)]
    tree = ast.parse("\n".join(lines))
    cls = find_class(tree, pair.async_class, path)
    ours = public_functions(cls)
    missing = [name for name in theirs if name not in {node.name for node in ours}]
    assert cls.end_lineno is not None
    for name in reversed(missing):
        if (pair.async_class, name) in OWN_CODE:
            raise SystemExit(f"{path}: {pair.async_class}.{name}, in OWN_CODE, is not there")
        lines[cls.end_lineno:cls.end_lineno] = [""] + theirs[name].decorators + twin_lines(
            pair, name, theirs[name], None)
    for node in reversed(ours):
        if node.name not in theirs:
            raise SystemExit(f"{path}: {pair.async_class}.{node.name} has no sync twin in "
                             f"{pair.sync_class}")
        sync = theirs[node.name]
        first, last = node.body[0], node.body[-1]
        assert last.end_lineno is not None
        if first.col_offset != sync.indent:
            raise SystemExit(f"{path}: {pair.async_class}.{node.name} is indented apart "
                             "from its sync twin")
        own = None
        if (pair.async_class, node.name) in OWN_CODE:
            code = node.body[1:] if is_docstring(first) else node.body
            if not code:
                raise SystemExit(f"{path}: {pair.async_class}.{node.name}, in OWN_CODE, "
                                 "has no code")
            own = lines[code[0].lineno - 1:last.end_lineno]
        lines[node.lineno - 1:last.end_lineno] = twin_lines(pair, node.name, sync, own)
    return "\n".join(notice(pair) + lines)


def run(check: bool) -> int:
    """Write (or, with ``check``, compare) every async face; 1 when one is out of date."""
    present = {(pair.async_class, node.name) for pair in PAIRS
               for node in public_functions(find_class(
                   ast.parse((PACKAGE / pair.async_module).read_text()), pair.async_class,
                   PACKAGE / pair.async_module))}
    unused = sorted((set(EDITS) | set(OWN_CODE)) - present)
    if unused:
        raise SystemExit(f"EDITS or OWN_CODE names methods no async class has: {unused}")
    stale = 0
    for pair in PAIRS:
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
