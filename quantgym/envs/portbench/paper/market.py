"""Paper-mode snapshots: own-calendar windows and NaN-propagating class correlations (spec §1.6, §11.6).

:class:`PaperMarketView` is a :class:`~quantgym.envs.portbench.market.MarketView` whose snapshot
rows follow the paper flags:

* ``own_calendar_windows`` -- each asset's window is its last ``L = 60`` own-calendar returns dated
  in ``[d − 90 days, d]`` (crypto: 60 calendar days; equities about 87); the snapshot's return
  matrix is laid out on the union of those dates (NaN where an asset has no observation), so the
  correlation is pairwise-complete on the union of dates and the inner joins of S3/ERC/BL join on
  dates, as in the repo; an asset is available iff its window is non-empty.
* ``nan_corr_propagate`` -- a NaN pairwise correlation makes its class averages NaN.
"""

from __future__ import annotations

import numpy as np

from quantgym.envs.portbench.correlation import class_correlations, pairwise_corr
from quantgym.envs.portbench.market import ASSET_CLASSES, SQRT252, MarketView, RowCache, SHARED_CACHES


def class_correlations_propagate(corr: np.ndarray, class_id: np.ndarray, available: np.ndarray):
    """:func:`~quantgym.envs.portbench.correlation.class_correlations` with NaN propagation (paper, §1.6).

    A class average (intra or inter) is NaN as soon as one of its off-diagonal pairs ``ρ_ab``
    (both available) is NaN; otherwise it equals the clean average.
    """
    intra, inter = class_correlations(corr, class_id, available)
    k = len(ASSET_CLASSES)
    onehot = np.zeros((corr.shape[0], k))
    onehot[np.arange(corr.shape[0]), class_id] = 1.0
    onehot[~available] = 0.0
    bad = (~np.isfinite(corr)) & ~np.eye(corr.shape[0], dtype=bool)
    nbad = onehot.T @ bad.astype(np.float64) @ onehot
    inter = np.where(nbad > 0, np.nan, inter)
    intra = np.where(np.diag(nbad) > 0, np.nan, intra)
    np.fill_diagonal(inter, intra)
    return intra, inter


