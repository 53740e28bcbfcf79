"""The shipped example policy (examples/rl_policy, written by ``benchmarks/rl_table.py ship``): small, loadable
with no training, and ``quantgym bench --agent sb3:examples/rl_policy`` reproduces the RL table's run exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.rl import NEEDS_RL

pytest.importorskip("stable_baselines3", reason=NEEDS_RL)
pytest.importorskip("torch", reason=NEEDS_RL)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "examples" / "rl_policy"
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_the_shipped_policy_is_small_and_names_the_table_run_it_copies():
    info = json.loads((SHIPPED / "shipped.json").read_text())
    assert (SHIPPED / "model.zip").stat().st_size == info["bytes"]["shipped"] < 3_000_000
    run = json.loads((ROOT / "benchmarks" / "results" / "rl_table" / f"{info['run']}.json").read_text())
    assert run["metrics"] == info["metrics"] and run["window"] == info["window"] == "normal_2024"
    same_window = [json.loads(p.read_text())["metrics"]["sharpe"]
                   for p in (ROOT / "benchmarks" / "results" / "rl_table").glob("run_*_normal_2024_s*.json")]
    assert info["metrics"]["sharpe"] == max(same_window)  # the best run on the window, as its README says


def test_bench_runs_the_shipped_policy_and_reproduces_its_table_run(tmp_path):
    typer_testing = pytest.importorskip("typer.testing")
    from quantgym.cli import app

    info = json.loads((SHIPPED / "shipped.json").read_text())
    meta = json.loads((SHIPPED / "rl_meta.json").read_text())
    res = typer_testing.CliRunner().invoke(app, [
        "bench", "--tasks", "portbench", "--profiles", "balanced", "--periods", info["window"], "--agents",
        "equal_weight", "--agent", f"sb3:{SHIPPED}", "--no-plots", "-q", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    runs = json.loads((tmp_path / "results.json").read_text())["tasks"]["portbench"]["runs"]
    mine = next(r for r in runs if r["agent"] == meta["name"])
    for k in ("sharpe", "ret_pct", "maxdd_pct"):
        assert mine["metrics"][k] == pytest.approx(info["metrics"][k], rel=1e-9, abs=1e-12), k
    assert meta["name"] in res.output  # the RL row is in the printed table
