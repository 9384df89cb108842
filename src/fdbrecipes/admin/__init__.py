"""The operator commands: look into a Queue, PriorityQueue or WeightTree on a running
cluster, and deal with a queue's dead letters.

Usage::

    fdbrecipes stats        --directory app/jobs --kind queue
    fdbrecipes peek         --tuple '("tasks",)' --kind priority-queue --end max --limit 5
    fdbrecipes peek         --tuple '("pool",)' --kind weight-tree --json
    fdbrecipes dead         --directory app/jobs --kind queue
    fdbrecipes requeue-dead --directory app/jobs --kind queue --limit 100 --yes
    fdbrecipes purge-dead   --directory app/jobs --kind queue --yes
    fdbrecipes push         --directory app/jobs "send the newsletter" --delay 60
    fdbrecipes push         --directory app/jobs "resize cat.png" --history 86400  # prints its id
    fdbrecipes leases       --directory app/jobs          # in flight: who holds what
    fdbrecipes delayed      --directory app/jobs
    fdbrecipes remove       --directory app/jobs --id order-17 --yes
    fdbrecipes stats        --directory app/jobs --watch 5
    fdbrecipes job 3f2a...  --directory app/jobs          # a job's record (history)
    fdbrecipes job 3f2a...  --directory app/jobs --wait 60  # ... once it ended
    fdbrecipes finished     --directory app/jobs          # the jobs that ended
    fdbrecipes cancel 3f2a... --directory app/jobs --yes
    fdbrecipes workers      --directory app/jobs [--quiet WORKER | --stop WORKER]
    fdbrecipes pause        --directory app/jobs          # nothing is taken ...
    fdbrecipes resume       --directory app/jobs          # ... until this

Every command names one structure:

* where: ``--directory a/b`` (a directory-layer path, components split on "/", opened
  with ``fdb.directory.open``: it must exist; only ``push`` and ``worker``, which start a
  structure where none is, make it with ``fdb.directory.create_or_open``) or ``--tuple
  '("jobs",)'`` (a Python tuple literal; the subspace is ``fdb.Subspace(that tuple)``),
  exactly one of the two;
* what: ``--kind queue|priority-queue|fair-queue|weight-tree`` (a fair-queue's one-queue
  commands also take ``--group GROUP``).  The keys found there must be of
  that kind (an empty place is an empty structure); without ``--kind`` the kind is
  recognised from them (an empty place then needs ``--kind``, but for ``push`` and
  ``worker``, for which it is a new queue).  ``--max-deliveries N`` (queue
  kinds) gives the commands the application's ``max_deliveries``, so that a lease that
  expired on an item's last delivery counts as dead, as the application will see it;
* the cluster: ``--cluster-file PATH``, by default the one ``fdb.open()`` uses
  (``$FDB_CLUSTER_FILE``, else the platform's default cluster file).  No server is ever
  started.  Every transaction is cancelled after ``--timeout`` seconds (default 10), so
  a cluster that does not answer is an error, not a hang.

``stats``, ``peek`` and ``dead`` only read (they commit no write).  ``requeue-dead`` and
``purge-dead`` write, and refuse to run without ``--yes``.

What a command stores or looks up is checked before it connects: ``push``'s VALUE is a
value the structures store (not None, at most 100,000 bytes encoded; ``--type json``:
no NaN nor infinity, arrays nested at most 32 deep), an id is 1 to 1,000 bytes (its
bytes as given, so an id that is not UTF-8 can be named), a group's or a worker's name
is UTF-8.

Output: a table, values shown with ``repr()`` (cut at 80 characters), or with
``--json`` one JSON object on one line.  Text read from the cluster (a reason, an
error, a traceback, a worker's name) is shown with what a terminal would act on
(control characters, bidirectional overrides) escaped as ``\\x1b``, ``\\u202e``...;
``--json`` gives it exactly.  An id is shown as its text (``{"bytes": "<base64>"}`` in
JSON when it is not UTF-8).  In JSON a value is: a str, int (any size), bool
or finite float as the JSON scalar; None (inside tuples) as null; bytes as ``{"bytes":
"<base64>"}``; a uuid.UUID as ``{"uuid": "<canonical form>"}``; a tuple as ``{"tuple":
[elements, encoded alike]}``; a NaN or infinite float as ``{"float": "nan"}`` (or
``"inf"``, ``"-inf"``); anything else the tuple layer decodes as ``{"repr": "..."}``.
Times are ISO 8601 in UTC; weight-tree handles and dead-letter tokens are hex.

Exit status: 0 done; 1 the command failed (one line on stderr: no such directory, keys
of another kind there, the cluster does not answer, ``libfdb_c`` is missing); 2 a
usage error (one line on stderr for the checks made here: a bad ``--tuple``, dead
letters of a weight-tree, a missing ``--yes``, a VALUE or an id that cannot be stored;
argparse's own errors add its usage).  ``job --wait`` exits 1 when the job did not
succeed.

The parts: :mod:`.arguments` (options), :mod:`.places` (where a structure is, and what
is stored there), :mod:`.output` (tables and JSON), :mod:`.commands` (running them),
:mod:`.jobs` (``job``, ``cancel``, ``workers``), :mod:`.schedules` (``schedules``:
the stored schedules), :mod:`.limits` (``limits``), :mod:`.workflows` (``workflow``:
a workflow store's workflows), :mod:`.service` (the long-running
``worker`` and ``metrics``) and :mod:`.supervisor` (``worker --processes N``).
Importing this package needs no ``libfdb_c``.
"""

from .commands import (
    DEAD,
    DELAYED,
    LEASES,
    OPERATIONS,
    PEEK,
    PURGE_DEAD,
    PUSH,
    REMOVE,
    REQUEUE_DEAD,
    STATS,
    UNBLOCK,
    Operation,
    run,
)
from .jobs import CANCEL, FINISHED, JOB, PAUSE, RESUME, WORKERS
from .limits import LIMITS
from .schedules import SCHEDULES
from .service import METRICS, WORKER
from .workflows import WORKFLOWS

#: The commands about jobs and workers (:mod:`.jobs`).
JOBS = (JOB, CANCEL, FINISHED, WORKERS, PAUSE, RESUME)
#: The long-running commands (:mod:`.service`): a worker, a metrics exporter.
SERVICES = (WORKER, METRICS)

__all__ = ["CANCEL", "DEAD", "DELAYED", "FINISHED", "JOB", "JOBS", "LEASES", "LIMITS", "METRICS",
           "OPERATIONS", "PAUSE", "PEEK", "PURGE_DEAD", "PUSH", "REMOVE", "REQUEUE_DEAD",
           "RESUME", "SCHEDULES", "SERVICES", "STATS", "UNBLOCK", "WORKER", "WORKERS", "WORKFLOWS",
           "Operation", "run"]
