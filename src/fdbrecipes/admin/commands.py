"""Running an operator command: check the command line, connect, open and survey the
place, act, print.

Each command is an :class:`Operation`; :func:`run` does the rest.  Reading commands
use the library's reading methods only, given the Database (each runs in a transaction
it does not write to) or, for ``stats``, in one transaction that is never committed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, TypeVar

from .. import _kinds
from .._cluster import tools_client_problem
from .._drivers.blocking import drive
from ..errors import FdbRecipesError
from ..protocol import Inspectable, inspectable
from ..schedules import Schedules
from .arguments import (
    Needs,
    check_kind,
    check_usage,
    dead_arguments,
    id_bytes,
    listing_arguments,
    parse_value,
    peek_arguments,
    purge_dead_arguments,
    push_arguments,
    remove_arguments,
    requeue_dead_arguments,
    stats_arguments,
    unblock_arguments,
)
from .output import cut, id_json, id_text, iso_time, json_value, listing, printable, table
from .places import (
    ANY_QUEUE,
    LIMIT_STORE,
    SCHEDULE_STORE,
    WORKFLOW_STORE,
    OperatorError,
    Place,
    UsageError,
    make_place,
    make_structure,
    open_place,
    shards_of,
    stored,
    survey,
)

__all__ = ["DEAD", "DELAYED", "LEASES", "OPERATIONS", "PEEK", "PURGE_DEAD", "PUSH", "REMOVE",
           "UNBLOCK",
           "REQUEUE_DEAD", "STATS", "Operation", "Report", "Target", "answer", "run"]

T = TypeVar("T")

#: FoundationDB's transaction_timed_out.
TIMED_OUT = 1031
#: What a command that works on any structure needs: nothing.
ANYTHING = Needs()
#: The stores a structure's command refuses, and the command that acts on each.
OTHER_STORES = {LIMIT_STORE: "limits", WORKFLOW_STORE: "workflow"}


@dataclass(frozen=True)
class Target:
    """An opened structure: the database, where it is, its kind, the library object."""

    db: Any
    place: Place
    kind: str
    structure: Any  # a Structure, or the Schedules of a schedule store

    def header(self) -> Dict[str, Any]:
        """The first fields of every JSON answer."""
        return {"kind": self.kind, "place": str(self.place)}

    def title(self) -> str:
        """The first line of every table."""
        return f"{self.kind} at {self.place}"


@dataclass(frozen=True)
class Report:
    """What a command prints: ``data`` with ``--json``, else ``text``; its exit
    status, and the line it says on stderr when that is not 0."""

    data: Dict[str, Any]
    text: str
    status: int = 0
    problem: str = ""

    def rendered(self, as_json: bool) -> str:
        """What is printed: one line of JSON (which escapes every control character
        and everything beyond ASCII), or the text with nothing a terminal would act
        on (:func:`.output.printable`: what the cluster holds is shown, not obeyed)."""
        if as_json:
            return json.dumps(self.data, allow_nan=False)
        return printable(self.text, newlines=True)


@dataclass(frozen=True)
class Operation:
    """One operator command: its name, its help line, its options, its action, and
    what it needs of the structure (see :class:`.arguments.Needs`)."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    act: Callable[[Target, argparse.Namespace], Report]
    needs: Needs = ANYTHING

    def main(self, args: argparse.Namespace) -> int:
        """Run the command on the parsed command line; its exit status."""
        return run(args, self)


# -- connecting and opening ----------------------------------------------------------


def read_only(db: Any, op: Callable[..., T], *args: Any, timeout: Optional[float] = None) -> T:
    """``op(transaction, *args)`` in a transaction that is never committed, retried on
    retryable errors; the database's transaction timeout bounds the whole, or
    ``timeout`` seconds when given (the transaction's own: error 1031 once they pass,
    retries included)."""
    import fdb.impl

    tr = db.create_transaction()
    if timeout is not None:
        tr.options.set_timeout(max(1, int(timeout * 1000)))
    while True:
        try:
            return op(tr, *args)
        except fdb.impl.FDBError as e:
            tr.on_error(e).wait()


def client_ready() -> None:
    """Select the tools' API version (``libfdb_c`` loaded), as the application: before
    anything else uses ``fdb`` (a handler's module, made at import, may).

    Raises:
        OperatorError: ``libfdb_c`` cannot be loaded or the bindings refuse it.
    """
    problem = tools_client_problem()
    if problem:
        raise OperatorError(f"cannot run: {problem}")


