"""Correlations of a return window (spec §1.6, §11.2): the pairwise-complete Pearson correlation
(:func:`pairwise_corr`), its observation form (:func:`obs_corr`), both in one pass (:func:`corr_and_obs`, the
compiled kernels with their numpy twins), and the class-level averages (:func:`class_correlations`)."""

from __future__ import annotations

import numpy as np

from quantgym.envs.portbench.universe import ASSET_CLASSES
from quantgym.jit import jit_enabled, njit


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


def obs_corr_rows(win: np.ndarray, z: np.ndarray, n_rows: np.ndarray, sxy: np.ndarray | None = None,
                  out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The observation form of the correlation (:func:`corr_and_obs` with ``corr=False``) of a batch of windows.

    Parameters
    ----------
    win : (B, L, N) float64 windows, NaN = missing; window ``k`` is ``win[k, :n_rows[k]]``.
    z : (B, L, N) the same with missing → 0 (C-contiguous).
    n_rows : (B,) int64 rows of each window.
    sxy, out : optional (B, N, N) float64 C-contiguous arrays for the cross products (work) and the result.

    Returns
    -------
    obs : (B, N, N) float64, ``obs[k]`` = ``corr_and_obs(win[k, :n_rows[k]], corr=False)[1]``, the same bits
    (tested); left unwritten where ``todo[k]``. todo : (B,) bool, the windows with more missing-value patterns
    than :func:`_use_patterns` allows (their sums come from the matrix products: call :func:`corr_and_obs`).

    How: per window, the cross products ``z.T @ z`` as in :func:`corr_and_obs` (the same single-threaded BLAS
    call on a C-contiguous (L', N) array), then one compiled call for the whole batch (:func:`_obs_corr_rows`):
    the missing-value patterns, their sums (:func:`_pattern_sums`) and the finish (:func:`_corr_from_sums`),
    each the arithmetic of :func:`corr_and_obs` in its order. Compiled only (no ``QUANTGYM_JIT=0`` form: the
    caller uses :func:`corr_and_obs` then).
    """
    n_batch, _, n = win.shape
    sxy = np.empty((n_batch, n, n)) if sxy is None else sxy
    for k in range(n_batch):
        zk = z[k, : n_rows[k]]
        np.matmul(zk.T, zk, out=sxy[k])
    out = np.empty_like(sxy) if out is None else out  # not in place (see _corr_row)
    todo = np.zeros(n_batch, np.bool_)
    _obs_corr_rows(win, z, n_rows, sxy, out, todo)
    return out, todo


@njit(error_model="numpy")
def _obs_corr_rows(win, z, n_rows, sxy, out, todo):  # pragma: no cover - compiled
    """:func:`obs_corr_rows`' compiled part: for each window ``k``, its sums (:func:`_window_sums`), then, unless
    it has more than ``max(16, N/16)`` missing-value patterns (``todo[k]`` set), the observation form into
    ``out[k]`` (:func:`_corr_from_sums`, mode 1), as in :func:`corr_and_obs`."""
    n_batch = win.shape[0]
    n = win.shape[2]
    max_pat = max(16, n // 16)
    no_obs = np.empty((0, 0))
    for k in range(n_batch):
        ok, cnt, pid, sx, var = _window_sums(win[k], z[k], n_rows[k], max_pat)
        if not ok:
            todo[k] = True
            continue
        _corr_from_sums(cnt, pid, sx, np.ascontiguousarray(sx.T), var, np.ascontiguousarray(var.T), sxy[k], out[k],
                        no_obs, 1)


@njit(error_model="numpy")
def _window_sums(win, z, n_r, max_pat):  # pragma: no cover - compiled
    """The sums of one window but its cross products, as in :func:`corr_and_obs`: the missing-value patterns of
    ``win[:n_r]`` (columns with the same observed rows, numbered in order of first appearance, which changes no
    value), their common counts ``cnt`` (P, P), the pattern of each column ``pid`` (N,), the pattern sums ``sx``
    (N, P) (:func:`_pattern_sums` of ``z[:n_r]``) and the variances ``var`` = ``sxx − sx²/cnt[pid]`` (N, P).
    ``ok`` is False (and the rest empty) past ``max_pat`` patterns."""
    n = win.shape[1]
    words = max(1, (n_r + 63) // 64)
    key = np.zeros((n, words), np.uint64)
    for r in range(n_r):
        w = r // 64
        bit = np.uint64(1) << np.uint64(r % 64)
        for i in range(n):
            if np.isfinite(win[r, i]):
                key[i, w] |= bit
    pid = np.empty(n, np.int64)
    first = np.empty(max_pat + 1, np.int64)
    n_pat = 0
    for i in range(n):
        p = -1
        for q in range(n_pat):
            same = True
            for w in range(words):
                if key[first[q], w] != key[i, w]:
                    same = False
                    break
            if same:
                p = q
                break
        if p < 0:
            if n_pat == max_pat:
                n_pat += 1
                break
            first[n_pat] = i
            p = n_pat
            n_pat += 1
        pid[i] = p
    if n_pat > max_pat:
        e = np.empty((0, 0))
        return False, e, pid, e, e
    pats = np.zeros((n_r, n_pat))
    for r in range(n_r):
        w = r // 64
        bit = np.uint64(1) << np.uint64(r % 64)
        for p in range(n_pat):
            if key[first[p], w] & bit:
                pats[r, p] = 1.0
    cnt = np.zeros((n_pat, n_pat))  # common counts (integers: exact in any order)
    for p in range(n_pat):
        for q in range(n_pat):
            c = 0.0
            for r in range(n_r):
                c += pats[r, p] * pats[r, q]
            cnt[p, q] = c
    sx, sxx = _pattern_sums(z[:n_r], pats)
    var = np.empty((n, n_pat))
    for i in range(n):
        for p in range(n_pat):
            var[i, p] = sxx[i, p] - (sx[i, p] * sx[i, p]) / cnt[pid[i], p]
    return True, cnt, pid, sx, var


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
            if w == 0.0:  # adds ±0 to a sum that is never −0 (it starts at +0): the same bits (z is finite)
                continue
            a = sx[p]
            b = sxx[p]
            if w == 1.0:  # v·1 = v
                for i in range(n):
                    v = zr[i]
                    a[i] += v
                    b[i] += v * v
            else:
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


def obs_corr(corr: np.ndarray) -> np.ndarray:
    """Observation form of a correlation matrix (spec §11.2): NaN → 0 off the diagonal, diagonal 1, clipped
    to [−1, 1]; (N, N) float64."""
    c = np.where(np.isfinite(corr), corr, 0.0)
    np.fill_diagonal(c, 1.0)
    return np.clip(c, -1.0, 1.0)
