"""The operator commands' options, and the checks made on them before connecting.

Everything here is decided by the command line alone: a bad ``--tuple``, dead letters
asked of a weight-tree or a missing ``--yes`` are usage errors (exit status 2) found
before ``libfdb_c`` is loaded or a cluster contacted.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, NoReturn, Optional

import fdb.tuple

from .. import _kinds
from .._values import MAX_ID_BYTES, encode_value
from .output import cut
from .places import Place, UsageError

__all__ = ["DEAD_LIMIT", "DEFAULT_TIMEOUT", "KINDS", "MAX_NESTING", "PEEK_LIMIT", "Needs",
           "check_inputs", "check_kind", "check_usage", "dead_arguments", "finished_arguments",
           "id_bytes", "parse_directory", "parse_tuple", "parse_value", "peek_arguments",
           "purge_dead_arguments", "requeue_dead_arguments", "stats_arguments"]

#: The kinds ``--kind`` names (see :mod:`fdbrecipes._kinds`).
KINDS = _kinds.names()
#: How ``push`` reads its VALUE.
VALUE_TYPES = ("str", "bytes", "int", "float", "json")
#: Seconds a transaction may take before it is cancelled (``--timeout``).
DEFAULT_TIMEOUT = 10.0
#: Items ``peek`` lists, and dead letters ``dead`` lists, unless ``--limit`` says.
PEEK_LIMIT, DEAD_LIMIT = 10, 100
#: Tuples nested in one another a value ``push`` reads may hold at most (a JSON
#: array is a tuple): far more than anyone types, far less than would make showing
#: or encoding the value recurse past Python's limit.
MAX_NESTING = 32
#: Characters of a refused argument an error line repeats.
ECHO_WIDTH = 60

EPILOG = ("The structure is --directory PATH (a directory-layer path, which must exist; "
          "push and worker make it) or --tuple LITERAL (a Python tuple literal naming the "
          "subspace), with --kind (and, for a fair-queue, --group GROUP).  "
          "Values are shown with repr(); see --json.  Exit status: 0 done, 1 failed, 2 "
          "usage error; errors are one line on stderr.")


def positive_int(text: str) -> int:
    """argparse type: an int >= 1."""
    return int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an int >= 0."""
    return int_at_least(text, 0)


def int_at_least(text: str, low: int) -> int:
    """``text`` as an int >= ``low``, for argparse."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    return value


def seconds(text: str) -> float:
    """argparse type: seconds, more than 0 and at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 86_400:
        raise argparse.ArgumentTypeError(f"must be > 0 and <= 86400 seconds, got {text}")
    return value


def place_arguments(parser: argparse.ArgumentParser, description: str,
                    required: bool = True) -> None:
    """The options every operator command takes, and its ``--help`` texts
    (``required``: the structure must be named; ``worker`` of an app names none)."""
    parser.description = description
    parser.epilog = EPILOG
    where = parser.add_argument_group("the structure")
    one = where.add_mutually_exclusive_group(required=required)
    one.add_argument("--directory", metavar="PATH",
                     help="directory-layer path, components separated by '/' (e.g. "
                     "app/jobs); it must exist, but push and worker make it")
    one.add_argument("--tuple", metavar="LITERAL", dest="tuple_literal",
                     help="Python tuple literal naming the subspace, e.g. '(\"jobs\",)'")
    where.add_argument("--kind", choices=KINDS, help="what is stored there (default: "
                       "recognised from the keys found there)")
    where.add_argument("--group", metavar="GROUP",
                       help="fair-queue: the group (its queue) to look into or change")
    where.add_argument("--max-deliveries", type=positive_int, metavar="N",
                       help="queue kinds: the application's max_deliveries (a lease that "
                       "expired on a last delivery then counts as dead)")
    cluster = parser.add_argument_group("the cluster and the output")
    cluster.add_argument("--cluster-file", metavar="PATH",
                         help="cluster file (default: $FDB_CLUSTER_FILE, else the "
                         "platform's default); no server is ever started")
    cluster.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT,
                         metavar="SECONDS", help="cancel any transaction taking longer "
                         f"(default {DEFAULT_TIMEOUT:g})")
    cluster.add_argument("--json", action="store_true",
                         help="print one JSON object (values encoded as documented in "
                         "fdbrecipes.admin) instead of a table")


