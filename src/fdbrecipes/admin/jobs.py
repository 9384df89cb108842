"""The operator commands about jobs and workers: ``job``, ``cancel``, ``finished``,
``workers``, ``pause`` and ``resume``.

Usage::

    fdbrecipes job 3f2a...e1 --directory app/jobs            # a job's record
    fdbrecipes job 3f2a...e1 --directory app/jobs --wait 60  # ... once it ended
    fdbrecipes cancel 3f2a...e1 --directory app/jobs --yes   # cancel it
    fdbrecipes finished --directory app/jobs                 # the jobs that ended
    fdbrecipes workers --directory app/jobs                  # the live workers
    fdbrecipes workers --directory app/jobs --quiet host-4242-a1b2
    fdbrecipes workers --directory app/jobs --stop host-4242-a1b2

A job's id is given as text (its bytes as given: the ids ``push`` makes are 32 hex
characters); a fair-queue's jobs also need ``--group``.  Job records exist only in a
structure whose application made it with ``history=SECONDS`` (see docs/jobs.md; the
command line's ``worker --history`` and ``push --history``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import time
from typing import Any, Callable, Dict, Optional

from .. import _kinds
from .._records.records import SUCCEEDED
from .._records.registry import QUIET, STOP
from ..errors import JobCancelledError, JobFailedError, ResultTooLargeError, UnknownJobError
from ..types import JobRecord
from .arguments import Needs, finished_arguments, id_bytes, place_arguments, seconds
from .commands import Operation, Report, Target
from .output import cut, id_json, id_text, iso_time, json_value, listing, table
from .places import OperatorError, UsageError

__all__ = ["CANCEL", "FINISHED", "JOB", "PAUSE", "RESUME", "WORKERS", "cancel_job",
           "job_record", "jobs_of", "wait_for_job"]


def job_arguments(parser: argparse.ArgumentParser) -> None:
    """``job``'s options."""
    place_arguments(parser, "Show a job's record: its state, attempts, times, worker, last "
                    "error (with its traceback), progress and result.  Reads only.")
    parser.add_argument("id", metavar="ID", help="the job's id (its bytes as given)")
    parser.add_argument("--wait", type=seconds, metavar="SECONDS",
                        help="first wait until the job ended, at most SECONDS (on a watch); "
                        "exit status 1 unless it succeeded")


def cancel_arguments(parser: argparse.ArgumentParser) -> None:
    """``cancel``'s options."""
    place_arguments(parser, "Cancel a job: a pending, delayed or retrying one is removed, a "
                    "running one is stopped by its worker.  Writes: refuses to run "
                    "without --yes.")
    parser.add_argument("id", metavar="ID", help="the job's id (its bytes as given)")
    parser.add_argument("--yes", action="store_true", help="really cancel it")


def workers_arguments(parser: argparse.ArgumentParser) -> None:
    """``workers``' options."""
    place_arguments(parser, "List the live workers serving a queue (as of their last "
                    "heartbeat), or ask one to be quiet (claim no more jobs) or to stop "
                    "(finish its jobs and exit).  Reads only, but --quiet and --stop.")
    one = parser.add_mutually_exclusive_group()
    one.add_argument("--quiet", metavar="WORKER", help="ask WORKER to claim no more jobs")
    one.add_argument("--stop", metavar="WORKER", help="ask WORKER to drain and exit")


def _when(epoch: Optional[float]) -> str:
    return "-" if epoch is None else iso_time(epoch)


def _record(record: JobRecord) -> Dict[str, Any]:
    """A record as JSON."""
    return {"id": id_json(record.id), "state": record.state,
            "attempts": record.attempts, "pushed_at": record.pushed_at,
            "started_at": record.started_at, "finished_at": record.finished_at,
            "worker": record.worker,
            "error": None if record.error is None else record.error._asdict(),
            "progress": None if record.progress is None else record.progress._asdict(),
            "result": json_value(record.result), "time_limit": record.time_limit,
            "cancel_requested": record.cancel_requested}


def jobs_of(structure: Any) -> Any:
    """``structure``, which has jobs (a Queue, PriorityQueue or FairQueue: its kind
    keeps jobs).

    Raises:
        UsageError: it is a weight-tree (or anything else).
    """
    kind = _kinds.find(structure)
    if kind is None or not kind.jobs:
        raise UsageError("a weight-tree has no jobs")
    return structure