def connect(args: argparse.Namespace) -> Any:
    """The database ``--cluster-file`` names, its transactions bounded by ``--timeout``.

    Raises:
        OperatorError: ``libfdb_c`` cannot be loaded or the bindings refuse it, or the
            cluster file is missing.
    """
    client_ready()
    if args.cluster_file is not None and not os.path.isfile(args.cluster_file):
        raise OperatorError(f"cluster file {args.cluster_file} does not exist")
    import fdb

    db = fdb.open(args.cluster_file)
    db.options.set_transaction_timeout(int(args.timeout * 1000))
    return db


def open_target(db: Any, place: Place, args: argparse.Namespace,
                needs: Needs = ANYTHING) -> Target:
    """Open ``place`` (made if it is a missing directory and the command has a
    ``default_kind``) and check that what is stored there is a ``--kind`` (without
    ``--kind``: recognise the kind from the keys there, then check what needs it; see
    :class:`.arguments.Needs` for a place whose keys do not tell)."""
    if needs.default_kind is not None:
        subspace = make_place(db, place)
    else:
        subspace = read_only(db, open_place, place)
    if args.kind is None:
        seen, wrong = read_only(db, stored, subspace)
        if wrong is not None:
            raise OperatorError(f"nothing fdbrecipes keeps is at {place}: found {wrong}")
        if seen == SCHEDULE_STORE:
            if not needs.stores:
                raise OperatorError(f"a schedule store is at {place}: see 'fdbrecipes "
                                    "schedules'")
            return Target(db, place, SCHEDULE_STORE, Schedules(subspace))
        if seen in OTHER_STORES:
            raise OperatorError(f"a {seen} is at {place}: see 'fdbrecipes "
                                f"{OTHER_STORES[seen]}'")
        if seen is None and needs.default_kind is not None:
            seen = needs.default_kind
        elif seen in (None, ANY_QUEUE) and needs.any_queue:
            seen = "queue"
        elif seen is None or seen == ANY_QUEUE:
            what = "is stored" if seen is None else "tells whether it is a queue or a priority"
            raise UsageError(f"nothing at {place} {what}"
                             f"{'' if seen is None else '-queue'}: give --kind")
        args.kind = seen
        check_kind(args, needs)
    found = read_only(db, survey, subspace, args.kind)
    if found is not None:
        raise OperatorError(f"no {args.kind} at {place}: found {found}")
    structure = make_structure(args.kind, subspace, args.max_deliveries,
                               getattr(args, "history", None),
                               read_only(db, shards_of, subspace))
    return Target(db, place, args.kind, structure)


def cluster_problem(e: BaseException, args: argparse.Namespace) -> Optional[str]:
    """The line to print for a FoundationDB error, or None if ``e`` is not one."""
    impl = sys.modules.get("fdb.impl")
    if impl is None or not isinstance(e, impl.FDBError):
        return None
    path = args.cluster_file or os.environ.get("FDB_CLUSTER_FILE")
    where = f"cluster file {path}" if path else "the default cluster file"
    if e.code == TIMED_OUT:
        return (f"the cluster ({where}) did not answer within {args.timeout:g} s: is it "
                "running and reachable? (--timeout SECONDS waits longer)")
    return f"FoundationDB error {e.code} ({e.description}) with {where}"


def say(prefix: str, message: object) -> None:
    """Print ``prefix message`` on stderr as one line (a multi-line message joined,
    what a terminal would act on escaped: see :func:`.output.printable`)."""
    print(prefix, printable(" ".join(str(message).splitlines())), file=sys.stderr)


def run(args: argparse.Namespace, operation: Operation) -> int:
    """Run ``operation`` as ``args`` say, print its report, return the exit status.

    A failure is one line on stderr, ``fdbrecipes <command>: <reason>`` (usage errors:
    ``fdbrecipes <command>: error: <reason>``), and exit status 1 (usage: 2).  A
    report with a status (``job --wait`` of a job that failed) is printed, then its
    problem said.
    """
    return answer(f"fdbrecipes {operation.name}:", args, acting, args, operation)


def acting(args: argparse.Namespace, operation: Operation) -> Report:
    """Check the command line, connect, open the place, act: the report."""
    place = check_usage(args, operation.needs)
    target = open_target(connect(args), place, args, operation.needs)
    return operation.act(target, args)


