"""Speed of the LOBSTER book rebuilder (quantgym.data.lobster) on the full bundled MSFT hour.

Rebuilds the book after each of the 141,507 messages of MSFT 2012-06-21 09:30-10:30 from the
excerpt's first 50-level row (message 66,912: backward to 09:30 and forward to 10:30), at 50
and at 10 output levels, and reports messages per second (wall and CPU time of this process,
best of ``--repeat``). Reading the parquet message file is timed separately.

Run::

    python benchmarks/bench_lobster_rebuild.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from quantgym.data import lobster


def best_of(fn, repeat: int) -> tuple[float, float, object]:
    """(best wall seconds, best CPU seconds, last result) over ``repeat`` calls of ``fn``."""
    wall, cpu, out = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu), out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    w, c, msgs = best_of(lambda: lobster.read_messages(lobster.MSFT_HOUR_MESSAGES), a.repeat)
    n = len(msgs)
    row = lobster.read_orderbook(lobster.MSFT_EXCERPT_BOOK)[0]
    print(f"load average {os.getloadavg()[0]:.1f}; numpy {np.__version__}; best of {a.repeat}")
    print(f"read_messages (parquet, {n:,} messages): wall {w:.3f} s, CPU {c:.3f} s")
    for levels in (50, 10):
        w, c, r = best_of(lambda: lobster.rebuild_book(msgs, row, lobster.MSFT_EXCERPT_START, levels=levels,
                                                       message_levels=50), a.repeat)
        print(f"rebuild_book, {levels} levels, both directions: wall {w:.3f} s = {n / w / 1e3:,.0f} k messages/s; "
              f"CPU {c:.3f} s = {n / c / 1e3:,.0f} k messages/CPU-s  ({r.n_unknown:,} unknown cells of "
              f"{r.known.size:,})")


if __name__ == "__main__":
    main()
