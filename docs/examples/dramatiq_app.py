"""Dramatiq actors on FoundationDB: fdbrecipes' FdbBroker.

    cd docs/examples
    dramatiq dramatiq_app -p 4 -t 8
    python -c "from dramatiq_app import add; add.send(2, 3)"

It uses the cluster of FDB_CLUSTER_FILE (or the default cluster file), in the
directory fdbrecipes-example/dramatiq.
"""

import fdb

fdb.api_version(730)  # the application selects the API version; fdbrecipes never does

import dramatiq  # noqa: E402

from fdbrecipes.contrib.dramatiq import FdbBroker  # noqa: E402

broker = FdbBroker(directory="fdbrecipes-example/dramatiq", lease_seconds=30,
                   limits="fdbrecipes-example/limits",       # shared limits, checked in each claim
                   actor_limits={"remind": {"rate": "10/s"}},       # in all, not per worker
                   queue_limits={"default": {"concurrency": 16}})   # 16 running at once, in all
dramatiq.set_broker(broker)


@dramatiq.actor(max_retries=3)
def add(x, y):
    print(x + y)


@dramatiq.actor
def remind(user):
    print(f"reminding {user}")


# remind.send_with_options(args=("ada",), delay=3_600_000)  # in an hour: waits in the cluster
