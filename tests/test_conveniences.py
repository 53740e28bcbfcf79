"""Small conveniences people expect: --version, python -m quantgym, a default --out for
qa, full command descriptions in --help, examples that write under results/."""

from __future__ import annotations

import pytest

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from quantgym import __version__
from quantgym.cli import app

ROOT = Path(__file__).resolve().parents[1]


def test_version_flag_and_python_dash_m():
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.strip() == f"quantgym {__version__}"
    p = subprocess.run([sys.executable, "-m", "quantgym", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0 and p.stdout.strip() == f"quantgym {__version__}", p.stderr


def test_help_descriptions_are_whole_sentences_at_80_columns():
    r = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0
    text = " ".join(r.output.replace("│", " ").split())
    assert "Train PPO/SAC/A2C on PortBench, save the model, evaluate it like the baselines." in text
    assert "Reproduce the paper's baseline tables (paper and clean mode) and the ablation." in text
    wide = [ln for ln in r.output.splitlines() if len(ln) > 80]
    assert not wide, wide[:3]


def test_qa_without_out_writes_a_stamped_results_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["qa", "--agent", "oracle", "--n", "1", "--templates", "T1", "--no-restricted", "-q"])
    assert r.exit_code == 0, r.output
    (out,) = list((tmp_path / "results").glob("qa-*"))
    assert (out / "summary.csv").is_file() and (out / "results.json").is_file()


@pytest.mark.slow
def test_quant_arena_quickstart_writes_its_plot_under_results(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "quant_arena_quickstart.py")], capture_output=True,
                       text=True, cwd=tmp_path, env=env, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (tmp_path / "results" / "quant_arena_quickstart" / "quant_arena_sealed_2024.png").stat().st_size > 1000
    assert not list(tmp_path.glob("*.png"))  # nothing in the folder it was run from
