"""The chat engine of a quantgym LLM agent whose model calls go to Inspect's model.

:class:`InspectEngine` is a :class:`~quantgym.agents.llm.client.ChatEngine` (its rungs, cap fitting, context
re-render, usage and quantgym transcript stay quantgym's) that sends each request to ``get_model()`` of the
running Inspect sample instead of an HTTP endpoint: Inspect's provider (OpenAI, Anthropic, vLLM, Ollama,
llama.cpp, ``mockllm``...) answers, Inspect retries, caches and logs the call in the sample's transcript.

The quantgym episode runs in a worker thread (:func:`anyio.to_thread.run_sync`, so the env's CPU work does
not block Inspect's event loop); each call goes back to the loop with :func:`anyio.from_thread.run`.

A task's toolbox (tool mode) reaches the model as Inspect tools (:func:`inspect_tools`, a ``ToolDef`` per
:class:`quantgym.tools.Tool` with the toolbox's own JSON schema); the calls the model makes are executed by
the env (its step, its budget, its records), as in ``quantgym eval``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from quantgym.agents.llm.client import CallResult, ChatEngine, LLMConfig

#: Inspect's stop reasons as OpenAI finish reasons (what quantgym records and checks)
FINISH = {"stop": "stop", "max_tokens": "length", "model_length": "length", "tool_calls": "tool_calls",
          "content_filter": "content_filter"}


def inspect_tools(toolbox: Any) -> list[Any]:
    """The tools of a quantgym :class:`~quantgym.tools.Toolbox` as Inspect ``ToolDef`` objects.

    Each keeps the toolbox's name, description and JSON schema; calling one runs the toolbox's own
    ``Tool`` (argument checks and errors as the toolbox gives them). In a quantgym episode the env runs
    the calls (its per-stage budget and records); the definitions are what Inspect shows the model.
    """
    from inspect_ai.tool import ToolDef, ToolParams

    defs = []
    for schema in toolbox.schemas():
        f = schema["function"]
        tool = toolbox.get(f["name"])

        async def run(_tool=tool, **arguments: Any) -> str:
            return str(_tool(**arguments))

        defs.append(ToolDef(run, name=f["name"], description=str(f.get("description") or f["name"]),
                            parameters=ToolParams.model_validate(f.get("parameters") or {"type": "object"})))
    return defs


def to_inspect_messages(messages: list[dict]) -> list[Any]:
    """OpenAI chat messages (what quantgym's adapters build) as Inspect ``ChatMessage`` objects."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall

    out: list[Any] = []
    names: dict[str, str] = {}
    for m in messages:
        role, content = m.get("role"), str(m.get("content") or "")
        if role == "system":
            out.append(ChatMessageSystem(content=content))
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                f = c.get("function") or {}
                try:
                    args = json.loads(f.get("arguments") or "{}")
                except ValueError:
                    args = {}
                names[c.get("id")] = f.get("name")
                calls.append(ToolCall(id=c.get("id"), function=f.get("name"),
                                      arguments=args if isinstance(args, dict) else {}))
            out.append(ChatMessageAssistant(content=content, tool_calls=calls or None))
        elif role == "tool":
            out.append(ChatMessageTool(content=content, tool_call_id=m.get("tool_call_id"),
                                       function=names.get(m.get("tool_call_id"))))
        else:
            out.append(ChatMessageUser(content=content))
    return out


def _response_schema(rf: dict | None) -> Any:
    """Inspect's ``ResponseSchema`` of a ``json_schema`` response format (None for any other)."""
    if not rf or rf.get("type") != "json_schema":
        return None
    from inspect_ai.model import ResponseSchema
    from inspect_ai.util import JSONSchema

    js = rf.get("json_schema") or {}
    try:
        return ResponseSchema(name=str(js.get("name") or "answer"), json_schema=JSONSchema.model_validate(
            js.get("schema") or {}), strict=js.get("strict"))
    except ValueError:  # a schema Inspect's model of JSON Schema does not hold: the answer is asked as text
        return None


class InspectEngine(ChatEngine):
    """A :class:`ChatEngine` answered by Inspect's model (see the module docstring).

    Parameters
    ----------
    model : Inspect ``Model`` (``get_model()`` of the sample).
    config : quantgym's :class:`LLMConfig` (its ``model`` is Inspect's model name).
    tools : Inspect tool definitions by name (:func:`inspect_tools`), sent instead of the plain schemas.
    transcript : quantgym transcript path (replayable with ``quantgym eval --agent replay:PATH``) or None.
    """

    def __init__(self, model: Any, config: LLMConfig, *, tools: dict[str, Any] | None = None,
                 transcript: Any = None, header_extra: dict | None = None):
        super().__init__(config, api_key="inspect", transcript=transcript, cache=False, header_extra=header_extra)
        self.model = model
        self.tools = dict(tools or {})
        #: ``toolbox_source()`` -> the calling thread's episode toolbox (tool mode), wrapped by :func:`inspect_tools`
        self.toolbox_source: Any = None
        self._wrapped: dict[int, dict[str, Any]] = {}
        #: (input, output) of every answered call, in order: the solver shows the last one as the sample's messages
        self.exchanges: list[tuple[list[Any], Any]] = []

    def _probe_metadata(self) -> tuple[int | None, str | None, list[dict]]:
        """No metadata probe: the window is the ``context_window`` option or learned from a context error."""
        return None, None, []

    def _generate_config(self, req: dict) -> Any:
        """quantgym's per-call settings (cap, temperature, seed, schema) under the ones the Inspect command
        line set (``--temperature``, ``--max-tokens``...: those win)."""
        from inspect_ai.model import GenerateConfig
        from inspect_ai.model._generate_config import active_generate_config
        from inspect_ai.model._model import active_model

        rf = req.get("response_format")
        # the json_object rungs have no Inspect form: sent as they are (``extra_body``) to an OpenAI-compatible
        # server that takes them (llama-cpp-python: {"type": "json_object", "schema": ...}, grammar-constrained)
        extra = {"response_format": rf} if rf and rf.get("type") != "json_schema" else None
        ours = GenerateConfig(max_tokens=req.get("max_tokens"), temperature=req.get("temperature"),
                              seed=req.get("seed"), response_schema=_response_schema(rf), extra_body=extra)
        given = self.model.config
        if self.model is active_model():  # the eval's own options (inspect eval --temperature ...)
            given = given.merge(active_generate_config())
        return ours.merge(given)

    def _tool_defs(self) -> dict[str, Any]:
        """The Inspect tools of the calling thread's episode (:func:`inspect_tools`, built once per toolbox)."""
        toolbox = self.toolbox_source() if callable(self.toolbox_source) else None
        if toolbox is None:
            return self.tools
        if id(toolbox) not in self._wrapped:
            self._wrapped[id(toolbox)] = {d.name: d for d in inspect_tools(toolbox)}
        return {**self.tools, **self._wrapped[id(toolbox)]}

    async def _generate(self, req: dict, defs: dict[str, Any]) -> Any:
        tools = []
        for t in req.get("tools") or []:
            f = t["function"]
            if f["name"] in defs:
                tools.append(defs[f["name"]])
            else:
                from inspect_ai.tool import ToolInfo, ToolParams

                tools.append(ToolInfo(name=f["name"], description=str(f.get("description") or f["name"]),
                                      parameters=ToolParams.model_validate(f.get("parameters") or {})))
        choice = req.get("tool_choice") if tools else None
        messages = to_inspect_messages(req["messages"])
        output = await self.model.generate(messages, tools=tools, tool_choice=choice,
                                           config=self._generate_config(req))
        self.exchanges.append((messages, output))
        return output

    def _send(self, req: dict, h: str) -> tuple[CallResult, dict]:
        import anyio.from_thread

        t0 = time.perf_counter()
        try:
            defs = self._tool_defs() if req.get("tools") else {}
            output = anyio.from_thread.run(self._generate, req, defs)
        except Exception as exc:  # noqa: BLE001 - Inspect's own retries are done: a recorded failure
            err = " ".join(f"{type(exc).__name__}: {exc}".split())[:1000]
            lat = time.perf_counter() - t0
            return (CallResult(ok=False, error=err, error_kind="status", latency_s=lat),
                    {"ok": False, "text": None, "error": err, "error_kind": "status", "usage": {}, "tries": [],
                     "response": None, "latency_s": lat})
        self.reached = True
        lat = time.perf_counter() - t0
        msg = output.message if output.choices else None
        calls = [{"id": c.id, "name": c.function, "arguments": json.dumps(c.arguments)}
                 for c in (msg.tool_calls or [])] if msg is not None else []
        text = output.completion or ""
        stop = output.stop_reason
        if stop == "model_length" and not text and not calls:  # the prompt does not fit: quantgym re-renders it
            err = "the prompt exceeds the model's context window (Inspect stop reason model_length)"
            return (CallResult(ok=False, error=err, error_kind="context", latency_s=lat),
                    {"ok": False, "text": None, "error": err, "error_kind": "context", "usage": {}, "tries": [],
                     "response": None, "latency_s": lat})
        u = output.usage
        usage = ({"prompt_tokens": int(u.input_tokens), "completion_tokens": int(u.output_tokens),
                  "total_tokens": int(u.total_tokens)} if u is not None else {})
        finish = FINISH.get(str(stop), str(stop))
        res = CallResult(ok=True, text=text, usage=usage, latency_s=lat, finish_reason=finish,
                         tool_calls=calls or None)
        return res, {"ok": True, "text": text, "usage": usage, "response": None, "tries": [], "latency_s": lat,
                     "finish_reason": finish, "tool_calls": calls or None, "response_model": output.model}


__all__ = ["InspectEngine", "inspect_tools", "to_inspect_messages", "FINISH"]
