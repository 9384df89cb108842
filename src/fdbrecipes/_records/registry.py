"""The workers serving a structure: their records, and what operators tell them.

A running worker keeps a record in its structure's subspace, rewritten at each of its
heartbeats, and watches a key of its own there: an operator quiets it (it takes no
more jobs) or stops it (it drains and exits), and a cancel of a job it runs reaches
it, by writing beside that key and touching it.  A record not refreshed for
:data:`MISSED_BEATS` heartbeats is a worker gone (killed, or cut off):
:meth:`Registry.workers` leaves it out, and the next beat of another worker clears it.
Keys, under the structure's ``S/"u"``::

    ("w", worker)                  = (host, pid, label, started_at, beat_at, expires_at,
                                      state, processed, failed, running)
    ("c", worker)                  = command: "quiet" or "stop", as asked
    ("x", worker, where, job id)   = ''  a cancel of a job it runs (where: its group
                                         in a FairQueue, else None)
    ("n", worker)                  = int64  touched by each command and cancel: watched

Times are wall-clock seconds.  Every write but a beat's clearing of the gone is a
blind write (no read conflict); a beat conflicts only with another beat clearing the
same gone worker, or with that worker coming back.
"""

from __future__ import annotations

import time
from typing import Any, List, NamedTuple, Optional, Tuple

import fdb.tuple
from fdb.subspace_impl import Subspace

from .._fdb import Gen, Range, le64, read, snap

__all__ = ["MISSED_BEATS", "QUIET", "STOP", "Orders", "Registry", "RunningJob", "WorkerInfo"]

#: Heartbeats a worker may miss before it counts as gone.
MISSED_BEATS = 3
#: What an operator may ask of a worker: take no more jobs; drain and exit.
QUIET, STOP = "quiet", "stop"
#: Gone workers' records one beat clears at most.
SWEEP = 16


def _pack(parts: Tuple[Any, ...]) -> bytes:
    packed: bytes = fdb.tuple.pack(parts)
    return packed


class RunningJob(NamedTuple):
    """A job a worker runs: its id (None if it has none), its lease's token, its group
    (a FairQueue's; else None), when its handler began (wall-clock seconds) and its
    time limit (seconds, or None)."""

    id: Optional[bytes]
    token: bytes
    group: Any
    started_at: float
    time_limit: Optional[float]


class WorkerInfo(NamedTuple):
    """A live worker, as its last heartbeat described it.

    Attributes:
        id: the worker's id (``host-pid-xxxx``).
        host, pid: where it runs.
        label: what it serves (the structure, as the worker names it).
        started_at, beat_at: when it started and last beat (wall-clock seconds).
        expires_at: when it counts as gone if it beats no more.
        state: ``running``, ``quiet`` (it takes no more jobs) or ``stopping``.
        processed, failed: jobs it finished, and those of them that failed.
        running: the jobs it runs (:class:`RunningJob`).
    """

    id: str
    host: str
    pid: int
    label: str
    started_at: float
    beat_at: float
    expires_at: float
    state: str
    processed: int
    failed: int
    running: Tuple[RunningJob, ...]


class Orders(NamedTuple):
    """What operators asked of a worker: its command (None, "quiet" or "stop") and the
    jobs to cancel, as ``(group, id)`` pairs."""

    command: Optional[str]
    cancels: List[Tuple[Any, bytes]]


def _info(value: bytes, worker: str) -> WorkerInfo:
    host, pid, label, started, beat, expires, state, processed, failed, running = \
        fdb.tuple.unpack(value)
    return WorkerInfo(worker, host, pid, label, started, beat, expires, state, processed,
                      failed, tuple(RunningJob(*job) for job in running))


class Registry:
    """The workers of one structure (see the module docstring)."""

    __slots__ = ("space",)

    def __init__(self, space: Subspace) -> None:
        self.space = space

    def record_key(self, worker: str) -> bytes:
        return bytes(self.space.pack(("w", worker)))

    def wake_key(self, worker: str) -> bytes:
        """The key ``worker`` watches for commands and cancels."""
        return bytes(self.space.pack(("n", worker)))

    # -- what a worker writes --------------------------------------------------------

    def beat(self, tr: Any, info: WorkerInfo) -> Gen[None]:
        """Write ``info`` (the worker's record, ``expires_at`` included), and clear a
        few records of workers gone (a read conflict on each: a gone worker that comes
        back meanwhile makes this beat retry)."""
        tr.set(self.record_key(info.id), _pack(info[1:10] + (tuple(info.running),)))
        now = time.time()
        r = self.space.range(("w",))
        for kv in (yield from Range(snap(tr), r.start, r.stop).read()):
            worker = self.space.unpack(kv.key)[1]
            if worker != info.id and _info(kv.value, worker).expires_at < now:
                tr.add_read_conflict_key(kv.key)
                self.forget(tr, worker)

    def forget(self, tr: Any, worker: str) -> None:
        """Clear ``worker``'s record, command and cancels (it left, or is gone)."""
        cancels = self.space.range(("x", worker))
        tr.clear_range(cancels.start, cancels.stop)
        tr.clear(self.record_key(worker))
        tr.clear(bytes(self.space.pack(("c", worker))))

    def orders(self, tr: Any, worker: str) -> Gen[Orders]:
        """What operators asked of ``worker`` since it last looked; what was read is
        cleared (a worker applies each order once)."""
        command_key = bytes(self.space.pack(("c", worker)))
        command = tr.get(command_key)
        r = self.space.range(("x", worker))
        cancels = []
        for kv in (yield from Range(tr, r.start, r.stop).read()):
            where, id_ = self.space.unpack(kv.key)[2:]
            cancels.append((where, id_))
            tr.clear(kv.key)
        found = yield from read(command)
        if found is not None:
            tr.clear(command_key)
        return Orders(None if found is None else found.decode(), cancels)

    def has_orders(self, tr: Any, worker: str) -> Gen[Tuple[bool, None]]:
        """Whether operators asked anything of ``worker`` (a readiness check)."""
        command = tr.get(bytes(self.space.pack(("c", worker))))
        r = self.space.range(("x", worker))
        cancel = yield from Range(tr, r.start, r.stop, 1).first()
        return cancel is not None or (yield from read(command)) is not None, None

    # -- what operators write ------------------------------------------------------------

    def command(self, tr: Any, worker: str, command: str) -> Gen[bool]:
        """Ask ``worker`` to ``command`` ("quiet" or "stop"); False (nothing written) if
        no live worker has that id.  Reads its record (a read conflict)."""
        value = yield from read(tr.get(self.record_key(worker)))
        if value is None or _info(value, worker).expires_at < time.time():
            return False
        tr.set(bytes(self.space.pack(("c", worker))), command.encode())
        tr.add(self.wake_key(worker), le64(1))
        return True

    def cancel(self, tr: Any, worker: str, where: Any, id_: bytes) -> None:
        """Tell ``worker`` to cancel the job ``id_`` (of group ``where``) it runs."""
        tr.set(bytes(self.space.pack(("x", worker, where, id_))), b"")
        tr.add(self.wake_key(worker), le64(1))

    # -- reading ---------------------------------------------------------------------

    def workers(self, tr: Any, gone: bool = False) -> Gen[List[WorkerInfo]]:
        """The live workers (``gone``: and those gone, not yet cleared), by id;
        snapshot reads."""
        r = self.space.range(("w",))
        now = time.time()
        found = []
        for kv in (yield from Range(snap(tr), r.start, r.stop).read()):
            info = _info(kv.value, self.space.unpack(kv.key)[1])
            if gone or info.expires_at >= now:
                found.append(info)
        return found
