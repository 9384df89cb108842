"""What a local cluster is made of, decided before anything starts: its processes
(ports, folders, localities, classes), its coordinators, the command line of each
``fdbserver`` and the ``fdbcli`` command that creates its database.

Pure: nothing here starts a process or touches the disk, so the unit tests check
every argument and every command line without a server.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .._values import check_matching

#: Copies of each piece of data, per redundancy mode (FoundationDB's
#: ``configure single|double|triple``).
REPLICAS: Dict[str, int] = {"single": 1, "double": 2, "triple": 3}
#: Coordinators wanted per redundancy mode: a majority of them must live, so 3
#: survive the loss of one and 5 of two (FoundationDB's own advice).
COORDINATORS: Dict[str, int] = {"single": 1, "double": 3, "triple": 5}
#: The process classes ``fdbserver --class`` takes that make sense on one machine
#: (``unset``: no ``--class``; FoundationDB recruits any role there).
CLASSES = ("unset", "storage", "transaction", "log", "stateless", "commit_proxy",
           "grv_proxy", "resolution", "master", "cluster_controller")
#: The most processes a LocalCluster starts (each is a real server: memory, CPU).
MAX_PROCESSES = 32
#: A storage engine name as ``configure`` takes it (``memory``, ``ssd``,
#: ``ssd-redwood-1``, ...): a word, so it cannot smuggle another fdbcli command in.
ENGINE = re.compile(r"[a-z0-9][a-z0-9-]*\Z")
#: The server knobs a LocalCluster sets unless told otherwise: FoundationDB's data
#: distributor waits after it starts (a fresh cluster, and again after a recovery
#: that moves it) ``initial_failure_reaction_delay`` (30 s) before it reacts to
#: failures, ``log_on_completion_delay`` (3 s) before it says so (status reports the
#: data "initializing" meanwhile), and ``check_team_delay`` (30 s) before it builds
#: its storage teams (until then, only the first team exists: excluding one of its
#: members waited for the rest).  Measured on this machine, 7.3.79: a 5-process
#: ``double`` cluster was healthy after 40 s with FoundationDB's values, after 6 s
#: with these; the first exclusion took 43 s, then 6 s.
TEST_KNOBS: Mapping[str, str] = MappingProxyType({"initial_failure_reaction_delay": "1",
                                                  "log_on_completion_delay": "0",
                                                  "check_team_delay": "1"})
#: A knob name as ``--knob_<name>`` takes it.
KNOB = re.compile(r"[a-z][a-z0-9_]*\Z")
#: The loopback address every process listens on.
HOST = "127.0.0.1"


@dataclass(frozen=True)
class ServerProcess:
    """One ``fdbserver`` process of a local cluster.

    Attributes:
        index: its number in the cluster, from 0.
        port: its TCP port on 127.0.0.1.
        process_class: its ``--class`` (``"unset"``: none).
        directory: its own folder (``data/``, ``logs/`` and ``fdbserver.out`` in it).
    """

    index: int
    port: int
    process_class: str
    directory: Path

    @property
    def address(self) -> str:
        """``"127.0.0.1:<port>"``, as status JSON and ``fdbcli`` name it."""
        return f"{HOST}:{self.port}"

    @property
    def machine_id(self) -> str:
        """Its ``--locality-machineid``: one machine per process, since FoundationDB
        never puts two copies of a piece of data on one machine."""
        return f"machine-{self.index}"

    @property
    def zone_id(self) -> str:
        """Its ``--locality-zoneid`` (replication spreads copies over zones)."""
        return f"zone-{self.index}"

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def logs(self) -> Path:
        return self.directory / "logs"

    @property
    def output(self) -> Path:
        """Where its standard output and error go."""
        return self.directory / "fdbserver.out"

    def command(self, fdbserver: str, cluster_file: str,
                knobs: Mapping[str, str] = MappingProxyType({})) -> List[str]:
        """The command line that runs this process (``knobs``: server knobs, each
        passed as ``--knob_<name>=<value>``)."""
        args = [
            fdbserver,
            "--public-address", self.address,
            "--listen-address", "public",
            "--cluster-file", cluster_file,
            "--datadir", str(self.data),
            "--logdir", str(self.logs),
            "--locality-machineid", self.machine_id,
            "--locality-zoneid", self.zone_id,
        ]
        if self.process_class != "unset":
            args += ["--class", self.process_class]
        return args + [f"--knob_{name}={value}" for name, value in sorted(knobs.items())]


@dataclass(frozen=True)
class ClusterPlan:
    """A local cluster's processes, redundancy, engine and identity."""

    processes: Tuple[ServerProcess, ...]
    redundancy: str
    engine: str
    cluster_id: str
    knobs: Mapping[str, str]

    @property
    def coordinators(self) -> Tuple[ServerProcess, ...]:
        """The processes named in the cluster file: as many as the redundancy wants
        (1, 3 or 5), at most all of them, always an odd number (an even one survives
        no more losses than one fewer)."""
        n = min(COORDINATORS[self.redundancy], len(self.processes))
        return self.processes[: n if n % 2 else n - 1]

    def cluster_file_text(self) -> str:
        """The cluster file: ``fdbrecipes:<id>@<coordinator>,...``."""
        addresses = ",".join(p.address for p in self.coordinators)
        return f"fdbrecipes:{self.cluster_id}@{addresses}\n"

    def configure_command(self) -> str:
        """The ``fdbcli`` command creating the database."""
        return f"configure new {self.redundancy} {self.engine}"

    def command(self, process: ServerProcess, fdbserver: str, cluster_file: str) -> List[str]:
        """The command line of ``process``, with this cluster's knobs."""
        return process.command(fdbserver, cluster_file, self.knobs)


