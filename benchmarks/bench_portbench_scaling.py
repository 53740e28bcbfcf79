"""PortBench cost against the universe size N on synthetic seeded universes.

    python benchmarks/bench_portbench_scaling.py [--sizes 20,80,320,1000,2000] [--obs full,no-corr]
                                                 [--max-steps 0] [--json PATH] [--no-write]

For each N and observation, a fresh child process builds a **synthetic** universe through ``data=``
(seeded: N assets over the bundled NYSE calendar 2014-2025, one market factor plus class factors plus
noise, one asset in ten listed late, classes in turn over the six §1.1 classes, ``SPY`` the first
equity; no macro series) and runs ``PortBenchEnv(period=daily 2016-2023, scoring=False)`` (direct
allocation, the classical baselines' setting) with pre-generated random weights. Observations:

- ``full``: the default observation (every entry, the (N, N) ``corr`` included);
- ``no-corr``: ``obs_keys`` = every entry but ``corr`` (an allocation policy that does not read the
  correlation matrix; nothing in the step computes it then).

Figures per (N, observation):

- cold step: wall time of each ``env.step`` of the first episode, each step reaching a decision row
  no env over this data has seen (the trade, the day loop to the next decision date, that row's
  snapshot parts: availability, window statistics, regime; its observation: the (L, N) window and,
  with ``full``, the N×N correlation; the observation copies): median, mean and p95, and the median and
  mean CPU time (``time.process_time``: what the step costs when the machine is shared). A step that reaches
  a row not computed yet computes the next rows' window arrays with it, in one batch (several rows at small
  N, ``market.ROW_BATCH_BYTES``): the median is then a step without a batch, the mean (and ``cold_cpu_s``,
  the whole first episode's CPU seconds) what the episode pays per step. Not included: data
  loading, construction and ``reset``; numba's import and the load of the compiled correlation kernel
  (``full``: done once before the episode, the first call of a process, about 0.1-1 s, the machine code
  cached on disk; ``no-corr`` never loads them);
- steps/s: a second episode (the row cache keeps the first rows that fit in ``ROW_CACHE_BYTES``; with
  ``full`` at large N the later rows are recomputed, so this nears the cold rate), per wall and per CPU second;
- peak RSS of the child (``ru_maxrss``: data, env, caches; the Python interpreter and numpy included).

``--max-steps K`` stops each episode after K steps (0: the whole 2,012-day episode). The table is printed;
the generated block ``perf-pb-scaling`` of docs/performance.md is written by ``benchmarks/run_all.py`` from its
own run of this script, whose figures CI checks (``--no-write`` is accepted and does nothing). ``--json PATH`` writes ``{"sizes",
"obs", "max_steps", "results": {"N/obs": {"cold_ms_median", "cold_ms_mean", "cold_ms_p95",
"cold_cpu_ms_median", "cold_cpu_ms_mean", "cold_cpu_s", "steps_per_s", "steps_per_cpu_s", "peak_rss_mib", "steps",
"row_cache_mib"}},
"errors", "context" (versions, load average)}``.
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
from _common import run_context  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DAILY = {"start": "2016-01-01", "end": "2023-12-31", "freq": "daily"}
CLASSES = ("equity", "bond", "commodity", "real_estate", "crypto", "cash")
OBS = ("full", "no-corr")
BLOCK = "perf-pb-scaling"


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


def measure(n: int, obs: str, max_steps: int, seed: int) -> dict:
    """One (size, observation) in this process (the child)."""
    import warnings

    import numpy as np

    from quantgym.envs.portbench import market
    from quantgym.envs.portbench.correlation import pairwise_corr
    from quantgym.envs.portbench.env import OBS_KEYS, PortBenchEnv

    warnings.filterwarnings("ignore")
    data = synthetic_data(n, seed)
    kw = {} if obs == "full" else {"obs_keys": [k for k in OBS_KEYS if k != "corr"]}
    env = PortBenchEnv(profile="balanced", period=DAILY, scoring=False, data=data, **kw)
    if obs == "full":  # numba's import and the kernel's load: not part of a step (no-corr never loads them)
        pairwise_corr(np.zeros((3, 2)))
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
    arrays = market.SHARED_CACHES[env.view.data][("arrays", *env.view._row_cache_key)]
    c, cc = np.asarray(cold), np.asarray(cold_cpu)
    return {"n": n, "obs": obs, "steps": i, "cold_ms_median": float(np.median(c)), "cold_ms_mean": float(c.mean()),
            "cold_ms_p95": float(np.percentile(c, 95)), "cold_cpu_ms_median": float(np.median(cc)),
            "cold_cpu_ms_mean": float(cc.mean()), "cold_cpu_s": float(cc.sum()) / 1e3,
            "steps_per_s": rate, "steps_per_cpu_s": rate_cpu, "row_cache_mib": arrays.nbytes / 2**20,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def table(res: dict) -> list[str]:
    """The markdown table of a run's ``results`` (this script's JSON)."""
    out = ["| N (synthetic) | observation | steps | cold step wall: median, mean (p95) | cold step CPU: median, mean | "
           "steps/s, 2nd episode: wall (per CPU-s) | row-array cache | peak RSS |",
           "|---|---|---|---|---|---|---|---|"]
    for r in res.values():
        out.append(f"| {r['n']:,} | {r['obs']} | {r['steps']:,} | {r['cold_ms_median']:.2f} ms, "
                   f"{r['cold_ms_mean']:.2f} ms ({r['cold_ms_p95']:.2f}) | {r['cold_cpu_ms_median']:.2f} ms, "
                   f"{r.get('cold_cpu_ms_mean', float('nan')):.2f} ms | "
                   f"{r['steps_per_s']:,.0f} ({r['steps_per_cpu_s']:,.0f}) | {r['row_cache_mib']:,.0f} MiB | "
                   f"{r['peak_rss_mib']:,.0f} MiB |")
    return out


def block(run: dict, command: str, stage: str = "") -> str:
    """The generated block ``perf-pb-scaling`` of docs/performance.md from this script's JSON ``run``
    (``command``: what generated it; ``stage``: this script's command line when another one ran it)."""
    ctx = run["context"]
    steps = "whole 2,012-day episodes" if run["max_steps"] <= 0 else f"the first {run['max_steps']} decisions"
    head = (f"Generated by `{command}` ({f'stage `{stage}`; ' if stage else ''}{ctx['date']}; {steps}; 1-min load "
            f"average {ctx['load_avg']:.1f} at the end; this 2-core machine is shared with other jobs; Python "
            f"{ctx['python']}, numpy {ctx['numpy']}, gymnasium {ctx['gymnasium']}). **Synthetic** seeded universes "
            "through `data=`, daily decisions 2016-2023, scoring off, one fresh process per row; `full` = the "
            "default observation, `no-corr` = `obs_keys` without the (N, N) `corr`. What a cold step includes and "
            "excludes: the docstring of benchmarks/bench_portbench_scaling.py.\n\n")
    notes = "".join(f"\nNot measured: {k}: {v}\n" for k, v in run["errors"].items())
    return head + "\n".join(table(run["results"])) + "\n" + notes


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)  # one size, in a fresh process
    ap.add_argument("--sizes", default="20,80,320,1000,2000", help="comma-separated universe sizes N")
    ap.add_argument("--obs", default=",".join(OBS), help=f"comma-separated observations among {', '.join(OBS)}")
    ap.add_argument("--max-steps", type=int, default=0, help="steps per episode (0: the whole episode)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic universe and the actions")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    ap.add_argument("--no-write", action="store_true", help=argparse.SUPPRESS)  # printing is all it does
    argv = sys.argv[1:] if argv is None else argv
    a = ap.parse_args(argv)
    obs_list = [x.strip() for x in a.obs.split(",")]
    bad = [x for x in obs_list if x not in OBS]
    if bad:
        ap.error(f"--obs: unknown {bad}; valid: {', '.join(OBS)}")
    if a.child:
        return print(json.dumps(measure(a.child, obs_list[0], a.max_steps, a.seed)))
    sizes = [int(x) for x in a.sizes.split(",")]
    res, errors = {}, {}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for n in sizes:
        for obs in obs_list:
            key = f"{n}/{obs}"
            p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(n), "--obs", obs,
                                "--max-steps", str(a.max_steps), "--seed", str(a.seed)], capture_output=True,
                               text=True, env=env, cwd=ROOT, timeout=7200)
            if p.returncode != 0:
                errors[key] = (p.stderr.strip().splitlines() or ["failed"])[-1]
                print(f"N = {n} {obs}: {errors[key]}", flush=True)
                continue
            res[key] = r = json.loads(p.stdout.strip().splitlines()[-1])
            print(f"N = {n:5d} {obs:8s}: {r['steps']} steps, cold median {r['cold_ms_median']:.2f} ms "
                  f"(CPU {r['cold_cpu_ms_median']:.2f}, mean {r['cold_cpu_ms_mean']:.2f}), {r['steps_per_s']:,.0f} steps/s "
                  f"({r['steps_per_cpu_s']:,.0f} per CPU-s), "
                  f"peak RSS {r['peak_rss_mib']:,.0f} MiB", flush=True)
    ctx = {**run_context(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    run = {"sizes": sizes, "obs": obs_list, "max_steps": a.max_steps, "results": res, "errors": errors,
           "context": ctx}
    print("\n".join(table(res)))
    if a.json:
        Path(a.json).write_text(json.dumps(run, indent=1))



if __name__ == "__main__":
    main()