def _where(structure: Any, group: Any) -> Dict[str, Any]:
    """The keyword arguments naming a job's queue in ``structure``, which has jobs: a
    FairQueue's ``group``, none for the others (see ``Kind.where``)."""
    return _kinds.of(jobs_of(structure)).where(group)


def _jobs(target: Target) -> Any:
    """The structure, which has jobs (the checks made on ``--kind`` refused a
    weight-tree before)."""
    return jobs_of(target.structure)


def job_record(tr: Any, structure: Any, id_: bytes, group: Any = None) -> Optional[JobRecord]:
    """The record of job ``id_`` of ``structure`` (a FairQueue's in ``group``): its
    ``job`` method (one range read, 1 to 2 round trips); None if there is none."""
    found: Optional[JobRecord] = structure.job(tr, id_, **_where(structure, group))
    return found


def cancel_job(tr: Any, structure: Any, id_: bytes, group: Any = None) -> Optional[str]:
    """Cancel job ``id_`` of ``structure`` (a FairQueue's in ``group``) with its
    ``cancel`` method (2 to 5 round trips); what became of it (see
    ``Queue.cancel``)."""
    answer: Optional[str] = structure.cancel(tr, id_, **_where(structure, group))
    return answer


def wait_for_job(db: Any, structure: Any, id_: bytes, group: Any, timeout: float) -> None:
    """Wait until job ``id_`` of ``structure`` (a FairQueue's in ``group``) ended, at
    most ``timeout`` seconds: its ``result`` method (a watch on its state), whatever
    the outcome (dead, cancelled, a result not kept, no such job, still running)."""
    where = _where(structure, group)
    with contextlib.suppress(JobFailedError, JobCancelledError, ResultTooLargeError,
                             UnknownJobError, TimeoutError):  # the record read next says which
        structure.result(db, id_, timeout=timeout, **where)


def job(target: Target, args: argparse.Namespace) -> Report:
    """``job``: one job's record (with ``--wait``, once it ended; the exit status is
    then 1 unless it succeeded)."""
    id_ = id_bytes(args.id, "ID")
    if args.wait is not None:
        wait_for_job(target.db, target.structure, id_, args.group, args.wait)
    record = job_record(target.db, target.structure, id_, args.group)
    if record is None:
        raise OperatorError(f"no job {cut(repr(args.id), 60)} at {target.place} (never "
                            "pushed, pushed without history, or pruned)")
    rows = [("state", record.state), ("attempts", str(record.attempts)),
            ("pushed", _when(record.pushed_at)), ("started", _when(record.started_at)),
            ("finished", _when(record.finished_at)), ("worker", record.worker or "-"),
            ("time limit", "-" if record.time_limit is None else f"{record.time_limit:g} s"),
            ("progress", "-" if record.progress is None else
             f"{record.progress.fraction:.0%} {record.progress.message}".rstrip()),
            ("result", cut(repr(record.result))),
            ("error", "-" if record.error is None else
             cut(f"{record.error.type}: {record.error.message}", 200))]
    text = f"{target.title()}: job {id_text(id_)}\n{table(rows)}"
    if record.error is not None and record.error.traceback:
        text += "\n" + record.error.traceback.rstrip()
    report = Report({**target.header(), "job": _record(record)}, text)
    if args.wait is None or record.state == SUCCEEDED:
        return report
    problem = (f"job {id_text(id_)} is {record.state}" if record.finished else
               f"job {id_text(id_)} is still {record.state} after {args.wait:g} s")
    return dataclasses.replace(report, status=1, problem=problem)


def cancel(target: Target, args: argparse.Namespace) -> Report:
    """``cancel``: cancel one job."""
    id_ = id_bytes(args.id, "ID")
    answer = cancel_job(target.db, target.structure, id_, args.group)
    said = {None: "no such job", "cancelling": "running: its worker was told to stop it",
            "cancelled": "cancelled"}.get(answer, f"already {answer}: nothing changed")
    return Report({**target.header(), "id": id_json(id_), "answer": answer},
                  f"{target.title()}: job {id_text(id_)}: {said}")


