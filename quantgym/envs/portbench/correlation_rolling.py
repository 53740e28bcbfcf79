"""The observation form of the correlation over a pass of consecutive data rows of a wide universe, from
cross products rolled along the rows (speed only: within 1e-12 of :func:`~.correlation.corr_and_obs`, tested).

A daily pass at N = 1000 asks for an (N, N) correlation per step. The direct form costs an (N×L)·(L×N)
product per row; here the cross products of a row's window are those of the previous row plus the rows that
entered and minus those that left (:class:`RollingCross`), and one compiled pass (:func:`_rolled_obs_corr`)
applies that update to each row of the cross products and writes that row of the observation while it is in
cache. Used by :meth:`~.market.MarketView._fill_rows` at N ≥ :data:`ROLLING_MIN_N`.
"""

from __future__ import annotations

import contextlib
from typing import Callable, ContextManager

import numpy as np

from quantgym.envs.portbench.correlation import _window_sums
from quantgym.jit import njit

#: universes at least this wide get the observation form of the correlation in a pass over consecutive rows
#: from rolling cross products (speed only, within 1e-12 of :func:`~.correlation.corr_and_obs`)
ROLLING_MIN_N = 256
#: a rolling chain restarts from a direct product at every data row that is a multiple of this (a jump into
#: the chain applies at most 2·(ROLLING_ANCHOR − 1) updates for daily windows)
ROLLING_ANCHOR = 32
#: up to this many updates are applied one pass over the matrix each, more row by row (speed only)
_PASSES_MAX_OPS = 4


