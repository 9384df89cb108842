"""The pipe from a worker process to its supervisor (``fdbrecipes worker --processes``).

A supervisor must know what each of its worker processes runs without relying on
the process itself: a handler stuck in C code holding the GIL stops every thread of
its process, heartbeats included, and a process that crashes says nothing more.  So
each child tells it, over a pipe of its own, every job it claims, starts, returns
from and ends, *before* that takes effect (a handler begins only once its start was
written), and that its loop runs, every second.  The supervisor reads each pipe in a
thread (:class:`Heard`): what a child holds is what it said, whatever became of the
child since.

The child finds the pipe's file descriptor in ``FDBRECIPES_SUPERVISOR_PIPE``
(:func:`pipe_from_env`).  One line per event, fields separated by spaces, lease
tokens in hex::

    w WORKER-ID                  the worker runs (its id, as its record names it)
    h TOKEN IDENTITY             a job claimed (IDENTITY: see :func:`identity`)
    s TOKEN STARTED LIMIT        its handler begins (wall-clock seconds; LIMIT in
                                 seconds, or "-" for none)
    r TOKEN                      its handler returned (or was abandoned)
    e TOKEN                      the worker holds it no more (settled, given back)
    a                            the worker's loop runs
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..types import Lease

__all__ = ["PIPE_ENV", "Heard", "HeldJob", "PipeTell", "identity", "pipe_from_env"]

log = logging.getLogger("fdbrecipes.worker")

#: The environment variable that gives a child the file descriptor of its pipe.
PIPE_ENV = "FDBRECIPES_SUPERVISOR_PIPE"


def identity(lease: Lease[Any]) -> str:
    """What names a job across its deliveries, as a short digest (its lease token is
    new at each claim): its group (a FairQueue's) and its id, or its value when it has
    no id (two jobs of the same value and no id are one to a supervisor)."""
    named = (getattr(lease, "group", None), lease.id, lease.value if lease.id is None else None)
    text = repr(named).encode("utf-8", "backslashreplace")
    return hashlib.blake2b(text, digest_size=8).hexdigest()


class PipeTell:
    """A worker's :class:`fdbrecipes._worker.holding.Tell` that writes to its
    supervisor's pipe, file descriptor ``fd`` (see the module docstring).  Once a write
    fails (the supervisor is gone), it writes nothing more."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lines: List[str] = []
        self.broken = False

    def hello(self, worker: str) -> None:
        self.lines.append(f"w {worker}")
        self.flush()

    def held(self, leases: Sequence[Lease[Any]]) -> None:
        self.lines.extend(f"h {lease.token.hex()} {identity(lease)}" for lease in leases)
        self.flush()

    def started(self, jobs: Sequence[Tuple[bytes, float, Optional[float]]]) -> None:
        self.lines.extend(f"s {token.hex()} {began!r} {'-' if limit is None else repr(limit)}"
                          for token, began, limit in jobs)
        self.flush()

    def returned(self, token: bytes) -> None:
        self.lines.append(f"r {token.hex()}")

    def ended(self, token: bytes) -> None:
        self.lines.append(f"e {token.hex()}")

    def alive(self) -> None:
        self.lines.append("a")
        self.flush()

    def flush(self) -> None:
        lines, self.lines = self.lines, []
        if not lines or self.broken:
            return
        data = ("\n".join(lines) + "\n").encode("utf-8")
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError as e:
            self.broken = True
            log.warning("telling the supervisor failed (%s); it is told nothing more", e)


def pipe_from_env() -> Optional[PipeTell]:
    """In a child of a supervisor: the :class:`PipeTell` of the pipe its environment
    names; None elsewhere (or if that descriptor is not a pipe).  The variable is
    taken out of the environment and the descriptor made non-inheritable: the
    handler's own child processes must neither hold the pipe open nor take another
    descriptor of theirs for it."""
    found = os.environ.pop(PIPE_ENV, "")
    if not found.isdigit():
        return None
    fd = int(found)
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
        os.set_inheritable(fd, False)
    except OSError:
        return None
    return PipeTell(fd)


class HeldJob:
    """A job a child holds, as it told: its lease token, its :func:`identity`, when its
    handler began (None: not yet) with its time limit, and whether the handler
    returned."""

    __slots__ = ("identity", "limit", "returned", "started_at", "token")

    def __init__(self, token: bytes, identity: str) -> None:
        self.token = token
        self.identity = identity
        self.started_at: Optional[float] = None
        self.limit: Optional[float] = None
        self.returned = False

    def running(self) -> bool:
        """Whether its handler runs (began, and did not return)."""
        return self.started_at is not None and not self.returned

    def deadline(self) -> Optional[float]:
        """When (wall-clock seconds) its handler reaches its time limit, if it runs and
        has one."""
        if not self.running() or self.limit is None:
            return None
        assert self.started_at is not None
        return self.started_at + self.limit


class Heard:
    """What one child told its supervisor (see the module docstring), read from the
    pipe ``fd`` by a thread of its own until the pipe closes (every writer exited).

    Attributes:
        worker: the child's worker id, once it said it.
        jobs: the jobs it holds, by lease token.
        last: when (``time.monotonic()``) it last said anything.
    """

    def __init__(self, fd: int, started: Callable[[], None],
                 ended: Callable[[str], None]) -> None:
        """``started()`` is called when a handler with a time limit begins,
        ``ended(identity)`` when a job ends (both from the reading thread)."""
        self.lock = threading.Lock()
        self.worker: Optional[str] = None
        self.jobs: Dict[bytes, HeldJob] = {}
        self.last = time.monotonic()
        self.on_start = started
        self.on_end = ended
        self.thread = threading.Thread(target=self.read, args=(fd,), daemon=True,
                                       name="fdbrecipes-supervisor-pipe")
        self.thread.start()

    def read(self, fd: int) -> None:
        with open(fd, "rb", buffering=65536) as pipe:
            for line in pipe:
                try:
                    self.take(line.decode("utf-8").split())
                except (ValueError, IndexError):
                    log.warning("supervisor: a worker process said %r; ignored", line)

    def take(self, words: List[str]) -> None:
        """One line, split."""
        kind = words[0]
        with self.lock:
            self.last = time.monotonic()
            if kind == "a":
                return
            if kind == "w":
                self.worker = words[1]
                return
            token = bytes.fromhex(words[1])
            if kind == "h":
                self.jobs[token] = HeldJob(token, words[2])
                return
            job = self.jobs.get(token)
            if job is None:
                return
            if kind == "s":
                job.started_at = float(words[2])
                job.limit = None if words[3] == "-" else float(words[3])
            elif kind == "r":
                job.returned = True
            elif kind == "e":
                del self.jobs[token]
        if kind == "s" and job.limit is not None:
            self.on_start()
        elif kind == "e":
            self.on_end(job.identity)

    def held(self) -> List[HeldJob]:
        """The jobs the child holds now."""
        with self.lock:
            return list(self.jobs.values())

    def silent_for(self) -> float:
        """Seconds since the child last said anything."""
        with self.lock:
            return time.monotonic() - self.last

    def finished(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the pipe to close (the child exited; a
        process the handler started may still hold it open)."""
        self.thread.join(timeout)
