"""Speed of the Market-Bench reference replay on synthetic books (target: >= 1M snapshots/s).

Measures book snapshots per second through each reference backtester on seeded synthetic
books already loaded into arrays (``BookData``; the replay = synthetic-book matching, FIFO
accounting, signals, equity curve and drawdown). Parsing the CSV is timed separately.
The backtesters are ``BACKTESTERS`` (what computes the stored reference outputs; for pairs and
delta_hedge the compiled ``backtest_pairs_compiled`` and ``backtest_delta_hedge_compiled``, whose
first call in a fresh process, numba compile or cache load, is reported apart); the readable,
interpreted ``backtest_pairs`` and ``backtest_delta_hedge`` (what the reference agent submits) are
timed beside them on the same book, with a check that both return the same dict.

Run::

    python benchmarks/bench_market_bench.py [--rows 1000000] [--repeat 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from quantgym.envs.market_bench.book import BookData
from quantgym.envs.market_bench.config import PairsBookConfig
from quantgym.envs.market_bench.data import generate_option_delta, generate_pairs_book, synthetic_book
from quantgym.envs.market_bench.references import BACKTESTERS, backtest_delta_hedge, backtest_pairs


def best_of(fn, repeat: int) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds of this process) over ``repeat`` runs.

    On a shared machine the wall time includes waiting for a core; the CPU time does not.
    """
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def strategies(n: int) -> dict[str, tuple]:
    """The three reference replays on seeded ``n``-row books: name -> (callable, what it does).

    Each callable runs one replay and returns the backtester's result dict.
    """
    rng = np.random.default_rng(7)
    # strategy 1: one symbol, 200 scheduled market orders over the book
    bk1 = BookData(synthetic_book(n, levels=3, seed=1))
    ts = bk1.ts
    sched = pd.DataFrame({"ts_event": np.sort(rng.integers(ts[0], ts[-1], 200)),
                          "side": rng.choice(["BUY", "SELL"], 200), "qty": rng.integers(1, 30, 200) * 100})
    # strategy 2: the spec's pairs generator (KO/PEP labels), round-1 parameters
    bk2 = BookData(generate_pairs_book(PairsBookConfig(n_rows=n), np.random.default_rng(2)))
    p2 = dict(beta=0.375, window=200, z_in=2.0, z_out=0.5, cooldown_ns=30_000_000_000, k=1.0,
              delay_ns=120_000_000, alloc=0.1, c0=1e6)
    # strategy 3: delta hedging on the one-symbol book, a grid point every ~100 rows
    step = int((ts[-1] - ts[0]) // (n // 100))
    od = generate_option_delta(type("C", (), {"step_ns": step, "d0": -1500, "sigma": 300})(), int(ts[0]), int(ts[-1]),
                               np.random.default_rng(3))
    p3 = dict(c0=1e7, interval_ns=step, delay_ns=max(step // 5, 1), fraction=0.5, lot=100, min_gap_ns=2 * step, k=1.0)
    bt = BACKTESTERS
    return {
        "scheduled": (lambda: bt["scheduled"](bk1, sched, 1e7), "200 orders", bk1),
        "pairs": (lambda: bt["pairs"](bk2, **p2), "KO/PEP generator, round-1 parameters; compiled loop", bk2,
                  lambda: backtest_pairs(bk2, **p2)),
        "delta_hedge": (lambda: bt["delta_hedge"](bk1, od, **p3), f"{len(od):,} grid/delta points; compiled loop", bk1,
                        lambda: backtest_delta_hedge(bk1, od, **p3)),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    a = ap.parse_args(argv)
    n = a.rows
    df1 = synthetic_book(n, levels=3, seed=1)
    t0 = time.perf_counter()
    BookData(df1)
    t_load = time.perf_counter() - t0
    out = {"rows": n, "repeat": a.repeat, "parse_s": t_load, "strategies": {}}
    print(f"rows per book: {n:,}  (best of {a.repeat})")
    print(f"BookData from DataFrame (parse, not replay): {t_load:.3f} s = {n / t_load / 1e6:.2f} M rows/s")
    for name, (fn, what, *more) in strategies(n).items():
        t0 = time.perf_counter()
        first = fn()  # first call: numba compile or cache load for the compiled pairs loop
        t_first = time.perf_counter() - t0
        res = {}
        w, c = best_of(lambda: res.update(fn()), a.repeat)
        extra = f"{what}; {res['n_fills']:.0f} fills" if "n_fills" in res else what
        out["strategies"][name] = {"wall_s": w, "cpu_s": c, "snapshots_per_s": n / w, "note": extra}
        print(f"{name:12s} replay wall {w:.3f} s = {n / w / 1e6:.2f} M snapshots/s; "
              f"CPU {c:.3f} s = {n / c / 1e6:.2f} M snapshots/CPU-s  ({extra})")
        if len(more) > 1:  # the readable reference of the same strategy, interpreted
            out["strategies"][name]["first_call_s"] = t_first
            slow = more[1]
            same = slow() == first
            w2, c2 = best_of(slow, a.repeat)
            out["strategies"][name + "_readable"] = {"wall_s": w2, "cpu_s": c2, "snapshots_per_s": n / w2,
                                                      "same_result": same}
            print(f"{'':12s} first call {t_first:.2f} s (numba compile or cache load); readable backtest_{name} "
                  f"(interpreted) wall {w2:.3f} s = {n / w2 / 1e6:.2f} M/s, CPU {c2:.3f} s; same result: {same}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh)


if __name__ == "__main__":
    main()
