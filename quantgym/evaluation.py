"""The evaluation loop shared by every task: one episode (:func:`evaluate`) and a plan of episodes
(:func:`run_eval`, the engine of ``quantgym eval``).

A policy is anything with ``act(observation, info) -> action`` (and optionally ``reset(env)`` and a
``name``); :func:`evaluate` runs one episode of any registered env and returns an :class:`EvalResult` in
the results schema of :mod:`quantgym.results`. Every env implements :class:`Evaluable`
(``episode_result()``), so the loop needs no task knowledge. :func:`run_eval` asks each task's eval
adapter (:class:`EvalAdapter`, the ``eval`` entry of its record in :mod:`quantgym.tasks`) for the
episodes of a plan and for its result section.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as _dt
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

import gymnasium as gym
import pandas as pd

from quantgym.results import SectionResult, SummaryRow, combined_status, episode_status, write_results


@runtime_checkable
class Policy(Protocol):
    """A policy: ``act`` maps the observation (and the last ``info``) to an action.

    Attributes
    ----------
    name : label used in result tables.
    env_kwargs : optional dict of env kwargs the policy needs (e.g. ``{"stagewise": True}`` for LLM
        agents, ``{"scoring": False}`` for an allocator that bypasses a task's staged scoring); merged
        under the caller's kwargs by :func:`evaluate`.
    wrap_env : optional ``wrap_env(env) -> env`` applied after ``gym.make`` (e.g. a text-action or
        Box-action wrapper).
    """

    name: str

    def act(self, observation: Any, info: dict) -> Any: ...


@runtime_checkable
class Evaluable(Protocol):
    """What every quantgym env (``env.unwrapped``) implements for :func:`evaluate`.

    ``task_name`` is the env's task (:mod:`quantgym.tasks`); ``episode_result()``, called after the last
    step, returns a dict with ``metrics`` (terminal metrics; PortBench also ``stage_means``) and optionally
    ``stage_scores``, ``ceps``, ``nav`` (pandas Series of NAV by date), ``profile``, ``period`` and
    ``records`` (list of dicts).
    """

    task_name: str

    def episode_result(self) -> dict[str, Any]: ...


@dataclass
class EvalResult:
    """One evaluated episode.

    Attributes
    ----------
    task, agent, env_id, profile, period : identification.
    metrics : terminal metrics (§7: total_return, sharpe, max_drawdown, volatility, ..., ceps, pas).
    stage_scores : per-stage mean scores (None for direct-allocation baselines).
    ceps : run CEPS (mean of per-step CEPS) or None.
    nav : NAV curve (currency units) indexed by date (empty for tasks without one).
    steps : per-step ``info`` records (orders dropped).
    config : env kwargs and config used.
    records : the env's own episode records (Market-Bench attempts, ...; empty when it has none).
    agent_key : the name a user passes back on the command line (a baseline's key, ``cov_risk_parity``;
        :func:`policy_key`), written as summary.csv's ``agent`` (what a user types back); ``agent`` is the display name.
    status : ``ok`` | ``partial`` | ``failed``: whether the policy's LLM calls were answered
        (:func:`quantgym.results.episode_status`; ``ok`` for a policy that makes none).
    """

    task: str
    agent: str
    env_id: str
    profile: str | None
    period: str | None
    metrics: dict[str, Any]
    stage_scores: dict[str, float] | None
    ceps: float | None
    nav: pd.Series
    steps: list[dict] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    records: list[dict] = field(default_factory=list)
    agent_key: str | None = None
    status: str = "ok"

    def summary_row(self, gate: bool | None = None) -> SummaryRow:
        m = self.metrics
        return SummaryRow(
            task=self.task, agent=self.agent_key or self.agent, profile=self.profile, period=self.period,
            sharpe=m.get("sharpe"), ret_pct=m.get("ret_pct"), maxdd_pct=m.get("maxdd_pct"), vol_pct=m.get("vol_pct"),
            ceps=self.ceps, gate=gate, status=self.status,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task, "agent": self.agent, "agent_key": self.agent_key or self.agent,
            "status": self.status, "env_id": self.env_id, "profile": self.profile,
            "period": self.period, "metrics": self.metrics, "stage_scores": self.stage_scores, "ceps": self.ceps,
            "nav": {"dates": [d.strftime("%Y-%m-%d") for d in self.nav.index], "values": self.nav.to_numpy()},
            "steps": self.steps, "config": self.config,
        }


def policy_name(policy: Any) -> str:
    """A policy's display name: its ``name``, else its class name."""
    return getattr(policy, "name", None) or type(policy).__name__


def policy_key(policy: Any) -> str:
    """The name a user passes back on the command line: a policy's ``key`` (a PortBench baseline's
    ``cov_risk_parity``), else :func:`policy_name` (an LLM agent's ``openai:MODEL``)."""
    key = getattr(policy, "key", None)
    return key if isinstance(key, str) and key else policy_name(policy)


def policy_status(policy: Any) -> str:
    """The ``status`` of the policy's current episode: from its LLM usage (``episode_usage()``), ``ok``
    for a policy that makes no LLM call (:func:`quantgym.results.episode_status`)."""
    fn = getattr(policy, "episode_usage", None)
    return episode_status(fn()) if callable(fn) else "ok"


def evaluate(env_or_id: str | gym.Env, policy: Any, *, seed: int | None = 0, **env_kwargs: Any) -> EvalResult:
    """Run one episode of ``policy`` and collect the results.

    Parameters
    ----------
    env_or_id : a registered env id (``"PortBench-Balanced-v0"``) or an env instance.
    policy : a :class:`Policy` (``act(obs, info)``; optional ``reset(env)``; optional
        ``step_record() -> dict`` whose keys are merged into the step's record after each step), or a
        plain callable ``f(obs, info) -> action``.
    seed : passed to ``env.reset``.
    **env_kwargs : passed to ``gym.make`` when ``env_or_id`` is an id (e.g. ``period="covid_2020"``).

    Returns
    -------
    EvalResult

    Raises
    ------
    ValueError
        For env kwargs the env rejects (unknown period, profile, ...).
    """
    if isinstance(env_or_id, str):
        env_kwargs = {**dict(getattr(policy, "env_kwargs", None) or {}), **env_kwargs}
        env = gym.make(env_or_id, **env_kwargs)
        if callable(getattr(policy, "wrap_env", None)):
            env = policy.wrap_env(env)
        env_id = env_or_id
    else:
        env = env_or_id
        env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    act = policy.act if hasattr(policy, "act") else policy
    obs, info = env.reset(seed=seed)
    if hasattr(policy, "reset"):
        policy.reset(env)
    steps: list[dict] = []
    terminated = truncated = False
    while not (terminated or truncated):
        action = act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        rec = {k: v for k, v in info.items() if k not in ("orders", "episode_metrics")}
        rec["reward"] = float(reward)
        note = policy.step_record() if callable(getattr(policy, "step_record", None)) else None
        if note:  # what the policy itself did at this step (an LLM agent: prompt style sent, cap, rung)
            rec.update(note)
        steps.append(rec)
    base = env.unwrapped
    if not isinstance(base, Evaluable):
        env.close()
        raise TypeError(f"{type(base).__name__} does not implement episode_result() / task_name "
                        "(quantgym.evaluation.Evaluable), so evaluate() cannot summarise its episode")
    ep = base.episode_result()
    metrics = ep["metrics"]
    nav = ep.get("nav")
    result = EvalResult(
        task=base.task_name,
        agent=policy_name(policy),
        agent_key=policy_key(policy),
        env_id=env_id,
        profile=ep.get("profile"),
        period=ep.get("period"),
        metrics={k: v for k, v in metrics.items() if k != "stage_means"},
        stage_scores=ep.get("stage_scores", metrics.get("stage_means")),
        ceps=ep.get("ceps", metrics.get("ceps")),
        nav=nav if nav is not None else pd.Series(dtype=float),
        steps=steps,
        config={"env_kwargs": {k: v for k, v in env_kwargs.items() if k != "data"},
                "config": base.config.to_dict() if hasattr(getattr(base, "config", None), "to_dict") else {}},
        records=list(ep.get("records") or []),
        status=policy_status(policy),
    )
    env.close()
    return result


# ------------------------------------------------------------------------------------------ plans of episodes
_PERIOD_RE = re.compile(r"^(\d{4}-\d{2}-\d{2}):(\d{4}-\d{2}-\d{2})(?::(daily|weekly|monthly))?$")


#: summary.csv's numeric columns summarised over repeats (with the tasks' numeric extra columns)
_REPEAT_METRICS = ("sharpe", "ret_pct", "maxdd_pct", "vol_pct", "ceps")


def repeats_section(repeats: list[list[SectionResult]], level: float = 0.95, console: Any = None) -> SectionResult:
    """Summarise ``R`` repeats of one evaluation (``quantgym eval --repeats R``).

    Parameters
    ----------
    repeats : the sections :func:`run_eval` returned, one list per repeat.
    level : confidence level of the Student-t interval over the repeats.
    console : a rich Console to print the summary table on (None: silent).

    Returns
    -------
    SectionResult
        Task ``"repeats"``: one summary row per (task, agent, profile, period) with the mean of every
        numeric metric over the repeats, and extra columns ``<metric>_lo`` / ``<metric>_hi`` (the
        interval), ``n_repeats`` and ``gate_rate`` (share of repeats whose gate passed); ``runs`` hold
        every metric's :func:`~quantgym.stats.repeats.repeat_interval` and the per-repeat values.
    """
    from quantgym.stats.repeats import repeat_interval

    groups: dict[tuple, dict[str, list]] = {}
    for k, sections in enumerate(repeats):
        for sec in sections:
            for row in sec.rows:
                key = (row.task, row.agent, row.profile, row.period)
                g = groups.setdefault(key, {"_gate": [], "_repeat": [], "_status": []})
                g["_status"].append(row.status)
                if row.status == "failed":  # not a result: left out of the mean and its interval
                    continue
                g["_repeat"].append(k + 1)
                g["_gate"].append(row.gate)
                vals = {m: getattr(row, m) for m in _REPEAT_METRICS}
                vals.update({m: v for m, v in row.extra.items()
                             if isinstance(v, (int, float)) and not isinstance(v, bool)})
                for m, v in vals.items():
                    g.setdefault(m, []).append(v)
    out = SectionResult(task="repeats")
    for (task, agent, profile, period), g in groups.items():
        stats = {m: repeat_interval(v, level) for m, v in g.items() if not m.startswith("_")}
        gates = [x for x in g["_gate"] if x is not None]
        extra: dict[str, Any] = {"n_repeats": len(g["_repeat"]),
                                 "gate_rate": (sum(gates) / len(gates)) if gates else None}
        for m, st in stats.items():
            if m not in _REPEAT_METRICS:
                extra[m] = st["mean"]
            extra[f"{m}_lo"], extra[f"{m}_hi"] = st["lo"], st["hi"]
        status = combined_status(g["_status"])
        out.rows.append(SummaryRow(task=task, agent=agent, profile=profile, period=period, status=status,
                                   **{m: stats[m]["mean"] for m in _REPEAT_METRICS if m in stats}, extra=extra))
        out.runs.append({"task": task, "agent": agent, "profile": profile, "period": period, "level": level,
                         "status": status, "statuses": g["_status"],
                         "repeats": g["_repeat"], "gate": g["_gate"], "metrics": stats,
                         "values": {m: v for m, v in g.items() if not m.startswith("_")}})
    if console is not None:
        from quantgym.stats.repeats import SHOWN_METRICS, format_mean_pm as cell
        from quantgym.tables import Col, print_table

        shown = [(m, h, nd) for m, h, nd in SHOWN_METRICS
                 if any((r["metrics"].get(m) or {}).get("mean") is not None for r in out.runs)]
        one_task = len({r["task"] for r in out.runs}) == 1  # then the task is in the title, not a column
        cols = [*([] if one_task else [Col("task", "left")]), Col("agent", "left"), Col("period", "left"),
                *[Col(h) for _, h, _ in shown], Col("n")]
        rows = [[*([] if one_task else [r["task"]]), r["agent"], "/".join(x for x in (r["profile"], r["period"]) if x),
                 *[cell(r["metrics"].get(m), nd) for m, _, nd in shown], str(len(r["repeats"]))] for r in out.runs]
        what = f"{out.runs[0]['task']}: " if one_task and out.runs else ""
        from quantgym.tasks import sharpe_notes

        print_table(console, f"{what}mean ± half-width of the Student-t {level:.0%} interval over {len(repeats)} "
                    "repeats", cols, rows, keys=2 if one_task else 3,
                    caption=sharpe_notes(r["task"] for r in out.runs) or None)
    return out


def check_env_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    """Raise ``ValueError`` (one line, naming the valid keywords) when ``env_id``'s constructor takes
    none of some keys of ``kwargs``; an env whose constructor takes ``**kwargs`` accepts any key.

    Checked before a run starts, so a typo is an error at once, not a traceback after the first env
    was built. Values are checked by the env itself.
    """
    import inspect

    from gymnasium.envs.registration import load_env_creator

    if not kwargs:
        return
    spec = gym.spec(env_id)
    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    try:
        params = inspect.signature(creator).parameters
    except (TypeError, ValueError):  # no signature to check against (a C callable): the env decides
        return
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    names = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self"]
    bad = [k for k in kwargs if k not in names and k not in (spec.kwargs or {})]
    if bad:
        raise ValueError(f"{env_id} takes no keyword {', '.join(map(repr, bad))}; its keywords are: "
                         f"{', '.join(names)}")


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
    options : the tasks' own options by key (what their records' ``eval_options`` declare and their eval
        adapters read, each with its own default when absent; the task docs list them).
    seed : env seed.
    env_kwargs : extra env kwargs (e.g. Quant-Arena windows).
    plots : write PNGs.

    ``from_dict`` also reads plans recorded before the options were grouped (their task options were
    top-level keys), so older transcripts replay.
    """

    env_ids: list[str]
    options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    plots: bool = True

    def get(self, key: str, default: Any = None) -> Any:
        """``options[key]``, or ``default`` when the plan does not set it."""
        value = self.options.get(key)
        return default if value is None else value

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["env_kwargs"] = {k: v for k, v in self.env_kwargs.items() if isinstance(v, (str, int, float, bool, type(None)))}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalPlan":
        fields = cls.__dataclass_fields__
        kw = {k: v for k, v in d.items() if k in fields}
        legacy = {k: v for k, v in d.items() if k not in fields}  # task options recorded as top-level keys
        kw["options"] = {**legacy, **dict(kw.get("options") or {})}
        return cls(**kw)


def period_label(p: Any) -> str:
    if isinstance(p, dict):
        return f"{p['start']}_{p['end']}_{p.get('freq', 'monthly')}"
    return str(p)



class EvalContext:
    """What :func:`run_eval` gives a task's :class:`EvalAdapter`.

    Attributes
    ----------
    out_dir : the run's output folder.
    console : rich Console or None (no tables printed).
    new_agent : ``new_agent()`` -> the agent for one more episode: a fresh instance when the run built a
        classical / sb3 policy from a spec (it may keep per-episode state), else the shared agent.
    references : key -> result of the adapter's reference jobs (filled before ``section`` is called).
    """

    def __init__(self, out_dir: Path, console: Any, new_agent: Callable[[], Any]):
        self.out_dir = out_dir
        self.console = console
        self.new_agent = new_agent
        self.references: dict[Any, Any] = {}


class EvalAdapter(Protocol):
    """A task's part of ``quantgym eval`` (the ``eval`` entry of its :class:`quantgym.tasks.Task`).

    ``jobs(env_id, agent, plan, ctx)`` returns ``[(label, fn), ...]``: the episodes of ``env_id`` in
    ``plan``; each ``fn()`` runs one and returns a JSON-able run dict (it may carry ``usage`` for the
    progress line). ``section(runs, agent, plan, ctx)`` turns the runs (in job order) into the task's
    :class:`~quantgym.results.SectionResult` and prints its table to ``ctx.console``. Optionally
    ``reference_jobs(env_ids, agent, plan)`` returns ``[(label, key, fn), ...]`` run after the agent's
    episodes (PortBench: Equal-Weight beside the agent), results in ``ctx.references[key]``, and
    ``reference_name`` labels them in the progress lines.
    """

    def jobs(self, env_id: str, agent: Any, plan: EvalPlan, ctx: EvalContext) -> list[tuple[str, Callable[[], dict]]]: ...

    def section(self, runs: list[dict], agent: Any, plan: EvalPlan, ctx: EvalContext) -> SectionResult: ...


#: the legend of a table whose rows carry a non-ok ``status`` (:func:`status_agent`)
STATUS_NOTE = ("(partial): some LLM calls failed after their retries and the agent fell back at those steps; "
               "(failed): no LLM call was answered: not a result, its numbers are the fallback's")


def status_agent(agent: str, status: str | None) -> str:
    """A table's agent cell: the name, with ``(partial)`` / ``(failed)`` after it when the run was not ``ok``."""
    return agent if status in (None, "ok") else f"{agent} ({status})"


