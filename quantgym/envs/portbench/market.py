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
    column has a non-zero variance. Equal to ``pandas.DataFrame.corr()`` up to rounding; how it is
    computed: :func:`corr_and_obs`.
    """
    return corr_and_obs(x, corr=True, obs=False)[0]


#: variances at or below this are zero (pairwise_corr: NaN correlation)
CORR_VAR_TOL = 1e-14


def mask_patterns(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct missing-value patterns of a window's columns.

    Parameters
    ----------
    m : (L, N) bool, True where a return is observed.

    Returns
    -------
    pid : (N,) int64, the pattern of each column; pats : (L, P) float64 0/1, pattern ``p`` in column
    ``p`` (the P ≤ N distinct columns of ``m``).
    """
    n_rows, n = m.shape
    words = max(1, -(-n_rows // 64))
    packed = np.zeros((n, 8 * words), np.uint8)  # column i's bits, 64 rows to a word
    packed[:, : -(-n_rows // 8)] = np.packbits(np.ascontiguousarray(m.T), axis=1)
    key = packed.view(np.uint64)
    if words == 1:
        _, first, pid = np.unique(key[:, 0], return_index=True, return_inverse=True)
    else:
        _, first, pid = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return pid.ravel().astype(np.int64), m[:, first].astype(np.float64)


def _use_patterns(n_patterns: int, n: int) -> bool:
    """Whether :func:`corr_and_obs` sums by pattern: at most max(16, N/16) distinct patterns (a window of
    listed assets on one calendar has a handful); past that the (N, N) sums come from three more matrix
    products (speed only)."""
    return n_patterns <= max(16, n // 16)


def corr_and_obs(x: np.ndarray, corr: bool = True, obs: bool = True) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The pairwise-complete correlation of a window (:func:`pairwise_corr`) and its observation form
    (:func:`obs_corr`), computed in one pass over the N×N entries.

    Parameters
    ----------
    x : (L, N) float array, NaN = missing.
    corr, obs : which of the two to return (at least one).

    Returns
    -------
    (corr, obs_form) : (N, N) float64 arrays, None where not asked for. With both asked for, ``obs_form`` is
    ``corr`` itself when ``corr`` has no NaN (the two are equal then).

    How (a cold step at N = 1000 within 5 ms): with ``m`` the observed cells and ``z`` =
    x with missing → 0, a pair (i, j) needs, over the rows where both are observed, the common count ``n``,
    ``Σ x_i``, ``Σ x_i²`` and ``Σ x_i x_j``. Only the last needs an (N×L)·(L×N) matrix product
    (``z.T @ z``). The others depend on column j only through its missing-value pattern: (N, P) sums over
    the P distinct patterns (:func:`mask_patterns`; a handful for listed assets on one calendar) added row
    by row in window order from +0.0 (:func:`_pattern_sums`): the order of a single-threaded OpenBLAS
    product on its full tiles, so at N a multiple of 8 these are the bits of the full products ``z.T @ m``
    (tested on OpenBLAS 0.3.x; on some builds also at other N ≤ 192); elsewhere they can differ from those
    in the last bit. With more patterns than :func:`_use_patterns` allows, the (N, N) sums come from matrix products.
    One compiled pass (:func:`_corr_from_sums`) then finishes every row into a new array, ``cov = sxy −
    (sx_ij·sx_ji)/n``, ``var = sxx − sx²/n``, ``c = cov/√(var_ij·var_ji)``, NaN where ``n < 2`` or a
    variance ≤ :data:`CORR_VAR_TOL`, clipped to [−1, 1], diagonal 1 where finite; the observation form (NaN
    → 0, diagonal 1) is written in the same pass (alone when the correlation is not asked for). ``QUANTGYM_JIT=0``
    runs the numpy formulation (:func:`_corr_from_sums_numpy` on the expanded sums): the same bits
    (tested).
    """
    if not (corr or obs):
        raise ValueError("corr_and_obs: ask for corr, obs or both")
    x = np.asarray(x, dtype=np.float64)
    m = np.isfinite(x)
    z = np.where(m, x, 0.0)
    n_cols = x.shape[1]
    if n_cols == 0:
        e = np.empty((0, 0))
        return (e if corr else None), (e if obs else None)
    jit = jit_enabled()
    pid, pats = mask_patterns(m)
    patterns = _use_patterns(pats.shape[1], n_cols)
    if patterns:
        cnt = pats.T @ pats  # common counts of two patterns (integers: exact)
        sx, sxx = _pattern_sums(z, pats) if jit else _pattern_sums_numpy(z, pats)
    else:
        pid = np.arange(n_cols, dtype=np.int64)
        mf = m.astype(np.float64)
        cnt, sx, sxx = mf.T @ mf, z.T @ mf, (z * z).T @ mf
    sxy = z.T @ z  # symmetric (numpy computes zᵀz with a symmetric rank-k update and mirrors it)
    if not jit:
        c = _corr_from_sums_numpy(cnt[pid][:, pid], sx[:, pid], sxx[:, pid], sxy)
        o = None if not obs else c if corr and not np.isnan(c).any() else obs_corr(c)
        return (c if corr else None), o
    with np.errstate(invalid="ignore", divide="ignore"):
        var = sxx - (sx * sx) / (cnt[pid] if patterns else cnt)  # (N, P): column i over the rows of pattern p
    # both asked for and some entry can be NaN (fewer than 2 common rows, a zero variance): a second array
    two = corr and obs and ((cnt < 2).any() or not bool((var > CORR_VAR_TOL).all()))
    out_obs = np.empty((n_cols, n_cols) if two else (0, 0))
    mode = 0 if not obs else 1 if not corr else 2
    res = np.empty((n_cols, n_cols))
    n_nan = _corr_from_sums(cnt, pid, sx, np.ascontiguousarray(sx.T), var, np.ascontiguousarray(var.T), sxy, res,
                            out_obs, mode)
    if not obs:
        return res, None
    if not corr:
        return None, res
    if two:
        return res, out_obs
    return res, (res if n_nan == 0 else obs_corr(res))  # a NaN not foreseen (an overflow): the numpy form


def _pattern_sums_numpy(z: np.ndarray, pats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The numpy form of :func:`_pattern_sums` (the reference; run when ``QUANTGYM_JIT=0``)."""
    sx = np.zeros((z.shape[1], pats.shape[1]))
    sxx = np.zeros_like(sx)
    for v, w in zip(z, pats):
        sx += v[:, None] * w[None, :]
        sxx += (v * v)[:, None] * w[None, :]
    return sx, sxx


@njit
def _pattern_sums(z, pats):  # pragma: no cover - compiled; the interpreted twin is the numpy form
    """(N, P) sums ``sx[i, p] = Σ_l z[l, i]·pats[l, p]`` and ``sxx[i, p] = Σ_l (z[l, i]²)·pats[l, p]``, added
    row by row in window order from +0.0 (:func:`corr_and_obs`). ``z`` (L, N) with missing → 0, ``pats``
    (L, P) 0/1."""
    n_rows, n = z.shape
    n_pat = pats.shape[1]
    sx = np.zeros((n_pat, n))  # (P, N) while summing: the inner loop runs along a row of z
    sxx = np.zeros((n_pat, n))
    for r in range(n_rows):
        zr = z[r]
        for p in range(n_pat):
            w = pats[r, p]
            a = sx[p]
            b = sxx[p]
            for i in range(n):
                v = zr[i]
                a[i] += v * w
                b[i] += (v * v) * w
    return np.ascontiguousarray(sx.T), np.ascontiguousarray(sxx.T)


@njit(error_model="numpy", inline="always")
def _corr_entry(s, a, b, n, vi, vj, tol, bad):  # pragma: no cover - compiled
    """One entry of :func:`_corr_from_sums`: ``(s − (a·b)/n) / √(vi·vj)``, ``bad`` unless ``vi, vj > tol``
    and ``n ≥ 2``, clipped to [−1, 1] (branch-free: selects)."""
    c = (s - (a * b) / n) / np.sqrt(vi * vj)
    ok = (vi > tol) & (vj > tol) & (n >= 2.0)
    c = c if ok else bad
    c = -1.0 if c < -1.0 else c
    return 1.0 if c > 1.0 else c


@njit(error_model="numpy")
def _corr_row(s_row, a, b_row, n, vi, w_row, tol, bad, out):  # pragma: no cover - compiled
    """Row i of :func:`_corr_from_sums` against the columns of one pattern (``a``, ``n``, ``vi`` that
    pattern's values for column i): ``out[j] = _corr_entry(s_row[j], a, b_row[j], n, vi, w_row[j])``. A
    loop the compiler vectorises, as long as ``out`` is not one of the inputs (in place, the vectorised
    loop's overlap check fails and the scalar loop runs, several times slower)."""
    for j in range(out.shape[0]):
        out[j] = _corr_entry(s_row[j], a, b_row[j], n, vi, w_row[j], tol, bad)


@njit(error_model="numpy")
def _corr_row_full(s_row, a_row, b_row, n_row, v_row, w_row, tol, bad, out):  # pragma: no cover - compiled
    """:func:`_corr_row` with a pattern per column (the full (N, N) sums)."""
    for j in range(out.shape[0]):
        out[j] = _corr_entry(s_row[j], a_row[j], b_row[j], n_row[j], v_row[j], w_row[j], tol, bad)


@njit(error_model="numpy")
def _corr_from_sums(cnt, pid, sx, sx_t, var, var_t, sxy, out, obs, mode):  # pragma: no cover - compiled; the interpreted twin is the numpy form
    """Compiled finish of :func:`corr_and_obs`: fills ``out`` (N, N) and returns the number of NaN
    correlations (mode 2).

    ``pid`` (N,) the pattern of each column, ``cnt`` (P, P) common counts of two patterns, ``sx`` (N, P)
    the sums of column i over the rows of pattern p, ``var`` (N, P) its variance there (``sxx −
    sx²/cnt[pid]``), ``sx_t``, ``var_t`` their C-contiguous transposes, ``sxy`` (N, N) C-contiguous cross
    products; with ``pid = arange(N)`` the sums are the full (N, N) ones. ``mode`` 0: ``out`` gets the
    correlations; 1: their observation form (NaN → 0, diagonal 1); 2: the correlations, and their
    observation form is also written to ``obs`` (N, N) unless ``obs`` is (0, 0). Entry (i, j) is the
    arithmetic of :func:`_corr_from_sums_numpy` in its order, ``c = (sxy_ij − (sx_ij·sx_ji)/n) /
    √(var_ij·var_ji)`` (:func:`_corr_entry`), a row at a time: one vectorised loop against the most
    common pattern's values (:func:`_corr_row`), then the columns of the other patterns one by one; a
    column with fewer than 2 observations (an unavailable asset) is NaN throughout, without arithmetic."""
    k = sxy.shape[0]
    n_pat = cnt.shape[0]
    tol = 1e-14  # CORR_VAR_TOL (a global would be frozen into the compiled cache)
    as_obs = mode == 1
    bad = 0.0 if as_obs else np.nan
    write_obs = mode == 2 and obs.shape[0] > 0
    n_nan = 0
    full = n_pat == k and (pid == np.arange(k)).all()  # the full (N, N) sums: a pattern per column
    counts = np.zeros(n_pat, np.int64)
    for j in range(k):
        counts[pid[j]] += 1
    p0 = np.argmax(counts)
    dead_pat = np.zeros(n_pat, np.bool_)  # fewer than 2 observations: every correlation is NaN
    for p in range(n_pat):
        dead_pat[p] = cnt[p, p] < 2.0
    dead = np.nonzero(dead_pat[pid])[0]
    live_others = np.nonzero((pid != p0) & ~dead_pat[pid])[0]
    for i in range(k):
        pi = pid[i]
        o_row = out[i]
        s_row = sxy[i]
        if dead_pat[pi]:
            o_row[:] = bad
        elif full:
            _corr_row_full(s_row, sx[i], sx_t[i], cnt[i], var[i], var_t[i], tol, bad, o_row)
        else:
            _corr_row(s_row, sx[i, p0], sx_t[pi], cnt[pi, p0], var[i, p0], var_t[pi], tol, bad, o_row)
            for j in live_others:
                pj = pid[j]
                o_row[j] = _corr_entry(s_row[j], sx[i, pj], sx_t[pi, j], cnt[pi, pj], var[i, pj], var_t[pi, j], tol,
                                       bad)
            for j in dead:
                o_row[j] = bad
        d = o_row[i]
        o_row[i] = 1.0 if as_obs or d == d else np.nan  # the diagonal: 1 where finite (the observation: 1)
        if mode == 2:
            nan_count = 0
            if write_obs:
                ob = obs[i]
                for j in range(k):
                    c = o_row[j]
                    nan = c != c
                    nan_count += nan
                    ob[j] = 0.0 if nan else c
                ob[i] = 1.0
            else:
                for j in range(k):
                    nan_count += o_row[j] != o_row[j]
            n_nan += nan_count
    return n_nan


def _corr_from_sums_numpy(n, sx, sxx, sxy):
    """The numpy form of :func:`_corr_from_sums` on full (N, N) sums (the reference; run when ``QUANTGYM_JIT=0``)."""
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


def _window_stats_numpy(win: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column of a return window (L', N), NaN = missing: the growth ``Π (1 + r)``, the count of
    returns and the sum of squared deviations from their mean (missing returns count as 0 in the growth
    and are left out of the rest). The reference of :func:`_window_stats` (run when ``QUANTGYM_JIT=0``)."""
    fin = np.isfinite(win)
    wz = np.where(fin, win, 0.0)
    growth = np.prod(1.0 + wz, axis=0)
    cnt = fin.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = wz.sum(axis=0) / cnt
        sq = (np.where(fin, (win - mean) ** 2, 0.0)).sum(axis=0)
    return growth, cnt, sq


@njit(error_model="numpy")
def _window_stats(win):  # pragma: no cover - compiled; the interpreted twin is the numpy form
    """:func:`_window_stats_numpy` in one compiled pass per statistic: numpy reduces a C-contiguous window
    over its rows row by row from the first, so these loops add and multiply in its order (the same bits,
    tested)."""
    n_rows, n = win.shape
    growth = np.ones(n)
    cnt = np.zeros(n, np.int64)
    total = np.zeros(n)
    for r in range(n_rows):
        for i in range(n):
            v = win[r, i]
            f = np.isfinite(v)
            w = v if f else 0.0
            growth[i] = growth[i] * (1.0 + w) if r > 0 else 1.0 + w
            cnt[i] += f
            total[i] = total[i] + w if r > 0 else w
    mean = total / cnt
    sq = np.zeros(n)
    for r in range(n_rows):
        for i in range(n):
            v = win[r, i]
            d = (v - mean[i]) ** 2 if np.isfinite(v) else 0.0
            sq[i] = sq[i] + d if r > 0 else d
    return growth, cnt, sq


class RowArrays:
    """Least-recently-used cache of large per-row arrays within a byte budget (speed only).

    ``get(t)`` returns the dict ``name -> array`` of row ``t`` (or None) and marks the row as used;
    ``put(t, name, array)`` stores a read-only array and drops the least recently used other rows while
    the total exceeds ``max_bytes`` (the row being filled is always kept; an array stored under two
    names counts once).
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
        before = self._row_bytes(row)
        row[name] = value
        self.nbytes += self._row_bytes(row) - before
        while self.nbytes > self.max_bytes and len(self.rows) > 1:
            first = next(iter(self.rows))
            if first == t:
                self.rows.move_to_end(t)
                continue
            self.nbytes -= self._row_bytes(self.rows.pop(first))
        return value

    @staticmethod
    def _row_bytes(row: dict[str, np.ndarray]) -> int:
        """Bytes of a row's arrays, an array stored under two names counted once."""
        return sum({id(v): v.nbytes for v in row.values()}.values())

    def clear(self) -> None:
        self.rows.clear()
        self.nbytes = 0


def read_only(value: Any) -> Any:
    """``value`` with its arrays (itself, or the items of a tuple) made read-only; returned as is."""
    for v in value if isinstance(value, tuple) else (value,):
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
    return value


class RowCache(dict):
    """The cache of one decision row of a :class:`MarketView` (:meth:`MarketView.row_cache`), speed only.

    A plain dict to read (``cache.get(key)``): the snapshot's parts under string keys (``"available"``,
    ``"price"``, ``"trailing_return"``, ...) and what consumers derived from the row. A consumer stores
    a value that depends on the row and the config only with :meth:`value` (compute once) or :meth:`put`,
    under a key of its own (a tuple naming the consumer and every setting the value depends on, e.g.
    ``("w_star", oracle, view_scale, signal_threshold, ew_mu)``); arrays are stored read-only. The cache is
    shared by every env over the same data object and window config, so a stored value must be the one
    an uncached computation gives.
    """

    __slots__ = ()

    def put(self, key: Any, value: Any) -> Any:
        """Store ``value`` under ``key`` (its arrays made read-only) and return it."""
        self[key] = read_only(value)
        return value

    def value(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The value under ``key``; on a miss ``compute()`` stored with :meth:`put`."""
        v = self.get(key)
        if v is None:
            v = self.put(key, compute())
        return v


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
                     f"prices.parquet and a row to assets.csv (and to universe=[...] if you pass one), or set "
                     f"{config_name}(regime_ticker=...) to one of its equities ({', '.join(eq[:8]) + (', ...' if len(eq) > 8 else '') if eq else 'none'})")


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

    def row_cache(self, t: int) -> RowCache:
        """The :class:`RowCache` of decision row ``t``: the O(N) row-dependent parts of its snapshot (cached per
        dataset, read-only) and the values consumers keep with them.

        Everything in a snapshot except the portfolio state (weights, NAV, news) depends on the
        row and the config only, so it is computed once per ``(dataset, config, row)`` and shared
        by every env over the same :class:`~quantgym.envs.portbench.data.PortBenchData` (speed only; the values
        are those of the uncached computation). Consumers keep values derived from the row in it
        (:meth:`RowCache.value`: the lookback oracle, the S1/S2 truth, the observation template, the prompt
        blocks). The O(L·N) and O(N²) arrays (window returns, correlations) are not in it: :meth:`row_array`
        keeps them in a byte-bounded cache.
        """
        cache = self._row_cache
        parts = cache.get(t)
        if parts is not None:
            return parts
        parts = RowCache(self._compute_row_parts(int(t)))
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
        growth, cnt, sq = (_window_stats if jit_enabled() else _window_stats_numpy)(win)
        trailing = growth - 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            var = sq / (cnt - 1)
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
        ``"corr"`` stores ``"obs_corr"`` too (one pass, :func:`corr_and_obs`); ``"obs_corr"`` asked for first
        computes the observation form alone (a raw step never reads ``corr``).
        """
        row = self._arrays.get(t)
        if row is not None:
            v = row.get(name)
            if v is not None:
                return v
        if name == "returns":
            v = self.window_returns(self.row_cache(t))
        elif name == "returns0":  # missing = 0 (the S5 risk report's window)
            v = np.nan_to_num(self.row_array(t, "returns"), nan=0.0)
        elif name in ("corr", "obs_corr"):
            from quantgym.envs.portbench.optimize import _single_thread_blas  # lazy: optimize imports scipy

            # "corr": both forms in one pass (the observation form is corr itself when corr has no NaN);
            # "obs_corr" alone: only the observation form (the raw step's default observation)
            rets = self.row_array(t, "returns")
            with _single_thread_blas():
                corr, obs = corr_and_obs(rets, corr=name == "corr", obs=True)
            if corr is not None:
                self._arrays.put(t, "obs_corr", obs)
            v = corr if corr is not None else obs
        elif name in ("obs_returns", "obs_mask"):
            ret, mask = obs_window(self.row_array(t, "returns"), self.config.lookback)
            self._arrays.put(t, "obs_mask" if name == "obs_returns" else "obs_returns",
                             mask if name == "obs_returns" else ret)
            v = ret if name == "obs_returns" else mask
        else:
            raise KeyError(f"unknown row array {name!r}")
        return self._arrays.put(t, name, v)

    def class_corr(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(intra (6,), inter (6, 6)) class correlations of decision row ``t`` (:func:`class_correlations`),
        cached with the row parts."""
        parts = self.row_cache(t)
        cc = parts.get("class_corr")
        if cc is None:
            from quantgym.envs.portbench.optimize import _single_thread_blas  # lazy: optimize imports scipy

            corr = self.row_array(t, "corr")
            with _single_thread_blas():
                cc = class_correlations(corr, self.class_id, parts["available"])
            parts.put("class_corr", cc)
        return cc

    def snapshot(self, t: int, current_weights: np.ndarray, nav: float, news_text: str = "") -> MarketSnapshot:
        """Build the snapshot of decision row ``t`` from rows ``≤ t`` (``≤ t − 1`` with ``as_of='previous_close'``).

        Row-dependent arrays come from a per-dataset cache and are read-only (copy before modifying); ``returns``,
        ``corr``, ``intra`` and ``inter`` are computed when first read.
        """
        t = int(t)
        p = self.row_cache(t)
        fields = p.get("snapshot_fields")
        if fields is None:  # the row's constant fields, built once (speed only: no dataclass __init__ per step)
            fields = p.put("snapshot_fields", MarketSnapshot(
                decision_date=p["decision_date"], t=t, tickers=self.tickers, classes=self.classes,
                class_id=self.class_id, available=p["available"], window_dates=p["window_dates"], returns=LAZY,
                price=p["price"], trailing_return=p["trailing_return"], ann_vol=p["ann_vol"], corr=LAZY, intra=LAZY,
                inter=LAZY, macro=p["macro"], macro_mask=p["macro_mask"], regime=p["regime"], current_weights=None,
                nav=0.0,
            ).__dict__)
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
