"""PortBench env: checker, determinism, pickling, point in time, bad input, tiny user data."""

import dataclasses
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401  (registers the ids)
from quantgym.envs.portbench.data import PortBenchData
from quantgym.envs.portbench.raw import bundled_portbench_path
from quantgym.envs.portbench.env import PortBenchEnv

PB_IDS = ["PortBench-Conservative-v0", "PortBench-Balanced-v0", "PortBench-Aggressive-v0"]
#: check_env warnings we accept (documented in docs/portbench.md): none so far
ALLOWED_WARNINGS: tuple[str, ...] = ()


@pytest.mark.parametrize("env_id", PB_IDS)
@pytest.mark.parametrize("stagewise", [False, True])
def test_env_checker_passes_without_warnings(env_id, stagewise):
    env = gym.make(env_id, period="covid_2020", stagewise=stagewise)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    bad = [str(w.message) for w in caught if not any(a in str(w.message) for a in ALLOWED_WARNINGS)]
    assert bad == []


def _rollout(env, n_steps, seed):
    env.action_space.seed(seed)
    obs, info = env.reset(seed=seed)
    out = []
    for _ in range(n_steps):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        out.append((r, float(info["nav"]), obs["weights"].copy(), obs.get("prompt")))
        if term or trunc:
            break
    return out


def test_same_seed_same_50_step_rollout():
    a = gym.make("PortBench-Balanced-v0", period="covid_2020", stagewise=True)
    b = gym.make("PortBench-Balanced-v0", period="covid_2020", stagewise=True)
    ra, rb = _rollout(a, 50, seed=7), _rollout(b, 50, seed=7)
    assert len(ra) == 50
    for x, y in zip(ra, rb):
        assert x[0] == y[0] and x[1] == y[1] and x[3] == y[3]
        np.testing.assert_array_equal(x[2], y[2])


def test_env_pickles_mid_episode():
    env = gym.make("PortBench-Aggressive-v0", period="covid_2020").unwrapped
    env.reset(seed=0)
    env.step(env.action_space.sample())
    clone = pickle.loads(pickle.dumps(env))
    act = {"views": np.zeros(env.n_assets), "signals": np.ones(env.n_assets, dtype=np.int64),
           "weights": np.full(env.n_assets, 1.0), "status": 0}
    o1, r1, *_ = env.step(act)
    o2, r2, *_ = clone.step(act)
    assert r1 == r2
    np.testing.assert_array_equal(o1["weights"], o2["weights"])


def _raw_bundle():
    root = bundled_portbench_path()
    prices = pd.read_parquet(root / "prices.parquet")
    assets = pd.read_csv(root / "assets.csv", dtype=str)
    macro = pd.read_parquet(root / "macro.parquet")
    if "date" in prices.columns:
        prices = prices.set_index("date")
    if "date" in macro.columns:
        macro = macro.set_index("date")
    return prices, dict(zip(assets["ticker"], assets["asset_class"])), macro


@pytest.mark.parametrize("oracle", ["lookback", "equal_weight"])
def test_point_in_time_garbage_after_decision_date(oracle):
    prices, classes, macro = _raw_bundle()
    d = pd.Timestamp("2024-03-01")
    rng = np.random.default_rng(0)
    g_prices = prices.copy()
    after = g_prices.index > d
    g_prices.loc[after] = rng.uniform(1, 1e4, size=g_prices.loc[after].shape)
    g_prices.loc[after & (np.arange(len(g_prices)) % 7 == 0)] = np.nan
    g_macro = macro.copy()
    m_after = g_macro.index > d
    g_macro.loc[m_after] = rng.uniform(-50, 50, size=g_macro.loc[m_after].shape)
    tickers = list(quantgym.envs.portbench.universe.CANONICAL_TICKERS)
    clean = PortBenchData.from_frames(prices, classes, macro=macro, tickers=tickers)
    dirty = PortBenchData.from_frames(g_prices, classes, macro=g_macro, tickers=tickers)
    period = dict(start="2024-03-01", end="2024-06-30", freq="monthly")
    envs = [PortBenchEnv(profile="balanced", period=period, data=x, oracle=oracle, stagewise=True) for x in (clean, dirty)]
    (o1, i1), (o2, i2) = envs[0].reset(seed=0), envs[1].reset(seed=0)
    assert i1["date"] == "2024-03-01"
    for k in o1:
        if k == "prompt":
            assert o1[k] == o2[k]
        else:
            np.testing.assert_array_equal(o1[k], o2[k], err_msg=k)
    for attr in ("v_star", "s_star", "w_star"):
        np.testing.assert_array_equal(getattr(envs[0].truth, attr), getattr(envs[1].truth, attr), err_msg=attr)
    # NAV up to the decision close is identical too
    assert envs[0].sim.nav == envs[1].sim.nav


