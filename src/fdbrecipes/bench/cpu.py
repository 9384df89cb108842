"""CPU time: the client process's own, and the cluster's servers' when they run here.

A client measures its process CPU time (:func:`time.process_time`: every thread,
FoundationDB's network thread included) over its measured loop.  The servers' CPU time
is read from ``/proc/<pid>/stat`` of the ``fdbserver`` processes on this machine whose
command line names the run's cluster file (the throwaway server the suite starts, or a
local server started with the same cluster file); for a remote cluster none is found and
the figure is left out.  Best effort: nothing here stops a run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

PROC = Path("/proc")
#: Options through which fdbserver is given its cluster file.
CLUSTER_FILE_OPTIONS = ("--cluster-file", "--cluster_file", "-C")


def ticks_per_second() -> int:
    """Clock ticks per second of ``/proc/<pid>/stat`` times (100 where unknown)."""
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100


def names_cluster_file(args: Sequence[str], cluster_file: str) -> bool:
    """Whether the command line ``args`` (program first) gives ``cluster_file`` to one of
    :data:`CLUSTER_FILE_OPTIONS` (``--opt path`` or ``--opt=path``).  Paths are compared
    after :func:`os.path.realpath`."""
    wanted = os.path.realpath(cluster_file)
    for i, arg in enumerate(args[1:], start=1):
        option, equals, value = arg.partition("=")
        if equals and option in CLUSTER_FILE_OPTIONS:
            given = value
        elif arg in CLUSTER_FILE_OPTIONS and i + 1 < len(args):
            given = args[i + 1]
        else:
            continue
        if os.path.realpath(given) == wanted:
            return True
    return False


def server_pids(cluster_file: str, proc: Path = PROC) -> Tuple[int, ...]:
    """The ``fdbserver`` processes on this machine serving ``cluster_file`` (empty when
    there are none or ``/proc`` cannot be read)."""
    pids: List[int] = []
    try:
        entries = [e for e in proc.iterdir() if e.name.isdigit()]
    except OSError:
        return ()
    for entry in entries:
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        args = [os.fsdecode(a) for a in raw.split(b"\0") if a]
        if (args and os.path.basename(args[0]) == "fdbserver"
                and names_cluster_file(args, cluster_file)):
            pids.append(int(entry.name))
    return tuple(sorted(pids))


def stat_cpu_seconds(stat: str, ticks: int) -> float:
    """User + system CPU seconds from the text of a ``/proc/<pid>/stat`` file (fields 14
    and 15, counted after the parenthesized command name, which may hold spaces)."""
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / ticks


def server_cpu(pids: Sequence[int], proc: Path = PROC) -> Optional[float]:
    """Total CPU seconds the processes ``pids`` have used; None when there are none or
    one of them cannot be read (it exited)."""
    if not pids:
        return None
    ticks = ticks_per_second()
    try:
        return sum(stat_cpu_seconds((proc / str(pid) / "stat").read_text(), ticks)
                   for pid in pids)
    except (OSError, ValueError, IndexError):
        return None
