"""Loading the client library of the search order: :func:`use_installed`.

The ``fdb`` bindings load ``libfdb_c`` when ``fdb.impl`` is first imported (by
``fdb.api_version()``), by a fixed name: their own folder first, then the system's
library search (``LD_LIBRARY_PATH``, the loader's cache, ``/usr/lib``, ...).  A copy
installed by ``fdbrecipes server install`` is in none of those places, so
:func:`use_installed` loads it first, by its full path: on Linux the loader then hands
the bindings that library for their ``libfdb_c.so`` (a library already loaded is
matched by its ``SONAME``); on macOS the bindings' fallback, ``ctypes.util.find_library``,
is pointed at its folder while they load.  Either way no ``LD_LIBRARY_PATH`` is needed,
and the bindings, not fdbrecipes, still select the API version.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from pathlib import Path
from typing import Any, Iterator, List, Optional

from .find import INSTALL_HINT, Found, find_client_library

__all__ = ["ClientLibraryNotFoundError", "loaded_client_library", "use_installed"]

#: The libraries loaded by :func:`use_installed`, kept so they are never unloaded.
_PRELOADED: List[Any] = []


class ClientLibraryNotFoundError(RuntimeError):
    """No ``libfdb_c`` to load (the message says where it looked and what to do)."""


def loaded_client_library() -> Optional[str]:
    """The path of the ``libfdb_c`` loaded in this process, or None (on Linux from
    ``/proc/self/maps``, on macOS from the loader's list of images)."""
    if sys.platform == "darwin":
        libc = ctypes.CDLL(None)
        image_name = getattr(libc, "_dyld_get_image_name")  # noqa: B009 (a C function)
        image_name.restype = ctypes.c_char_p
        for index in range(int(getattr(libc, "_dyld_image_count")())):  # noqa: B009
            name = image_name(index)
            if name and os.path.basename(name.decode()).startswith("libfdb_c"):
                return str(name.decode())
        return None
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(maxsplit=5)[-1].strip()
                if path.startswith("/") and os.path.basename(path).startswith("libfdb_c"):
                    return path
    except OSError:
        return None
    return None


@contextlib.contextmanager
def _found_by_ctypes(folder: str) -> Iterator[None]:
    """On macOS, make ``ctypes.util.find_library`` (the bindings' fallback) look in
    ``folder`` first while the block runs; nothing elsewhere."""
    if sys.platform != "darwin":
        yield
        return
    variable = "DYLD_FALLBACK_LIBRARY_PATH"
    before = os.environ.get(variable)
    os.environ[variable] = os.pathsep.join(filter(None, [folder, before]))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = before


def use_installed(directory: Optional[str] = None) -> Found:
    """Load the client library the search order finds (see :mod:`fdbrecipes.server.find`),
    so that the ``fdb`` bindings use it; call it before ``fdb.api_version()``::

        import fdbrecipes.server
        fdbrecipes.server.use_installed()   # the copy 'fdbrecipes server install' put in place
        import fdb
        fdb.api_version(730)                 # your application still selects the version

    Where the search ends at the installed copy (under ``directory``, default
    ``$FDBRECIPES_SERVER_DIR`` or the per-user folder), that copy is loaded by its path
    first; otherwise the bindings load the library they find themselves.  Then
    ``fdb.impl`` is imported (which loads the library and selects no API version).
    Called after the bindings loaded a library, it changes nothing and says which.
    Returns what was loaded, and why.

    Raises:
        ClientLibraryNotFoundError: no ``libfdb_c`` anywhere (the message says where it
            looked), or the library found cannot be loaded here.
    """
    if "fdb.impl" in sys.modules:
        return Found("libfdb_c", loaded_client_library(), "loaded",
                     "the bindings had loaded it already")
    found = find_client_library(directory)
    if found.source == "installed" and found.path is not None:
        try:
            _PRELOADED.append(ctypes.CDLL(found.path, mode=ctypes.RTLD_GLOBAL))
        except OSError as e:
            raise ClientLibraryNotFoundError(f"{found.path} cannot be loaded ({e}): "
                                             f"{INSTALL_HINT}") from None
    try:
        with _found_by_ctypes(str(Path(found.path).parent) if found.path else ""):
            import fdb.impl  # noqa: F401  (loads libfdb_c; selects no API version)
    except Exception as e:
        if found.path is None:
            raise ClientLibraryNotFoundError(f"libfdb_c {found.why}: {INSTALL_HINT}") from None
        raise ClientLibraryNotFoundError(f"{found.path} ({found.why}) cannot be loaded ({e}): "
                                         f"{INSTALL_HINT}") from None
    loaded = loaded_client_library()
    if found.path is None:
        return Found("libfdb_c", loaded, "bindings", "the bindings' own search")
    if loaded and os.path.isabs(found.path) and \
            os.path.realpath(loaded) != os.path.realpath(found.path):
        return Found("libfdb_c", loaded, "bindings",
                     f"the bindings loaded this one, not {found.path} ({found.why})")
    return Found("libfdb_c", loaded or found.path, found.source, found.why)
