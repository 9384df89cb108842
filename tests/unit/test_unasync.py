"""``tools/unasync.py`` writes the async faces' docstrings from the sync faces': the files
in the tree are what it writes (as ``.ci/run`` checks), and a stale one fails the check
with a diff (needs no server)."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from fdbrecipes import Queue
from tools import unasync


def test_the_async_faces_are_up_to_date() -> None:
    """What ``python tools/unasync.py --check`` runs: no file would change."""
    done = subprocess.run([sys.executable, str(Path(unasync.__file__)), "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def copy_of_the_faces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The sync and async face modules copied under ``tmp_path``, where the script
    now reads and writes; the copy's package folder."""
    package = tmp_path / "src" / "fdbrecipes"
    for pair in unasync.PAIRS:
        for module in (pair.async_module, pair.sync_module):
            (package / module).parent.mkdir(parents=True, exist_ok=True)
            (package / module).write_text((unasync.PACKAGE / module).read_text())
    monkeypatch.setattr(unasync, "ROOT", tmp_path)
    monkeypatch.setattr(unasync, "PACKAGE", package)
    return package


def test_a_stale_docstring_fails_the_check_with_a_diff(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A copy of the package whose AsyncQueue.peek says something else: ``--check``
    exits 1 and shows the line it would write; a run writes it, and the check passes."""
    package = copy_of_the_faces(tmp_path, monkeypatch)
    queue = package / "aio" / "queue.py"
    text = queue.read_text()
    said = "The value :meth:`pop` would return now, without removing it."
    assert text.count(said) == 1
    queue.write_text(text.replace(said, "Something else."))

    assert unasync.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert f"-        Something else.\n+        {said}\n" in out
    assert said not in queue.read_text()  # --check writes nothing

    assert unasync.main([]) == 0
    assert queue.read_text() == text
    assert unasync.main(["--check"]) == 0


def test_an_edit_that_no_longer_applies_is_refused() -> None:
    """A listed difference whose sync text has changed stops the run (the async
    docstring would lose it silently otherwise)."""
    with pytest.raises(ValueError, match="no longer says"):
        unasync.adapt("AsyncQueue", "push", "Queue", "Append ``value``.", unasync.COROUTINE)


def test_an_edit_of_a_method_no_async_class_has_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A listed difference of a method that is gone stops the run (the list would
    otherwise say more than the code does)."""
    edits = dict(unasync.EDITS)
    edits[("AsyncQueue", "gone")] = (unasync.Note("A note."),)
    monkeypatch.setattr(unasync, "EDITS", edits)
    with pytest.raises(SystemExit, match="gone"):
        unasync.main(["--check"])


def test_the_code_follows_the_sync_method_but_where_it_is_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change to the code of sync Queue.peek (mechanical) reaches AsyncQueue.peek,
    awaited; a change to sync Queue.pop (whose async code is its own: takes bounded
    per event loop) leaves AsyncQueue.pop's code as it is."""
    package = copy_of_the_faces(tmp_path, monkeypatch)
    assert ("AsyncQueue", "pop") in unasync.OWN_CODE
    assert ("AsyncQueue", "peek") not in unasync.OWN_CODE
    sync, queue = package / "queue.py", package / "aio" / "queue.py"
    peek = "return drive(self._ops.peek(tr, MIN))"
    pop = "return drive(self._ops.pop(tr, MIN, spread))"
    own_pop = "return await self._take(tr, self._ops.pop(tr, MIN, spread), spread)"
    text = sync.read_text()
    assert text.count(peek) == 1 and text.count(pop) == 1
    sync.write_text(text.replace(peek, "return drive(self._ops.peek(tr, MAX))")
                    .replace(pop, "return drive(self._ops.pop(tr, MAX, spread))"))

    assert unasync.main([]) == 0
    written = queue.read_text()
    assert "return await drive(self._ops.peek(tr, MAX))" in written
    assert "self._ops.peek(tr, MIN)" not in written
    assert written.count(own_pop) == 1


def test_a_method_the_async_class_lacks_is_written_at_its_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync method with no twin yet (AsyncQueue.peek taken out of the copy) gets
    one, whole, at the end of the async class: ``async def``, docstring, code."""
    package = copy_of_the_faces(tmp_path, monkeypatch)
    queue = package / "aio" / "queue.py"
    text = queue.read_text()
    cls = next(node for node in ast.parse(text).body
               if isinstance(node, ast.ClassDef) and node.name == "AsyncQueue")
    peek = next(node for node in cls.body
                if isinstance(node, ast.AsyncFunctionDef) and node.name == "peek")
    lines = text.split("\n")
    assert peek.end_lineno is not None
    del lines[peek.lineno - 1:peek.end_lineno + 1]  # with the blank line after it
    queue.write_text("\n".join(lines))
    assert unasync.main(["--check"]) == 1

    assert unasync.main([]) == 0
    written = queue.read_text()
    cls = next(node for node in ast.parse(written).body
               if isinstance(node, ast.ClassDef) and node.name == "AsyncQueue")
    last = cls.body[-1]
    assert isinstance(last, ast.AsyncFunctionDef) and last.name == "peek"
    assert ast.get_docstring(last) == unasync.adapt(
        "AsyncQueue", "peek", "Queue", inspect.getdoc(Queue.peek) or "", unasync.COROUTINE)
    assert ast.unparse(last.body[1]) == "return await drive(self._ops.peek(tr, MIN))"
    assert unasync.main(["--check"]) == 0
