"""Plans of episodes: :class:`EvalPlan` and :func:`run_eval`, the engine of ``quantgym eval``.

:func:`run_eval` asks each task's eval adapter (:class:`EvalAdapter`, the ``eval`` entry of its record in
:mod:`quantgym.tasks`) for the episodes of a plan, runs them (each through
:func:`quantgym.evaluation.evaluate`), and asks the adapter for its result section.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Protocol

import gymnasium as gym

from quantgym.costs import DEFAULT_CAPITAL
from quantgym.evaluation import is_llm_agent, policy_key, policy_name
from quantgym.results import SectionResult, SummaryRow, write_results


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
    capital : the notional the policy manages, in USD (``--capital``): the P&L net of the inference cost in
        the results is on it (:mod:`quantgym.costs`).
    blind_both : run every episode named and blind (``quantgym eval --blind both``; the two views of
        :func:`quantgym.memorization.views`, same agent and seeds) and report the memorization gap.
    validated : set by :func:`validate_plan` on the plan it returns: the tasks checked ``options`` and
        hold them resolved (PortBench's periods as ``Period`` objects); not recorded.

    ``from_dict`` also reads plans recorded before the options were grouped (their task options were
    top-level keys), so older transcripts replay.
    """

    env_ids: list[str]
    options: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    plots: bool = True
    capital: float = DEFAULT_CAPITAL
    blind_both: bool = False
    validated: bool = field(default=False, repr=False, compare=False)

    def get(self, key: str, default: Any = None) -> Any:
        """``options[key]``, or ``default`` when the plan does not set it."""
        value = self.options.get(key)
        return default if value is None else value

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)  # resolved options as their fields (a PortBench Period: name, start, end, freq)
        del d["validated"]
        d["env_kwargs"] = {k: v for k, v in self.env_kwargs.items() if _plain(v)}
        return d

    def agent_label(self, name: str) -> str:
        """``name`` with `` (blind)`` when the envs run blind (``quantgym eval --blind``, docs/blind.md): the
        summary.csv agent label and the tables say which view the agent had."""
        return f"{name} (blind)" if self.env_kwargs.get("blind") else name

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalPlan":
        fields = cls.__dataclass_fields__
        kw = {k: v for k, v in d.items() if k in fields}
        legacy = {k: v for k, v in d.items() if k not in fields}  # task options recorded as top-level keys
        kw["options"] = {**legacy, **dict(kw.get("options") or {})}
        return cls(**kw)



