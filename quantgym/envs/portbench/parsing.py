"""Parsing of LLM answers for PortBench's text protocol (spec portbench.md §4.0–§4.3, §11.4–§11.5).

One module, used by :class:`quantgym.envs.portbench.text_protocol.TextStageAction` (which the PortBench adapter of the
LLM agent wraps around the env) and by anything else that needs to read a stage answer:

- :func:`is_refusal` — §4.0 refusal rule (English and Chinese phrases, short answers without ``{``,
  empty answers);
- :func:`extract_json` — §4.0 extraction: strip fences and control characters, first balanced
  ``{…}``, else the greedy ``{.*}``, else salvage the complete ``"key": value`` pairs of a truncated
  object, else the text wrapped in braces;
- :func:`coerce_s1`, :func:`coerce_s2`, :func:`coerce_s3` — the §4.1–§4.3 coercions into the env's
  action arrays, each returning the list of coercions applied (recorded in ``info``, §11.4);
- :func:`stage_json_schema` — the JSON schema of a stage answer for structured output
  (``response_format={"type": "json_schema", ...}``).

No model is called here and nothing raises on untrusted text: every function returns a result
object describing what happened.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from quantgym.agents.llm.code import strip_reasoning
from quantgym._util import strip_fences

#: §4.0 refusal phrases (lower-cased substring match; English and Chinese). [project choice: the list]
REFUSAL_PHRASES: tuple[str, ...] = (
    "i cannot provide", "i can't provide", "i can not provide", "i cannot help", "i can't help",
    "unable to assist", "i am unable to provide", "i'm unable to provide", "i am unable to help",
    "i'm unable to help", "i cannot assist", "i can't assist", "i cannot comply", "i can't comply",
    "i must decline", "i will not provide", "not able to provide", "cannot give financial advice",
    "can't give financial advice", "i'm sorry, but i can't", "i am sorry, but i cannot", "sorry, i can't",
    "sorry, i cannot",
    "无法回答", "无法提供", "不能提供", "无法协助", "抱歉，我无法", "抱歉,我无法", "不便回答",
)
#: §4.0: an answer shorter than this without ``{`` is a refusal
REFUSAL_MIN_CHARS = 120
#: reasoning blocks some open models emit before the answer (removed before parsing) [project choice]

STAGE_NAMES = ("S1", "S2", "S3")
REGIME_CHOICES = ("bull", "bear", "sideways", "high-volatility")
SIGNAL_CODES = {"sell": 0, "hold": 1, "buy": 2}


#: the Unicode control characters (general category Cc: U+0000-U+001F, U+007F-U+009F) but tab and newline
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: the tokens of the string-aware brace scan: a complete JSON string (escapes included), a quote that opens
#: no complete string, a brace
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|["{}]', re.S)


def clean_text(text: str) -> str:
    """§4.0 pre-processing: drop reasoning blocks, code fences and control characters (keep \\n, \\t)."""
    text = strip_reasoning(text)
    text = strip_fences(text)
    return _CONTROL.sub("", text)


# ------------------------------------------------------------------------------------------ JSON
def _balanced_end(s: str, i: int) -> int | None:
    """Index after the ``}`` closing the object starting at ``s[i] == '{'`` (string-aware), or None.

    A backslash inside a string escapes the character after it; an unterminated string runs to the end.
    One regular-expression scan over strings and braces (not a Python loop over characters)."""
    depth = 0
    for m in _TOKENS.finditer(s, i):
        a, b = m.span()
        c = s[a]
        if c == '"':
            if b - a == 1:  # no closing quote: the rest is inside the string
                return None
        elif c == "{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return b
    return None


_DEC = json.JSONDecoder(strict=False)
_WS = " \t\n\r"


def _skip(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _salvage_value(s: str, i: int) -> tuple[Any, int, bool]:
    """Parse a value at ``i``; returns (value, next index, complete)."""
    if i >= len(s):
        return None, i, False
    if s[i] == "{":
        return _salvage_object(s, i)
    if s[i] == "[":
        out, i = [], i + 1
        while True:
            i = _skip(s, i)
            if i >= len(s):
                return out, i, False
            if s[i] == "]":
                return out, i + 1, True
            v, j, ok = _salvage_value(s, i)
            if not ok:
                return out, j, False
            j = _skip(s, j)
            if j >= len(s):
                return out, j, False
            out.append(v)
            if s[j] == ",":
                i = j + 1
            elif s[j] == "]":
                return out, j + 1, True
            else:
                return out, j, False
    try:
        v, j = _DEC.raw_decode(s, i)
    except ValueError:
        return None, i, False
    return v, j, True


def _salvage_object(s: str, i: int) -> tuple[dict, int, bool]:
    """Salvage the complete ``"key": value`` pairs of a (possibly truncated) object at ``s[i] == '{'``.

    A pair counts only when its value is followed by ``,`` or ``}``; a nested object cut short keeps
    its own complete pairs (so a truncated ``{"asset_views": {"SPY": 0.5, "QQ`` yields
    ``{"asset_views": {"SPY": 0.5}}``).
    """
    out: dict = {}
    i += 1
    while True:
        i = _skip(s, i)
        if i >= len(s):
            return out, i, False
        if s[i] == "}":
            return out, i + 1, True
        if s[i] == ",":
            i += 1
            continue
        if s[i] != '"':
            return out, i, False
        try:
            key, i = _DEC.raw_decode(s, i)
        except ValueError:
            return out, i, False
        i = _skip(s, i)
        if i >= len(s) or s[i] != ":":
            return out, i, False
        i = _skip(s, i + 1)
        val, j, ok = _salvage_value(s, i)
        if not ok:
            if isinstance(val, (dict, list)) and val:
                out[str(key)] = val  # keep the complete part of a nested container
            return out, j, False
        j = _skip(s, j)
        if j >= len(s):
            return out, j, False  # a scalar at the very end may itself be cut short: drop it
        if s[j] in ",}":
            out[str(key)] = val
            if s[j] == "}":
                return out, j + 1, True
            i = j + 1
        else:
            return out, j, False


@dataclass
class JsonResult:
    """Outcome of :func:`extract_json`.

    Attributes
    ----------
    obj : the parsed object (a dict) or None.
    method : "balanced" | "greedy" | "salvage" | "braces" | None.
    error : why nothing was found (None on success).
    """

    obj: dict | None
    method: str | None
    error: str | None = None


def extract_json(text: str | None) -> JsonResult:
    """§4.0 extraction of one JSON object from an answer (never raises).

    Order: (1) the first balanced ``{…}`` that parses; (2) the greedy span from the first ``{`` to the
    last ``}``; (3) the complete ``"key": value`` pairs salvaged from a truncated object; (4) the whole
    text wrapped in ``{…}``. Only a JSON *object* counts.
    """
    if not text:
        return JsonResult(None, None, "empty answer")
    s = clean_text(text)
    starts = [m.start() for m in re.finditer(r"\{", s)]
    for k, i in enumerate(starts[:200]):
        end = _balanced_end(s, i)
        if end is None:
            if s[_skip(s, i + 1):_skip(s, i + 1) + 1] == '"':
                break  # a JSON object cut short: what follows is nested in it (greedy / salvage below)
            continue
        try:
            obj = json.loads(s[i:end], strict=False)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return JsonResult(obj, "balanced")
    if starts:
        last = s.rfind("}")
        if last > starts[0]:
            try:
                obj = json.loads(s[starts[0]:last + 1], strict=False)
                if isinstance(obj, dict):
                    return JsonResult(obj, "greedy")
            except ValueError:
                pass
        obj, _, _ = _salvage_object(s, starts[0])
        if obj:
            return JsonResult(obj, "salvage")
    body = s.strip()
    if body:
        try:
            obj = json.loads("{" + body.strip().strip(",") + "}", strict=False)
            if isinstance(obj, dict) and obj:
                return JsonResult(obj, "braces")
        except ValueError:
            pass
    return JsonResult(None, None, "no JSON object found" if not starts else "no parseable JSON object")


def _json_span(s: str) -> tuple[int, int] | None:
    i = s.find("{")
    if i < 0:
        return None
    end = _balanced_end(s, i)
    return (i, end if end is not None else len(s))


def is_refusal(text: str | None) -> tuple[bool, str | None]:
    """§4.0 refusal rule. Returns ``(refused, reason)``.

    A refusal is an empty answer, an answer shorter than 120 characters without ``{``, or an answer
    whose text *outside* its first JSON object contains a refusal phrase (English or Chinese; a phrase
    quoted inside a JSON string value, e.g. in ``macro_summary``, does not count [project choice]).
    """
    if text is None or not text.strip():
        return True, "empty answer"
    s = strip_reasoning(text).strip()
    if not s:
        return True, "empty answer (reasoning only)"
    if len(s) < REFUSAL_MIN_CHARS and "{" not in s:
        return True, f"short answer without JSON ({len(s)} < {REFUSAL_MIN_CHARS} characters)"
    span = _json_span(s)
    outside = s if span is None else s[:span[0]] + " " + s[span[1]:]
    low = outside.lower()
    for p in REFUSAL_PHRASES:
        if p in low:
            return True, f"refusal phrase {p!r}"
    return False, None


# ------------------------------------------------------------------------------------------ coercion
@dataclass
class Coerced:
    """A stage answer turned into the env's arrays.

    Attributes
    ----------
    values : (N,) float64 action array for the stage (views, signal codes or weights).
    notes : free-text fields the next stage prompt shows (S1: detected_regime, macro_summary,
        confidence; S2: strengths (N,) array, reasoning).
    coercions : human-readable list of the §4.1–§4.3 coercions applied.
    usable : False when the answer is still unusable after coercion (S3: zero total weight, §11.4).
    """

    values: np.ndarray
    notes: dict[str, Any] = field(default_factory=dict)
    coercions: list[str] = field(default_factory=list)
    usable: bool = True


def _as_number(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        f = float(x)
    elif isinstance(x, str):
        try:
            f = float(x.strip().rstrip("%"))
        except ValueError:
            return None
    else:
        return None
    return f if math.isfinite(f) else None


def _ticker_index(tickers: Sequence[str]) -> tuple[dict[str, int], dict[str, int]]:
    """(ticker -> index, upper-cased ticker -> index), cached per universe (speed only)."""
    try:
        return _ticker_index_cached(tuple(tickers))
    except TypeError:  # unhashable entries
        return _ticker_index_cached.__wrapped__(tuple(tickers))


@functools.lru_cache(maxsize=16)
def _ticker_index_cached(tickers: tuple) -> tuple[dict[str, int], dict[str, int]]:
    return {t: i for i, t in enumerate(tickers)}, {t.upper(): i for i, t in enumerate(tickers)}


def _lookup(d: dict, tickers: Sequence[str]) -> tuple[dict[int, Any], list[str]]:
    """Map answer keys to universe indices (exact, then case-insensitive). Returns (index -> value, unknown keys)."""
    pos, upper = _ticker_index(tickers)
    out, unknown = {}, []
    for k, v in d.items():
        ks = str(k).strip()
        i = pos.get(ks, upper.get(ks.upper()))
        if i is None:
            unknown.append(ks)
        else:
            out[i] = v
    return out, unknown


def _section(obj: dict, key: str, tickers: Sequence[str], coercions: list[str]) -> dict:
    sub = obj.get(key)
    if isinstance(sub, dict):
        return sub
    flat = {k: v for k, v in obj.items() if str(k).strip().upper() in {t.upper() for t in tickers}}
    if flat:
        coercions.append(f"flat object accepted (no '{key}' key)")
        return flat
    coercions.append(f"no '{key}' object")
    return {}


def _summ(names: list[str], k: int = 5) -> str:
    return ", ".join(names[:k]) + (f" (+{len(names) - k})" if len(names) > k else "")


def coerce_s1(obj: dict, tickers: Sequence[str], available: np.ndarray) -> Coerced:
    """§4.1 coercion: views per asset, missing/non-numeric → 0, clipped to [-1, 1]; confidence clipped
    to [0, 1] (default 0.5); regime and summary kept as text (not scored)."""
    co: list[str] = []
    views_d = _section(obj, "asset_views", tickers, co)
    got, unknown = _lookup(views_d, tickers)
    n = len(tickers)
    views = np.zeros(n)
    missing, bad, clipped = [], [], []
    for i in np.flatnonzero(np.asarray(available, bool)):
        if i not in got:
            missing.append(tickers[i])
            continue
        v = _as_number(got[i])
        if v is None:
            bad.append(tickers[i])
            continue
        if abs(v) > 1:
            clipped.append(tickers[i])
        views[i] = min(1.0, max(-1.0, v))
    if unknown:
        co.append(f"unknown asset keys ignored: {_summ(unknown)}")
    if missing:
        co.append(f"{len(missing)} missing views -> 0: {_summ(missing)}")
    if bad:
        co.append(f"{len(bad)} non-numeric views -> 0: {_summ(bad)}")
    if clipped:
        co.append(f"{len(clipped)} views clipped to [-1, 1]: {_summ(clipped)}")
    conf = _as_number(obj.get("confidence"))
    if conf is None:
        if "confidence" in obj:
            co.append("non-numeric confidence -> 0.5")
        conf = 0.5
    elif not 0 <= conf <= 1:
        co.append("confidence clipped to [0, 1]")
    regime = obj.get("detected_regime")
    if not isinstance(regime, str) or regime.strip().lower() not in REGIME_CHOICES:
        if regime is not None:
            co.append(f"invalid regime {str(regime)[:30]!r} -> 'n/a'")
        regime = "n/a"
    summary = obj.get("macro_summary")
    summary = "n/a" if not isinstance(summary, str) or not summary.strip() else summary.strip()[:2000]
    return Coerced(views, {"detected_regime": str(regime).strip().lower() if regime != "n/a" else "n/a",
                           "macro_summary": summary, "confidence": min(1.0, max(0.0, conf))}, co)


def coerce_s2(obj: dict, tickers: Sequence[str], available: np.ndarray) -> Coerced:
    """§4.2 coercion: missing or invalid signal (case-sensitive ``buy|hold|sell``) → hold; strengths
    clipped to [0, 1], default 0.5 (not scored)."""
    co: list[str] = []
    sig_d = obj.get("signals")
    if not isinstance(sig_d, dict):
        flat = {k: v for k, v in obj.items() if isinstance(v, str) and v in SIGNAL_CODES}
        if flat:
            co.append("flat object accepted (no 'signals' key)")
            sig_d = flat
        else:
            co.append("no 'signals' object")
            sig_d = {}
    got, unknown = _lookup(sig_d, tickers)
    n = len(tickers)
    sig = np.full(n, SIGNAL_CODES["hold"], dtype=np.float64)
    missing, bad = [], []
    for i in np.flatnonzero(np.asarray(available, bool)):
        if i not in got:
            missing.append(tickers[i])
        elif not isinstance(got[i], str) or got[i] not in SIGNAL_CODES:
            bad.append(tickers[i])
        else:
            sig[i] = SIGNAL_CODES[got[i]]
    if unknown:
        co.append(f"unknown asset keys ignored: {_summ(unknown)}")
    if missing:
        co.append(f"{len(missing)} missing signals -> hold: {_summ(missing)}")
    if bad:
        co.append(f"{len(bad)} invalid signals -> hold: {_summ(bad)}")
    strengths = np.full(n, 0.5)
    st_d = obj.get("strengths")
    if isinstance(st_d, dict):
        sg, _ = _lookup(st_d, tickers)
        nclip = 0
        for i, v in sg.items():
            f = _as_number(v)
            if f is None:
                continue
            nclip += not 0 <= f <= 1
            strengths[i] = min(1.0, max(0.0, f))
        if nclip:
            co.append(f"{nclip} strengths clipped to [0, 1]")
    reasoning = obj.get("reasoning")
    return Coerced(sig, {"strengths": strengths,
                         "reasoning": reasoning.strip()[:2000] if isinstance(reasoning, str) else ""}, co)


def coerce_s3(obj: dict, tickers: Sequence[str], available: np.ndarray) -> Coerced:
    """§4.3 coercion: flat object accepted; missing/invalid/negative → 0; weights on unavailable assets
    dropped; normalised to sum 1 and rounded to 4 decimals. Zero total weight stays unusable
    (§11.4 wins over §4.3's equal-weight rule: the env then applies the S3 fallback with score 0)."""
    co: list[str] = []
    w_d = _section(obj, "weights", tickers, co)
    got, unknown = _lookup(w_d, tickers)
    avail = np.asarray(available, bool)
    n = len(tickers)
    w = np.zeros(n)
    bad, neg, unav = [], [], []
    for i, v in got.items():
        f = _as_number(v)
        if f is None:
            bad.append(tickers[i])
        elif f < 0:
            neg.append(tickers[i])
        elif not avail[i]:
            if f > 0:
                unav.append(tickers[i])
        else:
            w[i] = f
    if unknown:
        co.append(f"unknown asset keys ignored: {_summ(unknown)}")
    if bad:
        co.append(f"{len(bad)} invalid weights -> 0: {_summ(bad)}")
    if neg:
        co.append(f"{len(neg)} negative weights -> 0: {_summ(neg)}")
    if unav:
        co.append(f"weights on {len(unav)} unavailable assets dropped: {_summ(unav)}")
    tot = w.sum()
    if tot <= 0:
        co.append("zero total weight: unusable (S3 fallback, score 0)")
        return Coerced(w, {}, co, usable=False)
    if abs(tot - 1) > 1e-6:
        co.append(f"weights normalised (sum was {tot:.6g})")
    w = np.round(w / tot, 4)
    return Coerced(w, {}, co)


COERCERS = (coerce_s1, coerce_s2, coerce_s3)


# ------------------------------------------------------------------------------------------ schemas
def stage_json_schema(stage: int, tickers: Sequence[str]) -> dict:
    """JSON schema (OpenAI structured-output dialect, ``strict``) of a stage answer over ``tickers``.

    Returns the ``json_schema`` member of ``response_format``: ``{"name", "schema", "strict"}``. Every
    property is required and ``additionalProperties`` is false (what strict mode demands); numeric
    ranges are stated in the prompt, not in the schema (not every server supports ``minimum``).
    """
    tick = list(tickers)

    def per_asset(item: dict) -> dict:
        return {"type": "object", "properties": {t: dict(item) for t in tick}, "required": tick,
                "additionalProperties": False}

    num = {"type": "number"}
    if stage == 0:
        props = {"asset_views": per_asset(num), "detected_regime": {"type": "string", "enum": list(REGIME_CHOICES)},
                 "confidence": num, "macro_summary": {"type": "string"}}
    elif stage == 1:
        props = {"signals": per_asset({"type": "string", "enum": ["buy", "hold", "sell"]}),
                 "strengths": per_asset(num), "reasoning": {"type": "string"}}
    elif stage == 2:
        props = {"weights": per_asset(num), "expected_return": num, "expected_vol": num, "sharpe_estimate": num}
    else:
        raise ValueError(f"stage must be 0, 1 or 2, got {stage!r}")
    return {"name": f"portbench_{STAGE_NAMES[stage].lower()}",
            "schema": {"type": "object", "properties": props, "required": list(props), "additionalProperties": False},
            "strict": True}


__all__ = [
    "REFUSAL_PHRASES", "REFUSAL_MIN_CHARS", "JsonResult", "Coerced", "clean_text", "strip_reasoning", "extract_json",
    "is_refusal", "coerce_s1", "coerce_s2", "coerce_s3", "COERCERS", "stage_json_schema",
]
