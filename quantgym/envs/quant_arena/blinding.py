"""Blind evaluation of Quant-Arena: what the sandboxed submission and the agent see (docs/blind.md).

With ``blind=True`` the payload handed to the sandbox (spec quant_arena.md §10.4) is rewritten on the host
by :meth:`ArenaBlinding.blind_payload` before it leaves the evaluator:

- **codes**: every stock gets an alias that keeps its board (``MB417``, ``GE023``) drawn from the episode seed; the columns of every
  array are reordered by alias, so neither the name nor the position of a column names the stock.
  ``view.info`` keeps ``industry`` and ``board`` (the task's A-share attributes) and drops ``list_date``;
- **calendar**: decision dates become relative trading days (``view.date`` is an ``int``: 0 = the window's
  first decision date D_0, negative = warm-up history; ``view.history`` is indexed by ``day``);
- **levels**: open/high/low/close and the price limits of each stock are multiplied by one power of two
  (the first visible close lands in [100, 400)), the volume by another (the first positive volume lands in
  [1, 2)). A power-of-two factor is exact in binary floating point, so every ratio of one stock's prices
  (returns, adjusted prices, distances to the limits) and every rank built from them is bit for bit the
  named one; quantities built from levels (``close < 5``, ``close * volume`` across stocks) differ;
- **intraday tables** (:meth:`ArenaBlinding.blind_intraday`) are keyed by relative trading day like the
  history; ``symbol`` holds the alias, ``ts_event`` the nanoseconds since 00:00 UTC of that day (the Unix
  date removed: the time of day stays, as ``ts_event % 86_400 s`` of the named table), ``time`` the local
  time of day (a Timedelta); prices are multiplied by the stock's price factor of the daily view, sizes and
  quantities by its volume factor, ``total_value`` by both, so every intraday return, spread ratio and
  order-flow share is the named one. Sequence numbers, sides, order types and phases are kept; any other
  column (a user table's own) is dropped, since it may hold a date or a level.

The scores come back in the alias order; :meth:`ArenaBlinding.unblind_scores` puts them back in the real
column order before the cash account, the RankIC and the score run on the real panel, so blinding changes
what the submission reads, never how it is scored. The alias map stays in the evaluator (the run record).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

#: alias prefix of each A-share board (``view.info["board"]``); another board uses its first two letters
BOARD_PREFIX = {"main": "MB", "chinext": "GE", "star": "SR", "bse": "BE"}
#: Block arrays that are price levels (multiplied by the stock's price factor).
PRICE_ARRAYS = ("open", "high", "low", "close", "up_limit", "down_limit")
#: intraday columns (docs/quant_arena.md schema): prices (the stock's price factor), sizes and quantities
#: (its volume factor), traded value (both), and columns that carry no date or level (kept as they are)
INTRADAY_PRICE = re.compile(r"price|prev_close|.*_px(_\d+)?")
INTRADAY_SIZE = re.compile(r"qty|total_volume|.*_sz(_\d+)?|.*_size")
INTRADAY_VALUE = ("total_value",)
INTRADAY_KEPT = ("side", "ord_type", "trading_phase", "num_trades", "order_no", "bid_order_no", "ask_order_no",
                 "biz_index", "channel", "appl_seq")
_DAY_NS = 86_400 * 10**9


@dataclass(frozen=True)
class ArenaBlinding:
    """The alias map and level factors of one blind episode (evaluator side only).

    Attributes
    ----------
    seed : int
        The episode seed the map is drawn from.
    aliases : tuple[str, ...]
        Alias of each real column of the panel (``aliases[i]`` names ``ds.symbols[i]``).
    order : ndarray of int
        Real column index of each blinded column (blinded columns are sorted by alias).
    price_shift : ndarray of int
        Extra power of two per real column drawn from the seed (0 or 1) on top of the rebasing.
    """

    seed: int
    aliases: tuple[str, ...]
    order: np.ndarray
    price_shift: np.ndarray

    @classmethod
    def draw(cls, symbols: Any, boards: Any, seed: int) -> "ArenaBlinding":
        """Aliases and factors for the panel columns ``symbols`` (of boards ``boards``), drawn from ``seed``.

        The alias keeps the board (:data:`BOARD_PREFIX`: ``MB417`` is a main-board stock); the number is a
        permutation within the board drawn by :class:`quantgym.blind.AliasMap`.
        """
        from quantgym.blind import AliasMap

        rng = np.random.default_rng(int(seed))
        amap = AliasMap(list(symbols), [str(b) for b in boards], rng, prefixes=BOARD_PREFIX)
        order = np.argsort(np.asarray(amap.aliases), kind="stable")
        return cls(seed=int(seed), aliases=amap.aliases, order=order,
                   price_shift=rng.integers(0, 2, size=len(amap.aliases)))

    def alias_map(self, symbols: Any) -> dict[str, str]:
        """``{real code: alias}`` (for the evaluator's record; never handed to the sandbox)."""
        return {str(s): a for s, a in zip(symbols, self.aliases)}

    # ------------------------------------------------------------------ host -> sandbox
    def blind_payload(self, payload: dict) -> dict:
        """The payload of :func:`~quantgym.envs.quant_arena.handoff.build_payload`, blinded (a new dict)."""
        blk = payload["block"]
        o = self.order
        first = int(payload["first"])
        out = {k: (v[:, o].copy() if isinstance(v, np.ndarray) and v.ndim == 2 else v) for k, v in blk.items()}
        hr = blk["has_row"][:, o]
        close = out["close"]
        seen = np.isfinite(close) & hr
        anyrow = seen.any(axis=0)
        x0 = np.where(anyrow, close[np.argmax(seen, axis=0), np.arange(close.shape[1])], np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            k = np.where(anyrow & (x0 > 0), np.ceil(np.log2(100.0 / x0)), 0.0).astype(np.int64)
        e = k + self.price_shift[o]
        zero = e == 0  # never the real level: the other power of two that keeps [100, 400)
        e[zero] = np.where(k[zero] == 0, 1, -1)
        for name in PRICE_ARRAYS:
            out[name] = np.ldexp(out[name], e[None, :])
        vol = out["volume"]
        vpos = np.isfinite(vol) & (vol > 0)
        vany = vpos.any(axis=0)
        v0 = np.where(vany, vol[np.argmax(vpos, axis=0), np.arange(vol.shape[1])], 1.0)
        ve = -np.floor(np.log2(v0)).astype(np.int64)
        ve[ve == 0] = -1
        out["volume"] = np.ldexp(vol, ve[None, :])
        out["symbols"] = [self.aliases[i] for i in o]
        out["dates"] = [i - first for i in range(len(blk["dates"]))]
        info = payload["info"]
        real = [str(s) for s in np.asarray(blk["symbols"])[o]]
        binfo = info.reindex(real)[[c for c in ("industry", "board") if c in info.columns]].copy()
        binfo.index = pd.Index(out["symbols"], dtype=object, name=info.index.name)
        day = {str(d): rel for d, rel in zip(blk["dates"], out["dates"])}
        factors = {r: (a, int(pe), int(v)) for r, a, pe, v in zip(real, out["symbols"], e, ve)}
        intraday = {day[d]: {k: self.blind_intraday(t, factors) for k, t in tables.items()}
                    for d, tables in (payload.get("intraday") or {}).items() if d in day}
        res = dict(payload)
        res.update(block=out, info=binfo, intraday=intraday)
        return res

    @staticmethod
    def blind_intraday(table: pd.DataFrame, factors: dict[str, tuple[str, int, int]]) -> pd.DataFrame:
        """One intraday table of one day, blinded (module docstring); ``factors``: real code -> (alias, price
        exponent, volume exponent) of the window's daily view. Rows of a stock outside the panel are dropped."""
        sym = table["symbol"].astype(str).to_numpy()
        keep = np.fromiter((s in factors for s in sym), dtype=bool, count=len(sym))
        t = table.loc[keep].reset_index(drop=True)
        rows = [factors[s] for s in sym[keep]]
        pe = np.array([r[1] for r in rows], dtype=np.int64)
        vexp = np.array([r[2] for r in rows], dtype=np.int64)
        out = pd.DataFrame(index=t.index)
        for c in t.columns:
            col = t[c]
            if c == "symbol":
                out[c] = pd.Series([r[0] for r in rows], index=t.index, dtype=object)
            elif c == "ts_event":
                out[c] = col.to_numpy(np.int64) % _DAY_NS
            elif c == "time":
                tm = pd.to_datetime(col)
                out[c] = tm - tm.dt.normalize()  # the local time of day
            elif INTRADAY_PRICE.fullmatch(c):
                out[c] = np.ldexp(col.to_numpy(np.float64), pe)
            elif INTRADAY_SIZE.fullmatch(c):
                out[c] = np.ldexp(col.to_numpy(np.float64), vexp)
            elif c in INTRADAY_VALUE:
                out[c] = np.ldexp(col.to_numpy(np.float64), pe + vexp)
            elif c in INTRADAY_KEPT:
                out[c] = col.to_numpy()
        return out

    # ------------------------------------------------------------------ sandbox -> host
    def in_blind_order(self, a: np.ndarray) -> np.ndarray:
        """Real-order array (last axis = panel columns) in the blinded column order."""
        return a[..., self.order]

    def unblind_scores(self, a: np.ndarray) -> np.ndarray:
        """Blinded-order array (last axis = blinded columns) back in the real column order."""
        out = np.empty_like(a)
        out[..., self.order] = a
        return out


def check_blind(ds: Any) -> None:
    """Refuse in one line a panel blind mode cannot alias: one without each stock's board (the alias keeps
    the board). ``ArenaDataset.from_frame`` derives a missing board from the code; ``industry`` is optional
    in both modes (served as the data has it)."""
    info = getattr(ds, "info", None)
    if info is None or "board" not in info.columns or info["board"].reindex(ds.symbols).isna().any():
        raise ValueError("blind=True needs each stock's board: the data lacks the 'board' column "
                         "(info / symbols.csv, docs/quant_arena.md)")


def blind_years(years: dict | None) -> dict | None:
    """Calendar-year keys of a feedback ``years`` dict replaced by their position (``"year 1"``, ...)."""
    if not years:
        return years
    return {f"year {i}": v for i, (_, v) in enumerate(sorted(years.items()), start=1)}


def blind_vocabulary() -> dict[str, list[str]]:
    """What :func:`quantgym.blind.scan` looks for in Quant-Arena's bundled data: the stock codes of the
    bundled panel (``SH600519``; bare six-digit codes are found by the scanner's A-share code pattern) and the
    period label of the default sealed window."""
    from .config import ArenaConfig
    from .data import load_dataset

    syms = [str(s) for s in load_dataset(None).symbols]
    return {"codes": syms, "period_names": [ArenaConfig().windows.period_label]}


__all__ = ["ArenaBlinding", "BOARD_PREFIX", "INTRADAY_KEPT", "check_blind", "PRICE_ARRAYS", "blind_years", "blind_vocabulary"]
