"""The PortBench real-time (live) runner: one decision per trading day, persisted and resumable.

One module on purpose: the run folder's write-ahead protocol (lock, run.json, decisions.jsonl, resume,
replay check, atomic outputs) is one state machine, reviewed as a whole.

Protocol (spec ``portbench.md`` §2.5 with the clean-mode choice of §2.5/§1.7): the decision dates
are the trading days of a live window; at each decision date ``d`` the agent sees only data through
the close of the previous trading day (``as_of="previous_close"``); the S1–S3 answers are scored
against the lookback oracle (CEPS per decision), S4/S5 run inside the env, and the S3 weights trade
at the close of ``d`` in the full §6 sandbox (drift, 15 bps costs, NAV). The env implements all of
this (``period=dict(name="live", days=..., as_of=...)``); this module adds persistence:

* A **run folder** holds ``run.json`` (agent, profile, first decision date; written once),
  ``decisions.jsonl`` (append-only, one line per decision, durable before the next decision starts),
  and the derived ``summary.csv`` / ``results.json`` / PNG plots (rewritten atomically each call).
* The first call fixes the window start: the first of the last ``days`` trading days up to
  ``as_of`` (default: the data's last day). Every later call extends the window to the new
  ``as_of`` and asks the agent only for the decision dates not yet in the journal.
* **Resume by replay**: the env is deterministic, so a call rebuilds the episode from the window
  start, re-applies the recorded env-level actions of every journalled date, checks that the replayed
  NAV and scores equal the recorded ones (a difference is reported and, with a new data fingerprint,
  attributed to a data-vintage change), then continues with the agent. Re-running with no new trading
  day is idempotent (the journal is untouched). A crash (the agent raising, the process killed)
  loses at most the decision in progress; the next call resumes at that date.

Longer than 500 lines as one job, one call on a run folder under its lock: the action tap that journals and
replays, the replay check and the derived outputs all read the same journal records, whose fields must stay in
step.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import pandas as pd

from quantgym.evaluation import EvalResult, policy_key, policy_name
from quantgym.envs.portbench.data import PortBenchData, load_portbench_data
from quantgym.envs.portbench.config import LivePeriod, resolve_live
from quantgym.envs.portbench.env import STAGES, STATUS_UNPARSEABLE, PortBenchEnv
from quantgym.envs.portbench.simulator import rebalance_rows
from quantgym.envs.portbench.live.config import LIVE_VERSION, LiveConfig
from quantgym.envs.portbench.live.data import data_vintage
from quantgym.envs.portbench.live.journal import FolderLock, Journal, JournalError, write_json_atomic
from quantgym.envs.portbench.live.plots import plot_live_ceps, plot_live_nav
from quantgym.results import SectionResult, to_jsonable, write_results

__all__ = ["run_live", "LiveResult", "LiveError", "LiveAgentError", "ActionTap", "RECORD_SCHEMA"]

RECORD_SCHEMA = "quantgym-live-decision-v1"
HEADER_SCHEMA = "quantgym-live-run-v1"
ENV_IDS = {"conservative": "PortBench-Conservative-v0", "balanced": "PortBench-Balanced-v0",
           "aggressive": "PortBench-Aggressive-v0"}
#: info keys produced by the PortBench env itself; anything else comes from the agent's wrappers
_ENV_INFO_KEYS = frozenset({
    "date", "decision_index", "n_decisions", "stage", "stage_scores", "invalid", "refused", "unparseable", "nav",
    "uses_future_data", "n_available", "turnover", "cost", "weights", "orders", "ceps", "pas", "tau", "tau_star", "var",
    "drawdown", "drift", "alerts", "trigger", "episode_metrics", "dd_within_tolerance",
})
_STAGE_KEYS = {"S1": ("views",), "S2": ("signals",), "S3": ("weights",), "all": ("views", "signals", "weights")}


class LiveError(RuntimeError):
    """A live run cannot proceed (inconsistent run folder, dates, data); nothing was recorded."""


class LiveAgentError(LiveError):
    """The agent raised while deciding; earlier decisions are recorded, the failing date is not."""


# ----------------------------------------------------------------------------------------------
# env-level action recording and replay
# ----------------------------------------------------------------------------------------------


def _encode_action(action: dict, stage: str) -> dict[str, Any]:
    out: dict[str, Any] = {"stage": stage}
    for k in _STAGE_KEYS[stage]:
        a = np.asarray(action[k])
        out[k] = a.astype(np.int64).tolist() if k == "signals" and a.dtype.kind in "iub" else a.astype(float).tolist()
    st = np.asarray(action.get("status", 0)).reshape(-1)
    out["status"] = int(st[0])
    return out


def _decode_action(rec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"status": int(rec.get("status", 0))}
    for k in ("views", "signals", "weights"):
        if k in rec:
            out[k] = np.array([np.nan if x is None else x for x in rec[k]], dtype=np.float64)
    return out


class ActionTap(gym.Wrapper):
    """Innermost wrapper of a live run: records each env-level action and replays recorded decisions.

    ``replay`` is a list of ``(date, [encoded sub-step actions])``; :meth:`reset` resets the env and
    re-applies them in order (checking each date), so that wrappers outside this one see an ordinary
    reset whose observation is the first decision that still needs the agent.
    """

    def __init__(self, env: PortBenchEnv):
        super().__init__(env)
        self.replay: list[tuple[str, list[dict]]] = []
        self.current: list[dict] = []
        self.terminated_in_replay = False

    @property
    def base(self) -> PortBenchEnv:
        return self.env.unwrapped  # type: ignore[return-value]

    def decision_date(self) -> str:
        return str(self.base.snapshot.decision_date.date())

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.current = []
        self.terminated_in_replay = False
        for date, actions in self.replay:
            if self.decision_date() != date:
                raise LiveError(f"replay out of step: the env is at {self.decision_date()}, the journal at {date}")
            term = False
            for a in actions:
                obs, _r, term, _tr, info = self.env.step(_decode_action(a))
            if term:
                self.terminated_in_replay = True
                break
        return obs, info

    def stage_label(self) -> str:
        b = self.base
        return STAGES[b.stage] if b.stagewise else "all"

    def step(self, action: Any):
        stage = self.stage_label()
        result = self.env.step(action)  # a structural error raises before anything is recorded
        self.current.append(_encode_action(action, stage))
        return result


def _fallback_action(n: int) -> dict[str, Any]:
    """Status 2 (unparseable): the env applies the stage's §4.0 fallback and scores it 0."""
    return {"views": np.zeros(n), "signals": np.ones(n, dtype=np.int64), "weights": np.zeros(n),
            "status": STATUS_UNPARSEABLE}


