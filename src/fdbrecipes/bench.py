"""Benchmark suite (placeholder, being written)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true")


def run_bench(args: argparse.Namespace) -> int:
    raise NotImplementedError
