"""Parsing of LLM answers for PortBench's text protocol (spec portbench.md §4.0, §11.5): refusal and JSON.

Used by :class:`quantgym.envs.portbench.text_protocol.TextStageAction` (which the PortBench adapter of the
LLM agent wraps around the env) and by anything else that needs to read a stage answer:

- :func:`is_refusal` — §4.0 refusal rule (English and Chinese phrases, short answers without ``{``,
  empty answers);
- :func:`extract_json` — §4.0 extraction: strip fences and control characters, first balanced
  ``{…}``, else the greedy ``{.*}``, else salvage the complete ``"key": value`` pairs of a truncated
  object, else the text wrapped in braces.

The §4.1–§4.3 coercions of the parsed object into the env's action arrays and the stage answer schema
are :mod:`quantgym.envs.portbench.coercion`.

No model is called here and nothing raises on untrusted text: every function returns a result
object describing what happened.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

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


__all__ = ["REFUSAL_PHRASES", "REFUSAL_MIN_CHARS", "JsonResult", "clean_text", "strip_reasoning", "extract_json",
           "is_refusal"]
