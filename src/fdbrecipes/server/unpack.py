"""Taking files out of FoundationDB's packages, without root and without dpkg.

* A ``.deb`` is an ``ar`` archive (``debian-binary``, ``control.tar.*``,
  ``data.tar.*``); :func:`unpack_deb` reads the ``ar`` headers itself and opens the
  data member with :mod:`tarfile` (gzip, which FoundationDB's CPack-built packages
  use, xz, bzip2 or none; zstd where the standard library has it, Python 3.14).
* A macOS ``.pkg`` is a xar archive of component packages; :func:`unpack_pkg` expands
  it with ``pkgutil --expand-full`` (on every Mac) and copies the files out.

Only the files asked for are written, each to a path chosen by the caller, so an
archive's own paths never decide where anything lands.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import IO, Any, BinaryIO, Dict, Mapping, Optional

__all__ = ["PackageError", "unpack", "unpack_deb", "unpack_pkg"]

_AR_MAGIC = b"!<arch>\n"
_AR_HEADER = 60
#: The compressions ``tarfile`` opens, by the data member's suffix.
_TAR_MODES = {"data.tar": "r:", "data.tar.gz": "r:gz", "data.tar.xz": "r:xz",
              "data.tar.bz2": "r:bz2", "data.tar.zst": "r:zst"}


class PackageError(RuntimeError):
    """A package is not what it should be (not an archive, a file missing)."""


class _Slice(io.RawIOBase):
    """A seekable, read-only view of ``size`` bytes of ``file`` from ``offset``."""

    def __init__(self, file: BinaryIO, offset: int, size: int) -> None:
        super().__init__()
        self._file, self._offset, self._size, self._at = file, offset, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        self._at = max(0, min(self._size, base + offset))
        return self._at

    def readinto(self, buffer: Any) -> int:
        wanted = min(len(buffer), self._size - self._at)
        if wanted <= 0:
            return 0
        self._file.seek(self._offset + self._at)
        data = self._file.read(wanted)
        buffer[:len(data)] = data
        self._at += len(data)
        return len(data)


def ar_members(file: BinaryIO) -> Dict[str, _Slice]:
    """The members of an ``ar`` archive by name (GNU's trailing ``/`` removed).

    Raises:
        PackageError: ``file`` is not an ``ar`` archive.
    """
    file.seek(0)
    if file.read(len(_AR_MAGIC)) != _AR_MAGIC:
        raise PackageError("not a Debian package (no ar archive header)")
    members: Dict[str, _Slice] = {}
    offset = len(_AR_MAGIC)
    while True:
        file.seek(offset)
        header = file.read(_AR_HEADER)
        if not header:
            return members
        if len(header) < _AR_HEADER or header[58:60] != b"`\n":
            raise PackageError("not a Debian package (a damaged ar member header)")
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip() or 0)
        members[name] = _Slice(file, offset + _AR_HEADER, size)
        offset += _AR_HEADER + size + (size % 2)  # members are 2-byte aligned


def _open_data(members: Mapping[str, _Slice]) -> tarfile.TarFile:
    """The package's ``data.tar*`` member, opened."""
    for name, mode in _TAR_MODES.items():
        if name in members:
            try:
                open_tar: Any = tarfile.open  # the mode is a str, not one of its literals
                tar: tarfile.TarFile = open_tar(fileobj=io.BufferedReader(members[name]),
                                                mode=mode)
                return tar
            except tarfile.CompressionError as e:
                raise PackageError(f"{name} cannot be read by this Python ({e}): zstd needs "
                                   "Python 3.14 or later") from None
            except (tarfile.TarError, EOFError, OSError) as e:
                raise PackageError(f"{name} is damaged: {e}") from None
    raise PackageError(f"no data.tar member (members: {', '.join(sorted(members))})")


def _member(tar: tarfile.TarFile, path: str) -> Optional[tarfile.TarInfo]:
    """The regular file at ``path`` (``./`` or not), following symbolic links inside
    the archive."""
    by_name = {m.name[2:] if m.name.startswith("./") else m.name.lstrip("/"): m
               for m in tar.getmembers()}
    for _ in range(8):  # a chain of links this long is a loop
        info = by_name.get(path)
        if info is None or info.isfile():
            return info
        if not info.issym():
            return None
        path = os.path.normpath(os.path.join(os.path.dirname(path), info.linkname)).lstrip("/")
    return None


def _write(source: IO[bytes], target: Path) -> None:
    """Copy ``source`` to ``target`` (made executable: programs and the library)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as out:
        shutil.copyfileobj(source, out, 1 << 20)
    target.chmod(0o755)


def unpack_deb(package: BinaryIO, files: Mapping[str, str], into: Path) -> None:
    """Write each of ``files`` (installed path -> path in the package) from the
    ``.deb`` in ``package`` under ``into``.

    Raises:
        PackageError: not a Debian package, its data unreadable, or a file missing.
    """
    with _open_data(ar_members(package)) as tar:
        for installed, inside in files.items():
            info = _member(tar, inside)
            extracted = tar.extractfile(info) if info is not None else None
            if extracted is None:
                raise PackageError(f"{inside} is not in the package")
            with extracted:
                _write(extracted, into / installed)


def unpack_pkg(package: Path, files: Mapping[str, str], into: Path) -> None:
    """Write each of ``files`` (installed path -> path in the expanded package) from
    the macOS ``.pkg`` at ``package`` under ``into``, expanding it with ``pkgutil``.

    Raises:
        PackageError: ``pkgutil`` is missing or refuses the package, or a file is missing.
    """
    pkgutil = shutil.which("pkgutil")
    if pkgutil is None:
        raise PackageError("a macOS .pkg is expanded with pkgutil, which only macOS has")
    with tempfile.TemporaryDirectory(dir=into.parent, prefix=".expand-") as scratch:
        expanded = Path(scratch) / "pkg"
        done = subprocess.run([pkgutil, "--expand-full", str(package), str(expanded)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PackageError(f"pkgutil --expand-full failed: {done.stderr.strip()}")
        for installed, inside in files.items():
            found = expanded / inside
            if not found.is_file():
                raise PackageError(f"{inside} is not in the package")
            with open(found, "rb") as source:
                _write(source, into / installed)


def unpack(kind: str, package: Path, files: Mapping[str, str], into: Path) -> None:
    """:func:`unpack_deb` or :func:`unpack_pkg`, by ``kind`` (``"deb"`` or ``"pkg"``)."""
    if kind == "pkg":
        unpack_pkg(package, files, into)
        return
    with open(package, "rb") as file:
        unpack_deb(file, files, into)