# ----------------------------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------------------------


@dataclass
class LiveResult:
    """Outcome of one :func:`run_live` call.

    Attributes
    ----------
    run_dir : the run folder.
    agent, agent_spec, profile : identification.
    start, as_of : first and last decision dates of the window (ISO).
    new_dates : decision dates decided by the agent in this call.
    replayed_dates : decision dates re-applied from the journal.
    replay_check : ``ok``, ``n``, ``nav_max_rel_diff``, ``score_max_abs_diff``, ``vintage_changed``, ...
    metrics : §7 metrics of the whole window (the env's ``episode_metrics``).
    stage_scores : per-stage means over the window (None for direct-allocation baselines).
    ceps : run CEPS = mean per-decision lookback CEPS (None for baselines).
    records : per-decision env records of the whole window, in date order.
    nav : NAV curve (currency units) over the window plus the initial point.
    data : vintage of the data used (:func:`~quantgym.envs.portbench.live.data.data_vintage`).
    files : paths written.
    """

    run_dir: Path
    agent: str
    agent_spec: str
    profile: str
    start: str
    as_of: str
    new_dates: list[str]
    replayed_dates: list[str]
    replay_check: dict[str, Any]
    metrics: dict[str, Any]
    stage_scores: dict[str, float] | None
    ceps: float | None
    records: list[dict[str, Any]]
    nav: pd.Series
    data: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _load_data(data: Any) -> PortBenchData:
    if data is None or (isinstance(data, str) and data == "bundled"):
        return load_portbench_data()
    if isinstance(data, PortBenchData):
        return data
    return load_portbench_data(data)


