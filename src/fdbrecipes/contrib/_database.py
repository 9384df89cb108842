"""The database and directory the integrations use.

One ``fdb.Database`` per process and cluster file, opened on first use.  FoundationDB's
client cannot be used in a process forked after it connected (its network thread does
not survive a fork): a forked child that reaches here raises a one-line explanation
instead of hanging (Celery's prefork pool: ``worker_pool_start_method = "spawn"``).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

from ..errors import FdbRecipesError

__all__ = ["API_HINT", "FIRST_CONTACT_SECONDS", "FORK_HINT", "database", "directory",
           "directory_path", "transact"]

T = TypeVar("T")

API_HINT = ("no FoundationDB API version is selected: call fdb.api_version(730) in the "
            "module that defines your Celery app or Dramatiq actors (fdbrecipes never "
            "selects one itself)")

FORK_HINT = ("this process was forked after it connected to FoundationDB, whose client "
             "does not survive a fork: start workers as fresh processes (Celery: "
             "worker_pool_start_method = 'spawn', or the threads pool)")

_lock = threading.Lock()
_databases: Dict[Optional[str], Any] = {}
_forked = [False]


def _after_fork_in_child() -> None:
    if _databases:
        _forked[0] = True
        _databases.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def database(cluster_file: Optional[str]) -> Any:
    """The process's ``fdb.Database`` for ``cluster_file`` (None: ``FDB_CLUSTER_FILE``
    or the default cluster file), opened the first time.

    Raises:
        FdbRecipesError: no API version is selected (:data:`API_HINT`), or the process
            was forked after it opened a database here (:data:`FORK_HINT`).
    """
    import fdb

    if not fdb.is_api_version_selected():
        raise FdbRecipesError(API_HINT)
    with _lock:
        if _forked[0]:
            raise FdbRecipesError(FORK_HINT)
        db = _databases.get(cluster_file)
        if db is None:
            db = fdb.open(cluster_file) if cluster_file else fdb.open()
            _databases[cluster_file] = db
        return db


def directory_path(value: Any, name: str) -> Tuple[str, ...]:
    """A directory path from an option: ``"a/b"`` or ``("a", "b")``.

    Raises:
        TypeError or ValueError: ``value`` is neither, or names an empty path or part.
    """
    if isinstance(value, str):
        parts: Tuple[Any, ...] = tuple(value.split("/"))
    elif isinstance(value, (tuple, list)):
        parts = tuple(value)
    else:
        raise TypeError(f"{name} must be a str like 'app/broker' or a tuple of str, "
                        f"not {type(value).__name__}")
    if not parts or not all(isinstance(p, str) and p for p in parts):
        raise ValueError(f"{name} must name a non-empty directory path, got {value!r}")
    return tuple(parts)


#: Seconds the integrations wait for a cluster's first answer (opening their
#: directory) before they say it does not answer.
FIRST_CONTACT_SECONDS = 10.0


def directory(db: Any, path: Tuple[str, ...], cluster_file: Optional[str] = None,
              timeout: float = FIRST_CONTACT_SECONDS) -> Any:
    """The directory at ``path`` (created if missing): the subspace an integration
    keeps its keys in.  One transaction, bounded by ``timeout`` seconds: the first
    contact with the cluster, which would otherwise wait forever for a cluster that
    does not answer.

    Raises:
        FdbRecipesError: the cluster did not answer within ``timeout`` seconds.
    """
    import fdb

    tr = db.create_transaction()
    tr.options.set_timeout(int(timeout * 1000))
    while True:
        try:
            found = fdb.directory.create_or_open(tr, path)
            tr.commit().wait()
            return found
        except fdb.FDBError as e:
            if e.code == 1031:  # transaction_timed_out
                raise FdbRecipesError(
                    f"the cluster of cluster file {cluster_file or '(the default)'} did not "
                    f"answer within {timeout:g} s: is it running and reachable?") from None
            tr.on_error(e).wait()


def transact(db: Any, body: Callable[..., T], *args: Any) -> T:
    """``body(tr, *args)`` in FoundationDB's retry loop (as ``@fdb.transactional``,
    which cannot wrap bound methods):
    for work that composes structures' operations with keys of the integration's own
    in one transaction.  Like every such loop, a commit that ends in
    ``commit_unknown_result`` runs ``body`` again: the callers say what that means."""
    import fdb

    tr = db.create_transaction()
    while True:
        try:
            result = body(tr, *args)
            tr.commit().wait()
            return result
        except fdb.FDBError as e:
            tr.on_error(e).wait()  # raises what cannot be retried
