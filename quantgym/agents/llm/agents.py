"""LLM agents: one chat engine, one adapter per task (PortBench, Quant-Arena, Market-Bench, PortBench-QA).

Each agent is a policy for :func:`quantgym.agents.base.evaluate` (``reset(env)``, ``act(obs, info)``)
and may be shared by several threads, each running its own episodes: per-episode state lives in
thread-local storage, the engine (HTTP client, transcript, cache, budget) is shared.

- :class:`PortBenchLLMAgent` — the stagewise S1 → S2 → S3 protocol (spec portbench §4): the env is built
  with ``stagewise=True`` and wrapped in :class:`~quantgym.wrappers.TextStageAction`; each stage prompt
  (rendered by the env, holding the agent's own previous outputs) is sent as one user message with the
  stage's JSON schema as ``response_format`` when the endpoint supports it; the raw reply goes to the
  wrapper, which parses, coerces, re-asks (format-correction suffix) or falls back. An empty reply
  gets one extra call (§4.0); a failed call becomes ``None`` (a failed attempt).
- :class:`QuantArenaLLMAgent` — the research loop: brief → module → feedback → revised module … up to
  the budget (or ``rounds``), then ``FREEZE k`` (the model's choice; if it gives none, the candidate
  with the best research excess ARR). One-shot track: one module, no feedback.
- :class:`MarketBenchLLMAgent` — K independent one-shot attempts (fresh conversation each; the attempt
  number enters the request hash so the cache never serves an earlier attempt), or, when the env runs
  ``feedback=True``, a repair conversation with the failure trace.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import os
import re
import threading
from pathlib import Path
from typing import Any

from quantgym.agents.llm.client import ChatEngine, LLMConfig, ReplayEngine
from quantgym.agents.llm.code import extract_code, extract_freeze, failure_source

TASKS = ("portbench", "portbench_qa", "quant_arena", "market_bench")

SYSTEM_PORTBENCH = (
    "You are a portfolio manager taking part in PortBench, a benchmark of staged portfolio decisions on "
    "historical market data (no real money). Each message is one stage of the pipeline. Answer with exactly one "
    "JSON object that follows the stated schema, and nothing else."
)
SYSTEM_QA = (
    "You answer questions about a portfolio and market snapshot. Follow the answer format stated in the question."
)
SYSTEM_QUANT_ARENA = (
    "You are a quantitative researcher in Quant-Arena. You write Python modules that score every stock every "
    "trading day, read the research feedback, and improve your module. Always reply either with the complete "
    "module in one ```python code block, or (to stop researching) with the single line FREEZE <k>."
)
SYSTEM_MARKET_BENCH = (
    "You are a quantitative developer. Implement the backtester exactly as specified. Reply with the complete "
    "Python module in one ```python code block."
)

QA_FIRST = ("\n\n---\nReply with the complete Python module in one ```python code block (it must define FEATURES, "
            "compute_features and score).")
QA_ONESHOT = "\n\n---\nOne-shot track: reply with the complete Python module in one ```python code block."


def _qa_feedback_msg(obs: str, k: int, budget_left: int, n: int, must_freeze: bool) -> str:
    head = f"Research feedback for candidate {k}:\n```json\n{obs}\n```\n"
    if must_freeze:
        return head + (f"No more candidates can be submitted. Reply with the single line FREEZE <k> (k in 1..{n}) "
                       "naming the candidate to evaluate on the sealed window.")
    return head + (f"Budget left: {budget_left} candidate(s). Reply with an improved complete module in one "
                   f"```python block, or with the single line FREEZE <k> (k in 1..{n}) to stop and freeze "
                   "candidate k.")


def _mb_repair_msg(feedback: str) -> str:
    return ("Your backtester was run on the input files:\n" + feedback[:20000]
            + "\n\nFix it and reply with the complete corrected module in one ```python code block.")


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s)[:80]


def default_transcript_path(task: str, model: str, folder: str | os.PathLike = "results/transcripts") -> Path:
    """``results/transcripts/<task>-<model>-<UTC stamp>-<pid>.jsonl``."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return Path(folder) / f"{task}-{_safe(model)}-{stamp}-{os.getpid()}.jsonl"


