"""The PortBench decision scorer: a decision date's ground truth and its S1–S5 scores, CEPS and PAS (spec §4,
§5, §3.2), from the functions of :mod:`.stages`. The values that depend on the decision row only (the S1/S2
truth, the lookback and equal-weight oracles, the truth's S5 report) are kept in the row's
:class:`~quantgym.envs.portbench.market.RowCache` (speed only: the same values)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from quantgym.envs.portbench.actions import DecisionLog
from quantgym.envs.portbench.ceps import ceps as ceps_fn
from quantgym.envs.portbench.config import proportional_costs
from quantgym.envs.portbench.market import ASSET_CLASSES, MarketSnapshot, RowCache
from quantgym.envs.portbench.optimize import single_thread_blas
from quantgym.envs.portbench.profiles import pas_masks, pas_value
from quantgym.envs.portbench.records import STAGE_KEYS, flat, report_fields
from quantgym.envs.portbench.stages import (
    RiskReport, correlation_parts, risk_report, s1_truth, s2_truth, s3_oracle, s3_value, s4_score, s5_score,
    score_parts,
)

N_CLASSES = len(ASSET_CLASSES)


class DecisionTruth:
    """The ground truth of one decision date: ``v_star`` (S1), ``s_star`` (S2), ``w_star`` (the S3 oracle),
    ``w_star_s45`` (the S4/S5 truth when it is not ``w_star``: paper ``ex_post_s4s5``, else None),
    ``oracle_fallback`` (the note of an oracle that fell back to equal weight on a solver failure, spec §4.3,
    else None) and ``cache_key`` (the row-cache key of ``w_star`` when it depends on the row only)."""

    __slots__ = ("v_star", "s_star", "w_star", "w_star_s45", "oracle_fallback", "cache_key")

    def __init__(self, v_star, s_star, w_star, w_star_s45, oracle_fallback, cache_key):
        self.v_star, self.s_star, self.w_star = v_star, s_star, w_star
        self.w_star_s45, self.oracle_fallback, self.cache_key = w_star_s45, oracle_fallback, cache_key


class DecisionScorer:
    """Scores the decisions of an env: ``view`` (its market view), ``profile``, ``config``, ``mode`` (its
    :mod:`~quantgym.envs.portbench.paper.mode` object)."""

    def __init__(self, view, profile, config, mode):
        self.view, self.profile, self.config, self.mode = view, profile, config, mode
        self._consts: tuple = (None, None, None, None)

    def _constants(self) -> tuple:
        """``(min_trade, rate, commission rate, the truth report's cache-key tail)`` of the scorer's config, profile
        and mode, kept while they are the same objects (speed only)."""
        c, config, profile, mode = self._consts, self.config, self.profile, self.mode
        if c[0] is config and c[1] is profile and c[2] is mode:
            return c[3]
        sc = config.scoring
        costs = proportional_costs(config.costs)  # a user fee model: the spec's min_trade, no rate
        values = (costs.min_trade, costs.rate, costs.commission_bps / 1e4,
                  (profile.var_limit, profile.max_drawdown, sc.s5_min_obs, sc.drift_limit, mode.include_start))
        self._consts = (config, profile, mode, values)
        return values

    def truth(self, snap: MarketSnapshot, parts: RowCache, forward_returns: Callable[[], np.ndarray]) -> DecisionTruth:
        """The ground truth of the decision of ``snap`` (``parts``: its row cache; ``forward_returns()``: the
        ex-post oracle's data, read only when that oracle is asked for)."""
        sc, mode = self.config.scoring, self.mode
        key = ("truth", sc.view_scale, sc.signal_threshold)
        truth = parts.get(key)
        if truth is None:  # S1/S2 truth depend on the row only: cached per dataset, read-only (speed only)
            v_star = s1_truth(snap.trailing_return, snap.available, sc.view_scale)
            truth = parts.put(key, (v_star, s2_truth(v_star, sc.signal_threshold)))
        v_star, s_star = truth
        ew_mu = mode.ew_if_nonpositive_mu
        w_s45 = note_s45 = cache_key = None
        if mode.s45_ex_post:  # paper (§4.4): S4/S5 truth from the ex-post oracle always
            with single_thread_blas():
                w_s45, note_s45 = s3_oracle(snap, s_star, "ex_post", forward_returns(), ew_if_nonpositive_mu=ew_mu)
        if sc.oracle == "ex_post":
            with single_thread_blas():
                w_star, note = s3_oracle(snap, s_star, sc.oracle, forward_returns(), ew_if_nonpositive_mu=ew_mu)
        else:
            # lookback / equal-weight oracles depend on the row only: cached per dataset (speed only)
            cache_key = ("w_star", sc.oracle, sc.view_scale, sc.signal_threshold, ew_mu)
            cached = parts.get(cache_key)
            if cached is None:
                with single_thread_blas():
                    cached = parts.put(cache_key, s3_oracle(snap, s_star, sc.oracle, None, ew_if_nonpositive_mu=ew_mu))
            w_star, note = cached
        if note_s45 is not None and note_s45 != note:  # the S4/S5 truth's oracle fell back too
            note = note_s45 if note is None else f"{note_s45}; {note}"
        return DecisionTruth(v_star, s_star, w_star, w_s45, note, cache_key)

    def score(self, w_hat: np.ndarray, valid: bool, snap: MarketSnapshot, truth: DecisionTruth,
              log: DecisionLog) -> tuple[np.ndarray, tuple, dict[str, Any]]:
        """S3–S5, CEPS and PAS of the S3 weights ``w_hat`` (``valid``: the answer was not a fallback), written to
        ``log.scores``. Returns the executed weights (§4.4), the scored columns of the decision's record
        (:data:`~quantgym.envs.portbench.records.COL`) and the step's score entries of ``info``.

        The values of :func:`~.stages.s3_score`, :func:`~.stages.s4_score`, :func:`~.stages.risk_report`,
        :func:`~.stages.s5_score` and :func:`~.profiles.pas_step`, with the per-asset sums of all of them in one
        kernel (:func:`~.stages.score_parts`; speed only, the same floats)."""
        sc, mode, view, profile = self.config.scoring, self.mode, self.view, self.profile
        min_trade, rate, commission, _ = self._constants()
        w_hat = np.asarray(w_hat, dtype=np.float64)
        w_truth = truth.w_star if truth.w_star_s45 is None else truth.w_star_s45
        eq, defensive = pas_masks(snap.classes, mode.pas_equity_classes)
        n = w_hat.shape[0]
        out = np.empty(2 * n)  # the kernel's scratch, then where(A_d, w_hat, 0)
        tau_hat, tau_star, mae, s_i, n_active, den, num, e, b = score_parts(
            w_hat, snap.current_weights, w_truth, truth.w_star, snap.available, snap.class_id, snap.intra, snap.inter,
            eq, defensive, min_trade, N_CLASSES, out)
        w_exec = mode.executed(w_hat, tau_hat, rate, view)
        intra, inter, corr = correlation_parts(s_i, n_active, den, num)
        s3, acc = s3_value(mae, corr, sc.alpha)
        scores = log.scores
        scores["S3"] = s3 if valid else 0.0
        scores["S4"] = s4_score(tau_hat, tau_star)
        star_exec = mode.executed(w_truth, tau_star, commission, view)
        rep_hat = risk_report(w_exec, snap, profile, sc, include_start=mode.include_start,
                              masked=out[n:] if w_exec is w_hat else None)
        rep_star = self._star_report(star_exec, snap, truth)
        scores["S5"] = s5_score(rep_hat, rep_star)
        ceps_val = ceps_fn([scores.get(s) for s in STAGE_KEYS], sc.lam)
        pas = pas_value(e, b, rep_hat.var, profile)
        scored = (flat(scores), ceps_val, pas, (acc, mae, intra, inter, corr), tau_hat, tau_star,
                  *report_fields(rep_hat), *report_fields(rep_star), truth.oracle_fallback)
        info = {"ceps": ceps_val, "pas": pas, "tau": tau_hat, "tau_star": tau_star, "var": rep_hat.var,
                "drawdown": rep_hat.drawdown, "drift": rep_hat.drift, "alerts": list(rep_hat.alerts),
                "trigger": rep_hat.trigger}
        if truth.oracle_fallback is not None:
            info["oracle_fallback"] = truth.oracle_fallback
        return w_exec, scored, info

    def _star_report(self, w: np.ndarray, snap: MarketSnapshot, truth: DecisionTruth) -> RiskReport:
        """S5 report of the truth's executed weights ``w``. When ``w`` is the row's cached oracle weights (a
        lookback or equal-weight oracle, no paper S4/S5 truth, no cash drag), the report depends on the row, the
        profile's limits and the config only, so it is cached with them (speed only; the same report)."""
        sc, profile, include_start = self.config.scoring, self.profile, self.mode.include_start
        if truth.cache_key is None or w is not truth.w_star or truth.w_star_s45 is not None:
            return risk_report(w, snap, profile, sc, include_start=include_start)
        # the profile's limits, the S5 settings and include_start
        key = ("rep_star", *truth.cache_key, *self._constants()[3])
        parts = self.view.row_cache(int(snap.t))
        rep = parts.get(key)
        return rep if rep is not None else parts.put(key, risk_report(w, snap, profile, sc, include_start=include_start))


__all__ = ["DecisionScorer", "DecisionTruth"]
