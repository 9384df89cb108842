"""A consumer process of the limits fault test (``test_limits_faults.py``): claims jobs
of a Queue carrying a global concurrency limit, a keyed one and a keyed rate, and acks
them, each claim and ack writing its event with its commit version (a versionstamp) in
its own transaction, so what a SIGKILL interrupts is either recorded or not done.

Run as ``python -m tests.limits_consumer CLUSTER_FILE SPACE_HEX API_VERSION SEED``;
it runs until killed, or until the queue has been empty for 30 s.
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from typing import Any, Optional

import fdb

from fdbrecipes import Lease, LeaseExpiredError, Limits, Queue

#: Seconds of each lease: a killed consumer's slots come back at its end.
LEASE = 3.0


def key_of(value: Any) -> Any:
    """A job ``(key, number)``'s key."""
    return value[0]


def structures(space: Any) -> Any:
    """The test's Queue (with its limits) and the subspace of the events."""
    limits = Limits(space["limits"])
    q: Queue[Any] = Queue(space["q"], limits=[limits.use("all"),
                                              limits.use("per-key", key=key_of),
                                              limits.use("rate", key=key_of)])
    return q, space["events"]


def record_claim(tr: Any, q: Any, events: Any, lease_seconds: float,
                 **claim_args: Any) -> Optional[Lease[Any]]:
    """``q.claim(tr, lease_seconds, **claim_args)``, writing its event ``(value, token,
    "start")`` = (commit version, claimed_at, deadline) in the same transaction."""
    lease: Optional[Lease[Any]] = q.claim(tr, lease_seconds, **claim_args)
    if lease is not None:
        tr.set_versionstamped_value(
            events.pack((lease.value, lease.token, "start")),
            fdb.tuple.pack_with_versionstamp((fdb.tuple.Versionstamp(), lease.claimed_at,
                                              lease.deadline)))
    return lease


def record_ack(tr: Any, q: Any, events: Any, lease: Any) -> None:
    """``q.ack(tr, lease)``, writing its event ``(value, token, "end")`` = (commit
    version,) in the same transaction."""
    q.ack(tr, lease)
    tr.set_versionstamped_value(events.pack((lease.value, lease.token, "end")),
                                fdb.tuple.pack_with_versionstamp((fdb.tuple.Versionstamp(),)))


def main() -> None:
    cluster_file, space_hex, api, seed = sys.argv[1:5]
    fdb.api_version(int(api))
    db = fdb.open(cluster_file)
    q, events = structures(fdb.Subspace(rawPrefix=bytes.fromhex(space_hex)))
    rng = random.Random(int(seed))
    claim, ack = fdb.transactional(record_claim), fdb.transactional(record_ack)

    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 30:
        lease = claim(db, q, events, LEASE, spread=8)
        if lease is None:
            q.wait(db, timeout=0.5)
            continue
        idle_since = time.monotonic()
        time.sleep(rng.random() * 0.02)  # the work, holding its slots
        with contextlib.suppress(LeaseExpiredError):  # delivered again: recorded too
            ack(db, q, events, lease)


if __name__ == "__main__":
    main()
