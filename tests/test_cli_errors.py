"""Every bad command-line input: one line naming what is wrong and what is valid, exit code 2, nothing
written (docs/security.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from quantgym.cli import app

BUNDLE = Path(__file__).resolve().parents[1] / "quantgym" / "data" / "bundled" / "portbench"


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def run_bad(tmp_path: Path, args: list[str], *needles: str) -> str:
    """Run ``quantgym ARGS`` in ``tmp_path``; assert exit 2, one non-blank output line holding every needle,
    and that no file or folder appeared in ``tmp_path``."""
    before = _tree(tmp_path)
    res = CliRunner().invoke(app, args)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2, res.output
    assert len(lines) == 1, res.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert "Traceback" not in res.output
    assert _tree(tmp_path) == before, sorted(_tree(tmp_path) - before)
    return lines[0]


@pytest.fixture(scope="module")
def bad_data(tmp_path_factory) -> dict[str, Path]:
    """PortBench data directories with one defect each: no asset_class column, no date index, no SPY."""
    root = tmp_path_factory.mktemp("bad_data")
    prices = pd.read_parquet(BUNDLE / "prices.parquet")
    assets = pd.read_csv(BUNDLE / "assets.csv", dtype=str)
    out = {}
    for name in ("nocol", "nodate", "nospy"):
        d = root / name
        d.mkdir()
        shutil.copy(BUNDLE / "macro.parquet", d / "macro.parquet")
        out[name] = d
    assets.drop(columns=["asset_class"]).to_csv(out["nocol"] / "assets.csv", index=False)
    prices.to_parquet(out["nocol"] / "prices.parquet")
    assets.to_csv(out["nodate"] / "assets.csv", index=False)
    prices.reset_index(drop=True).to_parquet(out["nodate"] / "prices.parquet")
    assets.to_csv(out["nospy"] / "assets.csv", index=False)
    prices.drop(columns=["SPY"]).to_parquet(out["nospy"] / "prices.parquet")
    return out


def _sweep(tmp_path: Path, *extra: str, agents: str = "equal_weight", envs: str = "PortBench-Balanced-v0") -> list[str]:
    return ["sweep", "--agents", agents, "--envs", envs, "--out", str(tmp_path / "s"), "--workers", "1", "-q", *extra]


def test_eval_unknown_env_id(tmp_path):
    run_bad(tmp_path, ["eval", "--agent", "equal_weight", "--env", "PortBench-Nope-v0", "--out", str(tmp_path / "o")],
            "PortBench-Nope-v0", "PortBench-Balanced-v0", "QuantArena-v0")


def test_eval_period_in_env_kwargs_points_to_the_period_option(tmp_path):
    run_bad(tmp_path, ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--env-kwargs",
                       '{"period": "covid_2020"}', "--out", str(tmp_path / "o")],
            "--env-kwargs: 'period' is chosen with --period", "START:END[:FREQ]", "period='covid_2020'")


def test_eval_round_in_env_kwargs_points_to_the_round_option(tmp_path):
    """Market-Bench's runner sets round, attempts and feedback itself: in --env-kwargs they are one line."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "examples" / "llm_floor" / "market_bench-scheduled.jsonl.gz"
    run_bad(tmp_path, ["eval", "--agent", f"replay:{src}", "--env", "MarketBench-Scheduled-v0", "--env-kwargs",
                       '{"round": 2}', "--out", str(tmp_path / "o")],
            "--env-kwargs: 'round' is chosen with --round", "round=2")


def test_eval_unknown_period(tmp_path):
    run_bad(tmp_path, ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--period", "covid_2021",
                       "--out", str(tmp_path / "o")], "'covid_2021'", "covid_2020", "START:END[:FREQ]")


def test_unknown_market_bench_task_set(tmp_path):
    run_bad(tmp_path, ["bench", "--tasks", "market_bench", "--task-set", "v3", "--out", str(tmp_path / "o")],
            "unknown Market-Bench task set 'v3'", "v1", "v2")
    run_bad(tmp_path, ["eval", "--agent", "equal_weight", "--env", "MarketBench-Pairs-v0", "--env-kwargs",
                       '{"task_set": "v3"}', "--out", str(tmp_path / "o")], "unknown Market-Bench task set 'v3'")


