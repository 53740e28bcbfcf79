"""Paper day loop, schedule, snapshot and baseline flags (spec §2.1, §6.1, §6.2, §1.6, §8.1, §8.4)."""

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.portbench.config import PortBenchCostModel, Period, PortBenchConfig
from quantgym.envs.portbench.paper import PaperFidelity
from quantgym.envs.portbench.paper.erc import erc_sweep_renorm
from quantgym.envs.portbench.paper.market import class_correlations_propagate
from quantgym.envs.portbench.paper.simulator import PaperSimulator, paper_decision_rows, run_direct
from quantgym.envs.portbench.correlation import class_correlations


def _sim(flags, dates, rets, period, n=2):
    return PaperSimulator(dates, rets, period, lambda row: np.full(n, 1.0 / n), PortBenchCostModel.off(), 1.0,
                          tuple(f"A{i}" for i in range(n)), flags)


def test_no_mtm_on_rebalance_loses_the_decision_day_return():
    dates = pd.bdate_range("2024-01-01", "2024-01-10")  # Jan 1..5, 8..10
    rets = np.full((len(dates), 2), 0.01)  # every asset +1 % a day: NAV grows 1.01 a day whatever the weights
    per = Period("t", "2024-01-02", "2024-01-10", "weekly")  # decisions: Fri 5th and Wed 10th (last row)
    clean, paper = _sim(PaperFidelity(), dates, rets, per), _sim(PaperFidelity.only("no_mtm_on_rebalance"), dates, rets, per)
    assert list(clean.decision_rows) == list(paper.decision_rows) == [4, 7]
    for s in (clean, paper):
        s.advance_to(4)
    # clean marks Jan 2, 3, 4, 5: 1.01^4; paper skips the decision day Jan 5: 1.01^3
    assert clean.nav == pytest.approx(1.01 ** 4)
    assert paper.nav == pytest.approx(1.01 ** 3)
    for s in (clean, paper):
        s.trade(np.array([0.5, 0.5]))
        s.advance_to(7)
    # then Jan 8, 9 are marked, the decision day Jan 10 is lost again in paper mode
    assert clean.nav == pytest.approx(1.01 ** 7) and paper.nav == pytest.approx(1.01 ** 5)
    assert len(paper.nav_history) == len(clean.nav_history)  # one NAV point per day in both


def test_skip_start_decision_initial_state_and_first_decision():
    dates = pd.bdate_range("2023-12-25", "2024-02-09")
    rets = np.zeros((len(dates), 3))
    per = Period("t", "2024-01-01", "2024-02-09", "monthly")
    clean = _sim(PaperFidelity(), dates, rets, per, 3)
    paper = _sim(PaperFidelity.only("skip_start_decision"), dates, rets, per, 3)
    # clean: first decision = first rebalance date >= start (Mon Jan 1 is a Mon-Fri date here)
    assert dates[clean.decision_rows[0]] == pd.Timestamp("2024-01-01")
    assert clean.nav_dates[0] == pd.Timestamp("2023-12-29")
    # paper: the start date carries the initial NAV, round6(1/3) on every asset, first decision Feb 1
    assert paper.nav_dates[0] == pd.Timestamp("2024-01-01")
    np.testing.assert_array_equal(paper.weights, np.full(3, 0.333333))
    assert [str(dates[r].date()) for r in paper.decision_rows] == ["2024-02-01"]
    paper.advance_to(paper.last_row)
    # one return per Mon-Fri date after the start: Jan 2 .. Feb 9 = 29 returns
    assert len(paper.daily_returns()) == 29


def test_weekly_friday_schedule():
    # a calendar without Good Friday 2024-03-29
    dates = pd.bdate_range("2024-03-18", "2024-04-12").drop(pd.Timestamp("2024-03-29"))
    per = Period("t", "2024-03-18", "2024-04-12", "weekly")
    clean = [str(dates[r].date()) for r in paper_decision_rows(dates, per, PaperFidelity())]
    fri = [str(dates[r].date()) for r in paper_decision_rows(dates, per, PaperFidelity.only("weekly_friday"))]
    # clean: last trading day of each week (Thu 28th in the Good-Friday week); paper: Fridays only
    assert clean == ["2024-03-22", "2024-03-28", "2024-04-05", "2024-04-12"]
    assert fri == ["2024-03-22", "2024-04-05", "2024-04-12"]


def test_paper_2024_schedule_on_bundled_data():
    r = run_direct("equal_weight", "normal_2024", PaperFidelity.paper())
    # §2.1 / §6.1 paper: initial EW on 2024-01-01, 11 decisions from Feb 1, 261 Mon-Fri returns
    assert r.first_decision == "2024-02-01" and r.n_decisions == 11 and len(r.nav) == 262
    assert r.nav.index[0] == pd.Timestamp("2024-01-01")
    # §11.1: 89_no_crypto EqW 2024 = 12.31 / 0.921 / 8.20 / -4.47
    m = r.metrics
    assert (round(m["ret_pct"], 2), round(m["sharpe"], 3), round(m["vol_pct"], 2), round(m["maxdd_pct"], 2)) == (
        12.31, 0.921, 8.20, -4.47)


