"""The operator commands against hostile data and input, run for real: what the cluster
holds (a dead letter's reason, a job's error, traceback and progress, a worker's name)
reaches the terminal with its control characters escaped, and exactly in ``--json``;
ids that are not UTF-8 are named from the command line; what cannot be stored is
refused in one line, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any, List

import pytest

from fdbrecipes import Job, Progress, Queue, Worker
from tests.helpers import dump, eventually
from tests.integration.test_operator_cli import ROOT, answer, failed, fdbrecipes, ok, place

pytestmark = pytest.mark.integration

#: Text a terminal would act on: an escape sequence (red, then clear the screen), a
#: carriage return over the line, NUL, backspace, a C1 CSI, a right-to-left override
#: and an isolate, the line separator, and a line feed starting a forged line.
HOSTILE = ("ok\x1b[31mred\x1b[2J\rover\x00\x08\x9b2J\u202eevil\u2066\u2028"
           "\nfdbrecipes dead: forged")
#: ... as the tables show it.
ESCAPED = ("ok\\x1b[31mred\\x1b[2J\\x0dover\\x00\\x08\\x9b2J\\u202eevil\\u2066\\u2028"
           "\\x0afdbrecipes dead: forged")
HOUR = 3600.0


def terminal_safe(text: str) -> None:
    """Nothing in ``text`` a terminal acts on: printable lines."""
    assert all(line.isprintable() for line in text.splitlines()), text
    assert "\r" not in text and "\x1b" not in text and "\u202e" not in text


def test_dead_shows_a_hostile_reason_escaped(db: Any, fdb_subspace: Any,
                                             fdb_cluster_file: str) -> None:
    q = Queue(fdb_subspace, max_deliveries=3)
    q.push(db, "payload", id=b"job-7")
    lease = q.claim(db, 30)
    assert lease is not None
    q.bury(db, lease, reason=HOSTILE)
    out = ok(fdbrecipes(fdb_cluster_file, "dead", *place(fdb_subspace)))
    terminal_safe(out)
    assert ESCAPED[:40] in out and "job-7" in out
    assert len(out.splitlines()) == 3  # the title, the headers, the one dead letter
    [letter] = answer(fdbrecipes(fdb_cluster_file, "dead", *place(fdb_subspace),
                                 "--json"))["dead_letters"]
    assert (letter["reason"], letter["id"]) == (HOSTILE, "job-7")  # exact in JSON


def test_job_shows_a_hostile_error_traceback_and_progress_escaped(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    q = Queue(fdb_subspace, history=HOUR, max_deliveries=1)
    q.push(db, "payload", id=b"job-9")
    stored: List[Any] = []

    def handler(job: Job) -> None:
        job.progress(0.5, HOSTILE[:30])
        # A worker writes a running job's progress at its heartbeats, and its last
        # progress with the ack of a success or a cancel, not with a failure's
        # release or burial: the progress shown here is a heartbeat's, waited for.
        stored.append(eventually(lambda: q.job(db, b"job-9").progress, 60, "progress"))
        raise ValueError(HOSTILE)

    Worker(db, q, handler, concurrency=1, lease_seconds=10).run(burst=True)
    assert stored == [Progress(0.5, HOSTILE[:30])]
    record = q.job(db, b"job-9")
    assert record is not None and record.error is not None and record.state == "dead"
    assert record.progress == Progress(0.5, HOSTILE[:30])
    assert HOSTILE in record.error.traceback
    out = ok(fdbrecipes(fdb_cluster_file, "job", "job-9", *place(fdb_subspace)))
    terminal_safe(out)
    assert f"ValueError: {ESCAPED}" in out  # the error's row: one line...
    traceback = out[out.index("Traceback"):]
    assert "\\x1b[31mred\\x1b[2J\\x0dover" in traceback  # ...its traceback keeps its lines,
    assert "\nfdbrecipes dead: forged" in traceback  # the message's own among them
    assert "50% ok\\x1b[31mred\\x1b[2J\\x0dover" in out  # the progress message
    job = answer(fdbrecipes(fdb_cluster_file, "job", "job-9", *place(fdb_subspace),
                            "--json"))["job"]
    assert job["error"]["message"] == HOSTILE and job["progress"]["message"] == HOSTILE[:30]


def test_workers_shows_a_hostile_name_escaped(db: Any, fdb_subspace: Any,
                                              fdb_cluster_file: str) -> None:
    q = Queue(fdb_subspace)
    worker = Worker(db, q, print, concurrency=1, lease_seconds=10, name=HOSTILE[:25])
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        eventually(lambda: q.workers(db), 30, "the worker's record")
        out = ok(fdbrecipes(fdb_cluster_file, "workers", *place(fdb_subspace)))
        terminal_safe(out)
        assert ESCAPED[:30] in out
        [listed] = answer(fdbrecipes(fdb_cluster_file, "workers", *place(fdb_subspace),
                                     "--json"))["workers"]
        assert listed["label"] == HOSTILE[:25]
    finally:
        worker.stop()
        thread.join(60)
    assert not thread.is_alive()


def run_bytes(cluster_file: str, *argv: bytes) -> subprocess.CompletedProcess[bytes]:
    """``python -m fdbrecipes argv...`` with arguments that need not be UTF-8, as a
    shell passes ``$'\\xff'``."""
    return subprocess.run([os.fsencode(sys.executable), b"-m", b"fdbrecipes", *argv,
                           b"--cluster-file", os.fsencode(cluster_file)],
                          capture_output=True, check=False, timeout=120, cwd=ROOT)


def test_ids_that_are_not_utf8_are_named_from_the_command_line(
        db: Any, fdb_subspace: Any, fdb_cluster_file: str) -> None:
    q = Queue(fdb_subspace, history=HOUR)
    q.push(db, "odd", id=b"\xff\xfe")
    q.push(db, "other", id=b"\xff\xfd")
    where = [os.fsencode(arg) for arg in place(fdb_subspace)]
    shown = run_bytes(fdb_cluster_file, b"job", b"\xff\xfe", *where)
    assert shown.returncode == 0 and shown.stderr == b"", shown.stderr
    text = shown.stdout.decode("ascii")  # the id is shown as its repr: b'\xff\xfe'
    assert "job b'\\xff\\xfe'" in text and "pending" in text
    as_json = json.loads(run_bytes(fdb_cluster_file, b"job", b"\xff\xfe", *where,
                                   b"--json").stdout)
    assert as_json["job"]["id"] == {"bytes": "//4="}
    missing = run_bytes(fdb_cluster_file, b"job", b"\xfe\xfe", *where)
    assert missing.returncode == 1 and missing.stdout == b""
    assert missing.stderr.decode("ascii").startswith("fdbrecipes job: no job '\\udcfe\\udcfe'")
    removed = run_bytes(fdb_cluster_file, b"remove", b"--id", b"\xff\xfe", b"--yes", *where)
    assert removed.returncode == 0, removed.stderr
    assert q.items(db) == ["other"]


@pytest.mark.parametrize("argv", [
    ["--type", "json", "[" * 400 + "]" * 400],
    ["--type", "json", "null"],
    ["--type", "json", str(2**3000)],
    ["--type", "json", "NaN"],
    ["x" * 120_000],
    ["v", "--id", "x" * 1_001],
])
def test_push_refuses_what_cannot_be_stored(db: Any, fdb_subspace: Any, fdb_cluster_file: str,
                                            argv: List[str]) -> None:
    q = Queue(fdb_subspace)
    q.push(db, "first")
    before = dump(db, fdb_subspace)
    line = failed(fdbrecipes(fdb_cluster_file, "push", *place(fdb_subspace), *argv), 2)
    assert line.startswith("fdbrecipes push: error: ") and len(line) < 300
    assert dump(db, fdb_subspace) == before
