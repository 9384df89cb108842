"""What the benchmark measures, and the run's parameters from the command line.

A :class:`Kind` says what the clients of one measurement do and how its rate is named;
:class:`Settings` holds the run's parameters, which :func:`add_arguments` and
:func:`settings_from_args` make from ``fdbrecipes bench``'s options.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

#: Client process counts the suite measures at (capped by ``--clients``).
CLIENT_COUNTS = (1, 2, 4, 8, 16)
#: WeightTree sizes (``--quick`` stops at 10^5).
TREE_SIZES = (10**3, 10**4, 10**5, 10**6)
QUICK_TREE_SIZES = TREE_SIZES[:3]
DEFAULT_DURATION = 5.0
QUICK_DURATION = 1.0


# --------------------------------------------------------------------------------------
# What is measured
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One kind of measurement: what its clients do and how its rate is named.

    Attributes:
        label: its name in the table.
        op: the client operation (a key of :data:`fdbrecipes.bench.clients.FACTORIES`).
        batch: items per operation (keys per transaction, values per push_many).
        unit: what the rate counts.
        recipe: label of the recipe baseline it is compared with (None: none).
        drains: True for pops, which empty a pre-filled queue; False for operations
            run for ``--duration`` seconds.
    """

    label: str
    op: str
    batch: int
    unit: str
    recipe: Optional[str]
    drains: bool = False


LIMIT = Kind("limit: 1-key write tx", "write", 1, "tx/s", None)
LIMIT_BATCH = Kind("limit: 100-key write tx", "write", 100, "keys/s", None)
RECIPE_PUSH = Kind("recipe push", "recipe-push", 1, "items/s", "recipe push")
PUSH = Kind("Queue.push", "push", 1, "items/s", RECIPE_PUSH.label)
PUSH_MANY = Kind("Queue.push_many(100)", "push", 100, "items/s", RECIPE_PUSH.label)
RECIPE_POP = Kind("recipe pop", "recipe-pop", 1, "pops/s", "recipe pop", drains=True)
POP = Kind("Queue.pop", "pop", 1, "pops/s", RECIPE_POP.label, drains=True)
HC_POP = Kind("Queue.pop high_contention", "hc-pop", 1, "pops/s", RECIPE_POP.label,
              drains=True)
POP_KINDS = (RECIPE_POP, POP, HC_POP)


@dataclass(frozen=True)
class Settings:
    """The run's parameters, from the command line."""

    clients: Tuple[int, ...]
    duration: float
    items: int
    samples: int
    sizes: Tuple[int, ...]
    out: Path
    seed: int
    quick: bool

    @property
    def most(self) -> int:
        """K: the largest client count measured."""
        return self.clients[-1]

    @property
    def ends(self) -> Tuple[int, ...]:
        """1 and K (once when K is 1): where pushes and batched writes are measured."""
        return tuple(sorted({1, self.most}))


def client_counts(most: int) -> Tuple[int, ...]:
    """1, 2, 4, 8, 16 up to ``most``, and ``most`` itself (``--clients 6``: 1, 2, 4, 6)."""
    counts = [c for c in CLIENT_COUNTS if c <= most]
    if most not in counts:
        counts.append(most)
    return tuple(counts)


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def positive_float(text: str) -> float:
    """argparse type: a positive finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def positive_int(text: str) -> int:
    """argparse type: a positive whole number."""
    value = positive_float(text)
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text}")
    return int(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options (``fdbrecipes bench`` and ``benchmarks/run.py``)."""
    parser.description = (
        "Measure the limit (raw write transactions), pushes, plain and high-contention "
        "pops against the recipe's, and WeightTree pop latency, against FDB_CLUSTER_FILE "
        "or a throwaway local fdbserver; print a table, write bench.png and results.json."
    )
    parser.add_argument("--clients", type=positive_int, default=16, metavar="K",
                        help="most client processes (counts 1, 2, 4, 8, 16 up to K; "
                        "default 16)")
    parser.add_argument("--duration", type=positive_float, default=None, metavar="SECONDS",
                        help=f"seconds per timed measurement (default {DEFAULT_DURATION:g}, "
                        f"{QUICK_DURATION:g} with --quick)")
    parser.add_argument("--items", type=positive_int, default=2000,
                        help="items in the queue each pop measurement drains (default 2000)")
    parser.add_argument("--samples", type=positive_int, default=500,
                        help="timed WeightTree pops per size (default 500)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), metavar="DIR",
                        help="where bench.png and results.json go (default bench-results/)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the WeightTree's weights and picks (default 0)")
    parser.add_argument("--quick", action="store_true",
                        help="WeightTree up to 10^5 items, 1-second timed measurements")


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The run's parameters from parsed arguments (applying ``--quick``)."""
    default = QUICK_DURATION if args.quick else DEFAULT_DURATION
    return Settings(
        clients=client_counts(args.clients),
        duration=default if args.duration is None else args.duration,
        items=args.items,
        samples=args.samples,
        sizes=QUICK_TREE_SIZES if args.quick else TREE_SIZES,
        out=args.out,
        seed=args.seed,
        quick=args.quick,
    )
