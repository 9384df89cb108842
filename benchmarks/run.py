"""Run the benchmark suite: ``python benchmarks/run.py [options]`` is ``fdbrecipes bench``.

See benchmarks/README.md for what is measured and where the results go.
"""

from __future__ import annotations

import sys

from fdbrecipes.bench import main

if __name__ == "__main__":  # required: client processes are spawned and import this file
    sys.exit(main())