def check_processes(processes: Any) -> int:
    """``processes`` as an int in [1, MAX_PROCESSES]."""
    if type(processes) is not int:
        raise TypeError(f"processes must be an int, not {type(processes).__name__}")
    if not 1 <= processes <= MAX_PROCESSES:
        raise ValueError(f"processes must be 1 to {MAX_PROCESSES}, got {processes}")
    return processes


def check_redundancy(redundancy: Any, processes: int) -> str:
    """``redundancy`` as one of REPLICAS' names, with enough processes to hold its
    copies."""
    if not isinstance(redundancy, str):
        raise TypeError(f"redundancy must be a str, not {type(redundancy).__name__}")
    if redundancy not in REPLICAS:
        raise ValueError(f"redundancy must be one of {', '.join(REPLICAS)}, got {redundancy!r}")
    if processes < REPLICAS[redundancy]:
        raise ValueError(f"redundancy {redundancy!r} keeps {REPLICAS[redundancy]} copies on "
                         f"as many processes: processes must be at least "
                         f"{REPLICAS[redundancy]}, got {processes}")
    return redundancy


def check_engine(engine: Any) -> str:
    """``engine`` as a storage engine name (a lower-case word)."""
    return check_matching(engine, "engine", ENGINE,
                          "a storage engine name such as 'memory' or 'ssd'")


def check_classes(classes: Optional[Sequence[str]], processes: int) -> Tuple[str, ...]:
    """One class per process (None: all ``unset``)."""
    if classes is None:
        return ("unset",) * processes
    if isinstance(classes, (str, bytes)) or not isinstance(classes, Sequence):
        raise TypeError("classes must be None or a sequence of class names, one per process")
    if len(classes) != processes:
        raise ValueError(f"classes must name one class per process: {processes} wanted, "
                         f"got {len(classes)}")
    for i, name in enumerate(classes):
        if name not in CLASSES:
            raise ValueError(f"classes[{i}] must be one of {', '.join(CLASSES)}, got {name!r}")
    return tuple(classes)


def check_knobs(knobs: Optional[Mapping[str, Any]]) -> Mapping[str, str]:
    """``knobs`` as names and values for ``--knob_<name>=<value>`` (None:
    :data:`TEST_KNOBS`)."""
    if knobs is None:
        return TEST_KNOBS
    if not isinstance(knobs, Mapping):
        raise TypeError(f"knobs must be None or a mapping of knob names to values, not "
                        f"{type(knobs).__name__}")
    checked = {}
    for name, value in knobs.items():
        if not isinstance(name, str) or not KNOB.match(name):
            raise ValueError(f"knobs: {name!r} is not a knob name (lower case, digits, _)")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or \
                not str(value) or any(c.isspace() for c in str(value)):
            raise ValueError(f"knobs[{name!r}] must be a str or number without spaces, "
                             f"got {value!r}")
        checked[name] = str(value)
    return MappingProxyType(checked)


def check_seconds(seconds: Any, name: str) -> float:
    """``seconds`` as a positive, finite number of seconds."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(seconds).__name__}")
    if not 0 < seconds < 1e9:
        raise ValueError(f"{name} must be seconds > 0, got {seconds!r}")
    return float(seconds)


def make_plan(processes: Any, redundancy: Any, engine: Any, classes: Any, directory: Path,
              ports: Sequence[int], knobs: Any = None) -> ClusterPlan:
    """Check the arguments of a local cluster and lay it out in ``directory``, process
    ``i`` on ``ports[i]`` in ``directory / "p<i>"``.

    Raises:
        TypeError or ValueError: an argument is wrong (the message names it).
    """
    n = check_processes(processes)
    mode = check_redundancy(redundancy, n)
    kinds = check_classes(classes, n)
    if len(set(ports)) != n:
        raise ValueError(f"ports must be {n} distinct ports, got {list(ports)}")
    layout = tuple(ServerProcess(i, port, kind, directory / f"p{i}")
                   for i, (port, kind) in enumerate(zip(ports, kinds)))
    return ClusterPlan(layout, mode, check_engine(engine), secrets.token_hex(8),
                       check_knobs(knobs))
