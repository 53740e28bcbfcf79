"""Quant-Arena metrics and the 0–100 score (spec quant_arena.md §5, §6, §10.11–§10.13).

Account metrics use the shared :mod:`quantgym.metrics` helpers where the definitions
agree (maximum drawdown with NAV_0 included, total return); the spec fixes
``N_ann = 242`` and a Sharpe **without** risk-free rate (§10.11), which is
``quantgym.metrics.sharpe(r, rf=0, periods_per_year=242)``.

Signal metrics (RankIC, IR ``A``, long-short quintile Sharpe, coverage), turnover,
the logistic score transform and feature diversity are specific to this task and
live here.

Longer than 500 lines as one job, every number of a window's result: the score (§6, §10.12–§10.13) reads the
account and signal metrics defined here, and the overfitting diagnostics reported beside it (DSR, PBO) take the
same daily NAV returns and ``n_ann``, so all of them are read against the spec in one file.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.sparse.csgraph import connected_components

from quantgym import metrics as qm
from quantgym.jit import njit, np_sum

from .account import ScoreOrder, score_order as _score_order
from .config import ArenaScoringConfig


# ---------------------------------------------------------------------- account metrics
def arr(nav: np.ndarray, n_ann: int = 242) -> float:
    """Annualised return ``(NAV_n/NAV_0)^(n_ann/n) − 1`` (spec §10.11); n = len(nav) − 1."""
    nav = np.asarray(nav, dtype=np.float64)
    n = nav.size - 1
    if n < 1 or nav[0] <= 0:
        return 0.0
    g = nav[-1] / nav[0]
    return float(g ** (n_ann / n) - 1.0) if g > 0 else -1.0


def long_sharpe(r: np.ndarray, n_ann: int = 242) -> float:
    """``SR_L = mean(r)/std(r, ddof 1)·√n_ann`` (0 if std = 0; spec §10.11)."""
    return qm.sharpe(r, rf=0.0, periods_per_year=n_ann)


def account_metrics(nav: np.ndarray, position_value: np.ndarray, bought: np.ndarray, sold: np.ndarray,
                    nav_open: np.ndarray, ref_nav: np.ndarray, n_ann: int = 242) -> dict[str, float]:
    """ARR, excess ARR, SR_L, MaxDD, exposure, turnover, volatility (spec §10.11).

    Parameters
    ----------
    nav, position_value : ndarray (n+1,)
        Close NAV and position value, D_0..D_n.
    bought, sold, nav_open : ndarray (n,)
        Traded values at fill prices and the open NAV of D_1..D_n.
    ref_nav : ndarray (n+1,)
        Market reference path from 1 at D_0.

    Returns
    -------
    dict
        ``arr, reference_arr, excess_arr, sharpe, max_drawdown (≤ 0), exposure,
        turnover, volatility, total_return, reference_total_return`` (decimals).
    """
    nav = np.asarray(nav, dtype=np.float64)
    r = nav[1:] / nav[:-1] - 1.0
    a = arr(nav, n_ann)
    ra = arr(ref_nav, n_ann)
    with np.errstate(invalid="ignore", divide="ignore"):
        expo = np.where(nav[1:] > 0, np.asarray(position_value[1:]) / nav[1:], 0.0)
        to = np.where(nav_open > 0, (np.asarray(bought) + np.asarray(sold)) / (2.0 * np.asarray(nav_open)), 0.0)
    return {
        "arr": a,
        "reference_arr": ra,
        "excess_arr": a - ra,
        "sharpe": long_sharpe(r, n_ann),
        "max_drawdown": qm.max_drawdown(r, include_start=True),
        "exposure": float(expo.mean()) if expo.size else 0.0,
        "turnover": float(to.mean()) if to.size else 0.0,
        "volatility": qm.volatility(r, n_ann),
        "total_return": float(nav[-1] / nav[0] - 1.0),
        "reference_total_return": float(ref_nav[-1] / ref_nav[0] - 1.0),
    }


def yearly_returns(dates: np.ndarray, nav: np.ndarray, ref_nav: np.ndarray) -> dict[str, dict[str, float]]:
    """Calendar-year returns of the account and the reference (feedback, §10.14).

    For each year Y of the execution days: ``return = NAV(last day of Y)/NAV(last day
    before Y) − 1`` (D_0 for the first year), the same on the reference, and the
    difference ``excess``.
    """
    out = {}
    years = np.asarray(dates).astype("datetime64[Y]").astype(np.int64) + 1970
    for y in sorted(set(years[1:].tolist())):
        idx = np.flatnonzero(years == y)
        idx = idx[idx > 0]
        a, b = idx[0] - 1, idx[-1]
        ret = float(nav[b] / nav[a] - 1.0)
        rr = float(ref_nav[b] / ref_nav[a] - 1.0)
        out[str(y)] = {"return": ret, "reference_return": rr, "excess": ret - rr}
    return out


# ---------------------------------------------------------------------- signal metrics
@njit
def _signal_days(scores: np.ndarray, labels: np.ndarray, order_s: np.ndarray, count_s: np.ndarray,
                 tie_s: np.ndarray, order_y: np.ndarray, count_y: np.ndarray, rank_y: np.ndarray, syy_y: np.ndarray, min_pairs: int,
                 quantiles: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Daily RankIC, long-short spread and quantile means from the sorted rows (spec §10.11).

    Parameters
    ----------
    scores, labels : (D, N)
    order_s, count_s, tie_s : (D, N), (D,), (D, N)
        Each row's columns with a finite score, score descending and ties in column order, in
        ``order_s[i, :count_s[i]]``, and where a score equals the one before it in that order
        (:func:`~quantgym.envs.quant_arena.account.score_order`).
    order_y, count_y, rank_y, syy_y : (D, N), (D,), (D, N), (D,)
        Each row's columns with a finite label in any ascending order of the label, in
        ``order_y[i, :count_y[i]]``; their centred average ranks among the row's finite labels and the
        sum of those ranks' squares (:func:`label_order`).

    The valid pairs (finite score and label) of a row are these orders with the other cells skipped.
    On a row where every finite label has a finite score (the valid pairs are the finite labels), the
    label ranks are ``rank_y``'s and one pass in score order gives the RankIC; otherwise a second pass in
    label order ranks the valid labels.

    Returns
    -------
    ic, ls : (D,)   NaN on days below ``min_pairs`` valid pairs (ls also where ``m // quantiles`` = 0)
    qmeans : (D, quantiles)

    Average ranks (``scipy.stats.rankdata(method="average")``) are half-integers, so the RankIC's
    centred sums of squares and products are exact in any order (and in any grouping); the means are
    numpy's (pairwise sum over the values in score order, divided by the count), so the same bits as
    ``y[:k].mean()``.
    """
    D, N = labels.shape
    ic = np.full(D, np.nan)
    ls = np.full(D, np.nan)
    qm = np.full((D, quantiles), np.nan)
    rank_s = np.empty(N)  # average descending rank of each column's score
    ys = np.empty(N)      # labels in score order
    os = np.empty(N, dtype=np.int64)  # valid columns in score order
    oy = np.empty(N, dtype=np.int64)  # valid columns in label order
    for i in range(D):
        # valid columns in score order; a group of equal scores shares the average h of its descending
        # ranks, its centred ascending rank is c − h with c = (m + 1)/2, m = count_y[i] on a full row
        c = (count_y[i] + 1) * 0.5
        sxx = sxy = gy = 0.0
        mi = 0
        first = 0
        same = False  # every score from the last valid column's to this one's equal (tie_s)
        for x in range(count_s[i]):
            j = order_s[i, x]
            same = same and tie_s[i, x] != 0
            y = labels[i, j]
            if not math.isfinite(y):
                continue
            if mi > 0 and not same:
                rx = c - (first + mi + 1) * 0.5  # the group first..mi−1 closes
                sxx += rx * rx * (mi - first)
                sxy += rx * gy
                gy = 0.0
                first = mi
            same = True
            gy += rank_y[i, j]
            os[mi] = j
            ys[mi] = y
            mi += 1
        if mi < min_pairs:
            continue
        rx = c - (first + mi + 1) * 0.5
        sxx += rx * rx * (mi - first)
        sxy += rx * gy
        syy = syy_y[i]
        if mi < count_y[i]:  # some finite labels lack a score: rank the valid pairs' labels among themselves
            first = 0
            for z in range(1, mi + 1):
                if z == mi or scores[i, os[z]] != scores[i, os[z - 1]]:
                    h = (first + z + 1) * 0.5
                    for w in range(first, z):
                        rank_s[os[w]] = h
                    first = z
            c = (mi + 1) * 0.5
            sxx = syy = sxy = 0.0
            my = 0
            first = 0
            for x in range(count_y[i] + 1):  # valid columns in label order, one group of equal labels at a time
                j = -1
                if x < count_y[i]:
                    j = order_y[i, x]
                    if not math.isfinite(scores[i, j]):
                        continue
                if my > 0 and (j < 0 or labels[i, j] != labels[i, oy[my - 1]]):
                    ry = (first + my + 1) * 0.5 - c  # the group first..my−1 closes
                    for z in range(first, my):
                        rx = ((mi + 1) - rank_s[oy[z]]) - c
                        sxx += rx * rx
                        syy += ry * ry
                        sxy += rx * ry
                    first = my
                if j >= 0:
                    oy[my] = j
                    my += 1
        den = math.sqrt(sxx * syy)
        ic[i] = sxy / den if den > 0 else 0.0
        size, extra = mi // quantiles, mi % quantiles
        lo = 0
        top = bottom = 0.0  # the sums of the first and last groups (the last is always the bottom k)
        for g in range(quantiles):
            hi = lo + size + (1 if g < extra else 0)
            if hi > lo:
                tot = np_sum(ys, lo, hi - lo)
                qm[i, g] = tot / (hi - lo)
                if g == 0:
                    top = tot
                bottom = tot
            lo = hi
        k = size
        if k > 0:  # long-short: the top k and bottom k (the quantile groups' sums where they are those rows)
            ls[i] = (top if extra == 0 else np_sum(ys, 0, k)) / k - bottom / k
    return ic, ls, qm


