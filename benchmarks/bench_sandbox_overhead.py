"""Overhead of one sandboxed run (quantgym.sandbox.run_in_sandbox).

Usage: python benchmarks/bench_sandbox_overhead.py [--runs 10]

Prints median / min / max wall seconds (host-measured, spawn to reaped), the child's CPU seconds,
and the child's start-up time (imports of the runner, numpy, pandas, scipy and the pre-imported
submodules, up to lockdown) for:
  * an empty submission calling a trivial function (the fixed cost of one evaluation),
  * the same without the network namespace (``isolate_network=False``),
  * a source that imports scipy.stats (the common scipy submodules are then pre-imported),
  * a 50 MB float64 payload echoed back (payload in, result frame out).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

from quantgym.sandbox import SandboxLimits, run_in_sandbox

RUNNER = "quantgym.sandbox.runners:call_function"
EMPTY = "def f(*args):\n    return None if not args else args[0]\n"
SCIPY = "import scipy.stats\n" + EMPTY


def measure(label: str, n: int, limits: SandboxLimits, args: list, source: str = EMPTY) -> None:
    walls, cpus, starts = [], [], []
    for _ in range(n):
        r = run_in_sandbox(source, RUNNER, {"function": "f", "args": args}, limits)
        assert r.ok, r.message
        walls.append(r.wall_seconds)
        cpus.append(r.cpu_seconds)
        starts.append(r.details.get("startup_seconds", float("nan")))
    print(f"{label:38s} wall median {statistics.median(walls):.3f} s (min {min(walls):.3f}, max {max(walls):.3f}); "
          f"child CPU median {statistics.median(cpus):.3f} s; child start-up median {statistics.median(starts):.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M:%S')}")
    measure("empty run", a.runs, SandboxLimits(), [])
    measure("empty run, isolate_network=False", a.runs, SandboxLimits(isolate_network=False), [])
    measure("source importing scipy.stats", a.runs, SandboxLimits(), [], SCIPY)
    big = np.random.default_rng(0).standard_normal(50 * 1024 * 1024 // 8)
    measure("50 MB payload echoed back", max(3, a.runs // 2), SandboxLimits(), [big])


if __name__ == "__main__":
    main()
