"""``quantgym reproduce portbench`` end to end on the bundled data (spec §10, §11.1)."""

import json

import typer
from typer.testing import CliRunner

from quantgym.envs.portbench.paper.cli import register
from quantgym.envs.portbench.paper.reproduce import PUBLISHED_2024, ablation


def _app():
    app = typer.Typer()
    register(app)

    @app.callback()
    def _root():  # keep "reproduce" a sub-command
        pass

    return app


def test_reproduce_cli_end_to_end(tmp_path):
    res = CliRunner().invoke(_app(), [
        "reproduce", "portbench", "--out", str(tmp_path), "--agents", "equal_weight,sixty_forty,risk_parity",
        "--periods", "normal_2024,covid_2020", "--no-stress-ablation", "--ablation-flags", "weekday_calendar,universe,pas_real_estate",
    ])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "portbench_reproduction.md").read_text()
    data = json.loads((tmp_path / "portbench_reproduction.json").read_text())
    assert "| Equal-Weight | 0.921 | 0.863 | +0.058 |" in md  # ours (89_no_crypto), page, difference
    assert "covid_2020 | Equal-Weight | 0.046 | 0.045" in md
    paper = {(r["key"], r["period"]): r for r in data["paper"]}
    clean = {(r["key"], r["period"]): r for r in data["clean"]}
    e = paper[("equal_weight", "normal_2024")]
    assert (e["n_returns"], e["n_decisions"], e["first_decision"]) == (261, 11, "2024-02-01")
    assert clean[("equal_weight", "normal_2024")]["n_returns"] == 252
    # §10.1 sanity ranges for paper mode: EqW Sharpe within ±0.25, volatility within ±2 pp of the page
    assert abs(e["sharpe"] - PUBLISHED_2024["equal_weight"][0]) < 0.25
    assert abs(e["vol_pct"] - PUBLISHED_2024["equal_weight"][3]) < 2.0
    # §11.1 universe table re-measured
    uni = {r["universe"]: r for r in data["universes"]}
    assert [round(x, 2) for x in uni["81_crypto"]["eqw_2024"]] == [12.10, 0.74, 10.22, -4.95]
    flags = [r["flag"] for r in data["ablation"]]
    assert flags == ["clean", "weekday_calendar", "universe", "pas_real_estate"]
    assert "quantgym reproduce" in md


def test_reproduce_rejects_bad_input(tmp_path):
    r = CliRunner().invoke(_app(), ["reproduce", "market_bench", "--out", str(tmp_path)])
    assert r.exit_code != 0
    r = CliRunner().invoke(_app(), ["reproduce", "portbench", "--ablation-flags", "nope", "--out", str(tmp_path)])
    assert r.exit_code != 0 and "unknown ablation flag" in r.output


def test_ablation_scoring_flags_leave_eqw_unchanged():
    rows = ablation(["pas_real_estate", "short_prompts"])
    base = rows[0]["single"]
    for r in rows[1:]:
        assert r["single"] == base  # stage-scoring flags do not touch a direct-allocation NAV
