"""What Python's garbage collector costs a PortBench daily step.

    python benchmarks/bench_portbench_gc.py [--duration 3]
    QUANTGYM_BENCH_CODE=/path/to/other/checkout python benchmarks/bench_portbench_gc.py   # another revision

For the raw (scoring off) and the scored allocation step (bundled data, 80 assets, daily decisions
2016-2023, warm per-dataset caches, ``bench_portbench_steps.bench_single``): steps/s; the collections of each
generation and the time they took during the run (``gc.callbacks``); steps/s with the collector switched off
(``gc.disable()``) for comparison; and the objects a step leaves tracked by the collector (counted over 1,000
steps after ``gc.collect()`` twice). Prints a table; nothing is written.
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("QUANTGYM_BENCH_CODE", str(ROOT)))
sys.path.insert(1, str(ROOT / "benchmarks"))

from bench_portbench_steps import DAILY, bench_single, dict_actions, warm  # noqa: E402

from quantgym.envs.portbench.env import PortBenchEnv  # noqa: E402


def measure(scoring: bool, duration: float) -> dict:
    env = PortBenchEnv(profile="balanced", period=DAILY, scoring=scoring)
    acts = dict_actions(env.n_assets, 1024, 0)
    warm(env, acts, 0)
    stats = collections.defaultdict(lambda: [0, 0.0])
    start = [0.0]

    def cb(phase: str, info: dict) -> None:
        if phase == "start":
            start[0] = time.perf_counter()
        else:
            s = stats[info["generation"]]
            s[0] += 1
            s[1] += time.perf_counter() - start[0]

    gc.callbacks.append(cb)
    try:
        t0 = time.perf_counter()
        rate = bench_single(env, acts, duration, 0)["wall"]
        wall = time.perf_counter() - t0
    finally:
        gc.callbacks.remove(cb)
    gc.disable()
    try:
        rate_off = bench_single(env, acts, duration, 0)["wall"]
        env.reset(seed=0)
        for i in range(10):
            env.step(acts[i])
        gc.collect()
        gc.collect()
        before = len(gc.get_objects())
        for i in range(1000):
            env.step(acts[i % len(acts)])
        gc.collect()
        gc.collect()
        kept = (len(gc.get_objects()) - before) / 1000
    finally:
        gc.enable()
    return {"rate": rate, "rate_off": rate_off, "wall": wall, "kept": kept,
            "gens": {g: (n, t) for g, (n, t) in sorted(stats.items())}}


def main() -> None:
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per measurement")
    args = ap.parse_args()
    import quantgym

    print(f"code: {Path(quantgym.__file__).parent.parent}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'step':8} {'steps/s':>8} {'gc off':>8} {'gen0':>11} {'gen1':>11} {'gen2':>11} {'kept':>5}")
    for scoring in (False, True):
        r = measure(scoring, args.duration)
        cells = []
        for g in range(3):
            n, t = r["gens"].get(g, (0, 0.0))
            cells.append(f"{n:>4} {100 * t / r['wall']:4.1f}%")
        print(f"{'scored' if scoring else 'raw':8} {r['rate']:8,.0f} {r['rate_off']:8,.0f} {' '.join(f'{c:>11}' for c in cells)} "
              f"{r['kept']:5.2f}")
    print("genK: collections during the run, their share of its wall time\n"
          "kept: objects a step leaves tracked by the collector")


if __name__ == "__main__":
    main()
