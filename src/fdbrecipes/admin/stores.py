"""What the commands on a store share (``fdbrecipes schedules``, ``limits``,
``workflow``): the options naming the store (``--directory`` or ``--tuple``,
``--cluster-file``, ``--timeout``, ``--json``), opening it, and one action run as
:class:`StoreCommand` runs it: its arguments checked, the store opened (the place must
hold a store of the command's kind or nothing), the action's report printed (JSON
with ``--json``, else its text), a failure said in one line.
"""

from __future__ import annotations

import argparse
from typing import Any, ClassVar, Dict, Generic, NamedTuple, Optional, Tuple, Type, TypeVar

from .arguments import DEFAULT_TIMEOUT, parse_directory, parse_tuple, seconds
from .commands import Report, answer, connect, read_only
from .places import SCHEDULE_STORE, OperatorError, Place, UsageError, open_place, stored

__all__ = ["At", "StoreCommand", "place_of", "place_options", "store_at"]

#: The store object a command acts on (``Schedules``, ``Limits``, ``Workflows``).
S = TypeVar("S")


def place_options(parser: argparse.ArgumentParser) -> None:
    """Where the store is, the cluster, the output."""
    one = parser.add_mutually_exclusive_group(required=True)
    one.add_argument("--directory", metavar="PATH",
                     help="the store's directory-layer path (it must exist)")
    one.add_argument("--tuple", metavar="LITERAL", dest="tuple_literal",
                     help="Python tuple literal naming the store's subspace")
    parser.add_argument("--cluster-file", metavar="PATH",
                        help="cluster file (default: $FDB_CLUSTER_FILE, else the platform's)")
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"cancel any transaction taking longer (default "
                        f"{DEFAULT_TIMEOUT:g})")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def place_of(directory: Optional[str], literal: Optional[str]) -> Place:
    """The place a ``--directory``/``--tuple`` pair of options names.

    Raises:
        UsageError: a bad path or literal.
    """
    return parse_directory(directory) if directory is not None else parse_tuple(
        literal or "")


def store_at(tr: Any, place: Place, what: str = SCHEDULE_STORE) -> Any:
    """The subspace of the store of kind ``what`` (a schedule store, a limit store, a
    workflow store) at ``place`` (a store, or nothing yet).

    Raises:
        OperatorError: no such directory, or something else is there.
    """
    subspace = open_place(tr, place)
    kind, wrong = stored(tr, subspace)
    if wrong is not None:
        raise OperatorError(f"no {what} at {place}: found {wrong}")
    if kind not in (None, what):
        raise OperatorError(f"no {what} at {place}: found a {kind}")
    return subspace


class At(NamedTuple):
    """Where an action acts: the database, the store's place, and the title of its
    report (``limits at /app/limits``)."""

    db: Any
    place: Place
    title: str

    @property
    def head(self) -> Dict[str, Any]:
        """The fields every report of the action begins with: the place."""
        return {"place": str(self.place)}


class StoreCommand(Generic[S]):
    """A command on a store: its row of the command line, its actions' options, and
    one action run (:meth:`act`), its failure said in one line (:meth:`main`).

    A command says its store's kind (``what``), the noun of its reports' titles
    (``noun``), the action that needs ``--yes`` and what it does (``confirm``), and the
    library's errors that are the operator's (``refused``); it checks its arguments
    (:meth:`check`), opens its store object (:meth:`opened`) and does the action
    (:meth:`acted`).
    """

    name: ClassVar[str]
    help: ClassVar[str]
    what: ClassVar[str]
    noun: ClassVar[str]
    #: (the action, what it does: "remove a schedule").
    confirm: ClassVar[Tuple[str, str]]
    refused: ClassVar[Tuple[Type[Exception], ...]] = (TypeError, ValueError)

    def arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's actions and their options to ``parser``."""
        raise NotImplementedError

    def main(self, args: argparse.Namespace) -> int:
        """Run one action; its exit status (a failure: one line on stderr)."""
        return answer(f"fdbrecipes {self.name} {args.action}:", args, self.act, args)

    def act(self, args: argparse.Namespace) -> Report:
        """Check, connect, open the store, and do the action: its report.

        Raises:
            UsageError: a bad place or option, the confirmed action without ``--yes``.
            OperatorError: no store there; the library refused the action (one of
                ``refused``: the message says why).
        """
        place = place_of(args.directory, args.tuple_literal)
        checked = self.check(args)
        action, does = self.confirm
        if args.action == action and not args.yes:
            raise UsageError(f"refusing to {does} without --yes")
        db = connect(args)
        subspace = read_only(db, store_at, place, self.what)
        at = At(db, place, f"{self.noun} at {place}")
        try:
            return self.acted(at, self.opened(db, subspace, args, checked), args, checked)
        except self.refused as e:
            raise OperatorError(self.refusal(e, args, place)) from None

    def check(self, args: argparse.Namespace) -> Any:
        """Check the action's own arguments before connecting: what :meth:`acted` is
        given of them (None by default).

        Raises:
            UsageError: a bad argument.
        """
        return None

    def opened(self, db: Any, subspace: Any, args: argparse.Namespace, checked: Any) -> S:
        """The store object at ``subspace``."""
        raise NotImplementedError

    def acted(self, at: At, store: S, args: argparse.Namespace, checked: Any) -> Report:
        """What the action does to ``store``: its report."""
        raise NotImplementedError

    def refusal(self, error: Exception, args: argparse.Namespace, place: Place) -> str:
        """The line said for ``error``, one of ``refused``: its message."""
        return str(error)
