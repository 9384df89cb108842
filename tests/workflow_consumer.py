"""A consumer process of the workflow fault matrix (``test_workflow_matrix.py``): a
Worker on the matrix's Queue, its commits (claims, extensions, acks and the workflow
steps in them) reporting ``commit_unknown_result`` at random (``tests.helpers.
unknown_results``), printing one line when its handler starts a node and one when
the worker is done with it:

    ran <job id hex> <delivery> <pid>
    end <job id hex> <delivery> <pid> <outcome>

(``outcome`` as :class:`fdbrecipes.jobs.JobFinished` says it: ``ok``, ``lease_lost``,
``discard``, ...).  A node's value says what its handler does: ``("n", k)`` returns
how many inputs it read (``Workflows.inputs``), ``("discard", k)`` raises Discard,
``("hold", k)`` blocks until the process is killed.

Run as ``python -m tests.workflow_consumer CLUSTER_FILE SPACE_HEX API SEED FAULT_RATE
LEASE MAX_DELIVERIES`` (``MAX_DELIVERIES`` 0: none); it runs until killed.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Optional, Tuple

import fdb

from fdbrecipes import Queue, Worker
from fdbrecipes.jobs import Discard, Event, Job, JobFinished
from fdbrecipes.workflow import Workflows
from tests.helpers import RandomFaults, unknown_results

#: Concurrency of each consumer's Worker.
CONCURRENCY = 6


def structures(space: Any, max_deliveries: Optional[int]) -> Tuple[Any, Workflows]:
    """The matrix's Queue (with job records) and its workflow store, in ``space``."""
    q: Queue[Any] = Queue(space["q"], history=3600, max_deliveries=max_deliveries)
    return q, Workflows(space["flows"], structures=[q])


class Consumer:
    """The handler and the event sink of one consumer process."""

    def __init__(self, db: Any, flows: Workflows) -> None:
        self.db, self.flows = db, flows
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.forever = threading.Event()  # never set: a held node waits for the kill

    def say(self, line: str) -> None:
        with self.lock:  # one line per event, whole
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def handle(self, job: Job) -> Any:
        assert job.id is not None
        self.say(f"ran {job.id.hex()} {job.deliveries} {self.pid}")
        kind = job.value[0]  # type: ignore[index]
        if kind == "discard":
            raise Discard("the matrix discards it")
        if kind == "hold":
            self.forever.wait()
        return len(self.flows.inputs(self.db, job))

    def event(self, event: Event) -> None:
        if isinstance(event, JobFinished) and event.job.id is not None:
            job = event.job
            assert job.id is not None
            self.say(f"end {job.id.hex()} {job.deliveries} {self.pid} {event.outcome}")


def main() -> None:
    cluster_file, space_hex, api, seed, rate, lease, most = sys.argv[1:8]
    fdb.api_version(int(api))
    fdb.open(cluster_file)  # starts the client's network
    db = unknown_results(cluster_file, RandomFaults(int(seed), float(rate)))
    q, flows = structures(fdb.Subspace(rawPrefix=bytes.fromhex(space_hex)),
                          int(most) or None)
    consumer = Consumer(db, flows)
    Worker(db, q, consumer.handle, lease_seconds=float(lease), concurrency=CONCURRENCY,
           on_event=consumer.event).run()


if __name__ == "__main__":
    main()
