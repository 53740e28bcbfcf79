"""Quant-Arena metrics and the 0–100 score (spec quant_arena.md §5, §6, §10.11–§10.13).

Account metrics use the shared :mod:`quantgym.metrics` helpers where the definitions
agree (maximum drawdown with NAV_0 included, total return); the spec fixes
``N_ann = 242`` and a Sharpe **without** risk-free rate (§10.11), which is
``quantgym.metrics.sharpe(r, rf=0, periods_per_year=242)``.

Signal metrics (RankIC, IR ``A``, long-short quintile Sharpe, coverage), turnover,
the logistic score transform and feature diversity are specific to this task and
live here.
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
    d = pd.DatetimeIndex(np.asarray(dates))
    out = {}
    years = d.year.to_numpy()
    for y in sorted(set(years[1:].tolist())):
        idx = np.flatnonzero(years == y)
        idx = idx[idx > 0]
        a, b = idx[0] - 1, idx[-1]
        ret = float(nav[b] / nav[a] - 1.0)
        rr = float(ref_nav[b] / ref_nav[a] - 1.0)
        out[str(y)] = {"return": ret, "reference_return": rr, "excess": ret - rr}
    return out


# ---------------------------------------------------------------------- signal metrics
def _sorted_pairs(v: np.ndarray, valid: np.ndarray, descending: bool = False
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per-row order of ``v`` over ``valid`` cells (valid cells first) and average 1-based ranks.

    The order is ascending, ties in any order; ``descending``: score descending, ties in column
    order (as a stable sort); ranks are those of ``scipy.stats.rankdata(method="average")`` on the valid cells of the
    row in that direction, 0 on invalid cells. Ranks are half-integers, so every sum of them and
    of their products below is exact in float64 (any summation order gives the same bits).
    """
    key = np.where(valid, -v if descending else v, np.nan)  # NaN sorts last
    order = np.argsort(key, axis=1)
    sv = np.take_along_axis(key, order, axis=1)
    N = v.shape[1]
    pos = np.broadcast_to(np.arange(N), sv.shape)
    new = np.ones(sv.shape, dtype=bool)
    new[:, 1:] = sv[:, 1:] != sv[:, :-1]            # NaN != NaN: invalid cells are never tied
    if descending:  # the order is used (long-short): ties in column order, by the slower stable sort
        tied = np.flatnonzero(~new.all(axis=1))
        if tied.size:
            order[tied] = np.argsort(key[tied], axis=1, kind="stable")
    last = np.ones(sv.shape, dtype=bool)
    last[:, :-1] = new[:, 1:]
    first_of = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
    last_of = np.minimum.accumulate(np.where(last, pos, N - 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.zeros(v.shape)
    np.put_along_axis(ranks, order, (first_of + last_of + 2) * 0.5, axis=1)
    ranks[~valid] = 0.0
    return order, ranks


def daily_rank_ic(scores: np.ndarray, labels: np.ndarray, min_pairs: int = 5) -> np.ndarray:
    """Daily RankIC (Spearman with average ranks for ties) per row (spec §10.11).

    Vectorised over days: one stable sort of each matrix; the centred average ranks are
    half-integers, so the Pearson correlation of the ranks is computed exactly (the same
    value as ``rankdata`` + dot products day by day).

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
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    valid = np.isfinite(scores) & np.isfinite(labels)
    return _rank_ic(labels, valid, _sorted_pairs(scores, valid)[1], min_pairs)


def _rank_ic(labels: np.ndarray, valid: np.ndarray, rank_s: np.ndarray, min_pairs: int) -> np.ndarray:
    """RankIC per row from the ascending average ranks ``rank_s`` of the scores (0 off ``valid``)."""
    m = valid.sum(axis=1)
    rank_y = _sorted_pairs(labels, valid)[1]
    c = np.where(valid, ((m + 1) * 0.5)[:, None], 0.0)
    x, y = rank_s - c, rank_y - c
    sxx, syy, sxy = (x * x).sum(axis=1), (y * y).sum(axis=1), (x * y).sum(axis=1)
    den = np.sqrt(sxx * syy)
    with np.errstate(invalid="ignore", divide="ignore"):
        ic = np.where(den > 0, sxy / den, 0.0)
    return np.where(m >= min_pairs, ic, np.nan)


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
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    valid = np.isfinite(scores) & np.isfinite(labels)
    return _long_short(labels, valid, _sorted_pairs(scores, valid, descending=True)[0], min_pairs, quantiles)


def _long_short(labels: np.ndarray, valid: np.ndarray, order: np.ndarray, min_pairs: int, quantiles: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`long_short` given the per-row score-descending ``order`` (valid cells first).

    Days are grouped by their number of pairs m, so every mean is numpy's mean of the same
    contiguous values as a day-by-day ``y[:k].mean()`` (identical bits).
    """
    D = labels.shape[0]
    ls = np.full(D, np.nan)
    qm_ = np.full((D, quantiles), np.nan)
    ys = np.take_along_axis(labels, order, axis=1)
    m_all = valid.sum(axis=1)
    for m in np.unique(m_all[m_all >= min_pairs]).tolist():
        rows = np.flatnonzero(m_all == m)
        y = np.ascontiguousarray(ys[rows, :m])
        k = m // quantiles
        if k > 0:
            ls[rows] = y[:, :k].sum(axis=1) / k - y[:, m - k:].sum(axis=1) / k
        size, extra = divmod(m, quantiles)
        lo = 0
        for g in range(quantiles):
            hi = lo + size + (1 if g < extra else 0)
            if hi > lo:
                qm_[rows, g] = y[:, lo:hi].sum(axis=1) / (hi - lo)
            lo = hi
    return ls, qm_


def coverage(scores: np.ndarray, in_view: np.ndarray) -> tuple[float, float]:
    """Coverage and active days (spec §10.11).

    Coverage = finite-score (date, symbol) pairs / (date, ``view.symbols``) pairs;
    active days = share of decision dates with ≥ 1 finite score.
    """
    fin = np.isfinite(scores) & in_view
    tot = int(in_view.sum())
    cov = float(fin.sum() / tot) if tot else 0.0
    act = float(fin.any(axis=1).mean()) if fin.shape[0] else 0.0
    return cov, act


def signal_metrics(scores: np.ndarray, labels: np.ndarray, in_view: np.ndarray,
                   cfg: ArenaScoringConfig | None = None) -> dict[str, Any]:
    """RankIC mean, ``A``, SR_LS, coverage, active days, quantile returns (spec §10.11).

    Parameters
    ----------
    scores : ndarray (n, N)
        Scores of decision dates D_0..D_{n−1}.
    labels : ndarray (n−1, N)
        Labels of D_0..D_{n−2} (:func:`~quantgym.envs.quant_arena.account.labels`).
    in_view : ndarray (n, N) bool
        ``view.symbols`` membership per decision date.
    """
    cfg = cfg or ArenaScoringConfig()
    s = np.asarray(scores[: labels.shape[0]], dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    valid = np.isfinite(s) & np.isfinite(labels)
    order, rank_desc = _sorted_pairs(s, valid, descending=True)  # one sort serves RankIC and long-short
    m = valid.sum(axis=1)
    rank_s = np.where(valid, (m + 1)[:, None] - rank_desc, 0.0)  # ascending average ranks, exact
    ic = _rank_ic(labels, valid, rank_s, cfg.ic_min_pairs)
    ls, qmeans = _long_short(labels, valid, order, cfg.ic_min_pairs, cfg.quantiles)
    cov, act = coverage(scores, in_view)
    valid = np.isfinite(ic)
    with np.errstate(invalid="ignore"):
        qbp = np.nanmean(qmeans, axis=0) * 1e4 if np.isfinite(qmeans).any() else np.full(cfg.quantiles, np.nan)
    return {
        "rankic_mean": float(ic[valid].mean()) if valid.any() else 0.0,
        "rankic_ir": information_ratio(ic, cfg.n_ann),
        "ls_sharpe": qm.sharpe(ls, rf=0.0, periods_per_year=cfg.n_ann, finite_only=True, form="ratio"),
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
                     cfg: ArenaScoringConfig | None = None) -> dict[str, float]:
    """The six logistic scores s_R, s_L, s_IC, s_A, s_LS, s_TO (spec §10.12)."""
    c = cfg or ArenaScoringConfig()
    return {
        "s_R": logistic(excess_arr, c.scale_r),
        "s_L": logistic(sharpe, c.scale_sr),
        "s_IC": logistic(rankic, c.scale_ic),
        "s_A": logistic(a, c.scale_a),
        "s_LS": logistic(ls_sharpe, c.scale_ls),
        "s_TO": logistic(c.turnover_pivot - (turnover if turnover is not None and math.isfinite(turnover) else
                                             c.turnover_pivot), c.scale_to),
    }


def quality(s: dict[str, float], cfg: ArenaScoringConfig | None = None) -> float:
    """``Q = 0.60·s_R + 0.20·s_L + 0.05·(s_IC + s_A + s_LS + s_TO)`` (spec §6)."""
    c = cfg or ArenaScoringConfig()
    return c.w_r * s["s_R"] + c.w_l * s["s_L"] + c.w_sig * (s["s_IC"] + s["s_A"] + s["s_LS"] + s["s_TO"])


def window_score(q: float, d: float, cfg: ArenaScoringConfig | None = None) -> float:
    """``S = 100·Q·(0.9 + 0.1·D)`` (spec §6)."""
    c = cfg or ArenaScoringConfig()
    return 100.0 * q * (c.diversity_base + c.diversity_weight * d)


def total_score(s_in: float, s_out: float, cfg: ArenaScoringConfig | None = None) -> float:
    """``S = 0.5·S_in + 0.5·S_out`` (spec §6)."""
    c = cfg or ArenaScoringConfig()
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


def diversity(features: np.ndarray, scores: np.ndarray, cfg: ArenaScoringConfig | None = None) -> dict[str, Any]:
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
    c = cfg or ArenaScoringConfig()
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
                 K: int, cfg: ArenaScoringConfig | None = None) -> ScoreBreakdown:
    """Components, Q, D and S of one window (spec §6, §10.12). Worked example F in tests."""
    c = cfg or ArenaScoringConfig()
    s = component_scores(excess_arr, sharpe, rankic, a, ls_sharpe, turnover, c)
    q = quality(s, c)
    d = min(K / c.diversity_scale, 1.0)
    return ScoreBreakdown(components=s, Q=q, D=d, K=int(K), S=window_score(q, d, c))


# ---------------------------------------------------------------------- overfitting diagnostics
def research_overfitting(candidates: list[dict], frozen: int | None,
                         scoring: ArenaScoringConfig | None = None) -> dict[str, Any]:
    """Deflated Sharpe Ratio and PBO of a research run (issue #16 item 2): diagnostics, not scored.

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


__all__ = ["arr", "long_sharpe", "account_metrics", "yearly_returns", "daily_rank_ic", "information_ratio",
           "long_short", "coverage", "signal_metrics", "logistic", "component_scores", "quality",
           "window_score", "total_score", "diversity", "ScoreBreakdown", "score_window",
           "research_overfitting", "overfitting_extra"]
