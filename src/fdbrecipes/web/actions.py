"""What the dashboard's buttons do, through the structures' public methods, each
logged as one audit line.

Every action is one transaction or a documented sequence of bounded ones, each
complete on its own, so a browser that goes away midway loses nothing: what committed
is done, the rest is still there, and nothing is done twice.

* One item, or the items chosen on a page (at most :data:`~.listings.ROW_LIMIT`):
  ``requeue_dead(tokens=)``, ``purge_dead(tokens=)``, ``remove_many`` (one
  transaction), ``release`` (one each), ``ack_many`` (one).
* Everything matching a filter (or everything) in a tab: the tab is read page by page
  from a cursor (:func:`.listings.scan`, transactions of 1,000 rows or about 5 MB of
  values that write nothing), then the rows that matched are moved or deleted by their
  tokens in transactions of at most :data:`CHUNK`; one request reads at most
  :data:`SCAN_CAP` rows and about :data:`SCAN_BYTES` of values, changes at most
  :data:`REQUEST_CAP`, and says where it stopped, so the page offers to go on from
  there (its progress).
* Requeueing every dead letter: ``requeue_dead`` given the Database, oldest first, at
  most :data:`REQUEST_CAP` a request, in transactions of at most 1,000.
* A stored schedule: ``pause``, ``resume`` or ``run_now`` of its store (one
  transaction, :func:`schedule`).
* A limit: ``set`` or ``delete`` of its store (one transaction, :func:`set_limit`,
  :func:`delete_limit`); a workflow: ``cancel`` of its store (one transaction,
  :func:`cancel_workflow`).

The caller writes each action's audit line (:func:`.audit.audit`).
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Tuple

from .. import FairQueue, Limit, drive
from ..admin.jobs import cancel_job, jobs_of
from .listings import PAGE_BYTES, Scanned, queue_of, scan
from .reads import Reads

__all__ = ["CHUNK", "REQUEST_CAP", "SCAN_BYTES", "SCAN_CAP", "Done", "LimitChange", "Policy",
           "cancel", "cancel_workflow", "chosen", "command", "delete_limit", "matching",
           "pause", "remove", "requeue_dead", "schedule", "set_limit", "set_policy",
           "settle"]

#: Items one request changes at most.
REQUEST_CAP = 10_000
#: Rows one request reads at most to find those matching a filter.
SCAN_CAP = 10_000
#: Bytes of values one request reads at most (about) to find those matching a filter.
SCAN_BYTES = 10 * PAGE_BYTES
#: Items one transaction changes at most (the library's limit for calls naming rows).
CHUNK = 1_000
#: What each bulk action is called on a page, by what it does.
DOING = {"requeue": "requeued", "purge": "deleted", "remove": "deleted"}

class Done(NamedTuple):
    """What an action did: a sentence for the page, how many it changed, and, for a
    bulk action that stopped at its cap, the cursor to go on from (None: it is
    over)."""

    said: str
    changed: int
    more: Optional[bytes] = None


def requeue_dead(db: Any, structure: Any, group: Any = None,
                 limit: int = REQUEST_CAP) -> Done:
    """Push up to ``limit`` dead letters back (oldest first): ``requeue_dead`` given the
    Database, in transactions of at most 1,000; then their count read again (1 round
    trip) to say how many remain."""
    queue = queue_of(structure, group)
    moved = drive(queue.requeue_dead(db, limit))
    left = drive(queue.stats(db)).dead
    return Done(f"requeued {moved:,} dead letter(s); {left:,} remain", moved)


def _on_tokens(db: Any, queue: Any, action: str, tokens: List[bytes]) -> int:
    """Do ``action`` to the rows ``tokens`` name, :data:`CHUNK` per transaction; how
    many it changed (those gone meanwhile are skipped)."""
    changed = 0
    for at in range(0, len(tokens), CHUNK):
        some = tokens[at:at + CHUNK]
        if action == "requeue":
            changed += drive(queue.requeue_dead(db, None, some))
        elif action == "purge":
            changed += drive(queue.purge_dead(db, some))
        else:
            changed += sum(v is not None for v in drive(queue.remove_many(db, some)))
    return changed


def chosen(db: Any, structure: Any, group: Any, action: str, tokens: List[bytes]) -> Done:
    """Requeue or delete the dead letters, or delete the pending or delayed items,
    that ``tokens`` name (a page's choice: one transaction per :data:`CHUNK`)."""
    changed = _on_tokens(db, queue_of(structure, group), action, tokens)
    return Done(f"{DOING[action]} {changed:,} of {len(tokens):,} chosen", changed)


def matching(reads: Reads, structure: Any, group: Any, tab: str, action: str, search: str,
             after: Optional[bytes], cap: Optional[int] = None) -> Done:
    """Requeue or delete the rows of ``tab`` from the cursor ``after`` on whose shown
    value contains ``search`` (all when empty): read :data:`SCAN_CAP` rows and
    :data:`SCAN_BYTES` at most (:func:`.listings.scan`, within the request's
    deadline), change ``cap`` (default :data:`REQUEST_CAP`) at most, chunked; say how
    far it got."""
    cap = REQUEST_CAP if cap is None else cap
    db = reads.db
    found: Scanned = scan(reads, structure, tab, group, search, after, SCAN_CAP, SCAN_BYTES)
    tokens = found.tokens[:cap]
    changed = _on_tokens(db, queue_of(structure, group), action, tokens)
    more = tokens[-1] if len(found.tokens) > cap else found.next
    what = f"matching {search!r}" if search else "in all"
    said = (f"{DOING[action]} {changed:,} of {len(found.tokens):,} {what} among the "
            f"{found.scanned:,} rows read")
    return Done(said + ("; there may be more: go on from there" if more else "; done"),
                changed, more)


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


def schedule(db: Any, store: Any, name: str, action: str) -> Done:
    """Pause (``pause-schedule``) or resume (``resume-schedule``) the stored schedule
    ``name`` of ``store``, or ask for one of its jobs now (``run-now``): one
    transaction, 1 round trip.

    Raises:
        UnknownScheduleError: no schedule has that name.
    """
    if action == "run-now":
        id_ = store.run_now(db, name)
        return Done(f"{name}: asked the workers for a job now (id {id_.hex()})", 1)
    if action == "pause-schedule":
        return Done(f"{name}: paused" if store.pause(db, name) else
                    f"{name}: already paused", 1)
    return Done(f"{name}: resumed" if store.resume(db, name) else f"{name}: was not paused", 1)


class LimitChange(NamedTuple):
    """A limit as a form gives it: its ``name`` and, to set it, its definition
    (``limit``, made by ``concurrency`` or ``rate``; None for a delete)."""

    name: str
    limit: Optional[Limit]


def set_limit(db: Any, store: Any, change: LimitChange) -> Done:
    """Define or change a limit of ``store``: ``set``, one transaction, 1 round trip (2
    more when parked jobs move back).

    Raises:
        TypeError or ValueError: a bad name or limit (nothing written).
    """
    old = store.set(db, change.name, change.limit)
    was = "new" if old is None else f"was {old}"
    return Done(f"{change.name}: {change.limit} ({was}), from the next claim on", 1)


def delete_limit(db: Any, store: Any, name: str) -> Done:
    """Forget limit ``name`` of ``store``: ``delete``, one transaction, 1 round trip (2
    more when parked jobs move back).

    Raises:
        ValueError: no limit has that name (nothing written).
    """
    old = store.delete(db, name)
    return Done(f"{name}: deleted (was {old})", 1)


def cancel_workflow(db: Any, store: Any, w: bytes) -> Done:
    """Cancel workflow ``w`` of ``store``: ``cancel``, one transaction, 3 round trips
    and one per queued node.

    Raises:
        UnknownWorkflowError: no such workflow (nothing written).
    """
    if store.cancel(db, w):
        return Done("cancelled: nothing not started will run", 1)
    return Done("already over: nothing changed", 0)
