"""``quantgym eval``'s engine: run an agent on a grid of episodes, concurrently, and write the results.

Python API (the CLI in :mod:`quantgym.agents.llm.cli` is a thin layer over it)::

    from quantgym.agents.llm.runner import EvalPlan, run_eval
    plan = EvalPlan(env_ids=["PortBench-Balanced-v0"], periods=["covid_2020"])
    sections = run_eval("openai:gpt-4o-mini", plan, out_dir="results/eval-1", concurrency=4,
                        agent_options={"base_url": None})

Episodes of a plan: PortBench — every (env id, period); Quant-Arena — one research run per env id;
Market-Bench — every (env id, round). They run in a thread pool of ``concurrency`` workers sharing one
agent (one engine, one transcript per task). Results: ``summary.csv`` / ``results.json``
(:mod:`quantgym.results`) with per-stage scores, CEPS, token usage, cost and transcript paths, plus
PortBench NAV plots (the agent beside Equal-Weight).
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as _dt
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from quantgym.results import SectionResult, SummaryRow, write_results

_PERIOD_RE = re.compile(r"^(\d{4}-\d{2}-\d{2}):(\d{4}-\d{2}-\d{2})(?::(daily|weekly|monthly))?$")


def task_of(env_id: str) -> str:
    """Task of an env id: PortBench-QA → portbench_qa, PortBench-* → portbench, QuantArena-* →
    quant_arena, MarketBench-* → market_bench.

    Raises
    ------
    ValueError
        For an id of none of the three tasks.
    """
    if env_id.startswith("PortBench-QA"):
        return "portbench_qa"
    for prefix, task in (("PortBench-", "portbench"), ("QuantArena-", "quant_arena"), ("MarketBench-", "market_bench")):
        if env_id.startswith(prefix):
            return task
    raise ValueError(f"unknown env id {env_id!r}: expected PortBench-*, QuantArena-* or MarketBench-*")


def parse_period(p: str | dict) -> str | dict:
    """A period name (``covid_2020``) or ``START:END[:FREQ]`` (``2020-03-01:2020-03-31:weekly``)."""
    if isinstance(p, dict):
        return p
    m = _PERIOD_RE.match(p.strip())
    if m:
        return {"start": m.group(1), "end": m.group(2), "freq": m.group(3) or "monthly"}
    return p.strip()


@dataclass
class EvalPlan:
    """What to run.

    Attributes
    ----------
    env_ids : registered ids (one task or several).
    periods : PortBench periods (names or dicts; default ``["normal_2024"]``).
    rounds : Market-Bench rounds (default 1..5).
    attempts : Market-Bench K (default 3). feedback : Market-Bench repair mode.
    seed : env seed. env_kwargs : extra env kwargs (e.g. Quant-Arena windows).
    baseline : PortBench: also run Equal-Weight for the NAV plots and tables.
    plots : write PNGs.
    """

    env_ids: list[str]
    periods: list[Any] = field(default_factory=lambda: ["normal_2024"])
    rounds: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    attempts: int = 3
    feedback: bool = False
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    baseline: bool = True
    plots: bool = True

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["env_kwargs"] = {k: v for k, v in self.env_kwargs.items() if isinstance(v, (str, int, float, bool, type(None)))}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalPlan":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def _period_label(p: Any) -> str:
    if isinstance(p, dict):
        return f"{p['start']}_{p['end']}_{p.get('freq', 'monthly')}"
    return str(p)


# ------------------------------------------------------------------------------------------ episodes
def run_portbench(agent: Any, env_id: str, period: Any, plan: EvalPlan) -> dict[str, Any]:
    """One PortBench episode through :func:`quantgym.agents.base.evaluate`."""
    from quantgym.agents.base import evaluate

    kw = {k: v for k, v in plan.env_kwargs.items()}
    res = evaluate(env_id, agent, seed=plan.seed, period=period, **kw)
    # a baseline / sb3 policy has no episode labels or token usage
    label = getattr(agent, "current_episode", None)
    usage = agent.episode_usage(label) if hasattr(agent, "episode_usage") else None
    text_stats: dict[str, dict[str, int]] = {}
    for st in res.steps:
        t = st.get("text") or {}
        if not t:
            continue
        d = text_stats.setdefault(t["stage"], {"ok": 0, "refused": 0, "unparseable": 0, "invalid": 0, "retry": 0,
                                               "coerced": 0})
        d[t["status"]] = d.get(t["status"], 0) + 1
        d["coerced"] += bool(t.get("coercions"))
    return {"result": res, "usage": usage, "episode": label, "parse_stats": text_stats,
            "llm": llm_summary(agent, label)}


def llm_summary(agent: Any, label: str | None) -> dict[str, Any] | None:
    """Per-episode record of what the context budget and the endpoint chose: prompt styles, structured
    rungs, re-rendered prompts, cut caps and warnings (e.g. a server that truncated a prompt)."""
    if label is None or not hasattr(agent, "logs"):
        return None
    styles: dict[str, int] = {}
    rungs: dict[str, int] = {}
    warnings: list[str] = []
    refits = cut = 0
    for e in agent.logs.get(label, []):
        if e.get("prompt_style"):
            styles[e["prompt_style"]] = styles.get(e["prompt_style"], 0) + 1
        if e.get("rung"):
            rungs[e["rung"]] = rungs.get(e["rung"], 0) + 1
        refits += bool(e.get("refit"))
        cut += bool(e.get("cap_cut"))
        if e.get("warning") and e["warning"] not in warnings:
            warnings.append(e["warning"])
    eng = getattr(agent, "engine", None)
    return {"prompt_styles": styles, "rungs": rungs, "refits": refits, "caps_cut": cut, "warnings": warnings,
            "context_window": eng.context_window() if eng is not None else None,
            "context_source": eng.context_source() if eng is not None else None}


def run_quant_arena(agent: Any, env_id: str, plan: EvalPlan, record_dir: Path | None = None) -> dict[str, Any]:
    """One Quant-Arena research run (submit / feedback / freeze) or one-shot submission."""
    import gymnasium as gym

    kw = dict(plan.env_kwargs)
    kw.setdefault("record_dir", record_dir if record_dir is not None else False)
    kw.setdefault("agent", agent.name)
    kw.setdefault("model", getattr(agent.engine.config, "model", None))
    kw.setdefault("framework", "quantgym.agents.llm")
    env = gym.make(env_id, **kw)
    try:
        obs, info = env.reset(seed=plan.seed)
        agent.reset(env)
        feedback, done, S = [], False, 0.0
        while not done:
            action = agent.act(obs, info)
            obs, reward, done, _, info = env.step(action)
            if not done:
                feedback.append({"reward": reward, **(info.get("feedback") or {})})
            S = reward
        u = env.unwrapped
        label = agent.current_episode
        return {"env_id": env_id, "final": info, "S": S, "feedback": feedback, "episode": label,
                "usage": agent.episode_usage(label), "decisions": agent.logs.get(label, []),
                "llm": llm_summary(agent, label),
                "record_path": None if u.record_path is None else str(u.record_path)}
    finally:
        env.close()


def run_market_bench(agent: Any, env_id: str, rnd: int, plan: EvalPlan) -> dict[str, Any]:
    """One Market-Bench (strategy, round) episode of up to K attempts."""
    import gymnasium as gym

    env = gym.make(env_id, round=rnd, attempts=plan.attempts, feedback=plan.feedback, **plan.env_kwargs)
    try:
        obs, info = env.reset(seed=plan.seed)
        agent.reset(env)
        done = False
        while not done:
            obs, _, done, _, info = env.step(agent.act(obs, info))
        u = env.unwrapped
        label = agent.current_episode
        recs = []
        for rec in u.records:
            r = {k: v for k, v in rec.items() if k != "metrics"}
            r.update(agent=agent.name, strategy=u.strategy, round=u.round_number)
            recs.append(r)
        return {"env_id": env_id, "round": rnd, "records": recs, "round_record": info["record"], "episode": label,
                "usage": agent.episode_usage(label), "decisions": agent.logs.get(label, []),
                "llm": llm_summary(agent, label)}
    finally:
        env.close()


# ------------------------------------------------------------------------------------------ driver
def _make(spec_or_agent: Any, task: str, options: dict) -> Any:
    if not isinstance(spec_or_agent, str):
        return spec_or_agent
    from quantgym.agents.registry import make_agent

    return make_agent(spec_or_agent, task=task, **options)


def _is_llm(agent: Any) -> bool:
    return hasattr(agent, "engine") and hasattr(agent, "episode_usage")


def _job_label(env_id: str, extra: Any = None) -> str:
    return env_id if extra is None else f"{env_id} {extra}"


def run_eval(agent_spec: Any, plan: EvalPlan, out_dir: str | Path, *, concurrency: int = 1,
             agent_options: dict | None = None, console: Any = None, progress: Any = None,
             meta: dict | None = None, log: Callable[[str], None] | None = None) -> list[SectionResult]:
    """Run ``plan`` with the agent ``agent_spec`` (a spec string or agent object(s)) and write results.

    Parameters
    ----------
    agent_spec : ``openai:MODEL`` | ``replay:FILE`` | any :mod:`quantgym.agents.registry` spec, an agent
        object, or a dict task -> agent object.
    plan : :class:`EvalPlan`.
    out_dir : output folder (created).
    concurrency : worker threads (episodes in flight).
    agent_options : options for the factory (``base_url``, ``api_key``, ...). For ``openai:`` specs the
        transcript defaults to ``OUT/transcripts/<task>-<model>-<stamp>.jsonl``.
    console, progress : rich Console / Progress (optional).
    log : called with one progress line per episode started / finished and per failed LLM call (after
        its retries), e.g. ``print`` (None: silent). Besides, the progress task's description counts the
        LLM calls so far.

    Returns
    -------
    list of SectionResult (also written as ``summary.csv`` / ``results.json``).

    Raises
    ------
    LLMConfigError, ReplayMismatchError
        Configuration problems (wrong key, unknown model, an endpoint that cannot be reached before it
        ever answered, diverged replay): the run stops.
    ValueError
        An env id of no task, PortBench-QA, or an agent that does not exist for a task (classical
        baselines and ``sb3:`` agents exist for PortBench only).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tasks = list(dict.fromkeys(task_of(e) for e in plan.env_ids))
    if "portbench_qa" in tasks:
        raise ValueError("PortBench-QA-v0 is evaluated with `quantgym qa` (static questions), not `quantgym eval`")
    agents: dict[str, Any] = {}
    for task in tasks:
        opts = dict(agent_options or {})
        if isinstance(agent_spec, dict):
            agents[task] = agent_spec[task]
            continue
        if isinstance(agent_spec, str) and agent_spec.startswith("openai:"):
            stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            model = agent_spec.partition(":")[2]
            opts.setdefault("transcript", out_dir / "transcripts" /
                            f"{task}-{re.sub(r'[^A-Za-z0-9._-]+', '_', model)}-{stamp}.jsonl")
            opts.setdefault("header", {"eval": {**plan.to_dict(), "env_ids": [e for e in plan.env_ids
                                                                                if task_of(e) == task]}})
        if (task != "portbench" and isinstance(agent_spec, str)
                and agent_spec.partition(":")[0] not in ("openai", "replay")):
            raise ValueError(f"agent {agent_spec!r} cannot run {task}: only LLM agents (openai:MODEL, replay:FILE) "
                             "do; classical baselines and sb3 agents run on PortBench only (or: quantgym bench "
                             "--agents NAME,...)")
        agents[task] = _make(agent_spec, task, opts)
    from quantgym.agents.base import policy_name

    jobs: list[tuple[str, str, Callable[[], dict]]] = []
    rec_dir = out_dir / "quant_arena_records"
    for env_id in plan.env_ids:
        task = task_of(env_id)
        ag = agents[task]
        if task == "portbench":
            # a classical / sb3 policy may keep per-episode state: one instance per episode when we built it
            fresh = isinstance(agent_spec, str) and not _is_llm(ag)
            for p in plan.periods:
                jobs.append((task, _job_label(env_id, _period_label(parse_period(p))),
                             (lambda ag=ag, e=env_id, p=p, fresh=fresh: run_portbench(
                                 _make(agent_spec, "portbench", dict(agent_options or {})) if fresh else ag, e,
                                 parse_period(p), plan))))
        elif task == "quant_arena":
            jobs.append((task, _job_label(env_id), (lambda ag=ag, e=env_id: run_quant_arena(ag, e, plan, rec_dir))))
        else:
            for r in plan.rounds:
                jobs.append((task, _job_label(env_id, f"round {int(r)}"),
                             (lambda ag=ag, e=env_id, r=r: run_market_bench(ag, e, int(r), plan))))
    base_jobs: list[tuple[str, Any]] = []
    if plan.baseline and "portbench" in tasks and policy_name(agents["portbench"]) != "Equal-Weight":
        base_jobs = [(e, p) for e in plan.env_ids if task_of(e) == "portbench" for p in plan.periods]
    n_total = len(jobs) + len(base_jobs)
    tid = progress.add_task("eval", total=n_total) if progress is not None else None
    detach = _attach_progress(agents, progress, tid, log)
    if log is not None:
        names = ", ".join(dict.fromkeys(policy_name(a) for a in agents.values()))
        where = ", ".join(dict.fromkeys(a.engine.endpoint for a in agents.values() if _is_llm(a)
                                        and not hasattr(a.engine, "source")))
        log(f"eval: {len(jobs)} episode(s) of {names}" + (f" at {where}" if where else "")
            + (f" + {len(base_jobs)} Equal-Weight reference run(s)" if base_jobs else "") + f" -> {out_dir}")
    done = [0]
    done_lock = threading.Lock()

    def _finished(label: str, t_start: float, run: dict | None) -> None:
        with done_lock:
            done[0] += 1
            k = done[0]
        if log is not None:
            u = (run or {}).get("usage") or {}
            calls = f"{u.get('calls', 0)} LLM calls, {u.get('failures', 0)} failed, " if u else ""
            log(f"  [{k}/{n_total}] done {label}: {calls}{time.perf_counter() - t_start:.1f} s")
        if progress is not None:
            progress.advance(tid)

    def _run(label: str, fn: Callable[[], dict]) -> dict:
        if log is not None:
            log(f"  start {label}")
        t1 = time.perf_counter()
        run = fn()
        _finished(label, t1, run)
        return run

    results: list[Any] = [None] * len(jobs)
    try:
        with cf.ThreadPoolExecutor(max_workers=max(1, int(concurrency))) as pool:
            futs = {pool.submit(_run, label, fn): i for i, (_, label, fn) in enumerate(jobs)}
            try:
                for f in cf.as_completed(futs):
                    results[futs[f]] = f.result()
            except BaseException:
                for f in futs:
                    f.cancel()
                raise
    finally:
        detach()
    baselines: dict[tuple[str, str], Any] = {}
    if base_jobs:
        from quantgym.agents.base import evaluate
        from quantgym.agents.baselines import make_baseline

        for e, p in base_jobs:
            t1 = time.perf_counter()
            baselines[(e, _period_label(parse_period(p)))] = evaluate(e, make_baseline("equal_weight"),
                                                                       seed=plan.seed, period=parse_period(p))
            _finished(_job_label(e, _period_label(parse_period(p))) + " (Equal-Weight)", t1, None)
    sections = []
    by_task = {t: [r for (tt, _, _), r in zip(jobs, results) if tt == t] for t in tasks}
    if "portbench" in by_task:
        sections.append(_portbench_section(by_task["portbench"], baselines, agents["portbench"], out_dir, plan,
                                           console))
    if "quant_arena" in by_task:
        sections.append(_qa_section(by_task["quant_arena"], agents["quant_arena"], console))
    if "market_bench" in by_task:
        sections.append(_mb_section(by_task["market_bench"], agents["market_bench"], plan, console))
    usage = {t: a.usage() if hasattr(a, "usage") else None for t, a in agents.items()}
    for s in sections:
        s.extra["usage"] = usage.get(s.task)
        s.extra["agent_config"] = (agents[s.task].engine.config.to_dict()
                                   if hasattr(agents[s.task], "engine") else None)
    write_results(out_dir, sections, meta={**(meta or {}), "plan": plan.to_dict(), "concurrency": concurrency,
                                           "usage": usage, "elapsed_s": time.perf_counter() - t0})
    if isinstance(agent_spec, str):  # close only the agents made here (their transcripts)
        for a in agents.values():
            if hasattr(a, "close"):
                a.close()
    return sections