def stats_arguments(parser: argparse.ArgumentParser) -> None:
    """``stats``' options."""
    place_arguments(parser, "Show where a structure's items are: for queue kinds the "
                    "size and how many are visible, delayed, in flight and dead, and the "
                    "age of the front item; for a weight-tree the size and total weight.  "
                    "Reads only.")
    watch_arguments(parser)


def watch_arguments(parser: argparse.ArgumentParser) -> None:
    """``stats``' ``--watch``."""
    parser.add_argument("--watch", type=seconds, metavar="SECONDS",
                        help="print the counts again every SECONDS, until Ctrl-C")


def push_arguments(parser: argparse.ArgumentParser) -> None:
    """``push``'s options."""
    place_arguments(parser, "Push one value onto a structure and print its id (a "
                    "weight-tree's: the item's handle).  A place where nothing is stored "
                    "yet is a new queue (--kind says another kind), and a missing "
                    "--directory is made.  Writes.")
    parser.add_argument("value", help="the value (a str, unless --type says otherwise)")
    parser.add_argument("--type", choices=VALUE_TYPES, default="str",
                        help="how VALUE is read: str (default), bytes (its bytes as given), "
                        "int, float, or json (a JSON value other than null; arrays become "
                        f"tuples, nested at most {MAX_NESTING} deep)")
    parser.add_argument("--id", help="the job's id, also an idempotency id (its bytes as "
                        "given): pushed once")
    parser.add_argument("--history", type=seconds, metavar="SECONDS",
                        help="queue kinds: write the job's record, kept SECONDS after it "
                        "ends (the structure's history=, as 'worker --history' gives it), "
                        "and make an id for it when --id is not given")
    parser.add_argument("--delay", type=seconds, metavar="SECONDS",
                        help="queue kinds: visible after SECONDS")
    parser.add_argument("--priority", type=int, help="priority-queue: the priority (default 0)")
    parser.add_argument("--weight", type=positive_int, help="weight-tree: the weight (default 1)")


def listing_arguments(what: str) -> Callable[[argparse.ArgumentParser], None]:
    """``leases``' or ``delayed``'s options."""
    def add(parser: argparse.ArgumentParser) -> None:
        place_arguments(parser, f"List a queue's {what}.  Reads only.")
        parser.add_argument("--limit", type=positive_int, default=DEAD_LIMIT, metavar="N",
                            help=f"at most N (default {DEAD_LIMIT})")
    return add


def remove_arguments(parser: argparse.ArgumentParser) -> None:
    """``remove``'s options."""
    place_arguments(parser, "Remove the pending (visible or delayed) item pushed with an "
                    "idempotency id.  Writes: refuses to run without --yes.")
    parser.add_argument("--id", required=True, help="the item's idempotency id (its bytes "
                        "as given)")
    parser.add_argument("--yes", action="store_true", help="really remove it")


def unblock_arguments(parser: argparse.ArgumentParser) -> None:
    """``unblock``'s options."""
    place_arguments(parser, "Move a sequence blocked by its dead job on to its next job "
                    "(the dead letter stays; requeue-dead would run it again instead).  "
                    "Writes: refuses to run without --yes.")
    parser.add_argument("--sequence", required=True, help="the sequence key (text, as "
                        "given to push(sequence=...))")
    parser.add_argument("--yes", action="store_true", help="really move it on")


def parse_value(text: str, kind: str, what: str = "VALUE") -> Any:
    """``push``'s VALUE as ``--type`` says, checked as the structures check a value
    (encodable, at most 100,000 bytes encoded); ``what``: the argument's name in the
    errors (a schedule's ``--limit-key`` KEY is read so too).

    Raises:
        UsageError: the text is not of that type, or not a value a structure stores.
    """
    shown = cut(repr(text), ECHO_WIDTH)
    try:
        if kind == "bytes":
            value: Any = os.fsencode(text)
        elif kind == "int":
            value = int(text)
        elif kind == "float":
            value = float(text)
        elif kind == "json":
            value = tuples(json.loads(text, parse_constant=_not_json), 0)
        else:
            value = utf8_text(text, what, " (--type bytes takes any bytes)")
    except RecursionError:
        raise UsageError(f"{what} {shown} nests deeper than {MAX_NESTING}") from None
    except ValueError as e:
        raise UsageError(f"{what} {shown} is not {kind}: {e}") from None
    try:
        encode_value(value, what)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    return value