def _env(**kw):
    env = PortBenchEnv(profile="conservative", period="covid_2020", **kw)
    env.reset(seed=0)
    return env


def _ok_action(env):
    n = env.n_assets
    return {"views": np.zeros(n), "signals": np.ones(n, dtype=np.int64), "weights": np.full(n, 1.0 / n), "status": 0}


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda a, n: {**a, "extra": 1}, "unknown action key"),
        (lambda a, n: {k: v for k, v in a.items() if k != "weights"}, "missing key 'weights'"),
        (lambda a, n: {**a, "weights": np.ones(n - 1)}, r"shape \(80,\)"),
        (lambda a, n: {**a, "views": np.array(["x"] * n)}, "must be numeric"),
        (lambda a, n: {**a, "status": 5}, "status"),
        (lambda a, n: [1, 2, 3], "must be a dict"),
    ],
)
def test_malformed_action_raises_clear_value_error(mutate, match):
    env = _env()
    with pytest.raises(ValueError, match=match):
        env.step(mutate(_ok_action(env), env.n_assets))


@pytest.mark.parametrize(
    "field, value, stage",
    [
        ("weights", np.nan, "S3"),
        ("weights", np.inf, "S3"),
        ("weights", -0.1, "S3"),
        ("weights", 0.0, "S3"),  # all zero
        ("views", 1.5, "S1"),
        ("views", np.nan, "S1"),
        ("signals", 7, "S2"),
    ],
)
def test_bad_values_are_invalid_stage_not_crash(field, value, stage):
    env = _env()
    act = _ok_action(env)
    arr = np.array(act[field], dtype=np.float64)
    arr[:] = value if field != "weights" or value == 0.0 else arr
    if field == "weights" and value != 0.0:
        arr[3] = value
    act[field] = arr
    w_before = env.snapshot.current_weights.copy()
    obs, r, term, trunc, info = env.step(act)
    assert stage in info["invalid"] and info["invalid"][stage]
    assert info["stage_scores"][stage] == 0.0
    assert not term
    if stage == "S3":  # fallback = current weights (renormalised over A_d), traded
        rec = env.records[-1]
        held = np.array([rec["weights"].get(t, 0.0) for t in env.view.tickers])
        np.testing.assert_allclose(held, w_before / w_before.sum(), atol=1e-9)
    # the episode continues normally
    obs, r, term, trunc, info = env.step(_ok_action(env))
    assert info["invalid"] == {}


def test_refusal_status_gives_fallback_and_zero_scores_stagewise():
    env = PortBenchEnv(profile="balanced", period="covid_2020", stagewise=True)
    obs, info = env.reset(seed=0)
    assert obs["stage"] == 0 and "S1 MARKET INTERPRETATION" in obs["prompt"]
    n = env.n_assets
    obs, r, *_ , info = env.step({"views": np.zeros(n), "status": 1})
    assert info["stage_scores"]["S1"] == 0.0 and info["refused"] and r == 0.0
    assert obs["stage"] == 1 and "view=+0.000" in obs["prompt"]
    obs, r, *_, info = env.step({"signals": np.full(n, 2)})
    assert obs["stage"] == 2 and "S3 WEIGHT OPTIMISATION" in obs["prompt"] and "[INVESTOR PROFILE]" in obs["prompt"]
    obs, r, term, trunc, info = env.step({"weights": np.full(n, 1.0), "status": 2})
    assert info["unparseable"] and info["stage_scores"]["S3"] == 0.0
    assert r == info["ceps"] and 0.0 <= r <= 1.0


