"""The ``flow`` group's claim latency, measured in the parent process: ``Queue.claim``
with 10,000 keys holding one job each under a keyed ``concurrency(1)``, beside a plain
Queue of as many jobs, claim for claim (:mod:`.flow` fills the keyed queue)."""

from __future__ import annotations

import time
from typing import Any, List

from .. import Queue
from .clients import BenchError
from .flow import fill, fill_keyed
from .results import Tail, tail
from .settings import FLOW_KEYED_LIMIT, LEASE_SECONDS

__all__ = ["claim_latencies"]


def timed_claim(db: Any, queue: Queue[Any]) -> float:
    """Seconds one ``claim`` of ``queue`` took; the job is acked and its value pushed
    again (not timed), so the keys holding work stay the same."""
    start = time.perf_counter()
    lease = queue.claim(db, LEASE_SECONDS)
    seconds = time.perf_counter() - start
    if lease is None:
        raise BenchError("a queue was empty during the claim latency measurement")
    queue.ack(db, lease)
    queue.push(db, lease.value)
    return seconds


def claim_latencies(db: Any, plain_space: Any, keyed_space: Any, keys: int,
                    samples: int) -> List[Tail]:
    """``Queue.claim`` latency of a plain Queue and of one whose ``keys`` keys each
    hold a job under a keyed ``concurrency(1)``: both filled (``push_many`` of
    1,000), then ``samples`` claims of each, alternating, so that a passing load
    weighs on both alike."""
    plain: Queue[Any] = Queue(plain_space)
    fill(db, plain, range(keys))
    keyed = fill_keyed(db, keyed_space, keys)
    plain_seconds, keyed_seconds = [], []
    for _ in range(samples):
        plain_seconds.append(timed_claim(db, plain))
        keyed_seconds.append(timed_claim(db, keyed))
    return [tail("Queue.claim, plain", keys, plain_seconds),
            tail(f"Queue.claim, keyed concurrency({FLOW_KEYED_LIMIT})", keys, keyed_seconds)]
