"""Live runner on the bundled real data (as_of = its last dates, 2025-12): protocol, persistence,
idempotence, crash/resume, replay checks. Offline, deterministic."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

from quantgym.envs.portbench.data import load_portbench_data
from quantgym.envs.portbench.live.journal import FolderLock
from quantgym.envs.portbench.live.runner import NO_CEPS_PLOT, LiveAgentError, LiveError, run_live
from quantgym.results import SUMMARY_COLUMNS, read_summary_csv
from quantgym.spaces import AnyText

LAST = "2025-12-31"
VOLATILE = {"recorded_utc", "decide_seconds", "replay_check"}


class Momentum:
    """Deterministic stagewise array agent: S1 views from the trailing return, S2 signals from the
    views (±0.2), S3 inverse-volatility weights on the buys (equal weight on the available set if none).
    It also keeps what it saw, to check the point-in-time rule."""

    name = "TestMomentum"
    env_kwargs = {"stagewise": True}

    def __init__(self):
        self.seen: list[tuple[str, np.ndarray]] = []
        self.decisions = 0

    def answer(self, obs: dict, info: dict) -> dict:
        avail = np.asarray(obs["available"], dtype=bool)
        n = avail.size
        views = np.where(avail, np.clip(np.asarray(obs["trailing_return"]) / 0.1, -1, 1), 0.0)
        pv = np.asarray(obs["prev_views"])
        signals = np.where(pv > 0.2, 2, np.where(pv < -0.2, 0, 1)).astype(np.int64)
        buys = avail & (np.asarray(obs["prev_signals"]) == 2)
        vol = np.asarray(obs["ann_vol"])
        if buys.any():
            w = np.where(buys, 1.0 / np.maximum(vol, 1e-3), 0.0)
        else:
            w = avail.astype(float)
        return {"views": views, "signals": signals, "weights": w / w.sum(), "status": 0, "_n": n}

    def act(self, obs, info):
        if int(obs["stage"]) == 0:
            self.seen.append((info["date"], np.asarray(obs["price"]).copy()))
        if int(obs["stage"]) == 2:
            self.decisions += 1
        a = self.answer(obs, info)
        a.pop("_n")
        return a


class Crashing(Momentum):
    """Same answers, but raises at the S2 sub-step of decision number ``k + 1`` (k decisions completed)."""

    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def act(self, obs, info):
        if int(obs["stage"]) == 1 and self.decisions == self.k:
            raise RuntimeError("model endpoint unavailable")
        return super().act(obs, info)


class JsonText(gym.Wrapper):
    """A minimal text protocol for the test: the answer is a JSON object of the action arrays."""

    def __init__(self, env):
        super().__init__(env)
        self.action_space = AnyText(max_length=65536)
        self.resets = 0

    def reset(self, **kw):
        self.resets += 1
        return self.env.reset(**kw)

    def step(self, text):
        d = json.loads(text)
        act = {k: (np.asarray(v) if isinstance(v, list) else v) for k, v in d.items()}
        obs, r, term, trunc, info = self.env.step(act)
        info = dict(info, raw_answer=text)
        return obs, r, term, trunc, info


class TextMomentum(Momentum):
    name = "TestTextMomentum"

    @staticmethod
    def wrap_env(env):
        return JsonText(env)

    def act(self, obs, info):
        a = super().act(obs, info)
        return json.dumps({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in a.items()})


class BadShape(Momentum):
    """Sends a weights vector of the wrong shape on 2025-12-30 (a malformed, not a crashing, answer)."""

    name = "TestBadShape"

    def act(self, obs, info):
        a = super().act(obs, info)
        if int(obs["stage"]) == 2 and info["date"] == "2025-12-30":
            a["weights"] = a["weights"][:5]
        return a


def _journal(run_dir) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "decisions.jsonl").read_text().splitlines()]


def _stable(recs: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in recs if r["type"] == "decision"]


# ----------------------------------------------------------------------------------------------


def test_baseline_live_run_on_bundled_data(tmp_path):
    run = tmp_path / "ew"
    res = run_live("equal_weight", run, as_of=LAST, plots=True)
    data = load_portbench_data()
    dates = [str(d.date()) for d in data.dates[-12:]]
    assert res.new_dates == dates and res.start == dates[0] and res.as_of == LAST
    assert res.ceps is None and res.stage_scores is None  # baselines get no CEPS (§2.5, §4.6)
    recs = _journal(run)
    assert [r["date"] for r in recs] == dates
    prev = [str(d.date()) for d in data.dates[-13:-1]]
    assert [r["data_through"] for r in recs] == prev  # previous close (§2.5)
    assert all(r["agent"] == "Equal-Weight" and r["profile"] == "balanced" for r in recs)
    # NAV: the recorded post-trade NAV is the NAV curve of the summary
    assert recs[-1]["nav"] == pytest.approx(res.nav.iloc[-1], rel=1e-12)
    assert len(res.nav) == 13 and res.nav.index[0] == data.dates[-13]
    rows = read_summary_csv(run / "summary.csv")
    assert len(rows) == 1 and tuple(rows[0]) == SUMMARY_COLUMNS
    assert rows[0]["period"] == "live" and rows[0]["agent"] == "equal_weight" and rows[0]["ceps"] == ""
    assert float(rows[0]["ret_pct"]) == pytest.approx(100 * (res.nav.iloc[-1] / 1e6 - 1), rel=1e-5)
    doc = json.loads((run / "results.json").read_text())
    live = doc["tasks"]["portbench"]["live"]
    assert live["start"] == dates[0] and live["as_of"] == LAST and live["n_decisions"] == 12
    assert (run / "live_nav.png").stat().st_size > 1000
    # nothing to draw in live_ceps.png for a baseline (no stage scores, §4.6): not written, and results.json says why
    assert not (run / "live_ceps.png").exists() and "live_ceps.png" not in res.files
    assert live["plots_skipped"] == {"live_ceps.png": NO_CEPS_PLOT} and "spec §4.6" in NO_CEPS_PLOT
    (run / "live_ceps.png").write_bytes(b"an earlier call's figure")  # a stale one in the folder goes
    run_live("equal_weight", run, as_of=LAST, plots=True)
    assert not (run / "live_ceps.png").exists()
    header = json.loads((run / "run.json").read_text())
    assert header["start"] == dates[0] and header["agent_spec"] == "equal_weight"
    assert header["config"]["as_of"] == "previous_close"


def test_stagewise_agent_scores_and_point_in_time(tmp_path):
    agent = Momentum()
    res = run_live(agent, tmp_path / "m", days=6, as_of=LAST, plots=True)
    data = load_portbench_data()
    assert len(res.new_dates) == 6 and res.new_dates[-1] == LAST
    recs = _journal(tmp_path / "m")
    for r in recs:
        assert set(r["stage_scores"]) == {"S1", "S2", "S3", "S4", "S5"}
        assert 0.0 <= r["ceps"] <= 1.0 and r["oracle"] == "lookback"
        assert [a["stage"] for a in r["actions"]] == ["S1", "S2", "S3"]
        assert r["agent_error"] is None
    assert res.ceps == pytest.approx(np.mean([r["ceps"] for r in recs]))
    assert res.stage_scores["S1"] == pytest.approx(np.mean([r["stage_scores"]["S1"] for r in recs]))
    # the agent saw prices through the previous close only (the S1 observations, in decision order;
    # info["date"] after an S3 step still names the decision just completed, so use the journal's dates)
    assert len(agent.seen) == len(recs)
    for rec, (_, price) in zip(recs, agent.seen):
        date = rec["date"]
        t = data.index_at(date)
        assert data.dates[t] == pd.Timestamp(date)
        fin = price > 0
        np.testing.assert_array_equal(price[fin], np.asarray(data.prices[t - 1])[fin])
    assert float(read_summary_csv(tmp_path / "m" / "summary.csv")[0]["ceps"]) == pytest.approx(res.ceps, abs=1e-5)
    assert (tmp_path / "m" / "live_ceps.png").stat().st_size > 1000  # stage scores: the figure is drawn
    assert "plots_skipped" not in json.loads((tmp_path / "m" / "results.json").read_text())["tasks"]["portbench"]["live"]


def test_rerun_same_day_is_idempotent(tmp_path):
    run = tmp_path / "m"
    run_live(Momentum(), run, days=4, as_of=LAST, plots=False)
    journal = (run / "decisions.jsonl").read_bytes()
    summary = (run / "summary.csv").read_bytes()
    header = (run / "run.json").read_bytes()
    res = run_live(Momentum(), run, days=4, plots=False)  # no as_of: the data's last day = same day
    assert res.new_dates == [] and len(res.replayed_dates) == 4 and res.replay_check["ok"]
    assert (run / "decisions.jsonl").read_bytes() == journal
    assert (run / "summary.csv").read_bytes() == summary
    assert (run / "run.json").read_bytes() == header


def test_day_by_day_equals_one_call_and_text_wrapper(tmp_path):
    """Cron-style calls (one new day each) give the same journal as one call; an agent with its own
    (text) wrapper is resumed through a normal reset of its wrapper."""
    daily, batch = tmp_path / "daily", tmp_path / "batch"
    agent = TextMomentum()
    run_live(agent, daily, days=3, as_of="2025-12-24", plots=False)
    for d in ("2025-12-26", "2025-12-29", "2025-12-30", LAST):
        res = run_live(TextMomentum(), daily, as_of=d, plots=False)
        assert res.new_dates == [d]
    run_live(TextMomentum(), batch, days=3, as_of="2025-12-24", plots=False)
    res_b = run_live(TextMomentum(), batch, as_of=LAST, plots=False)
    assert res_b.new_dates == ["2025-12-26", "2025-12-29", "2025-12-30", LAST]
    a, b = _stable(_journal(daily)), _stable(_journal(batch))
    assert len(a) == 7 and a == b
    assert all(len(r["agent_io"]) == 3 and json.loads(r["agent_io"][0]["raw_answer"])["views"] for r in a)
    assert (daily / "summary.csv").read_bytes() == (batch / "summary.csv").read_bytes()


def test_resume_after_crash_matches_uninterrupted_run(tmp_path):
    clean, crashed = tmp_path / "clean", tmp_path / "crashed"
    ref = run_live(Momentum(), clean, days=6, as_of=LAST, plots=False)
    with pytest.raises(LiveAgentError, match=r"failed on 2025-12-29 at S2.*rerun to resume from 2025-12-29") as exc:
        run_live(Crashing(k=3), crashed, days=6, as_of=LAST, plots=False)
    assert "\n" not in str(exc.value)
    recs = _journal(crashed)
    assert [r["type"] for r in recs] == ["decision"] * 3 + ["error"]
    assert recs[-1]["date"] == "2025-12-29" and "model endpoint unavailable" in recs[-1]["message"]
    # a second crash later on, then a clean resume
    with pytest.raises(LiveAgentError, match="2025-12-30"):
        run_live(Crashing(k=1), crashed, as_of=LAST, plots=False)
    res = run_live(Momentum(), crashed, as_of=LAST, plots=False)
    assert res.new_dates == ["2025-12-30", LAST] and res.replay_check["ok"] and res.replay_check["n"] == 4
    assert _stable(_journal(crashed)) == _stable(_journal(clean))
    assert (crashed / "summary.csv").read_bytes() == (clean / "summary.csv").read_bytes()
    assert res.ceps == ref.ceps and res.metrics["final_nav"] == ref.metrics["final_nav"]


def test_torn_last_line_is_repaired(tmp_path):
    run = tmp_path / "m"
    run_live(Momentum(), run, days=3, as_of="2025-12-29", plots=False)
    good = (run / "decisions.jsonl").read_bytes()
    with (run / "decisions.jsonl").open("ab") as fh:  # a crash in the middle of writing a record
        fh.write(b'{"type":"decision","date":"2025-12-30","act')
    res = run_live(Momentum(), run, as_of=LAST, plots=False)
    assert res.new_dates == ["2025-12-30", LAST] and res.replay_check["ok"]
    assert (run / "decisions.jsonl").read_bytes().startswith(good)
    torn = list(run.glob("decisions.jsonl.torn-*"))
    assert len(torn) == 1 and torn[0].read_bytes().startswith(b'{"type":"decision","date":"2025-12-30"')
    assert [r["date"] for r in _journal(run)] == ["2025-12-24", "2025-12-26", "2025-12-29", "2025-12-30", LAST]


def test_replay_detects_a_data_vintage_change(tmp_path):
    from quantgym.envs.portbench.raw import load_portbench_raw
    from quantgym.envs.portbench.universe import CANONICAL_TICKERS
    from quantgym.envs.portbench.data import PortBenchData

    run = tmp_path / "m"
    run_live(Momentum(), run, days=4, as_of="2025-12-24", plots=False)
    before = _journal(run)
    raw = load_portbench_raw()
    px = raw["prices"].loc["2025-01-01":].copy()  # a shorter file keeps the test fast
    px.loc[pd.Timestamp("2025-12-22"), "SPY"] *= 1.01  # a revised close inside the recorded window
    classes = dict(zip(raw["assets"]["ticker"], raw["assets"]["asset_class"]))
    revised = PortBenchData.from_frames(px, classes, macro=raw["macro"], tickers=CANONICAL_TICKERS,
                                        meta={"source": "revised vintage (test)", "provenance": {}})
    res = run_live(Momentum(), run, data=revised, as_of=LAST, plots=False)
    chk = res.replay_check
    assert not chk["ok"] and chk["vintage_changed"] and chk["first_mismatch"] == "2025-12-22"
    assert "data vintage changed" in chk["note"]
    after = _journal(run)
    assert after[:4] == before  # the journal keeps what was decided
    assert all(r["replay_check"]["vintage_changed"] and not r["replay_check"]["ok"] for r in after[4:])
    assert {r["data"]["fingerprint"] for r in after[4:]} != {r["data"]["fingerprint"] for r in before}


def test_malformed_action_is_a_scored_failure(tmp_path):
    res = run_live(BadShape(), tmp_path / "b", days=3, as_of=LAST, plots=False)
    assert res.new_dates == ["2025-12-29", "2025-12-30", LAST]
    rec = {r["date"]: r for r in _journal(tmp_path / "b")}
    bad = rec["2025-12-30"]
    assert "S3" in bad["agent_error"] and "shape" in bad["agent_error"]
    assert bad["stage_scores"]["S3"] == 0.0 and bad["actions"][-1]["status"] == 2
    assert rec[LAST]["agent_error"] is None


def test_folder_guards(tmp_path):
    run = tmp_path / "m"
    run_live(Momentum(), run, days=2, as_of="2025-12-30", plots=False)
    with pytest.raises(LiveError, match="belongs to agent"):
        run_live("equal_weight", run, plots=False)
    with pytest.raises(LiveError, match="profile"):
        run_live(Momentum(), run, profile="aggressive", plots=False)
    with pytest.raises(LiveError, match="before the last recorded decision"):
        run_live(Momentum(), run, as_of="2025-12-29", plots=False)
    with FolderLock(run):
        with pytest.raises(LiveError, match="another live run"):
            run_live(Momentum(), run, plots=False)
    with pytest.raises(LiveError, match="unknown profile"):
        run_live(Momentum(), tmp_path / "x", profile="reckless")
    with pytest.raises(LiveError, match="days"):
        run_live(Momentum(), tmp_path / "y", days=0)


# ---------------------------------------------------------------------------------------------- text protocol


class RealTextAgent(Momentum):
    """Answers in the PortBench JSON text protocol through the project's TextStageAction wrapper;
    returns ``None`` (no answer: API failure) on the dates in ``outage``."""

    name = "TestRealText"

    def __init__(self, outage=()):
        super().__init__()
        self.outage = set(outage)
        self.date = None

    @staticmethod
    def wrap_env(env):
        from quantgym.envs.portbench.text_protocol import TextStageAction

        return TextStageAction(env)

    def act(self, obs, info):
        tick = RealTextAgent.tickers
        stage = int(obs["stage"])
        a = Momentum.answer(self, obs, info)
        if self.decisions in self.outage:  # decisions completed so far (counted at S3 below)
            return None
        avail = np.flatnonzero(np.asarray(obs["available"], bool))
        if stage == 0:
            body = {"asset_views": {tick[i]: round(float(a["views"][i]), 4) for i in avail},
                    "confidence": 0.6, "detected_regime": "bull", "macro_summary": "test"}
        elif stage == 1:
            names = {0: "sell", 1: "hold", 2: "buy"}
            body = {"signals": {tick[i]: names[int(a["signals"][i])] for i in avail}}
        else:
            body = {"weights": {tick[i]: round(float(a["weights"][i]), 6) for i in avail if a["weights"][i] > 0}}
            self.decisions += 1
        return "```json\n" + json.dumps(body) + "\n```"


def test_llm_style_text_agent_outage_is_retried(tmp_path):
    pytest.importorskip("quantgym.envs.portbench.text_protocol")
    from quantgym.envs.portbench.universe import CANONICAL_TICKERS

    RealTextAgent.tickers = tuple(load_portbench_data().tickers)
    assert set(RealTextAgent.tickers) <= set(CANONICAL_TICKERS)
    ref = run_live(RealTextAgent(), tmp_path / "ref", days=4, as_of=LAST, plots=False)
    recs = _journal(tmp_path / "ref")
    assert all(r["agent_error"] is None and r["stage_scores"]["S1"] > 0.9 for r in recs)
    assert all(io["text"]["status"] == "ok" for r in recs for io in r["agent_io"])
    # the provider is down on the 3rd decision: nothing is scored, the date is retried on the next call
    run = tmp_path / "outage"
    with pytest.raises(LiveAgentError, match=r"no answer .* on 2025-12-30 at S1 after 3 attempt"):
        run_live(RealTextAgent(outage={2}), run, days=4, as_of=LAST, plots=False)
    assert [r["type"] for r in _journal(run)] == ["decision", "decision", "error"]
    res = run_live(RealTextAgent(), run, as_of=LAST, plots=False)
    assert res.new_dates == ["2025-12-30", LAST] and res.ceps == ref.ceps
    assert _stable(_journal(run)) == _stable(recs)


def test_universe_change_is_refused(tmp_path):
    from quantgym.envs.portbench.universe import CANONICAL_TICKERS

    run = tmp_path / "m"
    run_live(Momentum(), run, days=2, as_of="2025-12-30", plots=False)
    smaller = load_portbench_data(universe=[t for t in CANONICAL_TICKERS if t != "GLD"])
    with pytest.raises(LiveError, match=r"universe differs .*GLD"):
        run_live(Momentum(), run, data=smaller, plots=False)


def test_resume_after_sigkill(tmp_path):
    """A real crash: the process is killed (SIGKILL) in the middle of its 3rd decision."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    run, clean = tmp_path / "killed", tmp_path / "clean"
    code = f"""
import os, signal, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_live_runner import Momentum
from quantgym.envs.portbench.live.runner import run_live

class Killer(Momentum):
    def act(self, obs, info):
        if int(obs["stage"]) == 1 and self.decisions == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().act(obs, info)

run_live(Killer(), {str(run)!r}, days=4, as_of={LAST!r}, plots=False)
"""
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert [r["date"] for r in _journal(run)] == ["2025-12-26", "2025-12-29"]
    res = run_live(Momentum(), run, as_of=LAST, plots=False)  # the dead process's lock is gone
    assert res.new_dates == ["2025-12-30", LAST] and res.replay_check["ok"]
    run_live(Momentum(), clean, days=4, as_of=LAST, plots=False)
    assert _stable(_journal(run)) == _stable(_journal(clean))


