"""The one search order for a FoundationDB server and client library.

The demo, the benchmark, the pytest plugin, :class:`~fdbrecipes.testing.LocalCluster`,
``fdbrecipes cluster`` and ``fdbrecipes server start`` find ``fdbserver`` and
``fdbcli`` here, and every ``fdbrecipes`` command and
:func:`~fdbrecipes.server.client.use_installed` the client library ``libfdb_c``:

1. the cluster file you name (``FDB_CLUSTER_FILE``): then no server is started at
   all, and only the client library is looked for;
2. an explicit program: ``$FDBSERVER``, ``$FDBCLI`` (a path; if it is not an
   executable file, the search stops there and says so);
3. ``PATH`` (for the library: the folders of ``LD_LIBRARY_PATH``, on macOS
   ``DYLD_LIBRARY_PATH``, and the bindings' own folder, where the bindings look first);
4. the installed copy: what ``fdbrecipes server install`` put under
   ``$FDBRECIPES_SERVER_DIR`` (default: ``~/.local/share/fdbrecipes/foundationdb``, on
   macOS ``~/Library/Application Support/fdbrecipes/foundationdb``), the version
   matching the installed Python bindings (same major and minor) if there is one,
   else the newest;
5. where FoundationDB's own packages put them: ``/usr/sbin``, ``/usr/local/sbin``,
   ``/usr/local/libexec`` (macOS), ``/usr/lib/foundationdb``, ... (for the library,
   the system's default library search).

On macOS a system-wide ``/usr/local/lib/libfdb_c.dylib`` (the official installer's)
comes before the installed copy: the bindings load the library by its leaf name, and
macOS's loader finds that one first (see :mod:`.client`).

Nothing here loads ``libfdb_c``, starts a process or writes anything.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from .releases import library_name

__all__ = ["INSTALL_HINT", "SERVER_DIR_VARIABLE", "SYSTEM_DIRS", "Found", "Installed",
           "bindings_version", "data_home", "find_client_library", "find_program",
           "installed", "installed_root", "chosen_install"]

#: The environment variable naming the folder ``fdbrecipes server install`` installs into.
SERVER_DIR_VARIABLE = "FDBRECIPES_SERVER_DIR"
#: Where FoundationDB's packages put the programs (step 5).
SYSTEM_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin",
               "/usr/local/libexec", "/usr/lib/foundationdb")
#: Where the system's library search finds ``libfdb_c`` (step 5, for saying which one).
SYSTEM_LIBRARY_DIRS = ("/usr/lib", "/usr/lib64", "/usr/local/lib",
                       "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
#: What to do where nothing is found.
INSTALL_HINT = ("run 'fdbrecipes server install' (or install FoundationDB 7.3 from "
                "https://github.com/apple/foundationdb/releases)")
#: The record ``fdbrecipes server install`` writes last in each version's folder.
RECORD = "installed.json"
_VERSION_DIR = re.compile(r"(\d+)\.(\d+)\.(\d+)\Z")


@dataclass(frozen=True)
class Found:
    """Where one program or library was found, and why that one.

    Attributes:
        name: ``fdbserver``, ``fdbcli`` or ``libfdb_c``.
        path: its path, or None when it was not found.
        source: which step of the search found it: ``"explicit"``, ``"PATH"``,
            ``"LD_LIBRARY_PATH"`` (or ``DYLD_LIBRARY_PATH``), ``"bindings"``,
            ``"installed"``, ``"system"``, or ``"missing"``.
        why: the reason in words, for ``fdbrecipes server info`` and error messages.
    """

    name: str
    path: Optional[str]
    source: str
    why: str


@dataclass(frozen=True)
class Installed:
    """One version installed by ``fdbrecipes server install``.

    Attributes:
        version: the FoundationDB version (``"7.3.79"``).
        directory: its folder (``bin/fdbserver``, ``bin/fdbcli``, ``lib/libfdb_c.*``).
        platform: the platform it was installed for.
        source: where it was downloaded from.
    """

    version: str
    directory: Path
    platform: str
    source: str

    def program(self, name: str) -> Path:
        """The path of ``fdbserver`` or ``fdbcli`` in it."""
        return self.directory / "bin" / name

    @property
    def library(self) -> Path:
        """The path of its ``libfdb_c``."""
        return self.directory / "lib" / library_name(self.platform)


def data_home() -> Path:
    """The per-user folder of fdbrecipes' files: ``$XDG_DATA_HOME/fdbrecipes`` (default
    ``~/.local/share/fdbrecipes``), on macOS ``~/Library/Application Support/fdbrecipes``."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "fdbrecipes"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "fdbrecipes"


def installed_root(directory: Optional[str] = None) -> Path:
    """The folder holding the installed versions: ``directory``, else
    ``$FDBRECIPES_SERVER_DIR``, else ``data_home() / "foundationdb"``."""
    chosen = directory or os.environ.get(SERVER_DIR_VARIABLE)
    return Path(chosen).expanduser() if chosen else data_home() / "foundationdb"


