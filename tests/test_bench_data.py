"""``quantgym bench --data TASK=PATH``: a task's section runs on the user's own data set, loaded
once through the task's own loader; the path is printed once in the header and recorded in results.json;
every bad or unusable input is one line (exit 2), nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from quantgym.cli import app
from quantgym.results import read_summary_csv

#: a tiny hand-made PortBench universe, one or two tickers per class (docs/data.md §7)
TINY = {"SPY": "equity", "QQQ": "equity", "TLT": "bond", "IEF": "bond", "GLD": "commodity", "VNQ": "real_estate",
        "BIL": "cash", "BTC-USD": "crypto"}
#: options of every PortBench run here: one profile, one window inside the tiny data, no plots
FAST = ["--tasks", "portbench", "--profiles", "balanced", "--no-plots", "-q"]


def write_portbench_dir(root: Path, classes: dict[str, str], start: str = "2019-01-01", end: str = "2020-12-31",
                        seed: int = 7) -> Path:
    """A PortBench data directory of seeded random walks on weekdays (prices.parquet + assets.csv)."""
    dates = pd.bdate_range(start, end, name="date")
    r = np.random.default_rng(seed).normal(0.0003, 0.01, (len(dates), len(classes)))
    root.mkdir(parents=True, exist_ok=True)
    prices = pd.DataFrame(100 * np.cumprod(1 + r, axis=0), index=dates, columns=list(classes))
    prices.to_parquet(root / "prices.parquet")
    pd.DataFrame({"ticker": list(classes), "asset_class": list(classes.values())}).to_csv(root / "assets.csv",
                                                                                        index=False)
    return root


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("own_data")
    no_bonds = {t: c for t, c in TINY.items() if c not in ("bond", "cash")}  # none of 60/40's bond leg
    out = {"tiny": write_portbench_dir(root / "tiny", TINY),
           "nobonds": write_portbench_dir(root / "nobonds", no_bonds),
           "nospy": write_portbench_dir(root / "nospy", {t: c for t, c in TINY.items() if t != "SPY"}),
           "empty": root / "empty"}
    out["empty"].mkdir()
    bad = write_portbench_dir(root / "noclass", TINY)
    pd.DataFrame({"ticker": list(TINY)}).to_csv(bad / "assets.csv", index=False)
    out["noclass"] = bad
    for name, value in (("negative", -5.0), ("zero", 0.0), ("inf", np.inf)):  # one bad price in a real column
        d = write_portbench_dir(root / name, TINY)
        prices = pd.read_parquet(d / "prices.parquet")
        prices.iloc[300, 1] = value
        prices.to_parquet(d / "prices.parquet")
        out[name] = d
    return out


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def run_bad(tmp_path: Path, args: list[str], *needles: str) -> str:
    """``quantgym bench ARGS --out tmp_path/o``: exit 2, one output line holding every needle, nothing written."""
    before = _tree(tmp_path)
    res = CliRunner().invoke(app, ["bench", *args, "--out", str(tmp_path / "o")])
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and lines[0].startswith("error: --data "), res.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert "Traceback" not in res.output
    assert _tree(tmp_path) == before
    return lines[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, dirs):
    """The same small bench on the bundled data and on the tiny data: 60/40 as a baseline, Equal-Weight as an
    extra agent (--agent), covid_2020 (inside both data sets)."""
    root = tmp_path_factory.mktemp("bench_data")
    out = {}
    for name, extra in (("bundled", []), ("own", ["--data", f"portbench={dirs['tiny']}"])):
        r = CliRunner().invoke(app, ["bench", *FAST, "--periods", "covid_2020", "--agents", "sixty_forty",
                                     "--agent", "equal_weight", *extra, "--out", str(root / name)],
                               env={"COLUMNS": "100"}, terminal_width=100)
        assert r.exit_code == 0, r.output
        out[name] = (root / name, r.output)
    return out


def _metrics(out: Path) -> dict[str, dict]:
    doc = json.loads((out / "results.json").read_text())
    return {r["agent"]: r["metrics"] for r in doc["tasks"]["portbench"]["runs"]}


def test_own_data_changes_every_result_baselines_and_extra_agents(runs):
    bundled, own = _metrics(runs["bundled"][0]), _metrics(runs["own"][0])
    assert set(bundled) == set(own) == {"60/40", "Equal-Weight"}
    for agent in own:
        assert own[agent]["sharpe"] != pytest.approx(bundled[agent]["sharpe"], rel=1e-6), agent
        assert own[agent]["ret_pct"] != pytest.approx(bundled[agent]["ret_pct"], rel=1e-6), agent
    # the extra agent is Equal-Weight, the uncertainty test's reference: on the same (own) data ΔSharpe is 0
    rows = {r["agent"]: r for r in read_summary_csv(runs["own"][0] / "summary.csv")}
    assert float(rows["equal_weight"]["dsharpe_eqw"]) == 0.0
    assert float(read_summary_csv(runs["bundled"][0] / "summary.csv")[1]["dsharpe_eqw"]) == 0.0


def test_the_path_is_recorded_in_results_json_and_printed_once(runs, dirs):
    out, text = runs["own"]
    path = str(dirs["tiny"].resolve())
    doc = json.loads((out / "results.json").read_text())
    assert doc["meta"]["options"]["data"] == {"portbench": path}
    assert doc["meta"]["data"]["portbench"]["path"] == path
    assert doc["tasks"]["portbench"]["data"]["path"] == path
    notes = doc["tasks"]["portbench"]["data"]["notes"]
    assert any("8 tickers traded" in n for n in notes)
    assert "60/40 lacks 6 of 11 tickers (LQD, HYG, ...); legs use the rest (§8.2)" in notes
    flat = " ".join(text.split())
    assert flat.count(path) == 1 and f"portbench: your own data {path} (not the bundled benchmark data)" in flat
    bundled = json.loads((runs["bundled"][0] / "results.json").read_text())
    assert bundled["meta"]["options"]["data"] == {} and bundled["meta"]["data"] == {"portbench": None}
    assert "data" not in bundled["tasks"]["portbench"]
    assert "your own data" not in runs["bundled"][1]


def test_default_periods_outside_the_data_are_refused(tmp_path, dirs):
    line = run_bad(tmp_path, ["--tasks", "portbench", "--data", f"portbench={dirs['tiny']}"],
                   "does not cover normal_2024 (2024-01-01..2024-12-31), china_2015", "crypto_2022",
                   "the default periods are the bundled windows", "--periods START:END:FREQ")
    assert "covid_2020" not in line  # inside 2019-2020
    run_bad(tmp_path, ["--tasks", "portbench", "--periods", "2019-02-01:2019-06-30:weekly", "--data",
                       f"portbench={dirs['tiny']}"], "2019-02-01:2019-06-30:weekly", "60 trading days before it")


def test_sixty_forty_without_a_leg_is_refused(tmp_path, dirs):
    run_bad(tmp_path, [*FAST, "--periods", "covid_2020", "--data", f"portbench={dirs['nobonds']}"],
            "60/40 needs at least one ticker of each leg", "bond tickers (TLT, IEF, BIL, LQD, HYG)",
            "(--agents equal_weight,risk_parity,cov_risk_parity,min_variance,black_litterman)")
    run_bad(tmp_path, [*FAST, "--periods", "covid_2020", "--agents", "equal_weight", "--agent", "60/40", "--data",
                       f"portbench={dirs['nobonds']}"], "60/40 needs at least one ticker", "(no --agent 60/40)")
    r = CliRunner().invoke(app, ["bench", *FAST, "--periods", "covid_2020", "--agents", "equal_weight",
                                 "--data", f"portbench={dirs['nobonds']}", "--out", str(tmp_path / "ok")])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("args, needles", [
    (["--data", "market_bench=."], ["Market-Bench's bench checks the reference agent and the mutants on "
                                    "the 15 shipped rounds", "run it without --data"]),
    (["--data", "nope=."], ["'nope' is not a task", "portbench, quant_arena, market_bench"]),
    (["--data", "portbench_qa=."], ["'portbench_qa' has no bench section"]),
    (["--data", "portbench"], ["expected TASK=PATH"]),
    (["--tasks", "portbench", "--data", "portbench=/no/such/dir"], ["/no/such/dir does not exist"]),
    (["--tasks", "portbench", "--data", "quant_arena=."], ["quant_arena is not among the tasks run (portbench)"]),
])
def test_bad_data_options_are_one_line(tmp_path, args, needles):
    run_bad(tmp_path, args, *needles)


@pytest.mark.parametrize("which, needles", [
    ("empty", ["expected prices.parquet and assets.csv"]),
    ("noclass", ["asset_class"]),
    ("nospy", ["the regime ticker 'SPY'"]),
    ("negative", ["prices must be positive and finite", "= -5"]),
    ("zero", ["prices must be positive and finite", "= 0"]),
    ("inf", ["prices must be positive and finite", "= inf"]),
])
def test_data_that_fails_to_load_is_one_line(tmp_path, dirs, which, needles):
    run_bad(tmp_path, [*FAST, "--periods", "covid_2020", "--data", f"portbench={dirs[which]}"], *needles)


def test_two_data_sets_for_one_task_comma_separated(tmp_path, dirs):
    run_bad(tmp_path, ["--tasks", "portbench", "--data", f"portbench={dirs['tiny']},portbench={dirs['nobonds']}"],
            "a second data set for portbench")


@pytest.fixture(scope="module")
def arena_panels(tmp_path_factory) -> dict[str, Path]:
    """Quant-Arena long panels cut from the bundled one: 10 stocks from 2021-10 (covers the windows) and from 2023."""
    from quantgym.envs.quant_arena.data import BUNDLED_DIR

    root = tmp_path_factory.mktemp("arena_data")
    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
    syms = sorted(df["symbol"].unique())[::80][:10]
    cut = df[df["symbol"].isin(syms) & (df["date"] >= pd.Timestamp("2021-10-01").date())].reset_index(drop=True)
    cut.to_parquet(root / "panel.parquet")
    cut[cut["date"] >= pd.Timestamp("2023-01-01").date()].reset_index(drop=True).to_parquet(root / "short.parquet")
    return {"panel": root / "panel.parquet", "short": root / "short.parquet"}


def test_quant_arena_refuses_a_panel_that_misses_the_windows(tmp_path, arena_panels):
    run_bad(tmp_path, ["--tasks", "quant_arena", "--data", f"quant_arena={arena_panels['short']}"],
            "the panel (2023-01-03..2024-12-31) does not cover the bench's windows",
            "research 2022-01-01..2023-12-31", "the bench runs these windows only")


@pytest.mark.slow
def test_quant_arena_runs_on_own_panel(tmp_path, arena_panels):
    out = tmp_path / "qa"
    r = CliRunner().invoke(app, ["bench", "--tasks", "quant_arena", "--data", f"quant_arena={arena_panels['panel']}",
                                 "--out", str(out), "--no-plots", "-q"], env={"COLUMNS": "120"}, terminal_width=120)
    assert r.exit_code == 0, r.output
    assert "sealed 2024 (your 10 stocks, net of costs)" in r.output and "Survivorship" not in r.output
    doc = json.loads((out / "results.json").read_text())
    sec = doc["tasks"]["quant_arena"]
    assert sec["data"]["path"] == str(arena_panels["panel"].resolve()) and sec["dataset"] == "file:panel.parquet"
    assert "survivorship" not in sec
    ref = next(x for x in sec["runs"] if x["agent"] == "market_reference")
    assert len(ref["sealed_nav"]["dates"]) > 200  # the panel's own 2024 days


def test_bench_help_documents_data_at_80_columns():
    r = CliRunner().invoke(app, ["bench", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0
    wide = [ln for ln in r.output.splitlines() if len(ln) > 80]
    assert not wide, wide[:3]
    text = " ".join(r.output.replace("│", " ").split())
    assert "--data TASK=PATH Run a task on your own data set instead of the bundled one" in text
    assert "…" not in r.output  # no option text cut off at 80 columns
