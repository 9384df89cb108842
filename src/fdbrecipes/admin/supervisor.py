"""``fdbrecipes worker --processes N``: N worker processes under one supervisor.

The supervisor starts N children, each ``fdbrecipes worker`` with the same options
(but ``--processes``), so CPU-bound handlers use every core.  Each child tells it,
over a pipe of its own (:mod:`.pipe`), every job it claims, starts and ends, before
that takes effect, and every second that its loop runs: the supervisor knows what
each child runs without the child's heartbeats or its worker record (a handler
holding the GIL stops every thread of its process; a crashed process says nothing).
It looks at its children every :data:`LOOK_EVERY` second, and at once when a job's
time limit comes:

* A child that exits with status 0 (it drained on an operator's ``stop``, or
  ``--burst`` found nothing) is not started again; the supervisor returns once no
  child is left.
* A child that dies (a crash, a signal) is started again (see below), and the supervisor
  releases the jobs it held at once (:func:`charge`), not when their leases expire:
  those whose handler did not run at its death are given back with no delivery
  counted; of those whose handler ran, the job that killed it counts a delivery,
  with the error ``WorkerDied`` ("the worker process running it died (exit status
  N)"), retried or a dead letter with that reason.  That job is known when it ran
  alone; when several ran, each is given back uncounted, and one that runs at a
  second death before it ended anywhere is held responsible.
* A child whose job's handler runs :data:`HARD_GRACE` seconds past its time limit
  (the child's own limit cancels or abandons it at the limit, but a thread stuck in
  C code holding the GIL stops its whole process) is killed (SIGKILL): that job is
  released as failed with ``TimeLimitExceeded`` ("the job ran past its time limit
  of N s"), retried or a dead letter with that reason; its other jobs are given
  back uncounted.
* A child that says nothing for :func:`silence` seconds (two thirds of the lease,
  less a second) while it lives is stuck (a handler holding the GIL, or blocking the
  event loop): it is killed before its leases expire (a heartbeat extended them at
  most a third of a lease before it stopped), and its jobs released as for a death
  ("it stopped answering").  A handler may hold the GIL that long at most, time
  limit or not: past it, its lease could no longer be extended.
* A killed or dead child's worker record is cleared, and the child started again:
  at once after a child that ran :data:`STEADY` seconds or more or that the supervisor
  killed (each kill settles a job, which counts a delivery), else after a pause
  (:class:`Restarts`) of :data:`RESTART_FIRST` second, doubled at each quick death of
  that slot in a row up to :data:`RESTART_MAX`, so a child that cannot run (a handler
  module that fails to import, a crash at every job) does not loop hot.
* SIGTERM (or SIGINT) is forwarded to every child, which drains as a worker does; a
  child still running ``shutdown_timeout`` + :data:`STOP_MARGIN` seconds later is
  killed, and its jobs given back uncounted.  A second signal forwards SIGTERM again
  (each child skips its wait).
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
from collections import OrderedDict
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from .._drivers.blocking import drive
from ..types import JobError
from .commands import Target
from .pipe import PIPE_ENV, Heard, HeldJob

__all__ = ["HARD_GRACE", "LOOK_EVERY", "STOP_MARGIN", "SUPERVISOR_ENV", "Charges",
           "Restarts", "Suspects", "charge", "child_argv", "past_limit", "silence",
           "supervise", "watch_parent"]

log = logging.getLogger("fdbrecipes.worker")

#: Seconds between two looks at the children.
LOOK_EVERY = 1.0
#: Seconds past a job's time limit after which its process is killed: the child's
#: own limit stops a handler that can be stopped at the limit, and settles its job.
HARD_GRACE = 1.0
#: Seconds a stopping child gets beyond its shutdown timeout before it is killed.
STOP_MARGIN = 15.0
#: The environment variable that gives a child its supervisor's pid.
SUPERVISOR_ENV = "FDBRECIPES_SUPERVISOR"
#: The error type recorded for a job whose worker process died while it ran.
WORKER_DIED = "WorkerDied"
#: The error type recorded for a job killed at its time limit.
TIME_LIMIT = "fdbrecipes.jobs.TimeLimitExceeded"
#: Jobs a supervisor remembers as having run at a death (see :class:`Suspects`).
SUSPECTS_KEPT = 10_000
#: The fewest seconds of silence after which a child is stuck (it says it is alive
#: every second).
SILENCE_MIN = 2.0
#: Seconds a child must have run for its death to start it again at once.
STEADY = 30.0
#: The pause before a slot whose child died quickly is started again, the first time;
#: each quick death in a row doubles it, up to the second number.
RESTART_FIRST, RESTART_MAX = 1.0, 60.0


def silence(lease: float) -> float:
    """Seconds a child with leases of ``lease`` seconds may say nothing while it lives:
    two thirds of the lease (the least a lease has left when its heartbeats stop),
    less a second, at least :data:`SILENCE_MIN`."""
    return max(SILENCE_MIN, 2 * lease / 3 - 1.0)


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


class Suspects:
    """The jobs (by :func:`.pipe.identity`) whose handler ran in a worker process
    when it died, and that have not ended anywhere since (thread-safe; at most
    :data:`SUSPECTS_KEPT`, the oldest forgotten first)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: OrderedDict[str, None] = OrderedDict()

    def ran_at_death(self, identity: str) -> bool:
        """Note that the job ``identity`` ran at a death; whether it already had."""
        with self.lock:
            known = identity in self.seen
            self.seen[identity] = None
            self.seen.move_to_end(identity)
            while len(self.seen) > SUSPECTS_KEPT:
                self.seen.popitem(last=False)
            return known

    def ended(self, identity: str) -> None:
        """The job ``identity`` ended in a worker (its handler did not kill it)."""
        with self.lock:
            self.seen.pop(identity, None)