def test_log_return_reward_sums_to_period_log_return():
    env = PortBenchEnv(profile="balanced", period="covid_2020", reward="log_return")
    env.reset(seed=0)
    nav0 = env.nav_pre
    total = 0.0
    term = False
    while not term:
        _, r, term, _, info = env.step(_ok_action(env))
        total += r
    assert total == pytest.approx(np.log(env.sim.nav / nav0))
    m = info["episode_metrics"]
    assert m["n_days"] == len(env.sim.nav_history) - 1
    assert "dd_within_tolerance" in info


def _tiny_data():
    # 3 assets over 90 trading days; a crypto column on a 7-day calendar
    days = pd.date_range("2024-01-01", periods=130, freq="D")
    rng = np.random.default_rng(42)
    px = pd.DataFrame(index=days, dtype=float)
    px["SPY"] = 100 * np.cumprod(1 + rng.normal(0.001, 0.01, len(days)))
    px["TLT"] = 90 * np.cumprod(1 + rng.normal(0.0, 0.005, len(days)))
    px["BTC-USD"] = 40000 * np.cumprod(1 + rng.normal(0.002, 0.03, len(days)))
    weekend = days.day_of_week >= 5
    px.loc[weekend, ["SPY", "TLT"]] = np.nan
    return PortBenchData.from_frames(px, {"SPY": "equity", "TLT": "bond", "BTC-USD": "crypto"})


def test_user_data_through_data_kwarg():
    data = _tiny_data()
    env = gym.make("PortBench-Balanced-v0", data=data, period=dict(start="2024-04-01", end="2024-05-10", freq="weekly"),
                   stagewise=True)
    obs, info = env.reset(seed=1)
    assert obs["weights"].shape == (3,) and obs["corr"].shape == (3, 3)
    check_env(env.unwrapped)
    env.reset(seed=1)
    term = False
    while not term:
        obs, r, term, trunc, info = env.step(env.action_space.sample())
    assert info["episode_metrics"]["n_rebalances"] >= 5


def test_paper_mode_s3_truth_is_the_solvers_answer_when_every_mean_is_negative():
    # spec §11.9: equal weight on B when max μ ≤ 0 is a clean-mode rule; paper mode keeps the solver's
    # answer (PaperFidelity.s3_solver_nonpositive_mu, on in fidelity="paper")
    from quantgym.envs.portbench.paper.config import PaperFidelity

    days = pd.bdate_range("2024-01-01", periods=110)
    rng = np.random.default_rng(7)
    px = pd.DataFrame({t: 100 * np.cumprod(1 + rng.normal(mu, sd, len(days)))
                       for t, mu, sd in (("SPY", -0.004, 0.010), ("TLT", -0.002, 0.004), ("GLD", -0.003, 0.02))},
                      index=days)
    data = PortBenchData.from_frames(px, {"SPY": "equity", "TLT": "bond", "GLD": "commodity"})
    period = dict(start="2024-04-01", end="2024-05-10", freq="weekly")
    w = {}
    for mode, paper in (("clean", None), ("paper", PaperFidelity.only("s3_solver_nonpositive_mu"))):
        env = PortBenchEnv(data=data, period=period, stagewise=True, paper=paper)
        env.reset(seed=0)
        assert env.snapshot.returns[:, env.snapshot.available].mean(axis=0).max() <= 0
        w[mode] = np.asarray(env.truth.w_star)
        assert env.config.fidelity == mode
    np.testing.assert_array_equal(w["clean"], [round(1 / 3, 4)] * 3)
    assert w["paper"].sum() == pytest.approx(1.0, abs=1e-3) and not np.allclose(w["paper"], w["clean"])
    assert PaperFidelity.paper().s3_solver_nonpositive_mu


