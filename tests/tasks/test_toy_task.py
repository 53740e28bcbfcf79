"""A new task touches its own folder and one registry line: a toy task defined in tests/tasks/toy_task.py
(record: toy_record.py) is registered from this test and runs through ``bench``, ``eval`` (a replayed transcript), ``sweep`` and
``report`` with no other file changed."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

import quantgym.tasks as qt
from quantgym.cli import app

from . import toy_record

pytest.importorskip("openai")


@pytest.fixture
def toy(monkeypatch):
    qt.register_task(toy_record.TASK)  # this process
    monkeypatch.setenv("QUANTGYM_TASKS", "tests.tasks.toy_record:TASK")  # sweep worker processes
    yield toy_record.TASK
    qt.unregister_task("toy")


def _rows(folder):
    with open(folder / "summary.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_registry_lists_the_toy_task_and_rejects_duplicates(toy):
    assert qt.task_of("Toy-v0").name == "toy"
    assert "toy" in qt.task_names()
    with pytest.raises(ValueError, match="already registered"):
        qt.register_task(toy_record.TASK)
    with pytest.raises(ValueError, match="unknown env id 'Nope-v0'"):
        qt.task_of("Nope-v0")


def test_toy_task_runs_through_bench_eval_sweep_report(toy, tmp_path, monkeypatch):
    from tests.llm.server import ScriptedServer

    runner = CliRunner()
    # bench: the task's own section
    bench = tmp_path / "bench"
    r = runner.invoke(app, ["bench", "--tasks", "toy", "--out", str(bench), "--no-plots", "-q"])
    assert r.exit_code == 0, r.output
    assert [(x["task"], x["agent"]) for x in _rows(bench)] == [("toy", "oracle")]
    # the task's own bench option (its record's bench_options) reaches its section; refused without the task
    r = runner.invoke(app, ["bench", "--tasks", "toy", "--bonus", "0.5", "--out", str(tmp_path / "b2"), "--no-plots",
                            "-q"])
    assert r.exit_code == 0, r.output
    assert [float(x["sharpe"]) for x in _rows(tmp_path / "b2")] == [1.5]
    assert "--bonus" in runner.invoke(app, ["bench", "--help"]).output
    r = runner.invoke(app, ["bench", "--tasks", "market_bench", "--bonus", "1", "--out", str(tmp_path / "b3")])
    assert r.exit_code == 2 and "--bonus is an option of toy" in r.output and not (tmp_path / "b3").exists()

    # eval: record a transcript against a local OpenAI-compatible server, then replay it offline
    srv = ScriptedServer().start()
    try:
        srv.responder = lambda req: "42"
        live = tmp_path / "live"
        monkeypatch.setenv("TOY_KEY", "test-key")
        r = runner.invoke(app, ["eval", "--agent", "openai:test-model", "--base-url", srv.base_url, "--api-key-env",
                                "TOY_KEY", "--env", "Toy-v0", "--out", str(live), "--no-plots"])
        assert r.exit_code == 0, r.output
    finally:
        srv.stop()
    transcript = next((live / "transcripts").glob("toy-*.jsonl"))
    replay = tmp_path / "replay"
    r = runner.invoke(app, ["eval", "--agent", f"replay:{transcript}", "--env", "Toy-v0", "--out", str(replay),
                            "--no-plots"])
    assert r.exit_code == 0, r.output
    assert [(x["task"], x["sharpe"]) for x in _rows(replay)] == [("toy", "1")]
    assert json.loads((replay / "results.json").read_text())["tasks"]["toy"]["runs"][0]["metrics"]["score"] == 1.0

    # sweep: the classical agent in a worker process (which finds the task through QUANTGYM_TASKS)
    grid = tmp_path / "grid.yaml"
    grid.write_text("agents: [oracle]\nenvs: [Toy-v0]\nseeds: [0, 1]\n")
    sweep = tmp_path / "sweep"
    r = runner.invoke(app, ["sweep", str(grid), "--out", str(sweep), "--workers", "1"])
    assert r.exit_code == 0, r.output
    rows = _rows(sweep)
    assert [x["task"] for x in rows] == ["toy", "toy"]

    # report: the task's own section from all three folders
    rep = tmp_path / "rep"
    r = runner.invoke(app, ["report", str(bench), str(replay), str(sweep), "--out", str(rep)])
    assert r.exit_code == 0, r.output
    md = (rep / "leaderboard.md").read_text()
    assert "Toy scores" in md and "oracle" in md and "openai:test-model" in md


def test_builtin_records_import_no_task_code():
    """Records are read while Gymnasium registers the ids: loading them imports no env, numpy or gymnasium."""
    import subprocess
    import sys

    code = ("import sys\nfrom quantgym.tasks import tasks\ntasks()\n"
            "print(sorted(m for m in sys.modules if m.startswith('quantgym') or m in ('numpy', 'gymnasium')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = eval(out.strip().splitlines()[-1])
    allowed = {"quantgym", "quantgym.tasks", "quantgym.envs"}
    assert all(m in allowed or (m.startswith("quantgym.envs.") and m.count(".") == 2)
               or m.endswith(".task") for m in loaded), loaded


def test_the_example_task_of_docs_tasks_md_runs_as_written(tmp_path):
    """docs/tasks.md's outside-the-package example: its two code blocks, QUANTGYM_TASKS, bench and eval."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    blocks = re.findall(r"```python\n(.*?)```", (root / "docs" / "tasks.md").read_text(), re.S)
    code, record = [b for b in blocks if "class CoinEnv" in b][0], [b for b in blocks if "TASK = Task(" in b
                                                                    and "coin" in b][0]
    d = tmp_path / "mytask"
    d.mkdir()
    (d / "coin.py").write_text(code)
    (d / "coin_record.py").write_text(record)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(d), str(root)]), "QUANTGYM_TASKS": "coin_record:TASK"}
    cli = [sys.executable, "-c", "from quantgym.cli import main; main()"]
    for args in (["bench", "--tasks", "coin", "--out", str(tmp_path / "b"), "-q"],
                 ["eval", "--agent", "heads", "--env", "Coin-v0", "--out", str(tmp_path / "e")]):
        r = subprocess.run([*cli, *args], env=env, capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (tmp_path / "e" / "summary.csv").read_text().splitlines()[1].startswith("coin,")
