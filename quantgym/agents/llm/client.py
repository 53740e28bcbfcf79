"""Chat engine of the LLM agents: the official ``openai`` client, transcripts, cache, replay, budget.

The stateless parts of a conversation live in :mod:`~quantgym.agents.llm.endpoint` and
:mod:`~quantgym.agents.llm.transcript`.

:class:`ChatEngine` sends ``chat.completions`` requests to any OpenAI-compatible endpoint and
returns a :class:`CallResult` — never raises for a failed call (429/5xx/timeouts after the retries,
a 400, an exhausted budget): the failure is returned and recorded. Only configuration errors that
make every later call fail too (wrong key, unknown model, wrong base URL, exhausted quota, an endpoint
that cannot be reached before it ever answered) raise :class:`LLMConfigError`, whose message is one line.

Every request is appended, as it happens, to a JSONL transcript (``flush`` + ``fsync`` per line):
a header line (config, versions; never the API key) and one ``"type": "call"`` line per request with
the canonical request hash, request, response, text, usage, latency, model, endpoint, timestamp,
each HTTP try, and cost (:mod:`~quantgym.agents.llm.transcript`). :class:`~quantgym.agents.llm.replay.ReplayEngine`
serves the same requests from a transcript offline (matched by hash, in order) so a run reproduces bit for
bit. What an endpoint's errors and responses mean is :mod:`~quantgym.agents.llm.endpoint`.

Per-endpoint adaptation [project choice]: structured output climbs down a **capability ladder**,
``json_schema`` → ``json_object`` with ``schema`` (llama.cpp family: grammar-constrained) →
``json_object`` → plain text (:data:`RUNGS`). A request whose error names ``response_format`` /
``json_schema`` (HTTP 400, 422, or a 5xx whose body names them, as llama-cpp-python's validation
error does) marks that rung unsupported and is resent one rung down at once: one wrong guess costs
one request, never a retry loop. The same mechanism swaps ``max_tokens`` for
``max_completion_tokens`` and drops an unsupported ``temperature``. A prompt longer than the
context window (a context-length error) teaches the engine the window (and, where the error says
so, the prompt's true token count); the agent then re-renders the prompt once to fit
(:meth:`ChatEngine.context_window`). Every decision is recorded in the transcript, so a replay takes
the same path.

Longer than 500 lines as one job, one endpoint's conversation: building, sending, retrying, stepping a ladder down
and tallying a call read and write the same per-endpoint state and run budget under :class:`ChatEngine`'s locks.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from quantgym.agents.llm.endpoint import (TOOLS_NOT_ENABLED, UNSUPPORTED, UNSUPPORTED_5XX, UNSUPPORTED_TOOLS_5XX,
                                         connection_detail, error_body_text, error_message, is_connect_timeout,
                                         message_content,
                                         message_tool_calls, parse_context_error, retry_after_seconds, rung_of,
                                         truncation_warning, usage_counts)
from quantgym.agents.llm.transcript import (Transcript, canonical_hash, one_line, read_transcript,  # noqa: F401
                                             utc_timestamp)

LLM_AGENT_VERSION = "llm-agent-v2"
DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: structured-output rungs, richest first (see the module docstring)
RUNGS = ("json_schema", "json_object_schema", "json_object", "text")
#: tool-calling rungs, richest first: the server's own function calling (``tools`` / ``tool_calls``), a JSON
#: action protocol in json mode (the model answers ``{"tool": ..., "arguments": ...}`` or the stage answer), or
#: plain text (no tools: the agent answers from the stage brief)
TOOL_RUNGS = ("native", "json", "text")
#: ``tool_calls=`` values: ``auto`` (climb down :data:`TOOL_RUNGS` per endpoint) or one rung (fixed)
TOOL_MODES = ("auto",) + TOOL_RUNGS
#: ``structured=`` values: ``auto`` (climb down the ladder from the top), a rung (fixed), ``on`` (= json_schema,
#: fixed), ``off`` (= text)
STRUCTURED_MODES = ("auto", "on", "off") + RUNGS
#: a 5xx that names response_format is a validation error (one rung down) only with one of these [project choice]
_VALIDATION_5XX = re.compile(r"Input should be|'loc'|\"loc\"|literal_error|validation error|must be one of|"
                             r"not supported|unsupported|invalid", re.I)
#: seconds the context-window metadata probe may take per URL [project choice]
PROBE_TIMEOUT = 3.0


# A ClickException ends any quantgym (typer) command with its message and exit code, without a traceback.
# typer >= 0.22 vendors click (``typer._click``) and catches only its own class there; older typer uses click.
try:
    from typer._click.exceptions import ClickException as _OneLineError
except ImportError:  # pragma: no cover - depends on the typer version
    try:
        from click import ClickException as _OneLineError
    except ImportError:
        _OneLineError = RuntimeError  # type: ignore[misc,assignment]


class LLMConfigError(_OneLineError):
    """A configuration problem that every further call would hit (one-line message).

    A :class:`click.ClickException`: inside any ``quantgym`` command (``eval``, ``bench --agent``) it ends
    the command with ``Error: <message>`` and exit code 2, without a traceback. ``stops_run``: raised during
    a run, it stops the run, which :func:`quantgym.plan.run_eval` records as failed.
    """

    exit_code = 2
    stops_run = True


class ReplayMismatchError(_OneLineError):
    """A replayed run sent a request that the transcript does not hold (one-line message, exit code 2)."""

    exit_code = 2


@dataclass(frozen=True)
class LLMConfig:
    """Configuration of one LLM agent (defaults = the documented defaults, ``docs/llm-agents.md``).

    Attributes
    ----------
    model : model name as the endpoint knows it (``gpt-4o-mini``, ``qwen2.5:7b``, ...).
    base_url : endpoint (``None`` → ``$OPENAI_BASE_URL`` → ``https://api.openai.com/v1``).
    temperature : sampling temperature (0: as deterministic as the endpoint allows).
    max_tokens : completion token cap per call (None: the endpoint's default).
    timeout : seconds per HTTP request.
    retries : extra tries on 429 / 5xx / timeouts / connection errors, with exponential backoff and
        full jitter: ``sleep = U(0, min(backoff_max, backoff_base · 2^k))`` (a ``Retry-After`` header is
        honoured up to ``backoff_max``).
    connect_timeout : seconds to open a connection (TCP + TLS), capped at ``timeout`` [project choice: 10 s].
    unreachable_tries, unreachable_delay : an endpoint that has never answered (no HTTP response in this
        run yet) and refuses or times out the connection is tried ``unreachable_tries`` times in all,
        ``unreachable_delay`` seconds apart, then the run stops with a one-line :class:`LLMConfigError`
        (wrong ``--base-url``, server down, no network) instead of the long backoff [project choice:
        2 tries, 1 s]. Once the endpoint has answered, a connection error is retried like a 5xx.
    stop_after : N of the two rules that stop a run with a one-line :class:`LLMConfigError` instead of
        scoring an endpoint that does not answer [project choice: 3]: the first N calls of the run all
        failed with the same HTTP status that no retry cures (a 4xx/5xx other than 429, 503 and the
        timeouts 408 / 504: a plain web server's 501, a proxy's 502, ...), or, once the endpoint has
        answered, N calls in a row could not connect (the server died mid-run).
    max_tokens : completion cap per call: ``"auto"`` (default: the adapter's cap for that call, derived from
        the answer schema and the universe size, :func:`quantgym.agents.llm.tokens.schema_token_bound`),
        an int (the same cap for every call) or None (no cap sent: the endpoint's default).
    context_window : the model's context window in tokens (None: learn it from the server's metadata
        or from a context-length error). Prompts are rendered to fit it (``prompt_style``).
    prompt_style : ``"auto"`` (the richest style whose prompt and cap fit the window) or a fixed style of
        :data:`quantgym.spaces.PROMPT_STYLES` (``full``, ``compact``, ``minimal``).
    structured : "auto" (climb down :data:`RUNGS` per endpoint), a rung name (always that rung), "on"
        (= ``json_schema``), "off" (= ``text``: never send ``response_format``).
    seed : optional ``seed`` request field (only sent when set).
    max_calls, max_total_tokens : per-run budget (HTTP calls; prompt + completion tokens). A call over
        budget is not sent and becomes a recorded failure.
    price_in, price_out : optional USD per 1M prompt / completion tokens for cost accounting.
    tool_calls : with an env in tool mode, "auto" (climb down :data:`TOOL_RUNGS` per endpoint) or a fixed
        rung: "native" (``tools`` / ``tool_calls``), "json" (the JSON action protocol), "text" (no tools).
    """

    model: str
    base_url: str | None = None
    temperature: float | None = 0.0
    max_tokens: int | str | None = "auto"
    context_window: int | None = None
    prompt_style: str = "auto"
    timeout: float = 300.0
    retries: int = 5
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    connect_timeout: float = 10.0
    unreachable_tries: int = 2
    unreachable_delay: float = 1.0
    stop_after: int = 3
    structured: str = "auto"
    seed: int | None = None
    max_calls: int | None = None
    max_total_tokens: int | None = None
    price_in: float | None = None
    price_out: float | None = None
    tool_calls: str = "auto"
    version: str = LLM_AGENT_VERSION

    def __post_init__(self):
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("model must be a non-empty string (e.g. openai:gpt-4o-mini)")
        if self.structured not in STRUCTURED_MODES:
            raise ValueError(f"structured must be one of {', '.join(STRUCTURED_MODES)}; got {self.structured!r}")
        if not (self.max_tokens is None or self.max_tokens == "auto"
                or (isinstance(self.max_tokens, int) and not isinstance(self.max_tokens, bool) and self.max_tokens > 0)):
            raise ValueError(f"max_tokens must be 'auto', a positive int or None; got {self.max_tokens!r}")
        if self.context_window is not None and (not isinstance(self.context_window, int) or self.context_window < 256):
            raise ValueError(f"context_window must be an int >= 256 tokens; got {self.context_window!r}")
        from quantgym.spaces import PROMPT_STYLES

        if self.prompt_style != "auto" and self.prompt_style not in PROMPT_STYLES:
            raise ValueError(f"prompt_style must be 'auto' or one of {', '.join(PROMPT_STYLES)}; got "
                             f"{self.prompt_style!r}")
        if self.retries < 0 or self.timeout <= 0:
            raise ValueError("retries must be >= 0 and timeout > 0")
        if self.connect_timeout <= 0 or self.unreachable_tries < 1 or self.unreachable_delay < 0:
            raise ValueError("connect_timeout must be > 0, unreachable_tries >= 1 and unreachable_delay >= 0")
        if not isinstance(self.stop_after, int) or self.stop_after < 1:
            raise ValueError(f"stop_after must be an int >= 1; got {self.stop_after!r}")
        if self.tool_calls not in TOOL_MODES:
            raise ValueError(f"tool_calls must be one of {', '.join(TOOL_MODES)}; got {self.tool_calls!r}")

    def fixed_rung(self) -> str | None:
        """The rung a fixed ``structured`` mode names (None for ``auto``)."""
        return {"auto": None, "on": "json_schema", "off": "text"}.get(self.structured, self.structured)

    def endpoint(self) -> str:
        return (self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["base_url"] = self.endpoint()
        return d


@dataclass
class CallResult:
    """Outcome of one logical chat call.

    Attributes
    ----------
    ok : the endpoint answered (``text`` may still be empty).
    text : the answer (``message.content``, or ``message.refusal`` when content is empty), None on failure.
    error, error_kind : failure message and kind ("rate_limit" | "server" | "timeout" | "connection" |
        "bad_request" | "budget" | "unsupported" | "status").
    usage : ``{"prompt_tokens", "completion_tokens", "total_tokens"}``.
    latency_s : wall seconds (all tries).
    cached : served from the cache (no HTTP request).
    structured : ``response_format`` was sent with the request that produced this result.
    rung : the structured-output rung of that request (:data:`RUNGS`).
    meta : the call's recorded ``meta`` (with the prompt style, the cap and ``refit`` after a re-render).
    context_window, prompt_tokens_needed : on a context-length error (``error_kind == "context"``), the
        window the server named and the prompt's token count where it said so (else None).
    warning : a note on a successful call (e.g. a server that truncated the prompt), else None.
    request_hash : canonical hash of the request.
    finish_reason : as reported by the endpoint.
    """

    ok: bool
    text: str | None = None
    error: str | None = None
    error_kind: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    cached: bool = False
    structured: bool = False
    request_hash: str = ""
    finish_reason: str | None = None
    cost_usd: float | None = None
    rung: str = "text"
    meta: dict = field(default_factory=dict)
    context_window: int | None = None
    prompt_tokens_needed: int | None = None
    warning: str | None = None
    #: the reply's native tool calls ``[{"id", "name", "arguments"}]`` (``arguments``: the raw JSON text), or None
    tool_calls: list[dict] | None = None
    #: the request parameter the server refused (``"tools"``: the tool ladder stepped down; the caller rebuilds)
    unsupported: str | None = None


class _EndpointState:
    def __init__(self) -> None:
        self.rung: int = 0  # index into RUNGS of the richest rung not yet refused (auto mode)
        self.rung_known = False  # a request at that rung has succeeded
        self.token_param: str | None = "max_tokens"  # None: the cap is not sent
        self.send_temperature = True
        self.context_window: int | None = None  # learned from metadata or a context-length error
        self.context_source: str | None = None
        self.tool_rung: int = 0  # index into TOOL_RUNGS of the richest tool rung not yet refused (auto mode)
        self.tool_known = False  # a request carrying ``tools`` has succeeded

    @property
    def structured(self) -> bool | None:
        """True: a schema rung works; False: only plain text; None: not yet known."""
        if RUNGS[self.rung] == "text":
            return False
        return True if self.rung_known else None


class ChatEngine:
    """Sends chat requests with retries, cache, budget and transcript (see module docstring).

    Parameters
    ----------
    config : :class:`LLMConfig`.
    api_key : the key (default ``$OPENAI_API_KEY``; a placeholder is used for keyless local servers).
    transcript : JSONL path (None: no transcript).
    cache : serve repeated identical requests (same canonical hash and nonce) from memory.
    cache_from : transcripts whose successful answers pre-fill the cache (resume a crashed run).
    header_extra : extra fields for the transcript header (task, adapter options).
    """

    def __init__(self, config: LLMConfig, api_key: str | None = None, transcript: str | os.PathLike | None = None,
                 cache: bool = True, cache_from: list[str | os.PathLike] | None = None,
                 header_extra: dict | None = None):
        self.config = config
        self.endpoint = config.endpoint()
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or ""
        self._client = None
        self._lock = threading.Lock()
        self._states_lock = threading.Lock()
        self._probe_lock = threading.Lock()
        self._call_lock = threading.Lock()
        self._probed = False
        self._states: dict[tuple[str, str], _EndpointState] = {}
        self._basic_known = False
        self.reached = False  # the endpoint has sent an HTTP response (any status) in this run
        self._unreachable: LLMConfigError | None = None  # set once the run must stop: every later call raises it
        self._first_failures: list[tuple[int, str]] | None = []  # the run's first calls while all fail alike
        self._connect_streak = 0  # calls in a row that could not connect, once the endpoint has answered
        self.answered = 0  # calls the endpoint answered in this run (HTTP 200 with an answer)
        self._last_failure: str | None = None  # the error of the run's last failed call
        self.listeners: list[Any] = []  # callables f(record: dict) after every logical call (progress)
        self._local = threading.local()
        self.cache_enabled = bool(cache)
        self._cache: dict[str, dict] = {}
        self.calls = 0
        self.tokens = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        self.cost_usd = 0.0
        self.episode_stats: dict[str, dict[str, Any]] = {}
        for p in cache_from or []:
            _, recs = read_transcript(p)
            for r in recs:
                # answers the model gave: sent in that run, or reused there from a run before it (a resume of
                # a resume); in-run cache hits repeat an answer already in the file
                asked = not r.get("cache_hit") or r.get("cache_source") == "cache_from"
                if r.get("ok") and r.get("text") is not None and asked:
                    self._cache.setdefault(r["hash"], {"text": r["text"], "usage": r.get("usage") or {},
                                                       "finish_reason": r.get("finish_reason"),
                                                       "tool_calls": r.get("tool_calls"),
                                                       "latency_s": r.get("latency_s") or r.get("cached_latency_s"),
                                                       "source": "cache_from"})
        self.transcript = None
        if transcript is not None:
            from quantgym.results import environment_info

            self.transcript = Transcript(transcript, {
                "schema": "quantgym-llm-transcript-v1", "created": utc_timestamp(), "config": config.to_dict(),
                "environment": environment_info(), **(header_extra or {})})

    # ------------------------------------------------------------------ context
    @property
    def transcript_path(self) -> Path | None:
        return None if self.transcript is None else self.transcript.path

    def set_episode(self, label: str | None) -> None:
        """Label the calls of the current thread (recorded; usage is tallied per label)."""
        self._local.episode = label
        if label is not None:
            with self._lock:
                self.episode_stats.setdefault(label, {"calls": 0, "cache_hits": 0, "failures": 0, "answered": 0,
                                                      "prompt_tokens": 0, "completion_tokens": 0,
                                                      "total_tokens": 0, "cost_usd": 0.0, "latency_s": 0.0})

    @property
    def episode(self) -> str | None:
        return getattr(self._local, "episode", None)

    def state(self) -> _EndpointState:
        key = (self.endpoint, self.config.model)
        with self._states_lock:
            return self._states.setdefault(key, _EndpointState())

    def rung(self) -> str:
        """The structured-output rung the next schema request uses (:data:`RUNGS`)."""
        fixed = self.config.fixed_rung()
        return fixed if fixed is not None else RUNGS[self.state().rung]

    def tool_rung(self) -> str:
        """The tool-calling rung the next request of an env in tool mode uses (:data:`TOOL_RUNGS`)."""
        fixed = self.config.tool_calls
        return fixed if fixed != "auto" else TOOL_RUNGS[self.state().tool_rung]

    def structured_allowed(self) -> bool:
        """A schema request would carry ``response_format`` (the rung is not ``text``)."""
        return self.rung() != "text"

    # ------------------------------------------------------------------ context window
    def context_window(self) -> int | None:
        """The model's context window in tokens: ``config.context_window``, else what the server's
        metadata or a context-length error said (None: unknown)."""
        return self.config.context_window or self.state().context_window

    def context_source(self) -> str | None:
        """Where :meth:`context_window` comes from: ``config``, ``metadata:<field>``, ``error`` or None."""
        if self.config.context_window:
            return "config"
        return self.state().context_source

    def probe_context_window(self) -> int | None:
        """Ask the server's metadata for the context window once per run (recorded in the transcript).

        Reads ``GET {base_url}/models`` (vLLM ``max_model_len``; llama-server ``meta.n_ctx_train``, the
        training size, used only when nothing else answers), llama-server's ``GET {root}/props``
        (``default_generation_settings.n_ctx``, the running window) and LM Studio's
        ``GET {root}/api/v0/models`` (``loaded_context_length`` / ``max_context_length``).
        Nothing is asked when ``config.context_window`` is set. Any failure (no such route, a timeout,
        another JSON) means "unknown"; the first context-length error then teaches the window.
        """
        st = self.state()
        with self._probe_lock:
            if self._probed:
                return self.context_window()
            self._probed = True
            if self.config.context_window:
                return self.config.context_window
            window, source, tried = self._probe_metadata()
            if window:
                st.context_window, st.context_source = window, source
            if self.transcript is not None:
                self.transcript.write({"type": "probe", "ts": utc_timestamp(), "endpoint": self.endpoint,
                                       "context_window": window, "source": source, "tried": tried})
        return self.context_window()

    def _probe_metadata(self) -> tuple[int | None, str | None, list[dict]]:
        import urllib.error
        import urllib.request

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        root = re.sub(r"/v\d+$", "", self.endpoint)
        tried: list[dict] = []
        found: dict[str, int] = {}
        for url in (f"{self.endpoint}/models", f"{root}/props", f"{root}/api/v0/models"):
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                            timeout=PROBE_TIMEOUT) as r:
                    tried.append({"url": url, "status": r.status})
                    doc = json.loads(r.read(1_000_000) or b"null")
            except urllib.error.HTTPError as exc:
                tried.append({"url": url, "status": exc.code})
                continue
            except Exception as exc:  # noqa: BLE001 - metadata is optional: any failure means "unknown"
                tried.append({"url": url, "error": one_line(f"{type(exc).__name__}: {exc}", 160)})
                continue
            if url.endswith("/props") and isinstance(doc, dict):
                n = (doc.get("default_generation_settings") or {}).get("n_ctx")
                if isinstance(n, int) and n > 0:
                    found.setdefault("props.n_ctx", n)
                continue
            for m in (doc.get("data") if isinstance(doc, dict) else None) or []:
                if not isinstance(m, dict) or m.get("id") not in (self.config.model, None):
                    continue
                for key in ("max_model_len", "loaded_context_length", "max_context_length", "context_length"):
                    if isinstance(m.get(key), int) and m[key] > 0:
                        found.setdefault(f"models.{key}", m[key])
                meta = m.get("meta") if isinstance(m.get("meta"), dict) else {}
                if isinstance(meta.get("n_ctx"), int) and meta["n_ctx"] > 0:
                    found.setdefault("models.meta.n_ctx", meta["n_ctx"])
                if isinstance(meta.get("n_ctx_train"), int) and meta["n_ctx_train"] > 0:
                    found.setdefault("models.meta.n_ctx_train", meta["n_ctx_train"])
        for key in ("props.n_ctx", "models.meta.n_ctx", "models.max_model_len", "models.loaded_context_length",
                    "models.context_length", "models.max_context_length", "models.meta.n_ctx_train"):
            if key in found:
                return found[key], f"metadata:{key}", tried
        return None, None, tried

    # ------------------------------------------------------------------ requests
    def response_format(self, schema: dict, rung: str) -> dict | None:
        """The ``response_format`` of ``rung`` for a stage schema (``{"name", "schema", "strict"}``)."""
        if rung == "json_schema":
            return {"type": "json_schema", "json_schema": schema}
        if rung == "json_object_schema":
            return {"type": "json_object", "schema": schema.get("schema", schema)}
        if rung == "json_object":
            return {"type": "json_object"}
        return None

    def build_request(self, messages: list[dict], schema: dict | None, max_tokens: int | None = None,
                      tools: list[dict] | None = None, tool_choice: str = "auto") -> dict:
        """The request body: ``max_tokens`` is the adapter's cap for this call (used when
        ``config.max_tokens == "auto"``; an int config overrides it; None config sends no cap). ``tools``
        (OpenAI ``tools=`` entries) are sent at the ``native`` tool rung, with ``tool_choice="auto"`` (the
        OpenAI default, stated: llama-cpp-python's function-calling chat format offers the tools only then)."""
        config, st = self.config, self.state()
        req: dict[str, Any] = {"model": config.model, "messages": messages}
        if config.temperature is not None and st.send_temperature:
            req["temperature"] = config.temperature
        cap = max_tokens if config.max_tokens == "auto" else config.max_tokens
        if cap is not None and st.token_param is not None:
            req[st.token_param] = int(cap)
        if config.seed is not None:
            req["seed"] = config.seed
        if schema is not None:
            rf = self.response_format(schema, self.rung())
            if rf is not None:
                req["response_format"] = rf
        if tools and self.tool_rung() == "native":
            req["tools"] = list(tools)
            req["tool_choice"] = tool_choice
        return req

    def chat(self, messages: list[dict], *, schema: dict | None = None, meta: dict | None = None,
             nonce: int = 0, hash_subs: tuple[tuple[str, str], ...] = (), max_tokens: int | None = None,
             refit: Callable[[int | None, int | None], tuple[list[dict], int | None, dict] | None] | None = None,
             tools: list[dict] | None = None, tool_choice: str = "auto") -> CallResult:
        """One logical call (see class docstring). Never raises except :class:`LLMConfigError`.

        ``max_tokens``: the adapter's completion cap for this call (see :meth:`build_request`).
        A context-length error teaches the engine the window it names (:meth:`context_window`). With
        ``refit``, the engine then calls ``refit(window, prompt_tokens)`` once (``prompt_tokens``: the
        prompt's true size where the server said it) and resends what it returns
        (``(messages, max_tokens, meta_update)``; None: nothing smaller to send). That first error is
        recorded as an adaptation (``"adapted": true``), not a failure; without ``refit``, or when the
        re-rendered prompt fails too, the call fails with ``error_kind == "context"``.

        ``tools``: OpenAI ``tools=`` entries, sent at the ``native`` tool rung (:meth:`tool_rung`). A server
        that refuses them (an error naming ``tools``) moves the tool ladder one rung down (recorded as an
        adaptation) and the call returns with ``unsupported == "tools"`` at once: the caller rebuilds its
        messages for the new rung (the JSON action protocol needs other messages), never a retry loop.

        Until the endpoint's behaviour is known (a first successful call; for a schema call, which
        rung works; for a call with tools, whether the server takes them) calls are serialised, so
        concurrent episodes probe the endpoint once and a replay takes exactly the recorded path. A call
        that waited for the probe and finds the behaviour known once it holds the lock is sent at once,
        concurrently with the others (the episodes of ``-j N`` do not queue behind one another's calls).
        """
        if self._probing(schema, tools):
            with self._call_lock:
                if self._probing(schema, tools):
                    return self._chat(messages, schema, meta, nonce, hash_subs, max_tokens, refit, tools,
                                      tool_choice)
        return self._chat(messages, schema, meta, nonce, hash_subs, max_tokens, refit, tools, tool_choice)

    def _probing(self, schema: dict | None, tools: list[dict] | None) -> bool:
        """A call with ``schema`` / ``tools`` would probe what the endpoint accepts (see :meth:`chat`)."""
        st = self.state()
        return not self._basic_known or (schema is not None and self.config.structured == "auto"
                                         and not st.rung_known and RUNGS[st.rung] != "text") or (
            bool(tools) and self.config.tool_calls == "auto" and not st.tool_known
            and TOOL_RUNGS[st.tool_rung] == "native")

    def _chat(self, messages: list[dict], schema: dict | None, meta: dict | None, nonce: int,
              hash_subs: tuple[tuple[str, str], ...], max_tokens: int | None, refit: Any,
              tools: list[dict] | None = None, tool_choice: str = "auto") -> CallResult:
        meta = dict(meta or {})
        refitted = False
        for _ in range(len(RUNGS) + 4):  # one resend per adaptation (rungs, token param, temperature, a re-render)
            req = self.build_request(messages, schema, max_tokens, tools, tool_choice)
            h = canonical_hash(req, nonce, tuple(hash_subs))
            res, rec = self._resolve(req, h, nonce)
            res.rung = rung_of(req)
            rec.setdefault("error", None)
            rec.setdefault("error_kind", None)
            rec["cost_usd"] = None
            if res.ok and not res.cached:
                res.warning = rec.get("warning") or truncation_warning(req, res.usage)
                if res.warning:
                    rec["warning"] = res.warning
            elif res.ok:
                res.warning = rec.get("warning")
            refit_to = None
            if res.error_kind == "context":
                window, needed = parse_context_error(res.error or "") or (None, None)
                res.context_window, res.prompt_tokens_needed = window, needed
                rec.update(context_window=window, prompt_tokens_needed=needed)
                st = self.state()
                if window:
                    st.context_window, st.context_source = window, "error"
                elif meta.get("prompt_tokens_est"):
                    # no number in the error: prompt + cap did not fit, and the estimate never under-counts, so
                    # the window is below estimate + cap: an upper bound that later calls fit under
                    bound = int(meta["prompt_tokens_est"]) + int(req.get(st.token_param or "max_tokens") or 0) - 1
                    if st.context_window is None or bound < st.context_window:
                        st.context_window, st.context_source = bound, "error-bound"
                if refit is not None and not refitted:
                    refit_to = refit(window, needed)
            adapted = (res.error_kind == "unsupported" and self._adapt(rec.get("unsupported"), req)) or (
                refit_to is not None)
            if (not adapted and res.error_kind == "context" and refit is None and not refitted
                    and (res.prompt_tokens_needed is None or res.context_window is None
                         or res.prompt_tokens_needed < res.context_window)):
                # no re-render possible and the messages alone fit: resend without the completion cap
                adapted = self._adapt("max_tokens_drop", req)
                if adapted:
                    rec["unsupported"] = "max_tokens_drop"
            rec.update({"type": "call", "ts": rec.get("ts") or utc_timestamp(), "hash": h, "nonce": nonce,
                        "episode": self.episode, "meta": meta, "endpoint": self.endpoint,
                        "model": self.config.model, "request": req, "rung": res.rung, "adapted": adapted})
            self._tally(res, adapted)
            rec["cost_usd"] = res.cost_usd
            if self.transcript is not None:
                self.transcript.write(rec)
            for fn in list(self.listeners):
                try:
                    fn(rec)
                except Exception:  # noqa: BLE001 - a progress display never breaks a run
                    pass
            if adapted and rec.get("unsupported") == "tools":
                res.unsupported = "tools"  # the tool ladder stepped down: the caller rebuilds its messages
                res.meta = meta
                return res
            if adapted:
                if refit_to is not None:
                    refitted = True
                    messages, max_tokens, upd = refit_to
                    meta = {**meta, **(upd or {}), "refit": True}
                continue
            if res.ok and not res.cached:
                self._basic_known = True
                if "response_format" in req and self.config.structured == "auto":
                    self.state().rung_known = True
                if "tools" in req:
                    self.state().tool_known = True
            self._watch(res, rec)
            res.meta = meta
            return res
        return res  # pragma: no cover - adaptations exhausted

    def _watch(self, res: CallResult, rec: dict) -> None:
        """Stop the run (:class:`LLMConfigError`, also raised by every later call) when the endpoint is not
        answering: the rules of ``LLMConfig.stop_after``. ``res`` is a logical call's final result."""
        if res.cached or res.error_kind == "budget":
            return
        n = self.config.stop_after
        statuses = [t.get("status") for t in rec.get("tries") or []]
        last = statuses[-1] if statuses else None
        with self._lock:
            if res.ok:
                self.answered += 1
            else:
                self._last_failure = res.error or res.error_kind or "failed"
            if res.ok or any(s is not None for s in statuses):
                self._connect_streak = 0
            elif self.reached and res.error_kind in ("connection", "timeout") and (
                    res.error_kind == "connection" or (res.error or "").startswith("connect timeout")):
                self._connect_streak += 1
                if self._connect_streak >= n and self._unreachable is None:
                    self._unreachable = LLMConfigError(
                        f"lost {self.endpoint}: {n} calls in a row could not connect ({res.error}) after "
                        f"{self.answered} answered call(s) — the server stopped or the network went down")
            if self._first_failures is not None:
                if (not res.ok and last is not None and last >= 400 and last not in (408, 429, 503, 504)
                        and not self.answered):
                    self._first_failures.append((last, res.error or ""))
                    if len(self._first_failures) >= n:
                        codes = {c for c, _ in self._first_failures}
                        # the server's own words, where it sent more than openai's "Error code: N"
                        said = re.sub(rf"^HTTP {last}: ", "", one_line(res.error or "", 200))
                        said = "" if said == f"Error code: {last}" else said
                        hint = (f"the server refuses the fixed structured={self.config.structured!r}: leave "
                                "structured='auto' (the capability ladder steps down) or fix another rung"
                                if res.error_kind == "unsupported" else "is it an OpenAI-compatible endpoint? check "
                                "--base-url / $OPENAI_BASE_URL and --agent openai:MODEL")
                        if len(codes) == 1 and self._unreachable is None:
                            self._unreachable = LLMConfigError(
                                f"the first {n} calls to {self.endpoint} all failed with HTTP {last}"
                                + (f" ({said})" if said else "") + f" — {hint}")
                        self._first_failures = None
                else:
                    self._first_failures = None
            err = self._unreachable
        if err is not None:
            raise err

    def _adapt(self, param: str | None, req: dict) -> bool:
        st = self.state()
        if param == "tools" and "tools" in req and self.config.tool_calls == "auto":
            with self._states_lock:
                if st.tool_rung == 0 and not st.tool_known:
                    st.tool_rung = 1  # one rung down, once: the JSON action protocol
                return True  # (or another thread already stepped down): the caller rebuilds and resends
        if param == "response_format" and "response_format" in req and self.config.structured == "auto":
            with self._states_lock:
                sent = RUNGS.index(rung_of(req))
                if st.rung > sent:
                    return True  # another thread already stepped down past this rung: just resend
                if st.rung == sent and sent < len(RUNGS) - 1:
                    st.rung = sent + 1  # one rung down; the request is resent at once
                    st.rung_known = False
                    return True
            return False
        if param == "max_tokens" and st.token_param == "max_tokens" and "max_tokens" in req:
            st.token_param = "max_completion_tokens"
            return True
        if param == "temperature" and st.send_temperature and "temperature" in req:
            st.send_temperature = False
            return True
        if param == "max_tokens_drop" and st.token_param is not None and st.token_param in req:
            st.token_param = None
            return True
        return False

    def _tally(self, res: CallResult, adapted: bool = False) -> None:
        u = res.usage or {}
        config = self.config
        cost = None
        if config.price_in is not None or config.price_out is not None:
            cost = (u.get("prompt_tokens", 0) * (config.price_in or 0.0)
                    + u.get("completion_tokens", 0) * (config.price_out or 0.0)) / 1e6
            if res.cached:
                cost = 0.0
        res.cost_usd = cost
        with self._lock:
            if not res.cached and res.error_kind != "budget":
                self.calls += 1
                for k in self.tokens:
                    self.tokens[k] += int(u.get(k, 0) or 0)
                self.cost_usd += cost or 0.0
            ep = self.episode_stats.get(self.episode) if self.episode is not None else None
            if ep is not None:
                if res.cached:
                    ep["cache_hits"] += 1
                elif res.error_kind != "budget":
                    ep["calls"] += 1
                    for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
                        ep[k] += int(u.get(k, 0) or 0)
                    ep["cost_usd"] += cost or 0.0
                    ep["latency_s"] += res.latency_s
                if res.ok:
                    ep["answered"] = ep.get("answered", 0) + 1
                if not res.ok and not adapted:
                    ep["failures"] += 1
                    ep.setdefault("failures_by_kind", {})
                    ep["failures_by_kind"][res.error_kind or "other"] = ep["failures_by_kind"].get(
                        res.error_kind or "other", 0) + 1
                if adapted:
                    ep["adaptations"] = ep.get("adaptations", 0) + 1
                if res.warning:
                    ep["warnings"] = ep.get("warnings", 0) + 1

    def never_answered(self) -> LLMConfigError | None:
        """The one-line error for a run in which the endpoint answered none of its calls (each failed after
        its retries; answers served from a cache count as answered), else ``None``. A run with fewer calls
        than the first-calls rule of ``LLMConfig.stop_after`` needs (e.g. a short research loop) ends here."""
        with self._lock:
            served = any(st.get("cache_hits") for st in self.episode_stats.values())
            if self.answered or served or not self.calls or self._last_failure is None:
                return None
            return LLMConfigError(f"no call to {self.endpoint} was answered: all {self.calls} failed (last: "
                                  f"{one_line(self._last_failure, 160)}) — the run is no result; check the "
                                  "endpoint (--base-url, --agent openai:MODEL) and try again")

    def usage(self) -> dict[str, Any]:
        """Run totals: calls, tokens, cost (None without a price), transcript path."""
        with self._lock:
            priced = self.config.price_in is not None or self.config.price_out is not None
            return {"calls": self.calls, **self.tokens, "cost_usd": self.cost_usd if priced else None,
                    "transcript": None if self.transcript_path is None else str(self.transcript_path)}

    # ------------------------------------------------------------------ resolution
    def _resolve(self, req: dict, h: str, nonce: int) -> tuple[CallResult, dict]:
        structured = "response_format" in req
        if self.cache_enabled and h in self._cache:
            c = self._cache[h]
            res = CallResult(ok=True, text=c.get("text"), usage=dict(c.get("usage") or {}), cached=True,
                             structured=structured, request_hash=h, finish_reason=c.get("finish_reason"),
                             tool_calls=c.get("tool_calls"))
            # "run": answered earlier in this run; "cache_from": by an earlier run (its latency is kept, so a
            # resumed run's records still say what the model took)
            return res, {"ok": True, "text": res.text, "usage": res.usage, "cache_hit": True, "response": None,
                         "latency_s": 0.0, "tries": [], "finish_reason": res.finish_reason,
                         "tool_calls": res.tool_calls,
                         "cache_source": c.get("source", "run"), "cached_latency_s": c.get("latency_s")}
        config = self.config
        with self._lock:
            over = (config.max_calls is not None and self.calls >= config.max_calls) or (
                config.max_total_tokens is not None and self.tokens["total_tokens"] >= config.max_total_tokens)
        if over:
            msg = (f"budget exhausted ({self.calls} calls, {self.tokens['total_tokens']} tokens; "
                   f"max_calls={config.max_calls}, max_total_tokens={config.max_total_tokens})")
            res = CallResult(ok=False, error=msg, error_kind="budget", structured=structured, request_hash=h)
            return res, {"ok": False, "text": None, "error": msg, "error_kind": "budget", "usage": {}, "tries": [],
                         "latency_s": 0.0, "response": None}
        res, rec = self._send(req, h)
        res.structured = structured
        res.request_hash = h
        if res.ok and self.cache_enabled:
            self._cache[h] = {"text": res.text, "usage": res.usage, "finish_reason": res.finish_reason,
                              "latency_s": res.latency_s, "source": "run", "tool_calls": res.tool_calls}
        return res, rec

    def _get_client(self):
        if self._client is None:
            try:
                import openai
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise LLMConfigError("the LLM agents need the 'openai' package: pip install 'quantgym[llm]'") from exc
            config = self.config
            timeout = openai.Timeout(config.timeout, connect=min(config.timeout, config.connect_timeout))
            self._client = openai.OpenAI(api_key=self._api_key or "sk-no-key-set", base_url=self.endpoint,
                                         timeout=timeout, max_retries=0)
        return self._client

    def _send(self, req: dict, h: str) -> tuple[CallResult, dict]:
        import openai

        if self._unreachable is not None:  # another thread found the endpoint unreachable: stop at once
            raise self._unreachable
        client = self._get_client()
        config = self.config
        tries: list[dict] = []
        t_start = time.perf_counter()
        last_err, last_kind = "no try", "status"
        bad_dump = None  # the body of an HTTP 200 that holds no answer (kept in the transcript)
        unreachable = 0
        for k in range(config.retries + 1):
            t0 = time.perf_counter()
            retry_after = None
            try:
                resp = client.chat.completions.create(**req)
            except openai.APIConnectionError as exc:
                if not isinstance(exc, openai.APITimeoutError) or is_connect_timeout(exc):
                    kind = "timeout" if isinstance(exc, openai.APITimeoutError) else "connection"
                    last_err = (f"connect timeout after {min(config.timeout, config.connect_timeout):g} s"
                                if kind == "timeout" else one_line(f"connection error: {connection_detail(exc)}"))
                    last_kind = kind
                else:
                    last_err, last_kind = f"timeout after {config.timeout:g} s", "timeout"
                tries.append({"status": None, "error": last_err, "latency_s": time.perf_counter() - t0})
                if not self.reached and last_err.startswith(("connect", "connection")):
                    unreachable += 1
                    if unreachable >= config.unreachable_tries or k >= config.retries:
                        err = LLMConfigError(
                            f"cannot reach {self.endpoint} ({last_err}; {unreachable} tr"
                            f"{'y' if unreachable == 1 else 'ies'}, no call to it has succeeded yet) — check "
                            "--base-url / $OPENAI_BASE_URL, that the server is running, and the network"
                            + ("" if self._api_key else "; no API key is set either (a hosted endpoint needs "
                               "$OPENAI_API_KEY or --api-key-env; a local server needs none)"))
                        self._unreachable = err
                        raise err from None
                    time.sleep(config.unreachable_delay)
                    continue
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                self.reached = True
                raise LLMConfigError(f"authentication failed at {self.endpoint} (HTTP {exc.status_code}): "
                                     f"{one_line(error_message(exc))} — check --api-key / OPENAI_API_KEY") from None
            except openai.NotFoundError as exc:
                self.reached = True
                msg = one_line(error_message(exc))
                if "model" in msg.lower():
                    raise LLMConfigError(f"model {config.model!r} not found at {self.endpoint}: {msg}") from None
                raise LLMConfigError(f"endpoint not found (HTTP 404) at {self.endpoint}: {msg} — check --base-url "
                                     "(OpenAI-compatible servers usually end in /v1)") from None
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                self.reached = True
                msg = one_line(error_message(exc), 1000)
                tries.append({"status": exc.status_code, "error": msg, "latency_s": time.perf_counter() - t0})
                ctx = parse_context_error(msg + " " + error_body_text(exc))
                if ctx is not None and not dict(UNSUPPORTED)["response_format"].search(msg):
                    # the prompt (plus the cap) does not fit the window: not retried, the caller re-renders
                    detail = msg if ctx[0] is not None else f"{msg} {error_body_text(exc)}"
                    return (CallResult(ok=False, error=one_line(detail, 1000), error_kind="context",
                                       latency_s=time.perf_counter() - t_start),
                            {"ok": False, "text": None, "error": one_line(detail, 1000), "error_kind": "context",
                             "usage": {}, "tries": tries, "response": None,
                             "latency_s": time.perf_counter() - t_start})
                for param, pat in UNSUPPORTED:
                    present = (self.state().token_param in req) if param == "max_tokens_drop" else param in req
                    if present and pat.search(msg):
                        return (CallResult(ok=False, error=msg, error_kind="unsupported",
                                           latency_s=time.perf_counter() - t_start),
                                {"ok": False, "text": None, "error": msg, "error_kind": "unsupported",
                                 "unsupported": param, "usage": {}, "tries": tries, "response": None,
                                 "latency_s": time.perf_counter() - t_start})
                last_err, last_kind = msg, "bad_request"
                break
            except openai.RateLimitError as exc:
                self.reached = True
                msg = one_line(error_message(exc))
                if "insufficient_quota" in msg or "quota" in msg.lower() and "exceeded your current quota" in msg:
                    raise LLMConfigError(f"quota exhausted at {self.endpoint}: {msg}") from None
                last_err, last_kind = msg, "rate_limit"
                retry_after = retry_after_seconds(exc)
                tries.append({"status": 429, "error": msg, "latency_s": time.perf_counter() - t0})
            except openai.APIStatusError as exc:
                self.reached = True
                msg = one_line(error_message(exc))
                tries.append({"status": exc.status_code, "error": msg, "latency_s": time.perf_counter() - t0})
                body = error_body_text(exc)
                ctx5 = parse_context_error(msg + " " + body) if exc.status_code >= 500 else None
                if ctx5 is not None and ctx5[0] is not None:
                    # a context-length error sent as a 5xx (llama-cpp-python's raw "Requested tokens (P) exceed
                    # context window of M"): not retried, the caller re-renders
                    full = one_line(f"HTTP {exc.status_code}: {msg}", 1000)
                    return (CallResult(ok=False, error=full, error_kind="context",
                                       latency_s=time.perf_counter() - t_start),
                            {"ok": False, "text": None, "error": full, "error_kind": "context", "usage": {},
                             "tries": tries, "response": None, "latency_s": time.perf_counter() - t_start})
                said = msg + " " + body
                # a validation error dressed as a server fault (llama-cpp-python: HTTP 500 "Input should be 'text'
                # or 'json_object'", loc body.response_format.type; a refused ``tools``; llama-server's "tools
                # param requires --jinja flag"): that ladder one rung down, no retry loop
                refused = None
                if (exc.status_code >= 500 and "response_format" in req and not self.state().rung_known
                        and UNSUPPORTED_5XX.search(said) and _VALIDATION_5XX.search(said)):
                    refused = "response_format"
                elif (exc.status_code >= 500 and "tools" in req and not self.state().tool_known
                      and UNSUPPORTED_TOOLS_5XX.search(said)
                      and (_VALIDATION_5XX.search(said) or TOOLS_NOT_ENABLED.search(said))):
                    refused = "tools"
                if refused is not None:
                    full = one_line(f"HTTP {exc.status_code}: {msg}", 1000)
                    return (CallResult(ok=False, error=full, error_kind="unsupported",
                                       latency_s=time.perf_counter() - t_start),
                            {"ok": False, "text": None, "error": full, "error_kind": "unsupported",
                             "unsupported": refused, "usage": {}, "tries": tries, "response": None,
                             "latency_s": time.perf_counter() - t_start})
                last_err = f"HTTP {exc.status_code}: {msg}"
                # retried: a 5xx, except 501 / 505 (the server does not implement the method or the HTTP
                # version, RFC 9110 §15.6.2, §15.6.6: no retry cures it), and 408 / 409
                if (exc.status_code >= 500 and exc.status_code not in (501, 505)) or exc.status_code in (408, 409):
                    last_kind = "server"
                    retry_after = retry_after_seconds(exc)
                else:
                    last_kind = "status"
                    break
            except openai.OpenAIError as exc:  # e.g. a malformed response body
                self.reached = True
                last_err, last_kind = one_line(f"{type(exc).__name__}: {exc}"), "status"
                tries.append({"status": None, "error": last_err, "latency_s": time.perf_counter() - t0})
                break
            else:
                self.reached = True
                lat = time.perf_counter() - t0
                tries.append({"status": 200, "error": None, "latency_s": lat})
                dump = resp.model_dump(mode="json") if hasattr(resp, "model_dump") else None
                text, finish = message_content(resp)
                if text is None:  # e.g. a proxy's error body sent with status 200: a failed call, not ""
                    last_err, last_kind = "HTTP 200 without choices in the response body (no answer)", "status"
                    tries[-1]["error"] = last_err
                    bad_dump = dump
                    break
                usage = usage_counts(resp)
                calls = message_tool_calls(resp)
                res = CallResult(ok=True, text=text, usage=usage, latency_s=time.perf_counter() - t_start,
                                 finish_reason=finish, tool_calls=calls)
                return res, {"ok": True, "text": text, "usage": usage, "response": dump, "tries": tries,
                             "latency_s": res.latency_s, "finish_reason": finish, "tool_calls": calls,
                             "response_model": getattr(resp, "model", None)}
            if k < config.retries:
                cap = min(config.backoff_max, config.backoff_base * (2 ** k))
                delay = random.uniform(0, cap)
                if retry_after is not None:
                    delay = min(config.backoff_max, max(delay, retry_after))
                time.sleep(delay)
        lat = time.perf_counter() - t_start
        return (CallResult(ok=False, error=last_err, error_kind=last_kind, latency_s=lat),
                {"ok": False, "text": None, "error": last_err, "error_kind": last_kind, "usage": {}, "tries": tries,
                 "response": bad_dump, "latency_s": lat})


__all__ = ["RUNGS", "STRUCTURED_MODES", "TOOL_RUNGS", "TOOL_MODES", "parse_context_error", "rung_of", "LLMConfig", "CallResult", "ChatEngine", "Transcript", "read_transcript",
           "canonical_hash", "LLMConfigError", "ReplayMismatchError", "LLM_AGENT_VERSION"]
