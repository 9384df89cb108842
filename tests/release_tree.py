"""A FoundationDB release laid out as the release host serves it, built at test time,
and an HTTP server for it on 127.0.0.1.

:func:`build_release` packs the programs it is given into real Debian packages with
``dpkg-deb --build`` (gzip, as FoundationDB's CPack-built packages are), named as
:func:`fdbrecipes.server.releases.release` names them for this platform, each with
its ``.sha256`` beside it (``<sum>  <file name>``, as ``sha256sum`` writes it).
Nothing of it is kept: the tests build it in a temporary folder.

:class:`ReleaseServer` serves such a folder; a file named in ``stall`` is sent half
way, then the response waits (for ``release``, at most a minute) so a test can kill
the client in the middle of a download.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Set

from fdbrecipes.server.releases import release


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_deb(name: str, version: str, files: Mapping[str, Path], target: Path) -> None:
    """A Debian package ``target`` holding each of ``files`` (path in the package ->
    file to copy), made with ``dpkg-deb --build``, and ``target.sha256``."""
    root = target.parent / f".{target.name}.root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: fdbrecipes tests\nDescription: a release-like package for tests\n")
    for inside, source in files.items():
        (root / inside).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, root / inside)
    subprocess.run(["dpkg-deb", "-Zgzip", "-z1", "--root-owner-group", "--build", str(root),
                    str(target)], check=True, capture_output=True)
    shutil.rmtree(root)
    (target.parent / f"{target.name}.sha256").write_text(f"{sha256_of(target)}  {target.name}\n")


def build_release(base: Path, version: str, platform: str, programs: Mapping[str, Path]) -> Path:
    """``base/<version>/`` holding the release's packages for ``platform``, made from
    ``programs`` (``fdbserver``, ``fdbcli``, ``libfdb_c.so`` -> their files); the folder."""
    folder = base / version
    folder.mkdir(parents=True)
    for asset in release(version, platform).assets:
        files = {inside: programs[Path(installed).name]
                 for installed, inside in asset.files.items()}
        build_deb(asset.name.split("_")[0], version, files, folder / asset.name)
    return folder


class _Handler(http.server.SimpleHTTPRequestHandler):
    server: Any

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        name = self.path.rsplit("/", 1)[-1]
        if name not in self.server.stall:
            super().do_GET()
            return
        path = Path(self.translate_path(self.path))
        data = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.server.stalled.set()
        self.server.release.wait(60)


class ReleaseServer:
    """Serves ``folder`` on ``url`` (``http://127.0.0.1:PORT``) in a thread.

    Attributes:
        stall: file names sent only half way (then the response waits).
        stalled: set once a stalled file's first half was sent.
    """

    def __init__(self, folder: Path) -> None:
        def handler(*args: Any, **kwargs: Any) -> _Handler:
            return _Handler(*args, directory=str(folder), **kwargs)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.stall: Set[str] = set()
        self.stalled = threading.Event()
        self._release = threading.Event()
        setattr(self._server, "stall", self.stall)  # noqa: B010 (read by the handler)
        setattr(self._server, "stalled", self.stalled)  # noqa: B010
        setattr(self._server, "release", self._release)  # noqa: B010
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ReleaseServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


@contextlib.contextmanager
def serving(folder: Path, stall: Optional[Set[str]] = None) -> Iterator[ReleaseServer]:
    """A :class:`ReleaseServer` of ``folder`` for the block."""
    with ReleaseServer(folder) as server:
        server.stall.update(stall or set())
        yield server


def environment_without_foundationdb(base: Mapping[str, str], bin_dir: Path) -> Dict[str, str]:
    """``base`` with ``PATH`` reduced to ``bin_dir`` and no variable that points at a
    FoundationDB (``LD_LIBRARY_PATH``, ``FDBSERVER``, ``FDBCLI``, ``FDB_CLUSTER_FILE``)."""
    env = {k: v for k, v in base.items()
           if k not in ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "FDBSERVER", "FDBCLI",
                        "FDB_CLUSTER_FILE", "FDBRECIPES_SERVER_DIR", "PYTHONPATH")}
    env["PATH"] = str(bin_dir)
    return env
