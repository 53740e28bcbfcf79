"""The scored step's one-kernel scoring (:func:`~quantgym.envs.portbench.stages.score_parts` in
:meth:`DecisionScorer.score`) gives the floats of the stage functions it stands for, bit for bit: S3 (its parts),
S4, S5, CEPS, PAS, τ̂, τ* and both risk reports, on real decisions of clean and paper mode."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quantgym.envs.portbench.actions import DecisionLog
from quantgym.envs.portbench.ceps import ceps
from quantgym.envs.portbench.env import PortBenchEnv
from quantgym.envs.portbench.execution import turnover
from quantgym.envs.portbench.market import ASSET_CLASSES
from quantgym.envs.portbench.profiles import pas_step
from quantgym.envs.portbench.records import S3_PARTS, report_fields
from quantgym.envs.portbench.stages import risk_report, s3_score, s4_score, s5_score, score_parts


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (a != a and b != b) or (a == b and math.copysign(1.0, a) == math.copysign(1.0, b))
    return type(a) is type(b) and a == b


def _reference(env: PortBenchEnv, w_hat: np.ndarray, valid: bool, snap, truth, scores: dict) -> dict:
    """The scores of one decision from the stage functions one by one (the composition the scorer stands for)."""
    sc, mode, costs, view, profile = env.config.scoring, env.mode, env.config.costs, env.view, env.profile
    w0 = snap.current_weights
    tau_hat = turnover(w_hat, w0, costs.min_trade)
    w_exec = mode.executed(w_hat, tau_hat, costs.rate, view)
    s3 = s3_score(w_hat, truth.w_star, snap, sc.alpha)
    w_truth = truth.w_star if truth.w_star_s45 is None else truth.w_star_s45
    tau_star = turnover(w_truth, w0, costs.min_trade)
    star_exec = mode.executed(w_truth, tau_star, costs.commission_bps / 1e4, view)
    rep_hat = risk_report(w_exec, snap, profile, sc, include_start=mode.include_start)
    rep_star = risk_report(star_exec, snap, profile, sc, include_start=mode.include_start)
    scores = dict(scores, S3=s3["score"] if valid else 0.0, S4=s4_score(tau_hat, tau_star),
                  S5=s5_score(rep_hat, rep_star))
    return {"scores": scores, "ceps": ceps([scores.get(s) for s in ("S1", "S2", "S3", "S4", "S5")], sc.lam),
            "pas": pas_step(w_hat, snap.classes, rep_hat.var, profile, mode.pas_equity_classes),
            "s3": tuple(s3[k] for k in S3_PARTS), "tau": (tau_hat, tau_star), "w_exec": w_exec,
            "reports": (*report_fields(rep_hat), *report_fields(rep_star))}


@pytest.mark.parametrize("kwargs", [
    {"period": "covid_2020"},
    {"period": "crypto_2022", "profile": "conservative", "oracle": "ex_post"},
    {"period": "covid_2020", "profile": "aggressive", "oracle": "equal_weight", "alpha": 1.0},
    {"period": "covid_2020", "fidelity": "paper"},
])
def test_scorer_gives_the_stage_functions_floats(kwargs):
    env = PortBenchEnv(scoring=True, **kwargs)
    rng = np.random.default_rng(3)
    env.reset(seed=0)
    n, done, checked = env.n_assets, False, 0
    while not done:
        w = rng.uniform(0, 1, n) * (rng.random(n) < rng.uniform(0.1, 1.0))
        act = {"views": rng.uniform(-1, 1, n), "signals": rng.integers(0, 3, n), "weights": w, "status": 0}
        snap, truth = env._book, env.truth
        w_hat = np.where(snap.available, w, 0.0)
        w_hat = (w_hat / w_hat.sum()).round(4) if w_hat.sum() > 0 else snap.current_weights.copy()
        for valid in (True, False):
            log = DecisionLog()
            log.scores.update({"S1": float(rng.random()), "S2": float(rng.random())})
            ref = _reference(env, w_hat, valid, snap, truth, log.scores)
            w_exec, scored, info = env._scorer.score(w_hat, valid, snap, truth, log)
            assert np.array_equal(w_exec, ref["w_exec"]) and (w_exec is w_hat) == (ref["w_exec"] is w_hat)
            assert all(_same(log.scores[k], v) for k, v in ref["scores"].items())
            assert _same(scored[1], ref["ceps"]) and _same(scored[2], ref["pas"])
            assert all(_same(a, b) for a, b in zip(scored[3], ref["s3"]))
            assert _same(scored[4], ref["tau"][0]) and _same(scored[5], ref["tau"][1])
            assert scored[6:16] == ref["reports"] and all(_same(a, b) for a, b in zip(scored[6:16], ref["reports"]))
            assert _same(info["ceps"], ref["ceps"]) and _same(info["tau"], ref["tau"][0])
            checked += 1
        _, _, done, _, _ = env.step(act)
    assert checked >= 2 * 10


@pytest.mark.parametrize("interpreted", [False, True])
def test_score_parts_writes_the_masked_weights_and_matches_its_kernels(interpreted):
    """:func:`score_parts`' last N entries are ``where(A_d, w, 0)`` (signed zeros kept), and its sums are those of
    the numpy forms (compiled, and interpreted as with QUANTGYM_JIT=0)."""
    f = score_parts.py_func if interpreted else score_parts
    rng = np.random.default_rng(11)
    k = len(ASSET_CLASSES)
    for n in (1, 7, 80, 200):
        w, w0, wt, ws = (rng.uniform(0, 1, n) for _ in range(4))
        w[rng.random(n) < 0.3] = -0.0
        avail = rng.random(n) < 0.8
        cid = rng.integers(0, k, n)
        intra, inter = rng.uniform(-1, 1, k), rng.uniform(-1, 1, (k, k))
        eq, defensive = cid < 2, cid >= 4
        out = np.empty(2 * n)
        tau_hat, tau_star, mae, *_, e, b = f(w, w0, wt, ws, avail, cid, intra, inter, eq, defensive, 1e-6, k, out)
        masked = np.where(avail, w, 0.0)
        assert np.array_equal(out[n:], masked) and np.array_equal(np.signbit(out[n:]), np.signbit(masked))
        d = np.abs(w - w0)
        assert _same(tau_hat, float(d[d >= 1e-6].sum()))
        d = np.abs(wt - w0)
        assert _same(tau_star, float(d[d >= 1e-6].sum()))
        assert _same(mae, float(np.abs(w[avail] - ws[avail]).mean()) if avail.any() else 0.0)
        assert _same(e, float(w[eq].sum())) and _same(b, float(w[defensive].sum()))
