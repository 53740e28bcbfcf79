"""QuantArena-v0 / QuantArena-OneShot-v0: API, budget, freeze, records, determinism (spec §9, §10.14)."""

from __future__ import annotations

import json
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401 - registers the ids
from quantgym.envs.quant_arena.executor import evaluate_submission
from quantgym.envs.quant_arena.config import ArenaCostModel, ImpactModel, ArenaSandboxLimits
from quantgym.envs.quant_arena.env import InvalidActionError, QuantArenaEnv
from quantgym.envs.quant_arena.prompts import FEEDBACK_WINDOW_KEYS
from quantgym.envs.quant_arena.examples import EXAMPLES, example_source
from quantgym.envs.quant_arena.records import read_record
from quantgym.results import to_jsonable

from .conftest import SMALL_WINDOWS

FAST = ArenaSandboxLimits(day_seconds=10.0, eval_seconds=120.0, cpu_seconds=120.0, memory_mb=4096)


def make(small_real, tmp_path, **kw):
    kw.setdefault("record_dir", tmp_path)
    kw.setdefault("sandbox", FAST)
    return QuantArenaEnv(data=small_real, **SMALL_WINDOWS, **kw)


def test_end_to_end_research_run_through_the_sandbox(small_real, tmp_path):
    env = gym.make("QuantArena-v0", data=small_real, record_dir=tmp_path, sandbox=FAST, **SMALL_WINDOWS)
    brief, info = env.reset(seed=0)
    assert "FEATURES" in brief and "view.history" in brief and info["budget_left"] == 5
    assert info["brief"]["windows"]["sealed"] == ["2024-01-01", "2024-02-29"]
    obs, r, term, trunc, info = env.step(example_source("low_volatility"))
    fb = json.loads(obs)
    assert fb == info["feedback"] and not term and not trunc
    assert set(fb) == {"candidate", "budget_left", "status", "years", "window", "errors", "n_errors"}
    assert fb["status"] == "ok" and fb["budget_left"] == 4 and set(fb["window"]) == set(FEEDBACK_WINDOW_KEYS)
    assert list(fb["years"]) == ["2023"]
    assert 0 < r < 100 and fb["n_errors"] == 0
    # no sealed-period number anywhere in the research observation
    assert "2024" not in obs
    assert env.unwrapped.sealed_result is None and len(env.unwrapped.candidates) == 1
    obs, S, term, trunc, fin = env.step({"freeze": 1})
    assert term and not trunc
    assert env.unwrapped.sealed_result.S == pytest.approx(fin["S_out"], abs=1e-6)
    assert fin["S"] == pytest.approx(0.5 * fin["S_in"] + 0.5 * fin["S_out"], abs=2e-6)
    assert fin["S_in"] == pytest.approx(r, abs=1e-6) and fin["status_sealed"] == "ok"
    assert fin["sealed"]["n_ic_days"] > 0 and list(fin["sealed_years"]) == ["2024"]
    assert json.loads(obs)["S"] == S
    events = read_record(env.unwrapped.record_path)
    assert [e["event"] for e in events] == ["brief", "candidate", "freeze", "sealed", "final"]
    assert events[1]["source"] == example_source("low_volatility") and len(events[1]["source_sha256"]) == 64
    assert events[3]["sealed"]["status"] == "ok" and events[3]["sealed"]["sandbox"]["isolation"] == "commit-reveal"
    assert events[0]["config"]["scoring"]["version"] == "qa-v1"
    with pytest.raises(RuntimeError, match="reset"):
        env.step("x = 1")


def test_oneshot_terminates_on_first_submit(small_real, tmp_path):
    env = gym.make("QuantArena-OneShot-v0", data=small_real, record_dir=tmp_path, executor="inprocess",
                   **SMALL_WINDOWS)
    brief, info = env.reset(seed=1)
    assert info["budget_left"] == 1 and "One-shot" in brief
    obs, S, term, _, fin = env.step(example_source("momentum_20d"))
    assert term and set(fin) >= {"S", "S_in", "S_out", "research", "sealed"}
    ev = [e["event"] for e in read_record(env.unwrapped.record_path)]
    assert ev == ["brief", "candidate", "sealed", "final"]


