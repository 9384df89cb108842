"""Downloading a release's files, with progress and their SHA-256, from the release
host, a mirror (``--from URL``) or a copy on disk (``--from DIR``).

A source holds ``<version>/<asset>`` and ``<version>/<asset>.sha256``, as the release
host does; a folder may also hold the files directly (``DIR/<asset>``).  Only the
standard library is used (:mod:`urllib`), with a timeout on every network wait, so an
unreachable host fails in seconds with the URL in the message.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, Optional, TextIO

from .releases import RELEASE_HOST, parse_sha256

__all__ = ["TIMEOUT", "DownloadError", "Progress", "Source"]

#: Seconds any one network wait (connecting, each read) may take.
TIMEOUT = 15.0
_CHUNK = 1 << 16


class DownloadError(RuntimeError):
    """A file could not be had (the message names the URL or path, and ``--from``)."""


class Progress:
    """Reports a download's progress on ``out``: one line rewritten in place on a
    terminal, else a line at each quarter."""

    def __init__(self, name: str, total: Optional[int], out: Optional[TextIO]) -> None:
        self.name, self.total, self.out = name, total, out
        self.done = 0
        self._shown = 0.0  # the last quarter said (off a terminal), or when (on one)
        self._tty = bool(out is not None and out.isatty())

    def _line(self) -> str:
        if self.total:
            return (f"  {self.name}: {self.done / 1e6:.1f} of {self.total / 1e6:.1f} MB "
                    f"({100 * self.done // self.total}%)")
        return f"  {self.name}: {self.done / 1e6:.1f} MB"

    def add(self, n: int) -> None:
        """``n`` more bytes arrived."""
        self.done += n
        if self.out is None:
            return
        if self._tty:
            now = time.monotonic()
            if now - self._shown >= 0.2:
                self._shown = now
                self.out.write("\r" + self._line())
                self.out.flush()
        elif self.total:
            quarter = 4 * self.done // self.total
            if quarter > self._shown:
                self._shown = quarter
                self.out.write(self._line() + "\n")
                self.out.flush()

    def finish(self) -> None:
        """The download is complete."""
        if self.out is not None and self._tty:
            self.out.write("\r" + self._line() + "\n")
            self.out.flush()


@dataclass(frozen=True)
class Source:
    """Where a release's files come from: a base URL (``https://...``, ``http://...``,
    ``file://...``) or a folder.

    Attributes:
        base: the URL or the folder, as given (default: the release host).
        given: whether it was given (``--from``), for the messages.
    """

    base: str = RELEASE_HOST
    given: bool = False

    @property
    def is_url(self) -> bool:
        return "://" in self.base

    def where(self, version: str, name: str) -> str:
        """The URL or path of ``name`` (an asset or its ``.sha256``) of ``version``."""
        if self.is_url:
            return f"{self.base.rstrip('/')}/{version}/{name}"
        nested = Path(self.base).expanduser() / version / name
        if nested.exists() or not (Path(self.base).expanduser() / name).exists():
            return str(nested)
        return str(Path(self.base).expanduser() / name)

    def _hint(self) -> str:
        if self.given:
            return ("check --from: it must hold <version>/<file> and <version>/<file>.sha256 "
                    "as the release host does")
        return ("is the release host reachable from here? --from URL|DIR installs from a "
                "mirror or from a copy of the release's files")

    def _open(self, where: str) -> IO[bytes]:
        """``where`` opened for reading.  Raises FileNotFoundError where there is no
        such file (HTTP 404), :class:`DownloadError` for anything else."""
        if not self.is_url:
            return open(where, "rb")
        request = urllib.request.Request(where, headers={"User-Agent": "fdbrecipes"})
        try:
            response: IO[bytes] = urllib.request.urlopen(request, timeout=TIMEOUT)
            return response
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise FileNotFoundError(where) from None
            raise DownloadError(f"cannot download {where}: HTTP {e.code} {e.reason}; "
                                f"{self._hint()}") from None
        except (urllib.error.URLError, OSError, socket.timeout) as e:
            reason = getattr(e, "reason", e)
            raise DownloadError(f"cannot download {where}: {reason}; {self._hint()}") from None

    def published_sha256(self, version: str, asset: str) -> Optional[str]:
        """The sum in ``<asset>.sha256`` beside the asset, or None where there is none.

        Raises:
            DownloadError: the source cannot be read, or the file holds no sum.
        """
        where = self.where(version, f"{asset}.sha256")
        try:
            with self._open(where) as file:
                text = file.read(4096).decode("utf-8", "replace")
        except FileNotFoundError:
            return None
        except OSError as e:
            raise DownloadError(f"cannot read {where}: {e}; {self._hint()}") from None
        found = parse_sha256(text)
        if found is None:
            raise DownloadError(f"{where} holds no SHA-256 sum")
        return found

    def exists(self, version: str, name: str) -> bool:
        """Whether the source has ``name`` of ``version`` (a URL is opened, then closed).

        Raises:
            DownloadError: the source cannot be read.
        """
        try:
            with self._open(self.where(version, name)):
                return True
        except FileNotFoundError:
            return False
        except OSError as e:
            raise DownloadError(f"cannot read {self.where(version, name)}: {e}; "
                                f"{self._hint()}") from None

    def missing(self, version: str, asset: str) -> DownloadError:
        """The error for an asset the source does not have."""
        return DownloadError(f"{self.where(version, asset)} does not exist: FoundationDB "
                             f"{version} may publish no {asset} (see 'fdbrecipes server "
                             "install --help' for the platforms each release covers); "
                             f"{self._hint()}")

    def download(self, version: str, asset: str, target: Path,
                 out: Optional[TextIO] = sys.stderr) -> str:
        """Copy ``asset`` to ``target``, reporting progress on ``out``; its SHA-256.

        Raises:
            DownloadError: it is not there (the message says the release may not
                cover this platform), or the transfer failed.
        """
        where = self.where(version, asset)
        try:
            source = self._open(where)
        except FileNotFoundError:
            raise self.missing(version, asset) from None
        except OSError as e:
            raise DownloadError(f"cannot read {where}: {e}; {self._hint()}") from None
        digest = hashlib.sha256()
        with source:
            length = getattr(source, "headers", {}).get("Content-Length") if self.is_url \
                else os.fstat(source.fileno()).st_size
            progress = Progress(asset, int(length) if length else None, out)
            try:
                with open(target, "wb") as file:
                    _copy(source, file, digest, progress)
            except (OSError, socket.timeout, http.client.HTTPException) as e:
                raise DownloadError(f"downloading {where} failed: {e!r}; {self._hint()}") \
                    from None
            if progress.total is not None and progress.done != progress.total:
                raise DownloadError(f"downloading {where} stopped after {progress.done} of "
                                    f"{progress.total} bytes; {self._hint()}")
            progress.finish()
        return digest.hexdigest()


def _copy(source: IO[bytes], target: BinaryIO, digest: Any, progress: Progress) -> None:
    """Copy ``source`` to ``target``, feeding ``digest`` and ``progress``."""
    while True:
        chunk = source.read(_CHUNK)
        if not chunk:
            return
        target.write(chunk)
        digest.update(chunk)
        progress.add(len(chunk))
