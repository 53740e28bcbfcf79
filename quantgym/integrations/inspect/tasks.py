"""One Inspect ``@task`` per quantgym task, built from the task registry (:mod:`quantgym.tasks`).

Every registered task with an LLM adapter (its record's ``llm``) becomes ``quantgym/<name>``
(:func:`inspect_tasks`); a task registered later (entry point ``quantgym.tasks``, ``$QUANTGYM_TASKS``) appears
too. Its ``-T`` arguments come from the record (docs/inspect.md):

- the env choice, named by the key of the env ids' default kwargs (PortBench ``profile``, Quant-Arena
  ``track``, Market-Bench ``strategy``; comma-separated for several);
- the record's ``eval_options`` by flag name (``period``, ``round``, ``attempts``, ``feedback``, ``rounds``...);
- ``seed``, ``blind``, ``tools`` and any other keyword of the env's constructor (``task_set``, ``n_per_template``);
- the LLM agent's options ``structured``, ``context_window``, ``prompt_style``, ``max_tokens``, ``tool_calls``,
  and ``transcript`` (a folder for quantgym transcripts, replayable by ``quantgym eval --agent replay:PATH``).

The dataset holds one sample per episode of the task's eval adapter (``quantgym eval``'s jobs: period ×
profile, the research run, round × strategy); the solver runs that episode with the task's own LLM agent on
Inspect's model (:class:`~quantgym.integrations.inspect.engine.InspectEngine`), in quantgym's own sandbox for
code; the scorer returns the env's scores as ``quantgym eval`` writes them in ``summary.csv``.
"""

from __future__ import annotations

import inspect as _pyinspect
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from quantgym.integrations.inspect import require_inspect

require_inspect()

from inspect_ai import Task, task  # noqa: E402
from inspect_ai._util.error import PrerequisiteError  # noqa: E402
from inspect_ai.dataset import MemoryDataset, Sample  # noqa: E402
from inspect_ai.scorer import Score, mean, metric, scorer, stderr  # noqa: E402
from inspect_ai.solver import solver  # noqa: E402

#: the name of an env choice argument where the env kwarg's own name is not the field's term
SELECTOR_NAMES = {"mode": "track"}
#: ``quantgym eval`` options with no meaning here: the Equal-Weight reference runs beside the agent
IGNORED_OPTIONS = ("baseline",)
#: the LLM agent's options a task takes as ``-T`` arguments (:class:`quantgym.agents.llm.client.LLMConfig`)
AGENT_ARGS = ("structured", "context_window", "prompt_style", "max_tokens", "tool_calls")
#: what Inspect passes to every task besides the ``-T`` arguments
PASSED_BY_INSPECT = ("model",)
#: the sample store key of an episode's results
STORE_KEY = "quantgym"
#: quantgym's structured-output mode through Inspect: plain text, the answer format in the prompt (Inspect's
#: providers differ in what they take; ``-T structured=json_schema`` asks for the provider's JSON schema mode)
DEFAULT_STRUCTURED = "off"


class TaskArgumentError(ValueError, PrerequisiteError):
    """A bad ``-T`` argument or value (one line naming the arguments that exist). A ``PrerequisiteError`` of
    Inspect's: ``inspect eval`` prints its message alone, without a traceback."""

    def __init__(self, message: str):
        ValueError.__init__(self, message)
        PrerequisiteError.__init__(self, message)


def _selector(record: Any) -> tuple[str, str, dict[str, str]] | None:
    """(argument name, env kwarg, value -> env id) of the record's env choice, or None for one env id."""
    keys = {k for _, kw in record.envs.values() for k in kw}
    if len(record.envs) < 2 or len(keys) != 1:
        return None
    key = next(iter(keys))
    return SELECTOR_NAMES.get(key, key), key, {str(kw[key]): env_id for env_id, (_, kw) in record.envs.items()}


def _options(record: Any) -> dict[str, Any]:
    """argument name -> :class:`~quantgym.tasks.TaskOption` of the record's ``eval_options``."""
    return {o.flag[2:].replace("-", "_"): o for o in record.eval_options if o.key not in IGNORED_OPTIONS}


