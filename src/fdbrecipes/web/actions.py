"""What the dashboard's buttons do, through the structures' public methods, each
logged as one audit line.

Every action is one transaction or a sequence of bounded ones the library documents
(``requeue_dead`` and ``purge_dead`` given a Database: transactions of at most 1,000
dead letters, each complete on its own), so a browser that goes away midway loses
nothing: what committed is done, the rest is still there.  A request moves at most
:data:`REQUEST_CAP` dead letters; the page says how many remain.

The audit log is the ``fdbrecipes.web.audit`` logger (INFO): one line per action,
``who=... action=... structure=... group=... target=... count=...`` with every field
``repr``-quoted, so a hostile name cannot forge a line.
"""

from __future__ import annotations

import logging
from typing import Any, List, NamedTuple, Optional, Tuple

from .. import FairQueue, drive
from ..admin.jobs import cancel_job, jobs_of
from .views import queue_of

__all__ = ["REQUEST_CAP", "Done", "Policy", "audit", "cancel", "command", "pause",
           "purge_dead", "remove", "requeue_dead", "set_policy", "settle"]

#: Dead letters one request requeues at most.
REQUEST_CAP = 10_000

log = logging.getLogger("fdbrecipes.web.audit")


class Done(NamedTuple):
    """What an action did: a sentence for the page, and how many it changed."""

    said: str
    changed: int


def audit(who: str, action: str, structure: str, count: int, group: Any = None,
          target: Any = None) -> None:
    """Write the audit line of one action (see the module docstring)."""
    log.info("who=%r action=%r structure=%r group=%r target=%r count=%d", who, action,
             structure, group, target, count)


def requeue_dead(db: Any, structure: Any, group: Any = None,
                 limit: int = REQUEST_CAP) -> Done:
    """Push up to ``limit`` dead letters back (oldest first): ``requeue_dead`` given the
    Database, in transactions of at most 1,000; then their count read again (1 round
    trip) to say how many remain."""
    queue = queue_of(structure, group)
    moved = drive(queue.requeue_dead(db, limit))
    left = drive(queue.stats(db)).dead
    return Done(f"requeued {moved:,} dead letter(s); {left:,} remain", moved)


def purge_dead(db: Any, structure: Any, group: Any = None) -> Done:
    """Delete every dead letter: ``purge_dead`` given the Database, in transactions of at
    most 1,000."""
    removed = drive(queue_of(structure, group).purge_dead(db))
    return Done(f"purged {removed:,} dead letter(s)", removed)


def remove(db: Any, structure: Any, id_: bytes, group: Any = None) -> Done:
    """Remove the pending item pushed with ``id_`` (``remove``: one transaction, 2 round
    trips)."""
    value = drive(queue_of(structure, group).remove(db, id_))
    if value is None:
        return Done("no pending item has that id", 0)
    return Done("removed 1 pending item", 1)


def cancel(db: Any, structure: Any, id_: bytes, group: Any = None) -> Done:
    """Cancel job ``id_`` (``cancel``: one transaction, 2 to 5 round trips)."""
    answer = cancel_job(db, structure, id_, group)
    said = {None: "no such job", "cancelling": "running: its worker was told to stop it",
            "cancelled": "cancelled"}.get(answer, f"already {answer}: nothing changed")
    return Done(said, 1 if answer in ("cancelled", "cancelling") else 0)


def pause(db: Any, structure: Any, paused: bool) -> Done:
    """Pause (``paused``) or resume ``structure``: ``pause`` or ``resume``, one
    transaction, 1 round trip."""
    jobs = jobs_of(structure)
    if paused:
        return Done("paused" if jobs.pause(db) else "already paused", 1)
    return Done("resumed" if jobs.resume(db) else "was not paused", 1)


class Policy(NamedTuple):
    """A group's policy as a form gives it: ``share``, ``limit`` (None: the queue's
    defaults) and ``rate`` (``(count, seconds)``, or None: none)."""

    share: Optional[int]
    limit: Optional[int]
    rate: Optional[Tuple[int, float]]


def set_policy(db: Any, fair: FairQueue, group: Any, policy: Policy) -> Done:
    """Set ``group``'s policy: ``set_group``, one transaction, 1 to 3 round trips.

    Raises:
        TypeError or ValueError: a bad share, limit or rate (nothing written).
    """
    fair.set_group(db, group, share=policy.share, limit=policy.limit, rate=policy.rate)
    return Done("policy set", 1)


def settle(db: Any, structure: Any, tokens: List[bytes], give_back: bool) -> Done:
    """Give the items in flight of the lease ``tokens`` back (``give_back``: ``release``,
    each in one transaction, 1 round trip; their delivery counts) or delete them for good
    (``ack_many``: one transaction); those whose lease already ended are skipped.

    Raises:
        TypeError or ValueError: a token is not one of this structure's (nothing
            written for it).
    """
    jobs = jobs_of(structure)
    if give_back:
        done = sum(1 for token in tokens if jobs.release(db, token))
        return Done(f"gave {done:,} of {len(tokens):,} back", done)
    done = sum(jobs.ack_many(db, tokens))
    return Done(f"deleted {done:,} of {len(tokens):,}", done)


def command(db: Any, structure: Any, worker: str, order: str) -> Done:
    """Ask worker ``worker`` to ``order`` ("quiet" or "stop"): ``command``, one
    transaction, 1 round trip."""
    if not jobs_of(structure).command(db, worker, order):
        return Done("no live worker has that id", 0)
    return Done(f"asked the worker to {order}", 1)

