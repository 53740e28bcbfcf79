"""Every table with a Sharpe column says how that Sharpe is computed (PortBench: a constant 4 % risk-free rate,
spec portbench §7.1; Quant-Arena: none, spec quant_arena §10.11), and Sharpes of different tasks are never
ranked together."""

from __future__ import annotations

import io
from types import SimpleNamespace as NS

import pytest

from quantgym.envs.portbench.config import SHARPE_NOTE as PB_NOTE, PortBenchConfig, sharpe_note
from quantgym.envs.quant_arena.config import SHARPE_NOTE as QA_NOTE, ArenaScoringConfig
from quantgym.results import SectionResult, SummaryRow, write_results
from quantgym.tasks import sharpe_notes


def _console(width: int = 100):
    from rich.console import Console

    buf = io.StringIO()
    return Console(file=buf, width=width, force_terminal=False, color_system=None), buf


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_notes_come_from_the_config_and_name_the_spec():
    assert PortBenchConfig().rf == 0.04 and "rf = 4 % a year in every period" in PB_NOTE and "§7.1" in PB_NOTE
    assert "rf = 0 % a year" in sharpe_note(0.0) and "rf = 2.5 % a year" in sharpe_note(0.025)
    assert f"√{ArenaScoringConfig().n_ann}" in QA_NOTE and "no risk-free rate" in QA_NOTE and "§10.11" in QA_NOTE


def test_sharpe_notes_of_one_task_several_tasks_and_none():
    assert sharpe_notes(["portbench", "portbench"]) == f"{PB_NOTE}."
    both = sharpe_notes(["quant_arena", None, "portbench", "no_such_task", "market_bench"])
    assert both.startswith("Sharpe conventions differ by task; compare Sharpes within a task only")
    assert f"PortBench: {PB_NOTE}" in both and f"Quant-Arena: {QA_NOTE}" in both
    assert sharpe_notes(["market_bench"]) == "" and sharpe_notes([]) == ""  # no Sharpe, no note


def test_portbench_terminal_tables_state_the_risk_free_rate():
    from quantgym.envs.portbench.bench import print_period_tables, print_uncertainty_table
    from quantgym.envs.portbench.eval import print_eval_table, sharpe_caption

    m = {"sharpe": 0.5, "ret_pct": 1.0, "maxdd_pct": -2.0, "vol_pct": 3.0}
    res = {("Equal-Weight", "balanced", "covid_2020"): NS(metrics=m, ceps=None, status="ok")}
    con, buf = _console()
    print_period_tables(con, ["covid_2020"], ["balanced"], ["Equal-Weight"], [], res,
                        {("Equal-Weight", "balanced", "covid_2020"): True})
    assert PB_NOTE in _flat(buf.getvalue())
    con, buf = _console()
    iv = {k: {"lo": -1.0, "hi": 1.0} for k in ("sharpe", "total_return", "volatility", "max_drawdown")}
    unc = {id(res[("Equal-Weight", "balanced", "covid_2020")]): {"intervals": iv}}
    print_uncertainty_table(con, ["covid_2020"], ["balanced"], ["Equal-Weight"], [], res, unc)
    assert PB_NOTE in _flat(buf.getvalue())
    # eval: the runs' own rate (a run with rf = 0 says so), one note per rate
    runs = [{"result": NS(config={"config": {"rf": rf}})} for rf in (0.0, 0.04, 0.0)]
    cap = sharpe_caption(runs)
    assert cap == f"{sharpe_note(0.0)}. {PB_NOTE}."
    assert sharpe_caption([{"result": NS(config={})}]) == f"{PB_NOTE}."
    con, buf = _console()
    print_eval_table(con, "PortBench — x", [{"profile": "balanced", "period": "covid_2020", "agent": "x",
                                              "Sharpe": "0.5"}], llm=False, caption=cap)
    assert sharpe_note(0.0) in _flat(buf.getvalue())


