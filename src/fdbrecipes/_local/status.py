"""Reading a cluster's status JSON (``fdbcli status json``, or the key
``\\xff\\xff/status/json``): which process holds which role, whether the cluster is
healthy, and what each storage process has received.

Pure functions of the parsed document, so the unit tests check them against a status
captured from a real 7.3 cluster.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple

#: Seconds a process's uptime in status JSON may exceed the time since it was started
#: (the two clocks are read at different moments).
UPTIME_SLACK = 2.0
#: The roles :class:`ClusterRoles` names, as status JSON spells them.
ROLES = ("master", "cluster_controller", "log", "storage", "commit_proxy", "grv_proxy",
         "resolver", "ratekeeper", "data_distributor", "consistency_scan", "coordinator")


def parse_status(text: str) -> Dict[str, Any]:
    """The JSON document in ``fdbcli status json``'s output (anything printed before
    it, such as a warning, is skipped).

    Raises:
        ValueError: there is no JSON object in ``text``.
    """
    start = text.find("{")
    if start < 0:
        raise ValueError(f"no status JSON in: {text.strip()[:200]!r}")
    document = json.loads(text[start:])
    if not isinstance(document, dict):
        raise ValueError("status JSON is not an object")
    return document


@dataclass(frozen=True)
class ClusterRoles:
    """Who does what in a cluster, from one status JSON document.

    Attributes:
        generation: the cluster's generation (it grows with every recovery).
        recovery_state: ``"fully_recovered"`` when the cluster is fully up, else the
            recovery's current step.
        master: the address of the process that is master, or None (in a recovery).
        cluster_controller: the address of the cluster controller, or None.
        logs: the addresses of the current generation's logs (older generations'
            logs, still listed by status JSON while they are needed, are left out).
        storage: addresses of the processes with a storage role.
        commit_proxies, grv_proxies, resolvers: addresses of those roles.
        coordinators: the coordinators' addresses, as the cluster file names them.
        excluded: addresses of the excluded processes.
        processes: every process's address and the roles it holds (``"log"`` only
            for the current generation; ``"coordinator"`` included).
    """

    generation: int
    recovery_state: str
    master: Optional[str]
    cluster_controller: Optional[str]
    logs: Tuple[str, ...]
    storage: Tuple[str, ...]
    commit_proxies: Tuple[str, ...]
    grv_proxies: Tuple[str, ...]
    resolvers: Tuple[str, ...]
    coordinators: Tuple[str, ...]
    excluded: FrozenSet[str]
    processes: Mapping[str, FrozenSet[str]]

    def of(self, address: str) -> FrozenSet[str]:
        """The roles of the process at ``address`` (empty if it holds none)."""
        return self.processes.get(address, frozenset())

    def holding(self, role: str, *, without: Iterable[str] = ()) -> Tuple[str, ...]:
        """The addresses of the processes holding ``role`` and none of ``without``,
        in address order.

        Raises:
            ValueError: a role is not one status JSON names (``master``,
                ``cluster_controller``, ``log``, ``storage``, ``commit_proxy``, ...).
        """
        avoid = frozenset(without)
        for name in (role, *avoid):
            if name not in ROLES:
                raise ValueError(f"role must be one of {', '.join(ROLES)}, got {name!r}")
        return tuple(sorted(a for a, held in self.processes.items()
                            if role in held and not held & avoid))


def plain_address(address: str) -> str:
    """``ip:port`` of an address as FoundationDB prints it (it may add ``:tls``)."""
    return ":".join(address.split(":")[:2])


def _address(entry: Mapping[str, Any]) -> str:
    """The ``ip:port`` of a status JSON entry (a process, a log, a coordinator)."""
    return plain_address(str(entry.get("address", "")))


def current_logs(status: Mapping[str, Any]) -> Tuple[str, ...]:
    """The addresses of the current generation's logs, in address order."""
    for generation in status.get("cluster", {}).get("logs", []):
        if generation.get("current"):
            return tuple(sorted(_address(log) for log in generation.get("log_interfaces", [])
                                if log.get("address")))  # a log gone has no address
    return ()


def coordinators(status: Mapping[str, Any]) -> Tuple[str, ...]:
    """The coordinators' addresses, in address order."""
    listed = status.get("client", {}).get("coordinators", {}).get("coordinators", [])
    return tuple(sorted(_address(c) for c in listed))


