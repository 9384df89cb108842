"""``fdbrecipes server ...``: install FoundationDB, say what the tools use, run a local
development server.

::

    fdbrecipes server install [--version 7.3.79] [--dir DIR] [--from URL|DIR]
    fdbrecipes server info [--dir DIR] [--json]
    fdbrecipes server start [--dir DIR] [--processes N]
    fdbrecipes server stop [--dir DIR]
    fdbrecipes server status [--dir DIR]

Each prints its result on stdout (downloads' progress on stderr) and exits 0; a
failure is one line on stderr, ``fdbrecipes server <action>: ...``, exit status 1
(``status``: 1 when the server is not up).  Nothing here loads ``libfdb_c``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any, Callable, Dict, List

from .._local.programs import ServerNotFoundError
from .._local.ready import ClusterNotReadyError
from . import daemon
from .find import (
    SERVER_DIR_VARIABLE,
    bindings_version,
    chosen_install,
    data_home,
    find_client_library,
    find_program,
    installed,
    installed_root,
)
from .install import InstallError, install
from .releases import DEFAULT_VERSION, RELEASE_HOST, UnsupportedPlatformError

__all__ = ["add_arguments", "run"]

PLATFORMS_HELP = (
    "Assets per platform (V: the version): Linux x86_64 foundationdb-clients_V-1_amd64.deb "
    "and foundationdb-server_V-1_amd64.deb; Linux aarch64 the same with _aarch64 (from "
    "7.3.58 on); macOS FoundationDB-V_arm64.pkg or FoundationDB-V_x86_64.pkg.  Each is "
    "checked against the <asset>.sha256 published beside it.  No release covers Windows "
    "or other processors."
)


def _directory_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--dir", dest="directory", metavar="DIR", help=what)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``fdbrecipes server``'s actions and their options."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    installs = (f"the folder holding the installed versions (default: ${SERVER_DIR_VARIABLE} "
                f"if set, else {data_home() / 'foundationdb'})")
    server_dir = (f"the server's folder: data, logs, cluster file (default "
                  f"{daemon.default_directory()})")

    p = actions.add_parser("install", help="download FoundationDB's fdbserver, fdbcli and "
                           "libfdb_c for this machine into a per-user folder (no root)",
                           description="Download the official FoundationDB release assets "
                           "for this machine, verify their checksums, and unpack fdbserver, "
                           "fdbcli and libfdb_c into DIR/<version>.  A second install of "
                           "a version is a no-op; an interrupted or refused one leaves no "
                           f"version folder.  {PLATFORMS_HELP}")
    p.add_argument("--version", default=DEFAULT_VERSION,
                   help=f"FoundationDB version (default {DEFAULT_VERSION})")
    _directory_option(p, installs)
    p.add_argument("--from", dest="source", metavar="URL|DIR",
                   help=f"a mirror or a copy of the release's files, laid out as "
                   f"<version>/<asset> and <version>/<asset>.sha256 (default {RELEASE_HOST})")

    p = actions.add_parser("info", help="what is installed, and which server and client "
                           "library each command would use, and why")
    _directory_option(p, installs)
    p.add_argument("--json", action="store_true", help="one JSON object")

    p = actions.add_parser("start", help="start a persistent local server in the background "
                           "(ssd engine; data kept across stop and start)")
    _directory_option(p, server_dir)
    p.add_argument("--processes", type=int, default=None, metavar="N",
                   help="fdbserver processes (default: as before, or 1)")

    p = actions.add_parser("stop", help="stop the server 'server start' started (never "
                           "another one)")
    _directory_option(p, server_dir)

    p = actions.add_parser("status", help="whether the local server is up (exit 0) or not "
                           "(exit 1)")
    _directory_option(p, server_dir)


def default_cluster_file() -> str:
    """The cluster file ``fdb.open()`` uses when none is named."""
    if sys.platform == "darwin":
        return "/usr/local/etc/foundationdb/fdb.cluster"
    return "/etc/foundationdb/fdb.cluster"


def _install(args: argparse.Namespace) -> int:
    result = install(args.version, args.directory, args.source)
    done = "is already installed in" if result.already else "installed in"
    print(f"FoundationDB {result.version} {done} {result.directory} "
          "(bin/fdbserver, bin/fdbcli, lib/libfdb_c)")
    root = result.directory.parent
    if args.directory and root != installed_root(None).resolve():
        print(f"  the tools look there with: export {SERVER_DIR_VARIABLE}={root}")
    return 0


def info(directory: Any = None) -> Dict[str, Any]:
    """What ``server info`` reports, as a dict."""
    chosen = chosen_install(directory)
    cluster_file = os.environ.get("FDB_CLUSTER_FILE")
    return {
        "installed_in": str(installed_root(directory)),
        "installed": [{"version": i.version, "directory": str(i.directory),
                       "platform": i.platform, "source": i.source,
                       "used": chosen is not None and i.version == chosen.version}
                      for i in installed(directory)],
        "cluster_file": cluster_file,
        "default_cluster_file": default_cluster_file(),
        "fdbserver": dataclasses.asdict(find_program("fdbserver", "FDBSERVER", directory)),
        "fdbcli": dataclasses.asdict(find_program("fdbcli", "FDBCLI", directory)),
        "libfdb_c": dataclasses.asdict(find_client_library(directory)),
        "bindings": bindings_version(),
    }


def _info(args: argparse.Namespace) -> int:
    report = info(args.directory)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    lines: List[str] = [f"Installed by 'fdbrecipes server install' (in {report['installed_in']}):"]
    for entry in report["installed"]:
        used = "  <- used" if entry["used"] else ""
        lines.append(f"  {entry['version']}  {entry['platform']}  from {entry['source']}{used}")
    if not report["installed"]:
        lines.append("  nothing")
    lines.append("What the commands use:")
    if report["cluster_file"]:
        lines.append(f"  cluster    FDB_CLUSTER_FILE={report['cluster_file']}: every command "
                     "uses it; demo, bench and the pytest fixtures start no server")
    else:
        lines.append("  cluster    FDB_CLUSTER_FILE is not set: demo, bench, cluster and the "
                     "pytest fixtures start a throwaway fdbserver; the operator commands "
                     f"(stats, worker, web, ...) use --cluster-file, else "
                     f"{report['default_cluster_file']}")
    for name in ("fdbserver", "fdbcli", "libfdb_c"):
        found = report[name]
        where = f"{found['path']}  ({found['why']})" if found["path"] else f"none: {found['why']}"
        lines.append(f"  {name:<10} {where}")
    lines.append(f"  bindings   foundationdb {report['bindings'] or '(not installed)'}")
    print("\n".join(lines))
    return 0


def _start(args: argparse.Namespace) -> int:
    started = daemon.start(args.directory, args.processes)
    state = "was already running" if started.already else "is up"
    print(f"FoundationDB server {state}: {', '.join(started.addresses)} (ssd engine), "
          f"data in {started.cluster_file.parent}, fdbserver {started.fdbserver}")
    print(f"  export FDB_CLUSTER_FILE={started.cluster_file}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    stopped = daemon.stop(args.directory)
    home = daemon.default_directory() if args.directory is None else args.directory
    print(f"stopped {stopped} process(es) of the server in {home}" if stopped
          else f"the server in {home} was not running")
    return 0


def _status(args: argparse.Namespace) -> int:
    seen = daemon.status(args.directory)
    if seen.up:
        print(f"up: {', '.join(seen.addresses)}: {seen.detail}")
        print(f"  export FDB_CLUSTER_FILE={seen.cluster_file}")
        return 0
    print(f"not up: {seen.detail}")
    return 1


ACTIONS: Dict[str, Callable[[argparse.Namespace], int]] = {
    "install": _install, "info": _info, "start": _start, "stop": _stop, "status": _status}


def run(args: argparse.Namespace) -> int:
    """Run ``fdbrecipes server <action>``; its exit status."""
    action = ACTIONS.get(args.action or "")
    if action is None:
        print("fdbrecipes server: name an action: install, info, start, stop or status "
              "(fdbrecipes server --help)", file=sys.stderr)
        return 2
    try:
        return action(args)
    except (InstallError, UnsupportedPlatformError, ServerNotFoundError, daemon.ServerError,
            ClusterNotReadyError, TypeError, ValueError, OSError) as e:
        print(f"fdbrecipes server {args.action}: {e}", file=sys.stderr)
        return 1
