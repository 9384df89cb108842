"""The benchmark suite: ``fdbrecipes bench`` (also ``python benchmarks/run.py``).

In one run against one cluster it measures:

1. the limit: 1-key write transactions per second from 1, 2, 4, 8, 16 client processes,
   and 100-key write transactions (keys per second) from 1 and K processes;
2. pushes: ``Queue.push``, ``Queue.push_many`` (100 values) and the recipe's push, from
   1 and K processes;
3. pops: the recipe's pop, ``Queue.pop`` and the high-contention ``Queue.pop`` draining a
   pre-filled queue with 1, 2, 4, 8, 16 popper processes (pops per second, retries per
   pop);
4. ``WeightTree.pop`` latency at 10^3 ... 10^6 live items.

Every rate is printed with its ratio to the limit measured at the same number of client
processes, and to the recipe baseline measured at the same number, both in the same run:
absolute figures depend on the machine, ratios much less.  The run prints one table, checks
the project's targets (PASS/FAIL, never failing the command), and writes ``bench.png`` and
``results.json`` to ``--out``.  See docs/performance.md for the methodology.

Clients are separate processes (``multiprocessing`` with ``spawn``): each has its own
FoundationDB network thread, as separate application servers would.  They connect, wait
at a barrier so that all start together, run, and report (count, seconds, retries)
through a queue.  Every measurement uses a fresh subspace, cleared afterwards.

The modules, in the order a run uses them:

* :mod:`~fdbrecipes.bench.settings`: what is measured (the kinds) and the run's
  parameters, from the command-line options;
* :mod:`~fdbrecipes.bench.suite`: every measurement in order against one cluster, and
  :func:`run_bench` / :func:`main`, which run it;
* :mod:`~fdbrecipes.bench.clients`: the client processes and the recipe baseline;
* :mod:`~fdbrecipes.bench.results`: reports combined into rows, ratios, latencies and
  the targets;
* :mod:`~fdbrecipes.bench.machine`: where the figures come from;
* :mod:`~fdbrecipes.bench.report`: the tables, ``results.json`` and ``bench.png``.
"""

from .settings import add_arguments
from .suite import main, run_bench

__all__ = ["add_arguments", "main", "run_bench"]