def parse_roles(status: Mapping[str, Any]) -> ClusterRoles:
    """:class:`ClusterRoles` from a status JSON document."""
    cluster = status.get("cluster", {})
    logs = current_logs(status)
    coordinating = frozenset(coordinators(status))
    held: Dict[str, FrozenSet[str]] = {}
    excluded = set()
    for process in cluster.get("processes", {}).values():
        address = _address(process)
        roles = {str(r.get("role")) for r in process.get("roles", [])} - {"log"}
        if address in logs:
            roles.add("log")
        if address in coordinating:
            roles.add("coordinator")
        held[address] = frozenset(roles)
        if process.get("excluded"):
            excluded.add(address)

    def having(role: str) -> Tuple[str, ...]:
        return tuple(sorted(a for a, roles in held.items() if role in roles))

    def one(role: str) -> Optional[str]:
        found = having(role)
        return found[0] if found else None

    return ClusterRoles(
        generation=int(cluster.get("generation", 0)),
        recovery_state=str(cluster.get("recovery_state", {}).get("name", "unknown")),
        master=one("master"),
        cluster_controller=one("cluster_controller"),
        logs=logs,
        storage=having("storage"),
        commit_proxies=having("commit_proxy"),
        grv_proxies=having("grv_proxy"),
        resolvers=having("resolver"),
        coordinators=tuple(sorted(coordinating)),
        excluded=frozenset(excluded),
        processes=held,
    )


def health_problems(status: Mapping[str, Any], expected: Mapping[str, float]) -> List[str]:
    """Why the cluster is not healthy, or an empty list when it is: the status is
    complete, the database available, fully recovered, its data fully replicated
    (``data.state.healthy``), and every process of ``expected`` (address -> seconds
    since it was last started) is part of it *as started then*: a status that shows a
    longer uptime still describes the process before its restart."""
    problems: List[str] = []
    client = status.get("client", {})
    cluster = status.get("cluster", {})
    messages = [str(m.get("name")) for m in cluster.get("messages", [])]
    if "status_incomplete" in messages:
        problems.append("status incomplete")
    if not client.get("database_status", {}).get("available", False):
        problems.append("the database is not available")
    state = cluster.get("recovery_state", {}).get("name", "unknown")
    if state != "fully_recovered":
        problems.append(f"recovery state {state}")
    data = cluster.get("data", {}).get("state", {})
    if not data.get("healthy", False):
        problems.append(f"data state {data.get('name', 'unknown')}")
    uptimes = {_address(p): float(p.get("uptime_seconds", 0.0))
               for p in cluster.get("processes", {}).values()}
    missing = sorted(a for a, age in expected.items()
                     if a not in uptimes or uptimes[a] > age + UPTIME_SLACK)
    if missing:
        problems.append(f"not (yet) part of the cluster as last started: {', '.join(missing)}")
    return problems


@dataclass(frozen=True)
class StorageCounters:
    """What one storage role has received since its process started (status JSON's
    cumulative counters; they restart from 0 when the process restarts).

    Attributes:
        input_bytes: bytes of mutations it received (its ``input_bytes`` counter).
        mutations: mutations it received.
        stored_bytes: bytes it stores now.
        version: the role's ``data_version`` when the counters were taken (they come
            from the same periodic report, a few seconds apart): every mutation
            committed at or before it is counted (a process with several storage
            roles: the lowest).
    """

    input_bytes: int
    mutations: int
    stored_bytes: int
    version: int = 0


def storage_counters(status: Mapping[str, Any]) -> Dict[str, StorageCounters]:
    """Each storage process's :class:`StorageCounters`, by address (a process with
    several storage roles: their sum)."""
    found: Dict[str, StorageCounters] = {}
    for process in status.get("cluster", {}).get("processes", {}).values():
        for role in process.get("roles", []):
            if role.get("role") != "storage":
                continue
            counters = StorageCounters(int(role.get("input_bytes", {}).get("counter", 0)),
                                       int(role.get("mutations", {}).get("counter", 0)),
                                       int(role.get("stored_bytes", 0)),
                                       int(role.get("data_version", 0)))
            before = found.get(_address(process))
            if before is not None:  # another storage role of the same process
                counters = StorageCounters(before.input_bytes + counters.input_bytes,
                                           before.mutations + counters.mutations,
                                           before.stored_bytes + counters.stored_bytes,
                                           min(before.version, counters.version))
            found[_address(process)] = counters
    return found
