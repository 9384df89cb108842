"""``fdbrecipes web``: serve the dashboard of every structure under a directory or
subspace (uvicorn, part of the extra ``fdbrecipes[web]``).

Usage::

    fdbrecipes web --directory app                     # http://127.0.0.1:10096/, read only
    fdbrecipes web --directory app --token-file /etc/fdbrecipes/token      # every action
    fdbrecipes web --directory app --token-file PATH --host 0.0.0.0
    fdbrecipes web --tuple '("app",)' --token-file PATH --root-path /ops/queues \
        --allowed-host ops.example.com --trusted-origin https://ops.example.com

It finds the structures as the operator commands recognise one (from their keys, see
:func:`fdbrecipes.admin.places.stored`): the place itself and, when it holds none, the
places below it, :data:`MAX_DEPTH` levels deep (a directory's subdirectories; a
subspace's nested tuples), :data:`MAX_STRUCTURES` at most, named by their path below
the place.

Without a token it is read-only: every page, no action.  A token (``--token-file
PATH``, or ``$FDBRECIPES_WEB_TOKEN``: at least 16 characters, the password of HTTP
Basic, any user name, which the audit log then names; never an argument, which other
users of the machine can read) gives every action (but with ``--read-only``).  It
binds to 127.0.0.1 by default, and refuses to serve beyond this machine without a
token: a non-loopback ``--host``, a ``--root-path`` or a ``--trusted-origin`` (a
proxy's) need one, or ``--insecure-no-auth`` (read-only, to anyone who reaches it).
Requests whose ``Host`` is not the bound address, ``localhost``, ``127.0.0.1`` or
``[::1]`` (with the port), or an ``--allowed-host``, are refused (421).  Every action
and every refusal is logged to stderr (the audit log).  Exit status 0 when stopped
(SIGINT or SIGTERM), 1 a failure, 2 a usage error, as the operator commands.

The schedule stores (:class:`fdbrecipes.Schedules`) found there the same way are shown
on ``/schedules``, the limit stores (:class:`fdbrecipes.Limits`) on ``/limits``.  A
workflow store cannot be found so (it is made with its structures): an application
gives it to :func:`fdbrecipes.web.create_app`.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple, Union

from ..admin.arguments import DEFAULT_TIMEOUT, parse_directory, parse_tuple, positive_int, seconds
from ..admin.commands import connect, read_only, say
from ..admin.logs import log_to_stderr
from ..admin.places import (
    ANY_QUEUE,
    LIMIT_STORE,
    SCHEDULE_STORE,
    WORKFLOW_STORE,
    OperatorError,
    Place,
    UsageError,
    make_structure,
    open_place,
    shards_of,
    stored,
)
from . import FULL, INSTALL_HINT, READ_ONLY
from .guard import MIN_TOKEN

__all__ = ["MAX_DEPTH", "MAX_PROBES", "MAX_STRUCTURES", "PORT", "TOKEN_VARIABLE", "arguments",
           "check_bind", "discover", "main", "token_of"]

#: The default port (beside ``fdbrecipes metrics``' 10095).
PORT = 10096
#: Levels below the place searched for structures.
MAX_DEPTH = 3
#: Structures one dashboard shows at most.
MAX_STRUCTURES = 500
#: Keys read at most to find the structures under a subspace (each names a place
#: below it).
MAX_PROBES = 5_000
#: The environment variable holding the token.
TOKEN_VARIABLE = "FDBRECIPES_WEB_TOKEN"


class NoTokenArgument(argparse.Action):
    """``--token``: refused without saying what followed it (a secret, in the shell's
    history now: a token is read from a file or the environment only)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Union[str, Sequence[Any], None],
                 option_string: Optional[str] = None) -> NoReturn:
        parser.error(f"there is no --token option (a token given as an argument can be "
                     f"read by every user of the machine): use --token-file PATH or "
                     f"${TOKEN_VARIABLE}, and change the token you typed")