def label_order(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each row's finite labels ranked: ``(order (D, N), count (D,), rank (D, N), syy (D,))``, the input of
    :func:`signal_metrics`' ``label_order``.

    ``order[i, :count[i]]`` holds row i's columns with a finite label in ascending label order; ``rank``
    the centred average rank of each finite label among the row's finite labels (``rankdata − (count +
    1)/2``, a multiple of ½; 0 where the label is not finite) and ``syy`` the sum of their squares (exact).
    It depends on the labels only, so it is the same for every candidate scored on one window.
    """
    labels = np.asarray(labels, dtype=np.float64)
    fin = np.isfinite(labels)
    count = fin.sum(axis=1)
    y = np.where(fin, labels, np.nan)
    order = np.argsort(y, axis=1)  # NaN last
    D, N = y.shape
    v = np.take_along_axis(y, order, axis=1)
    pos = np.broadcast_to(np.arange(N), (D, N))
    new = np.ones((D, N), dtype=bool)  # a group of equal labels starts here
    new[:, 1:] = v[:, 1:] != v[:, :-1]
    last = np.ones((D, N), dtype=bool)  # ... ends here
    last[:, :-1] = new[:, 1:]
    lo = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
    hi = np.minimum.accumulate(np.where(last, pos, N - 1)[:, ::-1], axis=1)[:, ::-1]
    rank = np.zeros((D, N))
    np.put_along_axis(rank, order, (lo + hi) * 0.5 + 1.0, axis=1)  # average rank (rankdata "average")
    rank = np.where(fin, rank - ((count + 1) * 0.5)[:, None], 0.0)
    return order, count, rank, (rank * rank).sum(axis=1)


def _signal(scores: np.ndarray, labels: np.ndarray, min_pairs: int, quantiles: int,
            y_order: tuple | None = None,
            s_order: ScoreOrder | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(daily RankIC, daily long-short, quantile means) of (D, N) scores and labels: the rows' score and
    label orders (each one numpy sort of all days at once, or given) and :func:`_signal_days`."""
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    labels = np.ascontiguousarray(labels, dtype=np.float64)
    so = _score_order(scores) if s_order is None else s_order
    o_y, c_y, r_y, syy = label_order(labels) if y_order is None else y_order
    return _signal_days(scores, labels, so.order, so.count, so.tie, o_y, c_y, r_y, syy, int(min_pairs), int(quantiles))