@pytest.mark.parametrize("env", ["PortBench-Balanced-v0", "QuantArena-v0", "MarketBench-Pairs-v0"])
def test_eval_unknown_env_kwarg_lists_the_valid_ones(tmp_path, env):
    # an unknown --env-kwargs key is one line before the run, not a TypeError traceback from gym.make
    run_bad(tmp_path, ["eval", "--agent", "equal_weight", "--env", env, "--env-kwargs", '{"nosuch": 1}',
                       "--out", str(tmp_path / "e")], "--env-kwargs", f"{env} takes no keyword 'nosuch'", "data")


@pytest.mark.parametrize("command", ["eval", "sweep", "report", "qa"])
def test_out_is_an_existing_file(tmp_path, command):
    f = tmp_path / "afile"
    f.write_text("x")
    (tmp_path / "in").mkdir()
    args = {"eval": ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--period", "covid_2020"],
            "sweep": _sweep(tmp_path)[:5],
            "report": ["report", str(tmp_path / "in")],
            "qa": ["qa", "--agent", "naive", "--n", "1"]}[command]
    run_bad(tmp_path, [*args, "--out", str(f), "-q"] if command != "report" else [*args, "--out", str(f)],
            str(f), "not a folder", "give a folder path")
    assert f.read_text() == "x"


def test_sweep_data_with_a_missing_column(tmp_path, bad_data):
    run_bad(tmp_path, _sweep(tmp_path, "--data", str(bad_data["nocol"]), "--set", "period=covid_2020"),
            "assets.csv", "missing required column 'asset_class'")


def test_qa_unknown_agent_lists_the_valid_ones(tmp_path):
    run_bad(tmp_path, ["qa", "--agent", "nosuch", "--out", str(tmp_path / "q"), "-q"],
            "'nosuch'", "oracle, naive, openai:MODEL, replay:FILE")


def test_prices_without_a_date_index(tmp_path, bad_data):
    line = run_bad(tmp_path, _sweep(tmp_path, "--data", str(bad_data["nodate"]), "--set", "period=covid_2020"),
                   "index is not dates", "DatetimeIndex or a 'date' column")
    assert "1970" not in line and "duplicate" not in line


def test_universe_without_the_regime_ticker_is_refused(tmp_path, bad_data):
    run_bad(tmp_path, _sweep(tmp_path, "--data", str(bad_data["nospy"]), "--set", "period=covid_2020"),
            "regime ticker 'SPY'", "not in the data's universe", "regime_ticker=", "QQQ")
    run_bad(tmp_path, ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--period", "covid_2020",
                       "--env-kwargs", f'{{"data": "{bad_data["nospy"]}"}}', "--out", str(tmp_path / "e"), "-q"],
            "regime ticker 'SPY'")


def test_bundled_data_keeps_its_regime_ticker():
    import gymnasium as gym

    import quantgym  # noqa: F401

    env = gym.make("PortBench-Balanced-v0", period="covid_2020")
    assert env.unwrapped.view.regime_ticker == "SPY"
    env.close()


@pytest.mark.parametrize("args, needles", [
    # a failure after the folder was created (the agent is built inside the run): the folder goes again
    (["eval", "--agent", "nosuch", "--env", "PortBench-Balanced-v0", "--period", "covid_2020", "--out", "{t}/a/b"],
     ["'nosuch'", "equal_weight"]),
    (["report", "{t}/nope", "--out", "{t}/x"], ["nope", "not a folder"]),
])
def test_a_failed_command_removes_the_folder_it_created(tmp_path, args, needles):
    run_bad(tmp_path, [a.replace("{t}", str(tmp_path)) for a in args], *needles)


