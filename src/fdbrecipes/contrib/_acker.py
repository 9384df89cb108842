"""Acks committed in batches by one thread.

Celery's pool threads and Dramatiq's worker threads ack messages one at a time; an ack
is a transaction, so a process acking thousands of messages a second would spend most
of its time waiting for commits.  :class:`Acker` takes acks from any thread and returns
at once (as an AMQP ``basic.ack`` does: nobody waits for its confirmation); one daemon
thread commits what piled up while its previous batch committed, with one
``ack_many`` per structure.  An ack not yet committed when the process dies is lost
with it: its lease expires and the message runs again, as it would have had the
process died just before acking.
"""

from __future__ import annotations

import logging
import threading
from typing import List, Optional

from ._keeper import Held
from ._queues import Queues

__all__ = ["Acker"]

log = logging.getLogger("fdbrecipes.contrib")


class Acker:
    """Acks of ``queues``' leases, committed in batches by a daemon thread."""

    def __init__(self, queues: Queues) -> None:
        self._queues = queues
        self._pending: List[Held] = []
        self._busy = False
        self._changed = threading.Condition()
        self._thread: Optional[threading.Thread] = None

    def ack(self, held: Held) -> None:
        """Ack ``held`` soon (this returns at once)."""
        with self._changed:
            self._pending.append(held)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="fdbrecipes-acker",
                                                daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every ack handed over so far is committed (or ``timeout``
        seconds); whether they are."""
        with self._changed:
            return self._changed.wait_for(self._idle, timeout)

    def _idle(self) -> bool:
        return not self._pending and not self._busy

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(self._has_pending)
                batch, self._pending = self._pending, []
                self._busy = True
            try:
                self._queues.ack_many(batch)
            except Exception:
                log.exception("acking %d messages failed: their leases will expire and "
                              "they will run again", len(batch))
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _has_pending(self) -> bool:
        return bool(self._pending)