def daily_rank_ic(scores: np.ndarray, labels: np.ndarray, min_pairs: int = 5) -> np.ndarray:
    """Daily RankIC (Spearman with average ranks for ties) per row (spec §10.11).

    All days at once (:func:`_signal_days`); the centred average ranks are half-integers, so the
    Pearson correlation of the ranks is computed exactly (the same value as ``rankdata`` + dot
    products day by day).

    Parameters
    ----------
    scores, labels : ndarray (D, N)

    Returns
    -------
    ndarray (D,)
        NaN on an invalid day (< ``min_pairs`` finite pairs); 0 where the scores (or
        labels) are constant over the valid pairs.

    Examples
    --------
    >>> s = np.array([[3, 1, 1, 2, 5.]]); y = np.array([[.02, -.01, 0, .01, .03]])
    >>> round(float(daily_rank_ic(s, y)[0]), 5)   # §10.16 E
    0.97468
    """
    return _signal(scores, labels, min_pairs, 5)[0]


def information_ratio(ic: np.ndarray, n_ann: int = 242) -> float:
    """``A = mean/std(ddof 1)·√n_ann`` over valid RankIC days (0 if < 2 days or std 0)."""
    return qm.sharpe(ic, rf=0.0, periods_per_year=n_ann, finite_only=True, form="ratio")