def answer(prefix: str, args: argparse.Namespace, act: Callable[..., Report],
           *act_args: Any) -> int:
    """Print the report of ``act(*act_args)`` (JSON with ``--json``) and return 0, or
    say why it failed in one line starting with ``prefix`` and return the exit status
    (see :func:`run`)."""
    try:
        report = act(*act_args)
    except UsageError as e:
        say(f"{prefix} error:", e)
        return e.status
    except OperatorError as e:
        say(prefix, e)
        return e.status
    except FdbRecipesError as e:
        say(prefix, e)
        return 1
    except KeyboardInterrupt as e:
        say(prefix, f"interrupted: {e}" if str(e) else "interrupted")
        return 130
    except Exception as e:
        line = cluster_problem(e, args)
        if line is None:
            raise
        say(prefix, line)
        return 1
    print(report.rendered(args.json), flush=True)
    if report.status:
        say(prefix, report.problem)
    return report.status


# -- the commands --------------------------------------------------------------------


def queue_of(target: Target, args: argparse.Namespace) -> Inspectable:
    """The queue a command looks into or changes: a queue kind's operations, or those
    of the fair-queue's ``--group`` (never a weight-tree's: see check_kind)."""
    structure = target.structure
    kind = _kinds.of(structure)
    if kind.groups:
        found: Inspectable = kind.group_queue(structure, args.group)
        return found
    return inspectable(structure)


def _counts(tr: Any, target: Target, group: Optional[str]) -> Dict[str, Any]:
    """What ``stats`` shows: the size and where the items are (a weight-tree's size and
    total weight; a fair-queue's, summed over its groups, with how many there are, or
    those of ``group``, with its limit and share), and since when it is paused."""
    structure = target.structure
    if isinstance(structure, Schedules):
        raise UsageError("a schedule store has no counts: see 'fdbrecipes schedules list'")
    kind = _kinds.of(structure)
    if kind.weights:
        return {"size": structure.size(tr), "total_weight": structure.total_weight(tr)}
    paused = structure.paused(tr)
    when = {"paused": None if paused is None else iso_time(paused)}
    if kind.groups:
        if group is not None:
            return {"group": group, **drive(structure.ops.group_stats(tr, group))._asdict(),
                    **when}
        totals = drive(structure.ops.stats(tr))
        return {"groups": len(structure.groups(tr)), **totals._asdict(), **when}
    return {"size": structure.size(tr), **structure.stats(tr)._asdict(), **when}


