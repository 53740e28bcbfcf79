"""``quantgym train`` without the ``rl`` extra: one readable line with the install command (``[rl]``
kept, not eaten by rich markup) and the CPU-torch hint; exit code 2."""

from __future__ import annotations

import sys

from typer.testing import CliRunner

import quantgym.envs.portbench.rl as rl_pkg
from quantgym.envs.portbench.rl.cli import TORCH_CPU_HINT, missing_extra_message
from quantgym.cli import app
from tests.rl import NEEDS_RL


def test_missing_extra_message_text():
    msg = missing_extra_message(ModuleNotFoundError("No module named 'torch'", name="torch"))
    assert "pip install -e '.[rl]'" in msg and "(torch missing)" in msg
    assert "https://download.pytorch.org/whl/cpu" in msg and "pip install torch==2.13.0" in msg
    assert TORCH_CPU_HINT in msg and "\n" not in msg


def test_train_without_the_extra_prints_the_full_hint(monkeypatch, tmp_path):
    # make `from quantgym.envs.portbench.rl import sb3` fail as it does when stable-baselines3 / torch are absent
    monkeypatch.setitem(sys.modules, "quantgym.envs.portbench.rl.sb3", None)
    monkeypatch.delattr(rl_pkg, "sb3", raising=False)
    r = CliRunner().invoke(app, ["train", "--out", str(tmp_path / "t"), "--timesteps", "1"])
    assert r.exit_code == 2
    out = r.output
    assert "pip install -e '.[rl]'" in out  # [rl] survives (was printed as pip install 'quantgym')
    assert "download.pytorch.org/whl/cpu" in out and "torch==2.13.0" in out
    assert len([ln for ln in out.splitlines() if ln.strip()]) == 1 and "Traceback" not in out


def test_cuda_build_without_a_gpu_is_one_line(monkeypatch):
    # a CUDA build of torch on a CPU-only machine is named in one line (the CPU build is ~5 GB smaller)
    import pytest

    torch = pytest.importorskip("torch", reason=NEEDS_RL)
    from quantgym.envs.portbench.rl.cli import cuda_build_note

    monkeypatch.setattr(torch.version, "cuda", "12.8", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    note = cuda_build_note()
    assert note is not None and "CUDA 12.8 build" in note and TORCH_CPU_HINT in note and "\n" not in note
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert cuda_build_note() is None
    monkeypatch.setattr(torch.version, "cuda", None, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cuda_build_note() is None  # the CPU build: nothing to say


def test_rl_examples_without_the_extra_exit_with_the_install_line():
    """The two RL examples, run where torch and stable-baselines3 cannot be imported: exit 1 with one
    ``error:`` line naming the 'rl' extra's install command, not a traceback."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for example in ("rl_tools.py", "train_ppo_portbench.py"):
        code = ("import runpy, sys; sys.modules['torch'] = None; sys.modules['stable_baselines3'] = None; "
                f"sys.argv = ['{example}', '8']; runpy.run_path('examples/{example}', run_name='__main__')")
        r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
        assert r.returncode == 1, (example, r.stderr[-2000:])
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (example, r.stderr[-2000:])
        assert rl_pkg.RL_INSTALL in lines[0] and "Traceback" not in r.stderr
