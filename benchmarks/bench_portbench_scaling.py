"""PortBench cost against the universe size N on synthetic seeded universes (issue 19 item 2).

    python benchmarks/bench_portbench_scaling.py [--sizes 20,80,320,1000,2000] [--max-steps 0] [--json PATH]
                                                 [--no-append]

For each N, a fresh child process builds a **synthetic** universe through ``data=`` (seeded: N assets over
the bundled NYSE calendar 2014-2025, one market factor plus class factors plus noise, one asset in ten
listed late, classes in turn over the six §1.1 classes, ``SPY`` the first equity; no macro series) and runs
``PortBenchEnv(period=daily 2016-2023, scoring=False)`` with pre-generated random weights:

- cold step: wall time of each step of the first episode (every decision row visited for the first time:
  snapshot parts, the N×N correlation of the observation), mean and p95, and its CPU time
  (``time.process_time``: what the step costs when the machine is shared);
- steps/s: a second episode, per wall second and per CPU second (the row cache holds what fits in
  ``ROW_CACHE_BYTES``; at large N most rows are recomputed, so this is close to the cold rate);
- peak RSS of the child (``ru_maxrss``: data, env, caches; the Python interpreter and numpy included).

``--max-steps K`` stops each episode after K steps (0: the whole 2,012-day episode). ``--json PATH`` writes
``{"sizes": [...], "results": {N: {"cold_ms_mean", "cold_ms_p95", "cold_cpu_ms_mean", "steps_per_s",
"steps_per_cpu_s", "peak_rss_mib", "steps", "row_cache_mib"}}, "errors", "context" (versions, load average)}``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import append_performance, run_context  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DAILY = {"start": "2016-01-01", "end": "2023-12-31", "freq": "daily"}
CLASSES = ("equity", "bond", "commodity", "real_estate", "crypto", "cash")


def synthetic_data(n: int, seed: int = 0):
    """A seeded synthetic :class:`PortBenchData` of ``n`` assets on the bundled calendar (see module docstring)."""
    import numpy as np
    import pandas as pd

    from quantgym.envs.portbench.data import PortBenchData, load_portbench_data

    dates = pd.DatetimeIndex(load_portbench_data().dates)
    rng = np.random.default_rng(seed)
    t = len(dates)
    cls = [CLASSES[i % len(CLASSES)] for i in range(n)]
    market = rng.normal(0.0003, 0.01, t)
    factor = {c: rng.normal(0.0, 0.006, t) for c in CLASSES}
    beta = rng.uniform(0.2, 1.2, n)
    r = np.column_stack([beta[i] * market + factor[cls[i]] + rng.normal(0.0, 0.012, t) for i in range(n)])
    px = 100.0 * np.exp(np.cumsum(r, axis=0))
    late = rng.choice(n, size=n // 10, replace=False)
    for i in late:
        px[: rng.integers(1, t // 2), i] = np.nan
    tickers = [f"A{i:04d}" for i in range(n)]
    tickers[0] = "SPY"
    px[:, 0] = 100.0 * np.exp(np.cumsum(market + factor["equity"], axis=0))
    prices = pd.DataFrame(px, index=dates, columns=tickers)
    return PortBenchData.from_frames(prices, dict(zip(tickers, cls)), meta={"source": f"synthetic seed {seed}"})


def measure(n: int, max_steps: int, seed: int) -> dict:
    """One size in this process (the child)."""
    import warnings

    import numpy as np

    from quantgym.envs.portbench import market
    from quantgym.envs.portbench.env import PortBenchEnv

    warnings.filterwarnings("ignore")
    data = synthetic_data(n, seed)
    env = PortBenchEnv(profile="balanced", period=DAILY, scoring=False, data=data)
    rng = np.random.default_rng(seed)
    acts = [{"views": np.zeros(n), "signals": np.ones(n, np.int64), "weights": rng.uniform(0, 1, n), "status": 0}
            for _ in range(64)]
    cold, cold_cpu = [], []
    env.reset(seed=seed)
    done, i = False, 0
    while not done and (max_steps <= 0 or i < max_steps):
        t0, c0 = time.perf_counter(), time.process_time()
        done = env.step(acts[i % 64])[2]
        cold.append(1e3 * (time.perf_counter() - t0))
        cold_cpu.append(1e3 * (time.process_time() - c0))
        i += 1
    env.reset(seed=seed)
    done, k = False, 0
    t0, c0 = time.perf_counter(), time.process_time()
    while not done and k < i:
        done = env.step(acts[k % 64])[2]
        k += 1
    rate, rate_cpu = k / (time.perf_counter() - t0), k / max(time.process_time() - c0, 1e-9)
    arrays = market._SHARED[env.view.data][("arrays", *env.view._row_cache_key)]
    c, cc = np.asarray(cold), np.asarray(cold_cpu)
    return {"n": n, "steps": i, "cold_ms_mean": float(c.mean()), "cold_ms_p95": float(np.percentile(c, 95)),
            "cold_cpu_ms_mean": float(cc.mean()), "steps_per_s": rate, "steps_per_cpu_s": rate_cpu,
            "row_cache_mib": arrays.nbytes / 2**20,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)  # one size, in a fresh process
    ap.add_argument("--sizes", default="20,80,320,1000,2000", help="comma-separated universe sizes N")
    ap.add_argument("--max-steps", type=int, default=0, help="steps per episode (0: the whole episode)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic universe and the actions")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    ap.add_argument("--no-append", action="store_true", help="print only; leave docs/performance.md alone")
    a = ap.parse_args(argv)
    if a.child:
        return print(json.dumps(measure(a.child, a.max_steps, a.seed)))
    sizes = [int(x) for x in a.sizes.split(",")]
    res, errors = {}, {}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for n in sizes:
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(n), "--max-steps",
                            str(a.max_steps), "--seed", str(a.seed)], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=7200)
        if p.returncode != 0:
            errors[n] = (p.stderr.strip().splitlines() or ["failed"])[-1]
            print(f"N = {n}: {errors[n]}", flush=True)
            continue
        res[n] = json.loads(p.stdout.strip().splitlines()[-1])
        r = res[n]
        print(f"N = {n:5d}: {r['steps']} steps, cold {r['cold_ms_mean']:.2f} ms (CPU {r['cold_cpu_ms_mean']:.2f}), "
              f"{r['steps_per_s']:,.0f} steps/s, peak RSS {r['peak_rss_mib']:,.0f} MiB", flush=True)
    ctx = run_context()
    table = ["| N (synthetic) | steps | cold step wall, mean (p95) | cold step CPU, mean | steps/s, 2nd episode: wall "
             "(per CPU-s) | row-array cache | peak RSS |", "|---|---|---|---|---|---|---|"]
    for n, r in res.items():
        table.append(f"| {n} | {r['steps']:,} | {r['cold_ms_mean']:.2f} ms ({r['cold_ms_p95']:.2f}) | "
                     f"{r['cold_cpu_ms_mean']:.2f} ms | {r['steps_per_s']:,.0f} ({r['steps_per_cpu_s']:,.0f}) | "
                     f"{r['row_cache_mib']:,.0f} MiB | {r['peak_rss_mib']:,.0f} MiB |")
    print("\n".join(table))
    if a.json:
        Path(a.json).write_text(json.dumps({"sizes": sizes, "results": res, "errors": errors, "context": ctx},
                                           indent=1))
    if not a.no_append:
        cmd = "python benchmarks/bench_portbench_scaling.py" + "".join(f" {x}" for x in (argv or sys.argv[1:]))
        append_performance("PortBench scaling in N, synthetic universes", cmd,
                           "**Synthetic** seeded universes through `data=` (module docstring of the script), daily "
                           "decisions 2016-2023, scoring off, one fresh process per N.", table,
                           [f"Not measured: N = {k}: {v}" for k, v in errors.items()])

if __name__ == "__main__":
    main()
