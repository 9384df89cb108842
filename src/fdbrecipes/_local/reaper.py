"""A watchdog that kills a local cluster's servers if the Python process that started
them dies without cleaning up (SIGKILL, a CI job's timeout, a crash).

:class:`Reaper` runs this file (``python -I reaper.py [directory]``: it needs
nothing but the standard library, so not even fdbrecipes has to be importable) in a
session of its own (Ctrl-C in the terminal does not reach it) with a pipe on its
standard input, and tells it through the pipe which process groups to watch
(``watch <pgid>``), which ended (``forget <pgid>``), and that the cluster was cleaned
up (``done``).  When the pipe closes without ``done`` (its parent died), the
watchdog SIGKILLs every group still watched and removes ``directory`` (when given:
a temporary directory of the cluster's own).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from typing import IO, Optional, Set


class Reaper:
    """The parent's end of the watchdog: one per local cluster."""

    def __init__(self, directory: Optional[str]) -> None:
        args = [sys.executable, "-I", os.path.abspath(__file__)]
        self._process = subprocess.Popen(
            args + ([directory] if directory else []), stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True)

    def _say(self, line: str) -> None:
        stdin: Optional[IO[str]] = self._process.stdin
        if stdin is None or stdin.closed:
            return
        try:
            stdin.write(line + "\n")
            stdin.flush()
        except (BrokenPipeError, ValueError):  # the watchdog is gone: nothing to tell
            pass

    def watch(self, pgid: int) -> None:
        """Kill process group ``pgid`` if this process dies first."""
        self._say(f"watch {pgid}")

    def forget(self, pgid: int) -> None:
        """``pgid`` ended (its number may be reused): leave it alone."""
        self._say(f"forget {pgid}")

    def close(self) -> None:
        """The cluster is cleaned up: let the watchdog end without killing anything."""
        self._say("done")
        if self._process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self._process.stdin.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover - it only reads a pipe
            self._process.kill()
            self._process.wait()


def serve(lines: IO[str], directory: Optional[str]) -> bool:
    """Follow the parent's lines; when they end without ``done``, kill what is
    watched and remove ``directory``.  Returns whether it had to."""
    watched: Set[int] = set()
    for line in lines:
        word, _, arg = line.strip().partition(" ")
        if word == "done":
            return False
        if word == "watch":
            watched.add(int(arg))
        elif word == "forget":
            watched.discard(int(arg))
    for pgid in watched:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
    return True


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the pipe's end stops it
    serve(sys.stdin, sys.argv[1] if len(sys.argv) > 1 else None)
