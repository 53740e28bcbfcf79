"""Builder checks of a round (spec §9.14): a round that fails one is not shipped.

- input guarantees of §9.1 (all L levels on both sides, strictly monotone levels, bid < ask,
  2-decimal prices, sizes multiples of 100 in 100..2,000, ``ts_event`` strictly increasing per
  symbol and unique in the file);
- every defined |z| (S2, all rows) more than 1e-5 from z_in and from z_out;
- every alloc·E/(mid_A + β·mid_B) (S2) and every cash/px of the S1 cash cap more than 1e-6 from
  an integer, or within 1e-9 of one;
- at least 10 fills per round, 10 entries and 10 exits per S2 round (exits: beyond §9.14), 2 killed hedges per
  S3 round;
- (S2, beyond §9.14, for real books) the reference's z equals a per-window two-pass ``numpy.std`` z within
  1e-7 and is defined on exactly the same rows: real prices repeat, and a window of equal spreads must be
  "undefined" for every correct implementation, not a rounding residue of a running sum;
- (task set v2) rows may share a ``ts_event`` across the two symbols of a pairs book (leg A first); within one
  symbol ``ts_event`` stays strictly increasing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from quantgym.envs.market_bench.book import BookData
from quantgym.envs.market_bench.config import LEVELS

Z_MARGIN = 1e-5
INT_MARGIN = 1e-6
INT_EXACT = 1e-9


def book_guarantees(df, equal_ts_across_symbols: bool = False) -> list[str]:
    """Failures of the §9.1.5 guarantees (empty list = all hold).

    ``equal_ts_across_symbols`` (task set v2 pairs): two symbols may share a ``ts_event`` (file order
    non-decreasing, strictly increasing per symbol) instead of every ``ts_event`` being unique.
    """
    fails = []
    L = sum(1 for c in df.columns if c.startswith("bid_px_"))
    if L != LEVELS:
        fails.append(f"L = {L}, expected {LEVELS}")
    bp = np.column_stack([df[f"bid_px_{i:02d}"].to_numpy(float) for i in range(L)])
    ap = np.column_stack([df[f"ask_px_{i:02d}"].to_numpy(float) for i in range(L)])
    sz = np.column_stack([df[f"{s}_sz_{i:02d}"].to_numpy(float) for i in range(L) for s in ("bid", "ask")])
    if not (np.isfinite(bp).all() and np.isfinite(ap).all()):
        fails.append("empty level")
    if (np.diff(bp, axis=1) >= 0).any() or (np.diff(ap, axis=1) <= 0).any():
        fails.append("levels not strictly monotone")
    if (bp[:, 0] >= ap[:, 0]).any():
        fails.append("bid_px_00 >= ask_px_00")
    for px in (bp, ap):
        if np.abs(px * 100 - np.rint(px * 100)).max() > 1e-6:
            fails.append("price not a multiple of 0.01")
    if (sz % 100).any() or sz.min() < 100 or sz.max() > 2000:
        fails.append("size outside 100..2000 step 100")
    ts = df["ts_event"].to_numpy(np.int64)
    if equal_ts_across_symbols:
        per_symbol = df.groupby("symbol", sort=False)["ts_event"].apply(lambda x: bool((np.diff(x) > 0).all()))
        if (np.diff(ts) < 0).any() or not per_symbol.all():
            fails.append("ts_event not non-decreasing / strictly increasing per symbol")
    elif len(np.unique(ts)) != len(ts) or (np.diff(ts) <= 0).any():
        fails.append("ts_event not strictly increasing / unique")
    return fails


def exact_z_gap(spread: np.ndarray, z: np.ndarray, window: int) -> tuple[float, int]:
    """(max |z − z_exact|, rows where only one of the two is defined): z_exact from a two-pass
    ``numpy.std`` (ddof 0) of each window of ``spread`` (NaN before both legs), undefined if <= 1e-12."""
    z_exact = np.full(len(z), np.nan)
    ok = np.flatnonzero(np.isfinite(spread))
    if len(ok) >= window:
        s = spread[ok[0]:]
        win = np.lib.stride_tricks.sliding_window_view(s, window)
        sd = win.std(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            zz = np.where(sd > 1e-12, (s[window - 1:] - win.mean(axis=1)) / sd, np.nan)
        z_exact[ok[0] + window - 1:] = zz
    both = np.isfinite(z) & np.isfinite(z_exact)
    gap = float(np.abs(z[both] - z_exact[both]).max()) if both.any() else 0.0
    return gap, int((np.isfinite(z) != np.isfinite(z_exact)).sum())


def _int_margin(values) -> float:
    v = np.asarray(values, dtype=float)
    if not len(v):
        return np.inf
    d = np.abs(v - np.rint(v))
    d = d[d > INT_EXACT]
    return float(d.min()) if len(d) else np.inf


def builder_checks(rnd) -> dict[str, Any]:
    """Run every §9.14 check on a built round; returns ``{"ok", "failures", margins...}``."""
    from quantgym.envs.market_bench.references import backtest_pairs, backtest_scheduled
    from quantgym.envs.market_bench.references.pairs import pairs_zscore

    fails = book_guarantees(rnd.inputs["book.csv"], equal_ts_across_symbols=bool(rnd.meta.get("equal_ts_rows")))
    ref = rnd.reference
    out: dict[str, Any] = {}
    if ref["n_fills"] < 10:
        fails.append(f"only {ref['n_fills']:.0f} fills")
    if rnd.strategy == "scheduled":
        trace: list[float] = []
        backtest_scheduled(rnd.inputs["book.csv"], rnd.inputs["schedule.csv"], rnd.params["c0"], trace=trace)
        out["cash_px_margin"] = _int_margin(trace)
        if out["cash_px_margin"] <= INT_MARGIN:
            fails.append("cash/px too close to an integer")
    elif rnd.strategy == "pairs":
        p = rnd.params
        if ref["n_entries"] < 10:
            fails.append(f"only {ref['n_entries']:.0f} entries")
        if ref["n_exits"] < 10:  # entries AND exits happen (a real pairs round must trade both ways)
            fails.append(f"only {ref['n_exits']:.0f} exits")
        bk = BookData(rnd.inputs["book.csv"])
        mid_a, mid_b, _, _, z = pairs_zscore(bk, p["beta"], p["window"], p["symbol_a"], p["symbol_b"])
        az = np.abs(z[np.isfinite(z)])
        if not rnd.meta.get("synthetic", True):
            gap, flips = exact_z_gap(mid_a - p["beta"] * mid_b, z, int(p["window"]))
            out.update(exact_z_gap=gap, exact_z_undefined_mismatch=flips)
            if gap > 1e-7 or flips:
                fails.append(f"z differs from the two-pass z by {gap:.1e} ({flips} definedness mismatches)")
        out["z_margin"] = float(min(np.abs(az - p["z_in"]).min(), np.abs(az - p["z_out"]).min()))
        if out["z_margin"] <= Z_MARGIN:
            fails.append("a |z| too close to a threshold")
        trace = []
        backtest_pairs(bk, **p, trace=trace)
        out["sizing_margin"] = _int_margin(trace)
        if out["sizing_margin"] <= INT_MARGIN:
            fails.append("entry size too close to an integer")
    else:
        if ref["n_hedges_killed"] < 2:
            fails.append(f"only {ref['n_hedges_killed']:.0f} killed hedges")
    out.update(ok=not fails, failures=fails)
    return out
