"""Quant-Arena and Market-Bench evaluation speed beside vectorbt ``Portfolio.from_orders``.

    python benchmarks/bench_peers_vectorbt.py [--rounds 5] [--rows 1000000] [--json PATH] [--append]

vectorbt runs in ``benchmarks/.venv-peers`` (see bench_peers_gyms.py for its setup): this script
starts itself there with ``--child`` once (arrays through an ``.npz`` file), lets it compile
vectorbt's numba kernels (the first call, reported separately), then **alternates**: each round
times one quantgym call, then one vectorbt call (the child answers on its stdin/stdout), and so
on; the figures are the medians over ``--rounds`` rounds, so both sides see the same machine load.

1. **Quant-Arena, sealed 2024** (bundled panel, 800 stocks × 242 execution days; ``--data`` for
   another panel): the sealed-year evaluation ``quantgym.envs.quant_arena.executor.evaluate_scores``
   (cash account + market reference + labels + RankIC, IR, long-short, coverage + score; no agent
   code) and the cash account alone (``run_account``), on a seeded 20-day momentum score, versus
   ``vbt.Portfolio.from_orders(size_granularity=100)`` on the *same orders* (signed filled shares at
   the evaluator's effective fill prices, per-order fees as fixed fees, one cash-sharing group, sells
   before buys). The final NAVs of both are printed as a consistency check.
2. **Market-Bench reference replay, like for like**: each public reference backtester replays its
   book (the books of bench_market_bench.py: 1M-row seeded synthetic books; the timed call is the
   whole replay, from the book's arrays to the result dict with its equity curve), versus
   ``vbt.Portfolio.from_orders`` on the *same orders on the same rows*: the orders the replay filled
   (recorded once from the readable reference, untimed: the row, the symbol, the signed shares of
   each walk and its VWAP fill price, orders of one row and symbol merged), on the same prices (the
   1M raw mids of the book; for pairs the two legs' as-of mids, two columns in one cash-sharing
   group), ``direction="both"``, no fees, the replay's starting cash. The ratio divides vectorbt's
   time by the replay's on the same work; a second vectorbt figure adds its equity curve and
   maximum drawdown (``pf.value()``, ``pf.max_drawdown()``), which the replay computes too.

Prints a table; ``--json`` writes every figure; ``--append`` adds the table to docs/performance.md
(``python benchmarks/run_all.py`` writes the generated tables there instead).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import print_table

ROOT = Path(__file__).resolve().parents[1]
PEERS_PY = ROOT / "benchmarks" / ".venv-peers" / "bin" / "python"


# ------------------------------------------------------------------------------------------ child (vectorbt)
def child(npz: str) -> None:
    """Serve timings of vectorbt on the arrays of ``npz``: one line per request (``qa``/``mb``) on stdin."""
    import vectorbt as vbt

    z = np.load(npz)
    kw = dict(close=z["qa_close"], size=z["qa_size"], price=z["qa_price"], fixed_fees=z["qa_fees"],
              size_type="amount", direction="longonly", init_cash=float(z["qa_cash"]), cash_sharing=True,
              group_by=True, call_seq="auto", size_granularity=100, freq="1D")
    mb = {}
    for name in ("scheduled", "pairs", "delta_hedge"):
        close = z[f"mb_{name}_close"]
        mb[name] = dict(close=close, size=z[f"mb_{name}_size"], price=z[f"mb_{name}_price"], size_type="amount",
                        direction="both", init_cash=float(z[f"mb_{name}_cash"]), freq="1s",
                        **(dict(cash_sharing=True, group_by=True) if close.shape[1] > 1 else {}))
    t0 = time.perf_counter()
    pf = vbt.Portfolio.from_orders(**kw)
    info = {"vectorbt": vbt.__version__, "numba": __import__("numba").__version__, "numpy": np.__version__,
            "pandas": __import__("pandas").__version__, "qa_first_call_s": time.perf_counter() - t0,
            "qa_final_value": float(np.asarray(pf.value()).reshape(-1)[-1])}
    cnt = pf.orders.count()
    info["qa_orders"] = int(cnt.sum()) if hasattr(cnt, "sum") else int(cnt)
    for name, kwn in mb.items():
        t0 = time.perf_counter()
        pf2 = vbt.Portfolio.from_orders(**kwn)
        info[f"mb_{name}_first_call_s"] = time.perf_counter() - t0
        cnt = pf2.orders.count()
        info[f"mb_{name}_orders"] = int(np.sum(cnt))
        info[f"mb_{name}_final_value"] = float(np.asarray(pf2.value()).reshape(-1)[-1])
        info[f"mb_{name}_max_drawdown"] = float(np.asarray(pf2.max_drawdown()).reshape(-1)[-1])
    print(json.dumps(info), flush=True)
    for line in sys.stdin:
        what = line.strip()
        if what == "quit":
            break
        name = what.removesuffix("+value")
        t0, c0 = time.perf_counter(), time.process_time()
        pf = vbt.Portfolio.from_orders(**(kw if name == "qa" else mb[name.removeprefix("mb_")]))
        if what.endswith("+value"):  # the equity curve and its drawdown, as the replay computes them
            pf.value()
            pf.max_drawdown()
        print(json.dumps({"s": time.perf_counter() - t0, "cpu": time.process_time() - c0}), flush=True)


class Peer:
    """The vectorbt child process (one per run); ``time(what)`` = seconds of one ``from_orders`` call."""

    def __init__(self, npz: Path):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.proc = subprocess.Popen([str(PEERS_PY), __file__, "--child", str(npz)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read().strip().splitlines()
            raise RuntimeError(err[-1] if err else "vectorbt child failed")
        self.info = json.loads(line)

    def time(self, what: str) -> tuple[float, float]:
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        r = json.loads(self.proc.stdout.readline())
        return r["s"], r["cpu"]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
        self.proc.wait(timeout=60)


# ------------------------------------------------------------------------------------------ parent (quantgym)
def quant_arena(data: str | None) -> tuple[dict, dict, dict]:
    """(callables, info, arrays for vectorbt) of the Quant-Arena pair."""
    from quantgym.envs.quant_arena.account import run_account, window_rows
    from quantgym.envs.quant_arena.config import Windows
    from quantgym.envs.quant_arena.data import load_dataset
    from quantgym.envs.quant_arena.exchange import price_limits
    from quantgym.envs.quant_arena.executor import evaluate_scores

    ds = load_dataset(data)
    w = Windows()
    d0, n = window_rows(ds, w.sealed_start, w.sealed_end)
    close = ds.ffill("close")
    rows = np.arange(d0, d0 + n)
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = close[rows] / close[rows - 20] - 1.0  # 20-day momentum known at the close of D_j
    scores = np.where(ds.has_row[rows], scores, np.nan)
    price_limits(ds)  # once per dataset, like the env
    res = run_account(ds, d0, n, scores, record_trades=True)
    ev = evaluate_scores(ds, d0, n, scores)
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
    info = {"days": n, "stocks": ds.N, "orders": int(np.isfinite(size).sum()), "final_nav": float(res.nav[-1]),
            "arr": ev["metrics"]["arr"], "rankic_mean": ev["metrics"]["rankic_mean"]}
    fns = {"qa_eval": lambda: evaluate_scores(ds, d0, n, scores), "qa_account": lambda: run_account(ds, d0, n, scores)}
    return fns, info, arrays


def replay_orders(name: str, entry: tuple) -> dict[str, np.ndarray]:
    """The orders one Market-Bench replay fills, as vectorbt arrays (``close``, ``size``, ``price``: rows ×
    symbols; ``cash``): one readable-reference run (untimed) with ``SyntheticBook.walk`` recorded (row,
    side, fills); the signed shares of each walk at its VWAP price, walks of one row and symbol merged."""
    from quantgym.envs.market_bench import book as mbook

    fn, _, bk, *more = entry
    walks: list[tuple[int, bool, list]] = []
    orig = mbook.SyntheticBook.walk

    def walk(self, row, buy, qty, limit=None, cash=None):  # noqa: ANN001, ANN202 - SyntheticBook.walk
        fills = orig(self, row, buy, qty, limit=limit, cash=cash)
        walks.append((int(row), bool(buy), list(fills)))
        return fills

    mbook.SyntheticBook.walk = walk
    try:
        res = more[0]() if more else fn()  # the readable reference where a kernel replays (the same fills)
    finally:
        mbook.SyntheticBook.walk = orig
    if name == "pairs":  # the legs and starting cash of bench_market_bench.py's pairs replay
        from quantgym.envs.market_bench.references.pairs import pairs_zscore

        mid_a, mid_b, *_ = pairs_zscore(bk, 0.375, 200)
        syms = [bk.code("KO"), bk.code("PEP")]
        close = np.column_stack([mid_a, mid_b])
        for c in range(2):  # vectorbt needs a price on every row: the first as-of mid before a leg's first row
            first = np.flatnonzero(np.isfinite(close[:, c]))[0]
            close[:first, c] = close[first, c]
        cash = 1e6
    else:
        syms, close, cash = [0], bk.mid.astype(np.float64)[:, None], 1e7
    shares = np.zeros(close.shape)
    value = np.zeros(close.shape)
    for row, buy, fills in walks:
        col = syms.index(int(bk.sym[row]))
        q = sum(f for _, f in fills)
        shares[row, col] += q if buy else -q
        value[row, col] += sum(p / 100 * f for p, f in fills) * (1 if buy else -1)
    has = shares != 0
    with np.errstate(invalid="ignore", divide="ignore"):
        price = np.where(has, value / np.where(has, shares, 1.0), close)
    return {"close": close, "size": np.where(has, shares, np.nan), "price": price, "cash": np.array(cash),
            "n_walks": len(walks), "n_orders": int(has.sum()), "n_fills": int(res.get("n_fills", 0))}


def _timed(fn) -> tuple[float, float]:
    """(wall, CPU) seconds of one call of ``fn``."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def run(rounds: int, rows: int, data: str | None = None) -> dict:
    """Alternate quantgym and vectorbt for ``rounds`` rounds; medians (seconds) and the run's facts."""
    import statistics

    from bench_market_bench import strategies

    qa_fns, qa, arr1 = quant_arena(data)
    mb = strategies(rows)
    arr2, mb_orders = {}, {}
    for k, v in mb.items():
        o = replay_orders(k, v)
        mb_orders[k] = {x: o.pop(x) for x in ("n_walks", "n_orders", "n_fills")}
        arr2.update({f"mb_{k}_{x}": a for x, a in o.items()})
    mb_fns = {f"mb_{k}": v[0] for k, v in mb.items()}
    for fn in (*qa_fns.values(), *mb_fns.values()):
        fn()  # warm-up (per-dataset caches, first-call costs)
    out: dict = {"rounds": rounds, "qa": qa, "mb_rows": rows, "mb_notes": {k: v[1] for k, v in mb.items()},
                 "mb_orders": mb_orders, "times": {}, "errors": {}, "vectorbt": None}
    vbt_mb = [f"vbt_{k}" for k in mb_fns] + [f"vbt_{k}+value" for k in mb_fns]
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in (*qa_fns, *mb_fns, "vbt_qa", *vbt_mb)}
    peer = None
    if not PEERS_PY.exists():
        out["errors"]["vectorbt"] = f"{PEERS_PY.relative_to(ROOT)} missing (python benchmarks/bench_peers_gyms.py --setup)"
    with tempfile.TemporaryDirectory() as tmp:
        if PEERS_PY.exists():
            npz = Path(tmp) / "orders.npz"
            np.savez(npz, **arr1, **arr2)
            try:
                peer = Peer(npz)
                out["vectorbt"] = peer.info
            except Exception as exc:  # noqa: BLE001 - reported, never substituted
                out["errors"]["vectorbt"] = str(exc)
        try:
            for _ in range(rounds):
                samples["qa_eval"].append(_timed(qa_fns["qa_eval"]))
                if peer:
                    samples["vbt_qa"].append(peer.time("qa"))
                samples["qa_account"].append(_timed(qa_fns["qa_account"]))
                for k, fn in mb_fns.items():
                    samples[k].append(_timed(fn))
                    if peer:
                        samples[f"vbt_{k}"].append(peer.time(k))
                        samples[f"vbt_{k}+value"].append(peer.time(k + "+value"))
        finally:
            if peer:
                peer.close()
    # wall time (the headline) and CPU time of the process (less sensitive to other jobs on the machine)
    out["times"] = {k: statistics.median(w for w, _ in v) for k, v in samples.items() if v}
    out["cpu_times"] = {k: statistics.median(c for _, c in v) for k, v in samples.items() if v}
    out["samples"] = samples
    return out


