"""PortBench in blind mode (docs/blind.md): what the stage prompts show instead of names, dates and levels.

The scores, the truth and the simulation are those of named mode: blinding changes the text only.

- Assets: :class:`quantgym.blind.AliasMap` by asset class (``EQ07``, ``BD03``, ``CR02``), drawn from the
  episode seed; the agent answers with aliases, which the text path maps back to the universe's order.
- Dates: the decision is named by its number ("decision 3 of 12"), the data by relative trading days.
- Levels: the adjusted close is rebased to 100 at the window start (1 decimal: the window return as a
  level); each macro series is its z-score over the window's rows (1 decimal), never its level.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def blind_vocabulary() -> dict[str, Any]:
    """The bundled PortBench words the leak scanner looks for: every ticker of the universe (clean and
    paper), the regime ticker, the period names, aliases and labels (:func:`quantgym.blind.bundled_vocabulary`)."""
    from quantgym.envs.portbench.config import PERIOD_ALIASES, PERIODS, PortBenchConfig
    from quantgym.envs.portbench.paper.config import PAPER_STOCKS
    from quantgym.envs.portbench.universe import CANONICAL_TICKERS, VIX_TICKER

    periods = set(PERIODS) | set(PERIOD_ALIASES)
    periods |= {p.label.split(",")[0].strip() for p in PERIODS.values() if p.label}
    return {"tickers": set(CANONICAL_TICKERS) | set(PAPER_STOCKS) | {VIX_TICKER, PortBenchConfig.regime_ticker},
            "period_names": periods}


def _levels(view, snap, parts) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The blinded levels of a decision row, in universe order (they do not depend on the aliases, so the
    view's row cache keeps them for every episode): the close rebased to 100 at the window start, the macro
    z-scores over the window's rows, their mask, and the per-asset rows the prompt lists stacked (rebased
    close, trailing return, volatility: one ``take`` puts them in alias order)."""
    from quantgym.blind import zscore

    window = parts.get("window")  # the window's rows (clean view); else found by its dates
    if window is not None:
        mrows = view.macro[window[0]:window[1]]
    else:
        rows = view.dates.get_indexer(snap.window_dates)
        mrows = view.macro[rows[rows >= 0]]
    rebased = np.where(snap.available, 100.0 * (1.0 + snap.trailing_return), np.nan)
    z = zscore(mrows)
    mask = snap.macro_mask & np.isfinite(z)
    out = (rebased, np.where(mask, z, 0.0), mask, np.stack([rebased, snap.trailing_return, snap.ann_vol]))
    for a in out:
        a.flags.writeable = False
    return out