class Charges(NamedTuple):
    """What becomes of the jobs of a worker process that is gone: ``counted``,
    released as failed (a delivery counted) with their error, and ``given_back``
    uncounted."""

    counted: List[Tuple[HeldJob, JobError]]
    given_back: List[HeldJob]


def charge(held: List[HeldJob], suspects: Suspects, error: JobError) -> Charges:
    """Which of ``held``, the jobs of a process that died, killed it (``error``): the
    one whose handler ran, if one did; of several, those that ran at an earlier death
    too (and did not end since).  The others are given back uncounted."""
    running = [job for job in held if job.running()]
    earlier = [suspects.ran_at_death(job.identity) for job in running]
    counted = running if len(running) == 1 else [
        job for job, known in zip(running, earlier) if known]
    return Charges([(job, error) for job in counted],
                   [job for job in held if job not in counted])


def past_limit(late: List[HeldJob], held: List[HeldJob]) -> Charges:
    """What becomes of ``held``, the jobs of a process killed because ``late`` ran past
    their time limit: those counted, each with ``TimeLimitExceeded`` naming its limit
    (as a worker's own limit does); the others given back uncounted."""
    return Charges([(job, JobError(TIME_LIMIT, f"the job ran past its time limit of "
                                   f"{job.limit:g} s; its worker process was killed"))
                    for job in late if job in held], [job for job in held if job not in late])


class Child:
    """One worker process: its slot, the process, what it told over its pipe, and
    whether its jobs were settled already (it was killed)."""

    __slots__ = ("heard", "process", "settled", "slot", "started")

    def __init__(self, slot: int, argv: List[str], heard_start: Callable[[], None],
                 suspects: Suspects) -> None:
        self.slot = slot
        self.settled = False
        self.started = time.monotonic()
        read, write = os.pipe()
        env = {**os.environ, SUPERVISOR_ENV: str(os.getpid()), PIPE_ENV: str(write)}
        try:
            self.process = subprocess.Popen(argv, start_new_session=True, env=env,  # no ^C
                                            pass_fds=(write,))
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        self.heard = Heard(read, heard_start, suspects.ended)
        log.info("supervisor: worker process %d started (pid %d)", slot, self.process.pid)


class Restarts:
    """When each slot whose child died is started again (see the module docstring):
    the pause of each slot, and the slots waiting for theirs to end."""

    def __init__(self) -> None:
        self.pause: Dict[int, float] = {}
        self.due: Dict[int, float] = {}

    def died(self, slot: int, ran: float, now: float) -> float:
        """The child of ``slot`` died after running ``ran`` seconds: the seconds until
        it is started again (0: at once)."""
        if ran >= STEADY:
            self.pause.pop(slot, None)
            return 0.0
        pause = self.pause.get(slot, RESTART_FIRST)
        self.pause[slot] = min(pause * 2, RESTART_MAX)
        self.due[slot] = now + pause
        return pause

    def ready(self, now: float) -> List[int]:
        """The slots whose pause is over (no longer waiting)."""
        slots = [slot for slot, due in self.due.items() if due <= now]
        for slot in slots:
            del self.due[slot]
        return slots

    def next_in(self, now: float) -> Optional[float]:
        """Seconds until the next slot's pause ends, or None if none waits."""
        return max(0.0, min(self.due.values()) - now) if self.due else None


