"""LLM agents: one chat engine and the base of the per-task adapters.

Longer than 500 lines as one job, the agent side of a call: the prompt fitting, the stage loop and the tool
loop share the engine's per-thread state.

Each agent is a policy for :func:`quantgym.evaluation.evaluate` (``reset(env)``, ``act(obs, info)``)
and may be shared by several threads, each running its own episodes: per-episode state lives in
thread-local storage, the engine (HTTP client, transcript, cache, budget) is shared.

The adapters live with their tasks and are found through the task registry (the ``llm`` entry of a
:class:`quantgym.tasks.Task`): PortBench's stagewise protocol and static QA in
:mod:`quantgym.envs.portbench.llm`, the Quant-Arena research loop in :mod:`quantgym.envs.quant_arena.llm`,
Market-Bench's attempts in :mod:`quantgym.envs.market_bench.llm`. An adapter subclasses :class:`LLMAgent`,
sets ``task``, ``output_cap`` (its completion cap with ``max_tokens="auto"``), implements ``act`` and
``dry_run`` (``quantgym eval --dry-run``).

Tool mode (an env made with ``tools=True``, whose ``env.unwrapped.toolbox`` is set): every adapter's ``act``
runs inside :meth:`LLMAgent._act_with_tools` (installed by ``__init_subclass__``), so the adapters stay as
they are. A stage's model call offers the toolbox; a reply with tool calls becomes tool-call actions
``{"tool": name, "arguments": {...}}``, returned one per step (parallel calls in one reply in their order);
each result comes back as the next observation (``info["tool"]``) and joins the conversation; once every
call of the reply has its result, the adapter's ``act`` runs again on the stage observation (its per-episode
state restored) and its call continues the conversation. A reply without tool calls is the stage answer.
The tool-calling rung (:data:`~quantgym.agents.llm.client.TOOL_RUNGS`) is the engine's, found from the
server's answers and recorded in the transcript, so a replay takes the same path.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import math
import os
import threading
from pathlib import Path
from typing import Any, Callable

from quantgym.agents.llm.client import DEFAULT_BASE_URL, ChatEngine, LLMConfig
from quantgym.agents.llm.replay import ReplayEngine

#: tokens kept free between prompt + cap and the context window [project choice]
CONTEXT_MARGIN = 16
#: smallest completion cap the fitting may shrink a cap to [project choice]
MIN_CAP = 64
#: model calls of one stage conversation in tool mode after which the tools are withheld and the model must
#: answer (the env's call budget usually ends the calls first) [project choice]
MAX_TOOL_ROUNDS = 12
#: smallest completion cap of a call that may answer with a tool call [project choice: room for a call's JSON]
TOOL_CALL_CAP = 256
#: the JSON action protocol (tool rung ``json``): appended to the system message [project choice]
TOOL_PROTOCOL = (
    "\n\nYou can call tools before you answer. To call one, reply with only the JSON object "
    '{{"tool": "<name>", "arguments": {{...}}}}; its result comes back in the next message. When you are '
    "ready, reply with your answer as the stage asks.\nTools:\n{tools}"
)
#: the last message of a stage conversation whose tools are withheld (budget used up) [project choice]
TOOLS_WITHHELD = "No more tool calls are available for this stage: give your answer now."


class _ToolCallsPending(Exception):
    """Raised inside an adapter's call when the model answered with tool calls (caught by the tool loop)."""


def _tool_loop(act: Callable) -> Callable:
    @functools.wraps(act)
    def act_with_tools(self, observation: Any, info: dict) -> Any:
        return self._act_with_tools(act, observation, info)

    act_with_tools._tool_loop = True  # type: ignore[attr-defined]
    return act_with_tools


def tool_protocol_text(schemas: list[dict]) -> str:
    """The JSON action protocol's instructions listing ``schemas`` (OpenAI ``tools=`` entries)."""
    lines = []
    for t in schemas:
        f = t.get("function") or {}
        lines.append(f"- {f.get('name')}: {' '.join(str(f.get('description') or '').split())} Arguments (JSON "
                     f"schema): {json.dumps(f.get('parameters') or {}, sort_keys=True)}")
    return TOOL_PROTOCOL.format(tools="\n".join(lines))


