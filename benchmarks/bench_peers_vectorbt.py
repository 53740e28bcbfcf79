"""Quant-Arena and Market-Bench evaluation speed beside vectorbt ``Portfolio.from_orders`` (issue 6).

    python benchmarks/bench_peers_vectorbt.py [--repeat 5] [--rows 1000000] [--no-append]

Two measurements, each reported as a ratio, printed as a table and appended (with the command) to
docs/performance.md. vectorbt runs in ``benchmarks/.venv-peers`` (see bench_peers_gyms.py for
its setup); this script calls itself there with ``--child`` and exchanges arrays through an
``.npz`` file. Timings are best-of-``repeat`` wall times after one warm-up call (numba compiles
vectorbt's kernels on first use: that compile time is reported separately).

1. **Quant-Arena, sealed 2024** (bundled panel, 800 stocks × 243 execution days): the public
   evaluator ``quantgym.envs.quant_arena.account.run_account`` on a seeded 20-day momentum
   score (top-N selection, T+1, price limits, book-walk fills, fees), versus
   ``vbt.Portfolio.from_orders(size_granularity=100)`` on the *same orders* (signed filled shares
   at the evaluator's effective fill prices, per-order fees as fixed fees, one cash-sharing group,
   sells before buys). The final NAVs of both are printed as a consistency check.
2. **Market-Bench reference replay**: book snapshots per second through the public reference
   backtester ``backtest_scheduled`` (1M-row seeded synthetic book, 200 scheduled orders), versus
   vectorbt's order-fill rate: ``from_orders`` on the same 1M mid prices with an order on every
   row (fills per second).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import best_time, print_table

ROOT = Path(__file__).resolve().parents[1]
PEERS_PY = ROOT / "benchmarks" / ".venv-peers" / "bin" / "python"


# ------------------------------------------------------------------------------------------ child (vectorbt)
def child(npz: str, repeat: int) -> None:
    import vectorbt as vbt

    z = np.load(npz)
    out: dict = {"vectorbt": vbt.__version__}
    # 1. Quant-Arena orders
    kw = dict(close=z["qa_close"], size=z["qa_size"], price=z["qa_price"], fixed_fees=z["qa_fees"],
              size_type="amount", direction="longonly", init_cash=float(z["qa_cash"]), cash_sharing=True,
              group_by=True, call_seq="auto", size_granularity=100, freq="1D")
    t0 = time.perf_counter()
    pf = vbt.Portfolio.from_orders(**kw)
    out["qa_first_call_s"] = time.perf_counter() - t0
    out["qa_s"] = best_time(lambda: vbt.Portfolio.from_orders(**kw), repeat)
    out["qa_final_value"] = float(np.asarray(pf.value()).reshape(-1)[-1])
    out["qa_orders"] = int(pf.orders.count().sum()) if hasattr(pf.orders.count(), "sum") else int(pf.orders.count())
    # 2. fills on every row of the Market-Bench mid prices
    mid = z["mb_mid"]
    size = np.where(np.arange(mid.size) % 2 == 0, 100.0, -100.0)
    kw2 = dict(close=mid, size=size, size_type="amount", direction="longonly", init_cash=1e7, freq="1s")
    vbt.Portfolio.from_orders(**kw2)
    out["mb_rows"] = int(mid.size)
    out["mb_s"] = best_time(lambda: vbt.Portfolio.from_orders(**kw2), repeat)
    pf2 = vbt.Portfolio.from_orders(**kw2)
    out["mb_fills"] = int(pf2.orders.count())
    print(json.dumps(out))


# ------------------------------------------------------------------------------------------ parent (quantgym)
def quant_arena(repeat: int) -> tuple[dict, dict]:
    from quantgym.envs.quant_arena.config import Windows
    from quantgym.envs.quant_arena.data import load_dataset
    from quantgym.envs.quant_arena.account import run_account, window_rows

    ds = load_dataset()
    w = Windows()
    d0, n = window_rows(ds, w.sealed_start, w.sealed_end)
    close = ds.ffill("close")
    rows = np.arange(d0, d0 + n)
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = close[rows] / close[rows - 20] - 1.0  # 20-day momentum known at the close of D_j
    scores = np.where(ds.has_row[rows], scores, np.nan)
    t_qa = best_time(lambda: run_account(ds, d0, n, scores), repeat)
    res = run_account(ds, d0, n, scores, record_trades=True)
    date_row = {str(d): i for i, d in enumerate(ds.dates)}
    sym_col = {str(s): j for j, s in enumerate(ds.symbols)}
    size = np.full((n, ds.N), np.nan)
    price = np.full((n, ds.N), np.nan)
    fees = np.zeros((n, ds.N))
    for t in res.trades:
        i, j = date_row[t["date"]] - (d0 + 1), sym_col[t["symbol"]]
        if t["filled"] <= 0:
            continue
        size[i, j] = t["filled"] if t["side"] == "buy" else -t["filled"]
        price[i, j] = t["value"] / t["filled"]  # effective fill price (book walk / impact included)
        fees[i, j] = t["commission"] + t["transfer"] + t["stamp"]
    arrays = {"qa_close": np.nan_to_num(close[d0 + 1 : d0 + n + 1], nan=0.0), "qa_size": size, "qa_price": price,
              "qa_fees": fees, "qa_cash": np.array(res.nav[0])}
    info = {"seconds": t_qa, "days": n, "stocks": ds.N, "orders": int(np.isfinite(size).sum()),
            "final_nav": float(res.nav[-1])}
    return info, arrays


def market_bench(rows: int, repeat: int) -> tuple[dict, dict]:
    import pandas as pd

    from quantgym.envs.market_bench.book import BookData
    from quantgym.envs.market_bench.data import synthetic_book
    from quantgym.envs.market_bench.references import backtest_scheduled

    rng = np.random.default_rng(7)
    bk = BookData(synthetic_book(rows, levels=3, seed=1))
    ts = bk.ts
    sched = pd.DataFrame({"ts_event": np.sort(rng.integers(ts[0], ts[-1], 200)),
                          "side": rng.choice(["BUY", "SELL"], 200), "qty": rng.integers(1, 30, 200) * 100})
    t = best_time(lambda: backtest_scheduled(bk, sched, 1e7), repeat)
    return {"seconds": t, "rows": rows, "snapshots_per_s": rows / t}, {"mb_mid": bk.mid.astype(np.float64)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1_000_000, help="Market-Bench synthetic book rows")
    ap.add_argument("--no-append", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child, a.repeat)
        return
    qa, arr1 = quant_arena(a.repeat)
    mb, arr2 = market_bench(a.rows, a.repeat)
    rows: list[tuple[str, str, str]] = [
        ("Quant-Arena run_account, sealed 2024", f"{1e3 * qa['seconds']:.1f} ms",
         f"{qa['stocks']} stocks × {qa['days']} days, {qa['orders']} orders (seeded 20-day momentum)"),
        ("Market-Bench backtest_scheduled replay", f"{mb['snapshots_per_s']:,.0f} snapshots/s",
         f"{mb['rows']:,} synthetic book rows, 200 orders"),
    ]
    vb: dict = {}
    if not PEERS_PY.exists():
        rows.append(("vectorbt", "not measured", f"{PEERS_PY} missing (see bench_peers_gyms.py)"))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            npz = Path(tmp) / "orders.npz"
            np.savez(npz, **arr1, **arr2)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            proc = subprocess.run([str(PEERS_PY), __file__, "--child", str(npz), "--repeat", str(a.repeat)],
                                  capture_output=True, text=True, env=env, timeout=1800)
        if proc.returncode != 0:
            rows.append(("vectorbt", "not measured", proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"))
        else:
            vb = json.loads(proc.stdout.strip().splitlines()[-1])
            fills_per_s = vb["mb_fills"] / vb["mb_s"]
            rows += [
                (f"vectorbt {vb['vectorbt']} from_orders, same Quant-Arena orders", f"{1e3 * vb['qa_s']:.1f} ms",
                 f"size_granularity=100; first call (numba compile) {vb['qa_first_call_s']:.1f} s; {vb['qa_orders']} "
                 f"orders filled; final value {vb['qa_final_value']:,.0f} vs evaluator NAV {qa['final_nav']:,.0f} "
                 "(from_orders applies no dividends/splits; the evaluator does, §10.7)"),
                ("ratio Quant-Arena / vectorbt (time)", f"{qa['seconds'] / vb['qa_s']:.3g}",
                 "> 1: the evaluator is slower (it also walks books, applies limits and T+1)"),
                (f"vectorbt {vb['vectorbt']} order-fill rate", f"{fills_per_s:,.0f} fills/s",
                 f"{vb['mb_fills']:,} fills over {vb['mb_rows']:,} rows"),
                ("ratio Market-Bench snapshots/s / vectorbt fills/s", f"{mb['snapshots_per_s'] / fills_per_s:.3g}", ""),
            ]
    print_table("Quant-Arena and Market-Bench vs vectorbt", rows)
    if not a.no_append:
        load = os.getloadavg()[0]
        cmd = "python benchmarks/bench_peers_vectorbt.py" + "".join(f" {x}" for x in (argv or sys.argv[1:]))
        lines = ["", f"## Quant-Arena and Market-Bench vs vectorbt ({time.strftime('%Y-%m-%d')})", "",
                 f"Command: `{cmd}` (best of {a.repeat} after a warm-up; vectorbt in benchmarks/.venv-peers). "
                 f"Python {platform.python_version()}, numpy {np.__version__}; 2-core machine shared with other "
                 f"jobs (1-min load average {load:.1f} at the end).", "",
                 "| measurement | result | note |", "|---|---|---|", *[f"| {m} | {v} | {n} |" for m, v, n in rows], ""]
        with (ROOT / "docs" / "performance.md").open("a") as fh:
            fh.write("\n".join(lines) + "\n")
        print("appended to docs/performance.md")


if __name__ == "__main__":
    main()
