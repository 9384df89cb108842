"""``fdbrecipes schedules``: the schedules kept in a store (:class:`fdbrecipes.Schedules`).

Usage::

    fdbrecipes schedules list    --directory app/schedules
    fdbrecipes schedules add     --directory app/schedules nightly --cron '0 3 * * *' \\
        --tz Europe/Berlin --target-directory app/jobs --value report
    fdbrecipes schedules add     --directory app/schedules tick --every 60 \\
        --target-directory app/jobs --catch-up 3
    fdbrecipes schedules add     --directory app/schedules sync-acme --every 300 \\
        --target-directory app/jobs --limit-key per-customer acme \\
        --limits-directory app/limits
    fdbrecipes schedules pause   --directory app/schedules nightly
    fdbrecipes schedules resume  --directory app/schedules nightly
    fdbrecipes schedules run-now --directory app/schedules nightly
    fdbrecipes schedules remove  --directory app/schedules nightly --yes

The store is named as the operator commands name a structure (``--directory`` or
``--tuple``, ``--cluster-file``, ``--timeout``, ``--json``); the place must hold a
schedule store or nothing.  ``add`` names the structure its jobs go to in the same way
(``--target-directory`` or ``--target-tuple``; its kind recognised, or
``--target-kind``).  ``--limit-key NAME KEY`` gives the jobs' key under a limit of
the target (``Schedules.add(..., limit_keys=...)``), each KEY read as ``--limit-key-type``
says (as ``push`` reads VALUE); the command names the limit store the target's limits
are kept in (``--limits-directory`` or ``--limits-tuple``) and refuses a NAME it does
not define.  Workers fire the stored schedules when they carry the store
(``fdbrecipes worker ... --schedules PATH``).  Exit status as the operator commands.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Dict, List, Optional, Tuple

from .. import _kinds
from ..errors import UnknownScheduleError
from ..limits import Limits
from ..schedules import ScheduleInfo, Schedules, catch_up
from .arguments import VALUE_TYPES, parse_value, positive_int, seconds
from .commands import Report, read_only
from .output import cut, iso_time, json_value, table
from .places import (
    ANY_QUEUE,
    LIMIT_STORE,
    SCHEDULE_STORE,
    OperatorError,
    Place,
    UsageError,
    make_structure,
    open_place,
    shards_of,
    stored,
)
from .stores import At, StoreCommand, place_of, place_options, store_at

__all__ = ["SCHEDULES", "ScheduleCommand"]

#: The kinds a schedule's jobs may go to: those that keep jobs.
TARGET_KINDS = tuple(kind.name for kind in _kinds.kinds() if kind.jobs)
#: Any of them, as a sentence says it ("queue, priority-queue or fair-queue").
_ANY_TARGET = f"{', '.join(TARGET_KINDS[:-1])} or {TARGET_KINDS[-1]}"
#: What each action does, for ``--help``.
ACTIONS = {"list": "list the stored schedules: rule, target, next slot, lag, latest fire",
           "add": "add a schedule (a cron expression in a time zone, or a period)",
           "pause": "pause a schedule: none of its slots fires until resume",
           "resume": "resume a paused schedule (from its next slot on)",
           "run-now": "ask the workers for one job of a schedule now",
           "remove": "forget a schedule (needs --yes)"}


def add_options(parser: argparse.ArgumentParser) -> None:
    """``add``'s options."""
    parser.add_argument("name", help="the schedule's name")
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="EXPRESSION", help="a cron expression: 5 fields, "
                      "6 with seconds first, or a nickname such as @daily (needs the extra "
                      "fdbrecipes[cron])")
    when.add_argument("--every", type=seconds, metavar="SECONDS",
                      help="a period: slots at its multiples since the epoch")
    parser.add_argument("--tz", help="the IANA time zone of --cron (default UTC)")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--target-directory", metavar="PATH",
                        help="the structure its jobs go to (it must exist)")
    target.add_argument("--target-tuple", metavar="LITERAL",
                        help="the structure its jobs go to, as a subspace tuple")
    parser.add_argument("--target-kind", choices=TARGET_KINDS,
                        help="its kind (default: recognised; an empty place is a queue)")
    parser.add_argument("--value", default="", help="the jobs' value (default empty)")
    parser.add_argument("--type", choices=VALUE_TYPES, default="str",
                        help="how --value is read (as 'fdbrecipes push' reads VALUE)")
    parser.add_argument("--priority", type=int, help="priority-queue: the jobs' priority")
    parser.add_argument("--group", help="fair-queue: the jobs' group")
    parser.add_argument("--catch-up", type=positive_int, metavar="N",
                        help="after a downtime fire the latest N missed slots (default: "
                        "skip them)")
    parser.add_argument("--grace", type=seconds, default=60.0, metavar="SECONDS",
                        help="a slot fired this late is still on time (default 60)")
    parser.add_argument("--jitter", type=float, default=0.0, metavar="SECONDS",
                        help="delay each job by up to SECONDS (default 0)")
    parser.add_argument("--paused", action="store_true", help="add it paused")
    parser.add_argument("--limit-key", nargs=2, action="append", metavar=("NAME", "KEY"),
                        help="the jobs' key under the target's limit NAME (repeat for each "
                        "limit; needs --limits-directory or --limits-tuple)")
    parser.add_argument("--limit-key-type", choices=VALUE_TYPES, default="str",
                        help="how each KEY is read (as --type reads --value; default str)")
    store = parser.add_mutually_exclusive_group()
    store.add_argument("--limits-directory", metavar="PATH",
                       help="the limit store the target's limits are kept in (it must define "
                       "each NAME of --limit-key)")
    store.add_argument("--limits-tuple", metavar="LITERAL",
                       help="the limit store, as a subspace tuple")