def tool_or_answer_schema(schemas: list[dict], stage_schema: dict | None) -> dict:
    """The ``json_schema`` of a JSON-protocol reply: one tool call (its arguments per the tool's schema), or
    the stage answer (the stage's schema; a stage without one answers ``{"answer": "<text>"}``)."""
    calls = [{"type": "object", "properties": {"tool": {"type": "string", "enum": [t["function"]["name"]]},
                                                "arguments": t["function"].get("parameters") or {"type": "object"}},
              "required": ["tool", "arguments"]} for t in schemas]
    answer = (stage_schema.get("schema", stage_schema) if stage_schema is not None
              else {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]})
    return {"name": "tool_call_or_answer", "schema": {"anyOf": calls + [answer]}, "strict": False}


def parse_json_action(text: str | None) -> tuple[str, Any] | str:
    """A JSON-protocol reply: ``(tool, arguments)`` for a tool call, else the stage answer's text
    (``{"answer": X}`` gives X; any other reply is the answer as it stands)."""
    raw = (text or "").strip()
    body = raw
    if body.startswith("```"):
        body = body.strip("`")
        body = body[body.find("{"):] if "{" in body else body
    try:
        obj = json.loads(body)
    except ValueError:
        start, end = body.find("{"), body.rfind("}")
        try:
            obj = json.loads(body[start:end + 1]) if 0 <= start < end else None
        except ValueError:
            obj = None
    if isinstance(obj, dict) and isinstance(obj.get("tool"), str) and set(obj) <= {"tool", "arguments"}:
        return obj["tool"], obj.get("arguments", {})
    if isinstance(obj, dict) and set(obj) == {"answer"}:
        a = obj["answer"]
        return a if isinstance(a, str) else json.dumps(a)
    return raw


def fit_log(res: Any) -> dict:
    """What the context budget chose for a call (for the agent's decision log)."""
    m = getattr(res, "meta", None) or {}
    return {k: m[k] for k in ("prompt_style", "prompt_tokens_est", "max_tokens", "cap_cut", "refit", "tool_rung")
            if k in m}


