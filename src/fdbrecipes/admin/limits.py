"""``fdbrecipes limits``: the limits kept in a store (:class:`fdbrecipes.Limits`).

Usage::

    fdbrecipes limits list   --directory app/limits
    fdbrecipes limits set    --directory app/limits per-user --concurrency 2
    fdbrecipes limits set    --directory app/limits api --rate 100 --per 60
    fdbrecipes limits state  --directory app/limits per-user --key "'alice'"
    fdbrecipes limits delete --directory app/limits per-user --yes

The store is named as ``fdbrecipes schedules`` names one (``--directory`` or
``--tuple``, ``--cluster-file``, ``--timeout``, ``--json``); the place must hold a
limit store or nothing.  A change takes effect at the next claim of every structure
using the limit.  Exit status as the operator commands.
"""

from __future__ import annotations

import argparse
import ast
from typing import Any, Dict, List

from ..limits import Limit, Limits, LimitState, concurrency, rate
from .arguments import positive_int, seconds
from .commands import Report
from .output import table
from .places import LIMIT_STORE, OperatorError, UsageError
from .stores import At, StoreCommand, place_options

__all__ = ["LIMITS", "LimitCommand"]

#: What each action does, for ``--help``.
ACTIONS = {"list": "list the limits defined in the store",
           "set": "define a limit, or change it (from the next claim on)",
           "state": "what one key of a limit holds now: running, started, parked",
           "delete": "forget a limit (needs --yes)"}


def parse_key(literal: str) -> Any:
    """A ``--key`` literal (a Python literal: a str in quotes, an int, bytes, a tuple).

    Raises:
        UsageError: not a literal.
    """
    try:
        return ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        raise UsageError("--key must be a Python literal, such as 'alice' in quotes, "
                         "42 or ('a', 1)") from None


def arguments(parser: argparse.ArgumentParser) -> None:
    """``limits``' actions and their options."""
    parser.description = ("The limits kept in a store: list them, set one, read one "
                          "key's state, delete one.  Structures given uses of the store "
                          "check them at every claim.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, what in ACTIONS.items():
        sub = actions.add_parser(action, help=what, description=what[0].upper() + what[1:])
        place_options(sub)
        if action == "list":
            continue
        sub.add_argument("name", help="the limit's name")
        if action == "set":
            kind = sub.add_mutually_exclusive_group(required=True)
            kind.add_argument("--concurrency", type=positive_int, metavar="N",
                              help="at most N jobs running at once")
            kind.add_argument("--rate", type=positive_int, metavar="N",
                              help="at most N starts (by cost) in any window of --per")
            sub.add_argument("--per", type=seconds, metavar="SECONDS",
                             help="the rate's window, in seconds")
        elif action == "state":
            sub.add_argument("--key", metavar="LITERAL",
                             help="the key, as a Python literal (default: the global key)")
        else:
            sub.add_argument("--yes", action="store_true", help="really delete it")


def as_json(name: str, limit: Limit) -> Dict[str, Any]:
    """A limit as JSON."""
    return {"name": name, "kind": limit.kind, "n": limit.n, "per_seconds": limit.per_seconds}


def state_json(state: LimitState) -> Dict[str, Any]:
    """A key's state as JSON."""
    return {"limit": str(state.limit), "key": repr(state.key), "running": state.running,
            "started": state.started, "parked": state.parked}


class LimitCommand(StoreCommand[Limits]):
    """``fdbrecipes limits``: a row of the command line (see the module docstring).
    The library's refusals (a bad number, a zero window, an unknown name) are the
    operator's errors."""

    name = "limits"
    help = "list, set, read or delete the limits kept in a store"
    what = LIMIT_STORE
    noun = "limits"
    confirm = ("delete", "delete a limit")

    def arguments(self, parser: argparse.ArgumentParser) -> None:
        arguments(parser)

    def check(self, args: argparse.Namespace) -> Any:
        """``set``'s ``--rate`` and ``--per`` go together; ``state``'s ``--key``: the
        key (None: the global key).

        Raises:
            UsageError: one without the other; a key that is not a literal.
        """
        if args.action == "set" and (args.rate is None) != (args.per is None):
            raise UsageError("--rate needs --per SECONDS (and --per needs --rate)")
        return parse_key(args.key) if getattr(args, "key", None) is not None else None

    def opened(self, db: Any, subspace: Any, args: argparse.Namespace,
               checked: Any) -> Limits:
        return Limits(subspace)

    def acted(self, at: At, store: Limits, args: argparse.Namespace, key: Any) -> Report:
        """What the action does to ``store`` (``key``: ``state``'s): its report."""
        db, title, head = at.db, at.title, at.head
        if args.action == "list":
            found = store.list(db)
            rows: List[List[str]] = [[name, str(limit)] for name, limit in found.items()]
            text = table(rows, ("name", "limit")) if rows else "(no limits)"
            return Report({**head, "limits": [as_json(n, lim) for n, lim in found.items()]},
                          f"{title}\n{text}")
        if args.action == "set":
            limit = concurrency(args.concurrency) if args.concurrency is not None else rate(
                args.rate, args.per)
            old = store.set(db, args.name, limit)
            was = "new" if old is None else f"was {old}"
            return Report({**head, **as_json(args.name, limit),
                           "replaced": None if old is None else str(old)},
                          f"{title}: {args.name} = {limit} ({was})")
        if args.action == "state":
            state = store.state(db, args.name, key)
            if state is None:
                raise OperatorError(f"no limit is named {args.name!r}")
            return Report({**head, "name": args.name, **state_json(state)},
                          f"{title}: {args.name} {state.limit}, key {key!r}: "
                          f"{state.running} running, {state.started} started in the "
                          f"window, {state.parked} parked")
        old = store.delete(db, args.name)
        return Report({**head, "name": args.name, "deleted": str(old)},
                      f"{title}: {args.name}: deleted (was {old})")


#: The command's row.
LIMITS = LimitCommand()
