"""FoundationDB itself, for development: install it, find it, run it.

* ``fdbrecipes server install`` (:func:`install`): the official release's
  ``fdbserver``, ``fdbcli`` and ``libfdb_c`` for this platform, checked against their
  published SHA-256 sums, in a per-user folder, one folder per version
  (:mod:`.releases` says which assets each platform uses, :mod:`.fetch` downloads,
  :mod:`.unpack` takes the files out of the packages, :mod:`.install` puts them in
  place);
* the one search order every ``fdbrecipes`` command, the pytest plugin and
  ``LocalCluster`` use to find ``fdbserver``, ``fdbcli`` and ``libfdb_c``
  (:mod:`.find`), and :func:`~fdbrecipes.server.client.use_installed`, which makes
  the ``fdb`` bindings load the library it finds, for application code too
  (:mod:`.client`);
* ``fdbrecipes server start|stop|status``: a persistent local server (:mod:`.daemon`);
  ``fdbrecipes server info`` says what is installed and what each command uses
  (:mod:`.command`).

Nothing here selects an API version, and importing it loads no ``libfdb_c``.
"""

from __future__ import annotations

from .client import ClientLibraryNotFoundError, loaded_client_library, use_installed
from .find import Found, Installed, chosen_install, find_client_library, find_program, installed
from .install import InstallError, InstallResult, install
from .releases import DEFAULT_VERSION, UnsupportedPlatformError

__all__ = ["DEFAULT_VERSION", "ClientLibraryNotFoundError", "Found", "InstallError",
           "InstallResult", "Installed", "UnsupportedPlatformError", "chosen_install",
           "find_client_library", "find_program", "install", "installed",
           "loaded_client_library", "use_installed"]