def _replay_check(recorded: list[dict], replayed: list[dict], vintage: dict, config: LiveConfig) -> dict[str, Any]:
    nav_diff, score_diff, first_bad = 0.0, 0.0, None
    for rec, env_rec in zip(recorded, replayed):
        a, b = rec.get("nav_after_trade"), env_rec.get("nav_after_trade")
        d = abs(a - b) / abs(a) if a not in (None, 0) and b is not None else (0.0 if a == b else float("inf"))
        s = 0.0
        if rec.get("ceps") is not None or env_rec.get("ceps") is not None:
            ra, rb = rec.get("stage_scores") or {}, env_rec.get("stage_scores") or {}
            vals = [(rec.get("ceps"), env_rec.get("ceps"))] + [(ra.get(k), rb.get(k)) for k in set(ra) | set(rb)]
            s = max((abs(x - y) if x is not None and y is not None else float("inf")) for x, y in vals)
        if first_bad is None and (d > config.replay_nav_rtol or s > config.replay_score_atol):
            first_bad = rec["date"]
        nav_diff, score_diff = max(nav_diff, d), max(score_diff, s)
    fps = sorted({(r.get("data") or {}).get("fingerprint") for r in recorded} - {None})
    changed = any(fp != vintage["fingerprint"] for fp in fps)
    ok = first_bad is None
    note = None
    if not ok:
        note = (f"replayed decisions differ from the journal from {first_bad} on (NAV rel. diff {nav_diff:.3g}, "
                f"score diff {score_diff:.3g}): " + ("the data vintage changed since they were recorded "
                f"({', '.join(fps)} -> {vintage['fingerprint']}); the journal keeps the original values, the "
                "summary uses the replay on the current data" if changed else
                "same data fingerprint, so the code or scoring changed"))
    elif changed:
        note = "the data vintage changed since earlier decisions were recorded; replayed values are unchanged"
    return {"ok": ok, "n": len(recorded), "nav_max_rel_diff": nav_diff, "score_max_abs_diff": score_diff,
            "first_mismatch": first_bad, "vintage_changed": changed, "recorded_fingerprints": fps,
            "current_fingerprint": vintage["fingerprint"], "note": note}


#: why a live run writes no ``live_ceps.png`` (``results.json`` → ``tasks.portbench.live.plots_skipped``)
NO_CEPS_PLOT = ("not written: the agent has no stage scores or CEPS (a direct-allocation baseline bypasses the "
                "S1-S5 pipeline, spec §4.6); see live_nav.png")