def long_short(scores: np.ndarray, labels: np.ndarray, min_pairs: int = 5, quantiles: int = 5
               ) -> tuple[np.ndarray, np.ndarray]:
    """Daily long-short spread and quantile means (spec §10.11).

    On each valid day (≥ ``min_pairs`` finite pairs) order pairs by (score desc,
    symbol asc = column order), ``k = floor(m/quantiles)``; ``LS = mean(top k labels)
    − mean(bottom k labels)`` (NaN if k = 0). Quantile diagnostic: the same order
    split into ``quantiles`` nearly equal groups (numpy ``array_split``), mean label.

    Returns
    -------
    ls : ndarray (D,)
    qmeans : ndarray (D, quantiles)   (group 0 = highest scores; NaN on invalid days)
    """
    return _signal(scores, labels, min_pairs, quantiles)[1:]


def coverage(scores: np.ndarray, in_view: np.ndarray) -> tuple[float, float]:
    """Coverage and active days (spec §10.11).

    Coverage = finite-score (date, symbol) pairs / (date, ``view.symbols``) pairs;
    active days = share of decision dates with ≥ 1 finite score.
    """
    fin = np.isfinite(scores)
    fin &= in_view
    tot = np.count_nonzero(in_view)
    cov = np.count_nonzero(fin) / tot if tot else 0.0  # exact counts: the same quotient as numpy's
    act = np.count_nonzero(fin.any(axis=1)) / fin.shape[0] if fin.shape[0] else 0.0
    return cov, act


