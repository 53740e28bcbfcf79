"""What an OpenAI-compatible endpoint's answers mean: unsupported-parameter and context-length errors (the
wordings of OpenAI, vLLM, llama.cpp's servers and LiteLLM, docs/llm-servers.md), the structured-output rung
of a request, silent prompt truncation, retry hints and the parts of a response. Pure functions of the
request, the response or the exception; the :class:`~quantgym.agents.llm.client.ChatEngine` acts on them.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: a server's ``usage.prompt_tokens`` below ``utf8 bytes / TRUNCATION_BYTES_PER_TOKEN`` of what was sent means the
#: server cut the prompt (Ollama's ``num_ctx``) [project choice: no tokenizer packs 6 bytes of these prompts in one token]
TRUNCATION_BYTES_PER_TOKEN = 6.0
#: ... or below the estimate / this ratio (see ``truncation_warning``) [project choice]
TRUNCATION_ESTIMATE_RATIO = 2.5

# unsupported-parameter detection on a 400/422 body [project choice: the patterns]
UNSUPPORTED = (
    ("response_format", re.compile(r"response[_ ]format|json[_ ]schema|structured output|guided", re.I)),
    # function calling the server does not offer (only a request that carries ``tools``)
    ("tools", re.compile(r"\btools?\b|tool[_ ]choice|tool[_ ]call|function[_ ]call", re.I)),
    ("max_tokens", re.compile(r"max_tokens.*max_completion_tokens|max_completion_tokens.*max_tokens", re.I)),
    ("temperature", re.compile(r"temperature", re.I)),
    # a completion cap the model cannot take (too large for the model): drop the cap
    ("max_tokens_drop", re.compile(r"max_(completion_)?tokens", re.I)),
)
#: a 5xx body that names the structured-output field is a validation error, not a server fault
UNSUPPORTED_5XX = re.compile(r"response_format|json_schema", re.I)
#: ... and one that names the function-calling fields (a request with ``tools``)
UNSUPPORTED_TOOLS_5XX = re.compile(r"\btools\b|tool_choice|tool_calls|function[_ ]call", re.I)
#: a server's own refusal of function calling, whatever its status (llama-server without ``--jinja``: "tools param
#: requires --jinja flag"; vLLM without a parser: "... requires --enable-auto-tool-choice and --tool-call-parser")
TOOLS_NOT_ENABLED = re.compile(r"requires --jinja|--enable-auto-tool-choice|--tool-call-parser|"
                               r"does not support tools", re.I)
#: context-length errors: (pattern for the window, pattern for the prompt's own token count)
_CONTEXT_ERR = re.compile(r"context[_ ]length|context window|context size|maximum context|exceed_context|"
                          r"prompt is too long|too many tokens", re.I)
_CONTEXT_WINDOW = (
    re.compile(r"maximum context length is (\d+)", re.I),        # OpenAI, vLLM, llama-cpp-python
    re.compile(r"context length is only (\d+)", re.I),           # vLLM (newer)
    re.compile(r"context window of (\d+)", re.I),                # llama-cpp-python (raw)
    re.compile(r"available context size \((\d+) tokens\)", re.I),  # llama-server
    re.compile(r"['\"]?n_ctx['\"]?\s*[:=]\s*(\d+)", re.I),       # llama-server error body
    re.compile(r"context (?:size|length|window)[^0-9]{0,30}(\d{3,})", re.I),
)
_CONTEXT_PROMPT = (
    re.compile(r"\((\d+) in the messages", re.I),                # OpenAI, llama-cpp-python
    re.compile(r"your request has (\d+) input tokens", re.I),    # vLLM
    re.compile(r"prompt contains (?:at least )?(\d+) input tokens", re.I),
    re.compile(r"You passed (\d+) input tokens", re.I),          # vLLM (newer)
    re.compile(r"Requested tokens \((\d+)\)", re.I),             # llama-cpp-python (raw)
    re.compile(r"\brequest \((\d+) tokens\) exceeds", re.I),     # llama-server
    re.compile(r"messages resulted in (\d+) tokens", re.I),      # OpenAI
    re.compile(r"['\"]?n_prompt_tokens['\"]?\s*[:=]\s*(\d+)", re.I),
)


def parse_context_error(msg: str) -> tuple[int | None, int | None] | None:
    """(window, prompt tokens) named by a context-length error message, or None if ``msg`` is not one.

    Either number may be None when the server does not state it. Matches the wordings of OpenAI,
    vLLM (old and new), llama-cpp-python (``context_length_exceeded``, and its raw "Requested tokens
    (P) exceed context window of M"), llama-server (``exceed_context_size_error`` with ``n_ctx`` and
    ``n_prompt_tokens``) and LiteLLM (which prefixes the upstream message); see docs/llm-servers.md.
    """
    if not msg or not _CONTEXT_ERR.search(msg):
        return None

    def first(pats) -> int | None:
        for pat in pats:
            m = pat.search(msg)
            if m:
                return int(m.group(1))
        return None

    return first(_CONTEXT_WINDOW), first(_CONTEXT_PROMPT)


def rung_of(req: dict) -> str:
    """The structured-output rung a request body was built at (:data:`RUNGS`)."""
    rf = req.get("response_format")
    if not isinstance(rf, dict):
        return "text"
    if rf.get("type") == "json_schema":
        return "json_schema"
    return "json_object_schema" if "schema" in rf else "json_object"


def truncation_warning(req: dict, usage: dict) -> str | None:
    """A warning when the server counted far fewer prompt tokens than were sent (a silent cut).

    The floor [project choice] is the larger of (bytes sent / ``TRUNCATION_BYTES_PER_TOKEN``) and
    (the estimate / ``TRUNCATION_ESTIMATE_RATIO``): the estimate is at most 1.54 times the SmolLM2
    count on the bundled prompts and about 2.2 times a large-vocabulary count on number tables, so
    an uncut prompt never falls below it; a cut to less than 40 % of the prompt always does.
    """
    from quantgym.agents.llm.tokens import messages_tokens

    pt = (usage or {}).get("prompt_tokens")
    if not pt:
        return None
    msgs = req.get("messages") or []
    sent = sum(len(str(m.get("content") or "").encode("utf-8")) for m in msgs)
    floor = int(max(sent / TRUNCATION_BYTES_PER_TOKEN, messages_tokens(msgs) / TRUNCATION_ESTIMATE_RATIO))
    if pt < floor:
        return (f"prompt truncated by the server? it counted {pt} prompt tokens for {sent} bytes sent (at least "
                f"{floor} expected): raise its context (Ollama: num_ctx) or pass --context-window")
    return None


def is_connect_timeout(exc: BaseException) -> bool:
    """An ``APITimeoutError`` raised while opening the connection (httpx ``ConnectTimeout``)."""
    cause = exc.__cause__ or exc.__context__
    return cause is not None and type(cause).__name__ == "ConnectTimeout"


def connection_detail(exc: BaseException) -> str:
    """The transport's reason behind an ``APIConnectionError`` ("Connection refused", a DNS failure...)."""
    cause = exc.__cause__ or exc.__context__
    detail = str(cause) if cause is not None and str(cause) else ""
    return detail or str(exc)


