"""Every snippet of the README and of ``docs/`` runs as written.

The Python blocks of one page form one session, run in order as a fresh script
(``python -c``) against the test cluster, whose cluster file it finds in
``FDB_CLUSTER_FILE`` as a reader's ``fdb.open()`` would.  A block whose first line is
``# from <path>`` is an excerpt: it must appear, line for line, in that file (which its
own test runs); one whose first line is ``# test_<name>.py`` is a test file, written out
and run with pytest (the plugin's fixtures included).  A page using ``LocalCluster``
needs ``fdbserver`` on this machine.  The operator commands of the README and of
``docs/operator.md`` (the lines of their ``sh`` blocks that start with ``fdbrecipes``,
except the long-running ``worker``, ``metrics``, ``web``, ``bench`` and ``demo``) run after the
page's Python session, each exiting 0 (but the README's ``sh first-hour`` block, a
session of its own with a worker, which ``test_first_hour.py`` runs whole).  The
examples live in the directory ``fdbrecipes-example``, which this test removes before
and after each page.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List, NamedTuple

import fdb
import pytest

from fdbrecipes.testing import find_program

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
EXCERPT = re.compile(r"# from (\S+)\n")
TEST_FILE = re.compile(r"# (test_\w+\.py)\n")
#: Commands that serve until stopped: shown in the docs, not run here.
LONG_RUNNING = {"worker", "metrics", "bench", "demo", "web"}
EXAMPLE_DIRECTORY = ("fdbrecipes-example",)


class Page(NamedTuple):
    path: Path
    python: List[str]
    excerpts: List[str]
    test_files: List[str]
    commands: List[List[str]]


def read_page(path: Path) -> Page:
    """A page's Python blocks, excerpts, test files and operator commands, in order."""
    python: List[str] = []
    excerpts: List[str] = []
    test_files: List[str] = []
    commands: List[List[str]] = []
    for language, info, body in FENCE.findall(path.read_text()):
        if language == "python" and EXCERPT.match(body):
            excerpts.append(body)
        elif language == "python" and TEST_FILE.match(body):
            test_files.append(body)
        elif language == "python":
            python.append(body)
        elif language == "sh" and path.name in ("README.md", "operator.md") and \
                "first-hour" not in info:
            for line in body.splitlines():
                argv = shlex.split(line, comments=True)
                if argv[:1] == ["fdbrecipes"] and argv[1:2] and argv[1] not in LONG_RUNNING:
                    commands.append(argv[1:])
    return Page(path, python, excerpts, test_files, commands)


def runnable(page: Page) -> bool:
    return bool(page.python or page.excerpts or page.test_files or page.commands)


def page_id(page: Page) -> str:
    return str(page.path.relative_to(ROOT))


ALL = [page for page in map(read_page, PAGES) if runnable(page)]


def test_the_pages_with_snippets_are_found() -> None:
    names = {page_id(page) for page in ALL}
    assert {"README.md", "docs/quickstart.md", "docs/asyncio.md", "docs/workers.md",
            "docs/fair-queues.md", "docs/scheduler.md", "docs/job-queues.md",
            "docs/operator.md", "docs/testing.md"} <= names
    readme = next(page for page in ALL if page.path.name == "README.md")
    assert len(readme.python) >= 6 and len(readme.commands) >= 9


def environment(cluster_file: str) -> Dict[str, str]:
    env = dict(os.environ)
    env["FDB_CLUSTER_FILE"] = cluster_file
    return env


def excerpt_found(excerpt: str) -> None:
    """The excerpt's lines, dedented, appear in a row in the file it names."""
    match = EXCERPT.match(excerpt)
    assert match is not None
    source = (ROOT / match.group(1)).read_text()
    wanted = textwrap.dedent(excerpt[match.end():]).splitlines()
    lines = source.splitlines()
    for start in range(len(lines) - len(wanted) + 1):
        if textwrap.dedent("\n".join(lines[start:start + len(wanted)])).splitlines() == wanted:
            return
    raise AssertionError(f"not in {match.group(1)}:\n{excerpt}")


@pytest.mark.parametrize("page", ALL, ids=page_id)
def test_snippets_run_as_written(page: Page, fdb_cluster_file: str, fdb_database: Any,
                                 tmp_path: Path) -> None:
    for excerpt in page.excerpts:
        excerpt_found(excerpt)
    if any("LocalCluster(" in block for block in page.python) and not find_program(
            "fdbserver", "FDBSERVER"):
        pytest.skip("no fdbserver on this machine for the page's LocalCluster")
    fdb.directory.remove_if_exists(fdb_database, EXAMPLE_DIRECTORY)
    try:
        env = environment(fdb_cluster_file)
        if page.python:
            script = "\n\n".join(page.python)
            done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300, check=False)
            assert done.returncode == 0, f"{page_id(page)}:\n{done.stderr}"
            assert "Traceback" not in done.stderr, done.stderr
        for test_file in page.test_files:
            match = TEST_FILE.match(test_file)
            assert match is not None
            (tmp_path / match.group(1)).write_text(test_file)
            done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                   match.group(1)], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300, check=False)
            assert done.returncode == 0 and " passed" in done.stdout, done.stdout
        for argv in page.commands:
            done = subprocess.run([sys.executable, "-m", "fdbrecipes", *argv], cwd=ROOT,
                                  env=env, capture_output=True, text=True, timeout=120,
                                  check=False)
            assert done.returncode == 0, f"fdbrecipes {shlex.join(argv)}:\n{done.stderr}"
    finally:
        fdb.directory.remove_if_exists(fdb_database, EXAMPLE_DIRECTORY)


def test_the_scheduler_example_runs_as_a_script(fdb_cluster_file: str,
                                                tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "scheduler.py")],
                          cwd=tmp_path, env=environment(fdb_cluster_file),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "backup (weight 1) ran" in done.stdout