def _attach_progress(agents: dict[str, Any], progress: Any, tid: Any,
                     log: Callable[[str], None] | None) -> Callable[[], None]:
    """Count the LLM calls in the progress description; log a line per failed call (after its retries).

    Returns the function that detaches the listener again (agent objects may outlive the run).
    """
    counts = {"calls": 0, "failed": 0}
    lock = threading.Lock()

    def listener(rec: dict) -> None:
        if rec.get("adapted") or rec.get("error_kind") == "unsupported":
            return  # an endpoint adaptation (rung, parameter, re-rendered prompt), resent at once
        with lock:
            counts["calls"] += 1
            counts["failed"] += not rec.get("ok")
            c, f = counts["calls"], counts["failed"]
        if progress is not None and tid is not None:
            progress.update(tid, description=f"eval · {c} LLM call(s)" + (f", {f} failed" if f else ""))
        if log is not None and not rec.get("ok"):
            log(f"  LLM call failed ({rec.get('episode') or 'no episode'}): {rec.get('error')}")

    engines = [e for e in {id(a.engine): a.engine for a in agents.values() if _is_llm(a)}.values()
               if hasattr(e, "listeners")]
    for engine in engines:
        engine.listeners.append(listener)

    def detach() -> None:
        for engine in engines:
            if listener in engine.listeners:
                engine.listeners.remove(listener)

    return detach


