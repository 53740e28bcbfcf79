"""Agent specs on the command line: ``--agent SPEC``.

``SPEC`` is a baseline key or display name (``equal_weight``, ``"60/40"``…) or
``scheme:argument``. Schemes are resolved lazily so optional extras are imported
only when used:

- ``openai:MODEL`` — LLM agent through the official openai client (extra ``llm``);
- ``replay:FILE`` — replays a recorded LLM transcript offline (extra ``llm``);
- a task's own schemes (its record's ``schemes`` in :mod:`quantgym.tasks`), e.g. PortBench's
  ``sb3:PATH``: a trained stable-baselines3 model (extra ``rl``).

A scheme factory is ``factory(argument: str, task: str, **options) -> policy``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

#: scheme -> "module:function" of its factory
SCHEMES: dict[str, str] = {
    "openai": "quantgym.agents.llm:make_openai_agent",
    "replay": "quantgym.agents.llm:make_replay_agent",
}


#: the schemes of LLM agents (they run on every task with an ``llm`` entry)
LLM_SCHEMES = ("openai", "replay")


@dataclass(frozen=True)
class AgentSpec:
    """A parsed ``--agent SPEC``: ``scheme:argument`` or a plain (baseline) name.

    Attributes
    ----------
    text : the spec as given (what summary.csv and results.json record).
    scheme : ``"openai"``, ``"replay"``, a task's own scheme (``"sb3"``), or None for a plain name.
    argument : the part after the first ``:`` (the model, the file), or the plain name.
    """

    text: str
    scheme: str | None
    argument: str

    @classmethod
    def parse(cls, spec: "str | AgentSpec") -> "AgentSpec":
        """Split ``spec`` once at its first ``:`` (an :class:`AgentSpec` is returned as it is)."""
        if isinstance(spec, AgentSpec):
            return spec
        scheme, sep, arg = str(spec).partition(":")
        return cls(str(spec), scheme if sep else None, arg if sep else str(spec))

    @property
    def is_llm(self) -> bool:
        """An LLM agent (``openai:MODEL``, ``replay:FILE``)."""
        return self.scheme in LLM_SCHEMES

    @property
    def model(self) -> str | None:
        """The model of an ``openai:`` spec, else None."""
        return self.argument if self.scheme == "openai" else None

    def __str__(self) -> str:
        return self.text


class NamedPolicy:
    """A task's baseline built from a plain name whose policy carries no ``key`` of its own (a plain
    function, as in docs/tasks.md): the name given on the command line becomes its ``key`` and, when it has
    none, its ``name``, so summary.csv names it as the user does. Every other attribute is the policy's."""

    def __init__(self, policy: Any, key: str):
        self.policy = policy
        self.key = key
        self.name = getattr(policy, "name", None) or key

    def act(self, observation: Any, info: dict) -> Any:
        return (self.policy.act if hasattr(self.policy, "act") else self.policy)(observation, info)

    def __getattr__(self, attr: str) -> Any:  # reset, env_kwargs, wrap_env, step_record, ...
        return getattr(self.__dict__["policy"], attr)


def _load(target: str) -> Callable[..., Any]:
    mod, _, fn = target.partition(":")
    try:
        module = importlib.import_module(mod)
    except ModuleNotFoundError as exc:
        raise ValueError(f"agent scheme needs module {mod!r} which is not available ({exc}); "
                         "install the matching extra (see README)") from exc
    return getattr(module, fn)


def valid_agents(task: str | None = None) -> str:
    """The agent specs ``task`` accepts, for error messages: ``"openai:MODEL, replay:FILE, sb3:PATH or a
    baseline (equal_weight, ...)"``."""
    from quantgym.tasks import default_task, get_task, load_ref

    record = get_task(task or default_task())
    parts = [f"{s}:{'MODEL' if s == 'openai' else 'FILE' if s == 'replay' else 'PATH'}"
             for s in (*SCHEMES, *record.schemes)]
    if record.baselines is not None:
        names = getattr(load_ref(record.baselines.partition(":")[0]), "BASELINES", None)
        parts.append(f"a baseline ({', '.join(names)})" if names else "a baseline name")
    return ", ".join(parts)


def check_agent(spec: "str | AgentSpec", task: str | None = None) -> None:
    """Refuse an agent spec :func:`make_agent` would refuse, without building the agent (no LLM client, no
    model file loaded): the scheme must exist for ``task`` and a plain name must be one of its baselines.

    Raises
    ------
    ValueError
        What is wrong and which specs are valid for ``task``.
    """
    from quantgym.tasks import default_task, get_task, load_ref

    task = task or default_task()
    record = get_task(task)
    parsed = AgentSpec.parse(spec)
    scheme, arg = parsed.scheme, parsed.argument
    if scheme is not None:
        if scheme in SCHEMES or scheme in record.schemes:
            if not arg.strip():
                raise ValueError(f"agent {spec!r}: {scheme}: needs an argument; valid for {record.title}: "
                                 f"{valid_agents(task)}")
            return
        raise ValueError(f"agent {spec!r}: unknown scheme {scheme!r} for {record.title}; valid: {valid_agents(task)}")
    if record.baselines is None:
        raise ValueError(f"agent {spec!r}: {record.title} has no classical baselines; valid: {valid_agents(task)}")
    try:
        load_ref(record.baselines)(parsed.text)  # a baseline object is a light, unfitted instance
    except ValueError:
        raise ValueError(f"agent {spec!r}: unknown for {record.title}; valid: {valid_agents(task)}") from None