def finished(target: Target, args: argparse.Namespace) -> Report:
    """``finished``: the finished jobs whose records are kept, the latest to be
    pruned first."""
    found = jobs_of(target.structure).finished(target.db, args.limit)
    fair = _kinds.of(target.structure).groups
    rows = [(str(i), *((cut(repr(j.group), 20),) if fair else ()), cut(id_text(j.id), 40),
             j.state, str(j.attempts), iso_time(j.finished_at),
             "-" if j.error is None else cut(j.error.reason(), 60))
            for i, j in enumerate(found, 1)]
    data = [{"id": id_json(j.id), "group": json_value(j.group), "state": j.state,
             "attempts": j.attempts, "finished_at": iso_time(j.finished_at),
             "finished_at_epoch": j.finished_at, "expires_at_epoch": j.expires_at,
             "error": None if j.error is None else j.error._asdict(), "token": j.token.hex()}
            for j in found]
    headers = ("#", *(("group",) if fair else ()), "id", "state", "attempts",
               "finished at (UTC)", "error")
    return Report({**target.header(), "finished": data},
                  listing(target.title(), rows, headers, "(no finished jobs: none ended, or "
                          "no record is kept: see --history)", args.limit))


def pausing_arguments(what: str) -> Callable[[argparse.ArgumentParser], None]:
    """``pause``'s or ``resume``'s options."""
    def add(parser: argparse.ArgumentParser) -> None:
        place_arguments(parser, what)
    return add


def pause(target: Target, args: argparse.Namespace) -> Report:
    """``pause``: no consumer or worker takes anything until ``resume``."""
    changed = jobs_of(target.structure).pause(target.db)
    return Report({**target.header(), "paused": True, "changed": changed},
                  f"{target.title()}: {'paused' if changed else 'already paused'}")


def resume(target: Target, args: argparse.Namespace) -> Report:
    """``resume``: takes go on."""
    changed = jobs_of(target.structure).resume(target.db)
    return Report({**target.header(), "paused": False, "changed": changed},
                  f"{target.title()}: {'resumed' if changed else 'was not paused'}")


def workers(target: Target, args: argparse.Namespace) -> Report:
    """``workers``: the live workers, or a command to one."""
    structure = _jobs(target)
    if args.quiet is not None or args.stop is not None:
        worker, command = (args.quiet, QUIET) if args.quiet is not None else (args.stop, STOP)
        if not structure.command(target.db, worker, command):
            raise OperatorError(f"no live worker {worker!r} serves {target.place}")
        return Report({**target.header(), "worker": worker, "command": command},
                      f"{target.title()}: asked worker {worker} to {command}")
    found = structure.workers(target.db)
    now = time.time()
    rows = [(cut(w.id, 40), cut(w.state, 20), f"{now - w.beat_at:.0f} s ago",
             str(len(w.running)), f"{w.processed:,}", f"{w.failed:,}", cut(w.label, 40))
            for w in found]
    data = [{**w._asdict(), "running": [{"id": id_json(j.id), "token": j.token.hex(),
                                         "group": json_value(j.group),
                                         "started_at": j.started_at,
                                         "time_limit": j.time_limit} for j in w.running]}
            for w in found]
    return Report({**target.header(), "workers": data},
                  "\n".join([target.title(), table(rows, ("worker", "state", "beat", "running",
                                                          "done", "failed", "serving"))
                             if rows else "(no live workers)"]))


#: What the job commands need: a queue kind (``--group`` for a fair-queue).
ONE_JOB = Needs(dead_letters=True, group=True)

JOB = Operation("job", "show a job's record (read only)", job_arguments, job, ONE_JOB)
CANCEL = Operation("cancel", "cancel a job (needs --yes)", cancel_arguments, cancel,
                   Needs(True, True, "cancel a job"))
PAUSE = Operation("pause", "pause a queue: nothing is taken until resume",
                  pausing_arguments("Pause a queue, priority-queue or fair-queue: from now on "
                                    "no pop, claim or worker takes anything from it (pushes "
                                    "go on; running jobs finish) until 'fdbrecipes resume'.  "
                                    "Writes one key."), pause, Needs(dead_letters=True))
RESUME = Operation("resume", "resume a paused queue",
                   pausing_arguments("Resume a paused queue: takes go on, waiting workers "
                                     "wake.  Writes one key."), resume, Needs(dead_letters=True))
WORKERS = Operation("workers", "list a queue's live workers; quiet or stop one",
                    workers_arguments, workers, Needs(dead_letters=True, any_queue=True))
FINISHED = Operation("finished", "list the jobs that ended, latest first (read only)",
                     finished_arguments, finished, Needs(dead_letters=True))