def _version_key(version: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def installed(directory: Optional[str] = None) -> List[Installed]:
    """The versions installed under :func:`installed_root`, oldest first (a folder
    counts once its record, written last, is there)."""
    root = installed_root(directory)
    found: List[Installed] = []
    if not root.is_dir():
        return found
    for entry in root.iterdir():
        record = entry / RECORD
        if not _VERSION_DIR.match(entry.name) or not record.is_file():
            continue
        try:
            details = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        found.append(Installed(entry.name, entry, str(details.get("platform", "")),
                               str(details.get("source", ""))))
    return sorted(found, key=lambda i: _version_key(i.version))


def bindings_version() -> Optional[str]:
    """The version of the installed ``foundationdb`` Python bindings, or None."""
    from importlib import metadata

    try:
        return metadata.version("foundationdb")
    except metadata.PackageNotFoundError:
        return None


def chosen_install(directory: Optional[str] = None) -> Optional[Installed]:
    """The installed version the tools use (step 4): the newest whose major and minor
    match the Python bindings', else the newest; None when nothing is installed."""
    versions = installed(directory)
    if not versions:
        return None
    bindings = bindings_version()
    if bindings:
        same = [i for i in versions if _version_key(i.version)[:2] ==
                tuple(int(p) for p in re.findall(r"\d+", bindings)[:2])]
        if same:
            return same[-1]
    return versions[-1]


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_program(name: str, env_var: str, directory: Optional[str] = None) -> Found:
    """Find ``fdbserver`` or ``fdbcli`` by the search order: ``$env_var``, ``PATH``,
    the installed copy (under ``directory``, default :func:`installed_root`), the
    packages' places."""
    configured = os.environ.get(env_var)
    if configured:
        if _executable(configured):
            return Found(name, configured, "explicit", f"${env_var}")
        return Found(name, None, "missing", f"${env_var} is {configured}, which is not an "
                     "executable file")
    on_path = shutil.which(name)
    if on_path:
        return Found(name, on_path, "PATH", "found on PATH")
    chosen = chosen_install(directory)
    if chosen is not None and _executable(str(chosen.program(name))):
        return Found(name, str(chosen.program(name)), "installed",
                     f"the copy of {chosen.version} 'fdbrecipes server install' put in place")
    for folder in SYSTEM_DIRS:
        candidate = os.path.join(folder, name)
        if _executable(candidate):
            return Found(name, candidate, "system", f"where FoundationDB's packages put it "
                         f"({folder})")
    return Found(name, None, "missing", f"not found (looked at ${env_var}, PATH, the "
                 f"installed copy in {installed_root(directory)}, {', '.join(SYSTEM_DIRS)})")


def _bindings_folder() -> Optional[Path]:
    """The folder of the ``fdb`` package (without importing ``fdb.impl``)."""
    from importlib.util import find_spec

    spec = find_spec("fdb")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _system_library(name: str) -> Optional[str]:
    """Where the system's library search finds ``name``, if it does: a path, or the
    name the system's library cache knows it by."""
    import ctypes.util

    for folder in SYSTEM_LIBRARY_DIRS:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return ctypes.util.find_library("fdb_c")


def _bindings_copy(name: str) -> Optional[str]:
    """The library the bindings load before anything else: ``fdb/<name>``, or the path
    in ``fdb/<name>.pth`` (relative to that folder)."""
    bindings = _bindings_folder()
    if bindings is None:
        return None
    if (bindings / name).is_file():
        return str(bindings / name)
    pth = bindings / f"{name}.pth"
    if pth.is_file():
        return str(bindings / pth.read_text().strip())
    return None


def find_client_library(directory: Optional[str] = None) -> Found:
    """Find ``libfdb_c`` by the search order: the bindings' own folder (or its
    ``.pth`` file), ``LD_LIBRARY_PATH`` (``DYLD_LIBRARY_PATH`` on macOS), the installed
    copy, the system's library search (on macOS before the installed copy)."""
    name = library_name("macos" if sys.platform == "darwin" else "linux")
    own = _bindings_copy(name)
    if own is not None:
        return Found("libfdb_c", own, "bindings",
                     "the bindings' own folder, where they look first")
    variable = "DYLD_LIBRARY_PATH" if sys.platform == "darwin" else "LD_LIBRARY_PATH"
    for folder in filter(None, os.environ.get(variable, "").split(os.pathsep)):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return Found("libfdb_c", candidate, variable, f"found through ${variable}")
    system = _system_library(name)
    if system is not None and sys.platform == "darwin":
        return Found("libfdb_c", system, "system", "the system's (on macOS the bindings "
                     "load it before any other copy)")
    chosen = chosen_install(directory)
    if chosen is not None and chosen.library.is_file():
        return Found("libfdb_c", str(chosen.library), "installed",
                     f"the copy of {chosen.version} 'fdbrecipes server install' put in "
                     "place, loaded by fdbrecipes before the bindings")
    if system is not None:
        return Found("libfdb_c", system, "system", "the system's library search")
    return Found("libfdb_c", None, "missing", f"not found (looked at the bindings' folder, "
                 f"${variable}, the installed copy in {installed_root(directory)}, the "
                 "system's library search)")
