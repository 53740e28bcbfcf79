"""Every terminal table is readable at 80 columns and complete at 120: no `…` in a
number or a name, no line wider than the terminal."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from quantgym.cli import app
from quantgym.tables import Col, layout, print_table


def _render(width: int, *args, **kw) -> tuple[str, int]:
    buf = io.StringIO()
    con = Console(file=buf, width=width, force_terminal=False, color_system=None)
    n = print_table(con, *args, **kw)
    return buf.getvalue(), n


def assert_fits(text: str, width: int) -> None:
    assert "…" not in text, text
    assert all(len(ln) <= width for ln in text.splitlines()), max(text.splitlines(), key=len)


def test_layout_keeps_every_cell_whole_and_repeats_the_keys():
    cols = [Col("period", "left"), Col("agent", "left"), *[Col(f"metric {i}", short=f"m{i}") for i in range(12)]]
    rows = [["covid_2020", "Black-Litterman", *[f"{-1234.5678 * i:.4f}" for i in range(12)]],
            ["normal_2024", "Cov. Risk Parity", *[f"{0.5 * i:.4f}" for i in range(12)]]]
    for width in (80, 120, 200):
        text, n = _render(width, "T", cols, rows, keys=2)
        assert_fits(text, width)
        for r in rows:
            for cell in r:
                assert cell in text
        assert text.count("Black-Litterman") == n and (n == 1) == (width >= 200)
    short, groups = layout(cols, rows, 120, keys=2)
    assert short and all(g[:2] == [0, 1] for g in groups) and sorted({i for g in groups for i in g}) == list(range(14))


def test_full_headers_when_they_fit_short_ones_before_splitting():
    cols = [Col("agent", "left"), Col("Sharpe ratio", short="Sharpe")]
    assert layout(cols, [["a", "1.0"]], 80) == (False, [[0, 1]])
    cols = [Col("agent", "left"), *[Col(f"long header {i}", short=f"h{i}") for i in range(6)]]
    short, groups = layout(cols, [["a", *["1.0"] * 6]], 80)
    assert short and len(groups) == 1


def test_a_title_wider_than_its_table_is_one_line():
    title = "Research 2022-2023 (agent's feedback) (2/2)"
    text, _ = _render(80, title, [Col("agent", "left"), Col("PSR")], [["momentum_20d", "0.01"]])
    assert text.splitlines()[0].rstrip() == title
    assert_fits(text, 80)


def test_split_parts_fit_and_keep_column_groups_whole():
    import random

    from quantgym.tables import _total

    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(3, 14)
        cols = [Col(f"c{i}", group=rng.random() < 0.3) for i in range(n)]
        rows = [["x" * rng.randint(1, 14) for _ in range(n)]]
        keys = rng.randint(0, 2)
        short, groups = layout(cols, rows, 80, keys=keys)
        w = [max(len(c.head(short)), len(v)) for c, v in zip(cols, rows[0])]
        assert sorted({i for g in groups for i in g}) == list(range(n))
        assert all(g[:keys] == list(range(keys)) for g in groups)
        assert all(_total([w[i] for i in g]) <= 80 for g in groups)
        plain = layout([Col(c.header) for c in cols], rows, 80, keys=keys)[1]
        assert len(groups) == len(plain)  # column groups never cost a part
    cols = [Col("agent", "left"), *[Col(f"m{i}") for i in range(4)], Col("g0", group=True), Col("g1"), Col("g2")]
    assert layout(cols, [["a" * 20, *["1234567"] * 7]], 80)[1] == [[0, 1, 2, 3, 4], [0, 5, 6, 7]]
    # without groups: as many parts, balanced (not 5 columns then 2)
    assert layout([Col(c.header) for c in cols], [["a" * 20, *["1234567"] * 7]], 80)[1] == [[0, 1, 2, 3, 4],
                                                                                           [0, 5, 6, 7]]


@pytest.mark.parametrize("width", [80, 120])
def test_qa_table_fits(width, tmp_path):
    r = CliRunner().invoke(app, ["qa", "--agent", "oracle", "--agent", "naive", "--n", "2", "--out",
                                 str(tmp_path / "q"), "-q"], env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    assert_fits(r.output, width)
    for col in ("T1", "T7", "Mean", "T4_r", "Side."):
        assert col in r.output


# --- every table of bench / eval, rendered at 80 and 120 columns ------------------------------------------------

WIDTHS = [80, 120]


def _console(width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, force_terminal=False, color_system=None), buf


def _headers_in_one_part(text: str, headers) -> bool:
    """True when one table part (a block between two titles) holds every header."""
    return any(all(h in part for h in headers) for part in text.split("┏"))


@pytest.mark.parametrize("width", WIDTHS)
def test_portbench_bench_one_table_per_period(width, tmp_path):
    r = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--periods", "covid_2020", "--agents",
                                 "equal_weight,cov_risk_parity,black_litterman", "--no-plots", "-q", "--out",
                                 str(tmp_path / "b")], env={"COLUMNS": str(width)}, terminal_width=width)
    assert r.exit_code == 0, r.output
    assert_fits(r.output, width)
    assert r.output.count("PortBench — covid_2020") == 1  # one table for the three profiles
    tables = r.output.split("Sharpe = (252")[0]  # the caption; the optimiser-fallback lines below name agents too
    for name in ("Equal-Weight", "Cov. Risk Parity", "Black-Litterman"):
        assert tables.count(name) == 1  # each baseline once, not once per profile
    heads = ("gate conservative", "gate balanced", "gate aggressive") if width >= 120 else ("cons", "bal", "aggr")
    assert _headers_in_one_part(r.output, ("agent", "Sharpe", "Ret%", *heads))
    assert "drawdown tolerance conservative 10%" in " ".join(r.output.split())
    assert "rf = 4 % a year in every period (spec portbench §7.1)" in " ".join(r.output.split())


@pytest.mark.parametrize("width", WIDTHS)
def test_portbench_bench_table_with_another_agent(width):
    from types import SimpleNamespace as NS

    from quantgym.envs.portbench.bench import print_period_tables

    profiles, periods = ["conservative", "balanced", "aggressive"], ["covid_2020", "normal_2024"]
    m = {"sharpe": -12.3456, "ret_pct": -123.45, "maxdd_pct": -99.99, "vol_pct": 123.45}
    res, gates = {}, {}
    for lab, ceps in (("Black-Litterman", None), ("openai:gpt-4o-mini-2024-07-18", 0.123)):
        for p in profiles:
            for per in periods:
                res[(lab, p, per)] = NS(metrics=m, ceps=ceps, status="ok")
                gates[(lab, p, per)] = p == "aggressive"
    con, buf = _console(width)
    print_period_tables(con, periods, profiles, ["Black-Litterman"], ["openai:gpt-4o-mini-2024-07-18"], res, gates)
    text = buf.getvalue()
    assert_fits(text, width)
    assert "openai:gpt-4o-mini-2024-07-18 · balanced" in text and "-123.45" in text and "0.123" in text
    assert len(re.findall(r"Black-Litterman +│", text)) == text.count("┏")  # once per part, not per profile
    if width >= 120:
        assert text.count("┏") == 2  # one part per period
    # an LLM run whose calls all failed: marked, no number, the legend says why
    res[("openai:gpt-4o-mini-2024-07-18", "balanced", "covid_2020")] = NS(metrics=m, ceps=0.5, status="failed")
    con, buf = _console(width)
    print_period_tables(con, periods, profiles, ["Black-Litterman"], ["openai:gpt-4o-mini-2024-07-18"], res, gates)
    text = " ".join(buf.getvalue().split())
    assert "balanced (failed)" in text and "0.500" not in text and "no LLM call was answered" in text


def _eval_rows(agent: str, extreme: bool = False) -> list[dict[str, str]]:
    full = {"profile": "conservative", "period": "covid_2020", "agent": agent, "Sharpe": "-0.344", "Ret%": "-3.86",
            "MaxDD%": "-28.02", "Vol%": "31.95", "CEPS": "0.512", "S1": "0.333", "S2": "1.000", "S3": "0.667",
            "S4": "0.250", "S5": "0.875", "refused": "12", "unparse": "3", "calls": "108", "tokens": "41785",
            "warn": "2", "gate": "✗"}
    if extreme:
        full.update({"period": "2020-03-01:2020-03-31:weekly", "Sharpe": "-12.345", "Ret%": "-123.45",
                     "tokens": "1234567"})
    ref = {"profile": "conservative", "period": full["period"], "agent": "Equal-Weight", "Sharpe": "-0.344"}
    return [full, ref, {**full, "period": "normal_2024", "gate": ""}, {**ref, "period": "normal_2024"}]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("llm", [True, False])
@pytest.mark.parametrize("extreme", [False, True])
def test_portbench_eval_table_fits(width, llm, extreme):
    from quantgym.envs.portbench.eval import EVAL_COLS, print_eval_table

    agent = ("openai:gpt-4o-mini-2024-07-18" if extreme else "openai:gpt-4o-mini") if llm else "Cov. Risk Parity"
    rows = _eval_rows(agent, extreme)
    for two_profiles in (False, True):
        if two_profiles:
            rows = rows + [{**r, "profile": "aggressive"} for r in rows]
        con, buf = _console(width)
        n = print_eval_table(con, f"PortBench — {agent} (stagewise S1→S2→S3, text protocol)", rows, llm=llm)
        text = buf.getvalue()
        assert_fits(text, width)
        for cell in (rows[0]["period"], agent, rows[0]["Sharpe"], rows[0]["tokens"], "Equal-Weight"):
            assert (cell in text) == (llm or cell != rows[0]["tokens"])
        heads = [c for c in EVAL_COLS if llm or c.header not in ("refused", "unparse", "calls", "tokens", "warn")]
        assert all((c.short or c.header) in text or c.header in text for c in heads if c.header != "profile")
        assert "conservative profile" in text and ("aggressive profile" in text) == two_profiles
        assert text.count(f"{agent} │") == 2 * n  # the agent's rows, in every part (one table per profile)
        if not extreme:
            assert n <= (2 if width >= 120 else 4) * (1 + two_profiles)


def test_portbench_eval_cli_fits_at_80(tmp_path):
    r = CliRunner().invoke(app, ["eval", "--agent", "cov_risk_parity", "--env", "PortBench-Balanced-v0", "--period",
                                 "2020-03-01:2020-03-31:weekly", "--no-plots", "-q", "--out", str(tmp_path / "e")],
                           env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0, r.output
    assert_fits(r.output, 80)
    assert "Cov. Risk Parity" in r.output and "Equal-Weight" in r.output and "balanced profile" in r.output


def _mb_table():
    import pandas as pd

    rows = []
    for strategy in ("scheduled", "pairs", "delta_hedge", "overall"):
        for i, agent in enumerate(("reference", "mutant:delta_hedge/wrong_delta_sign", "mutant:scheduled/no_consumed",
                                   "stub_zeros")):
            rows.append({"agent": agent, "strategy": strategy, "rank": i + 1, "pass@3": 1.0, "pass@1": 1.0,
                         "mean_mae_solved": 1651583.59 * i, "avg_attempt": 1.0, "correct@3": 0.6, "correct@1": 0.0,
                         "mean_path_corr": -0.7722 if i else 1.0, "max_rel_error": 1.2e-13 if i < 3 else float("nan")})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("width", WIDTHS)
def test_market_bench_tables_fit_and_have_a_legend(width):
    from quantgym.envs.market_bench.bench import print_bench_tables

    con, buf = _console(width)
    print_bench_tables(con, _mb_table(), 3)
    text = buf.getvalue()
    assert_fits(text, width)
    assert "1651583.59" in text and "3303167.18" in text and "delta_hedge/wrong_delta_sign" in text
    assert "wrong_delta_sign │" in text and "-0.7722" in text and "1.2e-13" in text
    assert text.count("┏") == (4 if width >= 120 else 8)  # one part per table at 120, two at 80
    flat = " ".join(text.split())
    assert "p@3 / p@1 (pass@k" in flat and "c@3 / c@1 (correct@k" in flat
    assert "stub_zeros returns 0.0 for every required metric" in flat and "p@3 = p@1 = 1.00" in flat
    assert _headers_in_one_part(text, ("#", "agent", "p@3", "p@1", "MAE", "att.") if width < 120 else
                                ("#", "agent", "p@3", "p@1", "mean MAE", "att.", "c@3", "c@1", "corr", "rel err"))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("samples", [False, True])
def test_market_bench_eval_table_fits(width, samples):
    from types import SimpleNamespace as NS

    from quantgym.envs.market_bench.eval import _section
    from quantgym.evaluation import EvalPlan

    recs = [{"agent": "openai:gpt-4o-mini-2024-07-18", "strategy": s, "round": r, "attempt": a, "status": st,
             "mae": 1651583.59 if st == "SUCCESS" else None, "reason": "", "sandbox_status": "ok", "path_corr": None,
             "max_rel_error": None, "correct": a == 3}
            for s in ("scheduled", "delta_hedge") for r in (1, 2) for a, st in ((1, "FAILED"), (2, "SUCCESS"),
                                                                               (3, "SUCCESS"))]
    agent = NS(name="openai:gpt-4o-mini-2024-07-18", usage=lambda: {})
    con, buf = _console(width)
    _section([{"records": recs, "all_attempts": samples}], agent,
             EvalPlan(env_ids=["MarketBench-Pairs-v0"], options={"attempts": 3, "feedback": not samples}), con)
    text = buf.getvalue()
    assert_fits(text, width)
    assert "1651583.59" in text and "delta_hedge" in text and "openai:gpt-4o-mini-2024-07-18" in text
    assert _headers_in_one_part(text, ("strategy", "p@3", "p@1", "att.", "c@3", "c@1"))
    assert "stub_zeros" not in text and "(pass@k" in text
    assert ("Unbiased pass@k / correct@k" in text) == samples and ("not estimated" in text) != samples
    if samples:
        assert "[" in text and "rounds" in text  # intervals, whole


@pytest.mark.parametrize("width", WIDTHS)
def test_quant_arena_bench_tables_fit(width):
    from quantgym.envs.quant_arena.bench import RESEARCH_COLS, SEALED_COLS, print_tables

    sealed = [[n, "-12.3%", "-12.3%", "-1.23", "-25.1%", "-0.012", "45.2", "45.2"]
              for n in ("momentum_20d", "low_volatility", "market (EW)")]
    research = [[n, "-12.3%", "-12.3%", "-0.012", "-1.23", "-1.23", "12.34", "0.97", "45.2"]
                for n in ("momentum_20d", "low_volatility", "market (EW)")]
    con, buf = _console(width)
    print_tables(con, 800, sealed, research)
    text = buf.getvalue()
    assert_fits(text, width)
    assert text.count("┏") == (2 if width >= 120 else 3)  # the research table in two parts at 80
    assert "low_volatility" in text and "-25.1%" in text and "12.34" in text and "0.97" in text
    assert _headers_in_one_part(text, [c.header for c in SEALED_COLS])
    if width >= 120:
        assert _headers_in_one_part(text, [c.header for c in RESEARCH_COLS])
    assert all(c.header in text or c.short in text for c in RESEARCH_COLS)
    assert "Survivorship" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_quant_arena_eval_table_fits(width):
    from types import SimpleNamespace as NS

    from quantgym.envs.quant_arena.eval import EVAL_COLS, _section

    run = {"env_id": "QuantArena-OneShot-v0", "period": "sealed_2024", "final": {"frozen_candidate": 3, "S_in": 12.345, "S_out": 67.891,
                                                        "S": 40.118, "sealed": {"arr": -1.2345, "sharpe": -12.345}},
           "feedback": [{}, {}, {}], "usage": {"calls": 123, "total_tokens": 1234567}}
    con, buf = _console(width)
    run["final"]["overfitting"] = {"dsr": 0.123, "pbo": 0.5}
    _section([run], NS(name="openai:gpt-4o-mini-2024-07-18", usage=lambda: {}), con)
    text = buf.getvalue()
    assert_fits(text, width)
    assert "QuantArena-OneShot-v0" in text and "1234567" in text and "-123.45" in text and "0.12" in text
    if width >= 120:  # one part (short headers if need be)
        assert text.count("┏") == 1 and all((c.short or c.header) in text for c in EVAL_COLS)


@pytest.mark.parametrize("width", WIDTHS)
def test_dry_run_table_fits(width, tmp_path):
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:some-model-with-a-long-name", "--base-url",
                                 "http://127.0.0.1:9/v1", "--env", "PortBench-Balanced-v0,MarketBench-Pairs-v0",
                                 "--dry-run", "--price-in", "1", "--price-out", "2"],
                           env={"COLUMNS": str(width)}, terminal_width=width)
    assert r.exit_code == 0, r.output
    assert_fits(r.output, width)
    assert _headers_in_one_part(r.output, ("task", "ep.", "calls", "prompt", "compl.", "≤compl.", "USD", "wall"))
    assert "Market-Bench" in r.output and "total" in r.output


def test_live_table_fits_at_80(tmp_path, monkeypatch):
    monkeypatch.setenv("QUANTGYM_DATA", str(tmp_path / "no-data"))
    r = CliRunner().invoke(app, ["live", "--agent", "cov_risk_parity", "--days", "2", "--as-of", "2025-12-30",
                                 "--data", "bundled", "--no-plots", "--run-dir", str(tmp_path / "live")],
                           env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0, r.output
    # the table (the progress and summary lines around it name the run folder: not wrapped)
    assert_fits("\n".join(ln for ln in r.output.splitlines() if ln[:1] in "┏┃┡│└" or "PortBench live" in ln), 80)
    assert "…" not in r.output
    assert _headers_in_one_part(r.output, ("decisions", "new", "Sharpe", "Ret%", "MaxDD%", "Vol%"))
