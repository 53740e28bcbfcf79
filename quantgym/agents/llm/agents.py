"""LLM agents: one chat engine, one adapter per task (PortBench, Quant-Arena, Market-Bench, PortBench-QA).

Each agent is a policy for :func:`quantgym.evaluation.evaluate` (``reset(env)``, ``act(obs, info)``)
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
import math
import os
import re
import threading
from pathlib import Path
from typing import Any, Callable

from quantgym.agents.llm.client import ChatEngine, LLMConfig, ReplayEngine
from quantgym.agents.llm.code import extract_code, extract_freeze, failure_source

#: completion caps of the free-text and code answers with ``max_tokens="auto"`` [project choice]; PortBench's
#: JSON stage answers get :func:`~quantgym.agents.llm.tokens.schema_token_bound` of their schema instead
OUTPUT_CAPS = {"portbench_qa": 256, "quant_arena": 2048, "market_bench": 3072}
#: tokens kept free between prompt + cap and the context window [project choice]
CONTEXT_MARGIN = 16
#: smallest completion cap the fitting may shrink a cap to [project choice]
MIN_CAP = 64

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
    fence = "json" if obs.lstrip().startswith("{") else ""  # the minimal style's feedback is plain text lines
    head = f"Research feedback for candidate {k}:\n```{fence}\n{obs}\n```\n"
    if must_freeze:
        return head + (f"No more candidates can be submitted. Reply with the single line FREEZE <k> (k in 1..{n}) "
                       "naming the candidate to evaluate on the sealed window.")
    return head + (f"Budget left: {budget_left} candidate(s). Reply with an improved complete module in one "
                   f"```python block, or with the single line FREEZE <k> (k in 1..{n}) to stop and freeze "
                   "candidate k.")


def _mb_repair_msg(feedback: str, limit: int = 20000) -> str:
    return ("Your backtester was run on the input files:\n" + feedback[:limit]
            + "\n\nFix it and reply with the complete corrected module in one ```python code block.")


def _fit_log(res: Any) -> dict:
    """What the context budget chose for a call (for the agent's decision log)."""
    m = getattr(res, "meta", None) or {}
    return {k: m[k] for k in ("prompt_style", "prompt_tokens_est", "max_tokens", "cap_cut", "refit") if k in m}


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
    task : a task name of :mod:`quantgym.tasks` whose record names this class as its ``llm`` adapter.
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

    def llm_summary(self, label: str | None) -> dict[str, Any] | None:
        """Per-episode record of what the context budget and the endpoint chose: prompt styles, structured
        rungs, re-rendered prompts, cut caps and warnings (e.g. a server that truncated a prompt)."""
        if label is None:
            return None
        styles: dict[str, int] = {}
        rungs: dict[str, int] = {}
        warnings: list[str] = []
        refits = cut = 0
        for e in self.logs.get(label, []):
            if e.get("prompt_style"):
                styles[e["prompt_style"]] = styles.get(e["prompt_style"], 0) + 1
            if e.get("rung"):
                rungs[e["rung"]] = rungs.get(e["rung"], 0) + 1
            refits += bool(e.get("refit"))
            cut += bool(e.get("cap_cut"))
            if e.get("warning") and e["warning"] not in warnings:
                warnings.append(e["warning"])
        eng = self.engine
        return {"prompt_styles": styles, "rungs": rungs, "refits": refits, "caps_cut": cut, "warnings": warnings,
                "context_window": eng.context_window() if eng is not None else None,
                "context_source": eng.context_source() if eng is not None else None}

    def episode_usage(self, label: str | None = None) -> dict[str, Any]:
        """Calls, cache hits, failures, tokens, cost and latency of one episode (default: the current one)."""
        label = label or self.current_episode
        st = dict(self.engine.episode_stats.get(label, {}))
        if self.engine.config.price_in is None and self.engine.config.price_out is None:
            st["cost_usd"] = None
        return st

    def step_record(self) -> dict[str, Any] | None:
        """What this agent sent at the step just taken (merged into the step record by ``evaluate``):
        ``prompt_style`` (the style actually sent, which may differ from the env's own) and ``llm``
        (rung, cap, estimated prompt tokens, re-render, cut cap, finish reason, warning, error kind)."""
        label = self.current_episode
        log = self.logs.get(label) if label is not None else None
        if not log:
            return None
        lg = log[-1]
        out: dict[str, Any] = {"llm": {k: lg.get(k) for k in ("rung", "max_tokens", "prompt_tokens_est", "refit",
                                                             "cap_cut", "finish_reason", "warning", "error_kind")
                                      if lg.get(k) is not None}}
        if lg.get("prompt_style"):
            out["prompt_style"] = lg["prompt_style"]
        return out

    def usage(self) -> dict[str, Any]:
        """Run totals (see :meth:`ChatEngine.usage`)."""
        return self.engine.usage()

    def _hash_subs(self) -> tuple[tuple[str, str], ...]:
        return ()

    def _styles(self, env: Any) -> tuple[str, ...]:
        """Prompt styles to try, richest first: the configured one, or every style the env renders."""
        from quantgym.spaces import PROMPT_STYLES

        base = getattr(env, "unwrapped", env)
        can = callable(getattr(base, "render_prompt", None))
        want = self.engine.config.prompt_style
        if want != "auto":
            return (want,) if can or want == "full" else ("full",)
        return PROMPT_STYLES if can else ("full",)

    def _fit(self, build: Callable[[str], list[dict]], styles: tuple[str, ...], cap: int | None,
             window: int | None, scale: float = 1.0, cut: bool = True) -> tuple[list[dict], int | None, dict]:
        """(messages, cap, meta) of the richest style whose prompt and ``cap`` fit ``window``.

        Token counts are :func:`~quantgym.agents.llm.tokens.estimate_tokens` (× ``scale``, the server's own
        count over the estimate after a context-length error). No style fits with the full cap: the
        smallest style, with the cap cut to what is left (at least ``MIN_CAP``) when ``cut``."""
        from quantgym.agents.llm.tokens import messages_tokens

        last = None
        for style in styles:
            msgs = build(style)
            est = int(math.ceil(scale * messages_tokens(msgs)))
            last = (style, msgs, est)
            if window is None or est + (cap or 0) + CONTEXT_MARGIN <= window:
                return msgs, cap, {"prompt_style": style, "prompt_tokens_est": est, "max_tokens": cap}
        style, msgs, est = last
        if not cut or cap is None:
            return msgs, cap, {"prompt_style": style, "prompt_tokens_est": est, "max_tokens": cap}
        new_cap = min(cap, max(MIN_CAP, window - est - CONTEXT_MARGIN))
        return msgs, new_cap, {"prompt_style": style, "prompt_tokens_est": est, "max_tokens": new_cap,
                               "cap_cut": True}

    def _fitted_call(self, build: Callable[[str], list[dict]], *, cap: int | None, schema: dict | None = None,
                     meta: dict | None = None, nonce: int = 0):
        """One call whose prompt (``build(style) -> messages``) and cap fit the context window.

        ``cap`` is the call's own cap (``max_tokens="auto"``). A fixed ``max_tokens=N`` is sent as it is
        (never cut); with ``max_tokens=None`` no cap is sent, but the call's own cap is still kept free
        in the window for the answer. The window is the configured one, the server's metadata (probed
        once) or, after a context-length error, the one the error names (or the bound it implies): the
        prompt is then re-rendered once, unless that would resend the same request.
        """
        from quantgym.agents.llm.tokens import messages_tokens

        env = getattr(self._local, "env", None)
        styles = self._styles(env)
        mode = self.engine.config.max_tokens
        reserve = cap if mode in ("auto", None) else mode  # the room the answer needs in the window
        window = self.engine.probe_context_window()

        def fit(win: int | None, scale: float = 1.0):
            msgs, c, f = self._fit(build, styles, reserve, win, scale, cut=(mode == "auto"))
            sent_cap = c if mode == "auto" else mode  # what build_request sends
            return msgs, sent_cap, {**f, "max_tokens": sent_cap}

        msgs, cap2, info = fit(window)
        sent = {"n": messages_tokens(msgs), "msgs": msgs, "cap": cap2}

        def refit(window: int | None, needed: int | None):
            if window is None:
                window = self.engine.context_window()  # the bound an unnumbered error implies, if any
            scale = max(1.0, (needed / sent["n"])) if needed and window else 1.0
            if window is None:  # nothing learned: one style smaller, the same cap
                i = styles.index(info["prompt_style"]) if info["prompt_style"] in styles else len(styles) - 1
                if i + 1 >= len(styles):
                    return None
                m = build(styles[i + 1])
                return m, cap2, {"prompt_style": styles[i + 1], "prompt_tokens_est": messages_tokens(m)}
            m, c, f = fit(window, scale)
            if m == sent["msgs"] and c == sent["cap"]:
                return None  # the same request again would fail the same way: a recorded failure
            return m, c, {**f, "context_window": window}

        return self.engine.chat(msgs, schema=schema, meta={**(meta or {}), **info}, nonce=nonce,
                                hash_subs=self._hash_subs(), max_tokens=cap2, refit=refit)

    def close(self) -> None:
        """Close the transcript (flushes nothing more: every line is already on disk)."""
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
        stage_schema = wrapper.json_schema() if wrapper is not None else None
        schema = stage_schema if self.engine.config.structured != "off" else None
        from quantgym.agents.llm.tokens import schema_token_bound

        cap = schema_token_bound(stage_schema) if stage_schema is not None else OUTPUT_CAPS["portbench_qa"]
        base = getattr(env, "unwrapped", None)
        snap = getattr(base, "snapshot", None)
        # the decision date of this prompt (info["date"] still names the date just finished when a new S1 starts)
        date = str(snap.decision_date.date()) if snap is not None else info.get("date")
        meta = {"task": "portbench", "date": date, "stage": ("S1", "S2", "S3")[stage], "attempt": attempt}
        full = str(observation["prompt"])

        def build(style: str) -> list[dict]:
            if style == "full" or base is None:
                text = full  # what the env (and the wrapper's re-ask suffix) put in the observation
            else:
                from quantgym.envs.portbench.prompts import FORMAT_CORRECTION_SUFFIX

                text = base.render_prompt(style=style) + (FORMAT_CORRECTION_SUFFIX if attempt > 1 else "")
            return [{"role": "system", "content": SYSTEM_PORTBENCH}, {"role": "user", "content": text}]

        # the re-ask prompt is the same on attempts 2 and 3 (§11.5): the attempt enters the request hash so
        # the cache never answers a re-ask with the answer that just failed
        nonce = 2 * (attempt - 1)
        res = self._fitted_call(build, cap=cap, schema=schema, meta=meta, nonce=nonce)
        extra = False
        if res.ok and not (res.text or "").strip():
            extra = True  # §4.0: an empty API response gets one extra call before it counts as a refusal
            res = self._fitted_call(build, cap=cap, schema=schema, meta={**meta, "extra_call": True}, nonce=nonce + 1)
        self._log(**meta, **_fit_log(res), ok=res.ok, error=res.error, error_kind=res.error_kind, extra_call=extra,
                  structured=res.structured, rung=res.rung, usage=res.usage, cached=res.cached, warning=res.warning,
                  finish_reason=res.finish_reason)
        if not res.ok:
            return None
        return res.text or ""


class PortBenchQALLMAgent(LLMAgent):
    """PortBench-QA (static questions): one call per question; the env scores the text."""

    task = "portbench_qa"

    def act(self, observation: Any, info: dict) -> str:
        self._st()
        prompt = observation["prompt"] if isinstance(observation, dict) else str(observation)
        base = getattr(getattr(self._local, "env", None), "unwrapped", None)

        def build(style: str) -> list[dict]:
            text = str(prompt) if style == "full" or base is None else base.render_prompt(style=style)
            return [{"role": "system", "content": SYSTEM_QA}, {"role": "user", "content": text}]

        res = self._fitted_call(build, cap=OUTPUT_CAPS["portbench_qa"], meta={"task": "portbench_qa"})
        self._log(**_fit_log(res), ok=res.ok, error=res.error, usage=res.usage, warning=res.warning)
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

    def _variants(self, text: str) -> dict[str, str]:
        """The current observation in every prompt style the env renders (``full`` = ``text``)."""
        env = getattr(self._local, "env", None)
        base = getattr(env, "unwrapped", None)
        out = {"full": text}
        for style in self._styles(env):
            if style != "full":
                out[style] = base.render_prompt(style=style)
        return out

    def _build(self, st: dict) -> Callable[[str], list[dict]]:
        """Conversation renderer: ``full`` sends every turn as it was; ``compact`` keeps the code of the
        last two candidates and renders brief and feedback compactly; ``minimal`` keeps only the last
        candidate's code (earlier ones are named, not repeated) [project choice]."""
        turns = list(st["turns"])

        def build(style: str) -> list[dict]:
            keep_code = {"full": None, "compact": 2, "minimal": 1}.get(style, 1)
            codes = [i for i, t in enumerate(turns) if t["role"] == "assistant"]
            drop = set(codes[:-keep_code]) if keep_code is not None and len(codes) > keep_code else set()
            msgs = [{"role": "system", "content": SYSTEM_QUANT_ARENA}]
            k = 0
            for i, t in enumerate(turns):
                if t["role"] == "assistant":
                    k += 1
                    text = (f"[candidate {k}: code omitted to fit the context window; its feedback follows]"
                            if i in drop else t["text"])
                    msgs.append({"role": "assistant", "content": text})
                else:
                    v = t["variants"]
                    msgs.append({"role": "user", "content": v.get(style, v["full"]) + t.get("suffix", "")})
            return msgs

        return build

    def _turn(self, st: dict, meta: dict):
        res = self._fitted_call(self._build(st), cap=OUTPUT_CAPS["quant_arena"], meta=meta)
        self._log(action="call", **meta, **_fit_log(res), ok=res.ok, error=res.error, usage=res.usage,
                  warning=res.warning)
        st["turns"].append({"role": "assistant", "text": res.text if res.ok else ""})
        return res

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
                      turns=[{"role": "user", "variants": self._variants(str(observation)),
                              "suffix": QA_ONESHOT if mode == "oneshot" else QA_FIRST}])
            res = self._turn(st, {"task": "quant_arena", "turn": 1})
            return self._submit(st, res.text if res.ok else None, None if res.ok else f"call failed: {res.error}")
        # a research feedback observation
        fb = info.get("feedback")
        if isinstance(fb, dict):
            st["feedback"][int(fb.get("candidate", st["n"]))] = fb
        budget_left = int(info.get("budget_left", 0))
        must_freeze = budget_left <= 0 or st["n"] >= st["cap"]
        variants = {k: _qa_feedback_msg(v, st["n"], budget_left, st["n"], must_freeze)
                    for k, v in self._variants(str(observation)).items()}
        st["turns"].append({"role": "user", "variants": variants})
        res = self._turn(st, {"task": "quant_arena", "turn": st["n"] + 1, "must_freeze": must_freeze})
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

    def _prompt_variants(self, text: str) -> dict[str, str]:
        env = getattr(self._local, "env", None)
        base = getattr(env, "unwrapped", None)
        return {s: (text if s == "full" else base.render_prompt(style=s)) for s in self._styles(env)}

    def act(self, observation: Any, info: dict) -> str:
        st = self._st()
        used = int(observation.get("attempt", 0))
        feedback = str(observation.get("feedback") or "")
        if used == 0 or "turns" not in st:
            st.clear()
            st["turns"] = [{"role": "user", "variants": self._prompt_variants(str(observation["prompt"]))}]
            st["last"] = None
        if feedback and st.get("last") is not None:  # repair mode: continue the conversation
            st["turns"] += [{"role": "assistant", "text": st["last"]},
                            {"role": "user", "feedback": feedback}]
            turns, nonce, mode = list(st["turns"]), 0, "repair"
        else:
            turns, nonce, mode = st["turns"][:1], used, "independent"

        def build(style: str) -> list[dict]:
            msgs = [{"role": "system", "content": SYSTEM_MARKET_BENCH}]
            for t in turns:
                if t["role"] == "assistant":
                    msgs.append({"role": "assistant", "content": t["text"]})
                elif "feedback" in t:  # [project choice] the failure trace is cut to fit the style
                    limit = {"full": 20000, "compact": 4000}.get(style, 1500)
                    msgs.append({"role": "user", "content": _mb_repair_msg(t["feedback"], limit)})
                else:
                    msgs.append({"role": "user", "content": t["variants"].get(style, t["variants"]["full"])})
            return msgs

        res = self._fitted_call(build, cap=OUTPUT_CAPS["market_bench"],
                                meta={"task": "market_bench", "attempt": used + 1, "mode": mode}, nonce=nonce)
        st["last"] = res.text if res.ok else ""
        code = extract_code(res.text, "run_backtest") if res.ok else None
        self._log(attempt=used + 1, mode=mode, **_fit_log(res), ok=res.ok, error=res.error, has_code=code is not None,
                  usage=res.usage, warning=res.warning)
        if code is None:
            code = failure_source(f"call failed: {res.error}" if not res.ok else "the reply held no Python code block")
        return code