class RollingCross:
    """The cross products ``S_d = Σ_{r ∈ [lo_d, hi_d)} y_r y_rᵀ`` of the return windows of data rows ``d``
    (``y`` = returns with missing → 0), for windows that slide forward (``lo``, ``hi`` non-decreasing).

    Parameters
    ----------
    y : (T, N) float64 returns with missing → 0 (C-contiguous); ``lo``, ``hi`` : (T,) int64 window rows of
    each data row; ``anchor`` : :data:`ROLLING_ANCHOR`; ``blas`` : a context manager factory entered around
    the anchor's product (a BLAS thread limit), none by default.

    ``S_d`` is the product ``yᵀy`` of the window at the chain's anchor ``a = d − d mod``
    :data:`ROLLING_ANCHOR`, then, for each data row ``e = a+1 … d`` in turn, plus ``y_r y_rᵀ`` of the rows
    entering (``[hi_{e−1}, hi_e)``) and minus those of the rows leaving (``[lo_{e−1}, lo_e)``), each entry
    in that order. So ``S_d`` is a function of ``d`` alone (the same bits whatever rows were visited
    before), and a pass over consecutive rows pays one rank-2 update per row (O(N²) memory traffic) instead
    of an (N×L)·(L×N) product. ``S`` is symmetric bit for bit (numpy computes ``yᵀy`` of one buffer with
    BLAS ``syrk`` and mirrors it; each update adds ``(±z_i)·z_j``, whose factors commute). Rounding: each
    update adds one rounding of a product of returns (about 1e-4 each for daily returns) to sums of L of
    them, so the correlations stay within 1e-12 of the direct product's (tested). :meth:`ops` advances the
    chain; the updates are applied by the caller's compiled pass (:func:`_rolled_obs_corr`, or
    :func:`_apply_updates` alone).
    """

    def __init__(self, y: np.ndarray, lo: np.ndarray, hi: np.ndarray, anchor: int = ROLLING_ANCHOR,
                 blas: Callable[[], ContextManager] = contextlib.nullcontext):
        if (np.diff(lo) < 0).any() or (np.diff(hi) < 0).any():
            raise ValueError("RollingCross: the windows must slide forward (lo, hi non-decreasing)")
        self.y, self.lo, self.hi, self.anchor, self.blas = y, lo, hi, int(anchor), blas
        self.cross: np.ndarray | None = None
        self.row = -1  # the data row whose S the chain holds once the pending updates are applied

    def __getstate__(self) -> dict:  # the chain is a cache: a copy starts without it
        return {**self.__dict__, "cross": None, "row": -1}

    def ops(self, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Advance the chain to data row ``d``. Returns ``(S, z, sign)``: ``S`` (N, N) the chain's cross
        products (the anchor's product when the chain restarted), and the updates still to apply to reach
        ``S_d``: rows ``z`` (M, N) of returns with missing → 0 and their signs (M,) (+1 entering, −1 leaving),
        in order. The caller must apply them to every entry of ``S`` before the next call."""
        n = self.y.shape[1]
        a = d - d % self.anchor
        if self.cross is None or not (a <= self.row <= d):
            if self.cross is None:
                self.cross = np.empty((n, n))
            y = self.y[self.lo[a]:self.hi[a]]
            with self.blas():
                np.matmul(y.T, y, out=self.cross)
            self.row = a
        rows: list[int] = []
        sign: list[float] = []
        lo, hi = self.lo, self.hi
        for e in range(self.row + 1, d + 1):
            rows += range(int(hi[e - 1]), int(hi[e]))
            sign += [1.0] * int(hi[e] - hi[e - 1])
            rows += range(int(lo[e - 1]), int(lo[e]))
            sign += [-1.0] * int(lo[e] - lo[e - 1])
        self.row = d
        z = self.y[rows] if rows else np.empty((0, n))
        return self.cross, z, np.asarray(sign, np.float64)


def obs_corr_rolled(win: np.ndarray, z: np.ndarray, n_r: int, cross: RollingCross, d: int,
                    out: np.ndarray) -> bool:
    """The observation form of the correlation of one window (``win[:n_r]``, data row ``d``'s) into ``out``
    (N, N), with the cross products from ``cross`` (:class:`RollingCross`, advanced to ``d``), within 1e-12 of
    ``corr_and_obs(win[:n_r], corr=False)[1]`` (tested). False (``out`` unwritten, the chain advanced) when
    the window has more missing-value patterns than :func:`~.correlation._use_patterns` allows: call
    :func:`~.correlation.corr_and_obs`.

    How: the window's sums but the cross products (:func:`~.correlation._window_sums`), then one compiled
    pass (:func:`_rolled_obs_corr`) that applies the chain's pending updates to a row of ``S`` and finishes
    that row, ``c = (S_ij − (sx_ij·sx_ji)·(1/n))·(r_ij·r_ji)`` with ``r`` = 1/√var precomputed per column and
    pattern (no division or square root per entry)."""
    ok, cnt, pid, sx, var = _window_sums(win, z, n_r, max(16, win.shape[1] // 16))
    s, zr, sign = cross.ops(d)
    if not ok:
        _apply_updates(s, zr, sign)
        return False
    _rolled_obs_corr(s, zr, sign, cnt, pid, sx, np.ascontiguousarray(sx.T), var, out)
    return True


@njit(error_model="numpy")
def _axpy(c, x, y):  # pragma: no cover - compiled
    """``y += c·x`` (a vectorised loop: ``y`` is not ``x``)."""
    for j in range(y.shape[0]):
        y[j] += c * x[j]


@njit(error_model="numpy")
def _apply_updates(s, zr, sign):  # pragma: no cover - compiled
    """``s += sign[m]·zr[m]ᵀ·zr[m]`` for each ``m`` in order, each entry ``s_ij += (sign[m]·zr[m, i])·zr[m, j]``:
    up to :data:`_PASSES_MAX_OPS` updates one pass over the matrix each (memory-bound), more row by row (every
    update of a row while it is in cache: a jump into a chain); the same order per entry either way."""
    k = s.shape[0]
    n_ops = zr.shape[0]
    if n_ops <= _PASSES_MAX_OPS:
        for m in range(n_ops):
            z_m = zr[m]
            for i in range(k):
                _axpy(sign[m] * z_m[i], z_m, s[i])
    else:
        for i in range(k):
            s_row = s[i]
            for m in range(n_ops):
                _axpy(sign[m] * zr[m, i], zr[m], s_row)


@njit(error_model="numpy", inline="always")
def _entry(v, a, b, inv_n, ri, rj):  # pragma: no cover - compiled
    """One entry of the observation form from its cross product ``v``: ``(v − (a·b)·inv_n)·(ri·rj)`` clipped
    to [−1, 1] (selects: the loops that call it stay vectorised)."""
    c = (v - (a * b) * inv_n) * (ri * rj)
    c = -1.0 if c < -1.0 else c
    return 1.0 if c > 1.0 else c


@njit(error_model="numpy")
def _finish_rows(s1, s2, c, z0, z1, a1, a2, b_row, inv_n, r1, r2, r_row, o1, o2, fused, two):  # pragma: no cover
    """Rows ``o1`` (and, with ``two``, ``o2``) of the observation form against the columns of one pattern
    (``b_row``, ``r_row``: that pattern's sums and 1/√var per column; ``a``, ``inv_n``, ``r``: the row's), from
    cross-product rows ``s1``, ``s2``; with ``fused``, each entry of ``s1`` first gets ``+ c[0]·z0 + c[1]·z1``
    (``s2``: ``c[2]``, ``c[3]``), stored. Two rows in one loop load the shared vectors once per column (about
    a fifth faster than two loops at N = 1000). A vectorised loop: the outputs are none of the inputs."""
    for j in range(o1.shape[0]):
        v = s1[j]
        if fused:
            v = v + c[0] * z0[j]
            v = v + c[1] * z1[j]
            s1[j] = v
        o1[j] = _entry(v, a1, b_row[j], inv_n, r1, r_row[j])
        if two:  # the same for the second row (unrolled by hand: one loop over j for both)
            w = s2[j]
            if fused:
                w = w + c[2] * z0[j]
                w = w + c[3] * z1[j]
                s2[j] = w
            o2[j] = _entry(w, a2, b_row[j], inv_n, r2, r_row[j])


@njit(error_model="numpy")
def _rolled_obs_corr(s, zr, sign, cnt, pid, sx, sx_t, var, out):  # pragma: no cover - compiled
    """:func:`obs_corr_rolled`'s pass: the pending updates ``(zr, sign)`` applied to ``s`` (:func:`_apply_updates`;
    with exactly two, a daily step, each row's in the loop that finishes it), and the observation form into
    ``out``: entry ``(i, j)`` with patterns ``p = pid[i]``, ``q = pid[j]`` is ``clip((s_ij − (sx[i, q]·sx[j,
    p])·(1/n))·(r[i, q]·r[j, p]), −1, 1)``, ``n = cnt[p, q]``, ``r`` = 1/√var (0 where the variance is ≤
    :data:`~.correlation.CORR_VAR_TOL`), 0 where ``n < 2``; diagonal 1. Symmetric bit for bit (``s`` is, and
    each product's factors commute).

    Order: first the rows of the columns outside the most common pattern ``p0`` (a vectorised loop against
    ``p0``'s columns, then the other columns one by one); then ``p0``'s rows two at a time
    (:func:`_finish_rows`), whose entries in the other columns are read from the rows just finished (the
    same bits, by symmetry) instead of being computed one by one."""
    k = s.shape[0]
    fused = zr.shape[0] == 2  # a step of a daily pass: both updates of a row in the loop that finishes it
    if not fused:
        _apply_updates(s, zr, sign)
    tol = 1e-14  # CORR_VAR_TOL
    n_pat = cnt.shape[0]
    counts = np.zeros(n_pat, np.int64)
    for j in range(k):
        counts[pid[j]] += 1
    p0 = np.argmax(counts)
    inv_t = np.empty((n_pat, k))  # (p, i): 1/√var of column i over the rows of pattern p (0: a bad variance)
    for p in range(n_pat):
        r_p = inv_t[p]
        for i in range(k):
            v = var[i, p]
            r_p[i] = 1.0 / np.sqrt(v) if v > tol else 0.0
    others = np.nonzero(pid != p0)[0]
    main = np.nonzero(pid == p0)[0]
    inv_n = np.zeros(n_pat)  # row i: 1/n, 0 where n < 2
    scale = np.zeros(n_pat)  # row i: r[i, q], 0 where n < 2
    c = np.zeros(4)
    unused = np.empty(0)  # z0, z1 when not fused: _finish_rows reads them only when fused
    z0 = zr[0] if fused else unused
    z1 = zr[1] if fused else unused
    for i in others:
        s_row = s[i]
        o_row = out[i]
        pi = pid[i]
        for q in range(n_pat):
            n = cnt[pi, q]
            live = n >= 2.0
            inv_n[q] = 1.0 / n if live else 0.0
            scale[q] = inv_t[q, i] if live else 0.0
        if fused:
            c[0] = sign[0] * z0[i]
            c[1] = sign[1] * z1[i]
        b_row = sx_t[pi]
        r_row = inv_t[pi]
        _finish_rows(s_row, s_row, c, z0, z1, sx[i, p0], 0.0, b_row, inv_n[p0], scale[p0], 0.0, r_row, o_row, o_row,
                     fused, False)
        for j in others:
            q = pid[j]
            o_row[j] = _entry(s_row[j], sx[i, q], b_row[j], inv_n[q], scale[q], r_row[j])
        o_row[i] = 1.0
    n0 = cnt[p0, p0]
    live = n0 >= 2.0
    inv_n0 = 1.0 / n0 if live else 0.0
    b_row = sx_t[p0]
    r_row = inv_t[p0]
    m = main.shape[0]
    for t in range(0, m, 2):
        two = t + 1 < m
        i = main[t]
        i2 = main[t + 1] if two else i
        if fused:
            c[0] = sign[0] * z0[i]
            c[1] = sign[1] * z1[i]
            c[2] = sign[0] * z0[i2]
            c[3] = sign[1] * z1[i2]
        o1 = out[i]
        o2 = out[i2]
        _finish_rows(s[i], s[i2], c, z0, z1, sx[i, p0], sx[i2, p0], b_row, inv_n0, r_row[i] if live else 0.0,
                     r_row[i2] if live else 0.0, r_row, o1, o2, fused, two)
        for j in others:  # entry (j, i) of a row finished above
            o1[j] = out[j, i]
            o2[j] = out[j, i2]
        o1[i] = 1.0
        o2[i2] = 1.0
