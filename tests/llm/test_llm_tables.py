"""The LLM ``eval`` table (~175 columns of content) fits 80 and 120 columns: no ``…``, no
line wider than the terminal, every column in some part."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from quantgym.cli import app

from . import pb_script as S


@pytest.mark.parametrize("width", [80, 120])
def test_llm_eval_table_fits(width, server, tmp_path, monkeypatch):
    server.responder = S.valid
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    r = CliRunner().invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", server.base_url, "--env",
                                 "PortBench-Balanced-v0", "--period", "covid_2020", "--no-plots",
                                 "--out", str(tmp_path / "run"), "--quiet"],
                           env={"COLUMNS": str(width)}, terminal_width=width)
    assert r.exit_code == 0, r.output
    assert "…" not in r.output and max(len(ln) for ln in r.output.splitlines()) <= width, r.output
    for head in ("Sharpe", "gate", "CEPS", "S1", "S5", "calls"):
        assert head in r.output
    assert ("tokens" if width >= 120 else "tok.") in r.output
    table = r.output.split("portbench balanced: inference cost")[0]  # the eval table, then the cost table
    parts = table.count("┏")
    assert table.count("openai:test-model │") == parts and parts <= (2 if width >= 120 else 4)