def make_agent(spec: "str | AgentSpec", task: str | None = None, **options: Any) -> Any:
    """Build a policy from an agent spec (see module docstring); plain names are the classical agents of
    ``task`` (its record's ``baselines`` in :mod:`quantgym.tasks`; None: :func:`quantgym.tasks.default_task`),
    keyed by the name given (:class:`NamedPolicy` when the baseline carries no ``key``).

    Raises
    ------
    ValueError
        Unknown baseline or scheme, or a scheme whose optional extra is not installed.
    """
    from quantgym.tasks import default_task, get_task, load_ref, tasks

    task = task or default_task()
    parsed = AgentSpec.parse(spec)
    spec, scheme, arg, sep = parsed.text, parsed.scheme, parsed.argument, parsed.scheme is not None
    if sep and scheme in SCHEMES:
        return _load(SCHEMES[scheme])(arg, task=task, **options)
    record = get_task(task)
    if sep and scheme in record.schemes:
        return _load(record.schemes[scheme])(arg, task=task, **options)
    owners = [t.title for t in tasks() if scheme in t.schemes]
    if sep and owners:
        raise ValueError(f"agent {spec!r}: the {scheme}: scheme exists for {', '.join(owners)} only")
    if sep:
        known = sorted({*SCHEMES, *(k for t in tasks() for k in t.schemes)})
        raise ValueError(f"unknown agent scheme {scheme!r} in {spec!r}; known: {known} or a baseline name")
    if record.baselines is None:
        have = ", ".join(t.title for t in tasks() if t.baselines)
        raise ValueError(f"agent {spec!r}: classical baselines exist for {have} only")
    policy = load_ref(record.baselines)(spec)
    key = getattr(policy, "key", None)
    return policy if isinstance(key, str) and key else NamedPolicy(policy, spec)


def make_agents(spec: "str | AgentSpec", tasks: list[str], options_of: Callable[[str], dict] | None = None) -> dict[str, Any]:
    """One agent per task of a run (``quantgym eval``), built from one spec.

    Parameters
    ----------
    spec : the agent spec.
    tasks : the run's task names.
    options_of : ``options_of(task) -> dict`` of factory options for that task (None: no options).

    Raises
    ------
    ValueError
        A classical agent (a baseline name, a task's scheme) for a task that has none (LLM agents run on
        every task), or what :func:`make_agent` refuses.
    """
    from quantgym.tasks import get_task, tasks as _registered

    parsed = AgentSpec.parse(spec)
    for task in tasks:
        if not parsed.is_llm and not get_task(task).classical:
            classical = ", ".join(t.title for t in _registered() if t.classical)
            raise ValueError(f"agent {parsed.text!r} cannot run {task}: only LLM agents (openai:MODEL, replay:FILE) "
                             f"do; classical baselines and sb3 agents run on {classical} only (or: quantgym bench "
                             "--agents NAME,...)")
    return {task: make_agent(parsed, task, **(options_of(task) if options_of is not None else {}))
            for task in tasks}


def make_eval_agents(spec: "str | AgentSpec", plan: Any, out_dir: Any,
                     options: dict | None = None) -> tuple[dict[str, Any], Callable[[str], Any] | None]:
    """The agents of a ``quantgym eval`` run (:func:`quantgym.plan.run_eval`), built from one spec.

    Parameters
    ----------
    spec : the agent spec.
    plan : the run's :class:`~quantgym.plan.EvalPlan`.
    out_dir : the run's output folder: an ``openai:`` agent's transcript goes to ``OUT/transcripts``
        (:func:`~quantgym.agents.llm.transcript.transcript_path`) with the plan of its task in its header
        (a ``replay:`` of it runs the same plan), unless ``options`` set ``transcript``.
    options : factory options (``base_url``, ``api_key``, ...).

    Returns
    -------
    (agents, new_agent)
        ``agents``: task -> agent; ``new_agent(task)``: a fresh classical / sb3 policy for one more episode
        (they may keep per-episode state), None for an LLM agent (one per task, shared by its episodes).

    Raises
    ------
    ValueError
        What :func:`quantgym.plan.plan_tasks`, :func:`quantgym.plan.validate_plan` or :func:`make_agents`
        refuse.
    """
    from pathlib import Path

    from quantgym.plan import plan_tasks, validate_plan
    from quantgym.tasks import task_of

    parsed = AgentSpec.parse(spec)
    tasks = plan_tasks(plan)
    plan = validate_plan(plan)

    def options_of(task: str) -> dict:
        opts = dict(options or {})
        if parsed.scheme == "openai":
            from quantgym.agents.llm.transcript import transcript_path

            opts.setdefault("transcript", transcript_path(Path(out_dir) / "transcripts", task, parsed.argument))
            opts.setdefault("header", {"eval": {**plan.to_dict(), "env_ids": [e for e in plan.env_ids
                                                                                if task_of(e).name == task]}})
        return opts

    agents = make_agents(parsed, tasks, options_of)
    if parsed.is_llm:
        return agents, None
    return agents, (lambda task: make_agent(parsed, task, **dict(options or {})))
