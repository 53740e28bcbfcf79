"""Blind runs in sweep grids (docs/blind.md, docs/sweeps.md): ``blind: [false, true]`` gives named and blind runs
of each cell, the blind ones labelled "(blind)" like ``quantgym eval --blind``; ids without a blind mode are
refused before the first run."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from quantgym.sweep.grid import GridError, grid_from_flags, parse_grid
from quantgym.sweep.runner import SweepError, check_runs, run_sweep

from .test_sweep_cli_table import _app

CELL = {"agents": ["equal_weight"], "envs": ["PortBench-Conservative-v0"], "env_kwargs": {"period": "covid_2020"}}


def test_blind_axis_expands_and_keeps_the_named_run_id():
    plain = parse_grid(CELL).expand()
    both = parse_grid({**CELL, "blind": [False, True]}).expand()
    assert [r.env_kwargs for r in both] == [{"period": "covid_2020"}, {"period": "covid_2020", "blind": True}]
    assert both[0].run_id == plain[0].run_id and both[1].run_id != plain[0].run_id
    # the same through env_kwargs, a block, and the flags
    assert [r.run_id for r in parse_grid({**CELL, "env_kwargs": {**CELL["env_kwargs"], "blind": [False, True]}})
            .expand()] == [r.run_id for r in both]
    assert parse_grid({"grids": [{**CELL, "blind": True}]}).expand()[0].run_id == both[1].run_id
    flags = grid_from_flags(CELL["agents"], CELL["envs"], ["period=covid_2020"], blind=True).expand()
    assert [r.run_id for r in flags] == [both[1].run_id]
    assert [r.run_id for r in grid_from_flags(CELL["agents"], CELL["envs"],
                                              ["period=covid_2020", "blind=false,true"]).expand()] == \
        [r.run_id for r in both]


@pytest.mark.parametrize("doc, msg", [
    ({**CELL, "blind": "yes"}, "blind: true, false"),
    ({**CELL, "blind": [True, 1]}, "blind: true, false"),
    ({**CELL, "blind": []}, "blind: true, false"),
    ({**CELL, "blind": True, "env_kwargs": {"blind": True}}, "not both"),
])
def test_bad_blind_values_are_refused(doc, msg):
    with pytest.raises(GridError, match=msg):
        parse_grid(doc)
    with pytest.raises(GridError, match="not both"):
        grid_from_flags(["a"], ["e"], ["blind=true"], blind=True)


def test_blind_is_checked_per_env_before_the_sweep(pb_data):
    ok = parse_grid({"agents": ["openai:m"], "envs": ["QuantArena-v0", "PortBench-QA-v0"], "blind": True})
    check_runs(ok.expand(), data=pb_data)  # both have a blind mode
    mb = parse_grid({"agents": ["openai:m"], "envs": ["MarketBench-Scheduled-v0"], "blind": [False, True]})
    with pytest.raises(SweepError) as e:
        check_runs(mb.expand(), data=pb_data)
    msg = str(e.value)
    assert "\n" not in msg and "MarketBench-Scheduled-v0 has no blind mode" in msg and "docs/blind.md" in msg
    check_runs(parse_grid({"agents": ["openai:m"], "envs": ["MarketBench-Scheduled-v0"], "blind": False}).expand(),
               data=pb_data)  # blind: false is the default


def test_blind_runs_are_labelled_recorded_and_score_the_same(tmp_path, pb_data):
    """A classical baseline reads no prompt: blind and named give the same numbers; the blind row says so."""
    out = run_sweep(parse_grid({**CELL, "blind": [False, True]}), tmp_path / "s", workers=1, data=pb_data)
    named, blind = out.records
    assert named["status"] == blind["status"] == "ok"
    assert named["summary"]["agent"] == "equal_weight" and blind["summary"]["agent"] == "equal_weight (blind)"
    assert named["result"]["agent"] == "Equal-Weight" and blind["result"]["agent"] == "Equal-Weight (blind)"
    for k in ("sharpe", "ret_pct", "maxdd_pct", "vol_pct", "gate"):
        assert blind["summary"][k] == named["summary"][k], k
    assert blind["result"]["nav"] == named["result"]["nav"]
    # recorded: the env kwarg and the episode's alias map (evaluator side)
    assert blind["spec"]["env_kwargs"]["blind"] is True and "blind" not in named["spec"]["env_kwargs"]
    assert blind["result"]["config"]["env_kwargs"]["blind"] is True
    assert blind["result"]["metrics"]["blind"] is True and blind["result"]["metrics"]["blind_aliases"]["aliases"]
    csv = (tmp_path / "s" / "summary.csv").read_text()
    assert "equal_weight (blind)" in csv


def test_cli_blind_flags(tmp_path):
    res = CliRunner().invoke(_app(), [
        "sweep", "--agents", "equal_weight", "--envs", "PortBench-Conservative-v0", "--set", "period=covid_2020",
        "--set", "blind=false,true", "--out", str(tmp_path / "s"), "--workers", "1", "-q"],
        env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    assert "Equal-Weight (blind)" in res.output and "blind=True" in res.output
    res = CliRunner().invoke(_app(), ["sweep", "--agents", "openai:m", "--envs", "MarketBench-Pairs-v0", "--blind",
                                      "--out", str(tmp_path / "mb")])
    assert res.exit_code == 2 and "MarketBench-Pairs-v0 has no blind mode" in res.output
    assert not (tmp_path / "mb").exists()
