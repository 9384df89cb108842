"""The tasks' typing as a user's type checker sees it: ``mypy --strict`` (run as a
subprocess) accepts a correct sample app and refuses a wrong keyword, a wrong
argument type and a wrong result type, each in a small file of its own
(tests/unit/typing_samples/), at the line that is wrong."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLES = Path(__file__).parent / "typing_samples"
#: Each wrong sample: the error mypy must report, at the line marked "the error".
WRONG = {
    "wrong_keyword.py": r'Unexpected keyword argument "subjet" for "defer"',
    "wrong_type.py": r'Argument "width" to "defer" of "Task" has incompatible type "str"; '
                     r'expected "int"',
    "wrong_result.py": r'Incompatible types in assignment \(expression has type "int", '
                       r'variable has type "str"\)',
}


def test_mypy_strict_accepts_a_correct_app_and_refuses_wrong_calls(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="the test extra installs mypy")
    files = [SAMPLES / "good_app.py", *(SAMPLES / name for name in WRONG)]
    found = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), *map(str, files)],
        capture_output=True, text=True, timeout=300, cwd=SAMPLES.parent.parent.parent)
    errors = [line for line in found.stdout.splitlines() if ": error:" in line]
    assert not [e for e in errors if "good_app.py" in e], found.stdout
    for name, expected in WRONG.items():
        wrong_line = next(i for i, text in enumerate(
            (SAMPLES / name).read_text().splitlines(), 1) if "the error" in text)
        mine = [e for e in errors if f"{name}:" in e]
        assert len(mine) == 1, (name, found.stdout)
        assert f"{name}:{wrong_line}:" in mine[0], mine
        assert re.search(expected, mine[0]), mine
    assert found.returncode == 1, found.stderr
