"""The ``fdbrecipes`` command: argument parsing and dispatch.

Each subcommand is a function ``name(args) -> exit status``, listed in :data:`COMMANDS`
with its one-line help and, if it takes options, a function adding them to its parser.
To add a subcommand, write those functions and add a :class:`Command` row.  The
machinery behind ``demo``, ``bench`` and ``cluster`` is imported when the command runs
(or, for its options, when the parser is built); the operator commands are the rows of
:data:`fdbrecipes.admin.OPERATIONS`, whose import needs no ``libfdb_c`` either, so
``fdbrecipes --help`` needs none.

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

from . import __version__, admin
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


def web_options(parser: argparse.ArgumentParser) -> None:
    """``fdbrecipes web``'s options (importing them needs no Starlette)."""
    from .web.command import arguments

    arguments(parser)


def web(args: argparse.Namespace) -> int:
    """``fdbrecipes web``: serve the dashboard (:mod:`fdbrecipes.web.command`)."""
    from .web.command import main

    return main(args)


def bench(args: argparse.Namespace) -> int:
    """``fdbrecipes bench``: the benchmark suite (table, targets, PNG chart, JSON)."""
    from .bench import run_bench

    return run_bench(args)


def cluster_options(parser: argparse.ArgumentParser) -> None:
    """``fdbrecipes cluster``'s options."""
    from ._local.command import add_arguments

    add_arguments(parser)


def cluster(args: argparse.Namespace) -> int:
    """``fdbrecipes cluster``: a throwaway local cluster, until Ctrl-C."""
    from ._local.command import run

    return run(args)


def server_options(parser: argparse.ArgumentParser) -> None:
    """``fdbrecipes server``'s actions (:mod:`fdbrecipes.server.command`)."""
    from .server.command import add_arguments

    add_arguments(parser)


def server(args: argparse.Namespace) -> int:
    """``fdbrecipes server``: install FoundationDB, say what the tools use, run a local
    server."""
    from .server.command import run

    return run(args)


#: Every subcommand, in the order ``--help`` lists them.
COMMANDS = (
    Command("demo", "push and pop through every structure", demo),
    Command("bench", "run the benchmark suite (table + PNG chart)", bench, bench_options),
    Command("cluster", "start a throwaway local cluster (several processes, faults to "
            "try) and run until Ctrl-C", cluster, cluster_options),
    *(Command(op.name, op.help, op.main, op.arguments)
      for op in admin.OPERATIONS + admin.JOBS + admin.SERVICES),
    Command(admin.SCHEDULES.name, admin.SCHEDULES.help, admin.SCHEDULES.main,
            admin.SCHEDULES.arguments),
    Command(admin.LIMITS.name, admin.LIMITS.help, admin.LIMITS.main, admin.LIMITS.arguments),
    Command(admin.WORKFLOWS.name, admin.WORKFLOWS.help, admin.WORKFLOWS.main,
            admin.WORKFLOWS.arguments),
    Command("web", "serve the web dashboard of the structures under a directory", web,
            web_options),
    Command("server", "install FoundationDB for this user (no root), say which server and "
            "client library the commands use, or run a persistent local server", server,
            server_options),
)

#: What ``fdbrecipes --help`` says after the list of commands.
EPILOG = (
    "Operator commands (stats, peek, dead, requeue-dead, purge-dead, push, leases, "
    "delayed, remove, unblock, job, cancel, finished, workers, pause, resume, worker, "
    "metrics, web) act on a "
    "structure of a running cluster (--cluster-file, default $FDB_CLUSTER_FILE; no server "
    "is started), named by "
    "--directory PATH or --tuple LITERAL (and --kind queue|priority-queue|fair-queue|"
    "weight-tree, recognised when not given; --group GROUP for a fair-queue's groups), "
    "e.g. 'fdbrecipes stats --directory app/jobs'; 'fdbrecipes schedules' on a schedule "
    "store, 'fdbrecipes limits' on a limit store, 'fdbrecipes workflow' on a workflow "
    "store.  "
    "'fdbrecipes <command> --help' tells more."
)


# -- parsing and dispatch ----------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``fdbrecipes`` parser, with a subparser per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="fdbrecipes",
        description="Transactional Queue, PriorityQueue and WeightTree on FoundationDB. "
        f"Needs a FoundationDB cluster: {INSTALL_HINT}.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"fdbrecipes {__version__}")
    subparsers = parser.add_subparsers(dest="command")
    for command in COMMANDS:
        subparser = subparsers.add_parser(command.name, help=command.help)
        command.options(subparser)
        subparser.set_defaults(run=command.run)
    return parser


def unrecognized(extra: List[str]) -> str:
    """The error for arguments no parser took, naming the options but repeating no value:
    a mistyped option's value may be a secret (``--tok SECRET``), and what reaches a
    terminal or a log is read by others."""
    names = [arg.split("=", 1)[0][:60] for arg in extra if arg.startswith("-")]
    others = len(extra) - len(names)
    said = f"unrecognized options: {' '.join(names)}" if names else "unrecognized arguments"
    if others:
        said += f" (and {others} other argument{'s' if others > 1 else ''}, not repeated)"
    return said


def main(argv: Optional[List[str]] = None) -> int:
    """Parse ``argv`` (default: the process's arguments), run the command, and return
    its exit status."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        parser.error(unrecognized(extra))
    if args.command is None:  # plain "fdbrecipes": what it can do
        parser.print_help()
        return 0
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what a supervisor reruns
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