def _find_wrapper(env: Any, cls_name: str) -> Any:
    e = env
    for _ in range(20):
        if e is None:
            return None
        if type(e).__name__ == cls_name:
            return e
        e = getattr(e, "env", None)
    return None


class LLMAgent:
    """Base of the task adapters: owns the engine, episode labels, usage and decision logs.

    Attributes
    ----------
    name : label in result tables (``openai:<model>`` by default; a replay keeps the recorded name).
    task : one of :data:`TASKS`.
    engine : :class:`~quantgym.agents.llm.client.ChatEngine` (or :class:`ReplayEngine`).
    """

    task = ""
    system_prompt = ""

    def __init__(self, engine: ChatEngine, name: str | None = None, **adapter_options: Any):
        self.engine = engine
        self.name = name or f"openai:{engine.config.model}"
        self.adapter_options = dict(adapter_options)
        self._local = threading.local()
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self.logs: dict[str, list[dict]] = {}

    # ---------------------------------------------------------------- episodes
    def _label(self, env: Any) -> str:
        base = getattr(env, "unwrapped", env)
        spec = getattr(env, "spec", None)
        env_id = getattr(spec, "id", None) or type(base).__name__
        parts = [env_id]
        for attr in ("profile", "period"):
            v = getattr(base, attr, None)
            if v is not None:
                parts.append(str(getattr(v, "name", v)))
        for attr in ("strategy", "round_number", "mode"):
            v = getattr(base, attr, None)
            if v is not None and not callable(v):
                parts.append(str(v))
        with self._lock:
            n = next(self._counter)
        return "/".join(parts) + f"#{n}"

    def reset(self, env: Any) -> None:
        """Start an episode on ``env`` in the calling thread (called by ``evaluate`` after ``env.reset``)."""
        label = self._label(env)
        self._local.env = env
        self._local.label = label
        self._local.state = {}
        self.engine.set_episode(label)
        with self._lock:
            self.logs[label] = []

    @property
    def current_episode(self) -> str | None:
        """Label of the calling thread's current (or last) episode."""
        return getattr(self._local, "label", None)

    def _st(self) -> dict:
        if getattr(self._local, "state", None) is None:
            self._local.state = {}
            self._local.env = None
            self._local.label = None
        return self._local.state

    def _log(self, **rec: Any) -> None:
        label = self.current_episode
        if label is not None:
            with self._lock:
                self.logs.setdefault(label, []).append(rec)

    def episode_usage(self, label: str | None = None) -> dict[str, Any]:
        """Calls, cache hits, failures, tokens, cost and latency of one episode (default: the current one)."""
        label = label or self.current_episode
        st = dict(self.engine.episode_stats.get(label, {}))
        if self.engine.config.price_in is None and self.engine.config.price_out is None:
            st["cost_usd"] = None
        return st

    def usage(self) -> dict[str, Any]:
        """Run totals (see :meth:`ChatEngine.usage`)."""
        return self.engine.usage()

    def _hash_subs(self) -> tuple[tuple[str, str], ...]:
        return ()

    def _call(self, messages: list[dict], *, schema: dict | None = None, meta: dict | None = None,
              nonce: int = 0):
        return self.engine.chat(messages, schema=schema, meta=meta, nonce=nonce, hash_subs=self._hash_subs())

    def close(self) -> None:
        if self.engine.transcript is not None:
            self.engine.transcript.close()


