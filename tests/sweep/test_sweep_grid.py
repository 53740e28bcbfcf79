"""Grid files, expansion and stable run ids."""

from __future__ import annotations

import hashlib
import json

import pytest

from quantgym.sweep.grid import RUN_SPEC_VERSION, GridError, RunSpec, grid_from_flags, load_grid, parse_grid


def test_expand_is_the_cartesian_product_in_grid_order():
    g = parse_grid({"agents": ["equal_weight", "risk_parity"], "envs": ["PortBench-Conservative-v0"],
                    "env_kwargs": {"period": ["covid_2020", "china_2015"], "oracle": "lookback"}, "seeds": [0, 1]})
    runs = g.expand()
    assert len(runs) == 2 * 1 * 2 * 2
    assert [(r.agent, r.env_kwargs["period"], r.seed) for r in runs[:4]] == [
        ("equal_weight", "covid_2020", 0), ("equal_weight", "covid_2020", 1),
        ("equal_weight", "china_2015", 0), ("equal_weight", "china_2015", 1)]
    assert all(r.env_kwargs["oracle"] == "lookback" for r in runs)
    assert len({r.run_id for r in runs}) == len(runs)


def test_run_id_is_the_hash_of_the_canonical_spec_and_ignores_key_order():
    a = RunSpec("equal_weight", "PortBench-Balanced-v0", {"period": "covid_2020", "oracle": "lookback"}, 3)
    b = RunSpec("equal_weight", "PortBench-Balanced-v0", {"oracle": "lookback", "period": "covid_2020"}, 3)
    assert a.run_id == b.run_id
    canon = json.dumps({"v": RUN_SPEC_VERSION, **a.to_dict()}, sort_keys=True, separators=(",", ":"))
    assert a.canonical() == canon
    assert a.run_id == hashlib.sha256(canon.encode()).hexdigest()[:16]
    assert RunSpec.from_dict(a.to_dict()) == a
    # every field of the spec changes the id
    others = [RunSpec("risk_parity", a.env_id, a.env_kwargs, 3), RunSpec(a.agent, "PortBench-Aggressive-v0",
              a.env_kwargs, 3), RunSpec(a.agent, a.env_id, {"period": "china_2015"}, 3),
              RunSpec(a.agent, a.env_id, a.env_kwargs, 4), RunSpec(a.agent, a.env_id, a.env_kwargs, 3, {"x": 1}),
              RunSpec(a.agent, a.env_id, a.env_kwargs, 3, data="/some/dir")]
    assert len({a.run_id, *(o.run_id for o in others)}) == 1 + len(others)


def test_blocks_inherit_top_level_keys_and_duplicates_are_dropped():
    g = parse_grid({"name": "two", "envs": ["PortBench-Conservative-v0"], "seeds": [0],
                    "grids": [{"agents": ["equal_weight"], "env_kwargs": {"period": ["covid_2020", "china_2015"]}},
                              {"agents": ["equal_weight", {"spec": "risk_parity", "options": {}}],
                               "env_kwargs": {"period": "covid_2020"}}]})
    runs = g.expand()
    assert g.name == "two"
    assert [(r.agent, r.env_kwargs["period"]) for r in runs] == [
        ("equal_weight", "covid_2020"), ("equal_weight", "china_2015"), ("risk_parity", "covid_2020")]


def test_yaml_file_and_flags_give_the_same_runs(tmp_path):
    pytest.importorskip("yaml")
    p = tmp_path / "g.yaml"
    p.write_text("agents: [equal_weight]\nenvs: [PortBench-Conservative-v0]\n"
                 "env_kwargs:\n  period: [covid_2020, china_2015]\n  lookback: 60\nseeds: [0, 7]\n")
    from_file = load_grid(p).expand()
    from_flags = grid_from_flags(["equal_weight"], ["PortBench-Conservative-v0"],
                                 ["period=covid_2020,china_2015", "lookback=60"], [0, 7]).expand()
    assert [r.run_id for r in from_file] == [r.run_id for r in from_flags]
    assert from_flags[0].env_kwargs["lookback"] == 60  # YAML scalar typing for flag values


def test_the_example_grid_parses():
    pytest.importorskip("yaml")
    from pathlib import Path

    g = load_grid(Path(__file__).resolve().parents[2] / "examples" / "sweep_baselines.yaml")
    assert len(g.expand()) == 3 * 2 * 4


@pytest.mark.parametrize("doc, msg", [
    ({"agents": ["equal_weight"]}, "no envs"),
    ({"envs": ["PortBench-Conservative-v0"]}, "no agents"),
    ({"agents": ["a"], "envs": ["e"], "seed": [0]}, "unknown top-level key"),
    ({"agents": ["a"], "envs": ["e"], "seeds": ["x"]}, "seeds must be integers"),
    ({"agents": ["a"], "envs": ["e"], "env_kwargs": ["period"]}, "env_kwargs must be a mapping"),
    ({"agents": ["a"], "envs": ["e"], "env_kwargs": {"data": "/x"}}, "top-level 'data:'"),
    ({"agents": [{"spec": "a", "opts": {}}], "envs": ["e"]}, "unknown key"),
    ({"grids": []}, "non-empty list"),
    (["agents"], "YAML mapping"),
])
def test_bad_grids_give_clear_errors(doc, msg):
    with pytest.raises(GridError, match=msg):
        parse_grid(doc)


def test_bad_yaml_and_bad_flag(tmp_path):
    with pytest.raises(GridError, match="NAME=VALUE"):
        grid_from_flags(["a"], ["e"], ["period"])
    pytest.importorskip("yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents: [a\nenvs: b: c\n")
    with pytest.raises(GridError, match="not valid YAML"):
        load_grid(bad)


def test_api_keys_are_refused_in_grids():
    with pytest.raises(GridError, match="OPENAI_API_KEY"):
        parse_grid({"agents": [{"spec": "openai:gpt-4o-mini", "options": {"api_key": "sk-..."}}], "envs": ["e"]})
    with pytest.raises(GridError, match="would be stored"):
        parse_grid({"agents": ["openai:m"], "envs": ["e"], "agent_options": {"api_key": "sk-..."}})
