"""Speed of the Quant-Arena evaluator (issue §3: one sealed-year evaluation in about a second).

Measures, on the bundled 800-stock universe and the default sealed window (2024, 242
execution days), the host-side evaluation **excluding agent code**: the cash account
(book walks, fees, limits), the reference, the labels, every metric and the score, from a
precomputed low-volatility score matrix. Also reports, for context, the pieces separately
and one full sandboxed evaluation (child start-up + agent code + commit-reveal keeper).

Run: ``python benchmarks/bench_quant_arena.py [--repeat 5] [--no-sandbox] [--intraday] [--json PATH]``.
Prints a markdown table (best of ``--repeat`` runs; ratios on the same machine are what matter).
``--intraday`` adds the cost of the real Level-2 tables: the first read of the
a_share_l2 files for the bundled universe, the pickled size of the tables a window's payload
carries, and one sandboxed sealed evaluation with and without them.

``--first-call`` instead measures the compiled kernels' one-time cost: the first sealed-year
evaluation of a fresh process with an empty numba cache (it compiles), then of a second process that
loads the cache the first wrote (wall and CPU seconds).

``--scaling PANEL`` instead measures the time of one sealed-year evaluation (2024, seeded 20-day
momentum scores, no agent code) against the number of stocks: N stocks drawn (seeded) from the
panel ``PANEL`` (e.g. the full 5,086-stock raw ``quant_arena/daily.parquet`` that maintainers keep), for each N
of ``--sizes`` (default 100, 200, 400, 800, 1600, 3200 and all); median of ``--repeat`` calls after
a warm-up, with the account alone beside it. The dataset build (parquet → arrays) is not timed.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def _best(fn, repeat):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def momentum_scores(ds, d0: int, n: int) -> np.ndarray:
    """20-day momentum score of each decision date (NaN off the panel), (n, N)."""
    close = ds.ffill("close")
    rows = np.arange(d0, d0 + n)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = close[rows] / close[rows - 20] - 1.0
    return np.where(ds.has_row[rows], s, np.nan)


def scaling(panel: str, sizes: list[int], repeat: int) -> list[dict]:
    """Seconds per sealed-year evaluation (median of ``repeat``) for N stocks drawn from ``panel``."""
    import statistics

    import pandas as pd

    from quantgym.envs.quant_arena.account import run_account, window_rows
    from quantgym.envs.quant_arena.data import BUNDLED_DIR, ArenaDataset
    from quantgym.envs.quant_arena.exchange import price_limits
    from quantgym.envs.quant_arena.executor import evaluate_scores

    df = pd.read_parquet(panel)
    here = os.path.dirname(os.path.abspath(panel))
    info_path = os.path.join(here, "symbols.csv")
    info = pd.read_csv(info_path, dtype={"symbol": str}) if os.path.exists(info_path) else None
    ref_path = os.path.join(here, "market_reference.csv")
    ref = pd.read_csv(ref_path if os.path.exists(ref_path) else BUNDLED_DIR / "market_reference.csv")
    symbols = np.random.default_rng(0).permutation(np.sort(df["symbol"].unique()))
    out = []
    for N in sizes:
        N = min(N, symbols.size)
        keep = set(symbols[:N].tolist())
        ds = ArenaDataset.from_frame(df[df["symbol"].isin(keep)], info=info, reference=ref, name=f"scaling-{N}")
        d0, n = window_rows(ds, "2024-01-01", "2024-12-31")
        S = momentum_scores(ds, d0, n)
        price_limits(ds)
        ev = evaluate_scores(ds, d0, n, S)  # warm-up
        t_eval, t_acc = [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            evaluate_scores(ds, d0, n, S)
            t_eval.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            run_account(ds, d0, n, S)
            t_acc.append(time.perf_counter() - t0)
        out.append({"stocks": ds.N, "days": n, "eval_s": statistics.median(t_eval), "account_s": statistics.median(t_acc),
                    "orders": ev["metrics"]["n_orders"], "load_avg": os.getloadavg()[0]})
        print(f"N = {ds.N:5d}: evaluation {out[-1]['eval_s'] * 1e3:7.1f} ms, account {out[-1]['account_s'] * 1e3:7.1f} ms"
              f" ({out[-1]['orders']} orders, load {out[-1]['load_avg']:.1f})", flush=True)
        if N == symbols.size:
            break
    return out


_FIRST_CALL = """
import json, time
import numpy as np
from quantgym.envs.quant_arena.account import window_rows
from quantgym.envs.quant_arena.data import load_dataset
from quantgym.envs.quant_arena.exchange import book_series, price_limits
from quantgym.envs.quant_arena.executor import evaluate_scores
ds = load_dataset()
d0, n = window_rows(ds, "2024-01-01", "2024-12-31")
close = ds.ffill("close")
rows = np.arange(d0, d0 + n)
with np.errstate(invalid="ignore", divide="ignore"):
    sc = np.where(ds.has_row[rows], close[rows] / close[rows - 20] - 1.0, np.nan)