class PortBenchLLMAgent(LLMAgent):
    """PortBench stagewise agent (see module docstring). ``env_kwargs = {"stagewise": True}``."""

    task = "portbench"
    env_kwargs = {"stagewise": True}

    @staticmethod
    def wrap_env(env):
        from quantgym.wrappers.text import TextStageAction

        return TextStageAction(env)

    def act(self, observation: Any, info: dict) -> str | None:
        self._st()
        env = getattr(self._local, "env", None)
        wrapper = _find_wrapper(env, "TextStageAction")
        stage = int(observation["stage"])
        attempt = wrapper.attempt if wrapper is not None else int(info.get("attempt", 0)) + 1
        schema = None
        if wrapper is not None and self.engine.config.structured != "off":
            schema = wrapper.json_schema()
        meta = {"task": "portbench", "date": info.get("date"), "stage": ("S1", "S2", "S3")[stage], "attempt": attempt}
        messages = [{"role": "system", "content": SYSTEM_PORTBENCH},
                    {"role": "user", "content": str(observation["prompt"])}]
        # the re-ask prompt is the same on attempts 2 and 3 (§11.5): the attempt enters the request hash so
        # the cache never answers a re-ask with the answer that just failed
        nonce = 2 * (attempt - 1)
        res = self._call(messages, schema=schema, meta=meta, nonce=nonce)
        extra = False
        if res.ok and not (res.text or "").strip():
            extra = True  # §4.0: an empty API response gets one extra call before it counts as a refusal
            res = self._call(messages, schema=schema, meta={**meta, "extra_call": True}, nonce=nonce + 1)
        self._log(**meta, ok=res.ok, error=res.error, extra_call=extra, structured=res.structured,
                  usage=res.usage, cached=res.cached)
        if not res.ok:
            return None
        return res.text or ""


class PortBenchQALLMAgent(LLMAgent):
    """PortBench-QA (static questions): one call per question; the env scores the text."""

    task = "portbench_qa"

    def act(self, observation: Any, info: dict) -> str:
        self._st()
        prompt = observation["prompt"] if isinstance(observation, dict) else str(observation)
        res = self._call([{"role": "system", "content": SYSTEM_QA}, {"role": "user", "content": str(prompt)}],
                         meta={"task": "portbench_qa"})
        self._log(ok=res.ok, error=res.error, usage=res.usage)
        return (res.text or "") if res.ok else ""


class QuantArenaLLMAgent(LLMAgent):
    """Quant-Arena research loop / one-shot agent (see module docstring).

    Adapter options
    ---------------
    rounds : int or None — most candidates to submit (default: the env's budget).
    """

    task = "quant_arena"

    def _best(self, st: dict) -> int | None:
        best, best_v = None, None
        for k, fb in st["feedback"].items():
            if fb.get("status") == "ok" and fb.get("window"):
                v = fb["window"].get("excess_arr")
                if v is not None and (best_v is None or v > best_v):
                    best, best_v = k, v
        return best or (st["n"] or None)

    def _freeze(self, st: dict, k: int | None, how: str) -> dict:
        if k is None or not 1 <= k <= st["n"]:
            if k is not None:
                how += f"; index {k} out of range -> best research excess ARR"
            k = self._best(st)
        self._log(action="freeze", candidate=k, how=how)
        st["frozen"] = True
        return {"freeze": k}

    def _submit(self, st: dict, reply: str | None, err: str | None) -> str:
        code = extract_code(reply, "score") if reply else None
        if code is None:
            code = failure_source(err or "the reply held no Python code block")
        st["n"] += 1
        self._log(action="submit", candidate=st["n"], has_code=not code.startswith("raise RuntimeError"),
                  chars=len(code))
        return code

    def act(self, observation: Any, info: dict) -> Any:
        st = self._st()
        if "brief" in info or not st:
            facts = info.get("brief") or {}
            env = getattr(self._local, "env", None)
            mode = facts.get("mode") or getattr(getattr(env, "unwrapped", None), "mode", "iterative")
            budget = int(facts.get("budget") or info.get("budget_left") or 5)
            rounds = self.adapter_options.get("rounds")
            st.clear()
            st.update(mode=mode, cap=min(budget, int(rounds)) if rounds else budget, n=0, feedback={},
                      messages=[{"role": "system", "content": SYSTEM_QUANT_ARENA},
                                {"role": "user", "content": str(observation) + (QA_ONESHOT if mode == "oneshot"
                                                                                else QA_FIRST)}])
            res = self._call(st["messages"], meta={"task": "quant_arena", "turn": 1})
            st["messages"].append({"role": "assistant", "content": res.text if res.ok else ""})
            return self._submit(st, res.text if res.ok else None, None if res.ok else f"call failed: {res.error}")
        # a research feedback observation
        fb = info.get("feedback")
        if isinstance(fb, dict):
            st["feedback"][int(fb.get("candidate", st["n"]))] = fb
        budget_left = int(info.get("budget_left", 0))
        must_freeze = budget_left <= 0 or st["n"] >= st["cap"]
        st["messages"].append({"role": "user", "content": _qa_feedback_msg(str(observation), st["n"], budget_left,
                                                                           st["n"], must_freeze)})
        res = self._call(st["messages"], meta={"task": "quant_arena", "turn": st["n"] + 1,
                                               "must_freeze": must_freeze})
        st["messages"].append({"role": "assistant", "content": res.text if res.ok else ""})
        if not res.ok:
            return self._freeze(st, None, f"rule (call failed: {res.error})")
        found, k = extract_freeze(res.text)
        code = extract_code(res.text, "score")
        if must_freeze or (found and code is None):
            return self._freeze(st, k if found else None, "model" if found else "rule (no FREEZE line)")
        return self._submit(st, res.text, None)