def _env_keywords(env_id: str) -> list[str]:
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    spec = gym.spec(env_id)
    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    params = _pyinspect.signature(creator).parameters
    return [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self"]


def argument_names(record: Any) -> list[str]:
    """Every ``-T`` argument of the record's Inspect task, in the order docs/inspect.md lists them."""
    sel = _selector(record)
    names = ([sel[0]] if sel else []) + list(_options(record)) + ["seed"]
    env_kw = dict.fromkeys(k for e in record.envs for k in _env_keywords(e))
    names += [k for k in ("blind", "tools") if k in env_kw]
    names += list(AGENT_ARGS) + ["transcript"]
    skip = set(names) | {sel[1]} if sel else set(names)
    return names + [k for k in env_kw if k not in skip]


def _text(value: Any) -> str:
    """A ``-T`` value as the command-line option would have it (Inspect parses ``-T`` values as YAML)."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def build_plan(record: Any, args: dict[str, Any]) -> tuple[Any, dict[str, Any], Path | None]:
    """(the :class:`~quantgym.plan.EvalPlan`, the agent options, the transcript folder) of ``args``.

    Raises
    ------
    TaskArgumentError
        One line: an argument the task does not take (the message lists the ones it takes) or a bad value.
    """
    from quantgym.plan import EvalPlan, check_env_kwargs, validate_plan

    args = {k: v for k, v in args.items() if k not in PASSED_BY_INSPECT}
    known = argument_names(record)
    bad = [k for k in args if k not in known]
    if bad:
        raise TaskArgumentError(f"quantgym/{record.name} takes no argument {', '.join(map(repr, bad))}; its "
                                f"arguments: {', '.join(known)}")
    sel = _selector(record)
    env_ids = list(record.envs)[:1]
    if sel is not None and args.get(sel[0]) is not None:
        want = [v.strip() for v in _text(args.pop(sel[0])).split(",") if v.strip()]
        wrong = [v for v in want if v not in sel[2]]
        if wrong or not want:
            raise TaskArgumentError(f"quantgym/{record.name}: {sel[0]} must be one of {', '.join(sel[2])} "
                                    f"(comma-separated for several); got {', '.join(wrong) or 'nothing'}")
        env_ids = [sel[2][v] for v in want]
    elif sel is not None:
        args.pop(sel[0], None)
    options: dict[str, Any] = {}
    for name, opt in _options(record).items():
        raw = args.pop(name, None)
        if raw is None:
            continue
        try:
            if opt.kind == "flag":
                if not isinstance(raw, bool):
                    raise ValueError(f"{name} takes true or false; got {raw!r}")
                value = raw
            elif opt.kind == "int":
                if isinstance(raw, bool) or not str(raw).strip().lstrip("-").isdigit():
                    raise ValueError(f"{name} takes an integer; got {raw!r}")
                value = int(raw)
            else:
                value = opt.parse(_text(raw) if opt.kind != "multi" else [_text(raw)])
        except ValueError as exc:
            raise TaskArgumentError(f"quantgym/{record.name}: {str(exc).replace(opt.flag, name)}") from None
        (options if not opt.agent else options.setdefault("_agent", {}))[opt.key] = value
        for k, v in opt.implies.items():
            options.setdefault(k, v)
    agent_opts = dict(options.pop("_agent", {}))
    for name in AGENT_ARGS:
        if args.get(name) is not None:
            agent_opts[name] = args.pop(name)
        else:
            args.pop(name, None)
    agent_opts.setdefault("structured", DEFAULT_STRUCTURED)
    transcript = args.pop("transcript", None)
    seed = args.pop("seed", None)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TaskArgumentError(f"quantgym/{record.name}: seed takes an integer; got {seed!r}")
    env_kwargs = {k: v for k, v in args.items() if v is not None}
    for k in ("blind", "tools"):
        if k in env_kwargs and not isinstance(env_kwargs[k], bool):
            raise TaskArgumentError(f"quantgym/{record.name}: {k} takes true or false; got {env_kwargs[k]!r}")
    try:
        for e in env_ids:
            check_env_kwargs(e, env_kwargs)
        _check_agent_options(agent_opts)
        plan = EvalPlan(env_ids=env_ids, options=options, seed=int(seed or 0), env_kwargs=env_kwargs, plots=False)
        if record.eval is not None:
            plan = validate_plan(plan)
    except ValueError as exc:
        raise TaskArgumentError(f"quantgym/{record.name}: {' '.join(str(exc).split())}") from None
    return plan, agent_opts, None if transcript in (None, False, "") else Path(str(transcript))


def _check_agent_options(opts: dict[str, Any]) -> None:
    from quantgym.agents.llm.client import LLMConfig

    LLMConfig(model="check", **{k: v for k, v in opts.items() if k in AGENT_ARGS})


# ------------------------------------------------------------------------------------------ episodes
class _Context:
    """What a task's eval adapter gets (:class:`quantgym.plan.EvalContext`) for one sample's episode."""

    def __init__(self, out_dir: Path, agent: Any):
        from quantgym.plan import EvalContext

        self.ctx = EvalContext(out_dir, None, lambda: agent)


def episodes(record: Any, plan: Any) -> list[tuple[str, str, int]]:
    """(label, env id, job index) of every episode of ``plan``: the task's eval adapter's jobs (their
    functions are not called here), or for a task without one an episode per item of an env that holds
    items (``n_items``, e.g. PortBench-QA's questions: the episode's seed picks the item) else one per env id."""
    import gymnasium as gym

    from quantgym.tasks import load_ref

    out = []
    for env_id in plan.env_ids:
        if record.eval is None:
            env = gym.make(env_id, **plan.env_kwargs)
            n = int(getattr(env.unwrapped, "n_items", 1) or 1)
            env.close()
            out += [(env_id if n == 1 else f"{env_id} #{i}", env_id, i) for i in range(n)]
            continue
        jobs = load_ref(record.eval).jobs(env_id, None, plan, _Context(Path(tempfile.gettempdir()), None).ctx)
        out += [(label, env_id, i) for i, (label, _) in enumerate(jobs)]
    return out


def make_agent(record: Any, model: Any, agent_opts: dict[str, Any], transcript: Path | None) -> Any:
    """The task's LLM agent (its record's ``llm`` adapter) on Inspect's ``model``."""
    from quantgym.agents.llm.agents import _ENGINE_OPTS, _adapter, _adapter_opts
    from quantgym.agents.llm.client import LLMConfig
    from quantgym.integrations.inspect.engine import InspectEngine

    name = str(model)
    own, _ = _adapter_opts(record.name)
    config = LLMConfig(model=name, base_url=f"inspect://{name}",
                       **{k: v for k, v in agent_opts.items() if k in _ENGINE_OPTS})
    adapter = {k: v for k, v in agent_opts.items() if k in own}
    label = f"inspect:{name}"
    engine = InspectEngine(model, config, transcript=transcript,
                           header_extra={"task": record.name, "agent_name": label, "adapter_options": adapter,
                                         "price_source": None})
    agent = _adapter(record.name)(engine, name=label, **adapter)

    def toolbox() -> Any:  # the env of the calling thread's episode (tool mode): its tools as Inspect tools
        env = getattr(agent._local, "env", None)
        return getattr(getattr(env, "unwrapped", env), "toolbox", None)

    engine.toolbox_source = toolbox
    return agent


