"""One period label per Quant-Arena result, whichever path wrote it: ``evaluate()``, ``quantgym eval``'s adapter,
``quantgym bench`` and a sweep all write :attr:`Windows.period_label` of the env's sealed window."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym

import quantgym  # noqa: F401 - registers the ids
from quantgym.envs.quant_arena.config import ArenaConfig, Windows
from quantgym.envs.quant_arena.examples import example_source

from .conftest import SMALL_WINDOWS


class OneShot:
    """Submits one example (the one-shot track ends the episode), with what the eval adapter reads of an
    LLM agent."""

    name = "one_shot"
    current_episode = "episode-1"
    logs: dict = {}
    engine = SimpleNamespace(config=SimpleNamespace(model="none"))

    def act(self, observation, info):
        return example_source("low_volatility")

    def episode_usage(self, label=None):
        return {"calls": 1, "failures": 0}

    def usage(self):
        return {"calls": 1, "transcript": None}


def test_windows_period_label():
    assert Windows().period_label == "sealed_2024"
    assert Windows(sealed_start="2024-01-01", sealed_end="2025-03-31").period_label == \
        "sealed_2024-01-01_2025-03-31"


def test_evaluate_eval_bench_and_sweep_write_one_period(small_real, tmp_path):
    from quantgym.envs.quant_arena import bench
    from quantgym.envs.quant_arena.eval import ADAPTER, run_quant_arena
    from quantgym.evaluation import evaluate
    from quantgym.plan import EvalPlan
    from quantgym.sweep.grid import RunSpec
    from quantgym.sweep.runs import _episode

    kw = dict(data=small_real, executor="inprocess", record_dir=False, **SMALL_WINDOWS)
    expected = Windows(**SMALL_WINDOWS).period_label
    assert expected == "sealed_2024"
    # evaluate()
    res = evaluate(gym.make("QuantArena-OneShot-v0", **kw), OneShot(), seed=0)
    assert res.period == expected and res.summary_row().period == expected
    # quantgym eval's adapter: the run and its summary row
    run = run_quant_arena(OneShot(), "QuantArena-OneShot-v0", EvalPlan(["QuantArena-OneShot-v0"], env_kwargs=kw))
    sec = ADAPTER.section([run], OneShot(), EvalPlan(["QuantArena-OneShot-v0"]),
                          SimpleNamespace(console=None, out_dir=tmp_path))
    assert run["period"] == sec.rows[0].period == expected
    # a sweep's run of a task without sweep hooks
    spec = RunSpec(agent="one_shot", env_id="QuantArena-OneShot-v0",
                   env_kwargs={"executor": "inprocess", "record_dir": False, **SMALL_WINDOWS}, seed=0)
    result, row = _episode(spec, OneShot(), None)
    assert result["period"] == row.period == expected
    # quantgym bench: the default windows, labelled by the same property
    assert bench.PERIOD == ArenaConfig().windows.period_label == "sealed_2024"
