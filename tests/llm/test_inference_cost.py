"""Returns net of the agent's inference cost (quantgym.costs, quantgym.agents.llm.prices): the price table, the
exact cost from token counts, the net P&L on --capital, a replay's identical cost columns, the "n/a" of an
unknown price, and bad values refused in one line."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from typer.testing import CliRunner

from quantgym.agents.llm import prices as P
from quantgym.cli import app
from quantgym.costs import (COST_COLUMNS, DEFAULT_CAPITAL, check_capital, cost_columns, cost_record, net_of_cost,
                            total_cost)
from quantgym.leaderboard.metrics import get_metric, summary_columns
from quantgym.results import read_summary_csv

from . import pb_script as S
from .test_llm_e2e import QA_WINDOWS, qa_small  # noqa: F401 - the small real Quant-Arena data set (a fixture)

PERIOD = "2020-03-01:2020-03-31:weekly"
_OPTS = {"api_key": "test-key", "price_in": 1.0, "price_out": 3.0}


def test_bundled_table_is_sourced_and_dated():
    table = P.bundled_prices()
    assert len(table) >= 5
    for model, e in table.items():
        assert e["input"] >= 0 and e["output"] >= 0, model
        assert e["source"].startswith("https://"), model
        dt.date.fromisoformat(e["as_of"])  # a date


def test_docs_list_the_bundled_table():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "llm-agents.md").read_text()
    block = doc.split("<!-- prices.json table begin -->")[1].split("<!-- prices.json table end -->")[0]
    for model, e in P.bundled_prices().items():
        assert f"| `{model}` | {e['input']:.2f} | {e['output']:.2f} | {e['as_of']} | {e['source']}" in block, model
    assert block.count("\n| `") == len(P.bundled_prices())


def test_resolve_price_order():
    assert P.resolve_price("gpt-4o-mini", price_in=1, price_out=2) == P.PriceQuote(1.0, 2.0, "--price-in/--price-out")
    table = {"gpt-4o-mini": {"input": 9, "output": 9}}
    assert P.resolve_price("gpt-4o-mini", prices=table) == P.PriceQuote(9.0, 9.0, "price table")
    q = P.resolve_price("gpt-4o-mini-2024-07-18", endpoint="https://api.openai.com/v1")  # a dated snapshot
    assert (q.price_in, q.price_out) == (0.15, 0.60) and q.source.startswith("bundled table: https://")
    assert P.resolve_price("openai/gpt-4o-mini").price_in == 0.15  # a provider prefix (LiteLLM, OpenRouter)
    assert P.resolve_price("gpt-4o-mini", endpoint="http://127.0.0.1:4000/v1").price_in == 0.15  # a local proxy
    local = P.resolve_price("SmolLM2-135M", endpoint="http://127.0.0.1:8080/v1")
    assert (local.price_in, local.price_out, local.source) == (0.0, 0.0, P.LOCAL_SOURCE)
    assert P.resolve_price("SmolLM2-135M", endpoint="http://localhost:8080/v1").known
    unknown = P.resolve_price("my-model", endpoint="https://llm.example.com/v1")
    assert not unknown.known and unknown.source is None


@pytest.mark.parametrize("bad", [-0.01, float("nan"), float("inf"), "abc"])
def test_bad_price_is_one_line(bad):
    with pytest.raises(ValueError, match="--price-in must be a price >= 0"):
        P.resolve_price("gpt-4o", price_in=bad)


def test_net_of_cost_arithmetic():
    # 2 % on 1,000,000 is 20,000 USD; 2.5 USD of inference
    out = net_of_cost(2.0, 2.5, 1_000_000)
    assert out == {"pnl_usd": 20_000.0, "net_pnl_usd": 19_997.5, "pnl_per_cost": 8_000.0}
    assert net_of_cost(-1.0, 4.0, 200_000) == {"pnl_usd": -2_000.0, "net_pnl_usd": -2_004.0, "pnl_per_cost": -500.0}
    assert net_of_cost(1.0, 0.0)["pnl_per_cost"] is None  # no inference: no ratio
    assert net_of_cost(1.0, None) == {"pnl_usd": 10_000.0, "net_pnl_usd": None, "pnl_per_cost": None}
    assert net_of_cost(None, 1.0)["net_pnl_usd"] is None
    assert check_capital(None) == DEFAULT_CAPITAL == 1_000_000
    for bad in (0, -5, float("nan"), "x"):
        with pytest.raises(ValueError, match="--capital must be an amount > 0"):
            check_capital(bad)


def test_cost_record_and_columns():
    rec = cost_record({"cost_usd": 0.25, "price_source": "x"}, 1.0, 100_000.0)
    assert cost_columns(rec) == {"cost_usd": 0.25, "net_pnl_usd": 999.75, "pnl_per_cost": 4_000.0}
    assert cost_record(None, 1.0)["cost_usd"] == 0.0  # a classical policy: no LLM calls, no cost
    na = cost_record({"calls": 3, "cost_usd": None}, 1.0, model="my-model")
    assert na["cost_usd"] is None and "cost n/a: no price known for my-model" in na["note"]
    assert cost_columns(cost_record({"cost_usd": 0.1}, pnl=False)) == {"cost_usd": 0.1}  # Market-Bench
    assert total_cost([{"cost_usd": 0.1}, {"cost_usd": 0.2}]) == pytest.approx(0.3)
    assert total_cost([{"cost_usd": 0.1}, {"cost_usd": None}]) is None


def test_cost_columns_are_registered_metrics():
    cols = summary_columns()
    assert all(c in cols for c in COST_COLUMNS) and cols.index("cost_usd") < cols.index("status")
    assert get_metric("cost_usd").applies_to("market_bench")
    assert not get_metric("net_pnl_usd").applies_to("market_bench")
    assert not get_metric("pnl_per_cost").applies_to("market_bench")
    assert get_metric("cost_usd").direction == "lower"


def _eval(server, out, *extra):
    return CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", server.base_url,
                                    "--env", "PortBench-Balanced-v0", "--period", PERIOD, "--out", str(out),
                                    "--retries", "1", "--quiet", "--no-plots", *extra])


def test_eval_cost_columns_exact_then_replay(server, tmp_path, monkeypatch):
    server.responder = S.valid
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out = tmp_path / "run"
    r = _eval(server, out, "--price-in", "0.5", "--price-out", "1.5", "--capital", "2000000")
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    run = next(x for x in doc["tasks"]["portbench"]["runs"] if x["agent"] == "openai:test-model")
    u = run["usage"]
    cost = (u["prompt_tokens"] * 0.5 + u["completion_tokens"] * 1.5) / 1e6  # the tokens the server counted
    assert u["prompt_tokens"] > 0 and run["inference"]["cost_usd"] == pytest.approx(cost, rel=1e-12)
    assert run["inference"]["price_source"] == "--price-in/--price-out" and run["inference"]["capital"] == 2e6
    rows = {row["agent"]: row for row in read_summary_csv(out / "summary.csv")}
    mine, ew = rows["openai:test-model"], rows["equal_weight"]
    pnl = 2e6 * float(mine["ret_pct"]) / 100
    assert float(mine["cost_usd"]) == pytest.approx(cost, rel=1e-5)
    assert float(mine["net_pnl_usd"]) == pytest.approx(pnl - cost, rel=1e-5)
    assert float(mine["pnl_per_cost"]) == pytest.approx(pnl / cost, rel=1e-5)
    assert float(ew["cost_usd"]) == 0 and ew["pnl_per_cost"] == ""  # the reference makes no LLM call
    assert float(ew["net_pnl_usd"]) == pytest.approx(2e6 * float(ew["ret_pct"]) / 100, rel=1e-5)
    assert "portbench balanced: inference cost, net on 2,000,000 USD" in r.output and "price: --price-in/--price-out" in r.output
    # the replay (offline) carries the recorded prices and capital: the same cost columns
    server.stop()
    out2 = tmp_path / "replay"
    r2 = CliRunner().invoke(app, ["eval", "--agent", f"replay:{run['transcript']}", "--out", str(out2), "--quiet",
                                  "--no-plots"])
    assert r2.exit_code == 0, r2.output
    assert (out2 / "summary.csv").read_text() == (out / "summary.csv").read_text()
    r3 = CliRunner().invoke(app, ["eval", "--agent", f"replay:{run['transcript']}", "--out", str(tmp_path / "r3"),
                                  "--quiet", "--no-plots", "--price-in", "9"])
    assert r3.exit_code == 0 and "--price-in/--price-out/--prices not applied" in r3.output
    assert (tmp_path / "r3" / "summary.csv").read_text() == (out / "summary.csv").read_text()


def test_eval_unknown_price_is_na_with_a_note(server, tmp_path, monkeypatch):
    server.responder = S.valid
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setattr(P, "is_local_endpoint", lambda url: False)  # as if the server were not on this machine
    out = tmp_path / "run"
    r = _eval(server, out, "--no-baseline")
    assert r.exit_code == 0, r.output
    row = read_summary_csv(out / "summary.csv")[0]
    assert row["cost_usd"] == row["net_pnl_usd"] == row["pnl_per_cost"] == ""  # not available, never 0
    assert row["ret_pct"] != ""
    run = json.loads((out / "results.json").read_text())["tasks"]["portbench"]["runs"][0]
    assert run["inference"]["cost_usd"] is None and run["inference"]["price_source"] is None
    note = "cost n/a: no price known for test-model; give --price-in/--price-out"
    assert note in run["inference"]["note"] and note in " ".join(r.output.split())
    assert " n/a " in r.output  # the table's cost cell


def test_eval_local_server_costs_zero_and_says_why(server, tmp_path, monkeypatch):
    server.responder = S.valid
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    out = tmp_path / "run"
    r = _eval(server, out, "--no-baseline")
    assert r.exit_code == 0, r.output
    row = read_summary_csv(out / "summary.csv")[0]
    assert float(row["cost_usd"]) == 0 and row["pnl_per_cost"] == ""
    assert f"price: {P.LOCAL_SOURCE}" in " ".join(r.output.split())


@pytest.mark.parametrize("args, msg", [
    (["--price-in", "-1"], "--price-in must be a price >= 0"),
    (["--price-out", "-0.5"], "--price-out must be a price >= 0"),
    (["--capital", "0"], "--capital must be an amount > 0"),
    (["--capital", "-100"], "--capital must be an amount > 0"),
])
def test_bad_values_exit_2_one_line(tmp_path, args, msg):
    for cmd in (["eval", "--agent", "openai:m", "--env", "PortBench-Balanced-v0", "--period", PERIOD],
                ["bench", "--tasks", "portbench"]):
        out = tmp_path / cmd[0]
        r = CliRunner().invoke(app, [*cmd, "--out", str(out), *args])
        assert r.exit_code == 2, (cmd, r.output)
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and msg in lines[0], r.output
        assert not out.exists()


def test_bench_agent_priced_beside_free_baselines(server, tmp_path, monkeypatch):
    server.responder = S.valid
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    out = tmp_path / "b"
    r = CliRunner().invoke(app, ["bench", "--tasks", "portbench", "--profiles", "balanced", "--periods", PERIOD,
                                 "--agents", "equal_weight", "--agent", "openai:test-model", "--price-in", "2",
                                 "--price-out", "4", "--capital", "500000", "--no-plots", "-q", "-o", str(out)])
    assert r.exit_code == 0, r.output
    rows = {row["agent"]: row for row in read_summary_csv(out / "summary.csv")}
    doc = json.loads((out / "results.json").read_text())
    run = next(x for x in doc["tasks"]["portbench"]["runs"] if x["agent"] == "openai:test-model")
    u = run["usage"]
    cost = (u["prompt_tokens"] * 2 + u["completion_tokens"] * 4) / 1e6
    mine = rows["openai:test-model"]
    assert float(mine["cost_usd"]) == pytest.approx(cost, rel=1e-5) and cost > 0
    assert float(mine["net_pnl_usd"]) == pytest.approx(5e5 * float(mine["ret_pct"]) / 100 - cost, rel=1e-5)
    ew = rows["equal_weight"]
    assert float(ew["cost_usd"]) == 0 and ew["pnl_per_cost"] == ""
    assert float(ew["net_pnl_usd"]) == pytest.approx(5e5 * float(ew["ret_pct"]) / 100, rel=1e-5)
    assert "inference cost, net on 500,000 USD" in r.output and "price: --price-in/--price-out" in r.output


def test_quant_arena_cost_and_net_pnl_through_the_eval_runner(server, tmp_path, qa_small):
    from quantgym.agents.registry import make_eval_agents
    from quantgym.envs.quant_arena.examples import example_source
    from quantgym.evaluation import EvalPlan, run_eval

    server.script("```python\n" + example_source("low_volatility") + "```")
    plan = EvalPlan(env_ids=["QuantArena-OneShot-v0"], env_kwargs={"data": qa_small, **QA_WINDOWS}, plots=False,
                    capital=250_000.0)
    agents, _ = make_eval_agents("openai:test-model", plan, tmp_path, {**_OPTS, "base_url": server.base_url})
    (sec,) = run_eval(agents, plan, tmp_path, own_agents=True)
    run, row = sec.runs[0], sec.rows[0]
    u = run["usage"]
    cost = (u["prompt_tokens"] * 1.0 + u["completion_tokens"] * 3.0) / 1e6
    pnl = 250_000.0 * row.ret_pct / 100  # the sealed window's return on the capital
    assert row.extra["cost_usd"] == pytest.approx(cost) and cost > 0
    assert row.extra["net_pnl_usd"] == pytest.approx(pnl - cost)
    assert row.extra["pnl_per_cost"] == pytest.approx(pnl / cost)
    assert run["inference"]["capital"] == 250_000.0


def test_market_bench_carries_the_cost_only(server, tmp_path):
    """Market-Bench scores code, not a portfolio: the row's cost is summed over its rounds, no P&L columns."""
    from quantgym.agents.registry import make_eval_agents
    from quantgym.envs.market_bench.agents import reference_source
    from quantgym.envs.market_bench.rounds import load_round
    from quantgym.evaluation import EvalPlan, run_eval

    ref = reference_source("scheduled", load_round("scheduled", 1).params)
    server.script("```python\n" + ref + "```", "```python\n" + ref + "```")
    plan = EvalPlan(env_ids=["MarketBench-Scheduled-v0"], options={"rounds": [1, 2], "attempts": 1}, plots=False)
    agents, _ = make_eval_agents("openai:test-model", plan, tmp_path, {**_OPTS, "base_url": server.base_url})
    (sec,) = run_eval(agents, plan, tmp_path, own_agents=True)
    (row,) = sec.rows
    cost = sum((r["usage"]["prompt_tokens"] * 1.0 + r["usage"]["completion_tokens"] * 3.0) / 1e6 for r in sec.runs)
    assert len(sec.runs) == 2 and row.extra["cost_usd"] == pytest.approx(cost) and cost > 0
    assert "net_pnl_usd" not in row.extra and "pnl_per_cost" not in row.extra
    assert all("pnl_usd" not in r["inference"] and r["inference"]["cost_usd"] > 0 for r in sec.runs)
    (csv_row,) = read_summary_csv(tmp_path / "summary.csv")
    assert float(csv_row["cost_usd"]) > 0 and csv_row["net_pnl_usd"] == csv_row["pnl_per_cost"] == ""


def test_dry_run_says_where_the_price_comes_from():
    args = ["eval", "--env", "PortBench-Balanced-v0", "--period", PERIOD, "--dry-run", "--context-window", "8192"]
    r = CliRunner().invoke(app, [*args, "--agent", "openai:gpt-4o-mini"])
    assert r.exit_code == 0 and "price: bundled table: https://" in " ".join(r.output.split())
    r = CliRunner().invoke(app, [*args, "--agent", "openai:my-model", "--base-url", "https://llm.example.com/v1"])
    assert r.exit_code == 0 and "cost n/a: no price known for my-model" in " ".join(r.output.split())
