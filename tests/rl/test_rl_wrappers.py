"""AllocationWrapper, RandomPeriod, RecordEpisode and the batched vector env."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401 - registers the ids
from quantgym.envs.portbench.config import PERIODS, STRESS_PERIODS
from quantgym.envs.portbench.recording import RecordEpisode
from quantgym.envs.portbench.allocation import AllocationWrapper
from quantgym.envs.portbench.allocation import LOGIT_SCALE, derived_views, masked_softmax, observation_layout
from quantgym.envs.portbench.training import EpisodeSampler, RandomPeriod, train_windows
from quantgym.envs.portbench.vector import PortBenchVectorEnv
from tests.rl import NEEDS_RL

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
ENV_ID = "PortBench-Balanced-v0"


def _wrapped(**kw):
    make_kw = {k: kw.pop(k) for k in list(kw) if k in ("scoring", "period", "reward_env")}
    env = gym.make(ENV_ID, **{("reward" if k == "reward_env" else k): v for k, v in make_kw.items()})
    return AllocationWrapper(env, **kw)


@pytest.mark.parametrize("kw", [
    {}, {"action_mode": "weights"}, {"reward": "risk_adjusted", "scoring": False},
    {"reward": "ceps", "s12": "neutral"}, {"reward": "log_return", "period": "covid_2020"},
])
def test_allocation_wrapper_passes_gymnasium_and_sb3_checkers(kw):
    env = _wrapped(**kw)
    check_env(env, skip_render_check=True)
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker", reason=NEEDS_RL)
    sb3_checker.check_env(_wrapped(**kw), warn=True)


def test_random_period_and_recording_pass_checkers_and_pickle():
    env = RecordEpisode(AllocationWrapper(RandomPeriod(gym.make(ENV_ID, scoring=False), episode_len=8),
                                          reward="log_return"))
    check_env(env, skip_render_check=True)
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker", reason=NEEDS_RL)
    sb3_checker.check_env(env, warn=True)
    env2 = pickle.loads(pickle.dumps(env))
    o1, _ = env.reset(seed=5)
    o2, _ = env2.reset(seed=5)
    np.testing.assert_array_equal(o1, o2)


def test_record_episode_on_the_raw_env_passes_both_checkers():
    env = RecordEpisode(gym.make(ENV_ID))
    check_env(env, skip_render_check=True)
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker", reason=NEEDS_RL)
    sb3_checker.check_env(RecordEpisode(gym.make(ENV_ID)), warn=True)


def test_observation_layout_and_bounds():
    env = _wrapped()
    obs, info = env.reset(seed=0)
    lay = observation_layout(80)
    assert obs.shape == (5 * 80 + 63,) == env.observation_space.shape and obs.dtype == np.float32
    assert env.observation_space.contains(obs)
    base = env.unwrapped
    np.testing.assert_allclose(obs[lay["weights"]], base.snapshot.current_weights, atol=1e-7)
    np.testing.assert_array_equal(obs[lay["available"]], base.snapshot.available.astype(np.float32))
    assert obs[lay["profile"]].tolist() == [0.0, 1.0, 0.0]  # balanced
    assert obs[lay["log_nav"]][0] == pytest.approx(np.log(info["nav"] / 1e6), abs=1e-6)
    np.testing.assert_allclose(obs[lay["trailing_return"]], np.clip(base.snapshot.trailing_return, -1, 10), atol=1e-6)


def test_logit_mapping_is_masked_softmax_and_zero_action_is_equal_weight():
    avail = np.array([True, False, True, True])
    w = masked_softmax(np.zeros(4), avail)
    np.testing.assert_allclose(w, [1 / 3, 0, 1 / 3, 1 / 3])
    a = np.array([1.0, 5.0, -1.0, 0.0])
    w = masked_softmax(a, avail)
    e = np.exp(LOGIT_SCALE * np.array([1.0, -1.0, 0.0]))
    np.testing.assert_allclose(w[[0, 2, 3]], e / e.sum())
    assert w[1] == 0.0 and w.sum() == pytest.approx(1.0)
    env = _wrapped()
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.zeros(80, np.float32))
    avail = env.unwrapped.records[-1]["n_available"]
    traded = env.unwrapped.records[-1]["weights"]
    assert len(traded) == avail and max(traded.values()) - min(traded.values()) <= 1e-4


def test_derived_views_and_signals():
    avail = np.array([True, True, True, True, False])
    w = np.array([0.0, 0.25, 0.5, 0.25, 0.0])
    v, s = derived_views(w, avail)
    assert v.tolist() == [-1.0, 0.0, 1.0, 0.0, 0.0]
    assert s.tolist() == [0, 1, 2, 1, 1]


def test_zero_weights_action_is_the_spec_invalid_fallback():
    env = _wrapped(action_mode="weights")
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.zeros(80, np.float32))
    assert "S3" in info["invalid"] and info["stage_scores"]["S3"] == 0.0


def test_bad_options_and_actions_raise_clear_errors():
    with pytest.raises(ValueError, match="stagewise"):
        AllocationWrapper(gym.make(ENV_ID, stagewise=True))
    with pytest.raises(ValueError, match="scoring"):
        AllocationWrapper(gym.make(ENV_ID, scoring=False), reward="ceps")
    with pytest.raises(ValueError, match="action_mode"):
        AllocationWrapper(gym.make(ENV_ID), action_mode="softmax")
    env = _wrapped()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.full(80, np.nan, np.float32))


def test_rewards_log_return_matches_env_and_risk_adjusted_penalises_new_drawdown():
    a = _wrapped(reward="log_return", scoring=False, period="covid_2020")
    b = _wrapped(reward="env", scoring=False, period="covid_2020", reward_env="log_return")
    c = _wrapped(reward="risk_adjusted", scoring=False, period="covid_2020")
    for e in (a, b, c):
        e.reset(seed=0)
    rng = np.random.default_rng(0)
    done, navs, peak, prev_dd = False, [], None, 0.0
    while not done:
        act = rng.uniform(-1, 1, 80).astype(np.float32)
        _, ra, done, _, ia = a.step(act)
        _, rb, _, _, _ = b.step(act)
        _, rc, _, _, ic = c.step(act)
        assert ra == pytest.approx(rb, abs=1e-12)
        nav = ic["nav"]
        peak = max(peak or c.unwrapped.sim.nav_history[0], nav)
        dd = np.log(peak / nav)
        assert rc == pytest.approx(ra - max(dd - prev_dd, 0.0), abs=1e-12)
        prev_dd = dd


def test_train_windows_do_not_overlap_evaluation_periods():
    wins = train_windows()
    assert wins[0][0] >= "2016-01-01" and wins[-1][1] <= "2023-12-31"
    for s, e in wins:
        for name in ("normal_2024",) + STRESS_PERIODS:
            p = PERIODS[name]
            assert e < p.start or s > p.end, (s, e, name)
    # each evaluation period is cut with a 90-day lookback buffer after its end (tests/rl/test_rl_windows.py)
    assert wins == [("2016-05-30", "2020-01-31"), ("2020-08-30", "2022-04-30"), ("2023-04-01", "2023-12-31")]


def test_sampler_is_seeded_and_stays_inside_windows():
    env = gym.make(ENV_ID, scoring=False)
    dates = env.unwrapped.view.dates
    wins = train_windows()
    smp = EpisodeSampler(dates, wins, "weekly", 26)
    a, b = smp.sample(np.random.default_rng(3)), smp.sample(np.random.default_rng(3))
    assert a.init_row == b.init_row and a.last_row == b.last_row
    np.testing.assert_array_equal(a.decision_rows, b.decision_rows)
    starts = {smp.sample(np.random.default_rng(s)).init_row for s in range(20)}
    assert len(starts) > 10  # different seeds give different windows
    rng = np.random.default_rng(0)
    for _ in range(200):
        sp = smp.sample(rng)
        lo, hi = dates[sp.init_row], dates[sp.last_row]
        assert any(pd.Timestamp(s) <= lo and hi <= pd.Timestamp(e) for s, e in wins)
        assert sp.decision_rows.size <= 26 and sp.decision_rows[0] == sp.init_row + 1
        assert sp.last_row < dates.size and sp.last_row >= sp.decision_rows[-1]


def _run_pair(vec, singles, steps, seed):
    ov, _ = vec.reset(seed=seed)
    os_ = [e.reset(seed=seed + i)[0] for i, e in enumerate(singles)]
    for i, o in enumerate(os_):
        np.testing.assert_array_equal(o, ov[i])
    rng = np.random.default_rng(seed)
    pending = [False] * len(singles)
    for _ in range(steps):
        act = rng.uniform(-1, 1, (len(singles), 80)).astype(np.float32)
        ov, rv, tv, trv, _ = vec.step(act)
        for i, e in enumerate(singles):
            if pending[i]:  # next-step autoreset: this step resets sub-env i
                o, _ = e.reset()
                r, t, tr = 0.0, False, False
                pending[i] = False
            else:
                o, r, t, tr, _ = e.step(act[i])
                pending[i] = t or tr
            np.testing.assert_array_equal(o, ov[i])
            assert r == pytest.approx(rv[i], rel=1e-12, abs=1e-15)  # np.log vs math.log: last ulp
            assert (t, tr) == (tv[i], trv[i])


@pytest.mark.parametrize("reward", ["log_return", "risk_adjusted"])
def test_batched_vector_env_equals_wrapper_on_a_fixed_period(reward):
    vec = PortBenchVectorEnv(2, period="covid_2020", reward=reward)
    singles = [AllocationWrapper(gym.make(ENV_ID, scoring=False, period="covid_2020"), reward=reward) for _ in range(2)]
    _run_pair(vec, singles, 40, seed=0)


def test_batched_vector_env_equals_random_period_wrapper_in_training_windows():
    vec = PortBenchVectorEnv(3, train_windows=True, episode_len=6, action_mode="weights")
    singles = [AllocationWrapper(RandomPeriod(gym.make(ENV_ID, scoring=False), episode_len=6),
                                 action_mode="weights", reward="log_return") for _ in range(3)]
    _run_pair(vec, singles, 20, seed=11)


def _episode_ends(env, n_episodes, seed):
    """(terminated, truncated, EpisodeSpec.truncated) at the end of each of ``n_episodes`` episodes."""
    env.reset(seed=seed)
    ends = []
    while len(ends) < n_episodes:
        truncates = env.env._truncates
        _, _, term, trunc, _ = env.step(np.zeros(80, np.float32))
        if term or trunc:
            ends.append((term, trunc, truncates))
            env.reset()
    return ends


def test_an_episode_cut_at_episode_len_is_truncated_and_one_at_its_window_end_terminated():
    # a 26-week window with 20-decision episodes (7 starts, the last one reaches the window's end) and a
    # 13-week window shorter than an episode (it always ends with the window)
    wins = [("2021-01-01", "2021-06-30"), ("2023-10-01", "2023-12-31")]
    env = AllocationWrapper(RandomPeriod(gym.make(ENV_ID, scoring=False), wins, episode_len=20), reward="log_return")
    ends = _episode_ends(env, 24, seed=1)
    assert {(t, tr) for t, tr, _ in ends} == {(False, True), (True, False)}
    for term, trunc, cut in ends:
        assert (term, trunc) == (not cut, cut)
    # SB3's VecEnv over the batched core: the same flags, as TimeLimit.truncated (bootstraps the value)
    sb3 = pytest.importorskip("quantgym.envs.portbench.rl.sb3", reason=NEEDS_RL)
    venv = sb3.PortBenchSB3VecEnv(2, windows=wins, episode_len=20)
    venv.seed(1)
    venv.reset()
    flags = set()
    while len(flags) < 2:
        cut = venv.core.cut.copy()
        _, _, done, infos = venv.step(np.zeros((2, 80), np.float32))
        for i in np.flatnonzero(done):
            assert infos[i]["TimeLimit.truncated"] == cut[i]
            flags.add(bool(cut[i]))


def test_make_vec_sync_and_vector_entry_point():
    sync = gym.make_vec(ENV_ID, num_envs=8, vectorization_mode="sync")
    obs, _ = sync.reset(seed=0)
    assert obs["weights"].shape == (8, 80)
    act = sync.action_space.sample()
    obs, rew, term, trunc, _ = sync.step(act)
    assert rew.shape == (8,)
    sync.close()
    sync_box = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="sync", wrappers=[AllocationWrapper])
    o, _ = sync_box.reset(seed=0)
    assert o.shape == (2, 463)
    vec = gym.make_vec(ENV_ID, num_envs=8, vectorization_mode="vector_entry_point", period="covid_2020")
    assert isinstance(vec, PortBenchVectorEnv)
    o, _ = vec.reset(seed=0)
    assert o.shape == (8, 463) and vec.observation_space.contains(o)
    o, r, t, tr, _ = vec.step(vec.action_space.sample())
    assert r.shape == (8,) and not tr.any()
    with pytest.raises(ValueError, match="scoring"):
        gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="vector_entry_point", scoring=True)
    with pytest.raises(ValueError, match="clean"):
        gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="vector_entry_point", fidelity="paper")
    with pytest.raises(ValueError, match="unknown"):
        gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="vector_entry_point", colour="red")


def test_record_episode_frame():
    env = RecordEpisode(_wrapped())
    env.reset(seed=0)
    done = False
    rng = np.random.default_rng(0)
    while not done:
        _, _, done, _, _ = env.step(rng.uniform(-1, 1, 80).astype(np.float32))
    df = env.to_dataframe()
    assert len(df) == 12 and df["date"].iloc[0] == pd.Timestamp("2024-01-02")
    wcols = [c for c in df.columns if c.startswith("w_")]
    assert len(wcols) == 80
    np.testing.assert_allclose(df[wcols].sum(axis=1), 1.0, atol=1e-3)
    assert df[["S1", "S2", "S3", "S4", "S5", "ceps"]].notna().all().all()
    assert df["nav"].iloc[-1] == pytest.approx(env.unwrapped.sim.nav)
    assert len(env.episodes) == 1


def test_vector_env_under_record_episode_statistics():
    """Gymnasium's vector RecordEpisodeStatistics applies (it refuses an info key it writes itself, ``episode``):
    its statistics at episode ends equal the env's own ``episode_stats``."""
    vec = gym.wrappers.vector.RecordEpisodeStatistics(PortBenchVectorEnv(3, train_windows=True, episode_len=4))
    vec.reset(seed=2)
    rng = np.random.default_rng(2)
    ends = 0
    for _ in range(12):
        _, _, term, trunc, info = vec.step(rng.uniform(-1, 1, (3, 80)).astype(np.float32))
        if (term | trunc).any():
            ends += 1
            np.testing.assert_array_equal(info["_episode"], info["_episode_stats"])
            np.testing.assert_array_equal(info["episode"]["l"], info["episode_stats"]["l"])
            np.testing.assert_allclose(info["episode"]["r"], info["episode_stats"]["r"], rtol=1e-12, atol=1e-15)
    assert ends >= 2 and vec.episode_count == 3 * ends