def signal_metrics(scores: np.ndarray, labels: np.ndarray, in_view: np.ndarray,
                   config: ArenaScoringConfig | None = None, *,
                   label_order: tuple | None = None,
                   score_order: ScoreOrder | None = None) -> dict[str, Any]:
    """RankIC mean, ``A``, SR_LS, coverage, active days, quantile returns (spec §10.11).

    Parameters
    ----------
    scores : ndarray (n, N)
        Scores of decision dates D_0..D_{n−1}.
    labels : ndarray (n−1, N)
        Labels of D_0..D_{n−2} (:func:`~quantgym.envs.quant_arena.account.labels`).
    in_view : ndarray (n, N) bool
        ``view.symbols`` membership per decision date.
    label_order : tuple of ndarray, optional
        :func:`label_order` of ``labels`` (one per window; computed here otherwise).
    score_order : ScoreOrder, optional
        :func:`~quantgym.envs.quant_arena.account.score_order` of ``scores`` (rows beyond the labels'
        are ignored; computed here otherwise).
    """
    config = config or ArenaScoringConfig()
    labels = np.asarray(labels, dtype=np.float64)
    D = labels.shape[0]
    s_order = None if score_order is None else ScoreOrder(*(a[:D] for a in score_order))
    ic, ls, qmeans = _signal(scores[:D], labels, config.ic_min_pairs, config.quantiles, label_order, s_order)
    cov, act = coverage(scores, in_view)
    valid = np.isfinite(ic)
    with np.errstate(invalid="ignore"):
        qbp = np.nanmean(qmeans, axis=0) * 1e4 if np.isfinite(qmeans).any() else np.full(config.quantiles, np.nan)
    return {
        "rankic_mean": float(ic[valid].mean()) if valid.any() else 0.0,
        "rankic_ir": information_ratio(ic, config.n_ann),
        "ls_sharpe": qm.sharpe(ls, rf=0.0, periods_per_year=config.n_ann, finite_only=True, form="ratio"),
        "coverage": cov,
        "active_days": act,
        "n_ic_days": int(valid.sum()),
        "quantile_returns_bp": [float(x) for x in qbp],
        "_daily_ic": ic,
        "_daily_ls": ls,
    }


# ---------------------------------------------------------------------- score
def logistic(x: float, c: float) -> float:
    """``g(x) = 1/(1 + exp(−x/c))`` (spec §6, §10.12); non-finite x enters as 0.

    Examples
    --------
    >>> logistic(0.0, 0.2)
    0.5
    """
    x = float(x) if x is not None and math.isfinite(float(x)) else 0.0
    z = -x / c
    if z > 700:
        return 0.0
    return 1.0 / (1.0 + math.exp(z))


def component_scores(excess_arr: float, sharpe: float, rankic: float, a: float, ls_sharpe: float, turnover: float,
                     config: ArenaScoringConfig | None = None) -> dict[str, float]:
    """The six logistic scores s_R, s_L, s_IC, s_A, s_LS, s_TO (spec §10.12)."""
    c = config or ArenaScoringConfig()
    return {
        "s_R": logistic(excess_arr, c.scale_r),
        "s_L": logistic(sharpe, c.scale_sr),
        "s_IC": logistic(rankic, c.scale_ic),
        "s_A": logistic(a, c.scale_a),
        "s_LS": logistic(ls_sharpe, c.scale_ls),
        "s_TO": logistic(c.turnover_pivot - (turnover if turnover is not None and math.isfinite(turnover) else
                                             c.turnover_pivot), c.scale_to),
    }


def quality(s: dict[str, float], config: ArenaScoringConfig | None = None) -> float:
    """``Q = 0.60·s_R + 0.20·s_L + 0.05·(s_IC + s_A + s_LS + s_TO)`` (spec §6)."""
    c = config or ArenaScoringConfig()
    return c.w_r * s["s_R"] + c.w_l * s["s_L"] + c.w_sig * (s["s_IC"] + s["s_A"] + s["s_LS"] + s["s_TO"])


