"""Market snapshots and point-in-time views (spec §1.6–§1.9, §11.6).

A :class:`MarketSnapshot` holds everything an agent may see at decision date ``d``:
it is built from rows ``≤ t`` of :class:`quantgym.envs.portbench.data.PortBenchData` only, so a
change to any later row cannot change it (tested). Forward data never enter a
snapshot; the ex-post oracle reads them in :mod:`.stages` (scoring only).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

import numpy as np
import pandas as pd

from quantgym.envs.portbench.universe import ASSET_CLASSES
from quantgym.envs.portbench.availability import available_mask, market_regime
from quantgym.envs.portbench.availability import REGIME_LABELS as REGIMES  # noqa: F401 (re-exported)
from quantgym.envs.portbench.config import PortBenchConfig
from quantgym.jit import jit_enabled, njit
#: how a regime is displayed in prompts (§1.9: crisis shows as high-volatility)
REGIME_DISPLAY = {"bull": "bull", "bear": "bear", "sideways": "sideways", "crisis": "high-volatility"}
SQRT252 = np.sqrt(252.0)
#: at most this many decision rows per (dataset, config) keep their O(N) snapshot parts in memory (about 10·N
#: floats each: availability, prices, window statistics, class correlations, cached scorer entries)
ROW_CACHE_MAX = 4096
#: byte budget of the per-(dataset, config) cache of the O(L·N) and O(N²) row arrays (window returns, the
#: correlation matrix, their observation forms), least recently used rows dropped first (speed only: a dropped
#: row is recomputed, to the same values). At N = 80 every daily row of 2016-2023 fits (~185 kB a row); at
#: N = 1000 about 30 rows do (~17 MB a row), so memory stays linear in the number of trading days × N.
ROW_CACHE_BYTES = 512 * 2**20
#: data object -> {config key -> {row -> snapshot parts}}; weak keys so a dropped dataset frees its cache
_SHARED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def pairwise_corr(x: np.ndarray) -> np.ndarray:
    """Pearson correlation, pairwise-complete over rows where both columns are finite (spec §1.6).

    Parameters
    ----------
    x : (L, N) float array, NaN = missing.

    Returns
    -------
    (N, N) float array; NaN where fewer than 2 common rows or a zero variance; diagonal 1 where the
    column has a non-zero variance. Vectorised (matrix products), equal to
    ``pandas.DataFrame.corr()`` up to rounding.

    The four (N×L)·(L×N) sums are matrix products; the rest (about ten N×N passes in numpy) is one
    compiled pass, :func:`_corr_from_sums` (:mod:`quantgym.jit`), with the same IEEE operations in the
    same order, so the result is bit-identical to the numpy formulation (:func:`_corr_from_sums_numpy`,
    used when ``QUANTGYM_JIT=0``; tested). At N = 1000 the numpy passes cost 3× the matrix products.
    """
    m = np.isfinite(x)
    mf = m.astype(np.float64)
    z = np.where(m, x, 0.0)
    n = mf.T @ mf  # common counts
    sx = z.T @ mf  # sx[i, j] = Σ x_i over rows where j (and i) valid
    sxx = (z * z).T @ mf
    sxy = z.T @ z
    if jit_enabled():
        return _corr_from_sums(n, sx, sxx, sxy)
    return _corr_from_sums_numpy(n, sx, sxx, sxy)


#: variances at or below this are zero (pairwise_corr: NaN correlation)
CORR_VAR_TOL = 1e-14


@njit(error_model="numpy")
def _corr_from_sums(n, sx, sxx, sxy):  # pragma: no cover - compiled; the interpreted twin is the numpy form
    """Compiled finish of :func:`pairwise_corr` from the pairwise sums (C-contiguous (N, N) float64 arrays,
    ``sxy`` symmetric); overwrites and returns ``sxy``. Per entry, the arithmetic of
    :func:`_corr_from_sums_numpy` in its order: ``cov = sxy − (sx·sxᵀ)/n``, ``var = sxx − (sx·sx)/n``,
    ``c = cov / √(var_ij·var_ji)``, NaN where ``n < 2`` or a variance ≤ :data:`CORR_VAR_TOL`, clipped to
    [−1, 1]; diagonal 1 where finite, else NaN."""
    k = n.shape[0]
    tol = 1e-14  # CORR_VAR_TOL (a global would be frozen into the compiled cache)
    out = sxy
    bs = 64  # tiles of bs × bs: the (i, j) and (j, i) entries of a tile pair stay in cache
    for i0 in range(0, k, bs):
        for j0 in range(i0, k, bs):
            for i in range(i0, min(i0 + bs, k)):
                for j in range(max(i, j0), min(j0 + bs, k)):
                    nij, nji = n[i, j], n[j, i]
                    a, b = sx[i, j], sx[j, i]
                    vi = sxx[i, j] - (a * a) / nij
                    vj = sxx[j, i] - (b * b) / nji
                    sij, sji = sxy[i, j], sxy[j, i]
                    cij = (sij - (a * b) / nij) / np.sqrt(vi * vj)
                    if sji == sij and nji == nij:  # symmetric sums (always, in practice): the same IEEE result
                        cji = cij
                    else:
                        cji = (sji - (b * a) / nji) / np.sqrt(vj * vi)
                    ok = vi > tol and vj > tol
                    if not (ok and nij >= 2.0):
                        cij = np.nan
                    if not (ok and nji >= 2.0):
                        cji = np.nan
                    if cij < -1.0:
                        cij = -1.0
                    elif cij > 1.0:
                        cij = 1.0
                    if cji < -1.0:
                        cji = -1.0
                    elif cji > 1.0:
                        cji = 1.0
                    if i == j:
                        cij = 1.0 if np.isfinite(cij) else np.nan
                        cji = cij
                    out[i, j] = cij
                    out[j, i] = cji
    return out


def _corr_from_sums_numpy(n, sx, sxx, sxy):
    """The numpy form of :func:`_corr_from_sums` (the reference; run when ``QUANTGYM_JIT=0``)."""
    # cov = sxy − sx·sxᵀ/n, var_i = sxx − sx·sx/n, c = cov/√(var_i·var_j), computed in place
    with np.errstate(invalid="ignore", divide="ignore"):
        tmp = sx * sx.T
        tmp /= n
        cov = np.subtract(sxy, tmp, out=sxy)
        np.multiply(sx, sx, out=tmp)
        tmp /= n
        var_i = np.subtract(sxx, tmp, out=sxx)
        var_j = var_i.T
        denom = np.multiply(var_i, var_j, out=tmp)
        np.sqrt(denom, out=denom)
        c = np.divide(cov, denom, out=cov)
    v_ok = var_i > CORR_VAR_TOL
    bad = n < 2
    bad |= ~(v_ok & v_ok.T)
    np.copyto(c, np.nan, where=bad)
    np.clip(c, -1.0, 1.0, out=c)
    d = np.diag(c).copy()
    np.fill_diagonal(c, np.where(np.isfinite(d), 1.0, np.nan))
    return c


def class_correlations(corr: np.ndarray, class_id: np.ndarray, available: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intra- and inter-class average correlations (spec §1.6, §11.9 NaN rule).

    Parameters
    ----------
    corr : (N, N) correlation matrix (NaN allowed).
    class_id : (N,) index into :data:`ASSET_CLASSES`.
    available : (N,) bool.

    Returns
    -------
    intra : (6,) mean off-diagonal correlation within each class with ≥ 2 available members
        (NaN otherwise, or if no finite entry).
    inter : (6, 6) entry ``[c, d]`` = mean of finite ``ρ_ab`` over ``a ∈ c, b ∈ d, a ≠ b``;
        the diagonal holds ``intra``; NaN for classes without available members.
    """
    k = len(ASSET_CLASSES)
    onehot = np.zeros((corr.shape[0], k))
    onehot[np.arange(corr.shape[0]), class_id] = 1.0
    onehot[~available] = 0.0
    fin = np.isfinite(corr)
    off = ~np.eye(corr.shape[0], dtype=bool)
    use = fin & off
    cz = np.where(use, corr, 0.0)
    sums = onehot.T @ cz @ onehot
    counts = onehot.T @ use.astype(np.float64) @ onehot
    with np.errstate(invalid="ignore", divide="ignore"):
        inter = sums / counts
    inter[counts == 0] = np.nan
    members = onehot.sum(axis=0)
    intra = np.diag(inter).copy()
    intra[members < 2] = np.nan
    np.fill_diagonal(inter, intra)
    return intra, inter