def arguments(parser: argparse.ArgumentParser) -> None:
    """``web``'s options (no abbreviations: ``--token`` must not be taken for
    ``--token-file``)."""
    parser.allow_abbrev = False
    parser.description = ("Serve the web dashboard of every structure at and under a "
                          "directory or a subspace until SIGINT or SIGTERM.  Read-only "
                          "without a token; a token (--token-file or "
                          f"${TOKEN_VARIABLE}) gives every action.  Binds to 127.0.0.1; "
                          "another address, --root-path or --trusted-origin need a token "
                          "(or --insecure-no-auth: read-only to anyone).  Needs the extra: "
                          "pip install 'fdbrecipes[web]'.")
    one = parser.add_mutually_exclusive_group(required=True)
    one.add_argument("--directory", metavar="PATH", help="directory-layer path (e.g. app); "
                     "it and its subdirectories are searched; never created")
    one.add_argument("--tuple", metavar="LITERAL", dest="tuple_literal",
                     help="Python tuple literal naming a subspace; it and the subspaces "
                     "nested in it are searched")
    parser.add_argument("--max-deliveries", type=positive_int, metavar="N",
                        help="the application's max_deliveries (for the dead counts)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default "
                        "127.0.0.1; any other needs a token)")
    parser.add_argument("--port", type=positive_int, default=PORT, help=f"default {PORT}")
    parser.add_argument("--root-path", default="", metavar="PATH",
                        help="the path a proxy serves the dashboard under (e.g. /ops; "
                        "needs a token)")
    parser.add_argument("--read-only", action="store_true",
                        help="show everything, offer and accept no action, even with a "
                        "token")
    parser.add_argument("--token-file", metavar="PATH", help="a file holding the password "
                        f"(at least {MIN_TOKEN} characters) every request must give, which "
                        f"allows every action (default: ${TOKEN_VARIABLE}, if set)")
    parser.add_argument("--token", nargs="?", action=NoTokenArgument, help=argparse.SUPPRESS)
    parser.add_argument("--insecure-no-auth", action="store_true",
                        help="serve read-only without a token where one is needed (a "
                        "non-loopback --host, --root-path, --trusted-origin): every "
                        "payload to anyone who reaches it")
    parser.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                        help="a Host name (or NAME:PORT) requests may give besides this "
                        "address, localhost, 127.0.0.1 and [::1] (a proxy's public name); "
                        "repeatable")
    parser.add_argument("--trusted-origin", action="append", default=[], metavar="ORIGIN",
                        help="an origin besides the dashboard's own whose forms are "
                        "accepted (behind a proxy that rewrites Host), e.g. "
                        "https://ops.example.com; needs a token")
    parser.add_argument("--cluster-file", metavar="PATH",
                        help="cluster file (default: $FDB_CLUSTER_FILE, else the platform's)")
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"cancel any transaction taking longer, and answer a page "
                        f"whose reads take longer 503 (default {DEFAULT_TIMEOUT:g})")


def token_of(args: argparse.Namespace) -> Optional[str]:
    """The token ``--token-file`` or ``$FDBRECIPES_WEB_TOKEN`` gives, or None.

    Raises:
        UsageError: the file cannot be read, or its token (or the variable's, when
            set) is shorter than :data:`~.guard.MIN_TOKEN` characters.
    """
    if args.token_file is None:
        token = os.environ.get(TOKEN_VARIABLE)
        where = f"${TOKEN_VARIABLE}"
        if not token:
            return None
    else:
        where = f"--token-file {args.token_file}"
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as e:
            raise UsageError(f"--token-file: {e.strerror}: {args.token_file}") from None
        except ValueError:
            raise UsageError(f"--token-file: {args.token_file} is not UTF-8 text") from None
    if len(token) < MIN_TOKEN:
        raise UsageError(f"{where}: a token has at least {MIN_TOKEN} characters, this one "
                         f"{len(token)} (e.g. python -c 'import secrets; "
                         "print(secrets.token_urlsafe())')")
    return token


def _loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``); a name that is no
    address is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: Optional[str], insecure: bool = False,
               root_path: str = "", trusted_origins: Sequence[str] = ()) -> None:
    """Refuse to serve the dashboard beyond this machine without a token: on a
    non-loopback ``host``, behind a proxy (``root_path``) or to a proxy's origin
    (``trusted_origins``), unless ``insecure`` (``--insecure-no-auth``: read-only).

    Raises:
        UsageError: it would be, or ``insecure`` is given with a token.
    """
    if token is not None:
        if insecure:
            raise UsageError("--insecure-no-auth with a token: give one or the other")
        return
    if insecure:
        return
    why = (f"--host {host}" if not _loopback(host) else "--root-path" if root_path else
           "--trusted-origin" if trusted_origins else None)
    if why is not None:
        raise UsageError(f"refusing to serve the dashboard with {why} without a token "
                         f"(--token-file, ${TOKEN_VARIABLE}): whoever reaches it would see "
                         "every payload; --insecure-no-auth serves it read-only anyway")


#: One structure found: its name, subspace, kind and shards.
Found = Tuple[str, Any, str, int]


def _named(place: Place, path: Tuple[Any, ...]) -> str:
    """A structure's name: its path below the place, its parts joined by "/" (a part
    that is not a str as its ``repr()``); the place itself is named by its last part."""
    if not path:
        last = place.directory[-1] if place.directory else (
            place.prefix[-1] if place.prefix else "structure")
        path = (last,)
    return "/".join(p if isinstance(p, str) else repr(p) for p in path)