def test_box_action_policy_through_allocation_wrapper(tmp_path):
    """An RL-style policy (Box action through the project's AllocationWrapper) resumes as well."""
    pytest.importorskip("quantgym.envs.portbench.allocation")
    from quantgym.envs.portbench.allocation import AllocationWrapper

    class BoxPolicy:
        name = "TestBox"
        env_kwargs = {"stagewise": False}

        @staticmethod
        def wrap_env(env):
            return AllocationWrapper(env)

        def act(self, obs, info):
            return np.linspace(-0.5, 0.5, 80).astype(np.float32)  # a fixed tilt, softmax over A_d

    run_live(BoxPolicy(), tmp_path / "a", days=2, as_of="2025-12-30", plots=False)
    res = run_live(BoxPolicy(), tmp_path / "a", plots=False)
    ref = run_live(BoxPolicy(), tmp_path / "b", days=3, as_of=LAST, plots=False)
    assert res.new_dates == [LAST] and res.replay_check["ok"]
    assert _stable(_journal(tmp_path / "a")) == _stable(_journal(tmp_path / "b"))
    assert res.ceps == ref.ceps and all(len(r["actions"]) == 1 for r in _journal(tmp_path / "a"))


class FallsBack(Momentum):
    """Reports an optimiser fallback through step_record() on 2025-12-30, as the baselines do."""

    name = "TestFallsBack"

    def act(self, obs, info):
        self._at = (info["date"], int(obs["stage"]))
        return super().act(obs, info)

    def step_record(self):  # the S3 weights of 2025-12-30 fell back
        return {"fallback": "solver failed (test); equal weight"} if self._at == ("2025-12-30", 2) else None


def test_policy_step_records_reach_the_journal(tmp_path):
    # a baseline's solver fallback (step_record) is kept by the live loop, as by evaluate()
    run_live(FallsBack(), tmp_path / "f", days=3, as_of=LAST, plots=False)
    rec = {r["date"]: r for r in _journal(tmp_path / "f")}
    fb = [io["fallback"] for io in rec["2025-12-30"]["agent_io"] if io.get("fallback")]
    assert fb == ["solver failed (test); equal weight"]
    assert not any(io.get("fallback") for io in rec[LAST]["agent_io"])
