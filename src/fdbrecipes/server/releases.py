"""Which files of an official FoundationDB release ``fdbrecipes server install`` takes,
per platform, and how each is checked.

The release host (``https://github.com/apple/foundationdb/releases/download``) serves
``<version>/<asset>``, and beside each asset ``<asset>.sha256`` (CPack writes one per
package: ``CPACK_PACKAGE_CHECKSUM SHA256`` in FoundationDB's ``cmake/InstallLayout.cmake``;
the ``.pkg`` installers have one too).  Per platform:

========================  ==============================================================
platform                  assets (``V`` is the version, e.g. 7.3.79)
========================  ==============================================================
Linux x86_64              ``foundationdb-clients_V-1_amd64.deb`` (``fdbcli``,
                          ``libfdb_c.so``), ``foundationdb-server_V-1_amd64.deb``
                          (``fdbserver``)
Linux aarch64             ``foundationdb-clients_V-1_aarch64.deb``,
                          ``foundationdb-server_V-1_aarch64.deb`` (published from
                          7.3.58 on; older releases have no Linux aarch64 packages)
macOS arm64 (Apple)       ``FoundationDB-V_arm64.pkg`` (all three programs)
macOS x86_64 (Intel)      ``FoundationDB-V_x86_64.pkg``
========================  ==============================================================

No release covers Windows (FoundationDB 7.x publishes no Windows installer), 32-bit
systems or other Linux architectures (ppc64le, s390x); :func:`platform_key` refuses
them by name.  The ``.rpm`` packages and the loose binaries (``fdbserver.x86_64``, ...)
of a release are not used: the ``.deb`` carries the same files, and one format per
system keeps the unpacking small (:mod:`.unpack`).

Where a release publishes no ``.sha256`` beside an asset, the sum must be pinned in
:data:`PINNED_SHA256`; an asset with neither is refused.  Pure: nothing here touches
the network or the disk.
"""

from __future__ import annotations

import platform as _platform
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Optional, Tuple

from .._values import check_matching

__all__ = ["DEFAULT_VERSION", "PINNED_SHA256", "PLATFORMS", "RELEASE_HOST", "Asset", "Release",
           "UnsupportedPlatformError", "check_version", "library_name", "parse_sha256",
           "platform_key", "release"]

#: The FoundationDB version installed when none is named, the one the project tests
#: (CI's ``FDB_VERSION``; ``tests/unit/test_server.py`` keeps them equal).
DEFAULT_VERSION = "7.3.79"
#: Where the official releases are, as ``<RELEASE_HOST>/<version>/<asset>``.
RELEASE_HOST = "https://github.com/apple/foundationdb/releases/download"
#: SHA-256 sums the project vouches for, by ``(version, asset)``: used where a release
#: publishes no ``.sha256`` beside an asset, and checked as well where it does.  Empty:
#: every 7.3 release publishes its sums.
PINNED_SHA256: Mapping[Tuple[str, str], str] = MappingProxyType({})

#: The platforms a release covers, as :func:`platform_key` names them.
PLATFORMS = ("linux-x86_64", "linux-aarch64", "macos-arm64", "macos-x86_64")
_VERSION = re.compile(r"\d+\.\d+\.\d+\Z")
_SHA256 = re.compile(r"\b[0-9a-fA-F]{64}\b")


class UnsupportedPlatformError(RuntimeError):
    """FoundationDB publishes nothing for this system or processor."""


@dataclass(frozen=True)
class Asset:
    """One file of a release and what is taken from it.

    Attributes:
        name: its file name on the release host (``foundationdb-server_7.3.79-1_amd64.deb``).
        files: each file installed from it, by its path in the installed folder
            (``bin/fdbserver``), mapped to its path inside the package
            (``usr/sbin/fdbserver``; in a macOS ``.pkg``, inside the expanded component
            package).
    """

    name: str
    files: Mapping[str, str]

    @property
    def kind(self) -> str:
        """``"deb"`` or ``"pkg"``: how it is unpacked."""
        return self.name.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Release:
    """What one FoundationDB version is made of on one platform."""

    version: str
    platform: str
    assets: Tuple[Asset, ...]

    @property
    def files(self) -> Tuple[str, ...]:
        """Every installed file's path in the installed folder."""
        return tuple(path for asset in self.assets for path in asset.files)