def _plain(obj: Any) -> bool:
    """True when ``obj`` is JSON data (numpy numbers allowed): a run dict a log can hold and give back."""
    import numpy as np

    def default(o: Any) -> Any:
        if isinstance(o, (np.generic,)):
            return o.item()
        raise TypeError
    try:
        json.dumps(obj, default=default)
    except (TypeError, ValueError):
        return False
    return True


def run_episode(record: Any, plan: Any, env_id: str, job: int, agent: Any) -> dict[str, Any]:
    """Run one episode (job ``job`` of ``env_id``) with ``agent`` and return what the log keeps: the summary
    rows of the task's result section, its runs (results.json's), the plan and, when it is JSON data, the
    episode's own run dict (``quantgym report`` regroups a task's rows from them)."""
    from quantgym.evaluation import evaluate
    from quantgym.results import SectionResult, to_jsonable
    from quantgym.tasks import load_ref

    with tempfile.TemporaryDirectory(prefix="quantgym-inspect-") as tmp:
        ctx = _Context(Path(tmp), agent).ctx
        if record.eval is not None:
            adapter = load_ref(record.eval)
            _, fn = adapter.jobs(env_id, agent, plan, ctx)[job]
            run = fn()
            sec = adapter.section([run], agent, plan, ctx)
        else:
            res = evaluate(env_id, agent, seed=plan.seed + job, **plan.env_kwargs)
            run = None
            row = res.summary_row()
            row.agent = plan.agent_label(row.agent)
            # no result section of its own: the episode's terminal metrics are its columns (QA: accuracy...)
            row.extra.update({k: v for k, v in res.metrics.items() if isinstance(v, (int, float))
                              and not isinstance(v, bool) and row.get(k) is None})
            sec = SectionResult(task=record.name, rows=[row], runs=[res.to_dict()])
    rows = [{**{k: v for k, v in vars(r).items() if k != "extra"}, **r.extra} for r in sec.rows]
    return {"task": record.name, "rows": to_jsonable(rows), "runs": to_jsonable(sec.runs),
            "plan": to_jsonable(plan.to_dict()), "run": to_jsonable(run) if run is not None and _plain(run) else None}