def _not_json(constant: str) -> NoReturn:
    """``json.loads``' hook for NaN and the infinities, which JSON has not."""
    raise ValueError(f"{constant} is not JSON (--type float reads it)")


def tuples(value: Any, depth: int) -> Any:
    """A JSON value (``depth`` arrays deep) with its arrays as tuples (what the
    structures store).

    Raises:
        UsageError: an object, a number too large to be a float, or arrays nested
            more than :data:`MAX_NESTING` deep.
    """
    if isinstance(value, list):
        if depth == MAX_NESTING:
            raise UsageError(f"VALUE nests deeper than {MAX_NESTING} arrays")
        return tuple(tuples(v, depth + 1) for v in value)
    if isinstance(value, dict):
        raise UsageError("a JSON object is not a value; give an array (a tuple)")
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError("VALUE holds a number too large for a float")
    return value


def id_bytes(text: str, name: str = "--id") -> bytes:
    """A job's id as given on the command line: its bytes (``os.fsencode``, so an id
    that is not UTF-8 is the bytes the shell passed), 1 to 1,000 of them.

    Raises:
        UsageError: it is empty or longer, or not text of this system's encoding.
    """
    try:
        data = os.fsencode(text)
    except UnicodeEncodeError:
        raise UsageError(f"{name} {cut(repr(text), ECHO_WIDTH)} is not text of this "
                         "system's encoding") from None
    if not 0 < len(data) <= MAX_ID_BYTES:
        raise UsageError(f"{name} must be 1 to {MAX_ID_BYTES:,} bytes, got {len(data):,}")
    return data


def utf8_text(text: str, name: str, hint: str = "") -> str:
    """``text``, which the structures store as UTF-8 (a value, a group's name, a
    worker's).

    Raises:
        UsageError: it is not UTF-8 (the shell passed bytes that are not); the line
            ends with ``hint``.
    """
    try:
        text.encode()
    except UnicodeEncodeError:
        raise UsageError(f"{name} {cut(repr(text), ECHO_WIDTH)} is not UTF-8 text{hint}"
                         ) from None
    return text


def peek_arguments(parser: argparse.ArgumentParser) -> None:
    """``peek``'s options."""
    place_arguments(parser, "List the next visible items without removing them (for a "
                    "weight-tree: its items with their weights and handles, in point "
                    "order).  Reads only.")
    parser.add_argument("--limit", type=positive_int, default=PEEK_LIMIT, metavar="N",
                        help=f"items to list (default {PEEK_LIMIT})")
    parser.add_argument("--end", choices=("min", "max"),
                        help="priority-queue: list in pop_min order (default) or in "
                        "pop_max order")


def dead_arguments(parser: argparse.ArgumentParser) -> None:
    """``dead``'s options."""
    place_arguments(parser, "List the dead letters of a queue or priority-queue, oldest "
                    "first: value, deliveries, when it died.  Reads only.")
    parser.add_argument("--limit", type=positive_int, default=DEAD_LIMIT, metavar="N",
                        help=f"dead letters to list (default {DEAD_LIMIT})")


def finished_arguments(parser: argparse.ArgumentParser) -> None:
    """``finished``' options."""
    place_arguments(parser, "List the finished jobs whose records are kept (a structure "
                    "made with history: 'worker --history', 'push --history'), the latest "
                    "to be pruned first: id, state, attempts, when it finished, its last "
                    "error (a fair-queue's: every group's).  Reads only.")
    parser.add_argument("--limit", type=positive_int, default=DEAD_LIMIT, metavar="N",
                        help=f"jobs to list (default {DEAD_LIMIT})")


def requeue_dead_arguments(parser: argparse.ArgumentParser) -> None:
    """``requeue-dead``'s options."""
    place_arguments(parser, "Push dead letters back at the tail, oldest first, delivery "
                    "count reset.  Writes: refuses to run without --yes.")
    parser.add_argument("--limit", type=positive_int, metavar="N",
                        help="requeue at most N (default: all)")
    parser.add_argument("--yes", action="store_true", help="really requeue them")


def purge_dead_arguments(parser: argparse.ArgumentParser) -> None:
    """``purge-dead``'s options."""
    place_arguments(parser, "Delete every dead letter for good.  Writes: refuses to run "
                    "without --yes.")
    parser.add_argument("--yes", action="store_true", help="really delete them")