def error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            code = err.get("code")
            return f"{err['message']}" + (f" (code {code})" if code else "")
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", None) or exc)


def error_body_text(exc: Any) -> str:
    """The error response's body as compact JSON text (for pattern matching), '' when there is none."""
    body = getattr(exc, "body", None)
    if body is None:
        return ""
    try:
        return json.dumps(body, default=str)[:4000]
    except (TypeError, ValueError):
        return str(body)[:4000]


def retry_after_seconds(exc: Any) -> float | None:
    resp = getattr(exc, "response", None)
    try:
        v = resp.headers.get("retry-after") if resp is not None else None
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def message_content(resp: Any) -> tuple[str | None, str | None]:
    """(answer text, finish_reason) of a chat completion; text None when the body has no choice at all
    (the caller records a failed call; an empty message is the model's empty answer, "")."""
    try:
        ch = resp.choices[0]
    except (AttributeError, IndexError, TypeError):
        return None, None
    if ch is None:
        return None, None
    msg = getattr(ch, "message", None)
    text = getattr(msg, "content", None) or ""
    if not text:
        text = getattr(msg, "refusal", None) or ""
    return str(text), getattr(ch, "finish_reason", None)


def message_tool_calls(resp: Any) -> list[dict] | None:
    """The ``tool_calls`` of a chat completion's first choice as ``[{"id", "name", "arguments"}]``
    (``arguments``: the raw JSON text the model wrote, unparsed), None when the reply holds none."""
    try:
        calls = resp.choices[0].message.tool_calls
    except (AttributeError, IndexError, TypeError):
        return None
    out = []
    for c in calls or []:
        fn = getattr(c, "function", None)
        out.append({"id": getattr(c, "id", None), "name": str(getattr(fn, "name", "") or ""),
                    "arguments": str(getattr(fn, "arguments", "") or "")})
    return out or None


def usage_counts(resp: Any) -> dict[str, int]:
    u = getattr(resp, "usage", None)
    if u is None:
        return {}
    out = {}
    for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
        v = getattr(u, k, None)
        if v is not None:
            out[k] = int(v)
    return out


__all__ = ["parse_context_error", "rung_of", "TRUNCATION_BYTES_PER_TOKEN", "TRUNCATION_ESTIMATE_RATIO", "UNSUPPORTED",
           "UNSUPPORTED_5XX", "truncation_warning", "is_connect_timeout", "connection_detail", "error_message",
           "error_body_text", "retry_after_seconds", "message_content", "message_tool_calls", "usage_counts",
           "UNSUPPORTED_TOOLS_5XX", "TOOLS_NOT_ENABLED"]