def obs_window(returns: np.ndarray, lookback: int) -> tuple[np.ndarray, np.ndarray]:
    """Observation form of a return window (spec §11.2): the last ``lookback`` rows, oldest first,
    zero-padded at the top, missing → 0, clipped to [−1, 10].

    Parameters
    ----------
    returns : (L', N) window returns, NaN = missing (L' may exceed ``lookback`` in paper mode).
    lookback : L.

    Returns
    -------
    ret : (L, N) float64; mask : (L, N) int8, 1 where a return was observed.
    """
    win = returns[-lookback:]
    n = returns.shape[1]
    ret = np.zeros((lookback, n))
    mask = np.zeros((lookback, n), dtype=np.int8)
    k = win.shape[0]
    fin = np.isfinite(win)
    ret[lookback - k:] = np.clip(np.where(fin, win, 0.0), -1.0, 10.0)
    mask[lookback - k:] = fin
    return ret, mask


def obs_corr(corr: np.ndarray) -> np.ndarray:
    """Observation form of a correlation matrix (spec §11.2): NaN → 0 off the diagonal, diagonal 1, clipped
    to [−1, 1]; (N, N) float64."""
    c = np.where(np.isfinite(corr), corr, 0.0)
    np.fill_diagonal(c, 1.0)
    return np.clip(c, -1.0, 1.0)


