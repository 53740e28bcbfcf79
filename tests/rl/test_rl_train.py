"""Short SB3 training runs: complete, evaluate with the shared loop, reproduce with the same seed (CPU)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.rl import NEEDS_RL

pytest.importorskip("stable_baselines3", reason=NEEDS_RL)
torch = pytest.importorskip("torch", reason=NEEDS_RL)

from quantgym.evaluation import evaluate  # noqa: E402
from quantgym.agents.registry import make_agent  # noqa: E402
from quantgym.envs.portbench.rl import load_sb3_agent, make_sb3_vec_env, train_sb3  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
ENV_ID = "PortBench-Balanced-v0"
PPO_SMALL = {"n_steps": 128, "batch_size": 256, "n_epochs": 2}
EVAL = ("normal_2024", "covid_2020")


@pytest.fixture(scope="module")
def two_ppo_runs(tmp_path_factory):
    runs = []
    for k in range(2):
        out = tmp_path_factory.mktemp(f"ppo{k}")
        runs.append(train_sb3("ppo", ENV_ID, timesteps=2048, seed=7, out_dir=out, algo_kwargs=PPO_SMALL,
                              eval_periods=EVAL))
    return runs


def test_training_completes_saves_and_evaluates(two_ppo_runs):
    res = two_ppo_runs[0]
    out = res["out_dir"]
    assert (out / "model.zip").exists() and (out / "summary.csv").exists()
    meta = json.loads((out / "rl_meta.json").read_text())
    assert meta["algo"] == "ppo" and meta["timesteps"] == 2048 and meta["seed"] == 7
    # training windows never touch the four bench periods
    assert meta["train_windows"] == [["2016-05-30", "2020-01-31"], ["2020-08-30", "2022-04-30"],
                                     ["2023-04-01", "2023-12-31"]]  # 90-day lookback buffer after each window
    assert meta["lookback_buffer_days"] == 90
    rows = res["section"].rows
    assert [r.period for r in rows] == list(EVAL) and all(r.agent == "SB3-PPO" for r in rows)
    for r in rows:
        assert np.isfinite(r.sharpe) and np.isfinite(r.ceps) and 0 <= r.ceps <= 1
    assert rows[1].gate is not None  # stress row carries the §7.2 drawdown check
    doc = json.loads((out / "results.json").read_text())
    assert doc["schema"] == "quantgym-results-v1" and len(doc["tasks"]["portbench"]["runs"]) == 2


def test_same_seed_same_policy_and_same_evaluation(two_ppo_runs):
    a, b = (r["policy"].model for r in two_ppo_runs)
    sa, sb = a.policy.state_dict(), b.policy.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    for ra, rb in zip(two_ppo_runs[0]["results"], two_ppo_runs[1]["results"]):
        np.testing.assert_array_equal(ra.nav.to_numpy(), rb.nav.to_numpy())
        assert ra.ceps == rb.ceps


def test_saved_model_loads_through_the_agent_registry(two_ppo_runs):
    res = two_ppo_runs[0]
    agent = make_agent(f"sb3:{res['out_dir']}", task="portbench")
    assert agent.name == "SB3-PPO" and agent.env_kwargs["scoring"] is True
    r = evaluate(ENV_ID, agent, period="normal_2024")
    np.testing.assert_array_equal(r.nav.to_numpy(), res["results"][0].nav.to_numpy())
    with pytest.raises(ValueError, match="PortBench only"):
        load_sb3_agent(str(res["out_dir"]), task="quant_arena")
    with pytest.raises(ValueError, match="no model"):
        load_sb3_agent(str(res["out_dir"] / "missing"), task="portbench")


@pytest.mark.parametrize("algo,kw", [("sac", {"learning_starts": 64, "batch_size": 64, "gradient_steps": 1}),
                                     ("a2c", {})])
def test_sac_and_a2c_train_briefly(tmp_path, algo, kw):
    res = train_sb3(algo, ENV_ID, timesteps=250, seed=1, out_dir=tmp_path, algo_kwargs=kw, n_envs=2,
                    eval_periods=("normal_2024",))
    assert res["section"].rows[0].agent == f"SB3-{algo.upper()}"
    # rl_meta.json: the steps requested and those trained (A2C trains whole rollouts of 16 steps x 2 envs)
    meta = json.loads((tmp_path / "rl_meta.json").read_text())
    assert meta["timesteps"] == 250 and meta["timesteps_trained"] == res["policy"].model.num_timesteps
    assert meta["timesteps_trained"] == {"sac": 250, "a2c": 256}[algo]
    assert np.isfinite(res["section"].rows[0].sharpe)


def test_unbatched_ceps_training_env_and_errors():
    venv = make_sb3_vec_env(ENV_ID, 2, reward="ceps", episode_len=3)
    obs = venv.reset()
    assert obs.shape == (2, 463)
    obs, rew, done, infos = venv.step(np.zeros((2, 80), np.float32))
    assert np.all((rew >= 0) & (rew <= 1))  # CEPS in [0, 1]
    venv.close()
    with pytest.raises(ValueError, match="scoring"):
        make_sb3_vec_env(ENV_ID, 2, reward="ceps", batched=True)
    with pytest.raises(ValueError, match="unknown algo"):
        train_sb3("dqn", ENV_ID, timesteps=10)


def test_cli_train_command(tmp_path):
    typer_testing = pytest.importorskip("typer.testing")
    from quantgym.cli import app

    res = typer_testing.CliRunner().invoke(app, [
        "train", "--algo", "a2c", "--timesteps", "128", "--seed", "2", "--out", str(tmp_path), "--n-envs", "2",
        "--eval-periods", "normal_2024"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "model.zip").exists() and "normal_2024" in res.output
    assert "rf = 4 % a year in every period" in " ".join(res.output.split())  # the Sharpe convention, stated
    bad = typer_testing.CliRunner().invoke(app, ["train", "--train-period", "2016", "--out", str(tmp_path)])
    assert bad.exit_code != 0


def test_bench_cli_adds_the_trained_model_beside_the_baselines(two_ppo_runs, tmp_path):
    typer_testing = pytest.importorskip("typer.testing")
    from quantgym.cli import app
    from quantgym.results import read_summary_csv

    res = typer_testing.CliRunner().invoke(app, [
        "bench", "--tasks", "portbench", "--profiles", "balanced", "--periods", "normal_2024", "--agents",
        "equal_weight", "--agent", f"sb3:{two_ppo_runs[0]['out_dir']}", "--no-plots", "-q", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    rows = read_summary_csv(tmp_path / "summary.csv")
    agents = {r["agent"] for r in rows if r["task"] == "portbench"}
    assert {"equal_weight", "SB3-PPO"} <= agents
    ppo = next(r for r in rows if r["agent"] == "SB3-PPO")
    assert float(ppo["sharpe"]) == pytest.approx(two_ppo_runs[0]["results"][0].metrics["sharpe"], abs=1e-4)  # csv rounding


def test_eval_cli_runs_an_sb3_agent_through_the_shared_loop(two_ppo_runs, tmp_path):
    typer_testing = pytest.importorskip("typer.testing")
    from quantgym.cli import app

    out = tmp_path / "eval"
    res = typer_testing.CliRunner().invoke(app, [
        "eval", "--agent", f"sb3:{two_ppo_runs[0]['out_dir']}", "--env", ENV_ID, "--period", "covid_2020",
        "--no-plots", "--quiet", "--out", str(out)])
    assert res.exit_code == 0, res.output
    runs = json.loads((out / "results.json").read_text())["tasks"]["portbench"]["runs"]
    ppo = next(r for r in runs if r["agent"] == "SB3-PPO")
    trained = next(r for r in two_ppo_runs[0]["results"] if r.period == "covid_2020")
    assert ppo["metrics"]["sharpe"] == pytest.approx(trained.metrics["sharpe"], rel=1e-9)
    assert {r["agent"] for r in runs} == {"SB3-PPO", "Equal-Weight"}
    # an sb3 agent on another task: one line, exit 2
    bad = typer_testing.CliRunner().invoke(app, ["eval", "--agent", f"sb3:{two_ppo_runs[0]['out_dir']}",
                                                 "--env", "QuantArena-v0", "--out", str(tmp_path / "qa")])
    assert bad.exit_code == 2 and "PortBench only" in bad.output and "Traceback" not in bad.output