def table(r: dict) -> list[tuple[str, str, str]]:
    """(measurement, result, note) rows of a :func:`run` result."""
    t, c, qa, vb = r["times"], r["cpu_times"], r["qa"], r["vectorbt"]
    rows = [
        ("Quant-Arena sealed-year evaluation (evaluate_scores)", f"{1e3 * t['qa_eval']:.1f} ms",
         f"{qa['stocks']} stocks × {qa['days']} days, {qa['orders']} orders; account + reference + labels + "
         "signal metrics + score"),
        ("Quant-Arena cash account alone (run_account)", f"{1e3 * t['qa_account']:.1f} ms", ""),
    ]
    for k in ("scheduled", "pairs", "delta_hedge"):
        rows.append((f"Market-Bench {k} replay", f"{r['mb_rows'] / t['mb_' + k] / 1e6:.2f} M snapshots/s",
                     f"{r['mb_rows']:,} rows; {r['mb_notes'][k]}"))
    if vb is None:
        rows.append(("vectorbt", "not measured", r["errors"].get("vectorbt", "")))
        return rows
    rows += [
        (f"vectorbt {vb['vectorbt']} from_orders, same Quant-Arena orders", f"{1e3 * t['vbt_qa']:.1f} ms",
         f"size_granularity=100; first call (numba compile) {vb['qa_first_call_s']:.1f} s; {vb['qa_orders']} orders "
         f"filled; final value {vb['qa_final_value']:,.0f} vs evaluator NAV {qa['final_nav']:,.0f} (from_orders "
         "applies no dividends/splits; the evaluator does, §10.7)"),
        ("speed ratio: evaluation / vectorbt (vbt time ÷ quantgym time)", f"{t['vbt_qa'] / t['qa_eval']:.2f}",
         "≥ 1: the whole evaluation is at least as fast as from_orders on its orders"),
        ("speed ratio: account alone / vectorbt", f"{t['vbt_qa'] / t['qa_account']:.2f}", ""),
        ("speed ratio by CPU time: evaluation / vectorbt", f"{c['vbt_qa'] / c['qa_eval']:.2f}",
         f"CPU {1e3 * c['qa_eval']:.1f} ms vs {1e3 * c['vbt_qa']:.1f} ms"),
    ]
    for k in ("scheduled", "pairs", "delta_hedge"):
        o, q, v, vv = r["mb_orders"][k], t["mb_" + k], t["vbt_mb_" + k], t["vbt_mb_" + k + "+value"]
        rows += [
            (f"vectorbt from_orders, same {k} orders on the same {r['mb_rows']:,} rows", f"{1e3 * v:.1f} ms",
             f"{o['n_orders']} orders ({o['n_walks']} walks, {o['n_fills']} fills); with value() and "
             f"max_drawdown() {1e3 * vv:.1f} ms; final value {vb['mb_' + k + '_final_value']:,.2f}"),
            (f"speed ratio: {k} replay / vectorbt (same orders, same rows)", f"{v / q:.2f}",
             f"replay {1e3 * q:.1f} ms wall, {1e3 * c['mb_' + k]:.1f} ms CPU; by CPU "
             f"{c['vbt_mb_' + k] / c['mb_' + k]:.2f}; against from_orders + value() + max_drawdown() {vv / q:.2f}"),
        ]
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (medians)")
    ap.add_argument("--rows", type=int, default=1_000_000, help="Market-Bench synthetic book rows")
    ap.add_argument("--data", default=None, help="Quant-Arena panel (default: the bundled 800 stocks)")
    ap.add_argument("--json", metavar="PATH", help="also write every figure as JSON to PATH")
    ap.add_argument("--append", action="store_true", help="append the table to docs/performance.md")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child)
        return
    load0 = os.getloadavg()[0]
    r = run(a.rounds, a.rows, a.data)
    r["load_avg"] = [load0, os.getloadavg()[0]]
    r["python"], r["numpy"] = platform.python_version(), np.__version__
    rows = table(r)
    print_table(f"Quant-Arena and Market-Bench vs vectorbt (medians of {a.rounds} alternating rounds)", rows)
    if a.json:
        Path(a.json).write_text(json.dumps(r))
    if a.append:
        cmd = "python benchmarks/bench_peers_vectorbt.py" + "".join(f" {x}" for x in (argv or sys.argv[1:]))
        lines = ["", f"## Quant-Arena and Market-Bench vs vectorbt ({time.strftime('%Y-%m-%d')})", "",
                 f"Command: `{cmd}` (medians of {a.rounds} alternating rounds; vectorbt in benchmarks/.venv-peers). "
                 f"Python {platform.python_version()}, numpy {np.__version__}; 1-min load average "
                 f"{r['load_avg'][0]:.1f} → {r['load_avg'][1]:.1f}.", "",
                 "| measurement | result | note |", "|---|---|---|", *[f"| {m} | {v} | {n} |" for m, v, n in rows], ""]
        with (ROOT / "docs" / "performance.md").open("a") as fh:
            fh.write("\n".join(lines) + "\n")
        print("appended to docs/performance.md")


if __name__ == "__main__":
    main()