def _fmt(x: Any, nd: int = 2) -> str:
    return "" if x is None else f"{x:.{nd}f}"


def _portbench_section(runs: list[dict], baselines: dict, agent: Any, out_dir: Path, plan: EvalPlan,
                       console: Any) -> SectionResult:
    from quantgym.envs.portbench.config import stress_gate
    from quantgym.envs.portbench.config import STRESS_PERIODS
    from quantgym.envs.portbench.profiles import PROFILES

    sec = SectionResult(task="portbench")
    table = None
    if console is not None:
        from rich.table import Table

        from quantgym.agents.base import policy_name

        how = ("stagewise S1→S2→S3, text protocol" if _is_llm(agent) else
               "direct allocation, no stage scores" if getattr(agent, "direct_allocation", False) else "policy")
        table = Table(title=f"PortBench — {policy_name(agent)} ({how})", title_justify="left")
        cols = ["profile", "period", "agent", "Sharpe", "Ret%", "MaxDD%", "Vol%", "CEPS", "S1", "S2", "S3",
                "S4", "S5", "refused", "unparse", "calls", "tokens", "warn", "gate"]
        if not _is_llm(agent):  # no text protocol, no LLM calls
            cols = [c for c in cols if c not in ("refused", "unparse", "calls", "tokens", "warn")]
            if getattr(agent, "direct_allocation", False):  # no stage scores either
                cols = [c for c in cols if c not in ("CEPS", "S1", "S2", "S3", "S4", "S5")]
        for col in cols:
            table.add_column(col, justify="left" if col in ("profile", "period", "agent") else "right")
    by_profile: dict[str, dict[str, float]] = {}
    for run in runs:
        r = run["result"]
        by_profile.setdefault(r.profile, {})[r.period] = r.metrics["max_drawdown"]
    for run in runs:
        r = run["result"]
        tol = PROFILES[r.profile].max_drawdown
        gate = (abs(r.metrics["max_drawdown"]) <= tol + 1e-12) if r.period in STRESS_PERIODS else (
            stress_gate(by_profile[r.profile], tol) if r.period == "normal_2024" else None)
        row = r.summary_row(gate=gate)
        sec.rows.append(row)
        base = baselines.get((r.env_id, r.period))
        d = r.to_dict()
        d.update(usage=run["usage"], episode=run["episode"], parse_stats=run["parse_stats"], llm=run.get("llm"),
                 transcript=agent.usage().get("transcript") if hasattr(agent, "usage") else None)
        sec.runs.append(d)
        if base is not None:
            sec.rows.append(base.summary_row(gate=None))
            sec.rows[-1].profile = r.profile
            bd = base.to_dict()
            bd["note"] = "Equal-Weight reference for the plot (direct allocation, no stage scores)"
            sec.runs.append(bd)
        if table is not None:
            ss = r.stage_scores or {}
            u = run["usage"] or {}
            m = r.metrics
            cells = {"profile": r.profile, "period": r.period, "agent": r.agent, "Sharpe": _fmt(m["sharpe"], 3),
                     "Ret%": _fmt(m["ret_pct"]), "MaxDD%": _fmt(m["maxdd_pct"]), "Vol%": _fmt(m["vol_pct"]),
                     "CEPS": _fmt(r.ceps, 3), **{s: _fmt(ss.get(s), 3) for s in ("S1", "S2", "S3", "S4", "S5")},
                     "refused": str(m.get("refused_steps", "")),
                     "unparse": str(sum(v.get("unparseable", 0) for v in run["parse_stats"].values())),
                     "calls": str(u.get("calls", "")), "tokens": str(u.get("total_tokens", "")),
                     "warn": str(u.get("warnings", 0) or ""),
                     "gate": "" if gate is None else ("✓" if gate else "✗")}
            table.add_row(*[cells[c] for c in cols])
            if base is not None:
                bm = base.metrics
                bcells = {"agent": base.agent, "Sharpe": _fmt(bm["sharpe"], 3), "Ret%": _fmt(bm["ret_pct"]),
                          "MaxDD%": _fmt(bm["maxdd_pct"]), "Vol%": _fmt(bm["vol_pct"])}
                table.add_row(*[bcells.get(c, "") for c in cols])
        if plan.plots:
            from quantgym.envs.portbench.plots import plot_nav

            curves = [r] + ([base] if base is not None else [])
            safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{r.agent}_{r.profile}_{r.period}")
            path = plot_nav(curves, f"PortBench {r.period} — {r.profile}: {r.agent}", out_dir / f"portbench_nav_{safe}.png",
                            tol)
            sec.extra.setdefault("plots", []).append(str(path))
    if console is not None:
        console.print(table)
        _print_warnings(console, runs)
    return sec


