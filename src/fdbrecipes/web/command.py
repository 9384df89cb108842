"""``fdbrecipes web``: serve the dashboard of every structure under a directory or
subspace (uvicorn, part of the extra ``fdbrecipes[web]``).

Usage::

    fdbrecipes web --directory app                     # http://127.0.0.1:10096/
    fdbrecipes web --directory app --read-only --host 0.0.0.0
    FDBRECIPES_WEB_TOKEN=... fdbrecipes web --directory app --host 0.0.0.0
    fdbrecipes web --tuple '("jobs",)' --root-path /ops/queues   # behind a proxy

It finds the structures as the operator commands recognise one (from their keys, see
:func:`fdbrecipes.admin.places.stored`): the place itself and, under a directory, its
subdirectories (:data:`MAX_DEPTH` levels, :data:`MAX_STRUCTURES` at most), named by
their path below the place.  It binds to 127.0.0.1 by default and refuses any other
address unless the dashboard is read-only (``--read-only``) or asks for a token
(``--token-file PATH``, or ``$FDBRECIPES_WEB_TOKEN``: the password of HTTP Basic, any
user name; never an argument, which other users of the machine can read).  Every
action is logged to stderr (the audit log).  Exit status 0 when stopped (SIGINT or
SIGTERM), 1 a failure, 2 a usage error, as the operator commands.

The schedule stores (:class:`fdbrecipes.Schedules`) found there the same way are shown
on ``/schedules``.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from typing import Any, Dict, List, Optional, Tuple

from ..admin.arguments import DEFAULT_TIMEOUT, parse_directory, parse_tuple, positive_int, seconds
from ..admin.commands import connect, read_only, say
from ..admin.logs import log_to_stderr
from ..admin.places import (
    ANY_QUEUE,
    SCHEDULE_STORE,
    OperatorError,
    Place,
    UsageError,
    make_structure,
    open_place,
    shards_of,
    stored,
)
from . import FULL, INSTALL_HINT, READ_ONLY

__all__ = ["MAX_DEPTH", "MAX_STRUCTURES", "PORT", "TOKEN_VARIABLE", "arguments",
           "check_bind", "discover", "main"]

#: The default port (beside ``fdbrecipes metrics``' 10095).
PORT = 10096
#: Directory levels below the place searched for structures.
MAX_DEPTH = 3
#: Structures one dashboard shows at most.
MAX_STRUCTURES = 500
#: The environment variable holding the token.
TOKEN_VARIABLE = "FDBRECIPES_WEB_TOKEN"


def arguments(parser: argparse.ArgumentParser) -> None:
    """``web``'s options."""
    parser.description = ("Serve the web dashboard of every structure at and under a "
                          "directory (or at a subspace) until SIGINT or SIGTERM.  Binds to "
                          "127.0.0.1; another address needs --read-only or a token.  Needs "
                          "the extra: pip install 'fdbrecipes[web]'.")
    one = parser.add_mutually_exclusive_group(required=True)
    one.add_argument("--directory", metavar="PATH", help="directory-layer path (e.g. app); "
                     "it and its subdirectories are searched; never created")
    one.add_argument("--tuple", metavar="LITERAL", dest="tuple_literal",
                     help="Python tuple literal naming one structure's subspace")
    parser.add_argument("--max-deliveries", type=positive_int, metavar="N",
                        help="the application's max_deliveries (for the dead counts)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default "
                        "127.0.0.1; any other needs --read-only or a token)")
    parser.add_argument("--port", type=positive_int, default=PORT, help=f"default {PORT}")
    parser.add_argument("--root-path", default="", metavar="PATH",
                        help="the path a proxy serves the dashboard under (e.g. /ops)")
    parser.add_argument("--read-only", action="store_true",
                        help="show everything, offer and accept no action")
    parser.add_argument("--token-file", metavar="PATH", help="a file holding the password "
                        f"every request must give (default: ${TOKEN_VARIABLE}, if set)")
    parser.add_argument("--trusted-origin", action="append", default=[], metavar="ORIGIN",
                        help="an origin besides the dashboard's own whose forms are "
                        "accepted (behind a proxy that rewrites Host), e.g. "
                        "https://ops.example.com")
    parser.add_argument("--cluster-file", metavar="PATH",
                        help="cluster file (default: $FDB_CLUSTER_FILE, else the platform's)")
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"cancel any transaction taking longer (default "
                        f"{DEFAULT_TIMEOUT:g})")


