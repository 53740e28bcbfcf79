"""The research loop's Deflated Sharpe Ratio and PBO are reported, and S is unchanged."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from quantgym.envs.quant_arena.env import QuantArenaEnv
from quantgym.envs.quant_arena.eval import _section
from quantgym.envs.quant_arena.examples import example_source
from quantgym.envs.quant_arena.config import ArenaScoringConfig
from quantgym.envs.quant_arena.metrics import research_overfitting, total_score
from quantgym.envs.quant_arena.records import read_record
from quantgym.results import SUMMARY_COLUMNS, extra_columns, write_summary_csv
from quantgym.stats.overfitting import deflated_sharpe_ratio, pbo_cscv, per_period_sharpe

from .conftest import SMALL_WINDOWS

NAMES = ("momentum_20d", "reversal_5d", "low_volatility")


def _returns(res) -> np.ndarray:
    nav = np.asarray(res.daily["nav"], dtype=float)
    return nav[1:] / nav[:-1] - 1.0


@pytest.fixture(scope="module")
def loop_run(small_real, tmp_path_factory):
    env = QuantArenaEnv(data=small_real, **SMALL_WINDOWS, record_dir=tmp_path_factory.mktemp("rec"),
                        executor="inprocess")
    env.reset(seed=0)
    for n in NAMES:
        env.step(example_source(n))
    _, S, term, _, fin = env.step({"freeze": 2})
    assert term
    return env, S, fin


def test_final_info_carries_dsr_and_pbo_and_s_is_unchanged(loop_run):
    env, S, fin = loop_run
    of = fin["overfitting"]
    assert of["n_trials"] == of["n_candidates"] == 3
    assert of["reason_dsr"] is None and of["reason_pbo"] is None
    assert 0.0 <= of["dsr"] <= 1.0 and 0.0 <= of["pbo"] <= 1.0
    # S, S_in and S_out are the paper's score, untouched by the diagnostics
    assert S == fin["S"] == pytest.approx(total_score(fin["S_in"], fin["S_out"]), abs=2e-6)
    cands = env.candidates
    assert fin["S_in"] == pytest.approx(cands[1]["research"].S, abs=1e-6)
    # the same numbers from quantgym.stats directly
    rets = [_returns(c["research"]) for c in cands]
    d = deflated_sharpe_ratio(rets[1], [per_period_sharpe(r) for r in rets])
    assert of["dsr"] == pytest.approx(d["dsr"], abs=1e-6)
    assert of["sharpe_research"] == pytest.approx(d["sr"] * math.sqrt(242), abs=1e-6)
    assert of["sharpe_research"] == pytest.approx(cands[1]["research"].metrics["sharpe"], abs=1e-6)
    p = pbo_cscv(np.column_stack(rets), n_blocks=ArenaScoringConfig().pbo_blocks)
    assert of["pbo"] == pytest.approx(p["pbo"], abs=1e-6) and of["pbo_splits"] == 12870
    # in the run record's final event and in episode_result
    final = [e for e in read_record(env.record_path) if e["event"] == "final"][-1]
    assert final["overfitting"] == of
    assert env.episode_result()["metrics"]["overfitting"] == of


def test_one_candidate_gives_nan_with_reasons_not_a_crash(small_real, tmp_path):
    env = QuantArenaEnv("oneshot", data=small_real, **SMALL_WINDOWS, record_dir=False, executor="inprocess")
    env.reset(seed=0)
    _, S, _, _, fin = env.step(example_source("low_volatility"))
    of = fin["overfitting"]
    assert of["dsr"] is None and "at least 2" in of["reason_dsr"]
    assert of["pbo"] is None and "at least 2" in of["reason_pbo"]
    assert 0.0 < of["psr0"] < 1.0  # the undeflated PSR still applies
    assert S == pytest.approx(total_score(fin["S_in"], fin["S_out"]), abs=2e-6)
    env2 = QuantArenaEnv(data=small_real, **SMALL_WINDOWS, record_dir=False, executor="inprocess")
    env2.reset(seed=0)
    _, S0, _, _, fin0 = env2.step({"freeze": None})
    assert S0 == 0.0 and fin0["overfitting"]["reason_dsr"] == "no candidate was frozen"


def test_failed_frozen_candidate_and_short_windows_are_reported_with_reasons():
    rng = np.random.default_rng(0)

    def cand(i, status, n=30):
        nav = np.cumprod(np.r_[1.0, 1 + rng.normal(0, 0.01, n)])
        return {"index": i, "research": SimpleNamespace(status=status, daily={"nav": nav.tolist()})}

    cands = [cand(1, "ok"), cand(2, "invalid"), cand(3, "ok")]
    of = research_overfitting(cands, 2)
    assert of["dsr"] is None and "'invalid'" in of["reason_dsr"]
    assert of["n_trials"] == 2 and of["n_candidates"] == 3
    assert of["pbo"] is None and "2 rows each" in of["reason_pbo"]  # 30 days < 16 blocks x 2
    of = research_overfitting([cand(1, "ok", 200), cand(2, "ok", 200)], 1)
    assert of["reason_dsr"] is None and of["reason_pbo"] is None and of["pbo_block_days"] == 12


def test_eval_rows_and_report_show_the_diagnostics(loop_run, tmp_path):
    import json

    from quantgym.sweep.report import build_report

    _, _, fin = loop_run
    run = {"env_id": "QuantArena-v0", "period": "sealed_2024", "final": fin, "S": fin["S"], "feedback": [{}, {}, {}], "usage": {}}
    sec = _section([run], SimpleNamespace(name="agentX", usage=lambda: {}), None)
    row = sec.rows[0]
    cols = extra_columns(sec.rows)
    assert cols[5:7] == ("dsr", "pbo") and row.extra["dsr"] == fin["overfitting"]["dsr"]
    assert row.sharpe == fin["sealed"]["sharpe"]
    write_summary_csv(tmp_path / "summary.csv", sec.rows)  # the shared columns first, then the task's own
    header, cells = [ln.split(",") for ln in (tmp_path / "summary.csv").read_text().splitlines()]
    assert header == [*SUMMARY_COLUMNS, "S", "S_in", "S_out", "xarr_pct", "rankic", "dsr", "pbo", "psr0", "n_trials"]
    # the task's own scores, as the env reported them (README: every task's metrics follow as extra columns)
    got = dict(zip(header, cells))
    for col, want in (("S", fin["S"]), ("S_in", fin["S_in"]), ("S_out", fin["S_out"]),
                      ("xarr_pct", 100 * fin["sealed"]["excess_arr"]), ("rankic", fin["sealed"]["rankic_mean"])):
        assert want is not None and float(got[col]) == pytest.approx(want, rel=1e-5, abs=1e-9), col
    assert float(got["S"]) > 0 and got["S"] != got["S_in"]
    d = tmp_path / "res"
    d.mkdir()
    (d / "results.json").write_text(json.dumps({"meta": {"command": "eval"}, "tasks": {
        "quant_arena": {"runs": [{"task": "quant_arena", "agent": "agentX", "final": fin}]}}}))
    rep = build_report([d], tmp_path / "rep")
    t = next(t for s in rep.sections for t in s.tables if t.title == "Quant-Arena — sealed window")
    i, j = t.columns.index("DSR"), t.columns.index("PBO")
    assert t.rows[0][i] == f"{fin['overfitting']['dsr']:.2f}" and t.rows[0][j] == f"{fin['overfitting']['pbo']:.2f}"
    assert t.columns[-4:-1] == ["S", "DSR", "PBO"] and t.columns.index("S_in") < i
    # the two tracks side by side: the row says which (summary.csv's track column, the report's label)
    one = _section([{**run, "track": "oneshot"}], SimpleNamespace(name="agentX", usage=lambda: {}), None).rows[0]
    assert one.extra["track"] == "oneshot" and list(extra_columns([one]))[-1] == "track"
    from quantgym.envs.quant_arena.report import _label

    assert _label({"agent": "agentX", "track": "oneshot"}) == "agentX (oneshot)" and _label({"agent": "b"}) == "b"


def test_bench_classical_loop_keeps_the_best_s_in(loop_run):
    from quantgym.envs.quant_arena.bench import classical_loop

    env, _, _ = loop_run
    runs = {n: {"status_research": c["research"].status, "research_daily": c["research"].daily,
                "S_in": c["research"].S} for n, c in zip(NAMES, env.candidates)}
    loop = classical_loop(runs)
    best = max(NAMES, key=lambda n: runs[n]["S_in"])
    assert loop["frozen"] == best and loop["n_trials"] == 3 and loop["trials"] == list(NAMES)
    assert 0.0 <= loop["dsr"] <= 1.0 and loop["pbo"] == pytest.approx(env._final["overfitting"]["pbo"], abs=1e-6)