def arguments(parser: argparse.ArgumentParser) -> None:
    """``schedules``' actions and their options."""
    parser.description = ("The schedules kept in a store: list them, add one, pause, "
                          "resume, run one now, remove one.  Workers carrying the store "
                          "fire them.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, what in ACTIONS.items():
        sub = actions.add_parser(action, help=what, description=what[0].upper() + what[1:])
        place_options(sub)
        if action == "list":
            sub.add_argument("--limit", type=positive_int, metavar="N",
                             help="list at most N (default all)")
        elif action == "add":
            add_options(sub)
        else:
            sub.add_argument("name", help="the schedule's name")
        if action == "remove":
            sub.add_argument("--yes", action="store_true", help="really remove it")


def limit_keys_of(args: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """``add``'s ``--limit-key`` pairs as ``limit_keys`` (None: none given), each KEY
    read as ``--limit-key-type`` says (checked before connecting).

    Raises:
        UsageError: a KEY not of that type, a NAME given twice, a limit store named
            without ``--limit-key`` or ``--limit-key`` without one.
    """
    store_named = args.limits_directory is not None or args.limits_tuple is not None
    if not args.limit_key:
        if store_named:
            raise UsageError("--limits-directory and --limits-tuple go with --limit-key")
        return None
    if not store_named:
        raise UsageError("--limit-key needs the limit store the target's limits are kept in "
                         "(--limits-directory or --limits-tuple)")
    keys: Dict[str, Any] = {}
    for name, text in args.limit_key:
        if name in keys:
            raise UsageError(f"--limit-key names {name!r} twice")
        keys[name] = parse_value(text, args.limit_key_type, f"--limit-key {name} KEY")
    return keys


def limit_uses(tr: Any, place: Place, names: List[str]) -> List[Any]:
    """The uses of the limits ``names`` of the limit store at ``place`` (a use of
    each, global: a schedule's jobs are given their keys), each a limit it defines.

    Raises:
        OperatorError: no limit store there, or it defines no limit of a name.
    """
    limits = Limits(store_at(tr, place, LIMIT_STORE))
    defined = limits.list(tr)
    unknown = [name for name in names if name not in defined]
    if unknown:
        raise OperatorError(f"the limit store at {place} defines no limit named "
                            f"{', '.join(map(repr, unknown))} (its limits: "
                            f"{', '.join(map(repr, sorted(defined))) or 'none'})")
    return [limits.use(name) for name in names]


def _target_at(tr: Any, place: Place, kind: Optional[str],
               limit_names: Optional[Tuple[Place, List[str]]] = None) -> Any:
    uses = None if limit_names is None else limit_uses(tr, *limit_names)
    subspace = open_place(tr, place)
    seen, wrong = stored(tr, subspace)
    if wrong is not None:
        raise OperatorError(f"no structure at {place}: found {wrong}")
    if seen in (None, ANY_QUEUE):  # nothing there yet, or a queue of either kind
        seen = kind or "queue"
    if seen not in TARGET_KINDS or (kind is not None and kind != seen):
        raise OperatorError(f"the target at {place} is a {seen}, not a "
                            f"{kind or _ANY_TARGET}")
    return make_structure(seen, subspace, None, shards=shards_of(tr, subspace), limits=uses)


def shown(info: ScheduleInfo, now: float) -> List[str]:
    """A schedule's row."""
    rule = f"{info.cron} {info.tz}" if info.cron is not None else f"every {info.every:g} s"
    last = info.fires[-1] if info.fires else None
    return [info.name, cut(rule, 40), info.target.hex(),
            "paused" if info.paused_at is not None else "-",
            "-" if info.next_at is None else iso_time(info.next_at),
            f"{info.lag:.1f} s", "-" if last is None else iso_time(last.fired_at),
            str(info.requested)]


def as_json(info: ScheduleInfo) -> Dict[str, Any]:
    """A schedule as JSON."""
    data = info._asdict()
    data.update(target=info.target.hex(), value=json_value(info.value),
                misfire=str(info.misfire),
                where={k: json_value(v) for k, v in info.where.items()},
                limit_keys={k: json_value(v) for k, v in info.limit_keys.items()},
                fires=[{"slot": f.slot, "fired_at": f.fired_at, "job_id": f.job_id.hex(),
                        "how": f.how} for f in info.fires])
    return data


class ScheduleCommand(StoreCommand[Schedules]):
    """``fdbrecipes schedules``: a row of the command line (see the module docstring).
    The library's refusals (an invalid expression, an unknown zone, a name taken, an
    unknown name) are the operator's errors."""

    name = "schedules"
    help = "list, add, pause, resume, run now or remove the schedules kept in a store"
    what = SCHEDULE_STORE
    noun = "schedules"
    confirm = ("remove", "remove a schedule")
    refused = (TypeError, ValueError, ImportError, UnknownScheduleError)

    def arguments(self, parser: argparse.ArgumentParser) -> None:
        arguments(parser)

    def check(self, args: argparse.Namespace) -> Any:
        """``add``'s limit keys, read (see :func:`limit_keys_of`)."""
        return limit_keys_of(args) if args.action == "add" else None

    def opened(self, db: Any, subspace: Any, args: argparse.Namespace,
               checked: Any) -> Schedules:
        return Schedules(subspace)

    def acted(self, at: At, store: Schedules, args: argparse.Namespace,
              checked: Any) -> Report:
        """What the action does to ``store``: its report."""
        db, title, head = at.db, at.title, at.head
        if args.action == "list":
            found = store.list(db, args.limit)
            now = time.time()
            rows = [shown(info, now) for info in found]
            text = table(rows, ("name", "rule", "target", "paused", "next (UTC)", "lag",
                                "last fired (UTC)", "asked")) if rows else "(no schedules)"
            return Report({**head, "schedules": [as_json(i) for i in found]},
                          f"{title}\n{text}")
        if args.action == "add":
            return self.add(at, store, args, checked)
        if args.action in ("pause", "resume"):
            changed = (store.pause if args.action == "pause" else store.resume)(db, args.name)
            said = {("pause", True): "paused", ("pause", False): "already paused",
                    ("resume", True): "resumed", ("resume", False): "was not paused"}
            return Report({**head, "name": args.name, "changed": changed},
                          f"{title}: {args.name}: {said[(args.action, changed)]}")
        if args.action == "run-now":
            id_ = store.run_now(db, args.name)
            return Report({**head, "name": args.name, "job_id": id_.hex()},
                          f"{title}: {args.name}: asked the workers for a job now "
                          f"(id {id_.hex()})")
        removed = store.remove(db, args.name)
        return Report({**head, "name": args.name, "removed": removed},
                      f"{title}: {args.name}: {'removed' if removed else 'no such schedule'}")

    @staticmethod
    def add(at: At, store: Schedules, args: argparse.Namespace,
            limit_keys: Optional[Dict[str, Any]]) -> Report:
        """``add`` (``limit_keys``: read by :func:`limit_keys_of`)."""
        db = at.db
        target_place = place_of(args.target_directory, args.target_tuple)
        limit_names = None if limit_keys is None else (
            place_of(args.limits_directory, args.limits_tuple), list(limit_keys))
        target = read_only(db, _target_at, target_place, args.target_kind, limit_names)
        store.add(db, args.name, target=target, cron=args.cron, tz=args.tz, every=args.every,
                  value=parse_value(args.value, args.type), priority=args.priority,
                  group=args.group, misfire=catch_up(args.catch_up) if args.catch_up else "skip",
                  grace=args.grace, jitter=args.jitter, paused=args.paused,
                  limit_keys=limit_keys)
        info = store.get(db, args.name)
        assert info is not None
        return Report({**at.head, "schedule": as_json(info)},
                      f"{at.title}: added {args.name} ({shown(info, time.time())[1]} into "
                      f"{target_place})")


#: The command's row.
SCHEDULES = ScheduleCommand()