def test_budget_freeze_rules_and_caller_errors(small_real, tmp_path):
    env = make(small_real, tmp_path, executor="inprocess", max_candidates=2)
    env.reset(seed=0)
    # caller bugs: one clear ValueError (also a TypeError, spec §10.14) naming the expected action types
    for bad in (42, b"FEATURES = []", ["x"], None, 1.5):
        with pytest.raises(ValueError, match=r"action must be source text \(str\) or \{'freeze': k\}"):
            env.step(bad)
    with pytest.raises(TypeError):
        env.step(42)
    with pytest.raises(ValueError, match="got a dict with keys \\['frieze'\\]"):
        env.step({"frieze": 1})
    assert issubclass(InvalidActionError, ValueError) and issubclass(InvalidActionError, TypeError)
    # a freeze index that names no candidate raises, also before any candidate exists
    for k in (9, 1, 0, "1", True):
        with pytest.raises(ValueError, match="names no candidate: none has been evaluated yet"):
            env.step({"freeze": k})
    assert env.budget_left == 2 and not env._done
    o1, r1, *_ = env.step("syntax error here (")  # a crash is a recorded, budget-consuming candidate
    fb1 = json.loads(o1)
    assert fb1["status"] == "invalid" and r1 == 0.0 and fb1["years"] is None and fb1["budget_left"] == 1
    assert "SyntaxError" in fb1["errors"][0]["message"]
    o2, r2, *_ = env.step(example_source("reversal_5d"))
    assert json.loads(o2)["budget_left"] == 0
    with pytest.raises(ValueError, match=r"freeze index must be an int in 1\.\.2 or None, got 3"):
        env.step({"freeze": 3})
    # a submit after the budget is not evaluated and acts as freeze of the latest
    obs, S, term, _, fin = env.step(example_source("low_volatility"))
    assert term and fin["frozen_candidate"] == 2
    ev = read_record(env.record_path)
    assert [e["event"] for e in ev] == ["brief", "candidate", "candidate", "submit_over_budget", "freeze", "sealed",
                                        "final"]
    # freezing the failed candidate is allowed: S_in = 0
    env.reset()
    env.step("raise ValueError('boom')")
    _, S, term, _, fin = env.step({"freeze": None})
    assert term and fin["S_in"] == 0.0 and fin["status_research"] == "invalid"


def test_freeze_without_candidate_and_cancelled_record(small_real, tmp_path):
    env = make(small_real, tmp_path, executor="inprocess")
    env.reset()
    env.log_event("model_call", prompt="write a strategy", response="...", tokens=12)
    _, S, term, _, fin = env.step({"freeze": None})
    assert term and S == 0.0 and fin["frozen_candidate"] is None
    assert [e["event"] for e in read_record(env.record_path)] == ["brief", "model_call", "freeze", "final"]
    env.reset()
    path = env.record_path
    env.step(example_source("momentum_20d"))
    env.close()
    assert read_record(path)[-1]["event"] == "cancelled"


def test_env_checker_pickle_and_bad_kwargs(small_real, tmp_path):
    env = make(small_real, tmp_path)
    # built directly (no registry spec), so the checker says it cannot remake the env in the other render modes
    with pytest.warns(UserWarning, match="not having a spec"):
        check_env(env)
    env2 = pickle.loads(pickle.dumps(env))
    assert env2.dataset.N == small_real.N
    with pytest.raises(ValueError, match="mode"):
        QuantArenaEnv(mode="weekly", data=small_real, **SMALL_WINDOWS)
    with pytest.raises(TypeError, match="ArenaCostModel"):
        QuantArenaEnv(data=small_real, cost=ImpactModel(), **SMALL_WINDOWS)
    with pytest.raises(ValueError, match="research_start"):
        QuantArenaEnv(data=small_real, research_start="2024-03-01", **{k: v for k, v in SMALL_WINDOWS.items()
                                                                      if k != "research_start"})


def test_same_submission_same_results(small_real):
    src = example_source("market_timing")
    a = evaluate_submission(src, small_real.truncate("2023-12-31"), "2023-11-01", "2023-12-31", executor="inprocess")
    b = evaluate_submission(src, small_real.truncate("2023-12-31"), "2023-11-01", "2023-12-31", executor="inprocess")
    assert a.status == b.status == "ok"
    assert json.dumps(to_jsonable([a.metrics, a.daily])) == json.dumps(to_jsonable([b.metrics, b.daily]))


def test_sandbox_and_inprocess_agree_and_costs_switch_off(small_real):
    src = example_source("low_volatility")
    ds = small_real.truncate("2024-02-29")
    a = evaluate_submission(src, ds, "2024-01-01", "2024-02-29", executor="inprocess")
    b = evaluate_submission(src, ds, "2024-01-01", "2024-02-29", executor="sandbox")
    assert a.status == b.status == "ok"
    assert json.dumps(to_jsonable(a.metrics)) == json.dumps(to_jsonable(b.metrics))
    from quantgym.envs.quant_arena.config import ArenaConfig

    free = evaluate_submission(src, ds, "2024-01-01", "2024-02-29",
                               ArenaConfig(cost=ArenaCostModel.off(), impact=ImpactModel.off()), executor="inprocess")
    assert free.metrics["fees_cny"] == 0.0 and free.metrics["impact_cny"] == 0.0
    assert free.metrics["total_return"] > a.metrics["total_return"]


def test_all_examples_are_valid_submissions(small_real):
    ds = small_real.truncate("2024-02-29")
    for name in EXAMPLES:
        r = evaluate_submission(example_source(name), ds, "2024-01-01", "2024-02-29", executor="inprocess")
        assert r.status == "ok" and r.n_errors == 0, (name, r.errors)
        assert np.isfinite(r.S)


