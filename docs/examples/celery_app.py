"""A Celery app on FoundationDB: the broker is fdbrecipes' kombu transport, results
are kept by its result backend.

Run a worker, then send it work from another shell:

    cd docs/examples
    celery -A celery_app worker -P threads -c 8          # or the prefork pool
    python -c "from celery_app import add; print(add.delay(2, 3).get(timeout=10))"

It uses the cluster of FDB_CLUSTER_FILE (or the default cluster file), in the
directories fdbrecipes-example/celery and fdbrecipes-example/celery-results.
"""

import fdb

fdb.api_version(730)  # the application selects the API version; fdbrecipes never does

from celery import Celery  # noqa: E402
from kombu import Queue  # noqa: E402

app = Celery("celery_app", broker="fdbrecipes://", backend="fdbrecipes://")
app.conf.update(
    broker_transport="fdbrecipes.contrib.celery:Transport",
    broker_transport_options={
        "directory": "fdbrecipes-example/celery",   # where the queues live
        "lease_seconds": 30,        # a dead worker's tasks come back after this
        "limits": "fdbrecipes-example/limits",   # shared limits, checked in each claim
        "task_limits": {"celery_app.add": {"rate": "100/s"}},   # in all, not per worker
        "queue_limits": {"urgent": {"concurrency": 4}},         # 4 running at once, in all
    },
    result_backend_transport_options={"directory": "fdbrecipes-example/celery-results"},
    result_expires=24 * 3600,       # results expire after a day
    task_acks_late=True,            # ack after the task ran: a crash re-runs it
    worker_disable_rate_limits=True,   # the shared limits only, no bucket per worker
    worker_pool_start_method="spawn",  # prefork: FoundationDB's client does not survive fork
    task_queues=[Queue("celery"), Queue("urgent", max_priority=9)],  # urgent: priorities
)


@app.task
def add(x, y):
    return x + y


@app.task
def total(numbers):
    return sum(numbers)


@app.task(autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=3)
def charge(order):
    """Work with side effects outside FoundationDB: retried with backoff on failure."""
    print(f"charging {order}")
