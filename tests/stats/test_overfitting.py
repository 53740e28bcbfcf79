"""Deflated Sharpe Ratio and PBO (CSCV): the paper's worked example and independent computations."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from quantgym.stats.overfitting import (EULER_GAMMA, deflated_sharpe_ratio, expected_max_sharpe, pbo_cscv,
                                        per_period_sharpe, probabilistic_sharpe_ratio)


# ----------------------------------------------------------------------------------------------- DSR
def test_dsr_worked_example_of_bailey_lopez_de_prado_2014():
    """§ "A numerical example": N = 100 trials, V[SR] = 1/2 (annualised), SR = 2.5 (annualised),
    T = 1250 daily returns (250 a year), skewness -3, kurtosis 10: SR_0 = 0.1132 per day, DSR = 0.9004."""
    sr0 = expected_max_sharpe(100, 0.5 / 250)
    assert sr0 == pytest.approx(0.1132, abs=5e-5)
    assert sr0 * math.sqrt(250) == pytest.approx(1.7894, abs=5e-4)
    dsr = probabilistic_sharpe_ratio(2.5 / math.sqrt(250), sr0, 1250, -3.0, 10.0)
    assert dsr == pytest.approx(0.9004, abs=5e-5)


def _independent_dsr(r: np.ndarray, trial_sr: np.ndarray) -> float:
    """DSR written out separately: scipy moments, scipy.stats.norm, the paper's eq. (6) and (9)."""
    t = r.size
    sr = r.mean() / r.std(ddof=1)
    g3 = stats.skew(r)  # biased (population) moments, as in the paper
    g4 = stats.kurtosis(r, fisher=False)
    n = trial_sr.size
    v = np.var(trial_sr, ddof=1)
    emax = math.sqrt(v) * ((1 - np.euler_gamma) * stats.norm.ppf(1 - 1 / n)
                           + np.euler_gamma * stats.norm.ppf(1 - 1 / (n * np.e)))
    return float(stats.norm.cdf((sr - emax) * math.sqrt(t - 1) / math.sqrt(1 - g3 * sr + (g4 - 1) / 4 * sr ** 2)))


def test_dsr_matches_an_independent_computation_on_a_seeded_series():
    rng = np.random.default_rng(7)
    trials = rng.standard_t(5, size=(484, 6)) * 0.01 + 0.0004
    srs = trials.mean(axis=0) / trials.std(axis=0, ddof=1)
    assert np.allclose(per_period_sharpe(trials), srs)
    pick = int(np.argmax(srs))
    out = deflated_sharpe_ratio(trials[:, pick], srs)
    assert out["reason"] is None and out["n_trials"] == 6 and out["n_obs"] == 484
    assert out["dsr"] == pytest.approx(_independent_dsr(trials[:, pick], srs), rel=1e-12)
    assert out["skew"] == pytest.approx(stats.skew(trials[:, pick]), rel=1e-12)
    assert out["kurtosis"] == pytest.approx(stats.kurtosis(trials[:, pick], fisher=False), rel=1e-12)
    assert out["psr0"] > out["dsr"]  # deflating for 6 trials lowers the probability
    assert EULER_GAMMA == pytest.approx(np.euler_gamma, abs=1e-15)


def test_dsr_more_trials_deflate_more_and_degenerate_inputs_give_nan_with_reason():
    rng = np.random.default_rng(1)
    r = rng.normal(0.001, 0.01, 300)
    srs = rng.normal(0.0, 0.05, 20)
    few = deflated_sharpe_ratio(r, srs[:3])
    many = deflated_sharpe_ratio(r, srs[:3], n_trials=1000)
    assert many["sr0"] > few["sr0"] and many["dsr"] < few["dsr"]
    one = deflated_sharpe_ratio(r, srs[:1])
    assert math.isnan(one["dsr"]) and "at least 2" in one["reason"] and 0 < one["psr0"] < 1
    short = deflated_sharpe_ratio(r[:2], srs)
    assert math.isnan(short["dsr"]) and "at least 3" in short["reason"]
    flat = deflated_sharpe_ratio(np.zeros(50), srs)
    assert math.isnan(flat["dsr"]) and "volatility" in flat["reason"]
    with pytest.raises(ValueError):
        expected_max_sharpe(1, 0.1)


