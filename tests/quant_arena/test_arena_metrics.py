"""Metric vectors, the score transform and diversity (spec quant_arena.md §5, §6, §10.11–§10.13, §10.16)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quantgym.envs.quant_arena.executor import evaluate_scores
from quantgym.envs.quant_arena.config import ARENA_VERSION, ArenaScoringConfig
from quantgym.envs.quant_arena.account import reference_path, window_rows
from quantgym.envs.quant_arena.metrics import (arr, coverage, daily_rank_ic, diversity,
                                               information_ratio, logistic, long_short, score_window, signal_metrics,
                                               total_score)


def test_scoring_defaults_are_the_spec():
    c = ArenaScoringConfig()
    assert c.version == ARENA_VERSION == "qa-v1"
    assert (c.n_ann, c.scale_r, c.scale_sr, c.scale_ic, c.scale_a, c.scale_ls, c.scale_to) == (
        242, 0.20, 1.0, 0.03, 2.0, 1.5, 0.15)
    assert (c.w_r, c.w_l, c.w_sig, c.cluster_threshold, c.qualify_threshold, c.diversity_scale) == (
        0.60, 0.20, 0.05, 0.7, 0.05, 32)
    with pytest.raises(Exception):
        c.n_ann = 252  # frozen


def test_example_e_rankic_and_long_short():
    # scores A..E = 3,1,1,2,5; labels .02,-.01,0,.01,.03: ranks (4,1.5,1.5,3,5) vs (4,1,2,3,5)
    # Σxy = 9.5, Σx² = 9.5, Σy² = 10 -> 9.5/√95 = 0.97468
    s = np.array([[3, 1, 1, 2, 5.0]])
    y = np.array([[0.02, -0.01, 0.0, 0.01, 0.03]])
    assert daily_rank_ic(s, y)[0] == pytest.approx(9.5 / math.sqrt(95))
    ls, q = long_short(s, y)
    # order E, A, D, B, C (B before C by symbol); k = 1: LS = 0.03 - 0.00
    assert ls[0] == pytest.approx(0.03)
    assert q[0].tolist() == pytest.approx([0.03, 0.02, 0.01, -0.01, 0.0])


def test_rankic_edge_cases_and_ir():
    y = np.array([[0.01, 0.02, 0.03, 0.04, 0.05]])
    assert daily_rank_ic(np.ones((1, 5)), y)[0] == 0.0            # constant scores -> 0
    assert np.isnan(daily_rank_ic(np.array([[1, 2, 3, 4, np.nan]]), y)[0])  # 4 pairs < 5 -> invalid
    assert np.isnan(daily_rank_ic(np.full((1, 5), np.nan), y)[0])
    # A = mean/std(ddof 1)*√242: ICs 0.1, 0.3 -> 0.2/0.141421*15.556 = 22.0
    assert information_ratio(np.array([0.1, 0.3, np.nan])) == pytest.approx(0.2 / np.std([0.1, 0.3], ddof=1)
                                                                             * math.sqrt(242))
    assert information_ratio(np.array([0.1])) == 0.0
    from quantgym.metrics import sharpe  # the long-short spread's Sharpe (ls_sharpe)

    assert sharpe([0.01, 0.03, np.nan], 0.0, 242, finite_only=True, form="ratio") == pytest.approx(
        0.02 / np.std([0.01, 0.03], ddof=1) * math.sqrt(242))
    assert sharpe([0.02, 0.02], 0.0, 242, finite_only=True, form="ratio") == 0.0


def test_long_short_ten_stocks():
    # 10 pairs, k = 2: top two labels 0.05, 0.04; bottom two -0.04, -0.05 -> LS = 0.045 - (-0.045) = 0.09
    s = np.arange(10, 0, -1, dtype=float)[None, :]
    y = np.array([[0.05, 0.04, 0.03, 0.02, 0.01, 0.0, -0.01, -0.02, -0.04, -0.05]])
    ls, q = long_short(s, y)
    assert ls[0] == pytest.approx(0.09)
    assert q[0, 0] == pytest.approx(0.045) and q[0, 4] == pytest.approx(-0.045)


def test_coverage_and_active_days():
    sc = np.array([[1.0, np.nan, 2.0], [np.nan, np.nan, np.nan]])
    in_view = np.array([[True, True, True], [True, True, False]])
    cov, act = coverage(sc, in_view)
    assert cov == pytest.approx(2 / 5) and act == 0.5


def test_arr_uses_242_days():
    # paper check: 1.170 over 242 days -> 17.0 %
    nav = np.concatenate([[1.0], np.full(241, 1.0), [1.17]])
    assert arr(nav) == pytest.approx(0.17)
    assert arr(np.array([1.0, 1.0])) == 0.0


def test_logistic_transform_is_half_at_zero_and_monotone():
    for c in (0.2, 1.0, 0.03, 2.0, 1.5, 0.15):
        assert logistic(0.0, c) == 0.5
        xs = np.linspace(-5, 5, 101)
        v = [logistic(x, c) for x in xs]
        assert all(b >= a for a, b in zip(v, v[1:]))
        assert 0.0 <= min(v) and max(v) <= 1.0
    assert logistic(float("nan"), 1.0) == 0.5 and logistic(float("inf"), 1.0) == 0.5  # non-finite enters as 0
    assert logistic(-1e6, 0.2) == 0.0


def test_example_f_score():
    b = score_window(-0.05, 0.8, 0.02, 1.5, 0.6, 0.15, 8)
    assert [b.components[k] for k in ("s_R", "s_L", "s_IC", "s_A", "s_LS", "s_TO")] == pytest.approx(
        [0.437823, 0.689974, 0.660756, 0.679179, 0.598688, 0.660756], abs=1e-6)
    # Q = 0.262694 + 0.137995 + 0.05*2.599379 = 0.530658; D = 8/32; S = 100*Q*0.925 = 49.086
    assert b.Q == pytest.approx(0.530658, abs=1e-6)
    assert b.D == 0.25
    assert b.S == pytest.approx(49.086, abs=1e-3)
    # market tracker: zero excess and zero Sharpe -> s_R = s_L = 0.5
    t = score_window(0.0, 0.0, 0.0, 0.0, 0.0, 0.25, 0)
    assert t.components["s_R"] == t.components["s_L"] == 0.5 and t.Q == pytest.approx(0.5)
    assert total_score(40.0, 60.0) == 50.0
    assert score_window(0, 0, 0, 0, 0, 0.25, 100).D == 1.0


def test_example_g_diversity():
    f1 = np.arange(1, 9, dtype=float)
    f2 = f1.copy()
    f2[[3, 4]] = f2[[4, 3]]
    f3 = np.array([3, 8, 1, 6, 2, 7, 5, 4], dtype=float)
    f4 = np.ones(8)
    d = diversity(np.stack([f1, f2, f3, f4])[None], (f1 + f3)[None])
    # ρ(f1,f2) = 0.976 -> one cluster; ρ(f1,f3) = 0.071, ρ(f2,f3) = 0.167 -> f3 alone; f4 dropped
    assert d["labels"][0] == d["labels"][1] != d["labels"][2] and d["labels"][3] == -1
    assert d["rho_score"][:3] == pytest.approx([0.764, 0.800, 0.667], abs=1e-3)
    assert (d["K"], d["D"]) == (2, 0.0625)
    assert 0.9 + 0.1 * d["D"] == pytest.approx(0.90625)


def test_diversity_weak_features_do_not_qualify():
    rng = np.random.default_rng(0)
    score = rng.normal(size=(3, 200))
    noise = rng.normal(size=(3, 5, 200))
    d = diversity(noise, score)
    assert d["n_features"] == 5 and d["K"] == 0  # unrelated features: |ρ̄| < 0.05 with the score... mostly
    feats = np.concatenate([noise, score[:, None, :]], axis=1)
    assert diversity(feats, score)["K"] == 1


def test_reference_anchors_of_the_shipped_series(bundled):
    # §10.10 anchors, full 5,086-stock panel: 2024 end 1.0434, low 0.7022 on 2024-02-05; research 0.9788
    d0, n = window_rows(bundled, "2024-01-01", "2024-12-31")
    assert n == 242 and str(bundled.dates[d0]) == "2023-12-29"
    p = reference_path(bundled, d0, n)
    assert p[-1] == pytest.approx(1.0434, abs=5e-5)
    assert p.min() == pytest.approx(0.7022, abs=5e-5) and str(bundled.dates[d0 + int(p.argmin())]) == "2024-02-05"
    assert arr(p) == pytest.approx(0.0434, abs=5e-5)
    d0, n = window_rows(bundled, "2022-01-01", "2023-12-31")
    assert n == 484 and str(bundled.dates[d0]) == "2021-12-31"
    assert reference_path(bundled, d0, n)[-1] == pytest.approx(0.9788, abs=5e-5)


def test_all_cash_submission_scores_43_6(bundled):
    # §10.12: all cash on the default sealed window: s_R = g(-0.0434/0.2) = 0.446, s_TO = 0.841 -> S ≈ 43.6
    d0, n = window_rows(bundled, "2024-01-01", "2024-12-31")
    ev = evaluate_scores(bundled, d0, n, np.full((n, bundled.N), np.nan))
    m = ev["metrics"]
    assert m["arr"] == 0.0 and m["exposure"] == 0.0 and m["turnover"] == 0.0
    assert ev["score"].components["s_R"] == pytest.approx(0.446, abs=1e-3)
    assert ev["score"].components["s_TO"] == pytest.approx(0.841, abs=1e-3)
    assert ev["score"].S == pytest.approx(43.6, abs=0.05)


def _day_by_day(scores, labels, min_pairs=5, quantiles=5):
    """RankIC and long-short of spec §10.11 one day at a time (scipy's average ranks), for comparison."""
    from scipy.stats import rankdata

    ic, ls, qm = [], [], []
    for s, y in zip(scores, labels):
        m = np.flatnonzero(np.isfinite(s) & np.isfinite(y))
        if m.size < min_pairs:
            ic.append(math.nan), ls.append(math.nan), qm.append([math.nan] * quantiles)
            continue
        x, r = rankdata(s[m]), rankdata(y[m])
        x, r = x - x.mean(), r - r.mean()
        den = math.sqrt(float(x @ x) * float(r @ r))
        ic.append(float(x @ r) / den if den > 0 else 0.0)
        z = y[m[np.lexsort((m, -s[m]))]]
        k = m.size // quantiles
        ls.append(float(z[:k].mean() - z[-k:].mean()) if k else math.nan)
        qm.append([float(p.mean()) if p.size else math.nan for p in np.array_split(z, quantiles)])
    return np.array(ic), np.array(ls), np.array(qm)


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_signal_metrics_equal_the_day_by_day_definition(seed):
    # ties (integer scores, rounded labels), NaNs, constant days and days below min_pairs: the same bits
    rng = np.random.default_rng(seed)
    D, N = 40, int(rng.integers(3, 70))
    s = rng.integers(0, 4, (D, N)).astype(float) if seed % 2 else rng.standard_normal((D, N))
    y = np.round(rng.standard_normal((D, N)) * 0.02, 3)
    s[rng.random((D, N)) < 0.3] = np.nan
    y[rng.random((D, N)) < 0.1] = np.nan
    s[0] = 1.0
    ic, ls, qmeans = _day_by_day(s, y)
    np.testing.assert_array_equal(daily_rank_ic(s, y), ic)
    got_ls, got_q = long_short(s, y)
    np.testing.assert_array_equal(got_ls, ls)
    np.testing.assert_array_equal(got_q, qmeans)
    sm = signal_metrics(np.vstack([s, s[:1]]), y, np.ones((D + 1, N), bool))
    np.testing.assert_array_equal(sm["_daily_ic"], ic)
    np.testing.assert_array_equal(sm["_daily_ls"], ls)