def check_version(version: object) -> str:
    """``version`` as ``X.Y.Z``.

    Raises:
        TypeError or ValueError: it is not a version string such as ``"7.3.79"``.
    """
    return check_matching(version, "version", _VERSION,
                          "a FoundationDB version such as '7.3.79'")


def platform_key(system: Optional[str] = None, machine: Optional[str] = None) -> str:
    """This machine's platform as :data:`PLATFORMS` names it (or that of ``system`` and
    ``machine``, as :func:`platform.system` and :func:`platform.machine` spell them).

    Raises:
        UnsupportedPlatformError: FoundationDB publishes no release for it.
    """
    system = system if system is not None else _platform.system()
    machine = (machine if machine is not None else _platform.machine()).lower()
    names = {"Linux": "linux", "Darwin": "macos"}
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "arm64"}
    os_name = names.get(system)
    cpu = arch.get(machine)
    if os_name == "linux" and cpu == "arm64":
        cpu = "aarch64"
    if os_name == "macos" and cpu == "aarch64":
        cpu = "arm64"
    key = f"{os_name}-{cpu}"
    if key not in PLATFORMS:
        raise UnsupportedPlatformError(
            f"FoundationDB publishes no release for {system} {machine}: the releases cover "
            "Linux x86_64 and aarch64 and macOS arm64 and x86_64 (on other systems, run the "
            "server in a container: see the Deploy page)")
    return key


def library_name(platform: str) -> str:
    """The client library's file name on ``platform``: ``libfdb_c.so`` or ``libfdb_c.dylib``."""
    return "libfdb_c.dylib" if platform.startswith("macos") else "libfdb_c.so"


def release(version: str, platform: str) -> Release:
    """The assets of FoundationDB ``version`` that ``platform`` uses.

    Raises:
        TypeError or ValueError: ``version`` is not ``X.Y.Z``, or ``platform`` is not
            one of :data:`PLATFORMS`.
    """
    check_version(version)
    if platform not in PLATFORMS:
        raise ValueError(f"platform must be one of {', '.join(PLATFORMS)}, got {platform!r}")
    assets: Tuple[Asset, ...]
    if platform.startswith("linux"):
        arch = "amd64" if platform == "linux-x86_64" else "aarch64"
        assets = (
            Asset(f"foundationdb-clients_{version}-1_{arch}.deb",
                  MappingProxyType({"bin/fdbcli": "usr/bin/fdbcli",
                                    "lib/libfdb_c.so": "usr/lib/libfdb_c.so"})),
            Asset(f"foundationdb-server_{version}-1_{arch}.deb",
                  MappingProxyType({"bin/fdbserver": "usr/sbin/fdbserver"})),
        )
    else:
        arch = platform.split("-", 1)[1]
        clients, server = "FoundationDB-clients.pkg/Payload", "FoundationDB-server.pkg/Payload"
        assets = (Asset(f"FoundationDB-{version}_{arch}.pkg", MappingProxyType({
            "bin/fdbcli": f"{clients}/usr/local/bin/fdbcli",
            "lib/libfdb_c.dylib": f"{clients}/usr/local/lib/libfdb_c.dylib",
            "bin/fdbserver": f"{server}/usr/local/libexec/fdbserver",
        })),)
    return Release(version, platform, assets)


def parse_sha256(text: str) -> Optional[str]:
    """The SHA-256 sum in a ``.sha256`` file, in lower case: the file is the sum alone
    or ``<sum>  <file name>`` (sha256sum's format); None when there is none."""
    found = _SHA256.search(text)
    return found.group(0).lower() if found else None
