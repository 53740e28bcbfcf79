"""Offline replay of a recorded LLM run: :class:`ReplayEngine` answers every request from a transcript."""

from __future__ import annotations

import os
from pathlib import Path

from quantgym.agents.llm.client import CallResult, ChatEngine, LLMConfig, ReplayMismatchError
from quantgym.agents.llm.endpoint import rung_of
from quantgym.agents.llm.transcript import read_transcript


class ReplayEngine(ChatEngine):
    """A :class:`ChatEngine` that answers from a recorded transcript (no network).

    Requests are matched by canonical hash (the n-th request with a given hash gets the n-th record
    with that hash; cache hits of the original run are records too). The endpoint adaptations
    replay from the recorded outcomes: a refusal of a capability (a ``response_format`` rung, ``tools``,
    the ``max_tokens`` name, ``temperature``) is the endpoint's answer to any request that carries it, so a
    request the transcript does not hold but that carries a capability the recorded run found refused gets
    that refusal, and the ladder steps down as it did. Episodes of a run with ``-j N`` may therefore be
    replayed in another order (``-j 1``): the episode that asks first meets the refusal.

    Raises
    ------
    ReplayMismatchError
        On a request the transcript does not hold (the run diverged: different prompts, env version,
        or options).
    """

    def __init__(self, path: str | os.PathLike):
        header, calls = read_transcript(path)
        recorded = dict(header.get("config") or {})
        fields = set(LLMConfig.__dataclass_fields__)
        config = LLMConfig(**{k: v for k, v in recorded.items() if k in fields})
        super().__init__(config, api_key="replay", transcript=None, cache=False)
        self.header = header
        self.source = Path(path)
        self._queues: dict[str, list[dict]] = {}
        for r in calls:
            self._queues.setdefault(r["hash"], []).append(r)
        self._pos: dict[str, int] = {}
        self._probes = list(header.get("_probes") or [])
        #: the endpoint's recorded refusals, by capability: ("response_format", rung), ("tools",), ...
        self._refusals: dict[tuple, dict] = {}
        for r in calls:
            param = r.get("unsupported")
            if r.get("error_kind") == "unsupported" and r.get("adapted") and param:
                key = ("response_format", r.get("rung")) if param == "response_format" else (param,)
                self._refusals.setdefault(key, r)

    def _refusal(self, req: dict) -> dict | None:
        """The recorded refusal of a capability ``req`` carries (:class:`ReplayEngine`), or None."""
        keys = [("response_format", rung_of(req))] if "response_format" in req else []
        keys += [(p,) for p in ("tools", "max_tokens", "temperature") if p in req]
        return next((self._refusals[k] for k in keys if k in self._refusals), None)

    def _probe_metadata(self) -> tuple[int | None, str | None, list[dict]]:
        """The recorded metadata probe (no network)."""
        for p in self._probes:
            return p.get("context_window"), p.get("source"), list(p.get("tried") or [])
        return None, None, []

    def _resolve(self, req: dict, h: str, nonce: int) -> tuple[CallResult, dict]:
        with self._lock:
            q = self._queues.get(h)
            if not q and (refused := self._refusal(req)) is not None:
                q = [refused]  # the endpoint's answer to the capability, whichever request met it first
            if not q:
                raise ReplayMismatchError(
                    f"request {h[:12]} ({self.episode or 'no episode'}) is not in transcript {self.source}: the run "
                    "diverged from the recorded one (other prompts, options or env version)")
            i = self._pos.get(h, 0) if h in self._queues else 0
            rec = q[min(i, len(q) - 1)]
            self._pos[h] = i + 1
        # an answer a resumed run took from an earlier part of itself (--cache-from) was a real call of the
        # run: it replays as a call, with its tokens and recorded latency (as the run's tables count it)
        resumed = rec.get("cache_hit") and rec.get("cache_source") == "cache_from"
        res = CallResult(ok=bool(rec.get("ok")), text=rec.get("text"), error=rec.get("error"),
                         error_kind=rec.get("error_kind"), usage=dict(rec.get("usage") or {}),
                         latency_s=float(rec.get("latency_s") or rec.get("cached_latency_s") or 0.0),
                         cached=bool(rec.get("cache_hit")) and not resumed,
                         structured="response_format" in req, request_hash=h, finish_reason=rec.get("finish_reason"),
                         tool_calls=rec.get("tool_calls"))
        out = {k: rec.get(k) for k in ("ok", "text", "error", "error_kind", "usage", "unsupported", "cache_hit",
                                       "finish_reason", "warning", "tool_calls")}
        return res, out


__all__ = ["ReplayEngine"]