# ------------------------------------------------------------------------------------------ Inspect parts
@solver
def quantgym_solver(task_name: str, args: dict[str, Any]):
    """Drive the quantgym env of the sample's episode with the task's LLM agent on Inspect's model."""
    from quantgym.tasks import get_task

    async def solve(state: Any, generate: Any) -> Any:
        import anyio.to_thread
        from inspect_ai.model import get_model

        record = get_task(task_name)
        plan, agent_opts, transcript = build_plan(record, dict(args))
        model = get_model()
        if transcript is not None:
            transcript.mkdir(parents=True, exist_ok=True)
            transcript = transcript / f"{record.name}_{_safe(str(state.sample_id))}.jsonl"
        agent = make_agent(record, model, agent_opts, transcript)
        md = state.metadata
        try:
            out = await anyio.to_thread.run_sync(run_episode, record, plan, md["env_id"], int(md["job"]), agent)
        finally:
            agent.close()
        silent = agent.engine.never_answered()
        if silent is not None:  # no call answered: the sample is an error, not a score of the fallbacks
            raise silent
        state.store.set(STORE_KEY, out)
        ex = agent.engine.exchanges
        if ex:  # the sample's messages: the last model call's conversation (every call is in the transcript)
            messages, output = ex[-1]
            state.messages = [*messages, output.message]
            state.output = output
        return state

    return solve


