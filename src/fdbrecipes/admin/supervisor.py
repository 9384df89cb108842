"""``fdbrecipes worker --processes N``: N worker processes under one supervisor.

The supervisor starts N children, each ``fdbrecipes worker`` with the same options
(but ``--processes``), so CPU-bound handlers use every core, and then watches them
every :data:`LOOK_EVERY` second:

* A child that dies (killed, or a non-zero exit) is started again; one that exits
  with status 0 (it drained on an operator's ``stop``, or ``--burst`` found nothing)
  is not.  The supervisor returns once no child is left.
* A child's own time limit stops a job (an async handler cancelled, a sync one
  abandoned), but a thread stuck in C code holding the GIL stops the whole process:
  its heartbeats stop too.  From the children's worker records (``workers``), the
  supervisor kills (SIGKILL) a child whose record still shows a job
  :data:`HARD_GRACE` seconds (plus a heartbeat) past its time limit, or whose record
  missed its heartbeats while the process lives; it then releases that child's jobs
  with the error :class:`fdbrecipes.jobs.TimeLimitExceeded` (or
  ``WorkerStopped``) as their record's error (retried, or dead letters with that
  reason), and clears its record.  The child is started again.
* SIGTERM (or SIGINT) is forwarded to every child, which drains as a worker does; a
  child still running ``shutdown_timeout`` + :data:`STOP_MARGIN` seconds later is
  killed.  A second signal forwards SIGTERM again (each child skips its wait).
* A supervisor that dies without a word (SIGKILL, a crash) leaves no child behind:
  each child is told the supervisor's pid (``FDBRECIPES_SUPERVISOR``) and stops as on
  SIGTERM once its parent is no longer that process (:func:`watch_parent`, a look
  every :data:`LOOK_EVERY` second).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set

from .._drivers.blocking import drive
from .._ordered.records import JobError
from .._registry import WorkerInfo
from .commands import Target

__all__ = ["HARD_GRACE", "LOOK_EVERY", "STOP_MARGIN", "SUPERVISOR_ENV", "child_argv",
           "supervise", "watch_parent"]

log = logging.getLogger("fdbrecipes.worker")

#: Seconds between two looks at the children.
LOOK_EVERY = 1.0
#: Seconds past a job's time limit (and a heartbeat) after which its process is killed.
HARD_GRACE = 5.0
#: Seconds a stopping child gets beyond its shutdown timeout before it is killed.
STOP_MARGIN = 15.0
#: The environment variable that gives a child its supervisor's pid.
SUPERVISOR_ENV = "FDBRECIPES_SUPERVISOR"


def child_argv(argv: List[str]) -> List[str]:
    """A child's command line: the supervisor's, without ``--processes``."""
    out: List[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--processes":
            skip = True
        elif not arg.startswith("--processes="):
            out.append(arg)
    return [sys.executable, "-m", "fdbrecipes", *out]


def watch_parent(stop: Callable[[], None]) -> Optional[threading.Thread]:
    """In a child of a supervisor (``FDBRECIPES_SUPERVISOR`` set): a daemon thread
    that calls ``stop`` (a graceful drain) once the process's parent is no longer the
    supervisor, which died; None elsewhere."""
    supervisor = os.environ.get(SUPERVISOR_ENV)
    if not supervisor or not supervisor.isdigit():
        return None
    watcher = threading.Thread(target=_watch, args=(int(supervisor), stop),
                               name="fdbrecipes-supervisor-watch", daemon=True)
    watcher.start()
    return watcher


def _watch(supervisor: int, stop: Callable[[], None]) -> None:
    while os.getppid() == supervisor:
        time.sleep(LOOK_EVERY)
    log.warning("supervisor (pid %d) is gone: this worker process stops", supervisor)
    stop()


class Child:
    """One worker process: its slot, the process, when it started."""

    __slots__ = ("process", "slot", "started")

    def __init__(self, slot: int, argv: List[str]) -> None:
        self.slot = slot
        env = {**os.environ, SUPERVISOR_ENV: str(os.getpid())}
        self.process = subprocess.Popen(argv, start_new_session=True, env=env)  # no Ctrl-C
        self.started = time.time()
        log.info("supervisor: worker process %d started (pid %d)", slot, self.process.pid)


class Supervisor:
    """The children of one ``fdbrecipes worker --processes N`` (see the module
    docstring)."""

    def __init__(self, target: Target, args: argparse.Namespace) -> None:
        self.target = target
        self.ops: Any = target.structure.ops
        self.argv = child_argv(args.argv)
        self.interval = args.lease / 3
        self.stop_after = args.shutdown_timeout + STOP_MARGIN
        self.children: Dict[int, Child] = {}
        self.signals = 0
        self.forwarded = 0
        self.woken = threading.Event()
        for slot in range(args.processes):
            self.children[slot] = Child(slot, self.argv)

    def signalled(self, _signum: int, _frame: Any) -> None:
        self.signals += 1
        self.woken.set()

    def run(self) -> None:
        """Watch the children until none is left."""
        stopping_since: Optional[float] = None
        while self.children:
            if self.signals > self.forwarded:
                self.forwarded = self.signals
                stopping_since = stopping_since or time.monotonic()
                log.info("supervisor: stopping %d worker processes", len(self.children))
                for child in self.children.values():
                    child.process.send_signal(signal.SIGTERM)
            self.reap(stopping_since is not None)
            if stopping_since is not None:
                if time.monotonic() - stopping_since > self.stop_after:
                    for child in self.children.values():
                        log.warning("supervisor: worker process %d (pid %d) did not stop; "
                                    "killed", child.slot, child.process.pid)
                        child.process.kill()
            else:
                self.enforce()
            self.woken.wait(LOOK_EVERY)
            self.woken.clear()

    def reap(self, stopping: bool) -> None:
        """Forget the children that exited; start again those that died."""
        for slot, child in list(self.children.items()):
            status = child.process.poll()
            if status is None:
                continue
            del self.children[slot]
            if stopping or status == 0:
                log.info("supervisor: worker process %d (pid %d) exited (status %d)", slot,
                         child.process.pid, status)
                continue
            log.warning("supervisor: worker process %d (pid %d) died (status %d); started "
                        "again", slot, child.process.pid, status)
            self.children[slot] = Child(slot, self.argv)

    def enforce(self) -> None:
        """Kill the children stuck past a job's time limit, or silent while alive."""
        try:
            records = drive(self.ops.workers(self.target.db, True))
        except Exception:
            log.exception("supervisor: reading the workers' records failed")
            return
        by_pid = {child.process.pid: child for child in self.children.values()}
        now = time.time()
        for info in records:
            child = by_pid.get(info.pid)
            if child is None or child.process.poll() is not None:
                continue
            late = {job.token for job in info.running if job.time_limit is not None
                    and now > job.started_at + job.time_limit + self.interval + HARD_GRACE}
            if late:
                self.kill(child, info, late, "a job ran past its time limit (hard limit)")
            elif info.expires_at < now:  # it beat, then stopped beating: stuck
                self.kill(child, info, {job.token for job in info.running},
                          "it stopped answering (no heartbeat)")

    def kill(self, child: Child, info: WorkerInfo, late: Set[bytes], why: str) -> None:
        """SIGKILL ``child``; release the jobs its record lists (those of ``late`` as
        failed, a delivery counted, with the error ``why``; the others given back
        uncounted); clear its record (it is started again by :meth:`reap`)."""
        log.error("supervisor: killing worker process %d (pid %d, worker %s): %s",
                  child.slot, child.process.pid, info.id, why)
        child.process.kill()
        child.process.wait()
        db = self.target.db
        for job in info.running:
            failed = job.token in late
            error = None if not failed else JobError(
                "fdbrecipes.jobs.TimeLimitExceeded", f"the worker process was killed: {why}"
                + ("" if job.time_limit is None else f", {job.time_limit:g} s"))
            try:
                drive(self.ops.release(db, job.token, None, failed, error))
            except Exception:
                log.exception("supervisor: releasing job %r failed; its lease will expire",
                              job.id)
        try:
            drive(self.ops.leave(db, info.id))
        except Exception:
            log.exception("supervisor: clearing worker %s's record failed", info.id)


def supervise(target: Target, args: argparse.Namespace) -> None:
    """Run ``args.processes`` worker processes until SIGTERM or SIGINT, then drain them
    (see the module docstring)."""
    supervisor = Supervisor(target, args)
    previous = {sig: signal.signal(sig, supervisor.signalled)
                for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        supervisor.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for child in supervisor.children.values():
            child.process.kill()
    log.info("supervisor: every worker process stopped (pid %d)", os.getpid())
