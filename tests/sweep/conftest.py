"""Fixtures of the sweep/report tests: shared data, one local Ray per session, small real outputs."""

from __future__ import annotations

import numpy as np
import pytest

from quantgym.sweep.grid import parse_grid

#: small real grid: two baselines x two profiles x one stress period
SMALL_GRID = {"name": "small", "agents": ["equal_weight", "risk_parity"],
              "envs": ["PortBench-Conservative-v0", "PortBench-Aggressive-v0"],
              "env_kwargs": {"period": "covid_2020"}, "seeds": [0]}


@pytest.fixture(scope="session")
def pb_data():
    from quantgym.envs.portbench.data import load_portbench_data

    return load_portbench_data()


@pytest.fixture(scope="session")
def small_grid():
    return parse_grid(SMALL_GRID)


@pytest.fixture(scope="session")
def local_sweep(tmp_path_factory, small_grid, pb_data):
    """The small grid run once with the local backend (2 workers)."""
    from quantgym.sweep.runner import run_sweep

    out = tmp_path_factory.mktemp("sweep_local")
    return run_sweep(small_grid, out, backend="local", workers=2, data=pb_data)


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray with 2 CPUs started once for the whole session (Ray start is slow)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


class TrendPipeline:
    """Rule-based S1–S3 pipeline agent used to produce stage-scored runs in tests.

    S1 views = clip(scale · trailing return, −1, 1) on available assets; S2 buy above +0.05, sell below
    −0.05; S3 equal weights on the buys (all available assets when none). Not a baseline: the env scores
    its S1–S5 answers, so its runs carry stage scores and CEPS like an LLM agent's.
    """

    def __init__(self, scale: float, name: str) -> None:
        self.scale, self.name = scale, name

    def act(self, obs, info):
        avail = np.asarray(obs["available"], dtype=bool)
        views = np.clip(np.asarray(obs["trailing_return"], dtype=float) * self.scale, -1.0, 1.0) * avail
        signals = np.where(views > 0.05, 2, np.where(views < -0.05, 0, 1))
        w = np.where((signals == 2) & avail, 1.0, 0.0)
        if w.sum() == 0:
            w = avail.astype(float)
        return {"views": views, "signals": signals, "weights": w / w.sum(), "status": 0}


@pytest.fixture(scope="session")
def bench_dir(tmp_path_factory):
    """A real ``quantgym bench`` output (two baselines, one period, one profile) made through the CLI."""
    from typer.testing import CliRunner

    from quantgym.cli import app

    out = tmp_path_factory.mktemp("bench")
    res = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--periods", "covid_2020", "--profiles",
                                   "conservative", "--agents", "equal_weight,risk_parity", "--no-plots", "--quiet",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="session")
def eval_dir(tmp_path_factory, pb_data):
    """An eval-style output: two stage-scored pipeline agents on the same period (common results schema)."""
    from quantgym.evaluation import evaluate
    from quantgym.results import SectionResult, write_results

    out = tmp_path_factory.mktemp("eval")
    sec = SectionResult(task="portbench")
    for scale, name in ((5.0, "trend-x5"), (20.0, "trend-x20")):
        r = evaluate("PortBench-Conservative-v0", TrendPipeline(scale, name), period="covid_2020", data=pb_data)
        sec.rows.append(r.summary_row(gate=bool(r.metrics["dd_within_tolerance"])))
        sec.runs.append(r.to_dict())
    write_results(out, [sec], meta={"command": "eval (test pipeline agents)"})
    return out


@pytest.fixture(scope="session")
def report(tmp_path_factory, bench_dir, eval_dir, local_sweep):
    from quantgym.sweep.report import build_report

    return build_report([bench_dir, eval_dir, local_sweep.out_dir], tmp_path_factory.mktemp("report"),
                        title="quantgym test leaderboard")
