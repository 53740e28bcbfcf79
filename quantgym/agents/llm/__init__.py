"""LLM agents on the official ``openai`` client for every quantgym task (docs/llm-agents.md).

Importing this package does not import ``openai``; the client is created on the first call.

Factories (registry schemes ``openai:`` and ``replay:``, :mod:`quantgym.agents.registry`)::

    from quantgym.agents.llm import make_openai_agent, make_replay_agent
    agent = make_openai_agent("gpt-4o-mini", task="portbench", base_url=None, transcript="run.jsonl")
    res = quantgym.evaluation.evaluate("PortBench-Balanced-v0", agent, period="covid_2020")
    again = make_replay_agent("run.jsonl", task="portbench")   # offline, identical results
"""

from __future__ import annotations

from typing import Any


def make_openai_agent(arg: str, task: str | None = None, **options: Any):
    """LLM agent for ``task`` on model ``arg`` through any OpenAI-compatible endpoint.

    Parameters
    ----------
    arg : model name (``gpt-4o-mini``, ``qwen2.5:7b``, ``deepseek-chat``...).
    task : a task of :mod:`quantgym.tasks` with an LLM adapter (``portbench``, ``portbench_qa``,
        ``quant_arena``, ``market_bench``); None: the first registered task (PortBench).
    **options : ``base_url`` (default ``$OPENAI_BASE_URL`` or OpenAI), ``api_key`` (default
        ``$OPENAI_API_KEY``), ``temperature`` (0), ``max_tokens`` ("auto": a cap per call, derived from the
        answer schema and the universe; an int: one cap for every call; None: not sent),
        ``context_window`` (tokens; None: server metadata or the first context-length error),
        ``prompt_style`` ("auto" | "full" | "compact" | "minimal"), ``timeout`` (300 s), ``retries`` (5),
        ``connect_timeout`` (10 s), ``unreachable_tries`` (2) / ``unreachable_delay`` (1 s) (an endpoint that
        never answered: then :class:`~quantgym.agents.llm.client.LLMConfigError`),
        ``structured`` ("auto" | "json_schema" | "json_object_schema" | "json_object" | "off"; "on" =
        "json_schema"), ``seed``, ``max_calls``, ``max_total_tokens``, ``price_in`` /
        ``price_out`` (USD per 1M tokens) or ``prices`` (a price table: dict or JSON path
        ``{model: {"input", "output"}}``), ``transcript`` (JSONL path; default
        ``results/transcripts/...``; False: none), ``cache`` (True), ``cache_from`` (transcript path(s)),
        ``name`` (label in results), and the task's own agent options (its record's ``eval_options`` with
        ``agent=True``, e.g. Quant-Arena's ``rounds``: most candidates).

    Returns
    -------
    LLMAgent
        A policy for :func:`quantgym.evaluation.evaluate` (PortBench: carries ``env_kwargs`` and
        ``wrap_env``).

    Raises
    ------
    ValueError
        Unknown task or option.

    Notes
    -----
    Calls never raise for a failed request (it is a recorded failure), except
    :class:`~quantgym.agents.llm.client.LLMConfigError` (one line; exit code 2 in the CLI) for a wrong
    key, an unknown model, a wrong base URL, an exhausted quota, or an endpoint that cannot be reached
    before it ever answered.
    """
    from quantgym.agents.llm.agents import build_agent

    return build_agent(arg, task, **options)


def make_replay_agent(arg: str, task: str | None = None, **options: Any):
    """Agent replaying the transcript at path ``arg`` offline (no network; identical env results).

    Raises
    ------
    FileNotFoundError, ValueError
        Missing or foreign file, or a transcript of another task.
    """
    from quantgym.agents.llm.agents import build_replay_agent

    unknown = set(options) - {"name"}
    if unknown:
        # options of a live run (base_url, api_key, ...) are meaningless offline: ignore them quietly
        options = {k: v for k, v in options.items() if k == "name"}
    return build_replay_agent(arg, task, **options)


__all__ = ["make_openai_agent", "make_replay_agent"]