class RowArrays:
    """Least-recently-used cache of large per-row arrays within a byte budget (speed only).

    ``get(t)`` returns the dict ``name -> array`` of row ``t`` (or None) and marks the row as used;
    ``put(t, name, array)`` stores a read-only array and drops the least recently used other rows while
    the total exceeds ``max_bytes`` (the row being filled is always kept).
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self.rows: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()

    def get(self, t: int) -> dict[str, np.ndarray] | None:
        row = self.rows.get(t)
        if row is not None:
            self.rows.move_to_end(t)
        return row

    def put(self, t: int, name: str, value: np.ndarray) -> np.ndarray:
        value.flags.writeable = False
        row = self.rows.get(t)
        if row is None:
            row = self.rows[t] = {}
        else:
            self.rows.move_to_end(t)
        old = row.get(name)
        self.nbytes += value.nbytes - (old.nbytes if old is not None else 0)
        row[name] = value
        while self.nbytes > self.max_bytes and len(self.rows) > 1:
            first = next(iter(self.rows))
            if first == t:
                self.rows.move_to_end(t)
                continue
            self.nbytes -= sum(v.nbytes for v in self.rows.pop(first).values())
        return value

    def clear(self) -> None:
        self.rows.clear()
        self.nbytes = 0


#: placeholder of a snapshot field computed on first access (``MarketSnapshot.loader``)
LAZY: Any = type("Lazy", (), {"__repr__": lambda self: "LAZY"})()
LAZY_FIELDS = ("returns", "corr", "intra", "inter")


@dataclass(eq=False)
class MarketSnapshot:
    """What the agent sees at decision date ``d`` (spec §1.6). Arrays are over the universe (N).

    Attributes
    ----------
    decision_date : the decision date ``d`` (trades execute at its close).
    t : row index of ``d`` in the dataset.
    tickers, classes : universe in canonical order and each ticker's §1.1 class.
    class_id : (N,) int index into :data:`ASSET_CLASSES`.
    available : (N,) bool, the set ``A_d`` (§11.6).
    window_dates : (L,) dates of the return window, oldest first.
    returns : (L, N) simple returns in the window, NaN = missing.
    price : (N,) last adjusted close at ``d`` (NaN if none).
    trailing_return : (N,) ``Π(1 + r) − 1`` over the window (0 for unavailable assets).
    ann_vol : (N,) ``std(r)·√252`` (ddof 1; 0 for unavailable assets).
    corr : (N, N) pairwise-complete Pearson correlation (NaN where undefined).
    intra, inter : class averages (:func:`class_correlations`).
    macro : (17,) macro vector at ``d`` (publication lags applied); ``macro_mask`` marks real values.
    regime : one of :data:`REGIMES`.
    current_weights : (N,) drifted weights before trading; ``nav`` : NAV before trading.
    """

    decision_date: pd.Timestamp
    t: int
    tickers: tuple[str, ...]
    classes: tuple[str, ...]
    class_id: np.ndarray
    available: np.ndarray
    window_dates: pd.DatetimeIndex
    returns: np.ndarray
    price: np.ndarray
    trailing_return: np.ndarray
    ann_vol: np.ndarray
    corr: np.ndarray
    intra: np.ndarray
    inter: np.ndarray
    macro: np.ndarray
    macro_mask: np.ndarray
    regime: str
    current_weights: np.ndarray
    nav: float
    news_text: str = ""
    extra: dict = field(default_factory=dict)
    #: optional ``name -> value`` loader of the fields passed as :data:`LAZY` (``returns``, ``corr``, ``intra``,
    #: ``inter``): they are computed on first access (speed only; the view's snapshots use it)
    loader: Callable[[str], Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in LAZY_FIELDS:
            if self.__dict__.get(name) is LAZY:
                del self.__dict__[name]

    def __getattr__(self, name: str):  # only called for a lazy field not loaded yet
        loader = self.__dict__.get("loader")
        if name in LAZY_FIELDS and loader is not None:
            value = self.__dict__[name] = loader(name)
            return value
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def avail_idx(self) -> np.ndarray:
        """Indices of the available assets, canonical order."""
        return np.flatnonzero(self.available)


def check_regime_ticker(ticker: str, tickers, classes, config_name: str = "PortBenchConfig") -> None:
    """Refuse a universe without the §1.9 regime ticker (``PortBenchConfig.regime_ticker``, SPY).

    Raises
    ------
    ValueError
        Names the missing ticker and what is valid: add it to the data, or set ``regime_ticker`` to one of
        the universe's equities.
    """
    if ticker in tuple(tickers):
        return
    eq = [t for t, c in zip(tickers, classes) if c == "equities"]
    raise ValueError(f"the regime ticker {ticker!r} (spec §1.9) is not in the data's universe: add its prices to "
                     f"prices.parquet and a row to assets.csv, or set {config_name}(regime_ticker=...) to one of "
                     f"its equities ({', '.join(eq[:8]) + (', ...' if len(eq) > 8 else '') if eq else 'none'})")


class MarketView:
    """Point-in-time view over a :class:`~quantgym.envs.portbench.data.PortBenchData` (one per env).

    Precomputes contiguous arrays once; :meth:`snapshot` reads rows ``≤ t`` only.
    """

    def __init__(self, data, config: PortBenchConfig):
        self.data = data
        self.config = config
        self.dates: pd.DatetimeIndex = pd.DatetimeIndex(data.dates)
        self.tickers: tuple[str, ...] = tuple(data.tickers)
        self.classes: tuple[str, ...] = tuple(data.asset_class)
        unknown = sorted(set(self.classes) - set(ASSET_CLASSES))
        if unknown:
            raise ValueError(f"unknown asset class label(s) {unknown}; expected {ASSET_CLASSES}")
        self.class_id = np.array([ASSET_CLASSES.index(c) for c in self.classes], dtype=np.int64)
        self.prices = np.ascontiguousarray(data.prices, dtype=np.float64)
        self.returns = np.ascontiguousarray(data.returns, dtype=np.float64)
        self.returns0 = np.nan_to_num(self.returns, nan=0.0)  # day loop: no return = 0
        self.macro = np.ascontiguousarray(data.macro, dtype=np.float64)
        # §1.9 labels the regime on SPY (config.regime_ticker); a universe without it is refused, never
        # silently measured on another ticker
        check_regime_ticker(config.regime_ticker, self.tickers, self.classes)
        self.regime_ticker = config.regime_ticker
        self.n_assets = len(self.tickers)
        self._dates64 = self.dates.values
        # per-dataset caches (speed only): day-loop returns and snapshot row parts, shared by every view
        # over the same data object with the same window/availability config
        shared = _SHARED.setdefault(data, {})
        key = (config.lookback, config.window_days, config.min_obs, config.as_of, self.regime_ticker)
        self._row_cache: dict[int, dict] = shared.setdefault(key, {})
        self._row_cache_key = key
        self._arrays: RowArrays = shared.setdefault(("arrays", *key), RowArrays(ROW_CACHE_BYTES))

    def window_rows(self, t: int) -> tuple[int, int]:
        """Row range ``[lo, hi)`` of the return window ending at ``t`` (≤ L rows within 90 days)."""
        cfg = self.config
        hi = t + 1
        lo = max(0, hi - cfg.lookback)
        first_allowed = self._dates64[t] - np.timedelta64(cfg.window_days, "D")
        lo = max(lo, int(np.searchsorted(self._dates64, first_allowed, side="left")))
        return lo, hi

    def available_at(self, t: int) -> np.ndarray:
        """``A_d`` (§11.6): a price at ``t`` and ≥ ``min_obs`` valid returns in the window (L rows, 90 days)."""
        return available_mask(self.data, t, self.config.lookback, self.config.min_obs, window_days=self.config.window_days)

    def regime_at(self, t: int) -> str:
        """§1.9 regime label at row ``t`` (sideways without an equity to measure it on)."""
        return market_regime(self.data, t, self.regime_ticker) if self.regime_ticker else "sideways"

    def _row_parts(self, t: int) -> dict:
        """O(N) row-dependent parts of the snapshot of decision row ``t`` (cached per dataset, read-only).

        Everything in a snapshot except the portfolio state (weights, NAV, news) depends on the
        row and the config only, so it is computed once per ``(dataset, config, row)`` and shared
        by every env over the same :class:`~quantgym.envs.portbench.data.PortBenchData` (speed only; the values
        are those of the uncached computation). The dict also holds scorer entries keyed by
        strings (e.g. the lookback oracle, see :mod:`.env`). The O(L·N) and O(N²) arrays (window
        returns, correlations) are not in it: :meth:`row_array` keeps them in a byte-bounded cache.
        """
        cache = self._row_cache
        parts = cache.get(t)
        if parts is not None:
            return parts
        parts = self._compute_row_parts(int(t))
        if len(cache) >= ROW_CACHE_MAX:
            cache.pop(next(iter(cache)))
        cache[t] = parts
        return parts

    def _compute_row_parts(self, t: int) -> dict:
        cfg = self.config
        td = t - 1 if cfg.as_of == "previous_close" else t
        if td < 0:
            raise ValueError("no data before the first decision date")
        lo, hi = self.window_rows(td)
        win = self.returns[lo:hi]
        available = self.available_at(td)
        fin = np.isfinite(win)
        wz = np.where(fin, win, 0.0)
        trailing = np.prod(1.0 + wz, axis=0) - 1.0
        cnt = fin.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = wz.sum(axis=0) / cnt
            var = (np.where(fin, (win - mean) ** 2, 0.0)).sum(axis=0) / (cnt - 1)
        vol = np.sqrt(np.where(cnt > 1, var, 0.0)) * SQRT252
        trailing = np.where(available, trailing, 0.0)
        vol = np.where(available, vol, 0.0)
        macro = self.macro[td]
        mmask = np.isfinite(macro)
        parts = {
            "decision_date": self.dates[t],
            "available": available,
            "window": (lo, hi),
            "window_dates": self.dates[lo:hi],
            "price": np.where(available, self.prices[td], np.nan),
            "trailing_return": trailing,
            "ann_vol": vol,
            "macro": np.where(mmask, macro, 0.0),
            "macro_mask": mmask,
            "regime": self.regime_at(td),
        }
        for v in parts.values():
            if isinstance(v, np.ndarray):
                v.flags.writeable = False
        return parts

    def window_returns(self, parts: dict) -> np.ndarray:
        """(L', N) returns of a row's window (``parts["window"]``), unavailable columns NaN."""
        lo, hi = parts["window"]
        return np.where(parts["available"][None, :], self.returns[lo:hi], np.nan)

    def row_array(self, t: int, name: str) -> np.ndarray:
        """A large row array of decision row ``t`` (read-only; cached within :data:`ROW_CACHE_BYTES`).

        ``name``: ``"returns"`` (L', N) window returns with unavailable columns NaN (the snapshot's
        ``returns``; ``"returns0"`` the same with NaN → 0); ``"corr"`` (N, N) :func:`pairwise_corr` of them; ``"obs_returns"`` / ``"obs_mask"``
        (L, N) and ``"obs_corr"`` (N, N): the observation forms (:func:`obs_window`, :func:`obs_corr`).
        """
        row = self._arrays.get(t)
        if row is not None:
            v = row.get(name)
            if v is not None:
                return v
        if name == "returns":
            v = self.window_returns(self._row_parts(t))
        elif name == "returns0":  # missing = 0 (the S5 risk report's window)
            v = np.nan_to_num(self.row_array(t, "returns"), nan=0.0)
        elif name == "corr":
            from quantgym.envs.portbench.optimize import _single_thread_blas  # lazy: optimize imports scipy

            rets = self.row_array(t, "returns")
            with _single_thread_blas():
                v = pairwise_corr(rets)
        elif name in ("obs_returns", "obs_mask"):
            ret, mask = obs_window(self.row_array(t, "returns"), self.config.lookback)
            self._arrays.put(t, "obs_mask" if name == "obs_returns" else "obs_returns",
                             mask if name == "obs_returns" else ret)
            v = ret if name == "obs_returns" else mask
        elif name == "obs_corr":
            v = obs_corr(self.row_array(t, "corr"))
        else:
            raise KeyError(f"unknown row array {name!r}")
        return self._arrays.put(t, name, v)

    def class_corr(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(intra (6,), inter (6, 6)) class correlations of decision row ``t`` (:func:`class_correlations`),
        cached with the row parts."""
        parts = self._row_parts(t)
        cc = parts.get("class_corr")
        if cc is None:
            from quantgym.envs.portbench.optimize import _single_thread_blas  # lazy: optimize imports scipy

            corr = self.row_array(t, "corr")
            with _single_thread_blas():
                cc = class_correlations(corr, self.class_id, parts["available"])
            for v in cc:
                v.flags.writeable = False
            parts["class_corr"] = cc
        return cc

    def snapshot(self, t: int, current_weights: np.ndarray, nav: float, news_text: str = "") -> MarketSnapshot:
        """Build the snapshot of decision row ``t`` from rows ``≤ t`` (``≤ t − 1`` with ``as_of='previous_close'``).

        Row-dependent arrays come from a per-dataset cache and are read-only (copy before modifying); ``returns``,
        ``corr``, ``intra`` and ``inter`` are computed when first read.
        """
        t = int(t)
        p = self._row_parts(t)
        fields = p.get("snapshot_fields")
        if fields is None:  # the row's constant fields, built once (speed only: no dataclass __init__ per step)
            fields = p["snapshot_fields"] = MarketSnapshot(
                decision_date=p["decision_date"], t=t, tickers=self.tickers, classes=self.classes,
                class_id=self.class_id, available=p["available"], window_dates=p["window_dates"], returns=LAZY,
                price=p["price"], trailing_return=p["trailing_return"], ann_vol=p["ann_vol"], corr=LAZY, intra=LAZY,
                inter=LAZY, macro=p["macro"], macro_mask=p["macro_mask"], regime=p["regime"], current_weights=None,
                nav=0.0,
            ).__dict__
        snap = object.__new__(MarketSnapshot)
        d = snap.__dict__
        d.update(fields)
        d["current_weights"] = np.array(current_weights, dtype=np.float64)
        d["nav"] = float(nav)
        d["news_text"] = news_text
        d["extra"] = {}
        d["loader"] = partial(self._snapshot_field, t)  # not cached with the row: it holds this view
        return snap

    def _snapshot_field(self, t: int, name: str) -> np.ndarray:
        """The lazy snapshot fields of row ``t`` (``MarketSnapshot.loader``)."""
        if name in ("intra", "inter"):
            return self.class_corr(t)[name == "inter"]
        return self.row_array(t, name)