price_limits(ds), book_series(ds)
t, c = time.perf_counter(), time.process_time()
evaluate_scores(ds, d0, n, sc)
t1, c1 = time.perf_counter(), time.process_time()
evaluate_scores(ds, d0, n, sc)
print(json.dumps({"first_s": t1 - t, "first_cpu_s": c1 - c, "second_s": time.perf_counter() - t1}))
"""


def first_call() -> list[dict]:
    """The compiled kernels' first-call cost: two fresh processes sharing an empty ``NUMBA_CACHE_DIR``
    (the first compiles and writes the cache, the second loads it); each times its first and second
    sealed-year evaluation (wall and CPU seconds; the first includes ``import numba``)."""
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": root}
        out = []
        for _ in range(2):
            r = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True, text=True,
                               check=True)
            out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    for name, r in zip(("empty cache (compiles)", "cache filled"), out):
        print(f"{name:24s}: first evaluation {r['first_s']:6.2f} s (CPU {r['first_cpu_s']:5.2f} s), "
              f"second {1e3 * r['second_s']:6.1f} ms; load {os.getloadavg()[0]:.1f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-sandbox", action="store_true")
    ap.add_argument("--intraday", action="store_true", help="also time the Level-2 intraday tables")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    ap.add_argument("--scaling", metavar="PANEL", help="time per evaluation against the number of stocks")
    ap.add_argument("--sizes", default="100,200,400,800,1600,3200,100000")
    ap.add_argument("--first-call", action="store_true",
                    help="time the first evaluation of a process with an empty / a filled numba cache")
    args = ap.parse_args()
    if args.first_call:
        first_call()
        return
    if args.scaling:
        res = scaling(args.scaling, [int(x) for x in args.sizes.split(",")], args.repeat)
        if args.json:
            import json

            with open(args.json, "w") as fh:
                json.dump({"panel": args.scaling, "repeat": args.repeat, "python": platform.python_version(),
                           "numpy": np.__version__, "points": res}, fh)
        return
    from quantgym.envs.quant_arena.account import labels, run_account, window_rows
    from quantgym.envs.quant_arena.data import _bundled, load_dataset
    from quantgym.envs.quant_arena.exchange import price_limits
    from quantgym.envs.quant_arena.executor import evaluate_scores, evaluate_submission
    from quantgym.envs.quant_arena.examples import example_source
    from quantgym.envs.quant_arena.metrics import signal_metrics

    t_load, ds = _best(lambda: (_bundled.cache_clear(), load_dataset())[1], 1)
    d0, n = window_rows(ds, "2024-01-01", "2024-12-31")
    adjc = ds.fields["close"] * ds.fields["adj_factor"]
    lr = np.log(adjc[1:] / adjc[:-1])
    S = np.full((n, ds.N), np.nan)
    for j in range(n):
        t = d0 + j
        s = -np.std(lr[t - 20:t], axis=0, ddof=1)
        s[ds.suspended[t] | ~ds.has_row[t]] = np.nan
        S[j] = s
    price_limits(ds)  # cached per dataset (built once, like the env does)
    rows = []
    t_full, ev = _best(lambda: evaluate_scores(ds, d0, n, S), args.repeat)
    rows.append(("full sealed-year evaluation, excluding agent code (account + metrics + score)", t_full))
    t_acc, acc = _best(lambda: run_account(ds, d0, n, S), args.repeat)
    rows.append((f"  of which the cash account ({int(acc.n_buys.sum() + acc.n_sells.sum())} orders)", t_acc))
    y = labels(ds, d0, n)
    t_sig, _ = _best(lambda: signal_metrics(S, y, ds.has_row[d0:d0 + n]), args.repeat)
    rows.append(("  of which the signal metrics (RankIC, IR, long-short, coverage)", t_sig))

    def fresh_limits():
        ds._cache.pop("limits", None)
        return price_limits(ds)

    t_lim, _ = _best(fresh_limits, args.repeat)
    rows.append(("price limits of the whole panel (969 x 800, once per dataset)", t_lim))
    rows.append(("cold load of the bundled dataset (parquet -> wide arrays)", t_load))
    if not args.no_sandbox:
        sealed = ds.truncate("2024-12-31")
        t_sb, r = _best(lambda: evaluate_submission(example_source("low_volatility"), sealed, "2024-01-01",
                                                    "2024-12-31"), 1)
        rows.append(("one sandboxed sealed evaluation of low_volatility (child start-up, agent code, keeper, "
                     "account, metrics)", t_sb))
        t_ip, _ = _best(lambda: evaluate_submission(example_source("low_volatility"), sealed, "2024-01-01",
                                                    "2024-12-31", executor="inprocess"), 1)
        rows.append(("the same in-process (trusted executor, no sandbox)", t_ip))
        from quantgym.envs.quant_arena.handoff import RUNNER, build_payload
        from quantgym.sandbox import SandboxLimits, run_in_sandbox

        lim = SandboxLimits(cpu_seconds=600, wall_seconds=600, memory_mb=4096)
        for key, label in ((None, "without"), (b"k" * 32, "with")):
            p = build_payload(sealed, d0, n, key=key)
            t_c, res = _best(lambda: run_in_sandbox(example_source("low_volatility"), RUNNER, payload=p, limits=lim), 1)
            rows.append((f"sandbox child only, {label} the commit-reveal keeper (start-up "
                         f"{res.details.get('startup_seconds', float('nan')):.2f} s)", t_c))
    if args.intraday:
        rows += _intraday_rows(ds)
    m = ev["metrics"]
    print(f"Quant-Arena evaluator, bundled universe ({ds.N} stocks), sealed 2024 ({n} days); best of {args.repeat}")
    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"check: ARR {m['arr']:.4f}, fees {m['fees_pct']:.2f} % of capital, S {ev['score'].S:.2f}\n")
    print("| step | time |\n|---|---|")
    for name, t in rows:
        print(f"| {name} | {t * 1000:.0f} ms |" if t < 10 else f"| {name} | {t:.1f} s |")
    if args.json:
        import json

        with open(args.json, "w") as fh:
            json.dump({"stocks": ds.N, "days": n, "repeat": args.repeat, "rows": [[k.strip(), t] for k, t in rows],
                       "check": {"arr": m["arr"], "fees_pct": m["fees_pct"], "S": ev["score"].S}}, fh)


def _intraday_rows(ds) -> list:
    """Cost of the Level-2 intraday tables the bundled dataset serves."""
    import dataclasses
    import pickle

    from quantgym.envs.quant_arena.account import window_rows
    from quantgym.envs.quant_arena.data import _real_intraday_cached
    from quantgym.envs.quant_arena.executor import evaluate_submission
    from quantgym.envs.quant_arena.examples import example_source
    from quantgym.envs.quant_arena.handoff import build_payload

    _real_intraday_cached.cache_clear()
    ds._cache.pop("intraday", None)
    t_read, tabs = _best(ds.intraday, 1)
    nrows = sum(len(v) for t in tabs.values() for v in t.values())
    rows = [(f"first read of the intraday tables ({len(tabs)} dates, {nrows:,} rows; once per process)", t_read)]
    for name, a, b in (("research", "2022-01-01", "2023-12-31"), ("sealed", "2024-01-01", "2024-12-31")):
        cut = ds.truncate(b)
        d0, n = window_rows(cut, a, b)
        p = build_payload(cut, d0, n)
        mb = len(pickle.dumps(p["intraday"], protocol=pickle.HIGHEST_PROTOCOL)) / 2**20
        whole = len(pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL)) / 2**20
        print(f"{name} payload: intraday days {sorted(p['intraday'])}, {mb:.1f} MiB of {whole:.1f} MiB pickled")
    sealed = ds.truncate("2024-12-31")
    bare = dataclasses.replace(sealed, intraday_loader=None, intraday_index=None, _cache={})
    for label, d in (("with", sealed), ("without", bare)):
        t, _ = _best(lambda: evaluate_submission(example_source("low_volatility"), d, "2024-01-01", "2024-12-31"), 1)
        rows.append((f"one sandboxed sealed evaluation of low_volatility, {label} the intraday tables", t))
    return rows


if __name__ == "__main__":
    main()