def _write_outputs(run_dir: Path, base: PortBenchEnv, result: EvalResult, live_info: dict, plots: bool,
                   title: str) -> dict[str, str]:
    """summary.csv / results.json (same schema as ``bench``) and PNGs, each replaced atomically."""
    row = result.summary_row(gate=None)
    ceps_plot = plots and any(r.get("ceps") is not None for r in base.records)
    if plots and not ceps_plot:  # a direct-allocation baseline (§4.6): no stage score or CEPS to draw
        live_info["plots_skipped"] = {"live_ceps.png": NO_CEPS_PLOT}
    run = result.to_dict()
    run["live"] = live_info
    section = SectionResult(task="portbench", rows=[row], runs=[run], extra={"live": live_info})
    files: dict[str, str] = {}
    tmp = Path(tempfile.mkdtemp(prefix=".live-out-", dir=run_dir))
    try:
        write_results(tmp, [section], meta={"command": "quantgym live", "live_version": LIVE_VERSION,
                                            "run_dir": str(run_dir)})
        if ceps_plot:
            plot_live_ceps(base.records, f"{title}\nlookback CEPS per decision (top) and mean stage scores (bottom)",
                           tmp / "live_ceps.png")
        elif plots:  # a live_ceps.png left in the folder by an earlier call would not describe this run
            (run_dir / "live_ceps.png").unlink(missing_ok=True)
        if plots:
            plot_live_nav(result.nav, f"{title}: NAV", tmp / "live_nav.png")
        for f in sorted(tmp.iterdir()):
            os.replace(f, run_dir / f.name)
            files[f.name] = str(run_dir / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return files


# ----------------------------------------------------------------------------------------------
# main entry point
# ----------------------------------------------------------------------------------------------


def run_live(
    agent: Any,
    run_dir: str | os.PathLike,
    *,
    agent_spec: str | None = None,
    profile: str | None = None,
    data: Any = None,
    days: int | None = None,
    as_of: str | None = None,
    plots: bool = True,
    config: LiveConfig | None = None,
    on_decision: Callable[[dict[str, Any]], None] | None = None,
) -> LiveResult:
    """Run (or resume) a live PortBench evaluation in ``run_dir`` up to ``as_of``.

    Parameters
    ----------
    agent : a policy (``act(obs, info)``, optional ``reset(env)``, ``env_kwargs``, ``wrap_env``,
        ``direct_allocation``) or an agent spec string for :func:`quantgym.agents.registry.make_agent`.
    run_dir : the run folder (created on the first call; one folder per agent and profile).
    agent_spec : label stored in ``run.json`` and checked on resume (default: the spec string, or the
        policy's name).
    profile : investor profile (default ``config.profile`` = ``"balanced"``, the paper's live profile).
    data : None (bundled real data), ``"bundled"``, a data directory (``quantgym data refresh``) or a
        :class:`~quantgym.envs.portbench.data.PortBenchData`.
    days : length of the first window in trading days (default ``config.days`` = 12); used only by the
        call that creates the run folder.
    as_of : last decision date (ISO; the last trading day ≤ it is used). Default: the data's last day.
    plots : write ``live_ceps.png`` and ``live_nav.png``.
    config : :class:`~quantgym.envs.portbench.live.config.LiveConfig`.
    on_decision : optional callback receiving each new journal record right after it is made durable.

    Returns
    -------
    LiveResult

    Raises
    ------
    LiveAgentError
        The agent raised at some date (that date is not recorded; an ``error`` line is journalled).
    LiveError
        Inconsistent run folder (other agent/profile), ``as_of`` before the window or before the last
        recorded decision, a data calendar that lacks the recorded dates, a locked folder.
    """
    config = config or LiveConfig()
    if config.no_answer not in ("retry", "score"):
        raise LiveError(f"LiveConfig.no_answer must be 'retry' or 'score', got {config.no_answer!r}")
    profile = (profile or config.profile).lower()
    if profile not in ENV_IDS:
        raise LiveError(f"unknown profile {profile!r}; choose one of {sorted(ENV_IDS)}")
    if isinstance(agent, str):
        from quantgym.agents.registry import make_agent

        spec = agent
        policy = make_agent(agent, task="portbench")
    else:
        spec, policy = None, agent
    name = policy_name(policy)
    spec = agent_spec or spec or name
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        lock = FolderLock(run_dir).__enter__()
    except JournalError as exc:
        raise LiveError(str(exc)) from None
    try:
        return _run_locked(policy, name, spec, run_dir, config, profile, data, days, as_of, plots, on_decision)
    finally:
        lock.__exit__(None, None, None)
        if isinstance(agent, str) and callable(getattr(policy, "close", None)):
            policy.close()  # e.g. flush an LLM agent's transcript


def _run_locked(policy, name, spec, run_dir, config, profile, data, days, as_of, plots, on_decision) -> LiveResult:
    t_start = time.perf_counter()
    journal = Journal(run_dir / config.journal)
    try:
        entries = journal.read()
    except JournalError as exc:
        raise LiveError(str(exc)) from None
    decisions = [e for e in entries if e.get("type") == "decision"]
    pbdata = _load_data(data)
    vintage = data_vintage(pbdata)
    dates = pbdata.dates
    header_path = run_dir / config.header
    header: dict[str, Any] | None = None
    if header_path.exists():
        header = json.loads(header_path.read_text(encoding="utf-8"))
        if header.get("agent_spec") != spec or header.get("profile") != profile:
            raise LiveError(f"{run_dir} belongs to agent {header.get('agent_spec')!r} / profile "
                            f"{header.get('profile')!r}, not {spec!r} / {profile!r}; use another --run-dir")
        start = pd.Timestamp(header["start"])
    elif decisions:
        raise LiveError(f"{run_dir}: {config.journal} has decisions but {config.header} is missing; restore it or "
                        "use a new run folder")
    else:
        n0 = int(days if days is not None else config.days)
        try:
            start = pd.Timestamp(resolve_live(LivePeriod(n0, as_of), dates).start)
        except ValueError as exc:
            raise LiveError(str(exc)) from None
    # -- window end ---------------------------------------------------------------------------
    end_ts = dates[-1] if as_of is None else pd.Timestamp(as_of)
    idx = int(dates.searchsorted(end_ts, side="right")) - 1
    if idx < 0 or dates[idx] < start:
        raise LiveError(f"as_of {end_ts.date()} is before the run's first decision date {start.date()}")
    as_of_ts = dates[idx]
    last_rec = decisions[-1]["date"] if decisions else None
    if last_rec is not None and as_of_ts < pd.Timestamp(last_rec):
        raise LiveError(f"as_of {as_of_ts.date()} is before the last recorded decision {last_rec}; the journal is "
                        "append-only (omit --as-of to continue to the data's last day)")
    s_idx = int(dates.searchsorted(start, side="left"))
    if s_idx >= len(dates) or dates[s_idx] != start:
        raise LiveError(f"the run's first decision date {start.date()} is not a trading day of the data "
                        f"({vintage['source']}); the data calendar changed")
    n_days = idx - s_idx + 1
    # -- env ----------------------------------------------------------------------------------
    env_kwargs = dict(getattr(policy, "env_kwargs", None) or {})
    env_kwargs.pop("data", None)  # the live data win over a policy's default (baselines: scoring=False)
    env_kwargs.update(profile=profile, period={"name": "live", "days": n_days, "as_of": str(as_of_ts.date())})
    try:
        base = PortBenchEnv(data=pbdata, **env_kwargs)
    except ValueError as exc:
        raise LiveError(f"cannot build the live env: {exc}") from None
    env_dates = [str(d.date()) for d in base.view.dates[rebalance_rows(base.view.dates, base.period.start,
                                                                       base.period.end, "daily")]]
    rec_dates = [d["date"] for d in decisions]
    if rec_dates != env_dates[: len(rec_dates)]:
        bad = next((i for i, (a, b) in enumerate(zip(rec_dates, env_dates)) if a != b), min(len(rec_dates), len(env_dates)))
        raise LiveError(f"recorded decision dates no longer match the data calendar at position {bad} "
                        f"(journal {rec_dates[bad] if bad < len(rec_dates) else '-'} vs data "
                        f"{env_dates[bad] if bad < len(env_dates) else '-'}); start a new run folder")
    tickers = list(base.view.tickers)
    if header is not None and header.get("tickers") not in (None, tickers):
        old = header["tickers"]
        diff = sorted(set(old) ^ set(tickers))
        raise LiveError(f"the data's universe differs from the run's ({len(old)} -> {len(tickers)} tickers; "
                        f"differences: {', '.join(diff[:8]) or 'order'}): recorded actions cannot be replayed. Refresh "
                        "incrementally (keeps the history of every ticker) or start a new run folder")
    if header is None:
        header = {
            "schema": HEADER_SCHEMA, "live_version": LIVE_VERSION, "created_utc": _utc_now(),
            "agent": name, "agent_spec": spec, "profile": profile, "env_id": ENV_IDS[profile],
            "start": str(start.date()), "initial_days": n_days, "initial_as_of": str(as_of_ts.date()),
            "tickers": tickers,
            "protocol": "spec portbench §2.5 clean mode: daily decisions, data through the previous close, "
                        "lookback-oracle CEPS, full §6 sandbox (drift, costs, NAV)",
            "env_kwargs": {k: v for k, v in env_kwargs.items() if k != "period"},
            "config": base.config.to_dict(), "live_config": config.to_dict(), "data_at_start": vintage,
        }
        write_json_atomic(header_path, header)
    tap = ActionTap(base)
    tap.replay = [(d["date"], d.get("actions") or []) for d in decisions]
    env = policy.wrap_env(tap) if callable(getattr(policy, "wrap_env", None)) else tap
    try:
        obs, info = env.reset(seed=config.seed)
    except (ValueError, KeyError, TypeError) as exc:
        raise LiveError(f"cannot replay the journal: {_one_line(exc)}") from None
    replay = _replay_check(decisions, base.records, vintage, config)
    if hasattr(policy, "reset"):
        policy.reset(env)
    act = policy.act if hasattr(policy, "act") else policy
    terminated = tap.terminated_in_replay or len(decisions) == len(env_dates)
    new_dates: list[str] = []
    while not terminated:
        date = tap.decision_date()
        snap = base.snapshot
        nav_pre = float(base.nav_pre)
        data_through = str(base.view.dates[snap.t - 1].date())
        tap.current = []
        agent_io: list[dict[str, Any]] = []
        agent_errors: list[str] = []
        n_before = len(base.records)
        t0 = time.perf_counter()
        while len(base.records) == n_before:
            stage = tap.stage_label()
            try:
                action = act(obs, info)
            except Exception as exc:
                journal.append({"type": "error", "schema": RECORD_SCHEMA, "date": date, "stage": stage,
                                "agent": name, "agent_spec": spec, "message": _one_line(exc),
                                "recorded_utc": _utc_now()})
                raise LiveAgentError(f"agent {name!r} failed on {date} at {stage} ({_one_line(exc)}); "
                                     f"{len(new_dates)} new decision(s) recorded in {journal.path}; rerun to resume "
                                     f"from {date}") from exc
            try:
                obs, _r, terminated, truncated, info = env.step(action)
            except ValueError as exc:  # malformed action (§11.4): a recorded, scored failure, not a crash
                agent_errors.append(f"{stage}: {_one_line(exc)}")
                obs, _r, terminated, truncated, info = tap.step(_fallback_action(base.n_assets))
            extra = {k: v for k, v in info.items() if k not in _ENV_INFO_KEYS}
            # what the policy itself recorded at this step (a baseline's solver fallback, an LLM agent's
            # prompt style and cap), as evaluate() keeps it in the step records
            note = policy.step_record() if callable(getattr(policy, "step_record", None)) else None
            if note:
                extra.update(note)
            if extra:
                agent_io.append({"stage": stage, **extra})
            txt = info.get("text")
            if (config.no_answer == "retry" and isinstance(txt, dict) and txt.get("status") == "unparseable"
                    and txt.get("answers") and all(a is None for a in txt["answers"])):
                msg = (f"no answer from agent {name!r} on {date} at {stage} after {len(txt['answers'])} attempt(s) "
                       f"(API failure); the decision is not recorded")
                journal.append({"type": "error", "schema": RECORD_SCHEMA, "date": date, "stage": stage,
                                "agent": name, "agent_spec": spec, "message": msg, "recorded_utc": _utc_now()})
                raise LiveAgentError(f"{msg}; {len(new_dates)} new decision(s) recorded in {journal.path}; rerun "
                                     f"to retry {date}")
            if truncated:
                terminated = True
                break
        env_rec = base.records[-1]
        rec = {
            "type": "decision", "schema": RECORD_SCHEMA, "date": date, "decision_index": len(base.records) - 1,
            "agent": name, "agent_spec": spec, "profile": profile, "data_through": data_through,
            "oracle": base.config.scoring.oracle, "actions": list(tap.current), "agent_io": agent_io,
            "agent_error": "; ".join(agent_errors) or None, "nav_pre": nav_pre,
            **{k: v for k, v in env_rec.items() if k != "date"},
            "data": vintage, "replay_check": {k: replay[k] for k in ("ok", "n", "nav_max_rel_diff",
                                                                      "vintage_changed", "note")},
            "decide_seconds": round(time.perf_counter() - t0, 3),
            "recorded_utc": _utc_now(), "scoring_version": base.config.version, "live_version": LIVE_VERSION,
        }
        rec["nav"] = rec["nav_after_trade"]
        journal.append(rec)
        new_dates.append(date)
        if on_decision is not None:
            on_decision(to_jsonable(rec))
    # -- derived outputs ------------------------------------------------------------------------
    metrics = base.episode_metrics()
    result = EvalResult(
        task="portbench", agent=name, agent_key=policy_key(policy), env_id=ENV_IDS[profile], profile=profile,
        period="live",
        metrics={k: v for k, v in metrics.items() if k != "stage_means"}, stage_scores=metrics.get("stage_means"),
        ceps=metrics.get("ceps"), nav=base.nav_series(), steps=list(base.records),
        config={"env_kwargs": header.get("env_kwargs"), "config": base.config.to_dict()},
    )
    live_info = {
        "agent_spec": spec, "start": str(start.date()), "as_of": str(as_of_ts.date()),
        "n_decisions": len(base.records), "new_dates": new_dates, "replayed": len(decisions),
        "replay_check": replay, "data": vintage, "journal": config.journal,
        "ceps_per_decision": [{"date": r["date"], "ceps": r.get("ceps"), "stage_scores": r.get("stage_scores")}
                              for r in base.records],
        "journal_repaired": journal.repaired, "elapsed_s": time.perf_counter() - t_start,
    }
    if callable(getattr(policy, "usage", None)):  # LLM agents: calls, tokens, cost of this call
        try:
            live_info["agent_usage"] = to_jsonable(policy.usage())
        except Exception as exc:  # usage is informative only
            live_info["agent_usage"] = {"error": _one_line(exc)}
    title = f"PortBench live — {name}, {profile} ({start.date()} → {as_of_ts.date()})"
    files = _write_outputs(run_dir, base, result, live_info, plots, title)
    return LiveResult(
        run_dir=run_dir, agent=name, agent_spec=spec, profile=profile, start=str(start.date()),
        as_of=str(as_of_ts.date()), new_dates=new_dates, replayed_dates=rec_dates, replay_check=replay,
        metrics=result.metrics, stage_scores=result.stage_scores, ceps=result.ceps, records=list(base.records),
        nav=result.nav, data=vintage, files=files,
    )