def test_clear_errors_for_bad_kwargs():
    with pytest.raises(ValueError, match="unknown period"):
        PortBenchEnv(period="dotcom_2000")
    with pytest.raises(ValueError, match="unknown profile"):
        PortBenchEnv(profile="yolo")
    with pytest.raises(ValueError, match="fidelity"):
        PortBenchEnv(fidelity="bogus")
    with pytest.raises(ValueError, match="no trading day"):
        PortBenchEnv(period=dict(start="2030-01-01", end="2030-06-30", freq="monthly"))
    with pytest.raises(ValueError, match="data="):
        PortBenchEnv(data=123)


def test_unnormalised_weights_are_recorded_as_coerced_not_silent():
    env = _env()
    act = _ok_action(env)
    act["weights"] = np.clip(act["weights"] * 5, 0, 1)  # sums to 5 on the available set
    _, _, _, _, info = env.step(act)
    assert info["invalid"] == {}
    assert "normalised to 1" in info["coerced"]["S3"]
    assert "normalised" in env.records[-1]["coerced"]["S3"]
    act = _ok_action(env)
    a = env.snapshot.available
    act["weights"] = a / a.sum()  # a proper allocation over the available set: nothing to coerce
    _, _, _, _, info = env.step(act)
    assert info["coerced"] == {}


@pytest.mark.parametrize("kw, match", [({"alpha": 5}, "alpha"), ({"lam": -3}, "lam"), ({"alpha": -0.1}, "alpha")])
def test_scoring_parameters_are_range_checked(kw, match):
    with pytest.raises(ValueError, match=match):
        PortBenchEnv(period="covid_2020", **kw)


def test_period_start_end_freq_string():
    env = PortBenchEnv(period="2020-03-01:2020-03-31:weekly")
    _, info = env.reset(seed=0)
    assert env.period.freq == "weekly" and info["date"] >= "2020-03-01"
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        PortBenchEnv(period="2020-03:2020-04")


def test_config_and_kwarg_shortcuts_give_identical_episodes():
    """``config=`` is the composed form; ``alpha``/``lam``/``oracle``/``prompt_style`` are shortcuts into it."""
    from quantgym.envs.portbench.config import PortBenchConfig, PortBenchScoringConfig

    cfg = PortBenchConfig(scoring=PortBenchScoringConfig(alpha=0.3, lam=0.2, oracle="equal_weight"),
                          prompt_style="compact")
    by_kw = _env(alpha=0.3, lam=0.2, oracle="equal_weight", prompt_style="compact")
    by_cfg = _env(config=cfg)
    assert by_kw.config == by_cfg.config
    assert by_cfg.config.scoring.alpha == 0.3  # the config's values are kept (not reset to the kwarg defaults)
    rng = np.random.default_rng(0)
    done = False
    while not done:
        a = _ok_action(by_kw)
        a["weights"] = rng.dirichlet(np.ones(by_kw.n_assets))
        o1, r1, t1, u1, i1 = by_kw.step(a)
        o2, r2, t2, u2, i2 = by_cfg.step(a)
        assert (r1, t1, u1) == (r2, t2, u2)
        for k in o1:
            np.testing.assert_array_equal(o1[k], o2[k], err_msg=k)
        done = t1 or u1
    assert by_kw.episode_metrics() == by_cfg.episode_metrics()
    # a kwarg given with config= replaces the config's value
    assert _env(config=cfg, alpha=0.7).config.scoring == dataclasses.replace(cfg.scoring, alpha=0.7)


def test_recent_2025_period_runs_a_monthly_episode_over_calendar_2025():
    from quantgym.envs.portbench.config import BENCH_PERIODS

    assert "recent_2025" not in BENCH_PERIODS  # an extra window, not a bench period
    env = PortBenchEnv(profile="balanced", period="recent_2025")
    env.reset(seed=0)
    dates, term = [], False
    while not term:
        _, _, term, _, info = env.step(_ok_action(env))
        dates.append(info["date"])
    m = info["episode_metrics"]
    assert 10 <= len(dates) <= 12 and all(d.startswith("2025-") for d in dates)  # monthly over 2025
    assert np.isfinite(m["sharpe"]) and m["n_days"] > 200