class Supervisor:
    """The children of one ``fdbrecipes worker --processes N`` (see the module
    docstring)."""

    def __init__(self, target: Target, args: argparse.Namespace) -> None:
        self.target = target
        self.ops: Any = target.structure.ops
        self.argv = child_argv(args.argv)
        self.silence = silence(args.lease)
        self.stop_after = args.shutdown_timeout + STOP_MARGIN
        self.suspects = Suspects()
        self.children: Dict[int, Child] = {}
        self.restarts = Restarts()
        self.signals = 0
        self.forwarded = 0
        self.woken = threading.Event()
        for slot in range(args.processes):
            self.start(slot)

    def start(self, slot: int) -> None:
        self.children[slot] = Child(slot, self.argv, self.woken.set, self.suspects)

    def signalled(self, _signum: int, _frame: Any) -> None:
        self.signals += 1
        self.woken.set()

    def run(self) -> None:
        """Watch the children until none is left."""
        stopping_since: Optional[float] = None
        while self.children or self.restarts.due:
            self.woken.clear()
            if self.signals > self.forwarded:
                self.forwarded = self.signals
                stopping_since = stopping_since or time.monotonic()
                self.restarts.due.clear()  # nothing is started again
                log.info("supervisor: stopping %d worker processes", len(self.children))
                for child in self.children.values():
                    child.process.send_signal(signal.SIGTERM)
            self.reap(stopping_since is not None)
            wait = LOOK_EVERY
            if stopping_since is not None:
                if time.monotonic() - stopping_since > self.stop_after:
                    for child in self.children.values():
                        log.warning("supervisor: worker process %d (pid %d) did not stop; "
                                    "killed", child.slot, child.process.pid)
                        child.process.kill()
            else:
                for slot in self.restarts.ready(time.monotonic()):
                    self.start(slot)
                wait = self.enforce()
                later = self.restarts.next_in(time.monotonic())
                if later is not None:
                    wait = min(wait, later)
            self.woken.wait(wait)

    def reap(self, stopping: bool) -> None:
        """Forget the children that exited, releasing what they held; start again
        those that died."""
        for slot, child in list(self.children.items()):
            status = child.process.poll()
            if status is None:
                continue
            del self.children[slot]
            how = f"exit status {status}" if status >= 0 else f"killed by signal {-status}"
            charges = Charges([], [])
            killed = child.settled  # by enforce(), which settled its jobs
            if not killed:
                child.heard.finished(LOOK_EVERY)
                held = child.heard.held()
                charges = Charges([], held) if stopping or status == 0 else charge(
                    held, self.suspects,
                    JobError(WORKER_DIED, f"the worker process running it died ({how})"))
                self.settle(child, charges)
            if stopping or status == 0:
                log.info("supervisor: worker process %d (pid %d) exited (%s)%s", slot,
                         child.process.pid, how, f": {len(charges.given_back)} of its jobs "
                         "given back" if charges.given_back else "")
                continue
            pause = 0.0 if killed else self.restarts.died(
                slot, time.monotonic() - child.started, time.monotonic())
            again = f"started again in {pause:g} s" if pause else "started again"
            if killed:
                log.info("supervisor: worker process %d (pid %d) was killed; %s",
                         slot, child.process.pid, again)
            else:
                log.warning("supervisor: worker process %d (pid %d) died (%s): %d of its "
                            "jobs given back, %d counted as failed; %s", slot,
                            child.process.pid, how, len(charges.given_back),
                            len(charges.counted), again)
            if not pause:
                self.start(slot)

    def enforce(self) -> float:
        """Kill the children whose job ran :data:`HARD_GRACE` past its time limit, or
        that said nothing for too long while alive; how long to wait before the next
        look (at most :data:`LOOK_EVERY`; less when a limit comes sooner)."""
        now = time.time()
        wait = LOOK_EVERY
        for child in list(self.children.values()):
            if child.process.poll() is not None:
                continue
            held = child.heard.held()
            late = []
            for job in held:
                deadline = job.deadline()
                if deadline is None:
                    continue
                if now >= deadline + HARD_GRACE:
                    late.append(job)
                else:
                    wait = min(wait, deadline + HARD_GRACE - now)
            silent = child.heard.silent_for()
            if child.heard.worker is not None:
                wait = min(wait, self.silence - silent)
            if late:
                limits = ", ".join(f"{job.limit:g} s" for job in late)
                held = self.kill(child, f"a job ran past its time limit ({limits})")
                self.settle(child, past_limit(late, held))
            elif child.heard.worker is not None and silent > self.silence:
                held = self.kill(child, f"it said nothing for {silent:.0f} s (stuck)")
                self.settle(child, charge(held, self.suspects, JobError(
                    WORKER_DIED, f"the worker process running it stopped answering for "
                    f"{silent:.0f} s and was killed")))
        return max(0.0, wait)

    def kill(self, child: Child, why: str) -> List[HeldJob]:
        """SIGKILL ``child`` (:meth:`reap` starts it again); the jobs it held, as its
        pipe said until it closed."""
        log.error("supervisor: killing worker process %d (pid %d, worker %s): %s",
                  child.slot, child.process.pid, child.heard.worker, why)
        child.process.kill()
        child.process.wait()
        child.heard.finished(LOOK_EVERY)
        self.woken.set()  # started again at the next look, now
        return child.heard.held()

    def settle(self, child: Child, charges: Charges) -> None:
        """Release the jobs of ``child`` (which is gone) as ``charges`` says; then clear
        its record."""
        child.settled = True
        db = self.target.db
        releases = [(job, True, error) for job, error in charges.counted] + [
            (job, False, None) for job in charges.given_back]
        for job, failed, error in releases:
            try:
                drive(self.ops.release(db, job.token, None, failed, error))
            except Exception:
                log.exception("supervisor: releasing a job of worker process %d failed; "
                              "its lease will expire", child.slot)
        if child.heard.worker is None:
            return
        try:
            drive(self.ops.leave(db, child.heard.worker))
        except Exception:
            log.exception("supervisor: clearing worker %s's record failed",
                          child.heard.worker)


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