def test_a_failed_command_never_removes_a_folder_that_existed(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    run_bad(tmp_path, ["report", str(tmp_path / "nope"), "--out", str(keep)], "nope")
    assert keep.is_dir()


@pytest.mark.parametrize("extra, kw, needles", [
    ([], {"agents": "equal_weight,not_a_baseline"}, ["'not_a_baseline'", "equal_weight", "openai:MODEL"]),
    ([], {"agents": "foo:bar"}, ["'foo:bar'", "openai:MODEL, replay:FILE, sb3:PATH"]),
    ([], {"envs": "PortBench-Balanced-v0,PortBench-Nope-v0"}, ["'PortBench-Nope-v0'", "PortBench-Balanced-v0"]),
    (["--set", "period=covid_2020,covid_2021"], {}, ["'covid_2021'", "covid_2020", "START:END[:FREQ]"]),
    (["--set", "perod=covid_2020"], {}, ["'perod'", "period"]),
    ([], {"agents": "equal_weight", "envs": "QuantArena-v0"}, ["'equal_weight'", "Quant-Arena", "openai:MODEL"]),
])
def test_sweep_typos_are_refused_before_the_first_run(tmp_path, extra, kw, needles):
    run_bad(tmp_path, _sweep(tmp_path, *extra, **kw), *needles)


def test_sweep_without_ray_writes_nothing(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    run_bad(tmp_path, _sweep(tmp_path, "--backend", "ray", "--set", "period=covid_2020"), "quantgym[distributed]")


@pytest.mark.parametrize("args", [
    ["eval", "--agent", "sb3:/no/such/model.zip", "--env", "PortBench-Balanced-v0"],
    ["bench", "--tasks", "portbench", "--periods", "normal_2024", "--profiles", "balanced", "--agents",
     "equal_weight", "--agent", "sb3:/no/such/model.zip", "--no-plots", "-q"],
])
def test_a_missing_rl_extra_is_one_line_not_a_traceback(args, monkeypatch, tmp_path):
    """Without stable-baselines3 an ``sb3:`` agent is refused with the install hint (exit 2)."""
    import sys

    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # import stable_baselines3 -> ImportError
    monkeypatch.delitem(sys.modules, "quantgym.envs.portbench.rl.sb3", raising=False)
    import quantgym.envs.portbench.rl as rl_pkg  # an earlier import in this process left the submodule attribute

    monkeypatch.delattr(rl_pkg, "sb3", raising=False)
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o")])
    assert r.exit_code == 2, r.output
    lines = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "pip install -e '.[rl]'" in lines[0] and "Traceback" not in r.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("period, needle", [
    ("2020-06-01:2020-03-01", "the end is before the start"),
    ("2030-01-01:2031-01-01", "has no trading day in the data"),
])
def test_eval_refuses_a_bad_period_before_anything_runs(period, needle, tmp_path):
    r = CliRunner().invoke(app, ["eval", "--agent", "equal_weight", "--env", "PortBench-Balanced-v0", "--period",
                                 period, "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and needle in r.output and "start " not in r.output.replace(needle, "")
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


@pytest.mark.parametrize("args, needles", [
    (["eval", "-j", "0"], ["'--concurrency'", "greater than or equal to 1", "quantgym eval --help"]),
    (["eval", "--agent", "equal_weight", "--repeats", "0"], ["'--repeats'", "quantgym eval --help"]),
    (["bench", "--capital", "abc"], ["'--capital'", "valid number", "quantgym bench --help"]),
    (["bench", "--nosuch"], ["No such option: --nosuch", "quantgym bench --help"]),
    (["eval"], ["Missing option '--agent'"]),
    (["nosuchcommand"], ["No such command 'nosuchcommand'", "quantgym --help"]),
    (["report"], ["Missing argument", "quantgym report --help"]),
])
def test_clicks_own_checks_are_one_line_too(tmp_path, monkeypatch, args, needles):
    """A bad value, an unknown or missing option or argument, caught by click before a command runs: the
    same one ``error:`` line and exit code 2 as the commands' own checks, not a boxed usage block."""
    monkeypatch.chdir(tmp_path)
    line = run_bad(tmp_path, args, *needles)
    assert line.startswith("error: ") and "╭" not in line


def test_the_installed_command_prints_one_line_and_exits_2(tmp_path):
    """The same through the console script's entry (``quantgym.cli:app``) in a fresh process."""
    import subprocess
    import sys

    code = "import sys; from quantgym.cli import app; sys.argv = ['quantgym', 'eval', '-j', '0']; app()"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: Invalid value for '--concurrency'"), r.stderr


def test_every_help_is_plain_text_within_80_columns():
    """Every command's --help at 80 columns: click's plain text, no line wider than the terminal, no boxed
    table cutting an option's name or default short, no value placeholder on a flag."""
    from typer.main import get_command

    root = get_command(app)
    paths = [[]] + [[n] for n in root.commands] + [["data", n] for n in root.commands["data"].commands]
    for path in paths:
        r = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert r.exit_code == 0, (path, r.output)
        assert r.output.startswith(f"Usage: quantgym {' '.join(path)}".rstrip()), (path, r.output[:200])
        wide = [ln for ln in r.output.splitlines() if len(ln) > 80]
        assert not wide, (path, wide[:3])
        assert "╭" not in r.output and "…" not in r.output and "<bool>" not in r.output, (path, r.output)