def find_wrapper(env: Any, cls_name: str) -> Any:
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
    #: where the token prices came from (:func:`quantgym.agents.llm.prices.resolve_price`; None: unknown)
    price_source: str | None = None
    #: completion cap of a free-text or code answer with ``max_tokens="auto"`` [project choice, per adapter]
    output_cap = 256

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        act = cls.__dict__.get("act")
        if act is not None and not getattr(act, "_tool_loop", False):
            cls.act = _tool_loop(act)

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
            if isinstance(v, (str, int)):  # a value, not an env's helper object (PortBench's fidelity mode)
                parts.append(str(v))
        if getattr(base, "blind", False) is True:  # the blind episode of a pair (--blind both, docs/blind.md)
            parts.append("blind")
        with self._lock:
            n = next(self._counter)
        return "/".join(parts) + f"#{n}"

    def reset(self, env: Any) -> None:
        """Start an episode on ``env`` in the calling thread (called by ``evaluate`` after ``env.reset``)."""
        label = self._label(env)
        self._local.env = env
        self._local.label = label
        self._local.state = {}
        self._local.tools = None
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
        tool_rungs: dict[str, int] = {}
        tool_calls = malformed = 0
        for e in self.logs.get(label, []):
            if e.get("tool_rung") and not e.get("tool_call"):  # a model call (not a call it made)
                tool_rungs[e["tool_rung"]] = tool_rungs.get(e["tool_rung"], 0) + 1
            tool_calls += bool(e.get("tool_call"))
            malformed += bool(e.get("malformed"))
            if e.get("prompt_style"):
                styles[e["prompt_style"]] = styles.get(e["prompt_style"], 0) + 1
            if e.get("rung"):
                rungs[e["rung"]] = rungs.get(e["rung"], 0) + 1
            refits += bool(e.get("refit"))
            cut += bool(e.get("cap_cut"))
            if e.get("warning") and e["warning"] not in warnings:
                warnings.append(e["warning"])
        eng = self.engine
        tools = ({"tool_rungs": tool_rungs, "tool_calls": tool_calls, "malformed_tool_calls": malformed}
                 if tool_rungs else {})
        return {"prompt_styles": styles, "rungs": rungs, "refits": refits, "caps_cut": cut, "warnings": warnings,
                **tools,
                "context_window": eng.context_window() if eng is not None else None,
                "context_source": eng.context_source() if eng is not None else None}

    def episode_usage(self, label: str | None = None) -> dict[str, Any]:
        """Calls, cache hits, failures, tokens, cost and latency of one episode (default: the current one)."""
        label = label or self.current_episode
        st = dict(self.engine.episode_stats.get(label, {}))
        if self.engine.config.price_in is None and self.engine.config.price_out is None:
            st["cost_usd"] = None
        st["price_source"] = self.price_source
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
                                                             "cap_cut", "finish_reason", "warning", "error_kind",
                                                             "tool_rung", "tool_call", "tool_call_id", "malformed")
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

    # ---------------------------------------------------------------- tool mode
    def _act_with_tools(self, act: Callable, observation: Any, info: dict) -> Any:
        """``act`` of an adapter with the tool loop around it (see the module docstring)."""
        env = getattr(self._local, "env", None)
        toolbox = getattr(getattr(env, "unwrapped", env), "toolbox", None) if env is not None else None
        tl = getattr(self._local, "tools", None)
        result = info.get("tool") if isinstance(info, dict) else None
        if result is not None and tl is not None:  # the result of the call returned at the last step
            self._tool_result(tl, result, observation)
            if tl["pending"]:
                return self._next_tool_action(tl)
            # every call of the reply has its result: the stage's call again, the conversation extended
            self._local.state = copy.deepcopy(tl["snapshot"])
            observation, info = tl["obs"], tl["info"]
        elif toolbox is None:
            self._local.tools = None
            return act(self, observation, info)
        else:  # a stage observation: a new conversation
            tl = {"obs": observation, "info": info, "snapshot": copy.deepcopy(self._st()), "conv": [],
                  "pending": [], "rounds": 0, "calls_left": None}
            self._local.tools = tl
        try:
            return act(self, observation, info)
        except _ToolCallsPending:
            return self._next_tool_action(tl)

    def _next_tool_action(self, tl: dict) -> dict:
        c = tl["pending"][0]
        self._log(tool_call=c["name"], tool_call_id=c["id"], arguments=c["arguments"], tool_rung=c["rung"],
                  malformed=c["malformed"] or None)
        return {"tool": c["name"], "arguments": c["arguments"]}

    def _tool_result(self, tl: dict, result: dict, observation: Any) -> None:
        """Add the env's result of the first pending call to the conversation (and the transcript)."""
        c = tl["pending"].pop(0)
        content = result.get("content")
        if content is None:
            content = observation.get("prompt") if isinstance(observation, dict) else observation
        content = str(content)
        if result.get("calls_left") is not None:  # a used-up call or character budget: the tools are withheld
            left = [int(result[k]) for k in ("calls_left", "chars_left") if result.get(k) is not None]
            tl["calls_left"] = min(left)
        if c["rung"] == "native":
            tl["conv"].append({"role": "tool", "tool_call_id": c["id"], "content": content})
        else:
            tl["conv"].append({"role": "user", "content": f"Result of {c['name']}:\n{content}"})
        if self.engine.transcript is not None:
            from quantgym.agents.llm.transcript import utc_timestamp

            self.engine.transcript.write({"type": "tool", "ts": utc_timestamp(), "episode": self.current_episode,
                                          "id": c["id"], "tool": c["name"], "arguments": c["arguments"],
                                          "rung": c["rung"], "malformed": c["malformed"], "meta": c.get("meta"),
                                          "ok": result.get("ok"), "error": result.get("error"),
                                          "truncated": result.get("truncated"), "content": content})

    def _tool_turn(self, tl: dict, build: Callable[[str], list[dict]], *, cap: int | None, schema: dict | None,
                   meta: dict | None, nonce: int):
        """One model call of a stage conversation in tool mode: tool calls raise :class:`_ToolCallsPending`
        (the loop returns them one per step), a reply without one is returned as the stage answer."""
        env = getattr(self._local, "env", None)
        toolbox = getattr(getattr(env, "unwrapped", env), "toolbox", None)
        schemas = list(toolbox.schemas()) if toolbox is not None else []
        # past the env's budget the tools stay declared with tool_choice "none" (calls a server still returns go
        # to the env, which answers budget_exhausted); past MAX_TOOL_ROUNDS they are no longer sent at all
        cut_off = not schemas or tl["rounds"] >= MAX_TOOL_ROUNDS
        withheld = cut_off or (tl["calls_left"] is not None and tl["calls_left"] <= 0)
        res = None
        for _ in range(3):  # the tool ladder steps down at most twice
            rung = self.engine.tool_rung()
            conv = list(tl["conv"])
            if withheld and conv:
                conv.append({"role": "user", "content": TOOLS_WITHHELD})
            if rung == "json" and not withheld:
                protocol = tool_protocol_text(schemas)

                def build_rung(style: str, protocol=protocol) -> list[dict]:
                    msgs = [dict(m) for m in build(style)]
                    if msgs and msgs[0].get("role") == "system":
                        msgs[0]["content"] = str(msgs[0].get("content") or "") + protocol
                    else:
                        msgs.insert(0, {"role": "system", "content": protocol.strip()})
                    return msgs + conv

                sch = tool_or_answer_schema(schemas, schema) if self.engine.config.structured != "off" else None
            else:
                def build_rung(style: str) -> list[dict]:
                    return list(build(style)) + conv

                # while the tools are offered natively, no response_format: a server that constrains the whole
                # reply to its grammar lets it override the tools (llama.cpp's chat parser builds its grammar
                # from response_format alone, common/chat-auto-parser-generator.cpp), so no call could be
                # made; the answer is parsed from the reply's text, and the schema returns once they are withheld
                sch = None if rung == "native" and not withheld else schema
            send_tools = schemas if rung == "native" and not cut_off else None
            choice = "none" if withheld else "auto"
            tcap = cap if rung == "text" or withheld else max(cap or 0, TOOL_CALL_CAP)
            shown = "text" if withheld else rung
            res = self._fitted_call(build_rung, cap=tcap, schema=sch, nonce=nonce, tools=send_tools,
                                    tool_choice=choice, meta={**(meta or {}), "tool_rung": shown,
                                                              "tool_round": tl["rounds"] + 1})
            if res.unsupported == "tools":
                self._log(**(meta or {}), tool_rung=rung, ok=False, error=res.error, error_kind="unsupported",
                          warning=f"the server refused tools: tool calling steps down to {self.engine.tool_rung()}")
                continue
            break
        tl["rounds"] += 1
        if not res.ok or cut_off or rung == "text" or (withheld and rung == "json"):
            return res
        calls: list[dict] = []
        if rung == "native" and res.tool_calls:
            for i, c in enumerate(res.tool_calls):
                try:
                    args = json.loads(c["arguments"]) if c["arguments"].strip() else {}
                except ValueError:
                    args = None
                ok = isinstance(args, dict)
                calls.append({"id": c.get("id") or f"call_{tl['rounds']}_{i + 1}", "name": c["name"],
                              "arguments": args if ok else c["arguments"], "raw": c["arguments"],
                              "rung": "native", "malformed": not ok})
            # content "" rather than null: llama-cpp-python's server takes only a string there
            tl["conv"].append({"role": "assistant", "content": res.text or "", "tool_calls": [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["raw"]}}
                for c in calls]})
        elif rung == "json":
            parsed = parse_json_action(res.text)
            if isinstance(parsed, tuple):
                name, args = parsed
                calls.append({"id": f"call_{tl['rounds']}_1", "name": name, "arguments": args, "raw": res.text,
                              "rung": "json", "malformed": not isinstance(args, dict)})
                tl["conv"].append({"role": "assistant", "content": res.text})
            else:
                res.text = parsed
        if calls:
            for c in calls:
                c["meta"] = dict(meta or {})  # the stage the call serves (date, stage, attempt: the adapter's)
            tl["pending"] = calls
            # the model call that made the calls (the adapter logs the call that answers the stage)
            self._log(**(meta or {}), **fit_log(res), ok=True, rung=res.rung, usage=res.usage, cached=res.cached,
                      finish_reason=res.finish_reason, warning=res.warning, tool_calls_made=len(calls))
            raise _ToolCallsPending()
        return res

    def _fitted_call(self, build: Callable[[str], list[dict]], *, cap: int | None, schema: dict | None = None,
                     meta: dict | None = None, nonce: int = 0, tools: list[dict] | None = None,
                     tool_choice: str = "auto"):
        """One call whose prompt (``build(style) -> messages``) and cap fit the context window.

        ``cap`` is the call's own cap (``max_tokens="auto"``). A fixed ``max_tokens=N`` is sent as it is
        (never cut); with ``max_tokens=None`` no cap is sent, but the call's own cap is still kept free
        in the window for the answer. The window is the configured one, the server's metadata (probed
        once) or, after a context-length error, the one the error names (or the bound it implies): the
        prompt is then re-rendered once, unless that would resend the same request.

        In tool mode (a stage conversation of :meth:`_act_with_tools`) the call offers the env's tools
        (:meth:`_tool_turn`); ``tools`` / ``tool_choice`` are what that sends.
        """
        from quantgym.agents.llm.tokens import messages_tokens

        tl = getattr(self._local, "tools", None)
        if tl is not None and "tool_rung" not in (meta or {}):  # an adapter's call in a stage conversation
            return self._tool_turn(tl, build, cap=cap, schema=schema, meta=meta, nonce=nonce)

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
                                hash_subs=self._hash_subs(), max_tokens=cap2, refit=refit, tools=tools,
                                tool_choice=tool_choice)

    def close(self) -> None:
        """Close the transcript (flushes nothing more: every line is already on disk)."""
        if self.engine.transcript is not None:
            self.engine.transcript.close()


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
                "max_total_tokens", "price_in", "price_out", "tool_calls")