def token_of(args: argparse.Namespace) -> Optional[str]:
    """The token ``--token-file`` or ``$FDBRECIPES_WEB_TOKEN`` gives, or None.

    Raises:
        UsageError: the file cannot be read, or holds an empty token.
    """
    if args.token_file is None:
        return os.environ.get(TOKEN_VARIABLE) or None
    try:
        with open(args.token_file, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as e:
        raise UsageError(f"--token-file: {e.strerror}: {args.token_file}") from None
    if not token:
        raise UsageError(f"--token-file: {args.token_file} is empty")
    return token


def check_bind(host: str, read_only: bool, token: Optional[str]) -> None:
    """Refuse to bind a non-loopback ``host`` for a dashboard that is neither read-only
    nor protected by a token.

    Raises:
        UsageError: it would be.
    """
    if host == "localhost" or read_only or token:
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UsageError(f"refusing to serve a dashboard that can act on --host {host} "
                         f"without a token (--token-file, ${TOKEN_VARIABLE}) or --read-only")


def _found(tr: Any, place: Place) -> List[Tuple[str, Any, str, int]]:
    """``(name, subspace, kind, shards)`` of each structure at and under ``place``."""
    import fdb

    top = open_place(tr, place)
    todo: List[Tuple[Tuple[str, ...], Any]] = [((), top)]
    out: List[Tuple[str, Any, str, int]] = []
    while todo and len(out) < MAX_STRUCTURES:
        path, subspace = todo.pop(0)
        kind, _wrong = stored(tr, subspace)
        if kind is not None:
            name = "/".join(path) or (place.directory[-1] if place.directory else "structure")
            out.append((name, subspace, "queue" if kind == ANY_QUEUE else kind,
                        shards_of(tr, subspace)))
        if place.directory is not None and len(path) < MAX_DEPTH:
            for child in fdb.directory.list(tr, place.directory + path):
                todo.append((path + (child,), fdb.directory.open(tr, place.directory + path
                                                                 + (child,))))
    return out


def discover(db: Any, place: Place, max_deliveries: Optional[int] = None) -> Dict[str, Any]:
    """The structures and schedule stores at and under ``place`` by name, as the
    library objects the operator commands make (see the module docstring; a store as a
    :class:`fdbrecipes.Schedules`).  Reads (never writes) the directory layer and the
    first keys of each place: one transaction, a few round trips per directory.

    Raises:
        OperatorError: no such directory.
    """
    from ..schedules import Schedules

    found = read_only(db, _found, place)
    return {name: Schedules(subspace) if kind == SCHEDULE_STORE else
            make_structure(kind, subspace, max_deliveries, shards=shards)
            for name, subspace, kind, shards in found}


def serve(args: argparse.Namespace) -> int:
    """Check, connect, discover, then serve until stopped."""
    place = parse_directory(args.directory) if args.directory is not None else \
        parse_tuple(args.tuple_literal)
    token = token_of(args)
    check_bind(args.host, args.read_only, token)
    try:
        import uvicorn

        from .app import create_app
    except ImportError as e:
        raise OperatorError(f"{INSTALL_HINT} ({e})") from None
    from ..schedules import Schedules

    db = connect(args)
    found = discover(db, place, args.max_deliveries)
    if not found:
        raise OperatorError(f"no structure found at or under {place}")
    structures = {n: s for n, s in found.items() if not isinstance(s, Schedules)}
    stores = [s for s in found.values() if isinstance(s, Schedules)]
    log_to_stderr("INFO", "text")
    app = create_app(db, structures, access=READ_ONLY if args.read_only else FULL,
                     schedules=stores, trusted_origins=args.trusted_origin, token=token)
    say("fdbrecipes web:", f"{len(structures)} structure(s) of {place} on "
        f"http://{args.host}:{args.port}{args.root_path}/"
        f"{' (read only)' if args.read_only else ''}")
    uvicorn.run(app, host=args.host, port=args.port, root_path=args.root_path,
                log_level="warning")
    return 0


def main(args: argparse.Namespace) -> int:
    """Run ``fdbrecipes web``; its exit status (a failure: one line on stderr)."""
    try:
        return serve(args)
    except OperatorError as e:
        say("fdbrecipes web:" + (" error:" if e.status == 2 else ""), e)
        return e.status