def test_mdd_no_start_peak_in_direct_runs():
    clean = run_direct("sixty_forty", "covid_2020", PaperFidelity())
    paper = run_direct("sixty_forty", "covid_2020", PaperFidelity.only("mdd_no_start_peak"))
    # same NAV path, only the drawdown convention differs (§7.1)
    pd.testing.assert_series_equal(clean.nav, paper.nav)
    assert clean.metrics["sharpe"] == paper.metrics["sharpe"]
    from quantgym.metrics import max_drawdown

    r = clean.nav.pct_change().dropna().to_numpy()
    assert paper.metrics["max_drawdown"] == pytest.approx(max_drawdown(r, include_start=False))
    assert clean.metrics["max_drawdown"] == pytest.approx(max_drawdown(r, include_start=True))


def test_own_calendar_windows_tiny_panel():
    from ._panel import TICKERS, _panel
    from quantgym.envs.portbench.paper.data import build_paper_data
    from quantgym.envs.portbench.paper.market import PaperMarketView

    flags = PaperFidelity(weekday_calendar=True, own_calendar_windows=True)
    d = build_paper_data(flags, raw=_panel(), tickers=TICKERS)
    cfg = PortBenchConfig(lookback=3, window_days=10, min_obs=3, paper=flags)
    v = PaperMarketView(d, cfg)
    t = list(d.dates).index(pd.Timestamp("2024-01-16"))
    snap = v.snapshot(t, np.full(4, 0.25), 1.0)
    s, c = d.tickers.index("SPY"), d.tickers.index("BTC-USD")
    # SPY: its last 3 own returns (Thu 11th, Fri 12th, Tue 16th; no holiday row); BTC: last 3 calendar days
    spy = snap.returns[:, s][np.isfinite(snap.returns[:, s])]
    np.testing.assert_allclose(spy, [103 / 102 - 1, 104 / 103 - 1, 105 / 104 - 1])
    btc_dates = snap.window_dates[np.isfinite(snap.returns[:, c])]
    assert [str(x.date()) for x in btc_dates] == ["2024-01-14", "2024-01-15", "2024-01-16"]
    # trailing BTC return over Sun..Tue: 1.1 * 1 * 1 - 1
    assert snap.trailing_return[c] == pytest.approx(0.1)
    assert snap.available.all()  # non-empty windows (min_obs is not applied in paper mode)
    # clean windows on the same data: 3 rows of the Mon-Fri calendar (holiday's repeated return included)
    clean_v = PaperMarketView(d, cfg.replace(paper=flags.replace(own_calendar_windows=False)))
    cs = clean_v.snapshot(t, np.full(4, 0.25), 1.0)
    assert cs.returns.shape[0] == 3 and cs.returns[1, s] == pytest.approx(104 / 103 - 1)


def test_nan_correlations_propagate_into_class_averages():
    corr = np.array([[1.0, 0.5, np.nan, 0.2], [0.5, 1.0, 0.3, 0.1], [np.nan, 0.3, 1.0, 0.4], [0.2, 0.1, 0.4, 1.0]])
    cid = np.array([0, 0, 0, 1])
    avail = np.ones(4, bool)
    intra_c, inter_c = class_correlations(corr, cid, avail)
    intra_p, inter_p = class_correlations_propagate(corr, cid, avail)
    # clean skips the NaN pair: mean(0.5, 0.3) = 0.4; paper: NaN
    assert intra_c[0] == pytest.approx(0.4) and np.isnan(intra_p[0])
    # a class pair without NaN is unchanged: mean(0.2, 0.1, 0.4)
    assert inter_p[0, 1] == pytest.approx(inter_c[0, 1]) == pytest.approx(0.7 / 3)


def test_erc_sweep_renorm_2x2_stopping_point():
    s = np.array([[0.04, 0.006], [0.006, 0.01]])
    w = erc_sweep_renorm(s)
    np.testing.assert_allclose(w, [0.3637, 0.6363], atol=5e-5)
    rc = w * (s @ w)
    assert abs(rc[0] - rc[1]) > 1e-4  # not equal risk
    np.testing.assert_allclose(erc_sweep_renorm(s, renormalise=False), [1 / 3, 2 / 3], atol=1e-6)


def test_baseline_hooks_eqw_all_assets_and_erc():
    from quantgym.envs.portbench.baselines import make_baseline

    rng = np.random.default_rng(0)
    r = rng.normal(0, 0.01, (60, 4)) * np.array([1.0, 2.0, 0.5, 1.5])
    avail = np.array([True, True, True, False])
    eq = make_baseline("equal_weight")
    np.testing.assert_allclose(eq.allocate(r, avail), [1 / 3, 1 / 3, 1 / 3, 0], atol=1e-6)
    eq.paper = PaperFidelity.only("eqw_all_assets")
    np.testing.assert_allclose(eq.allocate(r, avail), [0.25] * 4)  # unavailable asset included
    crp = make_baseline("cov_risk_parity")
    clean_w = crp.allocate(r, avail)
    crp.paper = PaperFidelity.only("erc_sweep_renorm")
    paper_w = crp.allocate(r, avail)
    cov = 252 * np.cov(r[:, :3], rowvar=False)
    expect = erc_sweep_renorm(cov + 1e-4 * np.mean(np.diag(cov)) * np.eye(3))
    np.testing.assert_allclose(paper_w[:3], np.round(expect, 6), atol=1e-6)
    assert paper_w[3] == 0 and np.abs(paper_w - clean_w).max() > 1e-4