class Probes:
    """The keys a search under a subspace may still read (:data:`MAX_PROBES`)."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_PROBES


def _children(tr: Any, place: Place, path: Tuple[Any, ...], subspace: Any,
              probes: Probes) -> List[Tuple[Tuple[Any, ...], Any]]:
    """The places one level below ``subspace``: a directory's subdirectories, or the
    first elements of the keys under a subspace (read key after key, skipping each
    child's range: one read each, taken from ``probes``)."""
    import fdb

    if place.directory is not None:
        return [(path + (child,), fdb.directory.open(tr, place.directory + path + (child,)))
                for child in fdb.directory.list(tr, place.directory + path)]
    found: List[Tuple[Tuple[Any, ...], Any]] = []
    r = subspace.range()
    begin = r.start
    while probes.left > 0 and len(found) < MAX_STRUCTURES:
        probes.left -= 1
        kvs = list(tr.snapshot.get_range(begin, r.stop, limit=1))
        if not kvs:
            break
        key = bytes(kvs[0].key)
        try:
            child = subspace.unpack(key)[0]
        except Exception:  # not a tuple: step over this key
            begin = key + b"\x00"
            continue
        nested = subspace[child]
        found.append((path + (child,), nested))
        begin = nested.range().stop
    return found


def _found(tr: Any, place: Place) -> List[Found]:
    """``(name, subspace, kind, shards)`` of each structure at and under ``place``: the
    place, then, level after level (:data:`MAX_DEPTH`), every place below one that
    holds no structure."""
    top = open_place(tr, place)
    todo: List[Tuple[Tuple[Any, ...], Any]] = [((), top)]
    out: List[Found] = []
    probes = Probes()
    while todo and len(out) < MAX_STRUCTURES:
        path, subspace = todo.pop(0)
        kind, _wrong = stored(tr, subspace)
        if kind == WORKFLOW_STORE:  # made with its structures: given to create_app
            kind = None
        if kind is not None:
            out.append((_named(place, path), subspace, "queue" if kind == ANY_QUEUE else kind,
                        shards_of(tr, subspace)))
            if place.directory is None:
                continue  # a subspace's keys below a structure are the structure's
        if len(path) < MAX_DEPTH:
            todo += _children(tr, place, path, subspace, probes)
    return out


def discover(db: Any, place: Place, max_deliveries: Optional[int] = None) -> Dict[str, Any]:
    """The structures, schedule stores and limit stores at and under ``place`` by
    name, as the library objects the operator commands make (see the module
    docstring; a store as a :class:`fdbrecipes.Schedules` or a
    :class:`fdbrecipes.Limits`).  Reads (never writes) the directory layer, or the keys
    under a subspace (one read per place below it, at most :data:`MAX_PROBES`), and the
    first keys of each place: one transaction, a few round trips per place.

    Raises:
        OperatorError: no such directory.
    """
    from ..limits import Limits
    from ..schedules import Schedules

    found = read_only(db, _found, place)
    return {name: Schedules(subspace) if kind == SCHEDULE_STORE else
            Limits(subspace) if kind == LIMIT_STORE else
            make_structure(kind, subspace, max_deliveries, shards=shards)
            for name, subspace, kind, shards in found}


def serve(args: argparse.Namespace) -> int:
    """Check, connect, discover, then serve until stopped."""
    place = parse_directory(args.directory) if args.directory is not None else \
        parse_tuple(args.tuple_literal)
    token = token_of(args)
    check_bind(args.host, token, args.insecure_no_auth, args.root_path, args.trusted_origin)
    try:
        import uvicorn

        from .app import create_app
    except ImportError as e:
        raise OperatorError(f"{INSTALL_HINT} ({e})") from None
    from ..limits import Limits
    from ..schedules import Schedules

    db = connect(args)
    found = discover(db, place, args.max_deliveries)
    if not found:
        raise OperatorError(f"no structure found at or under {place}")
    structures = {n: s for n, s in found.items() if not isinstance(s, (Schedules, Limits))}
    stores = [s for s in found.values() if isinstance(s, Schedules)]
    limits = [s for s in found.values() if isinstance(s, Limits)]
    log_to_stderr("INFO", "text")
    read_only_ = args.read_only or token is None
    app = create_app(db, structures, access=READ_ONLY if read_only_ else FULL,
                     schedules=stores, trusted_origins=args.trusted_origin, token=token,
                     allowed_hosts=args.allowed_host, timeout=args.timeout, limits=limits)
    how = (" (read only: a token gives the actions)" if token is None else
           " (read only)" if args.read_only else "")
    say("fdbrecipes web:", f"{len(structures)} structure(s) of {place} on "
        f"http://{args.host}:{args.port}{args.root_path}/{how}")
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