def _print_warnings(console: Any, runs: list[dict]) -> None:
    """One line per distinct LLM warning of the runs (a truncated prompt is never silent)."""
    seen: dict[str, int] = {}
    for run in runs:
        for w in (run.get("llm") or {}).get("warnings") or []:
            seen[w] = seen.get(w, 0) + 1
    for w, n in seen.items():
        console.print(f"warning ({n} episode(s)): {w}", markup=False, highlight=False)


def _qa_section(runs: list[dict], agent: Any, console: Any) -> SectionResult:
    sec = SectionResult(task="quant_arena")
    table = None
    if console is not None:
        from rich.table import Table

        table = Table(title=f"Quant-Arena — {agent.name}", title_justify="left")
        for col in ("env", "candidates", "frozen", "S_in", "S_out", "S", "sealed ARR%", "Sharpe", "calls", "tokens"):
            table.add_column(col, justify="left" if col == "env" else "right")
    for run in runs:
        fin = run["final"] or {}
        m = fin.get("sealed") or {}
        sec.rows.append(SummaryRow(
            task="quant_arena", agent=agent.name, profile=None, period="sealed",
            sharpe=m.get("sharpe"), ret_pct=None if m.get("total_return") is None else 100 * m["total_return"],
            maxdd_pct=None if m.get("max_drawdown") is None else 100 * m["max_drawdown"],
            vol_pct=None if m.get("volatility") is None else 100 * m["volatility"]))
        sec.runs.append({"task": "quant_arena", "agent": agent.name, **run,
                         "transcript": agent.usage().get("transcript")})
        if table is not None:
            u = run["usage"] or {}
            table.add_row(run["env_id"], str(len(run["feedback"]) + (1 if fin.get("frozen_candidate") else 0)),
                          str(fin.get("frozen_candidate")), _fmt(fin.get("S_in")), _fmt(fin.get("S_out")),
                          _fmt(fin.get("S")), _fmt(None if m.get("arr") is None else 100 * m["arr"]),
                          _fmt(m.get("sharpe")), str(u.get("calls", "")), str(u.get("total_tokens", "")))
    if console is not None:
        console.print(table)
        _print_warnings(console, runs)
    return sec