def fmt(x: Any, nd: int = 2) -> str:
    """A table cell: ``""`` for None, else fixed-point with ``nd`` decimals."""
    return "" if x is None else f"{x:.{nd}f}"


def print_warnings(console: Any, runs: list[dict]) -> None:
    """One line per distinct LLM warning of the runs (a truncated prompt is never silent)."""
    seen: dict[str, int] = {}
    for run in runs:
        for w in (run.get("llm") or {}).get("warnings") or []:
            seen[w] = seen.get(w, 0) + 1
    for w, n in seen.items():
        console.print(f"warning ({n} episode(s)): {w}", markup=False, highlight=False)


def llm_summary(agent: Any, label: str | None) -> dict[str, Any] | None:
    """The agent's per-episode record of its LLM calls (``agent.llm_summary(label)``), or None for a
    policy that makes none."""
    fn = getattr(agent, "llm_summary", None)
    return fn(label) if callable(fn) and label is not None else None


# ------------------------------------------------------------------------------------------ driver
def _make(spec_or_agent: Any, task: str, options: dict) -> Any:
    if not isinstance(spec_or_agent, str):
        return spec_or_agent
    from quantgym.agents.registry import make_agent

    return make_agent(spec_or_agent, task=task, **options)


def is_llm_agent(agent: Any) -> bool:
    """True for an LLM agent (it has a chat engine and per-episode usage)."""
    return hasattr(agent, "engine") and hasattr(agent, "episode_usage")