class MarketBenchLLMAgent(LLMAgent):
    """Market-Bench agent: K independent attempts, or repair mode when the env gives feedback."""

    task = "market_bench"

    def _hash_subs(self) -> tuple[tuple[str, str], ...]:
        # the prompt names the env's temporary input folder: hash it as <WORKDIR> so that a replay or a
        # cache hit does not depend on the folder name
        env = getattr(self._local, "env", None)
        wd = getattr(getattr(env, "unwrapped", None), "workdir", None)
        return ((str(wd), "<WORKDIR>"),) if wd else ()

    def act(self, observation: Any, info: dict) -> str:
        st = self._st()
        used = int(observation.get("attempt", 0))
        feedback = str(observation.get("feedback") or "")
        if used == 0 or "messages" not in st:
            st.clear()
            st["messages"] = [{"role": "system", "content": SYSTEM_MARKET_BENCH},
                              {"role": "user", "content": str(observation["prompt"])}]
            st["last"] = None
        if feedback and st.get("last") is not None:  # repair mode: continue the conversation
            messages = st["messages"] + [{"role": "assistant", "content": st["last"]},
                                         {"role": "user", "content": _mb_repair_msg(feedback)}]
            st["messages"] = messages
            nonce, mode = 0, "repair"
        else:
            messages, nonce, mode = st["messages"][:2], used, "independent"
        res = self._call(messages, meta={"task": "market_bench", "attempt": used + 1, "mode": mode}, nonce=nonce)
        st["last"] = res.text if res.ok else ""
        code = extract_code(res.text, "run_backtest") if res.ok else None
        self._log(attempt=used + 1, mode=mode, ok=res.ok, error=res.error, has_code=code is not None,
                  usage=res.usage)
        if code is None:
            code = failure_source(f"call failed: {res.error}" if not res.ok else "the reply held no Python code block")
        return code


_ADAPTERS = {"portbench": PortBenchLLMAgent, "portbench_qa": PortBenchQALLMAgent, "quant_arena": QuantArenaLLMAgent,
             "market_bench": MarketBenchLLMAgent}
_ENGINE_OPTS = ("base_url", "temperature", "max_tokens", "timeout", "retries", "backoff_base", "backoff_max",
                "connect_timeout", "unreachable_tries", "unreachable_delay", "structured", "seed", "max_calls",
                "max_total_tokens", "price_in", "price_out")
