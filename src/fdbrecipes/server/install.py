"""``fdbrecipes server install``: the official FoundationDB binaries in a per-user folder,
without root.

:func:`install` takes the assets :func:`~fdbrecipes.server.releases.release` names for
this platform, checks each against its published ``.sha256`` (and the project's pin,
if any), takes ``fdbserver``, ``fdbcli`` and ``libfdb_c`` out of them, checks that the
programs run and say the version asked for, and only then moves the version's folder
into place with one ``rename``::

    <root>/7.3.79/bin/fdbserver
    <root>/7.3.79/bin/fdbcli
    <root>/7.3.79/lib/libfdb_c.so          (libfdb_c.dylib on macOS)
    <root>/7.3.79/installed.json           (written last: what came from where)

Everything before that happens in ``<root>/.staging-*``, removed on any failure and,
after a crash or a kill, by the next install: an interrupted or refused install
leaves no version folder, and the next run starts afresh.  A lock on ``<root>/.lock``
keeps two installs apart; installing a version already there does nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, TextIO, Tuple

from .fetch import DownloadError, Source
from .find import RECORD, installed_root
from .lock import locked
from .releases import (
    DEFAULT_VERSION,
    PINNED_SHA256,
    Asset,
    Release,
    check_version,
    platform_key,
    release,
)
from .unpack import PackageError, unpack

__all__ = ["InstallError", "InstallResult", "install"]

#: Seconds ``fdbserver --version`` may take in the check after unpacking.
VERSION_CHECK_TIMEOUT = 60.0


class InstallError(RuntimeError):
    """The install was refused or failed; nothing was installed."""


@dataclass(frozen=True)
class InstallResult:
    """What :func:`install` did.

    Attributes:
        version: the FoundationDB version.
        directory: its folder.
        already: it was installed before: nothing was done.
    """

    version: str
    directory: Path
    already: bool


def _complete(directory: Path, wanted: Release) -> bool:
    """Whether ``directory`` holds the version, record and files included."""
    return (directory / RECORD).is_file() and all((directory / f).is_file()
                                                   for f in wanted.files)


def _expected_sums(source: Source, version: str, asset: Asset) -> List[Tuple[str, str]]:
    """The sums ``asset`` must have, each with where it comes from.

    Raises:
        InstallError: there is none to check it against.
    """
    sums: List[Tuple[str, str]] = []
    published = source.published_sha256(version, asset.name)
    if published is not None:
        sums.append((published, source.where(version, f"{asset.name}.sha256")))
    pinned = PINNED_SHA256.get((version, asset.name))
    if pinned is not None:
        sums.append((pinned, "the sum fdbrecipes pins for it"))
    if not sums:
        if not source.exists(version, asset.name):
            raise source.missing(version, asset.name)
        raise InstallError(f"no SHA-256 to check {asset.name} against: "
                           f"{source.where(version, asset.name + '.sha256')} does not exist and "
                           "fdbrecipes pins no sum for it; refused, nothing installed")
    return sums


def _check_runs(folder: Path, version: str) -> None:
    """Check that the unpacked programs run here and are ``version``."""
    for program in ("fdbserver", "fdbcli"):
        path = folder / "bin" / program
        try:
            done = subprocess.run([str(path), "--version"], capture_output=True, text=True,
                                  timeout=VERSION_CHECK_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise InstallError(f"the unpacked {program} does not run on this machine: {e}; "
                               "nothing installed") from None
        if done.returncode != 0 or version not in done.stdout:
            said = (done.stdout + done.stderr).strip().splitlines()[:1]
            raise InstallError(f"the unpacked {program} is not FoundationDB {version} (it "
                               f"says {said[0] if said else 'nothing'!r}, exit status "
                               f"{done.returncode}); nothing installed")


def _fetch(wanted: Release, source: Source, staging: Path, out: Optional[TextIO]) -> Path:
    """Download, check and unpack every asset into ``staging``; the unpacked folder."""
    folder = staging / wanted.version
    folder.mkdir()
    expected = {asset.name: _expected_sums(source, wanted.version, asset)
                for asset in wanted.assets}  # every sum first: a refusal downloads nothing
    for asset in wanted.assets:
        package = staging / asset.name
        actual = source.download(wanted.version, asset.name, package, out)
        for digest, where in expected[asset.name]:
            if actual != digest:
                raise InstallError(f"{asset.name} has SHA-256 {actual}, but {where} says "
                                   f"{digest}: refused (a damaged download, or not the "
                                   "official file); nothing installed")
        unpack(asset.kind, package, asset.files, folder)
        package.unlink()
    _check_runs(folder, wanted.version)
    record = {"version": wanted.version, "platform": wanted.platform, "source": source.base,
              "assets": [{"name": a.name, "files": sorted(a.files)} for a in wanted.assets],
              "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (folder / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return folder


def install(version: str = DEFAULT_VERSION, directory: Optional[str] = None,
            source: Optional[str] = None, *, platform: Optional[str] = None,
            out: Optional[TextIO] = sys.stderr) -> InstallResult:
    """Install FoundationDB ``version``'s ``fdbserver``, ``fdbcli`` and ``libfdb_c``
    under ``directory`` (default :func:`~fdbrecipes.server.find.installed_root`), one
    folder per version, from ``source`` (a URL or a folder laid out as the release
    host, default the release host), reporting downloads on ``out``.

    Raises:
        TypeError or ValueError: ``version`` is not ``X.Y.Z``.
        UnsupportedPlatformError: no release covers this platform.
        InstallError: a download failed, a checksum did not match or was missing, a
            package lacked a file, or the programs do not run here; nothing was
            installed (the message says which, with the URL and ``--from``).
    """
    check_version(version)
    wanted = release(version, platform or platform_key())
    root = installed_root(directory)
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    target = root / version
    with locked(root):
        for stale in root.glob(".staging-*"):  # left by an install that was killed
            shutil.rmtree(stale, ignore_errors=True)
        if _complete(target, wanted):
            return InstallResult(version, target, True)
        if target.exists():  # a folder without its record is no install
            shutil.rmtree(target)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=".staging-"))
        try:
            folder = _fetch(wanted, Source(source, True) if source else Source(), staging,
                            out)
            folder.rename(target)
        except (DownloadError, PackageError) as e:
            raise InstallError(f"{e}; nothing installed") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return InstallResult(version, target, False)
