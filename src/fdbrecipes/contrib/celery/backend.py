"""A Celery result backend on FoundationDB.

``result_backend = "fdbrecipes://"`` (the ``celery.result_backends`` entry point
registers the name); options in ``result_backend_transport_options``:
``cluster_file`` (default: ``FDB_CLUSTER_FILE`` or the default cluster file) and
``directory`` (default ``"celery-results"``).  Results, group results and chord
counters live in an :class:`fdbrecipes.contrib._results.ExpiringStore`:

* results expire after ``result_expires`` (an expiry index, swept in bounded
  transactions by a background thread of each process that writes them:
  ``supports_autoexpire``); an expired result reads as absent at once;
* ``incr`` (chords) is an atomic add settled exactly once by a receipt, so a commit in
  doubt never makes a chord's counter skip the value that fires it;
* results larger than one FoundationDB value are chunked (up to 8 MB);
* ``AsyncResult.get()`` and group joins wait on watches of the result keys, not polls.

Chords (``implements_incr``: no ``chord_unlock`` task polls): a header task's part is
counted in the transaction that stores its result, once per task id (its receipt:
:meth:`ExpiringStore.set_and_count`), and the count that reaches the chord's size
decides, exactly once, that the callback is sent; that task's
``on_chord_part_return`` joins the header's results and sends it (Celery's
``app.send_task``: a message of the broker, not a write of this transaction), then
marks the chord done.  See docs/celery-dramatiq.md for what a crash between the
decision and the send does.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from celery import maybe_signature, states
from celery.backends.base import KeyValueStoreBackend
from celery.exceptions import ChordError, TimeoutError
from celery.result import GroupResult, allow_join_result
from kombu.utils.encoding import bytes_to_str, ensure_bytes

from .._database import directory_path
from .._options import check_cluster_file
from .._results import ExpiringStore, expiring_store

__all__ = ["FdbBackend"]

logger = logging.getLogger("fdbrecipes.contrib.celery")
#: The states that end a chord's header task (its part is counted then).
_PART_ENDS = frozenset((states.SUCCESS, states.FAILURE, states.REVOKED))


def _chord_part(request: Any, state: str) -> Optional[str]:
    """The group id of the chord whose header task ``request`` ends as ``state``, or
    None (no chord, or a state that does not end it)."""
    if request is None or state not in _PART_ENDS or not getattr(request, "chord", None):
        return None
    group_id: Optional[str] = getattr(request, "group", None)
    return group_id or None


def _chord_error(message: str, cause: BaseException) -> ChordError:
    """A ChordError with ``cause`` as its cause."""
    error = ChordError(message)
    error.__cause__ = cause
    return error

#: Most result keys one wait watches at once (FoundationDB allows 10,000 watches per
#: database by default); the others are read again at each wake-up.
_MAX_WATCHES = 100


class FdbBackend(KeyValueStoreBackend):
    """Celery's key-value result backend, on an :class:`ExpiringStore`."""

    supports_autoexpire = True
    supports_native_join = True
    implements_incr = True

    def __init__(self, url: Optional[str] = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        options = dict(self.app.conf.get("result_backend_transport_options") or {})
        self.url = url
        self._cluster_file = check_cluster_file(options.get("cluster_file"))
        self._path = directory_path(options.get("directory", "celery-results"), "directory")
        self._store: Optional[ExpiringStore] = None

    @property
    def store(self) -> ExpiringStore:
        """The store (opened on first use, in the process that uses it)."""
        if self._store is None:
            self._store = expiring_store(self._cluster_file, self._path)
        return self._store

    def as_uri(self, include_password: bool = False) -> str:
        return self.url or "fdbrecipes://"

    # -- the key-value interface -----------------------------------------------------------

    def get(self, key: Any) -> Optional[bytes]:
        return self.store.get(ensure_bytes(key))

    def mget(self, keys: Sequence[Any]) -> List[Optional[bytes]]:
        return self.store.get_many([ensure_bytes(k) for k in keys])

    def set(self, key: Any, value: Any) -> None:
        self.store.set(ensure_bytes(key), ensure_bytes(value), self.expires)

    def delete(self, key: Any) -> None:
        self.store.delete(ensure_bytes(key))

    def incr(self, key: Any) -> int:
        return self.store.incr(ensure_bytes(key))

    def expire(self, key: Any, value: Any) -> None:
        self.store.expire(ensure_bytes(key), value)

    # -- chords ----------------------------------------------------------------------------

    def _store_result(self, task_id: Any, result: Any, state: str, traceback: Any = None,
                      request: Any = None, **kwargs: Any) -> Any:
        """Store a task's result (a result stored as a success is kept, as Celery's
        key-value backends keep it) and, for a header task of a chord ending
        (``SUCCESS``, ``FAILURE``, ``REVOKED``), count its part in the same
        transaction (see :meth:`on_chord_part_return`)."""
        group_id = _chord_part(request, state)
        if group_id is None:
            return super()._store_result(task_id, result, state, traceback, request,
                                         **kwargs)
        meta = self._get_result_meta(result=result, state=state, traceback=traceback,
                                     request=request)
        meta["task_id"] = bytes_to_str(task_id)
        self.store.set_and_count(ensure_bytes(self.get_key_for_task(task_id)),
                                 ensure_bytes(self.encode(meta)), self.expires,
                                 self._succeeded,
                                 ensure_bytes(self.get_key_for_chord(group_id)),
                                 ensure_bytes(request.id))
        return result

    def _succeeded(self, stored: bytes) -> bool:
        """Whether a stored result is a success (which a later store keeps)."""
        return bool(self.decode_result(stored)["status"] == states.SUCCESS)

    def on_chord_part_return(self, request: Any, state: str, result: Any,
                             **kwargs: Any) -> None:
        """A header task of a chord ended: count its part once (made already with its
        result, when it was stored: then this reads its receipt), and if its count
        is the one that reached the chord's size and the chord is not marked done,
        join the header's results, send the callback (or, when a part failed, fail
        it with a ChordError, as Celery does), and mark the chord done.  The header's
        group and counter expire after ``result_chord_expires`` instead of being
        deleted, so a part delivered again finds its receipt and counts nothing."""
        group_id = request.group
        if not group_id:
            return
        callback = maybe_signature(request.chord, app=self.app)
        try:
            deps = GroupResult.restore(group_id, backend=self)
        except Exception as exc:  # Celery's own answer to a group it cannot read
            logger.exception("Chord %r raised: %r", group_id, exc)
            self.chord_error_from_stack(callback, ChordError(f"Cannot restore group: {exc!r}"))
            return
        if deps is None:
            self.chord_error_from_stack(callback,
                                        ChordError(f"GroupResult {group_id} no longer exists"))
            return
        key = ensure_bytes(self.get_key_for_chord(group_id))
        counted = self.store.count_once(key, ensure_bytes(request.id))
        size = request.chord.get("chord_size")
        size = len(deps) if size is None else size
        if counted.value > size:
            logger.warning("Chord counter of %r went past its size: %d > %d", group_id,
                           counted.value, size)
        if counted.value != size or counted.done:
            for held in (key, self.get_key_for_group(group_id),
                         self.get_key_for_task(request.id)):
                self.expire(held, self._chord_result_expires)
            return
        self._fire(callback, deps, group_id)
        self.store.mark_done(key)
        for dep in deps.results:
            self.expire(self.get_key_for_task(dep.id), self.expires)

    def _fire(self, callback: Any, deps: Any, group_id: str) -> None:
        """Join the header's results and send the callback with them; a failed part
        (or a send that fails) fails the callback with a ChordError, as Celery's
        backends do."""
        join = deps.join_native if deps.supports_native_join else deps.join
        try:
            with allow_join_result():
                joined = join(timeout=self.app.conf.result_chord_join_timeout, propagate=True)
        except Exception as exc:
            culprits = [r.id for r in deps.results if r.state in states.PROPAGATE_STATES]
            reason = f"Dependency {culprits[0]} raised {exc!r}" if culprits else repr(exc)
            logger.exception("Chord %r raised: %r", group_id, reason)
            self.chord_error_from_stack(callback, _chord_error(reason, exc))
            return
        try:
            callback.delay(joined)  # apply_async: retried as task_publish_retry says
        except Exception as exc:
            logger.exception("Chord %r raised: %r", group_id, exc)
            self.chord_error_from_stack(callback, _chord_error(f"Callback error: {exc!r}",
                                                               exc))

    def cleanup(self) -> None:
        """Remove every expired result now (``celery.backend_cleanup``)."""
        self.store.sweep()

    # -- waiting on watches --------------------------------------------------------------

    def _meta(self, value: Optional[bytes]) -> Dict[str, Any]:
        if not value:
            return {"status": states.PENDING, "result": None}
        return self.decode_result(value)  # type: ignore[no-any-return]

    def wait_for(self, task_id: str, timeout: Optional[float] = None, interval: float = 0.5,
                 no_ack: bool = True, on_interval: Any = None) -> Dict[str, Any]:
        """The task's result once it is ready, woken by a watch on its key (at most
        ``interval`` seconds between calls of ``on_interval``, if given).

        Raises:
            celery.exceptions.TimeoutError: not ready within ``timeout`` seconds.
        """
        self._ensure_not_eager()
        deadline = None if timeout is None else time.monotonic() + timeout
        key = self.get_key_for_task(task_id)
        while True:
            values, watched = self.store.get_and_watch([key])
            try:
                meta = self._meta(values[0])
                if meta["status"] in states.READY_STATES:
                    return meta
                if on_interval:
                    on_interval()
                self._nap(watched, deadline, interval if on_interval else None)
            finally:
                watched.cancel()

    @staticmethod
    def _nap(watched: Any, deadline: Optional[float], most: Optional[float]) -> None:
        """Wait for a change, the deadline or ``most`` seconds.

        Raises:
            celery.exceptions.TimeoutError: the deadline passed.
        """
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError("The operation timed out.")
        if most is not None:
            left = most if left is None else min(left, most)
        watched.wait(left)

    def get_many(self, task_ids: Any, timeout: Optional[float] = None, interval: float = 0.5,
                 no_ack: bool = True, on_message: Any = None, on_interval: Any = None,
                 max_iterations: Optional[int] = None,
                 READY_STATES: Any = states.READY_STATES) -> Iterator[Tuple[str, Any]]:
        """Yield ``(task_id, meta)`` for each task as it becomes ready, woken by
        watches on the result keys (of up to 100 pending tasks at a time)."""
        pending = [bytes_to_str(t) for t in task_ids]
        for task_id in list(pending):
            cached = self._cache.get(task_id)
            if cached is not None and cached["status"] in READY_STATES:
                pending.remove(task_id)
                yield task_id, cached
        deadline = None if timeout is None else time.monotonic() + timeout
        iterations = 0
        while pending:
            keys = [self.get_key_for_task(t) for t in pending]
            values, watched = self.store.get_and_watch(keys[:_MAX_WATCHES])
            try:
                values += self.store.get_many(keys[_MAX_WATCHES:])
                for task_id, value in zip(list(pending), values):
                    meta = self._meta(value)
                    if meta["status"] in READY_STATES:
                        self._cache[task_id] = meta
                        pending.remove(task_id)
                        if on_message is not None:
                            on_message(meta)
                        yield task_id, meta
                if not pending:
                    return
                if on_interval:
                    on_interval()
                iterations += 1
                if max_iterations and iterations >= max_iterations:
                    return
                self._nap(watched, deadline, interval if on_interval or len(keys) >
                          _MAX_WATCHES else None)
            finally:
                watched.cancel()
