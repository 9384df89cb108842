"""A first hour: the README's commands run as written on a new queue, following a job
from its push to its end; and no silent hangs: tools and calls pointed at a cluster
that does not answer say so in one line, in bounded time; waits honour their own
timeout."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List, Tuple

import fdb
import pytest

from fdbrecipes import Queue
from fdbrecipes.testing import client_library_problem, open_database

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: A fenced block of a page: its language, the rest of its info line, its text.
FENCE = re.compile(r"^```([\w-]*)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def readme_blocks() -> List[Tuple[str, str, str]]:
    return FENCE.findall((ROOT / "README.md").read_text())


def test_the_readme_follows_a_job_on_a_new_queue_as_written(
        fdb_cluster_file: str, fdb_database: Any, tmp_path: Path) -> None:
    """The README's ``sh first-hour`` block, run whole by bash where the README's
    ``app/jobs.py`` is, on a cluster where its directory does not exist: a worker in the
    background, a push, the job's record once it ended, the finished jobs, the worker
    stopped.  Bounded: bash and what it started are killed after 180 s."""
    blocks = readme_blocks()
    [session] = [body for language, info, body in blocks
                 if language == "sh" and "first-hour" in info.split()]
    [handler] = [body for language, _, body in blocks
                 if language == "python" and body.startswith("# app/jobs.py\n")]
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "jobs.py").write_text(handler)
    commands = Path(sys.executable).parent
    assert (commands / "fdbrecipes").exists(), "the fdbrecipes command is not installed"
    fdb.directory.remove_if_exists(fdb_database, ("app",))
    env = {**os.environ, "FDB_CLUSTER_FILE": fdb_cluster_file,
           "PATH": f"{commands}{os.pathsep}{os.environ.get('PATH', '')}"}
    shell = subprocess.Popen(["bash", "-e", "-c", session], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        out, err = shell.communicate(timeout=180)
        record = Queue(fdb.directory.open(fdb_database, ("app", "jobs"))).job(
            fdb_database, b"cat-1")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)  # bash, and the worker if it is left
        shell.wait(60)
        fdb.directory.remove_if_exists(fdb_database, ("app",))
    assert shell.returncode == 0, err
    assert "Traceback" not in err, err
    lines = out.splitlines()
    assert lines[0] == "queue at directory app/jobs: pushed 'resize cat.png', id cat-1"
    assert lines[1] == "queue at directory app/jobs: job cat-1"
    assert re.search(r"^state +succeeded$", out, re.MULTILINE), out
    assert re.search(r"^result +'handled resize cat.png'$", out, re.MULTILINE), out
    assert re.search(r"^1 +cat-1 +succeeded +1 ", out, re.MULTILINE), out
    assert lines[-1] == "queue at directory app/jobs: worker stopped"
    assert record is not None and (record.state, record.result) == (
        "succeeded", "handled resize cat.png")


@pytest.fixture
def nowhere(tmp_path: Path) -> str:
    """A cluster file naming a port nothing listens on (needs libfdb_c)."""
    problem = client_library_problem()
    if problem:
        if os.environ.get("FDBRECIPES_REQUIRE_SERVER") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    path = tmp_path / "nowhere.cluster"
    path.write_text("nowhere:nowhere@127.0.0.1:1\n")
    return str(path)


def test_the_demo_says_in_one_line_that_the_cluster_does_not_answer(nowhere: str) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "fdbrecipes", "demo"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "FDB_CLUSTER_FILE": nowhere})
    took = time.monotonic() - started
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and nowhere in lines[0] and "did not answer" in lines[0], lines
    assert took < 60


def test_the_fixtures_say_once_that_the_cluster_does_not_answer(nowhere: str,
                                                                tmp_path: Path) -> None:
    (tmp_path / "test_example.py").write_text(
        "def test_one(fdb_database):\n    pass\n\ndef test_two(fdb_database):\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "FDBRECIPES_REQUIRE_SERVER"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**env, "FDB_CLUSTER_FILE": nowhere})
    assert done.returncode == 0, done.stdout
    assert "2 skipped" in done.stdout
    assert done.stdout.count("did not answer") == 1
    assert time.monotonic() - started < 60


def test_a_transaction_timeout_bounds_a_call(nowhere: str) -> None:
    """The library's calls run until they succeed, as @fdb.transactional does; a
    database option bounds them, and the call then raises instead of hanging."""
    db = open_database(nowhere)
    db.options.set_transaction_timeout(1000)
    q = Queue(fdb.Subspace(("first-hour",)))
    started = time.monotonic()
    with pytest.raises(fdb.FDBError) as raised:
        q.push(db, b"x")
    assert raised.value.code == 1031 and time.monotonic() - started < 10


def test_a_wait_honours_its_own_timeout_under_a_transaction_timeout(
        fdb_cluster_file: str, fdb_subspace: Any) -> None:
    """pop_wait(timeout=2) with a 3-second transaction timeout returns None at 2 s."""
    db = fdb.impl.create_database(fdb_cluster_file)  # its own options, not the shared one's
    db.options.set_transaction_timeout(3000)
    q = Queue(fdb_subspace)
    started = time.monotonic()
    assert q.pop_wait(db, timeout=2) is None
    assert 1.9 < time.monotonic() - started < 2.9