def _adapter_opts(task: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(this task's LLM agent options, every other task's): the ``eval_options`` with ``agent=True`` of the
    records (:class:`quantgym.tasks.TaskOption`). Another task's option is ignored here (``quantgym eval``
    passes one set of options to the agents of all the tasks it runs)."""
    from quantgym.tasks import tasks

    own = tuple(o.key for t in tasks() if t.name == task for o in t.eval_options if o.agent)
    other = tuple(o.key for t in tasks() if t.name != task for o in t.eval_options if o.agent and o.key not in own)
    return own, other


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


def build_agent(model: str, task: str | None = None, *, api_key: str | None = None, transcript: Any = None,
                cache: bool = True, cache_from: Any = None, name: str | None = None, header: dict | None = None,
                **options: Any) -> LLMAgent:
    """An LLM agent for ``task`` (None: :func:`quantgym.tasks.default_task`) on ``model`` (see
    :func:`quantgym.agents.llm.make_openai_agent`)."""
    from quantgym.tasks import default_task

    task = task or default_task()
    adapter_cls = _adapter(task)
    own, other = _adapter_opts(task)
    unknown = set(options) - set(_ENGINE_OPTS) - set(own) - set(other) - {"prices"}
    if unknown:
        raise ValueError(f"unknown LLM agent option(s) {sorted(unknown)}; known: "
                         f"{sorted(_ENGINE_OPTS + own + ('api_key', 'transcript', 'cache', 'cache_from', 'name', 'header', 'prices'))}")
    from quantgym.agents.llm.prices import resolve_price

    quote = resolve_price(model, price_in=options.get("price_in"), price_out=options.get("price_out"),
                          prices=options.pop("prices", None),
                          endpoint=options.get("base_url") or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
    options["price_in"], options["price_out"] = quote.price_in, quote.price_out
    config = LLMConfig(model=model, **{k: v for k, v in options.items()
                                    if k in _ENGINE_OPTS and (v is not None or k == "max_tokens")})
    adapter = {k: options[k] for k in own if options.get(k) is not None}
    if transcript is None:
        from quantgym.agents.llm.transcript import transcript_path

        transcript = transcript_path("results/transcripts", task, model)
    elif transcript is False:
        transcript = None
    if isinstance(cache_from, (str, os.PathLike)):
        cache_from = [cache_from]
    label = name or f"openai:{model}"
    engine = ChatEngine(config, api_key=api_key, transcript=transcript, cache=cache, cache_from=cache_from,
                        header_extra={**(header or {}), "task": task, "agent_name": label,
                                      "adapter_options": adapter, "price_source": quote.source})
    agent = adapter_cls(engine, name=label, **adapter)
    agent.price_source = quote.source
    return agent


def build_replay_agent(path: str | os.PathLike, task: str | None = None, name: str | None = None) -> LLMAgent:
    """An agent that replays transcript ``path`` offline (same name, options and answers as the run)."""
    engine = ReplayEngine(path)
    rec_task = engine.header.get("task")
    if task is not None and rec_task is not None and task != rec_task:
        raise ValueError(f"transcript {path} was recorded for task {rec_task!r}, not {task!r}")
    from quantgym.tasks import default_task

    task = task or rec_task or default_task()
    agent = _adapter(task)(engine, name=name or engine.header.get("agent_name"),
                           **dict(engine.header.get("adapter_options") or {}))
    agent.price_source = engine.header.get("price_source")  # the recorded run's price (its costs replay)
    return agent


__all__ = ["LLMAgent", "build_agent", "build_replay_agent", "price_for", "fit_log", "find_wrapper"]
