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
from typing import Any, Callable

#: scheme -> "module:function" of its factory
SCHEMES: dict[str, str] = {
    "openai": "quantgym.agents.llm:make_openai_agent",
    "replay": "quantgym.agents.llm:make_replay_agent",
}


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


def check_agent(spec: str, task: str | None = None) -> None:
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
    scheme, sep, arg = spec.partition(":")
    if sep:
        if scheme in SCHEMES or scheme in record.schemes:
            if not arg.strip():
                raise ValueError(f"agent {spec!r}: {scheme}: needs an argument; valid for {record.title}: "
                                 f"{valid_agents(task)}")
            return
        raise ValueError(f"agent {spec!r}: unknown scheme {scheme!r} for {record.title}; valid: {valid_agents(task)}")
    if record.baselines is None:
        raise ValueError(f"agent {spec!r}: {record.title} has no classical baselines; valid: {valid_agents(task)}")
    try:
        load_ref(record.baselines)(spec)  # a baseline object is a light, unfitted instance
    except ValueError:
        raise ValueError(f"agent {spec!r}: unknown for {record.title}; valid: {valid_agents(task)}") from None


def make_agent(spec: str, task: str | None = None, **options: Any) -> Any:
    """Build a policy from an agent spec (see module docstring); plain names are the classical agents of
    ``task`` (its record's ``baselines`` in :mod:`quantgym.tasks`; None: :func:`quantgym.tasks.default_task`).

    Raises
    ------
    ValueError
        Unknown baseline or scheme, or a scheme whose optional extra is not installed.
    """
    from quantgym.tasks import default_task, get_task, load_ref, tasks

    task = task or default_task()
    scheme, sep, arg = spec.partition(":")
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
    return load_ref(record.baselines)(spec)