# ----------------------------------------------------------------------------------------------- PBO
def _brute_force_pbo(m: np.ndarray, s: int) -> tuple[float, np.ndarray]:
    """CSCV by loops over the splits, with scipy's average ranks (paper §2, steps 1-6)."""
    t, n = m.shape
    rows = t // s
    m = m[t - rows * s:]
    blocks = [m[i * rows:(i + 1) * rows] for i in range(s)]
    logits = []
    for combo in combinations(range(s), s // 2):
        train = np.vstack([blocks[i] for i in combo])
        test = np.vstack([blocks[i] for i in range(s) if i not in combo])

        def sr(x):
            sd = x.std(axis=0, ddof=1)
            return np.array([x[:, j].mean() / sd[j] if sd[j] > 0 else 0.0 for j in range(n)])

        best = int(np.argmax(sr(train)))
        w = stats.rankdata(sr(test), method="average")[best] / (n + 1)
        logits.append(math.log(w / (1 - w)))
    logits = np.array(logits)
    return float(np.mean(logits <= 0)), logits


def test_pbo_matches_a_brute_force_implementation():
    rng = np.random.default_rng(3)
    m = rng.normal(0.0, 0.01, (203, 7)) + np.linspace(0, 0.0005, 7)  # 203 = 8 * 25 + 3 dropped rows
    out = pbo_cscv(m, n_blocks=8)
    pbo, logits = _brute_force_pbo(m, 8)
    assert out["n_splits"] == 70 and out["block_rows"] == 25 and out["dropped_rows"] == 3
    assert out["reason"] is None
    assert np.allclose(out["logits"], logits, rtol=1e-9, atol=1e-12)
    assert out["pbo"] == pbo


def test_pbo_is_zero_when_one_candidate_dominates_every_block():
    rng = np.random.default_rng(4)
    m = rng.normal(0.0, 0.01, (320, 5))
    m[:, 2] = 0.01 + 0.001 * rng.standard_normal(320)  # Sharpe ~10 per day in every block
    out = pbo_cscv(m, n_blocks=16)
    assert out["n_splits"] == 12870
    assert out["pbo"] == 0.0
    assert np.allclose(out["logits"], math.log(5.0))  # rank N of N: ω = N / (N + 1)


def test_pbo_of_pure_noise_is_near_one_half():
    """Skill-less candidates: the in-sample winner is a random draw out of sample. One panel's PBO is
    noisy (the splits share data), so the mean over seeded panels is checked."""
    pbos = [pbo_cscv(np.random.default_rng(seed).normal(0.0, 0.01, (400, 40)), n_blocks=8)["pbo"]
            for seed in range(30)]
    assert 0.4 < float(np.mean(pbos)) < 0.6


def test_pbo_short_or_single_candidate_gives_nan_with_reason():
    one = pbo_cscv(np.zeros((100, 1)))
    assert math.isnan(one["pbo"]) and "at least 2" in one["reason"]
    short = pbo_cscv(np.random.default_rng(0).normal(size=(20, 3)), n_blocks=16)
    assert math.isnan(short["pbo"]) and "2 rows each" in short["reason"]
    nonfinite = np.random.default_rng(0).normal(size=(64, 3))
    nonfinite[5, 1] = np.nan
    assert pbo_cscv(nonfinite, n_blocks=4)["n_obs"] == 60
    with pytest.raises(ValueError):
        pbo_cscv(np.zeros((10, 2)), n_blocks=3)
    with pytest.raises(ValueError):
        pbo_cscv(np.zeros(10))
