"""The ``fdbrecipes`` command: argument parsing and dispatch.

Each subcommand is a function ``name(args) -> exit status``, listed in :data:`COMMANDS`
with its one-line help and, if it takes options, a function adding them to its parser.
To add a subcommand, write those functions and add a :class:`Command` row.  The
machinery behind a command is imported when the command runs (or, for its options,
when the parser is built), so ``fdbrecipes --help`` needs no ``libfdb_c``.

This is an application, so unlike the library it selects the FDB API version (through
:mod:`fdbrecipes._cluster`, shared with the benchmark and the pytest plugin).

The operator commands (``stats``, ``peek``, ``dead``, ``requeue-dead``, ``purge-dead``)
act on a structure of a real cluster, named by ``--directory`` or ``--tuple`` and
``--kind``; their machinery, options and output formats are :mod:`fdbrecipes.admin`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Callable, List, Optional

from . import __version__
from ._cluster import INSTALL_HINT, with_cluster

__all__ = ["COMMANDS", "Command", "main"]


def no_options(parser: argparse.ArgumentParser) -> None:
    """For a command without options: add none."""


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, its help line, what runs it, and its options."""

    name: str
    help: str
    run: Callable[[argparse.Namespace], int]
    options: Callable[[argparse.ArgumentParser], None] = no_options


# -- the commands ------------------------------------------------------------------------


def demo(args: argparse.Namespace) -> int:
    """``fdbrecipes demo``: the demo on FDB_CLUSTER_FILE or a throwaway local fdbserver."""
    from . import _demo

    return with_cluster("demo", _demo.run)


def bench_options(parser: argparse.ArgumentParser) -> None:
    """``fdbrecipes bench``'s options: the benchmark's."""
    from .bench import add_arguments

    add_arguments(parser)


def bench(args: argparse.Namespace) -> int:
    """``fdbrecipes bench``: the benchmark suite (table, targets, PNG chart, JSON)."""
    from .bench import run_bench

    return run_bench(args)


def stats_options(parser: argparse.ArgumentParser) -> None:
    """``fdbrecipes stats``'s options: the structure, the cluster, ``--json``."""
    from . import admin

    admin.stats_arguments(parser)


def stats(args: argparse.Namespace) -> int:
    """``fdbrecipes stats``: where a structure's items are (read only)."""
    from . import admin

    return admin.run(args, admin.STATS)


def peek_options(parser: argparse.ArgumentParser) -> None:
    """``fdbrecipes peek``'s options: those of stats, ``--limit``, ``--end``."""
    from . import admin

    admin.peek_arguments(parser)


def peek(args: argparse.Namespace) -> int:
    """``fdbrecipes peek``: the next visible items, not removed (read only)."""
    from . import admin

    return admin.run(args, admin.PEEK)


def dead_options(parser: argparse.ArgumentParser) -> None:
    """``fdbrecipes dead``'s options: those of stats, ``--limit``."""
    from . import admin

    admin.dead_arguments(parser)


def dead(args: argparse.Namespace) -> int:
    """``fdbrecipes dead``: a queue's dead letters (read only)."""
    from . import admin

    return admin.run(args, admin.DEAD)


def requeue_dead_options(parser: argparse.ArgumentParser) -> None:
    """``fdbrecipes requeue-dead``'s options: those of stats, ``--limit``, ``--yes``."""
    from . import admin

    admin.requeue_dead_arguments(parser)


def requeue_dead(args: argparse.Namespace) -> int:
    """``fdbrecipes requeue-dead``: dead letters back into the queue (needs --yes)."""
    from . import admin

    return admin.run(args, admin.REQUEUE_DEAD)


def purge_dead_options(parser: argparse.ArgumentParser) -> None:
    """``fdbrecipes purge-dead``'s options: those of stats, ``--yes``."""
    from . import admin

    admin.purge_dead_arguments(parser)


def purge_dead(args: argparse.Namespace) -> int:
    """``fdbrecipes purge-dead``: delete a queue's dead letters (needs --yes)."""
    from . import admin

    return admin.run(args, admin.PURGE_DEAD)


#: Every subcommand, in the order ``--help`` lists them.
COMMANDS = (
    Command("demo", "push and pop through every structure", demo),
    Command("bench", "run the benchmark suite (table + PNG chart)", bench, bench_options),
    Command("stats", "show a structure's counts (read only)", stats, stats_options),
    Command("peek", "list the next items without removing them (read only)", peek,
            peek_options),
    Command("dead", "list a queue's dead letters (read only)", dead, dead_options),
    Command("requeue-dead", "push dead letters back into the queue (needs --yes)",
            requeue_dead, requeue_dead_options),
    Command("purge-dead", "delete a queue's dead letters (needs --yes)", purge_dead,
            purge_dead_options),
)

#: What ``fdbrecipes --help`` says after the list of commands.
EPILOG = (
    "Operator commands (stats, peek, dead, requeue-dead, purge-dead) act on a structure of "
    "a running cluster (--cluster-file, default $FDB_CLUSTER_FILE; no server is started), "
    "named by --directory PATH or --tuple LITERAL and --kind queue|priority-queue|"
    "weight-tree, e.g. 'fdbrecipes stats --directory app/jobs --kind queue'.  "
    "'fdbrecipes <command> --help' tells more."
)


# -- parsing and dispatch ----------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``fdbrecipes`` parser, with a subparser per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="fdbrecipes",
        description="Transactional Queue, PriorityQueue and WeightTree on FoundationDB. "
        f"Needs a FoundationDB cluster: FDB_CLUSTER_FILE, or {INSTALL_HINT}.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"fdbrecipes {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        subparser = subparsers.add_parser(command.name, help=command.help)
        command.options(subparser)
        subparser.set_defaults(run=command.run)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Parse ``argv`` (default: the process's arguments), run the command, and return
    its exit status."""
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
