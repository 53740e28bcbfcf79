"""``PortBench-QA-v0`` (spec §11.9): checker, spaces, reset semantics, pickling, bad input, reference policies."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401  (registers the ids)
from quantgym.envs.portbench.static_qa import NaivePolicy, OraclePolicy, run_qa
from quantgym.envs.portbench.static_qa.env import PortBenchQAEnv


@pytest.fixture(scope="module")
def env():
    return PortBenchQAEnv(restricted="both")


def test_check_env_passes():
    e = gym.make("PortBench-QA-v0")
    check_env(e.unwrapped, skip_render_check=False)
    assert e.unwrapped.n_items == 350  # 7 templates × first 50 test pairs


def test_spaces_and_one_step_episode(env):
    obs, info = env.reset(options={"index": 0})
    assert env.observation_space.contains(obs)
    assert set(obs) == {"prompt", "template", "complexity", "regime", "restricted"}
    assert env.observation_space["complexity"].start == 1
    assert "truth" not in info and info["id"].startswith("T1_all_2025")
    obs2, r, term, trunc, info2 = env.step("positive")
    assert term and not trunc and 0.0 <= r <= 1.0
    assert info2["truth"] in ("positive", "negative", "flat") and info2["correct"] == (r >= 0.99)
    assert info2["prediction"] == {"direction": "positive"}
    with pytest.raises(RuntimeError):
        env.step("again")


def test_reset_index_seed_and_cycle(env):
    n = env.n_items
    assert n == 450
    _, a = env.reset(seed=n + 7)
    _, b = env.reset(options={"index": 7})
    assert a["id"] == b["id"]
    _, c = env.reset()  # no seed, no index: the next item in file order
    assert c["index"] == 8
    o1, _ = env.reset(seed=3)
    o2, _ = env.reset(seed=3)
    assert o1 == o2
    with pytest.raises(ValueError):
        env.reset(options={"index": n})
    with pytest.raises(ValueError):
        env.reset(options={"index": "1"})


def test_restricted_items_and_filters():
    e = PortBenchQAEnv(templates=["T4", "T5"], restricted=True, n_per_template=5)
    assert e.n_items == 10
    for i in range(e.n_items):
        obs, info = e.reset(options={"index": i})
        assert obs["restricted"] == 1 and info["template"] in ("T4_r", "T5_r")
        assert "Covariance" not in obs["prompt"]
    e = PortBenchQAEnv(complexity=3, n_per_template=4)
    assert {e.reset(options={"index": i})[1]["template"] for i in range(e.n_items)} == {"T5", "T6"}
    e = PortBenchQAEnv(regime="bear", templates="T7", n_per_template=5)
    assert all(e.reset(options={"index": i})[1]["regime"] == "bear" for i in range(e.n_items))
    for bad in (dict(split="2025"), dict(fidelity="exact"), dict(templates=["T8"]), dict(restricted="yes"),
                dict(n_per_template=0), dict(regime="boom"), dict(data=3)):
        with pytest.raises(ValueError):
            PortBenchQAEnv(**bad)


def test_bad_actions_are_scored_failures(env):
    env.reset(options={"index": 200})
    _, r, term, _, info = env.step(None)
    assert r == 0.0 and term and info["error"]
    env.reset(options={"index": 200})
    _, r, _, _, info = env.step({"weights": [1, 0]})
    assert r == 0.0 and "str" in info["error"]
    with pytest.raises(RuntimeError):
        PortBenchQAEnv(templates=["T1"], n_per_template=1).step("x")


def test_pickle_roundtrip(env):
    env.reset(options={"index": 5})
    e2 = pickle.loads(pickle.dumps(env))
    o1, i1 = env.reset(options={"index": 9})
    o2, i2 = e2.reset(options={"index": 9})
    assert o1 == o2 and i1 == i2


@pytest.mark.parametrize("fidelity", ["clean", "paper"])
def test_oracle_scores_one_everywhere(fidelity):
    run = run_qa(OraclePolicy(fidelity=fidelity), fidelity=fidelity, restricted="both")
    assert all(r["score"] == 1.0 for r in run.records)
    assert all(run.table[c] == 1.0 for c in ("T1", "T2", "T3", "T4", "T5", "T6", "T7", "Mean", "T4_r", "T5_r",
                                            "F", "J", "Bull", "Bear", "Side."))


def test_naive_shows_the_floor():
    run = run_qa(NaivePolicy())
    tab = run.table
    assert all(0.0 <= tab[t] < 1.0 for t in ("T1", "T2", "T3", "T4", "T5", "T6", "T7"))
    assert tab["T6"] == pytest.approx(np.mean([r["truth"] == "no" for r in run.records if r["template"] == "T6"]))
    assert tab["T4_r"] == tab["T4"]  # the naive answer ignores the covariance


def test_any_callable_policy_and_policy_errors():
    calls = []

    def policy(obs, info):
        calls.append(info["template"])
        if info["template"] == "T2":
            raise RuntimeError("model crashed")
        return "positive" if info["template"] == "T1" else 42  # non-str answers are failures

    run = run_qa(policy, agent="fn", templates=["T1", "T2", "T3"], n_per_template=3)
    assert run.agent == "fn" and len(calls) == 9
    errs = [r for r in run.records if r["template"] == "T2"]
    assert all(r["score"] == 0.0 and "model crashed" in r["error"] for r in errs)
    assert all(r["score"] == 0.0 and r["error"] for r in run.records if r["template"] == "T3")


def test_parallel_workers_give_identical_records():
    def policy(obs, info):
        return {"T1": "negative", "T6": "yes; sell 0.1 of SPY"}.get(info["template"], "w_SPY=0.5")

    a = run_qa(policy, templates=["T1", "T4", "T6"], n_per_template=10)
    b = run_qa(policy, templates=["T1", "T4", "T6"], n_per_template=10, workers=4)
    assert a.records == b.records
    assert {k: round(v, 12) for k, v in a.table.items() if v == v} == {k: round(v, 12) for k, v in b.table.items() if v == v}


def test_user_data_and_explicit_splits():
    from quantgym.envs.portbench.static_qa.config import QAConfig
    from ._panel import CLASSES, alternating, make_panel

    data = make_panel({t: alternating(0.002 * (k + 1), phase=k % 2) for k, t in enumerate(CLASSES)})
    cfg = QAConfig(splits=(("train", "2021-03-01", "2021-04-30"), ("val", "2021-05-01", "2021-05-31"),
                           ("test", "2021-06-01", "2021-07-15")))
    e = PortBenchQAEnv(data=data, config=cfg, n_per_template=5, restricted="both")
    assert e.n_items == 7 * 5 + 2 * 5
    run = run_qa(OraclePolicy(data=data, config=cfg), env=e)
    assert all(r["score"] == 1.0 for r in run.records)
    assert all("2021-06-01" <= r["decision_date"] <= "2021-07-15" for r in run.records)


def test_user_data_without_the_regime_ticker_is_refused_not_replaced():
    # without SPY the QA layer must not label the regime on the universe's first equity silently
    import pandas as pd
    import pytest

    from quantgym.envs.portbench.data import PortBenchData
    from quantgym.envs.portbench.static_qa.config import QAConfig
    from ._panel import CLASSES, DATES, alternating

    classes = {("IVV" if t == "SPY" else t): c for t, c in CLASSES.items()}
    prices = pd.DataFrame({t: 100.0 * np.cumprod(1.0 + alternating(0.002 * (k + 1), phase=k % 2))
                           for k, t in enumerate(classes)}, index=DATES)
    data = PortBenchData.from_frames(prices, classes, crypto_close="same_day", meta={"source": "synthetic test panel"})
    splits = (("train", "2021-03-01", "2021-04-30"), ("val", "2021-05-01", "2021-05-31"),
              ("test", "2021-06-01", "2021-07-15"))
    with pytest.raises(ValueError, match=r"regime ticker 'SPY'.*QAConfig\(regime_ticker=\.\.\.\).*IVV"):
        PortBenchQAEnv(data=data, config=QAConfig(splits=splits), n_per_template=5)
    e = PortBenchQAEnv(data=data, config=QAConfig(splits=splits, regime_ticker="IVV"), templates="T7",
                       n_per_template=5)
    obs, _ = e.reset(options={"index": 0})
    assert "IVV" in obs["prompt"]