def parse_directory(text: str) -> Place:
    """``--directory``: "app/jobs" (a leading or trailing "/" is ignored)."""
    parts = tuple(utf8_text(text, "--directory").strip("/").split("/"))
    if not text.strip("/") or "" in parts:
        raise UsageError(f"--directory {cut(repr(text), ECHO_WIDTH)}: give a path like "
                         "app/jobs (non-empty components separated by '/')")
    return Place(directory=parts)


def parse_tuple(text: str) -> Place:
    """``--tuple``: a Python literal that is a tuple the tuple layer can encode."""
    shown = cut(repr(text), ECHO_WIDTH)
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise UsageError(f"--tuple {shown} is not a Python literal; write a tuple such "
                         "as '(\"jobs\",)'") from None
    if type(value) is not tuple:
        raise UsageError(f"--tuple {shown} is a {type(value).__name__}, not a tuple: write "
                         "e.g. '(\"jobs\",)' (a one-element tuple needs its comma)")
    try:
        fdb.tuple.pack(value)
    except Exception as e:
        raise UsageError(f"--tuple {shown} cannot be tuple-encoded ({e})") from None
    return Place(prefix=value)


@dataclass(frozen=True)
class Needs:
    """What a command needs of the structure it names.

    Attributes:
        dead_letters: it works on leases, delays or dead letters (queue kinds only).
        group: it works on one queue (for a fair-queue: ``--group``, required).
        confirm: for a command that writes, what ``--yes`` confirms (the refusal to
            run without it names it).
        default_kind: the kind of an empty place, where nothing tells it (the worker
            and ``push`` start a new queue: "queue"), and a missing ``--directory`` is
            made for it; None: ``--kind`` is needed there, and the directory must exist.
        any_queue: it reads and writes only what every queue kind keeps under the same
            keys (its workers' records): where the keys do not tell the kind (a new
            queue that only a worker serves yet), it takes the place as a queue; the
            directory must exist.
        stores: it also works on a schedule store (``metrics``: the schedules' lag).
    """

    dead_letters: bool = False
    group: bool = False
    confirm: Optional[str] = None
    default_kind: Optional[str] = None
    stores: bool = False
    any_queue: bool = False


def check_usage(args: argparse.Namespace, needs: Needs) -> Place:
    """The place ``args`` name, once every check of the command line alone passed.

    Raises:
        UsageError: the first check that failed.
    """
    if args.directory is not None:
        place = parse_directory(args.directory)
    else:
        place = parse_tuple(args.tuple_literal)
    check_kind(args, needs)
    check_inputs(args)
    if needs.confirm and not args.yes:
        raise UsageError(f"refusing to {needs.confirm} without --yes")
    return place


#: The options whose text the structures store as UTF-8: a fair-queue's group, the
#: worker a command is for, a worker's name.
TEXT_OPTIONS = ("group", "quiet", "stop", "name")


def check_inputs(args: argparse.Namespace) -> None:
    """The checks of what a command would store or look up: the text options
    (:data:`TEXT_OPTIONS`) are UTF-8, a job's id fits (:func:`id_bytes`), and
    ``push``'s VALUE is a value (:func:`parse_value`).

    Raises:
        UsageError: the first check that failed.
    """
    for option in TEXT_OPTIONS:
        text = getattr(args, option, None)
        if isinstance(text, str):
            utf8_text(text, f"--{option}")
    if getattr(args, "id", None) is not None:
        id_bytes(args.id, "--id" if args.command in ("push", "remove") else "ID")
    if getattr(args, "value", None) is not None:
        parse_value(args.value, args.type)


def check_kind(args: argparse.Namespace, needs: Needs) -> None:
    """The checks that need ``--kind`` (made again once a kind was recognised).

    Raises:
        UsageError: the first check that failed.
    """
    if args.kind is None:
        return
    kind = _kinds.kind_named(args.kind)
    if not kind.jobs:
        if needs.dead_letters:
            raise UsageError("a weight-tree has no leases, delays or dead letters (queue, "
                             "priority-queue and fair-queue have)")
        if args.max_deliveries is not None:
            raise UsageError("--max-deliveries applies to queue kinds only")
    if getattr(args, "end", None) is not None and not kind.priorities:
        raise UsageError("--end applies to --kind priority-queue only")
    if args.group is not None and not kind.groups:
        raise UsageError("--group applies to --kind fair-queue only")
    if needs.group and kind.groups and args.group is None:
        raise UsageError("a fair-queue keeps a queue per group: give --group GROUP")
