"""One source for each PortBench value: the period grammar is parsed once per plan by PortBench's config,
every path gates a row with :func:`~quantgym.envs.portbench.config.period_gate` (spec §7.2), and the bench
periods are one constant."""

import json
import sys

import pytest
from typer.testing import CliRunner

from quantgym.envs.portbench import config
from quantgym.envs.portbench.config import BENCH_PERIODS, STRESS_PERIODS, period_gate

CUSTOM = "2020-03-02:2020-03-31:weekly"


@pytest.fixture
def parsed(monkeypatch):
    """The period arguments :func:`resolve_period` had to parse (a name, string or dict; not an object),
    wherever a module imported it."""
    import quantgym.envs.portbench.env  # noqa: F401 - the env's modules, imported before the spy goes in
    import quantgym.envs.portbench.eval  # noqa: F401

    real = config.resolve_period
    seen: list = []

    def spy(period):
        if not isinstance(period, (config.Period, config.LivePeriod)):
            seen.append(period)
        return real(period)

    for mod in list(sys.modules.values()):
        if getattr(mod, "resolve_period", None) is real:
            monkeypatch.setattr(mod, "resolve_period", spy)
    return seen


def test_quantgym_eval_parses_its_period_once_for_the_agent_and_its_equal_weight_reference(tmp_path, parsed):
    from quantgym.cli import app

    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["eval", "--agent", "sixty_forty", "--env", "PortBench-Balanced-v0",
                                 "--period", f" {CUSTOM}", "--out", str(out), "--no-plots", "-q"])
    assert r.exit_code == 0, r.output
    assert parsed == [CUSTOM]  # validate_plan, once: the plan carries the Period from then on
    doc = json.loads((out / "results.json").read_text())
    runs = doc["tasks"]["portbench"]["runs"]
    assert [run["agent"] for run in runs] == ["60/40", "Equal-Weight"]  # the reference found its agent row
    assert {run["period"] for run in runs} == {"2020-03-02_2020-03-31_weekly"}
    assert doc["meta"]["plan"]["options"]["periods"][0]["start"] == "2020-03-02"  # the resolved window
    assert "validated" not in doc["meta"]["plan"]


def test_a_validated_plan_is_not_validated_again(monkeypatch):
    from quantgym.envs.portbench.eval import PortBenchEval
    from quantgym.plan import EvalPlan, validate_plan

    calls = []
    real = PortBenchEval.validate
    monkeypatch.setattr(PortBenchEval, "validate", lambda self, plan: calls.append(plan) or real(self, plan))
    plan = validate_plan(EvalPlan(["PortBench-Balanced-v0"], options={"periods": ["covid_2020"]}))
    assert validate_plan(plan) is plan and len(calls) == 1
    assert plan.options["periods"] == [config.PERIODS["covid_2020"]]
    # recorded and read back (a transcript's header, --repeats): the same window
    again = EvalPlan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert validate_plan(again).options["periods"] == [config.PERIODS["covid_2020"]]


def test_resolve_period_owns_the_start_end_freq_grammar():
    per = config.resolve_period(" 2020-03-02:2020-03-31 ")
    assert (per.name, per.start, per.end, per.freq) == ("2020-03-02_2020-03-31_monthly", "2020-03-02",
                                                         "2020-03-31", "monthly")
    assert config.resolve_period(per) is per
    import quantgym.evaluation as ev

    assert not any(hasattr(ev, n) for n in ("parse_period", "period_label", "_PERIOD_RE"))


@pytest.mark.parametrize("period, needle", [
    ({"start": "2016-01-01", "end": "2016-12-31", "frequency": "daily"}, "unknown key(s) ['frequency']"),
    ({"start": "2016-01-01", "end": "2016-12"}, "end '2016-12' is not a YYYY-MM-DD date"),
    ({"start": "2016-13-01", "end": "2016-12-31"}, "start '2016-13-01' is not a YYYY-MM-DD date"),
    ({"start": "2016-02-30", "end": "2016-12-31"}, "start '2016-02-30' is not a YYYY-MM-DD date"),
    ({"start": "2016-06-01", "end": "2016-03-01"}, "the end is before the start"),
])
def test_a_dict_period_is_checked_like_the_string_form(period, needle):
    """A typo in a dict period is a one-line error, never a silently different window (an ignored key used to
    fall back to monthly decisions; a partial date to another end)."""
    with pytest.raises(ValueError) as err:
        config.resolve_period(period)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_dict_period_takes_dates_and_timestamps():
    import datetime

    import pandas as pd

    per = config.resolve_period({"start": datetime.date(2016, 1, 4), "end": pd.Timestamp("2016-06-30"),
                                 "freq": "weekly"})
    assert (per.start, per.end, per.freq, per.name) == ("2016-01-04", "2016-06-30", "weekly",
                                                         "2016-01-04_2016-06-30_weekly")