class BlindView:
    """The blind side of one PortBench episode: the alias map and the blinded snapshots of its decision rows.

    ``view``: the env's :class:`~quantgym.envs.portbench.market.MarketView`; ``seed``: the episode seed the
    aliases are drawn from; ``regime_ticker``: the §1.9 ticker the prompts name (shown by its alias).
    The blinded row fields (aliases, rebased closes, macro z-scores) are built once per row and episode and
    kept, so the prompt block cache (:mod:`quantgym.envs.portbench.prompts`) serves S1 and S3 of a decision.
    """

    def __init__(self, view, seed: Any, n_decisions: int, regime_ticker: str):
        from quantgym.blind import AliasMap

        self.view = view
        self.aliases = AliasMap(view.tickers, view.classes, seed)
        self.tickers: tuple[str, ...] = self.aliases.aliases
        self.n_decisions = int(n_decisions)
        self.regime_alias = self.aliases.alias(regime_ticker)
        #: the prompt's asset order: by class (universe order of the classes), then by alias number, so the
        #: listing order says nothing about the canonical order
        cls = {c: i for i, c in enumerate(dict.fromkeys(view.classes))}
        self.order = np.array(sorted(range(len(self.tickers)), key=lambda i: (cls[view.classes[i]], self.tickers[i])),
                              dtype=np.int64)
        perm = self.order
        #: flat indices of the correlation matrix in alias order (one ``take`` instead of two per decision)
        self._corr_idx = perm[:, None] * perm.size + perm
        #: the row-independent fields of the blinded snapshots (alias order)
        self._universe = {"tickers": tuple(self.tickers[i] for i in perm),
                          "classes": tuple(view.classes[i] for i in perm), "class_id": view.class_id[perm]}
        self._universe["class_id"].flags.writeable = False
        self._rows: dict[int, dict] = {}
        self._last = None  # (the named snapshot, its blinded copy) of the current decision
        #: the prompt block cache of the blind rows (one dict per row, this episode only)
        self.caches: dict[int, dict] = {}

    def __getstate__(self) -> dict:
        """Pickled without the per-row caches (rebuilt on use): an env pickles mid-episode."""
        state = dict(self.__dict__)
        state.update(_rows={}, caches={}, _last=None)
        return state

    def record(self) -> dict[str, Any]:
        """The evaluator-side record of the episode (results, never the agent): the alias map."""
        return self.aliases.to_dict()

    def _row(self, snap, k: int) -> dict:
        """The blinded row fields of ``snap`` (built once per row): universe order (``price``, ``macro``: the
        observation's entries) and the prompt's alias order (``fields``)."""
        from quantgym.blind import decision_label

        t = int(snap.t)
        row = self._rows.get(t)
        if row is None:
            view, perm = self.view, self.order
            parts = view.row_cache(t)
            levels = (parts.value(("blind_levels",), lambda: _levels(view, snap, parts))
                      if hasattr(parts, "value") else _levels(view, snap, parts))
            rebased, macro, mask, stacked = levels
            available, rows = snap.available.take(perm), stacked.take(perm, axis=1)
            available.flags.writeable = rows.flags.writeable = False
            fields = {**self._universe, "available": available, "price": rows[0], "trailing_return": rows[1],
                      "ann_vol": rows[2], "macro": macro, "macro_mask": mask}
            row = self._rows[t] = {"price": rebased, "macro": macro, "fields": fields, "lazy": {},
                                   "blind": {"label": decision_label(k, self.n_decisions),
                                             "regime_ticker": self.regime_alias}}
        return row

    def observation(self, snap, k: int) -> dict[str, np.ndarray]:
        """The blinded observation entries in universe order: ``price`` (rebased) and ``macro`` (z-scores)."""
        row = self._row(snap, k)
        return {"price": row["price"], "macro": row["macro"]}

    def permute(self, values):
        """Per-asset values in universe order → the prompt's alias order (None stays None)."""
        return None if values is None else np.asarray(values)[self.order]

    def snapshot(self, snap, k: int):
        """The blinded copy of ``snap`` (decision ``k``, 0-based), its assets in alias order (class, then
        alias number): aliases for tickers, the rebased close for the price, macro z-scores for the levels,
        ``extra["blind"]`` with the decision label and the regime ticker's alias. Returns, correlations,
        weights and NAV are those of ``snap``, permuted."""
        from quantgym.envs.portbench.market import MarketSnapshot

        last = self._last
        if last is not None and last[0] is snap:  # S1, S2 and S3 of a decision share one snapshot
            return last[1]
        row = self._row(snap, k)
        lazy, perm = row["lazy"], self.order
        corr = lazy.get("corr")
        if corr is None:  # read by every S1 and S3 prompt (the block cache compares the row arrays)
            corr = lazy["corr"] = np.asarray(snap.corr).take(self._corr_idx)
            corr.flags.writeable = False

        def load(name: str):  # the window returns, permuted on first access
            v = lazy.get(name)
            if v is None:
                v = lazy[name] = snap.returns.take(perm, axis=1)
                v.flags.writeable = False
            return v

        out = object.__new__(MarketSnapshot)
        d = out.__dict__
        d.update(snap.__dict__)
        returns = lazy.get("returns")
        if returns is None:
            d.pop("returns", None)
        else:
            d["returns"] = returns
        # the class averages are in class order either way
        d["corr"], d["intra"], d["inter"] = corr, snap.intra, snap.inter
        d.update(row["fields"])
        d["current_weights"] = np.asarray(snap.current_weights).take(perm)
        d["loader"] = load
        d["extra"] = {**snap.extra, "blind": row["blind"]}
        self._last = (snap, out)
        return out

    def cache(self, t: int) -> dict:
        """The prompt block cache of blind row ``t`` (this episode's aliases only)."""
        c = self.caches.get(int(t))
        if c is None:
            c = self.caches[int(t)] = {}
        return c


def check_blind(data, text_provider) -> None:
    """Refuse what blind mode cannot blind, in one line: data without an asset class per ticker (the alias
    keeps the class, so the class must be there) and free news text (``text_provider``)."""
    classes = tuple(getattr(data, "asset_class", ()) or ())
    if len(classes) != len(tuple(data.tickers)) or not all(str(c).strip() for c in classes):
        raise ValueError("blind=True needs the asset class of every ticker: the data lacks the 'asset_class' "
                         "column (assets.csv, docs/data.md)")
    if text_provider is not None:
        raise ValueError("blind=True does not take a text_provider: free news text names dates and assets "
                         "and is not blinded (docs/blind.md)")