class PaperMarketView(MarketView):
    """Point-in-time view with the paper snapshot flags (``config.paper``).

    Without ``own_calendar_windows`` the windows are the clean ones on the data's calendar.
    """

    def __init__(self, data, config):
        super().__init__(data, config)
        self.flags = config.paper
        own = getattr(data, "own_returns", None)
        if self.flags.own_calendar_windows and (own is None or own.shape[1] != self.n_assets):
            raise ValueError("own_calendar_windows needs paper data with own-calendar tables "
                             "(quantgym.envs.portbench.paper.data.build_paper_data)")
        if own is not None and own.shape[1] == self.n_assets:
            self._own_dates64 = data.own_dates.values
            self._own_r = np.ascontiguousarray(data.own_returns, dtype=np.float64)
            self._own_p = np.ascontiguousarray(data.own_prices, dtype=np.float64)
        shared = SHARED_CACHES.setdefault(data, {})
        key = ("paper", config.lookback, config.window_days, config.min_obs, config.as_of, self.regime_ticker,
               config.regime_days, self.flags.own_calendar_windows, self.flags.nan_corr_propagate)
        self._row_cache = shared.setdefault(key, {})

    def own_window(self, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Own-calendar window at decision row ``t``: (union dates (U,), returns (U, N), last price (N,)).

        Each column keeps its last ``lookback`` finite own returns dated in ``[d − window_days, d]``;
        union rows without any kept entry are dropped.
        """
        config = self.config
        d = self._dates64[t]
        lo = int(np.searchsorted(self._own_dates64, d - np.timedelta64(config.window_days, "D"), side="left"))
        hi = int(np.searchsorted(self._own_dates64, d, side="right"))
        r = self._own_r[lo:hi]
        fin = np.isfinite(r)
        from_end = np.cumsum(fin[::-1], axis=0)[::-1]  # number of finite entries at or after each row
        keep = fin & (from_end <= config.lookback)
        rows = keep.any(axis=1)
        win = np.where(keep, r, np.nan)[rows]
        px = self._own_p[lo:hi]
        pfin = np.isfinite(px)
        last = np.full(self.n_assets, np.nan)
        has = pfin.any(axis=0)
        idx = px.shape[0] - 1 - np.argmax(pfin[::-1], axis=0)
        last[has] = px[idx[has], np.flatnonzero(has)]
        return self._own_dates64[lo:hi][rows], win, last

    def row_cache(self, t: int) -> RowCache:
        cache = self._row_cache
        parts = cache.get(t)
        if parts is not None:
            return parts
        if not self.flags.own_calendar_windows:
            parts = RowCache(super().row_cache(t))  # clean windows (computed by the parent, kept here)
            cache.pop(t, None)
            parts["returns"] = self.window_returns(parts)
        else:
            config = self.config
            td = t - 1 if config.as_of == "previous_close" else t
            if td < 0:
                raise ValueError("no data before the first decision date")
            wdates, win, last = self.own_window(td)
            fin = np.isfinite(win)
            cnt = fin.sum(axis=0)
            available = cnt > 0  # §11.6 paper: non-empty window
            wz = np.where(fin, win, 0.0)
            trailing = np.prod(1.0 + wz, axis=0) - 1.0
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = wz.sum(axis=0) / cnt
                var = np.where(fin, (win - mean) ** 2, 0.0).sum(axis=0) / (cnt - 1)
            vol = np.sqrt(np.where(cnt > 1, var, 0.0)) * SQRT252
            macro = self.macro[td]
            mmask = np.isfinite(macro)
            import pandas as pd

            parts = RowCache({
                "decision_date": self.dates[t],
                "available": available,
                "window_dates": pd.DatetimeIndex(wdates),
                "returns": np.where(available[None, :], win, np.nan),
                "price": np.where(available, last, np.nan),
                "trailing_return": np.where(available, trailing, 0.0),
                "ann_vol": np.where(available, vol, 0.0),
                "macro": np.where(mmask, macro, 0.0),
                "macro_mask": mmask,
                "regime": self.regime_at(td),
            })
        from quantgym.envs.portbench.optimize import single_thread_blas  # lazy: optimize imports scipy

        with single_thread_blas():  # as the clean view computes it (speed only)
            parts["corr"] = pairwise_corr(parts["returns"])
        if self.flags.nan_corr_propagate:
            parts["intra"], parts["inter"] = class_correlations_propagate(parts["corr"], self.class_id,
                                                                          parts["available"])
        elif "intra" not in parts:
            parts["intra"], parts["inter"] = class_correlations(parts["corr"], self.class_id, parts["available"])
        for v in parts.values():
            if isinstance(v, np.ndarray):
                v.flags.writeable = False
        cache[t] = parts
        return parts

    def row_array(self, t: int, name: str) -> np.ndarray:
        """The snapshot's ``returns`` / ``returns0`` / ``corr`` of row ``t`` from the paper row parts (paper mode keeps them
        per row: an 80-89-asset universe; the env builds the observation forms per step)."""
        parts = self.row_cache(t)
        if name == "returns0" and name not in parts:
            parts.put(name, np.nan_to_num(parts["returns"], nan=0.0))
        if name not in ("returns", "corr", "returns0"):
            raise KeyError(f"paper views keep only 'returns', 'returns0' and 'corr' row arrays, not {name!r}")
        return parts[name]

    def class_corr(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        parts = self.row_cache(t)
        return parts["intra"], parts["inter"]

    def available_at(self, t: int) -> np.ndarray:
        if self.flags.own_calendar_windows:
            return np.isfinite(self.own_window(t)[1]).any(axis=0)
        return super().available_at(t)


__all__ = ["PaperMarketView", "class_correlations_propagate"]
