"""The tasks' own command-line options (TaskOption in their records) and the eval plan's options."""

import pytest

from quantgym.evaluation import EvalPlan
from quantgym.tasks import TaskOption


def test_option_values_parse_by_kind_and_refuse_in_one_line():
    assert TaskOption("--p", "p", "").parse(" a, b ,") == ["a", "b"]
    assert TaskOption("--p", "p", "").parse(None) is None and TaskOption("--p", "p", "").parse(",") is None
    assert TaskOption("--r", "r", "", kind="int_list").parse("1,3") == [1, 3]
    assert TaskOption("--m", "m", "", kind="multi").parse(("x", "y")) == ["x", "y"]
    assert TaskOption("--f", "f", "", kind="flag").parse(False) is False
    with pytest.raises(ValueError, match=r"^--r takes integers, comma-separated; got '1,x'$"):
        TaskOption("--r", "r", "", kind="int_list").parse("1,x")
    with pytest.raises(ValueError, match="kind"):
        TaskOption("--r", "r", "", kind="float")
    with pytest.raises(ValueError, match="--"):
        TaskOption("-r", "r", "")


def test_plan_options_round_trip_and_older_plans_still_read():
    plan = EvalPlan(env_ids=["MarketBench-Pairs-v0"], options={"rounds": [2], "attempts": 4}, seed=3)
    assert EvalPlan.from_dict(plan.to_dict()) == plan
    assert plan.get("attempts") == 4 and plan.get("feedback", False) is False
    # a plan recorded before the options were grouped (the shipped floor transcripts' headers)
    old = {"env_ids": ["PortBench-Balanced-v0"], "periods": ["covid_2020"], "rounds": [1, 2, 3, 4, 5], "attempts": 3,
           "feedback": False, "all_attempts": False, "seed": 0, "env_kwargs": {}, "baseline": True, "plots": True}
    p = EvalPlan.from_dict(old)
    assert p.options["periods"] == ["covid_2020"] and p.options["baseline"] is True and p.seed == 0


def test_every_builtin_option_is_declared_once_per_flag():
    from quantgym.cli_options import declared

    for attr, needs in (("bench_options", "bench"), ("eval_options", "eval")):
        flags = declared(attr, needs)
        assert flags and all(d["help"] and d["tasks"] for d in flags.values())
    assert declared("eval_options", "eval")["--rounds"]["option"].agent is True  # Quant-Arena's, for its LLM agent
    assert declared("eval_options", "eval")["--period"]["option"].short == "-p"


def test_a_short_alias_works_on_the_command_line(tmp_path):
    from typer.testing import CliRunner

    from quantgym.cli import app

    r = CliRunner().invoke(app, ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "-p", "nope",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "unknown period 'nope'" in r.output


@pytest.mark.parametrize("make, needle", [
    (lambda: __import__("quantgym.envs.portbench.config", fromlist=["x"]).PortBenchCostModel(slippage_bps=-100),
     "slippage_bps must be in [0, 10000)"),
    (lambda: __import__("quantgym.envs.portbench.config", fromlist=["x"]).PortBenchCostModel(commission_bps=20000),
     "commission_bps must be in [0, 10000)"),
    (lambda: __import__("quantgym.envs.quant_arena.config", fromlist=["x"]).ArenaCostModel(stamp_rate_after=2.0),
     "stamp_rate_after must be in [0, 1)"),
    (lambda: __import__("quantgym.envs.quant_arena.config", fromlist=["x"]).ArenaCostModel(commission_rate=-0.01),
     "commission_rate must be in [0, 1)"),
    (lambda: __import__("quantgym.envs.quant_arena.config", fromlist=["x"]).ImpactModel(k_depth=-1),
     "k_depth must be > 0"),
])
def test_cost_and_impact_models_refuse_values_that_pay_the_agent_or_take_the_whole_trade(make, needle):
    with pytest.raises(ValueError, match=needle.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        make()
