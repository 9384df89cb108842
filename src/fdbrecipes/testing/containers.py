"""A throwaway FoundationDB server in a container, for tests on a machine with Docker and
no ``fdbserver`` (extra ``containers``: ``pip install 'fdbrecipes[containers]'``,
Python >= 3.10).

The pytest plugin's ``fdb_cluster_file`` uses :func:`container_cluster` when
``FDB_CLUSTER_FILE`` is not set and no ``fdbserver`` is found: the official image on a
free port ``P`` mapped to the same port on 127.0.0.1, advertising ``127.0.0.1:P``
(``FDB_NETWORKING_MODE=host``), so this machine's client reaches it at the address the
server gives out; its database is created with ``configure new single memory`` run in
the container.  The client library must still be on this machine (``fdbrecipes
server install`` puts one in place).  Docker must run on this machine (not a remote
``DOCKER_HOST``).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from .._local.programs import free_ports
from ..server.releases import DEFAULT_VERSION

__all__ = ["IMAGE", "container_cluster", "docker_problem"]

#: The image run: FoundationDB's official server image of the version the project tests.
IMAGE = f"foundationdb/foundationdb:{DEFAULT_VERSION}"


def docker_problem() -> Optional[str]:
    """Why no container can be started here, or None if one can."""
    try:
        import docker
        import testcontainers.core.container  # noqa: F401
    except ImportError:
        return "no testcontainers (pip install 'fdbrecipes[containers]', Python >= 3.10)"
    try:
        docker.from_env().ping()
    except Exception as e:
        return f"Docker does not answer ({e})"
    return None


def _configure(container: Any, timeout: float) -> None:
    """Create the database in ``container`` (retried while the server starts)."""
    deadline = time.monotonic() + timeout
    said = ""
    while time.monotonic() < deadline:
        result = container.exec(["fdbcli", "--exec", "configure new single memory",
                                 "--timeout", "10"])
        said = bytes(result.output).decode(errors="replace")
        if "Database created" in said or "already exists" in said:
            return
        time.sleep(0.5)  # the server in the container is starting: nothing to wait on
    raise RuntimeError(f"the FoundationDB container did not create its database: {said}")


@contextlib.contextmanager
def container_cluster(image: str = IMAGE, timeout: float = 120.0) -> Iterator[str]:
    """Yield the cluster file of a FoundationDB server in a container of ``image``,
    removed when the block ends.

    Raises:
        RuntimeError: the container did not come up with a database in time.
    """
    from testcontainers.core.container import DockerContainer

    port = free_ports(1)[0]
    container = (DockerContainer(image).with_env("FDB_NETWORKING_MODE", "host")
                 .with_env("FDB_PORT", str(port)).with_bind_ports(port, port))
    with tempfile.TemporaryDirectory(prefix="fdbrecipes-container-") as folder:
        cluster_file = Path(folder) / "fdb.cluster"
        cluster_file.write_text(f"docker:docker@127.0.0.1:{port}\n")
        container.start()
        try:
            _configure(container, timeout)
            yield str(cluster_file)
        finally:
            container.stop()