def test_quant_arena_eval_table_states_no_risk_free_rate():
    from quantgym.envs.quant_arena.eval import _section

    fin = {"S": 50.0, "S_in": 40.0, "S_out": 60.0, "sealed": {"sharpe": 1.2, "excess_arr": 0.05, "rankic_mean": 0.02}}
    run = {"env_id": "QuantArena-v0", "period": "sealed_2024", "final": fin, "feedback": [{}], "usage": {}}
    con, buf = _console()
    _section([run], NS(name="agentX", usage=lambda: {}), con)
    assert QA_NOTE in _flat(buf.getvalue())


def _folder(path, rows, tasks):
    return write_results(path, [SectionResult(task=t, rows=[r for r in rows if r.task == t]) for t in tasks],
                         meta={"command": "bench"})


def test_report_footers_state_each_convention_and_rank_within_a_task_only(tmp_path):
    from quantgym.sweep.report import build_report

    def rows(shift):
        return [SummaryRow("portbench", "equal_weight", "balanced", "covid_2020", sharpe=0.1 + shift),
                SummaryRow("portbench", "risk_parity", "balanced", "covid_2020", sharpe=-2.0 + shift),
                SummaryRow("quant_arena", "low_volatility", None, "sealed_2024", sharpe=1.5 + shift),
                SummaryRow("quant_arena", "momentum_20d", None, "sealed_2024", sharpe=-0.4 + shift)]

    a = _folder(tmp_path / "a", rows(0.0), ["portbench", "quant_arena"])
    b = _folder(tmp_path / "b", rows(0.3), ["portbench", "quant_arena"])
    rep = build_report([a, b], tmp_path / "rep")
    tables = {t.title: t for s in rep.sections for t in s.tables}
    assert tables["PortBench — Balanced (drawdown tolerance 20%)"].note.startswith(PB_NOTE)
    assert QA_NOTE in tables["Quant-Arena — sealed window"].note
    rep_t = tables["Repeated runs: mean ± half-width of the Student-t interval"]
    assert f"PortBench: {PB_NOTE}" in rep_t.note and f"Quant-Arena: {QA_NOTE}" in rep_t.note
    # ranks restart per task: Quant-Arena's best (Sharpe 1.65) does not push PortBench's best to rank 2
    # (2 repeats give wide intervals, so ranks are ranges such as "1–2": the best of each task starts at 1)
    best = {(r[0], r[3]): r[2].split("–")[0] for r in rep_t.rows}
    assert best[("portbench", "equal_weight")] == "1" and best[("quant_arena", "low_volatility")] == "1"
    md, page = rep.markdown_path.read_text(), rep.html_path.read_text()
    all_rows = md.split("## All rows")[1]
    assert f"PortBench: {PB_NOTE}" in all_rows and f"Quant-Arena: {QA_NOTE}" in all_rows
    assert "no risk-free rate (spec quant_arena §10.11)" in page and "rf = 4 % a year in every period" in page


def test_sweep_table_caption_names_the_tasks_conventions():
    from quantgym.sweep.cli import _sharpe_caption

    assert _sharpe_caption(["PortBench-Balanced-v0", "PortBench-Conservative-v0"]) == f"{PB_NOTE}."
    both = _sharpe_caption(["PortBench-Balanced-v0", "QuantArena-v0", "No-Such-v0"])
    assert f"PortBench: {PB_NOTE}" in both and f"Quant-Arena: {QA_NOTE}" in both


def test_live_table_states_the_risk_free_rate(tmp_path):
    from typer.testing import CliRunner

    from quantgym.cli import app

    r = CliRunner().invoke(app, ["live", "-a", "equal_weight", "--data", "bundled", "--days", "2", "--run-dir",
                                 str(tmp_path / "run"), "--no-plots"], terminal_width=100)
    assert r.exit_code == 0, r.output
    assert PB_NOTE in _flat(r.output)


@pytest.mark.parametrize("width", [80])
def test_quant_arena_bench_caption_fits(width):
    from quantgym.envs.quant_arena.bench import print_tables

    con, buf = _console(width)
    print_tables(con, 800, [["a", "1%", "1%", "1.00", "-1%", "0.010", "50.0", "50.0"]],
                 [["a", "1%", "1%", "0.010", "0.10", "0.10", "0.10", "0.50", "50.0"]], width=width)
    text = buf.getvalue()
    assert QA_NOTE in _flat(text) and max(len(x) for x in text.splitlines()) <= width
