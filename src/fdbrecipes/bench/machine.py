"""Where the figures come from: the client machine, the FoundationDB bindings and client
library, and the cluster's servers.  Best effort: a missing detail is None or empty,
never an error."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import sys
import time
from typing import Any, Dict, Optional

import fdb

from .. import __version__


def bindings_version() -> Optional[str]:
    """Version of the installed ``foundationdb`` Python package."""
    from importlib import metadata

    try:
        return metadata.version("foundationdb")
    except metadata.PackageNotFoundError:
        return None


def client_library_version() -> Optional[str]:
    """``fdb_get_client_version()`` of the loaded libfdb_c (best effort: the bindings
    do not wrap this C function, so it is called through ctypes, on the library handle
    they give every Database as ``capi``)."""
    try:
        function = sys.modules["fdb.impl"].Database.capi.fdb_get_client_version
        function.argtypes = []
        function.restype = ctypes.c_char_p
        return str(function().decode())
    except Exception:  # metadata only: never stop a run for it
        return None


def server_info(db: Any) -> Dict[str, Any]:
    """Server versions, process count and configuration, from ``\\xff\\xff/status/json``."""
    try:
        status = json.loads(db[b"\xff\xff/status/json"])
        cluster = status["cluster"]
        processes = cluster.get("processes", {}).values()
        config = cluster.get("configuration", {})
        return {
            "versions": sorted({p["version"] for p in processes if "version" in p}),
            "processes": len(processes),
            "storage_engine": config.get("storage_engine"),
            "redundancy_mode": config.get("redundancy_mode"),
        }
    except Exception:  # metadata only: never stop a run for it
        return {}


def machine_info(db: Any, cluster: str) -> Dict[str, Any]:
    """Where the figures come from: the client machine, the bindings, the cluster."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "fdb_api_version": fdb.get_api_version(),
        "fdb_bindings_version": bindings_version(),
        "fdb_client_version": client_library_version(),
        "fdbrecipes_version": __version__,
        "cluster": cluster,
        "server": server_info(db),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def format_machine(machine: Dict[str, Any]) -> str:
    """Two lines naming the machine and the FoundationDB versions."""
    server = machine.get("server") or {}
    return (f"Machine: {machine['platform']}, {machine['cpu_count']} CPUs, "
            f"{machine['python']}\n"
            f"FoundationDB: API {machine['fdb_api_version']}, bindings "
            f"{machine['fdb_bindings_version']}, client {machine['fdb_client_version']}, "
            f"server {', '.join(server.get('versions', [])) or 'unknown'} "
            f"({server.get('storage_engine', 'unknown engine')}); cluster: "
            f"{machine['cluster']}")