def _safe(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def score_values(task_name: str, row: dict[str, Any]) -> dict[str, float]:
    """The score of a summary row: every number metric of the task (leaderboard registry; NaN when the
    episode has none; the return metrics only for a task that reports a Sharpe ratio, its record's
    ``sharpe_note``) and the task's own number columns (S, pass@k, MAE...)."""
    from quantgym.leaderboard.metrics import metrics, number
    from quantgym.tasks import get_task

    from quantgym.costs import COST_COLUMNS

    returns = get_task(task_name).sharpe_note is not None
    out: dict[str, float] = {}
    for m in metrics([task_name]):
        # the inference-cost columns need quantgym eval's price table (--price-in/--price-out); under Inspect the
        # model's usage is in Inspect's own log (EvalLog.stats.model_usage), so they would always be NaN here
        if m.name in COST_COLUMNS:
            continue
        if m.kind == "number" and (returns or m.tasks is not None):
            v = number(row.get(m.name))
            out[m.name] = float("nan") if v is None else v
    # the task's own columns: every number, and every empty cell as NaN (a column such as Market-Bench's mae is
    # empty in an unsolved episode: each sample's score keeps the same keys, as Inspect's metrics need)
    keys = ("task", "agent", "profile", "period", "status")
    for k, v in row.items():
        if k in out or k in keys or k in COST_COLUMNS or isinstance(v, (bool, str)):
            continue
        if v is None:
            out[k] = float("nan")
        elif isinstance(v, (int, float)):
            out[k] = float(v) if math.isfinite(float(v)) else float("nan")
    return out


@metric
def t_interval():
    """quantgym's 95 % Student-t interval of the mean over the samples (:func:`quantgym.stats.repeats.repeat_interval`)."""
    from quantgym.stats.repeats import repeat_interval

    def compute(scores: list[Any]) -> dict[str, float]:
        iv = repeat_interval([s.score.as_float() for s in scores])
        return {k: float("nan") if iv[k] is None else float(iv[k]) for k in ("lo", "hi")}

    return compute


@scorer(metrics={"*": [mean(), stderr(), t_interval()]})
def quantgym_scorer():
    """The env's own scores of the sample's episode (its summary.csv row; see :func:`score_values`)."""

    async def score(state: Any, target: Any) -> Score:
        out = state.store.get(STORE_KEY)
        if not out or not out.get("rows"):
            return Score(value=float("nan"), explanation="the episode left no result")
        row = out["rows"][0]
        values = score_values(out["task"], row)
        shown = ", ".join(f"{k}={v:.4g}" for k, v in values.items() if not math.isnan(v))
        return Score(value=values, explanation=f"{row.get('agent')} {row.get('profile') or ''} "
                                               f"{row.get('period') or ''}: {shown}".replace("  ", " "),
                     metadata=out)

    return score


def make_inspect_task(record: Any) -> Any:
    """The ``@task`` function ``quantgym/<record.name>`` (its signature lists the record's arguments).

    Inspect prefixes the name with the package of an installed (or editable-installed) package; where it
    does not see the install (a checkout on ``sys.path``), the prefix is given explicitly.
    """
    from inspect_ai._util.registry import registry_info

    fn = task(name=record.name)(_factory(record))
    if not registry_info(fn).name.startswith("quantgym/"):
        fn = task(name=f"quantgym/{record.name}")(_factory(record))
    return fn


def _factory(record: Any) -> Any:
    names = argument_names(record)

    def factory(**args: Any) -> Task:
        rec = _record(record.name)
        plan, _, _ = build_plan(rec, dict(args))
        try:  # a task without an eval adapter: its env checks the keywords' values here
            eps = episodes(rec, plan)
        except ValueError as exc:
            raise TaskArgumentError(f"quantgym/{rec.name}: {' '.join(str(exc).split())}") from None
        samples = [Sample(input=f"quantgym {rec.title}: {label}", id=label,
                          metadata={"env_id": env_id, "job": job, "task": rec.name})
                   for label, env_id, job in eps]
        clean = {k: v for k, v in args.items() if k not in PASSED_BY_INSPECT}
        return Task(dataset=MemoryDataset(samples, name=f"quantgym-{rec.name}"),
                    solver=quantgym_solver(rec.name, clean), scorer=quantgym_scorer(),
                    metadata={"quantgym_task": rec.name, "docs": rec.docs})

    params = [_pyinspect.Parameter(n, _pyinspect.Parameter.KEYWORD_ONLY, default=None) for n in names]
    params.append(_pyinspect.Parameter("args", _pyinspect.Parameter.VAR_KEYWORD))
    factory.__signature__ = _pyinspect.Signature(params)  # type: ignore[attr-defined]
    factory.__name__ = factory.__qualname__ = record.name
    factory.__doc__ = f"quantgym {record.title} ({record.docs}); arguments: {', '.join(names)}."
    return factory


def _record(name: str) -> Any:
    from quantgym.tasks import get_task

    return get_task(name)


def inspect_tasks() -> dict[str, Any]:
    """name -> ``@task`` function of every registered task with an LLM adapter."""
    from quantgym.tasks import tasks

    return {t.name: make_inspect_task(t) for t in tasks() if t.llm}


__all__ = ["TaskArgumentError", "argument_names", "build_plan", "episodes", "make_agent", "run_episode",
           "quantgym_solver", "quantgym_scorer", "score_values", "t_interval", "make_inspect_task", "inspect_tasks"]