def window_score(q: float, d: float, config: ArenaScoringConfig | None = None) -> float:
    """``S = 100·Q·(0.9 + 0.1·D)`` (spec §6)."""
    c = config or ArenaScoringConfig()
    return 100.0 * q * (c.diversity_base + c.diversity_weight * d)


def total_score(s_in: float, s_out: float, config: ArenaScoringConfig | None = None) -> float:
    """``S = 0.5·S_in + 0.5·S_out`` (spec §6)."""
    c = config or ArenaScoringConfig()
    return c.w_in * s_in + c.w_out * s_out


# ---------------------------------------------------------------------- diversity
def _u(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standardised average ranks per column over finite values, NaN → 0; measured flags.

    x : (N, M). Returns u (N, M) and measured (M,) bool (≥ 5 finite, not all equal).
    """
    fin = np.isfinite(x)
    cnt = fin.sum(axis=0)
    r = pd.DataFrame(x).rank(axis=0, method="average").to_numpy()
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        mu = np.nanmean(r, axis=0)
        sd = np.nanstd(r, axis=0)
        u = (r - mu) / sd
    measured = (cnt >= 5) & (sd > 0)
    u = np.where(fin & measured[None, :], u, 0.0)
    return u, measured


def diversity(features: np.ndarray, scores: np.ndarray, config: ArenaScoringConfig | None = None) -> dict[str, Any]:
    """Feature diversity D (spec §6, §10.13).

    Parameters
    ----------
    features : ndarray (n_dates, F, N)
        Declared features on the sample dates (NaN where missing).
    scores : ndarray (n_dates, N)
        Final scores on the same dates.

    Returns
    -------
    dict
        ``K`` qualifying clusters, ``D = min(K/32, 1)``, ``n_features`` measured,
        ``n_clusters``, ``labels`` (cluster id per feature, −1 = dropped),
        ``rho_score`` (ρ̄ of each feature with the score).
    """
    c = config or ArenaScoringConfig()
    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 3 or features.shape[1] == 0 or features.shape[0] == 0:
        F = features.shape[1] if features.ndim == 3 else 0
        return {"K": 0, "D": 0.0, "n_features": 0, "n_clusters": 0, "labels": [-1] * F, "rho_score": [None] * F}
    nd, F, _ = features.shape
    M = F + 1
    num = np.zeros((M, M))
    cnt = np.zeros((M, M))
    for i in range(nd):
        x = np.concatenate([features[i], np.asarray(scores[i], dtype=np.float64)[None, :]], axis=0).T  # (N, M)
        u, meas = _u(x)
        g = u.T @ u
        dg = np.sqrt(np.diag(g))
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = g / np.outer(dg, dg)
        both = np.outer(meas, meas)
        num += np.where(both, rho, 0.0)
        cnt += both
    with np.errstate(invalid="ignore", divide="ignore"):
        rbar = num / cnt
    measured_f = np.diag(cnt)[:F] > 0
    idx = np.flatnonzero(measured_f)
    labels_ = np.full(F, -1)
    K = 0
    ncl = 0
    if idx.size:
        sub = rbar[np.ix_(idx, idx)]
        adj = np.isfinite(sub) & (np.abs(sub) >= c.cluster_threshold)
        ncl, lab = connected_components(adj, directed=False)
        labels_[idx] = lab
        rs = rbar[idx, F]
        qual = np.isfinite(rs) & (np.abs(rs) >= c.qualify_threshold)
        K = int(len(set(lab[qual].tolist())))
    return {"K": K, "D": float(min(K / c.diversity_scale, 1.0)), "n_features": int(idx.size),
            "n_clusters": int(ncl), "labels": labels_.tolist(),
            "rho_score": [float(v) if math.isfinite(v) else None for v in rbar[:F, F]]}


@dataclass
class ScoreBreakdown:
    """One window's score: components, Q, D and S (spec §6)."""

    components: dict[str, float]
    Q: float
    D: float
    K: int
    S: float


def score_window(excess_arr: float, sharpe: float, rankic: float, a: float, ls_sharpe: float, turnover: float,
                 K: int, config: ArenaScoringConfig | None = None) -> ScoreBreakdown:
    """Components, Q, D and S of one window (spec §6, §10.12). Worked example F in tests."""
    c = config or ArenaScoringConfig()
    s = component_scores(excess_arr, sharpe, rankic, a, ls_sharpe, turnover, c)
    q = quality(s, c)
    d = min(K / c.diversity_scale, 1.0)
    return ScoreBreakdown(components=s, Q=q, D=d, K=int(K), S=window_score(q, d, c))


# ---------------------------------------------------------------------- overfitting diagnostics
def research_overfitting(candidates: list[dict], frozen: int | None,
                         scoring: ArenaScoringConfig | None = None) -> dict[str, Any]:
    """Deflated Sharpe Ratio and PBO of a research run (Bailey & López de Prado 2014; Bailey et al. 2017): diagnostics, not scored.

    The trials are the candidates whose research evaluation is ``ok`` (each has a daily NAV path on the
    research window); the others are counted in ``n_candidates`` but have no returns. The DSR
    (:func:`quantgym.stats.overfitting.deflated_sharpe_ratio`) is the frozen candidate's research-period
    daily returns against the expected best research Sharpe of ``n_trials`` skill-less trials with the
    trials' dispersion of research Sharpe ratios; PBO (:func:`~quantgym.stats.overfitting.pbo_cscv`,
    ``scoring.pbo_blocks`` blocks) is over the trials' research-period daily returns. Neither enters S.

    Parameters
    ----------
    candidates : list of dict
        The env's candidates: ``index`` and ``research`` (a ``WindowResult`` with ``status`` and
        ``daily["nav"]``, D_0..D_n).
    frozen : int or None
        1-based index of the frozen candidate (None: no candidate).
    scoring : ArenaScoringConfig, optional
        ``n_ann`` (days per year, for the annualised Sharpe ratios shown beside the per-day ones) and
        ``pbo_blocks`` (CSCV blocks); default :class:`ArenaScoringConfig()`.

    Returns
    -------
    dict
        ``dsr``, ``psr0`` (P(true research Sharpe > 0), no deflation), ``sharpe_research`` and
        ``sharpe_benchmark`` (the frozen candidate's research Sharpe and the expected maximum of
        ``n_trials`` skill-less trials, annualised), ``sd_trial_sharpes`` (annualised), ``skew``,
        ``kurtosis``, ``n_days``, ``n_trials``, ``n_candidates``, ``reason_dsr``; ``pbo``, ``pbo_splits``,
        ``pbo_blocks``, ``pbo_block_days``, ``pbo_logit_median``, ``reason_pbo``. A statistic that
        cannot be computed is None with its reason (never an exception).
    """
    from quantgym.stats.overfitting import deflated_sharpe_ratio, pbo_cscv, per_period_sharpe

    scoring = scoring or ArenaScoringConfig()
    n_ann = scoring.n_ann

    def finite(x: Any) -> float | None:
        return None if x is None or not math.isfinite(float(x)) else float(x)

    paths: dict[int, np.ndarray] = {}
    for c in candidates:
        res = c["research"]
        nav = (getattr(res, "daily", None) or {}).get("nav")
        if res.status == "ok" and nav is not None and len(nav) >= 2:
            nav = np.asarray(nav, dtype=np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                paths[int(c["index"])] = nav[1:] / nav[:-1] - 1.0
    ann = math.sqrt(n_ann)
    out: dict[str, Any] = {"dsr": None, "psr0": None, "sharpe_research": None, "sharpe_benchmark": None,
                           "sd_trial_sharpes": None, "skew": None, "kurtosis": None, "n_days": None,
                           "n_trials": len(paths), "n_candidates": len(candidates), "reason_dsr": None,
                           "pbo": None, "pbo_splits": None, "pbo_blocks": scoring.pbo_blocks, "pbo_block_days": None,
                           "pbo_logit_median": None, "reason_pbo": None}
    lengths = {r.size for r in paths.values()}
    if len(lengths) > 1:  # one window, so never expected; keep the frozen candidate's calendar
        keep = paths[frozen].size if frozen in paths else max(lengths)
        paths = {k: r for k, r in paths.items() if r.size == keep}
        out["n_trials"] = len(paths)
    sharpes = {k: per_period_sharpe(r) for k, r in paths.items()}
    if frozen is None:
        out["reason_dsr"] = "no candidate was frozen"
    elif frozen not in paths:
        st = next((c["research"].status for c in candidates if int(c["index"]) == frozen), None)
        out["reason_dsr"] = f"the frozen candidate's research status is {st!r}: no research returns"
    else:
        d = deflated_sharpe_ratio(paths[frozen], list(sharpes.values()), n_trials=len(paths))
        sd = math.sqrt(d["var_trial_sharpes"]) if math.isfinite(d["var_trial_sharpes"]) else None
        out.update(dsr=finite(d["dsr"]), psr0=finite(d["psr0"]), sharpe_research=finite(d["sr"] * ann),
                   sharpe_benchmark=finite(d["sr0"] * ann), sd_trial_sharpes=None if sd is None else sd * ann,
                   skew=finite(d["skew"]), kurtosis=finite(d["kurtosis"]), n_days=d["n_obs"],
                   reason_dsr=d["reason"])
    if len(paths) < 2:
        out["reason_pbo"] = (f"{len(paths)} candidate(s) with research returns (status ok): PBO needs at least 2")
    else:
        p = pbo_cscv(np.column_stack([paths[k] for k in sorted(paths)]), n_blocks=scoring.pbo_blocks)
        out.update(pbo=finite(p["pbo"]), pbo_splits=p["n_splits"] or None, pbo_block_days=p["block_rows"] or None,
                   pbo_logit_median=finite(np.median(p["logits"])) if p["logits"].size else None,
                   reason_pbo=p["reason"])
    return out


def overfitting_extra(of: dict | None) -> dict[str, Any]:
    """The summary.csv columns of a run's ``overfitting`` block (appended after the shared columns)."""
    of = of or {}
    return {"dsr": of.get("dsr"), "pbo": of.get("pbo"), "psr0": of.get("psr0"), "n_trials": of.get("n_trials")}


def summary_extra(final: dict | None) -> dict[str, Any]:
    """The summary.csv columns of a run, after the shared ones: the scores ``S``, ``S_in``, ``S_out`` (0-100,
    spec §6), the sealed window's ``xarr_pct`` (ARR in excess of the market, percent) and ``rankic`` (mean
    daily RankIC), then the overfitting diagnostics (:func:`overfitting_extra`).

    ``final``: the episode's final ``info`` (``S``, ``S_in``, ``S_out``, ``sealed``, ``overfitting``), or a
    bench run with the same keys. Absent values give empty cells.
    """
    fin = final or {}
    m = fin.get("sealed") or {}
    x = m.get("excess_arr")
    return {"S": fin.get("S"), "S_in": fin.get("S_in"), "S_out": fin.get("S_out"),
            "xarr_pct": None if x is None else 100 * x, "rankic": m.get("rankic_mean"),
            **overfitting_extra(fin.get("overfitting"))}


__all__ = ["arr", "long_sharpe", "account_metrics", "yearly_returns", "daily_rank_ic", "information_ratio", "label_order",
           "long_short", "coverage", "signal_metrics", "logistic", "component_scores", "quality",
           "window_score", "total_score", "diversity", "ScoreBreakdown", "score_window",
           "research_overfitting", "overfitting_extra", "summary_extra"]