_ADAPTER_OPTS = ("rounds",)


def price_for(model: str, prices: Any) -> tuple[float | None, float | None]:
    """(USD per 1M prompt tokens, per 1M completion tokens) of ``model`` in a price table.

    ``prices``: a dict or the path of a JSON file ``{"<model>": {"input": 0.15, "output": 0.6}, ...}``
    (a ``"*"`` entry is the default). A model missing from the table has no price (cost ``None``).

    Raises
    ------
    ValueError
        A table that is not a JSON object of objects with numeric ``input`` / ``output``.
    """
    if isinstance(prices, (str, os.PathLike)):
        import json

        try:
            prices = json.loads(Path(prices).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"price table {prices}: {exc}") from None
    if not isinstance(prices, dict):
        raise ValueError("price table must be a JSON object {model: {input, output}}")
    entry = prices.get(model, prices.get("*"))
    if entry is None:
        return None, None
    try:
        return float(entry["input"]), float(entry["output"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"price table entry for {model!r} must be {{\"input\": USD/1M, \"output\": USD/1M}}") from None


def build_agent(model: str, task: str = "portbench", *, api_key: str | None = None, transcript: Any = None,
                cache: bool = True, cache_from: Any = None, name: str | None = None, header: dict | None = None,
                **options: Any) -> LLMAgent:
    """An LLM agent for ``task`` on ``model`` (see :func:`quantgym.agents.llm.make_openai_agent`)."""
    if task not in _ADAPTERS:
        raise ValueError(f"unknown task {task!r}; choose from {TASKS}")
    unknown = set(options) - set(_ENGINE_OPTS) - set(_ADAPTER_OPTS) - {"prices"}
    if unknown:
        raise ValueError(f"unknown LLM agent option(s) {sorted(unknown)}; known: "
                         f"{sorted(_ENGINE_OPTS + _ADAPTER_OPTS + ('api_key', 'transcript', 'cache', 'cache_from', 'name', 'header', 'prices'))}")
    prices = options.pop("prices", None)
    if prices is not None and options.get("price_in") is None and options.get("price_out") is None:
        options["price_in"], options["price_out"] = price_for(model, prices)
    cfg = LLMConfig(model=model, **{k: v for k, v in options.items() if k in _ENGINE_OPTS and v is not None})
    adapter = {k: options[k] for k in _ADAPTER_OPTS if options.get(k) is not None}
    if transcript is None:
        transcript = default_transcript_path(task, model)
    elif transcript is False:
        transcript = None
    if isinstance(cache_from, (str, os.PathLike)):
        cache_from = [cache_from]
    label = name or f"openai:{model}"
    engine = ChatEngine(cfg, api_key=api_key, transcript=transcript, cache=cache, cache_from=cache_from,
                        header_extra={**(header or {}), "task": task, "agent_name": label,
                                      "adapter_options": adapter})
    return _ADAPTERS[task](engine, name=label, **adapter)


def build_replay_agent(path: str | os.PathLike, task: str | None = None, name: str | None = None) -> LLMAgent:
    """An agent that replays transcript ``path`` offline (same name, options and answers as the run)."""
    engine = ReplayEngine(path)
    rec_task = engine.header.get("task")
    if task is not None and rec_task is not None and task != rec_task:
        raise ValueError(f"transcript {path} was recorded for task {rec_task!r}, not {task!r}")
    task = task or rec_task or "portbench"
    return _ADAPTERS[task](engine, name=name or engine.header.get("agent_name"),
                           **dict(engine.header.get("adapter_options") or {}))


__all__ = ["LLMAgent", "PortBenchLLMAgent", "PortBenchQALLMAgent", "QuantArenaLLMAgent", "MarketBenchLLMAgent",
           "build_agent", "build_replay_agent", "default_transcript_path", "price_for", "TASKS"]
