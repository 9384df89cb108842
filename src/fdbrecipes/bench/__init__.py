"""The benchmark suite: ``fdbrecipes bench`` (also ``python benchmarks/run.py``).

In one run against one cluster it measures (``--only`` picks groups; the limit is
always measured):

1. ``limit``: 1-key write transactions per second from 1, 2, 4, 8, 16 client
   processes, and 100-key write transactions (keys per second) from 1 and K processes;
2. ``push``: ``Queue.push(db)``, ``Queue.push(tr)`` in the benchmark's own transaction,
   ``Queue.push_many`` (100 values) and the recipe's push, from 1 and K processes;
3. ``pops``: the recipe's pop, ``Queue.pop``, ``Queue.pop(spread=16)`` and the
   high-contention ``Queue.pop`` draining a pre-filled queue with 1, 2, 4, 8, 16 popper
   processes (pops per second, retries per pop);
4. ``claim``: ``claim_many(100)`` then ``ack_many`` draining a queue, from 1 and K
   processes (items per second);
5. ``tree`` and ``pq``: ``WeightTree.pop`` and ``PriorityQueue.pop_min``/``pop_max``
   draining a pre-filled structure with 1, 4, 16 processes;
6. ``latency``: ``WeightTree.pop`` latency at 10^3 ... 10^6 live items.

Every rate is printed with its ratio to the limit measured at the same number of client
processes, and to the recipe baseline measured at the same number, both in the same run:
absolute figures depend on the machine, ratios much less.  Beside each rate, the client
processes' CPU milliseconds per item (and the servers', when they run on this machine)
tell a client-bound figure from a server-bound one.  The run prints one table, checks
the project's targets (PASS/FAIL/SKIP, never failing the command), and writes
``bench.png`` and ``results.json`` to ``--out``.  See docs/performance.md for the
methodology.

Clients are separate processes (``multiprocessing`` with ``spawn``): each has its own
FoundationDB network thread, as separate application servers would.  They connect, wait
at a barrier so that all start together, run, and report (count, seconds, retries, CPU
seconds) through a queue.  Every measurement uses a fresh subspace, cleared afterwards.

The modules, in the order a run uses them:

* :mod:`~fdbrecipes.bench.settings`: what is measured (the kinds, the groups) and the
  run's parameters, from the command-line options;
* :mod:`~fdbrecipes.bench.suite`: every measurement in order against one cluster, and
  :func:`run_bench` / :func:`main`, which run it;
* :mod:`~fdbrecipes.bench.fill`: pre-filling the structures the pops drain;
* :mod:`~fdbrecipes.bench.clients`: the client processes;
* :mod:`~fdbrecipes.bench.operations`: what each client does, per kind;
* :mod:`~fdbrecipes.bench.flow` and :mod:`~fdbrecipes.bench.keyed`: the ``flow``
  group (flow control beside the same work without it: its clients and fills, and the
  claim latency under a keyed limit, measured in the parent);
* :mod:`~fdbrecipes.bench.recipe`: the recipe baseline and the benchmark's retry loop;
* :mod:`~fdbrecipes.bench.cpu`: client and server CPU time;
* :mod:`~fdbrecipes.bench.results`: reports combined into rows, ratios, latencies;
* :mod:`~fdbrecipes.bench.targets`: the targets checked against them;
* :mod:`~fdbrecipes.bench.machine`: where the figures come from;
* :mod:`~fdbrecipes.bench.report` and :mod:`~fdbrecipes.bench.chart`: the tables,
  ``results.json`` and ``bench.png``.
"""

from .settings import add_arguments
from .suite import main, run_bench

__all__ = ["add_arguments", "main", "run_bench"]