def _adapter(task: str) -> type[LLMAgent]:
    """The LLM adapter class of ``task`` (its record's ``llm`` in :mod:`quantgym.tasks`).

    Raises
    ------
    ValueError
        Unknown task, or a task without an LLM adapter.
    """
    from quantgym.tasks import get_task, load_ref, tasks

    record = get_task(task)
    if record.llm is None:
        have = ", ".join(t.name for t in tasks() if t.llm)
        raise ValueError(f"task {task!r} has no LLM agent; tasks with one: {have}")
    return load_ref(record.llm)
_ENGINE_OPTS = ("base_url", "temperature", "max_tokens", "context_window", "prompt_style", "timeout", "retries", "backoff_base", "backoff_max",
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
    adapter_cls = _adapter(task)
    unknown = set(options) - set(_ENGINE_OPTS) - set(_ADAPTER_OPTS) - {"prices"}
    if unknown:
        raise ValueError(f"unknown LLM agent option(s) {sorted(unknown)}; known: "
                         f"{sorted(_ENGINE_OPTS + _ADAPTER_OPTS + ('api_key', 'transcript', 'cache', 'cache_from', 'name', 'header', 'prices'))}")
    prices = options.pop("prices", None)
    if prices is not None and options.get("price_in") is None and options.get("price_out") is None:
        options["price_in"], options["price_out"] = price_for(model, prices)
    cfg = LLMConfig(model=model, **{k: v for k, v in options.items()
                                    if k in _ENGINE_OPTS and (v is not None or k == "max_tokens")})
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
    return adapter_cls(engine, name=label, **adapter)


def build_replay_agent(path: str | os.PathLike, task: str | None = None, name: str | None = None) -> LLMAgent:
    """An agent that replays transcript ``path`` offline (same name, options and answers as the run)."""
    engine = ReplayEngine(path)
    rec_task = engine.header.get("task")
    if task is not None and rec_task is not None and task != rec_task:
        raise ValueError(f"transcript {path} was recorded for task {rec_task!r}, not {task!r}")
    task = task or rec_task or "portbench"
    return _adapter(task)(engine, name=name or engine.header.get("agent_name"),
                           **dict(engine.header.get("adapter_options") or {}))


__all__ = ["LLMAgent", "PortBenchLLMAgent", "PortBenchQALLMAgent", "QuantArenaLLMAgent", "MarketBenchLLMAgent",
           "build_agent", "build_replay_agent", "default_transcript_path", "price_for"]
