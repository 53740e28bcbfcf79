"""benchmarks/rl_table.py ``tables``: seed spread, IQM interval, ensemble Sharpe tests and the docs block check,
on a hand-made results folder (no training, no evaluation)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
WINDOW = "covid_2020"
SHARPES = [0.1, 0.2, 0.3, 0.4, 5.0]  # IQM (25 % cut each end of 5 values): mean(0.2, 0.3, 0.4) = 0.3
MDDS = [-0.10, -0.15, -0.25, -0.30, -0.05]  # Balanced tolerance 20 %: seeds 0, 1, 4 pass


@pytest.fixture(scope="module")
def rl_table():
    spec = importlib.util.spec_from_file_location("rl_table", ROOT / "benchmarks" / "rl_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _nav(r: np.ndarray) -> list[float]:
    return [1.0] + list(np.cumprod(1.0 + r))


def _metrics(sharpe: float, mdd: float) -> dict:
    return {"sharpe": sharpe, "ret_pct": 10 * sharpe, "maxdd_pct": 100 * mdd, "vol_pct": 20.0,
            "ceps": 0.3 + sharpe / 100, "max_drawdown": mdd}


@pytest.fixture()
def results(tmp_path, rl_table):
    """Five PPO seeds that earn Equal-Weight's daily return + 0.2 % (plus small seed noise), EqW and a better
    Min-Variance on 60 days."""
    rng = np.random.default_rng(0)
    dates = [str(d.date()) for d in pd.bdate_range("2020-02-03", periods=61)]
    ew = rng.normal(0.0, 0.01, 60)
    mv = 0.5 * ew + 0.001 + rng.normal(0.0, 0.002, 60)
    base = {"schema": rl_table.SCHEMA_BASE, "window": WINDOW, "env_id": "PortBench-Balanced-v0", "dates": dates,
            "baselines": {"equal_weight": {"name": "Equal-Weight", "metrics": _metrics(0.5, -0.2), "nav": _nav(ew)},
                          "min_variance": {"name": "Min-Variance", "metrics": _metrics(0.8, -0.1), "nav": _nav(mv)}}}
    (tmp_path / f"baselines_{WINDOW}.json").write_text(json.dumps(base))
    for seed, (sh, mdd) in enumerate(zip(SHARPES, MDDS)):
        r = ew + 0.002 + rng.normal(0.0, 0.0005, 60)
        run = {"schema": rl_table.SCHEMA_RUN, "algo": "ppo", "reward": "log_return", "window": WINDOW, "seed": seed,
               "env_id": "PortBench-Balanced-v0", "profile": "balanced", "timesteps": 1000, "timesteps_trained": 2048,
               "metrics": _metrics(sh, mdd), "nav_first": dates[0], "nav_last": dates[-1], "nav": _nav(r),
               "timing": {"train_wall_s": 10.0, "train_cpu_s": 8.0, "env_wall_s": 1.0, "job_wall_s": 16.0},
               "commit": "abc1234"}
        (tmp_path / f"{rl_table.run_name('ppo', 'log_return', WINDOW, seed)}.json").write_text(json.dumps(run))
    (tmp_path / "manifest.json").write_text(json.dumps({"command": "python benchmarks/rl_table.py run --seeds 0-4",
                                                        "env_id": "PortBench-Balanced-v0", "sessions": [
                                                            {"wall_s": 3600.0, "jobs": 2, "load_avg_start": 1.0,
                                                             "load_avg_end": 2.5}]}))
    return tmp_path


def test_cell_statistics(rl_table, results):
    runs, base, _ = rl_table.load_results(results)
    (cell,) = rl_table.summarise(runs, base)
    assert cell["seeds"] == [0, 1, 2, 3, 4] and cell["timesteps_trained"] == [2048]
    s = cell["sharpe"]
    assert s["mean"] == pytest.approx(np.mean(SHARPES)) and s["sd"] == pytest.approx(np.std(SHARPES, ddof=1))
    assert (s["min"], s["max"]) == (0.1, 5.0)
    iq = cell["sharpe_iqm"]
    assert iq["iqm"] == pytest.approx(0.3)
    assert 0.1 <= iq["lo"] <= iq["iqm"] <= iq["hi"] <= 5.0 and iq["lo"] < iq["hi"]
    assert cell["gate"] == (3, 5)
    assert cell["best_baseline"]["key"] == "min_variance"
    vs_ew, vs_best = cell["vs_equal_weight"], cell["vs_best"]
    for t in (vs_ew, vs_best):
        assert 0.0 <= t["p"] <= 1.0 and t["lo"] <= t["delta"] <= t["hi"] and t["n"] == 60
    # the ensemble earns EqW's returns + 0.2 % a day: a far higher Sharpe, significantly
    assert vs_ew["delta"] > 3 and vs_ew["p"] < 0.05
    assert cell["ensemble_sharpe"] == pytest.approx(vs_ew["delta"] + _sharpe(base[WINDOW]["baselines"]["equal_weight"]))


def _sharpe(rec: dict) -> float:
    from quantgym.metrics import RISK_FREE
    from quantgym.stats.bootstrap import return_stats

    v = np.asarray(rec["nav"])
    return float(return_stats(v[1:] / v[:-1] - 1.0, RISK_FREE)["sharpe"][0])


def test_one_seed_has_no_spread(rl_table, results):
    for p in results.glob("run_*_s[1-4].json"):
        p.unlink()
    runs, base, manifest = rl_table.load_results(results)
    (cell,) = rl_table.summarise(runs, base)
    assert cell["sharpe"]["sd"] is None and cell["sharpe_iqm"] == {"iqm": 0.1, "lo": None, "hi": None}
    assert "| covid_2020 | PPO | log_return | 0.10 | 0.10 [–, –] |" in rl_table.render(runs, base, manifest)


def test_render_and_check_a_stale_block(rl_table, results, tmp_path_factory, capsys):
    doc = tmp_path_factory.mktemp("doc") / "rl.md"
    doc.write_text("# RL\n\n<!-- generated:rl-table begin -->\nan old table\n<!-- generated:rl-table end -->\n")
    args = ["tables", "--results", str(results)]
    assert rl_table.main([*args, "--check", str(doc)]) == 1
    assert "out of date" in capsys.readouterr().out
    assert rl_table.main([*args, "--write", str(doc)]) == 0
    text = doc.read_text()
    assert "| covid_2020 | PPO | log_return | 1.20 ± 2.13 [0.10, 5.00] | 0.30 [" in text
    assert "| Min-Variance | 0.80 / 8.0 / −10.0 |" in text
    # one algorithm and one reward: each factor's mean is the cell's mean Sharpe, its spread 0; EqW 0.50
    assert "| covid_2020 | 1.20 | 0.00 | 1.20 | 0.00 | 0.50 |" in text
    assert "the whole run 1.00 h wall in 1 session(s)" in text
    assert rl_table.main([*args, "--check", str(doc)]) == 0
    assert "up to date" in capsys.readouterr().out


def test_training_time_block_of_docs_performance(rl_table, results, tmp_path_factory, capsys):
    doc = tmp_path_factory.mktemp("doc")
    (doc / "rl.md").write_text("<!-- generated:rl-table begin -->\n<!-- generated:rl-table end -->\n")
    (doc / "perf.md").write_text("<!-- generated:rl-table-speed begin -->\n<!-- generated:rl-table-speed end -->\n")
    args = ["tables", "--results", str(results), "--perf", str(doc / "perf.md")]
    assert rl_table.main([*args, "--write", str(doc / "rl.md")]) == 0
    text = " ".join((doc / "perf.md").read_text().split())
    # five PPO trainings of 2,048 steps: 50 s wall, 40 s CPU -> 256 CPU steps/s; env 5 s of 50; 6 s outside learn
    assert "| PPO | 5 | 2,048 | 0.01 | 0.01 | 256 | 10.0 % | 6.0 |" in text
    assert "The whole grid: 1.00 h wall in 1 session(s) with 2 worker process(es)" in text
    assert rl_table.main([*args, "--check", str(doc / "rl.md")]) == 0
    (doc / "perf.md").write_text("<!-- generated:rl-table-speed begin -->\nold\n<!-- generated:rl-table-speed end -->\n")
    assert rl_table.main([*args, "--check", str(doc / "rl.md")]) == 1


def test_bad_inputs_are_one_line_exit_2(rl_table, tmp_path, capsys):
    assert rl_table.main(["tables", "--results", str(tmp_path)]) == 2
    assert rl_table.main(["run", "--algos", "dqn", "--out", str(tmp_path)]) == 2
    assert rl_table.main(["run", "--seeds", "x", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "no run_*.json" in err[0] and "unknown algorithm dqn" in err[1] and "--seeds" in err[2]


def test_walk_forward_training_starts(rl_table):
    from quantgym.envs.portbench.training import TRAIN_START, walk_forward_windows

    assert rl_table.train_start("china_2015") == "2014-04-01" and rl_table.train_start("covid_2020") == TRAIN_START
    assert walk_forward_windows("china_2015", start=rl_table.train_start("china_2015")) == [("2014-04-01",
                                                                                              "2015-07-31")]