def _shown(name: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value if name == "paused" else cut(repr(value))
    return f"{value:.1f} s" if name.endswith("age") else f"{value:,}"


def stats(target: Target, args: argparse.Namespace) -> Report:
    """``stats``: the counters, read in one transaction (never committed); with
    ``--watch``, printed again every so many seconds until Ctrl-C (the last report is
    returned)."""
    while True:
        data = read_only(target.db, _counts, target, args.group)
        rows = [(name.replace("_", " "), _shown(name, v)) for name, v in data.items()]
        report = Report({**target.header(), **data}, f"{target.title()}\n{table(rows)}")
        if not getattr(args, "watch", None):
            return report
        print(report.rendered(args.json), flush=True)
        time.sleep(args.watch)  # a refresh period, between reports


def push(target: Target, args: argparse.Namespace) -> Report:
    """``push``: one value, as ``--type`` says; its id (a weight-tree's handle)."""
    value = parse_value(args.value, args.type)
    structure, id_ = target.structure, None if args.id is None else id_bytes(args.id)
    kind = _kinds.of(structure)
    if kind.weights:
        if args.delay is not None or args.priority is not None or args.history is not None:
            raise UsageError("a weight-tree takes --weight, not --delay, --priority or "
                             "--history")
        handle = structure.push(target.db, value, args.weight or 1, id=id_)
        return Report({**target.header(), "pushed": json_value(value), "id": id_json(id_),
                       "handle": handle.hex()},
                      f"{target.title()}: pushed {cut(repr(value))}, handle {handle.hex()}")
    if args.weight is not None:
        raise UsageError("--weight applies to --kind weight-tree only")
    if args.priority is not None and not kind.priorities:
        raise UsageError("--priority applies to --kind priority-queue only")
    made = structure.push(target.db, value, id=id_, delay=args.delay,
                          **kind.where(args.group, args.priority or 0))
    said = (f"id {id_text(made)}" if made is not None else
            "no id (--id names it; --history makes it one and keeps its record)")
    return Report({**target.header(), "pushed": json_value(value), "id": id_json(made)},
                  f"{target.title()}: pushed {cut(repr(value))}, {said}")


def _version(tr: Any) -> int:
    version: int = tr.get_read_version().wait()
    return version


def leases(target: Target, args: argparse.Namespace) -> Report:
    """``leases``: the items in flight, oldest claim first."""
    found = drive(queue_of(target, args).leases(target.db, args.limit))
    now = read_only(target.db, _version)
    rows = [(str(i), str(info.deliveries), f"{(info.deadline - now) / 1e6:.1f} s",
             "-" if info.claimed_at is None else f"{(now - info.claimed_at) / 1e6:.1f} s",
             cut(id_text(info.id), 40), cut(repr(info.value)), info.token.hex())
            for i, info in enumerate(found, 1)]
    data = [{"value": json_value(i.value), "id": id_json(i.id), "deliveries": i.deliveries,
             "ends_in_seconds": (i.deadline - now) / 1e6,
             "claimed_seconds_ago": None if i.claimed_at is None else (now - i.claimed_at) / 1e6,
             "token": i.token.hex()} for i in found]
    return Report({**target.header(), "leases": data},
                  listing(target.title(), rows, ("#", "deliveries", "ends in", "claimed",
                                                 "id", "value", "token"),
                          "(nothing in flight)", args.limit))


def delayed(target: Target, args: argparse.Namespace) -> Report:
    """``delayed``: the delayed items, soonest first."""
    found = drive(queue_of(target, args).delayed(target.db, args.limit))
    now = read_only(target.db, _version)
    rows = [(str(i), f"{(d.due_at - now) / 1e6:.1f} s", str(d.deliveries),
             cut(id_text(d.id), 40), cut(repr(d.value))) for i, d in enumerate(found, 1)]
    data = [{"value": json_value(d.value), "id": id_json(d.id),
             "due_in_seconds": (d.due_at - now) / 1e6, "deliveries": d.deliveries}
            for d in found]
    return Report({**target.header(), "delayed": data},
                  listing(target.title(), rows, ("#", "due in", "deliveries", "id", "value"),
                          "(nothing delayed)", args.limit))


def remove(target: Target, args: argparse.Namespace) -> Report:
    """``remove``: the pending item pushed with ``--id``."""
    value = drive(queue_of(target, args).remove(target.db, id_bytes(args.id)))
    text = ("no pending item has that id" if value is None
            else f"removed {cut(repr(value))}")
    return Report({**target.header(), "removed": value is not None,
                   "value": json_value(value)}, f"{target.title()}: {text}")


def unblock(target: Target, args: argparse.Namespace) -> Report:
    """``unblock``: move sequence ``--sequence`` on past its dead job."""
    structure = target.structure
    if not _kinds.of(structure).sequences:
        raise UsageError("unblock: sequences are a queue's or a priority-queue's")
    dead_job = structure.unblock(target.db, args.sequence)
    text = ("the sequence was not blocked: nothing changed" if dead_job is None
            else f"moved on past dead job {id_text(dead_job)}")
    return Report({**target.header(), "unblocked": dead_job is not None,
                   "dead_job": id_json(dead_job)}, f"{target.title()}: {text}")


def peek(target: Target, args: argparse.Namespace) -> Report:
    """``peek``: the next ``--limit`` visible items (a weight-tree's, with weights)."""
    structure, limit = target.structure, args.limit
    kind = _kinds.of(structure)
    if kind.weights:
        return _peek_tree(target, structure, limit)
    extra: Dict[str, Any] = {}
    title = target.title()
    end = args.end or "min"
    if kind.priorities:
        extra, title = {"end": end}, f"{title}, in pop_{end} order"
    values = drive(queue_of(target, args).items(target.db, limit, end))
    rows = [(str(i), cut(repr(v))) for i, v in enumerate(values, 1)]
    return Report({**target.header(), **extra, "items": [json_value(v) for v in values]},
                  listing(title, rows, ("#", "value"), "(no visible items)", limit))


def _peek_tree(target: Target, tree: Any, limit: int) -> Report:
    items = tree.items(target.db, limit)
    rows = [(str(i), f"{w:,}", cut(repr(v)), h.hex()) for i, (h, v, w) in enumerate(items, 1)]
    data = [{"value": json_value(v), "weight": w, "handle": h.hex()} for h, v, w in items]
    return Report({**target.header(), "items": data},
                  listing(f"{target.title()}, in point order", rows,
                          ("#", "weight", "value", "handle"), "(no items)", limit))


def dead(target: Target, args: argparse.Namespace) -> Report:
    """``dead``: the oldest ``--limit`` dead letters."""
    letters = drive(queue_of(target, args).dead(target.db, args.limit))
    rows = [(str(i), str(d.deliveries), iso_time(d.died_at), cut(id_text(d.id), 40),
             cut(repr(d.value), 40), cut(d.reason or "-", 60))
            for i, d in enumerate(letters, 1)]
    data: List[Dict[str, Any]] = [
        {"value": json_value(d.value), "id": id_json(d.id), "deliveries": d.deliveries,
         "died_at": iso_time(d.died_at), "died_at_epoch": d.died_at, "reason": d.reason,
         "token": d.token.hex()}
        for d in letters]
    return Report({**target.header(), "dead_letters": data},
                  listing(target.title(), rows, ("#", "deliveries", "died at (UTC)", "id",
                                                 "value", "reason"), "(no dead letters)",
                          args.limit))


def requeue_dead(target: Target, args: argparse.Namespace) -> Report:
    """``requeue-dead``: push up to ``--limit`` dead letters back (all by default)."""
    moved = drive(queue_of(target, args).requeue_dead(target.db, args.limit))
    return Report({**target.header(), "requeued": moved},
                  f"{target.title()}: requeued {moved:,} dead letter(s)")


def purge_dead(target: Target, args: argparse.Namespace) -> Report:
    """``purge-dead``: delete every dead letter."""
    removed = drive(queue_of(target, args).purge_dead(target.db))
    return Report({**target.header(), "purged": removed},
                  f"{target.title()}: purged {removed:,} dead letter(s)")


#: What the commands that look into one queue need (``--group`` for a fair-queue).
ONE_QUEUE = Needs(group=True)
#: ... and those that work on its leases, delays and dead letters (no weight-tree).
QUEUE_ONLY = Needs(dead_letters=True, group=True)

STATS = Operation("stats", "show a structure's counts (read only)", stats_arguments, stats)
PEEK = Operation("peek", "list the next items without removing them (read only)",
                 peek_arguments, peek, ONE_QUEUE)
DEAD = Operation("dead", "list a queue's dead letters (read only)", dead_arguments, dead,
                 QUEUE_ONLY)
REQUEUE_DEAD = Operation("requeue-dead", "push dead letters back into the queue (needs --yes)",
                         requeue_dead_arguments, requeue_dead,
                         Needs(True, True, "move dead letters back into the queue"))
PURGE_DEAD = Operation("purge-dead", "delete a queue's dead letters (needs --yes)",
                       purge_dead_arguments, purge_dead,
                       Needs(True, True, "delete dead letters for good"))
PUSH = Operation("push", "push one value onto a structure (a new queue where none is); "
                 "print its id", push_arguments, push,
                 Needs(group=True, default_kind="queue"))
LEASES = Operation("leases", "list a queue's items in flight (read only)",
                   listing_arguments("items in flight (live leases), oldest claim first: "
                                     "deliveries, when the lease ends, when it was claimed, "
                                     "value, token"), leases, QUEUE_ONLY)
DELAYED = Operation("delayed", "list a queue's delayed items (read only)",
                    listing_arguments("delayed items, soonest first"), delayed, QUEUE_ONLY)
REMOVE = Operation("remove", "remove a pending item by its idempotency id (needs --yes)",
                   remove_arguments, remove, Needs(True, True, "remove an item for good"))
UNBLOCK = Operation("unblock", "move a sequence blocked by its dead job on (needs --yes)",
                    unblock_arguments, unblock,
                    Needs(True, False, "move a blocked sequence on past its dead job"))
#: Every operator command, in the order ``fdbrecipes --help`` lists them.
OPERATIONS = (STATS, PEEK, DEAD, REQUEUE_DEAD, PURGE_DEAD, PUSH, LEASES, DELAYED, REMOVE,
              UNBLOCK)
