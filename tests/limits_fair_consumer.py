"""A consumer process of the FairQueue limits test (``test_limits_fair.py``): two
threads claim jobs of a FairQueue whose jobs carry a keyed concurrency limit (each job's
key given at push, not part of its value) and a rate keyed by the value, and ack them,
each claim and ack writing its event with its commit version (a versionstamp) in its
own transaction.

Run as ``python -m tests.limits_fair_consumer CLUSTER_FILE SPACE_HEX API_VERSION``; it
runs until killed, or for 120 s at most.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import fdb

from fdbrecipes import FairQueue, Limits
from tests.limits_consumer import record_ack, record_claim

#: Seconds of each lease (no consumer is killed while it works: none expires).
LEASE = 30.0


def parity(value: Any) -> Any:
    """A job's key under the rate: its number's parity."""
    return value % 2


def structures(space: Any) -> Any:
    """The test's FairQueue (with its limits) and the subspace of the events."""
    limits = Limits(space["limits"])
    q = FairQueue(space["q"], limits=[limits.use("per-customer"),
                                      limits.use("rate", key=parity)])
    return q, space["events"]


def main() -> None:
    cluster_file, space_hex, api = sys.argv[1:4]
    fdb.api_version(int(api))
    db = fdb.open(cluster_file)
    q, events = structures(fdb.Subspace(rawPrefix=bytes.fromhex(space_hex)))

    claim, ack = fdb.transactional(record_claim), fdb.transactional(record_ack)

    def consume() -> None:
        stop = time.monotonic() + 120
        while time.monotonic() < stop:
            lease = claim(db, q, events, LEASE)
            if lease is None:
                q.wait(db, timeout=0.5)
                continue
            time.sleep(0.01)  # the work, holding its slots
            ack(db, q, events, lease)

    threads = [threading.Thread(target=consume, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
