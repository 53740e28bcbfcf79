"""``quantgym train`` without the ``rl`` extra: one readable line with the install command (``[rl]``
kept, not eaten by rich markup) and the CPU-torch hint; exit code 2."""

from __future__ import annotations

import sys

from typer.testing import CliRunner

import quantgym.envs.portbench.rl as rl_pkg
from quantgym.envs.portbench.rl.cli import TORCH_CPU_HINT, missing_extra_message
from quantgym.cli import app


def test_missing_extra_message_text():
    msg = missing_extra_message(ModuleNotFoundError("No module named 'torch'", name="torch"))
    assert "pip install 'quantgym[rl]'" in msg and "(torch missing)" in msg
    assert "https://download.pytorch.org/whl/cpu" in msg and "pip install torch==2.13.0" in msg
    assert TORCH_CPU_HINT in msg and "\n" not in msg


def test_train_without_the_extra_prints_the_full_hint(monkeypatch, tmp_path):
    # make `from quantgym.envs.portbench.rl import sb3` fail as it does when stable-baselines3 / torch are absent
    monkeypatch.setitem(sys.modules, "quantgym.envs.portbench.rl.sb3", None)
    monkeypatch.delattr(rl_pkg, "sb3", raising=False)
    r = CliRunner().invoke(app, ["train", "--out", str(tmp_path / "t"), "--timesteps", "1"])
    assert r.exit_code == 2
    out = r.output
    assert "pip install 'quantgym[rl]'" in out  # [rl] survives (was printed as pip install 'quantgym')
    assert "download.pytorch.org/whl/cpu" in out and "torch==2.13.0" in out
    assert len([ln for ln in out.splitlines() if ln.strip()]) == 1 and "Traceback" not in out