def test_low_volatility_sealed_anchor(bundled):
    # spec §10.7 / §10.12: low volatility on the default universe, 2024: ARR 24.9 %, fees 2.68 % of capital
    r = evaluate_submission(example_source("low_volatility"), bundled.truncate("2024-12-31"), "2024-01-01",
                            "2024-12-31", executor="inprocess")
    m = r.metrics
    assert m["arr"] == pytest.approx(0.249, abs=0.002)
    assert m["fees_pct"] == pytest.approx(2.68, abs=0.01)
    assert m["excess_arr"] == pytest.approx(0.206, abs=0.002)
    assert m["sharpe"] == pytest.approx(1.34, abs=0.01) and m["rankic_mean"] == pytest.approx(0.058, abs=0.001)
    assert r.S == pytest.approx(68, abs=0.5)


def test_bench_episode_helper_and_default_env_pickle(small_real, tmp_path, bundled):
    from quantgym.envs.quant_arena.bench import run_example

    r = run_example("market_timing", record_dir=tmp_path, executor="inprocess", data=small_real, **SMALL_WINDOWS)
    assert r["status_research"] == r["status_sealed"] == "ok"
    assert r["S"] == pytest.approx(0.5 * r["S_in"] + 0.5 * r["S_out"], abs=2e-6)
    assert set(r["feedback"]) == {"candidate", "budget_left", "status", "years", "window", "errors", "n_errors"}
    daily = r["sealed_daily"]
    assert len(daily["nav"]) == len(daily["dates"]) and daily["dates"][0] == "2023-12-29"  # D_0 .. D_n
    env = QuantArenaEnv(record_dir=False)          # bundled data: pickled by reference, reloaded
    blob = pickle.dumps(env)
    assert len(blob) < 1_000_000
    assert pickle.loads(blob).dataset is bundled


def test_gym_make_freeze_without_candidate_raises(small_real, tmp_path):
    # fresh-user finding: gym.make("QuantArena-v0").step({"freeze": 9}) ended the run with S = 0
    env = gym.make("QuantArena-v0", data=small_real, record_dir=tmp_path, executor="inprocess", **SMALL_WINDOWS)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"freeze index 9 names no candidate.*\{'freeze': None\}"):
        env.step({"freeze": 9})
    with pytest.raises(ValueError, match="action must be source text"):
        env.step(7)
    _, S, term, _, fin = env.step({"freeze": None})  # spec §10.14: freeze with no candidate => S = 0
    assert term and S == 0.0 and fin["frozen_candidate"] is None
    env.close()


def test_config_and_kwarg_shortcuts_give_identical_episodes(small_real, tmp_path):
    """``config=ArenaConfig(...)`` is the composed form; windows/cost/impact/... kwargs are shortcuts into it."""
    from dataclasses import replace

    from quantgym.envs.quant_arena.config import ArenaConfig, ArenaScoringConfig, Windows

    kw = dict(cost=ArenaCostModel.off(), impact=ImpactModel.off(), scoring=ArenaScoringConfig(diversity_weight=0.0),
              sandbox=FAST)
    cfg = ArenaConfig(windows=Windows(**SMALL_WINDOWS), **kw)
    by_kw = QuantArenaEnv("oneshot", small_real, record_dir=tmp_path / "kw", executor="inprocess", **SMALL_WINDOWS, **kw)
    by_cfg = QuantArenaEnv("oneshot", small_real, record_dir=tmp_path / "cfg", executor="inprocess", config=cfg)
    assert by_kw.config == by_cfg.config == cfg
    assert QuantArenaEnv("oneshot", small_real, record_dir=False, config=cfg, sealed_end="2024-01-31").config == \
        replace(cfg, windows=replace(cfg.windows, sealed_end="2024-01-31"))
    outs = []
    for env in (by_kw, by_cfg):
        env.reset(seed=0)
        obs, r, term, trunc, info = env.step(example_source("low_volatility"))
        outs.append((obs, r, term, trunc))
    assert outs[0] == outs[1]
    with pytest.raises(TypeError, match="ArenaConfig"):
        QuantArenaEnv("oneshot", small_real, record_dir=False, config={"cost": {}})


@pytest.mark.parametrize("env_id", ["QuantArena-v0", "QuantArena-OneShot-v0"])
def test_registered_ids_on_the_bundled_data_pass_the_env_checker(env_id):
    """The bundled data set's intraday index went into every reset's info as one shared dict: Gymnasium's
    checker refused it, and an agent that changed it broke the next env's brief."""
    env = gym.make(env_id)
    check_env(env.unwrapped)
    _, info = env.reset(seed=0)
    info["brief"]["intraday_days"]["changed by an agent"] = 1
    _, again = gym.make(env_id).reset(seed=0)
    assert "changed by an agent" not in again["brief"]["intraday_days"]
