"""``quantgym bench`` ends with the time each task took: wall and process-tree CPU seconds, in 80 columns,
and the same figures in results.json ``meta.timings``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import quantgym.tasks as qt
from quantgym.cli import _timing_table, app

from . import toy_record


@pytest.fixture
def toy():
    qt.register_task(toy_record.TASK)
    yield toy_record.TASK
    qt.unregister_task("toy")


def test_bench_prints_and_records_the_time_of_each_task(toy, tmp_path):
    out = tmp_path / "bench"
    r = CliRunner().invoke(app, ["bench", "--tasks", "toy", "--out", str(out), "--no-plots", "-q"],
                           env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("time per task"))
    assert [line.split()[0] for line in lines[head + 1:head + 3]] == ["toy", "total"]
    assert all(len(line) <= 80 for line in lines[head:head + 3])
    wall, cpu = map(float, lines[head + 1].split()[1:3])
    assert wall >= 0 and cpu >= 0
    timings = json.loads((out / "results.json").read_text())["meta"]["timings"]
    assert set(timings["toy"]) == {"wall_s", "cpu_s"} and timings["toy"]["cpu_s"] >= 0


def test_the_timing_table_fits_80_columns_for_long_task_names_and_long_runs():
    text = _timing_table({"market_bench": {"wall_s": 123456.7, "cpu_s": 234567.8},
                          "total": {"wall_s": 1e6, "cpu_s": 2e6}})
    assert all(len(line) <= 80 for line in text.splitlines())
    assert text.splitlines()[1].split() == ["market_bench", "123456.7", "234567.8"]


@pytest.mark.parametrize("compiles", [True, False])
def test_the_first_run_check_looks_only_at_tasks_whose_job_compiles(toy, tmp_path, monkeypatch, compiles):
    """A task whose bench job calls no kernel in the process (Market-Bench: its attempts run sandboxed) would
    never fill numba's cache, so ``quantgym bench`` would announce a first-run compile on every run."""
    import importlib

    import quantgym.jit

    seen = []
    monkeypatch.setattr(quantgym.jit, "uncompiled", lambda dirs: seen.append(list(dirs)) or False)
    monkeypatch.setattr(importlib.import_module(toy.bench), "COMPILES_KERNELS", compiles, raising=False)
    r = CliRunner().invoke(app, ["bench", "--tasks", "toy", "--out", str(tmp_path / "b"), "--no-plots", "-q"])
    assert r.exit_code == 0, r.output
    assert len(seen) == 1 and len(seen[0]) == int(compiles)
    from quantgym.envs.market_bench import bench as mb_bench

    assert mb_bench.COMPILES_KERNELS is False