def job_label(env_id: str, extra: Any = None) -> str:
    """The progress label of an episode: ``env_id`` or ``"env_id extra"``."""
    return env_id if extra is None else f"{env_id} {extra}"


def validate_plan(plan: EvalPlan) -> None:
    """Each task's own checks of ``plan`` (its eval adapter's ``validate(plan)``: periods, rounds...), before
    anything runs or is written.

    Raises
    ------
    ValueError
        One line: an env id of no task, or what a task's check refuses.
    """
    from quantgym.tasks import load_ref, task_of

    seen = set()
    for e in plan.env_ids:
        record = task_of(e)
        if record.name in seen or record.eval is None:
            continue
        seen.add(record.name)
        check = getattr(load_ref(record.eval), "validate", None)
        if check is not None:
            check(plan)


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
        An env id of no task or of a task without an eval adapter (its record's ``eval_refusal``), or an
        agent that does not exist for a task (classical agents only for tasks with ``baselines`` or
        ``schemes``).
    """
    from quantgym.tasks import load_ref, task_of, tasks as _registered

    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    records = {e: task_of(e) for e in plan.env_ids}
    order = [t.name for t in _registered()]
    tasks = sorted(dict.fromkeys(r.name for r in records.values()), key=order.index)
    by_name = {r.name: r for r in records.values()}
    for task in tasks:
        if by_name[task].eval is None:
            raise ValueError(by_name[task].eval_refusal or f"task {task!r} has no `quantgym eval` adapter")
    adapters = {task: load_ref(by_name[task].eval) for task in tasks}
    validate_plan(plan)
    out_dir.mkdir(parents=True, exist_ok=True)
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
                                                                                if records[e].name == task]}})
        if (not by_name[task].classical and isinstance(agent_spec, str)
                and agent_spec.partition(":")[0] not in ("openai", "replay")):
            classical = ", ".join(t.title for t in _registered() if t.classical)
            raise ValueError(f"agent {agent_spec!r} cannot run {task}: only LLM agents (openai:MODEL, replay:FILE) "
                             f"do; classical baselines and sb3 agents run on {classical} only (or: quantgym bench "
                             "--agents NAME,...)")
        agents[task] = _make(agent_spec, task, opts)

    def _new_agent(task: str) -> Callable[[], Any]:
        # a classical / sb3 policy may keep per-episode state: one instance per episode when we built it
        if isinstance(agent_spec, str) and not is_llm_agent(agents[task]):
            return lambda: _make(agent_spec, task, dict(agent_options or {}))
        return lambda: agents[task]

    ctxs = {task: EvalContext(out_dir, console, _new_agent(task)) for task in tasks}
    jobs: list[tuple[str, str, Callable[[], dict]]] = []
    for env_id in plan.env_ids:
        task = records[env_id].name
        jobs += [(task, label, fn) for label, fn in adapters[task].jobs(env_id, agents[task], plan, ctxs[task])]
    ref_jobs: list[tuple[str, str, Any, Callable[[], Any]]] = []
    for task in tasks:
        make_refs = getattr(adapters[task], "reference_jobs", None)
        if make_refs is not None:
            env_ids = [e for e in plan.env_ids if records[e].name == task]
            ref_jobs += [(task, label, key, fn) for label, key, fn in make_refs(env_ids, agents[task], plan)]
    ref_names = ", ".join(dict.fromkeys(getattr(adapters[t], "reference_name", "reference") for t, *_ in ref_jobs))
    n_total = len(jobs) + len(ref_jobs)
    tid = progress.add_task("eval", total=n_total) if progress is not None else None
    detach = _attach_progress(agents, progress, tid, log)
    if log is not None:
        names = ", ".join(dict.fromkeys(policy_name(a) for a in agents.values()))
        where = ", ".join(dict.fromkeys(a.engine.endpoint for a in agents.values() if is_llm_agent(a)
                                        and not hasattr(a.engine, "source")))
        log(f"eval: {len(jobs)} episode(s) of {names}" + (f" at {where}" if where else "")
            + (f" + {len(ref_jobs)} {ref_names} reference run(s)" if ref_jobs else "") + f" -> {out_dir}")
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
        # an endpoint that answered no call of the run gives no result (whatever the run's length)
        for a in agents.values():
            silent = a.engine.never_answered() if is_llm_agent(a) and hasattr(a.engine, "never_answered") else None
            if silent is not None:
                raise silent
    except Exception as exc:
        stop = _record_stop(exc, agents, isinstance(agent_spec, str), out_dir, jobs, results,
                            {**(meta or {}), "plan": plan.to_dict(), "concurrency": concurrency,
                             "elapsed_s": time.perf_counter() - t0})
        if stop is exc:
            raise
        raise stop from None
    finally:
        detach()
    for task, label, key, fn in ref_jobs:
        t1 = time.perf_counter()
        ctxs[task].references[key] = fn()
        _finished(f"{label} ({getattr(adapters[task], 'reference_name', 'reference')})", t1, None)
    sections = []
    for task in tasks:
        runs = [r for (tt, _, _), r in zip(jobs, results) if tt == task]
        sections.append(adapters[task].section(runs, agents[task], plan, ctxs[task]))
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


def release_stopped_agents(agents: Any, own: bool = True) -> tuple[int, list[Path]]:
    """After a run stopped by its endpoint: close the LLM agents of ``agents`` (only when ``own``: the run
    made them) and remove the transcripts of those whose engine answered no call in the run (they hold
    nothing to resume from). Returns (answered calls, the transcripts kept)."""
    engines = list({id(a.engine): a.engine for a in agents if is_llm_agent(a)}.values())
    if own:
        for a in agents:
            if is_llm_agent(a) and hasattr(a, "close"):
                a.close()
    answered, kept = 0, []
    for e in engines:
        n = sum(int(st.get("answered") or 0) for st in e.episode_stats.values())
        path = getattr(e, "transcript_path", None)
        answered += n
        if path is not None and not n and own:
            Path(path).unlink(missing_ok=True)
        elif path is not None:
            kept.append(Path(path))
    return answered, kept


def _record_stop(exc: Exception, agents: dict[str, Any], own: bool, out_dir: Path,
                 jobs: list[tuple[str, str, Callable[[], dict]]], results: list[Any], meta: dict) -> Exception:
    """What a run stopped by its endpoint (an ``LLMConfigError`` after it started) leaves behind.

    No call of the run answered: the transcripts it wrote (they hold no answer) are removed, so the
    command's folder is removed too when nothing else is in it; ``exc`` is returned unchanged. Else the
    run is marked failed (``summary.csv``: one row per task with ``status`` ``failed``; ``results.json``:
    the error, the episodes that finished, the transcripts) and the returned error's one line adds where
    it is and which transcripts resume it (``--cache-from``). Any other exception is returned unchanged.
    """
    from quantgym.agents.llm.client import LLMConfigError

    llm = {t: a for t, a in agents.items() if is_llm_agent(a)}
    if not isinstance(exc, LLMConfigError) or not llm:
        return exc
    answered, paths = release_stopped_agents(llm.values(), own)
    if not answered:
        return exc
    finished = [label for (_, label, _), r in zip(jobs, results) if r is not None]
    sections = [SectionResult(task=t, rows=[SummaryRow(task=t, agent=policy_key(a), status="failed")],
                              extra={"status": "failed", "error": str(exc), "usage": a.usage(),
                                     "episodes_finished": [lb for (tt, lb, _), r in zip(jobs, results)
                                                           if tt == t and r is not None]})
                for t, a in llm.items()]
    write_results(out_dir, sections, meta={**meta, "status": "failed", "error": str(exc),
                                           "transcripts": [str(p) for p in paths]})
    resume = " ".join(f"--cache-from {p}" for p in paths)
    return LLMConfigError(f"{exc}; stopped after {len(finished)} of {len(jobs)} episode(s): marked failed in "
                          f"{out_dir / 'summary.csv'}; to resume, rerun the same command with {resume}")


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

    engines = [e for e in {id(a.engine): a.engine for a in agents.values() if is_llm_agent(a)}.values()
               if hasattr(e, "listeners")]
    for engine in engines:
        engine.listeners.append(listener)

    def detach() -> None:
        for engine in engines:
            if listener in engine.listeners:
                engine.listeners.remove(listener)

    return detach