# ------------------------------------------------------------------------------------------ §7.2 gate
#: drawdowns on both sides of a 10 % tolerance (the 1e-12 slack of within_tolerance included)
MDDS = {"normal_2024": -0.30, "china_2015": -0.10 - 5e-13, "covid_2020": -0.05, "crypto_2022": -0.1000001}


def test_the_sweep_gates_with_period_gate():
    from quantgym.envs.portbench.sweep import HOOKS

    tol = 0.10  # conservative
    records = [{"run_id": p, "spec": {"agent": "a", "env_id": "PortBench-Conservative-v0",
                                      "env_kwargs": {"period": p}, "seed": 0, "agent_options": {}},
                "result": {"period": p, "profile": "conservative", "metrics": {"max_drawdown": m}}}
               for p, m in MDDS.items()]
    assert HOOKS.gates(records) == {"normal_2024": period_gate("normal_2024", MDDS, tol)}
    assert HOOKS.gates(records) == {"normal_2024": False}  # crypto_2022 exceeds it
    assert HOOKS.gates(records[:-1]) == {}  # a stress window missing, none failed: no gate
    assert HOOKS.gates([r for r in records if r["run_id"] != "china_2015"]) == {"normal_2024": False}
    assert HOOKS.gates([{**r, "result": {**r["result"], "metrics": {"max_drawdown": -0.01}}}
                        for r in records]) == {"normal_2024": True}


def test_the_normal_period_gate_is_known_false_as_soon_as_a_stress_window_fails():
    tol = 0.10
    assert period_gate("normal_2024", {"covid_2020": -0.30}, tol) is False  # the others cannot make it pass
    assert period_gate("normal_2024", {"covid_2020": -0.05}, tol) is None  # two windows not run
    assert period_gate("normal_2024", {p: -0.05 for p in STRESS_PERIODS}, tol) is True
    assert period_gate("normal_2024", MDDS, tol) is False and period_gate("china_2015", MDDS, tol) is True
    assert period_gate("2020-03-02_2020-03-31_weekly", MDDS, tol) is None


def test_the_report_gate_follows_the_rows_gates():
    """The leaderboard's gate of an agent is §7.2 over its rows' recorded gates: the same as period_gate's
    normal_2024 gate over the drawdowns, whichever windows were run."""
    from quantgym.envs.portbench.report import portbench_tables
    from quantgym.leaderboard import MISSING, fmt

    def table_gate(mdds):
        rows = [{"task": "portbench", "agent": "a", "profile": "conservative", "period": p, "sharpe": 0.5,
                 "maxdd_pct": 100 * m, "ceps": None, "gate": period_gate(p, mdds, 0.10)} for p, m in mdds.items()]
        table = portbench_tables(rows)[0]
        return table.rows[0][table.columns.index("gate")]

    for mdds in (MDDS, {p: -0.05 for p in MDDS}, {"normal_2024": -0.3, "covid_2020": -0.3},
                 {"normal_2024": -0.3, "covid_2020": -0.05}):
        assert table_gate(mdds) == fmt(period_gate("normal_2024", mdds, 0.10), missing=MISSING), mdds


def test_eval_rows_are_gated_with_period_gate(tmp_path):
    from types import SimpleNamespace

    from quantgym.envs.portbench.eval import _portbench_section
    from quantgym.evaluation import EvalResult
    from quantgym.plan import EvalPlan

    import pandas as pd

    runs = [{"result": EvalResult(task="portbench", agent="a", env_id="PortBench-Conservative-v0",
                                  profile="conservative", period=p, metrics={"max_drawdown": m}, stage_scores=None,
                                  ceps=None, nav=pd.Series(dtype=float)),
             "usage": None, "episode": None, "parse_stats": {}} for p, m in MDDS.items()]
    sec = _portbench_section(runs, {}, SimpleNamespace(name="a"), tmp_path,
                             EvalPlan(["PortBench-Conservative-v0"], plots=False), None)
    assert {row.period: row.gate for row in sec.rows} == {p: period_gate(p, MDDS, 0.10) for p in MDDS}
    assert [row.gate for row in sec.rows] == [False, True, True, False]


def test_one_list_of_bench_periods():
    assert BENCH_PERIODS == ("normal_2024", *STRESS_PERIODS) and set(BENCH_PERIODS) <= set(config.PERIODS)
    # the only period outside the bench: the post-cutoff window for recall checks (docs/blind.md)
    assert set(config.PERIODS) - set(BENCH_PERIODS) == {"recent_2025"}