def _mb_section(runs: list[dict], agent: Any, plan: EvalPlan, console: Any) -> SectionResult:
    from quantgym.envs.market_bench.bench import records_to_attempts
    from quantgym.envs.market_bench.config import TASK_VERSION, MarketBenchScoringConfig as ScoringConfig
    from quantgym.envs.market_bench.scoring import fmt, score_table

    records = [r for run in runs for r in run["records"]]
    cfg = ScoringConfig(attempts=plan.attempts) if "attempts" in ScoringConfig.__dataclass_fields__ else ScoringConfig()
    scores = score_table(records_to_attempts(records), cfg)
    sec = SectionResult(task="market_bench", rows=[SummaryRow(task="market_bench", agent=agent.name,
                                                              period=TASK_VERSION)],
                        runs=[{**run, "agent": agent.name, "transcript": agent.usage().get("transcript")}
                              for run in runs],
                        extra={"scores": scores.to_dict(orient="records"), "task_version": TASK_VERSION,
                               "feedback": plan.feedback, "attempts": plan.attempts})
    if console is not None:
        from rich.table import Table

        k = plan.attempts
        t = Table(title=f"Market-Bench {TASK_VERSION} — {agent.name} ({'repair' if plan.feedback else 'independent'} "
                        f"attempts, K={k})", title_justify="left")
        for col in ("strategy", f"p@{k}", "p@1", "mean MAE", "att."):
            t.add_column(col, justify="left" if col == "strategy" else "right")
        for _, row in scores.iterrows():
            t.add_row(str(row["strategy"]), fmt(row.get(f"pass@{k}")), fmt(row.get("pass@1")),
                      fmt(row.get("mean_mae_solved")), fmt(row.get("avg_attempt")))
        console.print(t)
        _print_warnings(console, runs)
    return sec


__all__ = ["llm_summary", "EvalPlan", "run_eval", "run_portbench", "run_quant_arena", "run_market_bench", "task_of", "parse_period"]