def _plain(v: Any) -> bool:
    """A JSON value of scalars, lists and string-keyed dicts (a ``tool_config``), kept in the recorded plan; a
    user's data object or cost model is not (a replay passes it again)."""
    if isinstance(v, (str, int, float, bool, type(None))):
        return True
    if isinstance(v, (list, tuple)):
        return all(_plain(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _plain(x) for k, x in v.items())
    return False


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
    ``reference_name`` labels them in the progress lines. Optionally ``validate(plan)`` refuses bad options
    (``ValueError``, one line) and returns the options it resolved (PortBench: its periods as ``Period``
    objects), which :func:`validate_plan` puts into the plan the jobs get. Optionally ``gap_series(run)``
    (a :class:`quantgym.stats.gap.GapSeries`: the run's daily returns and per-date scores) and
    ``gap_metrics`` (the headline summary columns) give the memorization gap of ``--blind both``
    (:mod:`quantgym.memorization`).
    """

    def jobs(self, env_id: str, agent: Any, plan: EvalPlan, ctx: EvalContext) -> list[tuple[str, Callable[[], dict]]]: ...

    def section(self, runs: list[dict], agent: Any, plan: EvalPlan, ctx: EvalContext) -> SectionResult: ...



# ------------------------------------------------------------------------------------------ driver
def plan_tasks(plan: EvalPlan) -> list[str]:
    """The tasks of ``plan``'s env ids, in the registry's order.

    Raises
    ------
    ValueError
        An env id of no task, or a task without an eval adapter (its record's ``eval_refusal``).
    """
    from quantgym.tasks import task_of, tasks as _registered

    records = {e: task_of(e) for e in plan.env_ids}
    order = [t.name for t in _registered()]
    by_name = {r.name: r for r in records.values()}
    for name, record in by_name.items():
        if record.eval is None:
            raise ValueError(record.eval_refusal or f"task {name!r} has no `quantgym eval` adapter")
    return sorted(by_name, key=order.index)



def validate_plan(plan: EvalPlan) -> EvalPlan:
    """Each task's own checks of ``plan`` (its eval adapter's ``validate(plan)``: periods, rounds...), before
    anything runs or is written.

    Returns
    -------
    EvalPlan
        ``plan`` with ``validated`` set and the options each task resolved (what its ``validate`` returns,
        e.g. PortBench's periods as ``Period`` objects: the task that owns the grammar parses it here,
        once per plan). A plan already validated is returned as it is, so :func:`run_eval` checks a plan
        the command line validated before a ``--dry-run`` only once.

    Raises
    ------
    ValueError
        One line: an env id of no task, or what a task's check refuses.
    """
    from quantgym.tasks import load_ref, task_of

    if plan.validated:
        return plan
    options = dict(plan.options)
    seen = set()
    for e in plan.env_ids:
        record = task_of(e)
        if record.name in seen or record.eval is None:
            continue
        seen.add(record.name)
        adapter = load_ref(record.eval)
        # an env kwarg the task's runner sets from its own option (PortBench's period, Market-Bench's round...)
        owned = getattr(adapter, "owned_kwargs", {})
        clash = sorted(set(owned) & set(plan.env_kwargs))
        if clash:
            key = clash[0]
            raise ValueError(f"--env-kwargs: {key!r} is chosen with {owned[key]}, not in --env-kwargs; got "
                             f"{key}={plan.env_kwargs[key]!r}")
        check = getattr(adapter, "validate", None)
        if check is not None:
            options.update(check(plan) or {})
    return replace(plan, options=options, validated=True)


def run_eval(agents: Any, plan: EvalPlan, out_dir: str | Path, *, concurrency: int = 1,
             new_agent: Callable[[str], Any] | None = None, own_agents: bool = False, console: Any = None,
             progress: Any = None, meta: dict | None = None,
             log: Callable[[str], None] | None = None) -> list[SectionResult]:
    """Run ``plan`` with built agents and write results.

    Parameters
    ----------
    agents : an agent object (every task of the plan), or a dict task -> agent object
        (:func:`quantgym.agents.registry.make_eval_agents` builds them from a spec).
    plan : :class:`EvalPlan`.
    out_dir : output folder (created).
    concurrency : worker threads (episodes in flight).
    new_agent : ``new_agent(task)`` -> a fresh agent for one more episode of ``task`` (a classical / sb3
        policy may keep per-episode state); None: every episode of a task uses its agent of ``agents``.
    own_agents : the run closes the agents at its end (their transcripts) and, when stopped by its
        endpoint, removes the transcripts that hold no answer.
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
        An env id of no task or of a task without an eval adapter (its record's ``eval_refusal``).
    """
    from quantgym.tasks import load_ref, task_of

    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    records = {e: task_of(e) for e in plan.env_ids}
    tasks = plan_tasks(plan)
    adapters = {task: load_ref(records[next(e for e in plan.env_ids if records[e].name == task)].eval)
                for task in tasks}
    plan = validate_plan(plan)
    out_dir.mkdir(parents=True, exist_ok=True)
    given = agents
    agents = {task: given[task] if isinstance(given, dict) else given for task in tasks}

    def _new_agent(task: str) -> Callable[[], Any]:
        if new_agent is not None:
            return lambda: new_agent(task)
        return lambda: agents[task]

    ctxs = {task: EvalContext(out_dir, console, _new_agent(task)) for task in tasks}
    from quantgym.memorization import BLIND_SUFFIX, views

    plans = views(plan)  # [plan], or the named and the blind plan of --blind both (same agents and seeds)
    jobs: list[tuple[str, str, Callable[[], dict]]] = []
    job_view: list[int] = []
    for v, vplan in enumerate(plans):
        for env_id in plan.env_ids:
            task = records[env_id].name
            new = adapters[task].jobs(env_id, agents[task], vplan, ctxs[task])
            jobs += [(task, label + (BLIND_SUFFIX if len(plans) > 1 and vplan.env_kwargs.get("blind") else ""),
                      fn) for label, fn in new]
            job_view += [v] * len(new)
    ref_jobs: list[tuple[str, str, Any, Callable[[], Any]]] = []
    for task in tasks:
        make_refs = getattr(adapters[task], "reference_jobs", None)
        if make_refs is not None:
            env_ids = [e for e in plan.env_ids if records[e].name == task]
            ref_jobs += [(task, label, key, fn) for label, key, fn in make_refs(env_ids, agents[task], plans[0])]
    ref_names = ", ".join(dict.fromkeys(getattr(adapters[t], "reference_name", "reference") for t, *_ in ref_jobs))
    n_total = len(jobs) + len(ref_jobs)
    tid = progress.add_task("eval", total=n_total) if progress is not None else None
    detach = _attach_progress(agents, progress, tid, log)
    if log is not None:
        names = ", ".join(dict.fromkeys(policy_name(a) for a in agents.values()))
        where = ", ".join(dict.fromkeys(a.engine.endpoint for a in agents.values() if is_llm_agent(a)
                                        and not hasattr(a.engine, "source")))
        replayed = ", ".join(dict.fromkeys(Path(a.engine.source).name for a in agents.values()
                                           if is_llm_agent(a) and hasattr(a.engine, "source")))
        log(f"eval: {len(jobs)} episode(s) of {names}" + (f" at {where}" if where else "")
            + (f" replayed offline from {replayed}" if replayed else "")
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
        stop = _record_stop(exc, agents, own_agents, out_dir, jobs, results,
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
        runs = [[r for (tt, _, _), v, r in zip(jobs, job_view, results) if tt == task and v == k]
                for k in range(len(plans))]
        parts = [adapters[task].section(rs, agents[task], vplan, ctxs[task]) for rs, vplan in zip(runs, plans)]
        if len(parts) == 1:
            sections.append(parts[0])
        else:
            from quantgym.memorization import gap_section

            sections.append(gap_section(parts, runs, adapters[task], console))
    usage = {t: a.usage() if hasattr(a, "usage") else None for t, a in agents.items()}
    for s in sections:
        s.extra["usage"] = usage.get(s.task)
        s.extra["agent_config"] = (agents[s.task].engine.config.to_dict()
                                   if hasattr(agents[s.task], "engine") else None)
    write_results(out_dir, sections, meta={**(meta or {}), "plan": plan.to_dict(), "concurrency": concurrency,
                                           "usage": usage, "elapsed_s": time.perf_counter() - t0})
    if own_agents:  # close only the agents the run owns (their transcripts)
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
    """What a run stopped by its endpoint (an error whose class sets ``stops_run``, the LLM agents'
    ``LLMConfigError``, after it started) leaves behind.

    No call of the run answered: the transcripts it wrote (they hold no answer) are removed, so the
    command's folder is removed too when nothing else is in it; ``exc`` is returned unchanged. Else the
    run is marked failed (``summary.csv``: one row per task with ``status`` ``failed``; ``results.json``:
    the error, the episodes that finished, the transcripts) and the returned error's one line adds where
    it is and which transcripts resume it (``--cache-from``). Any other exception is returned unchanged.
    """
    llm = {t: a for t, a in agents.items() if is_llm_agent(a)}
    if not getattr(exc, "stops_run", False) or not llm:
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
    return type(exc)(f"{exc}; stopped after {len(finished)} of {len(jobs)} episode(s): marked failed in "
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
            err = " ".join(str(rec.get("error")).split())  # a server's error body can run to kilobytes
            if len(err) > 120:
                err = err[:117] + "..."  # the call's record (transcript, results.json) has it whole
            log(f"  LLM call failed ({rec.get('episode') or 'no episode'}): {err}")

    engines = [e for e in {id(a.engine): a.engine for a in agents.values() if is_llm_agent(a)}.values()
               if hasattr(e, "listeners")]
    for engine in engines:
        engine.listeners.append(listener)

    def detach() -> None:
        for engine in engines:
            if listener in engine.listeners:
                engine.listeners.remove(listener)

    return detach


