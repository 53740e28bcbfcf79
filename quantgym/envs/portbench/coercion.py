"""Coercion of parsed PortBench stage answers into the env's action arrays (spec portbench.md §4.1–§4.3, §11.4).

:func:`coerce_s1`, :func:`coerce_s2`, :func:`coerce_s3` (:data:`COERCERS`, by stage) turn the JSON object that
:func:`quantgym.envs.portbench.parsing.extract_json` found into the stage's action array and list every
coercion applied (recorded in the step's ``info["text"]["coercions"]``, §11.4); :func:`stage_json_schema` is
the JSON schema of a stage answer for structured output. Nothing here raises on untrusted input.

Numbers given as strings are read as numbers [project choice], and every such reading is recorded: ``"0.4"``
is 0.4, and a percent string is a percentage, ``"60%"`` is 0.60 (``{"weights": {"SPY": "60%", "TLT": 0.4}}``
is 60 % SPY, 40 % TLT). A string that is no number counts as non-numeric (the stage's default, recorded).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

STAGE_NAMES = ("S1", "S2", "S3")
REGIME_CHOICES = ("bull", "bear", "sideways", "high-volatility")
SIGNAL_CODES = {"sell": 0, "hold": 1, "buy": 2}


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


def read_number(x: Any) -> tuple[float | None, str | None]:
    """``(value, reading)`` of an answer value: a finite JSON number as it is (``reading`` None); a string
    holding a number read as that number, a percent string as a percentage (``"60%"`` -> 0.6,
    ``" 0.4 "`` -> 0.4), with ``reading`` = ``'"60%" -> 0.6'`` for the record; anything else (booleans,
    other strings, non-finite values) ``(None, None)``."""
    if isinstance(x, bool):
        return None, None
    if isinstance(x, (int, float)):
        f = float(x)
        return (f if math.isfinite(f) else None), None
    if not isinstance(x, str):
        return None, None
    s = x.strip()
    pct = s.endswith("%")
    try:
        f = float(s[:-1].strip() if pct else s)
    except ValueError:
        return None, None
    if not math.isfinite(f):
        return None, None
    f = f / 100.0 if pct else f
    return f, f"{_quote(x)} -> {f:.10g}"


def _quote(s: str) -> str:
    return '"' + (s if len(s) <= 20 else s[:17] + "...") + '"'


class _Readings:
    """The strings of one stage answer read as numbers, recorded as one coercion line per field."""

    def __init__(self) -> None:
        self.by_field: dict[str, list[str]] = {}

    def number(self, x: Any, field_name: str, label: str | None = None) -> float | None:
        value, reading = read_number(x)
        if reading is not None:
            self.by_field.setdefault(field_name, []).append(f"{label} {reading}" if label else reading)
        return value

    def record(self, co: list[str]) -> None:
        """Append one line per field naming every string read as a number (all of them, no cut)."""
        for name, items in self.by_field.items():
            co.append(f"{name}: {len(items)} string{'s' if len(items) > 1 else ''} read as "
                      f"number{'s' if len(items) > 1 else ''}: {', '.join(items)}")


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


def _count_line(co: list[str], names: list[str], what: str) -> None:
    """``"3 missing views -> 0: SPY, TLT, GLD"`` when ``names`` is not empty."""
    if names:
        co.append(f"{len(names)} {what}: {_summ(names)}")


def coerce_s1(obj: dict, tickers: Sequence[str], available: np.ndarray) -> Coerced:
    """§4.1 coercion: views per asset, missing/non-numeric → 0, clipped to [-1, 1]; confidence clipped
    to [0, 1] (default 0.5); regime and summary kept as text (not scored)."""
    co: list[str] = []
    views_d = _section(obj, "asset_views", tickers, co)
    got, unknown = _lookup(views_d, tickers)
    n = len(tickers)
    views = np.zeros(n)
    missing, bad, clipped = [], [], []
    read = _Readings()
    for i in np.flatnonzero(np.asarray(available, bool)):
        if i not in got:
            missing.append(tickers[i])
            continue
        v = read.number(got[i], "views", tickers[i])
        if v is None:
            bad.append(tickers[i])
            continue
        if abs(v) > 1:
            clipped.append(tickers[i])
        views[i] = min(1.0, max(-1.0, v))
    if unknown:
        co.append(f"unknown asset keys ignored: {_summ(unknown)}")
    _count_line(co, missing, "missing views -> 0")
    _count_line(co, bad, "non-numeric views -> 0")
    _count_line(co, clipped, "views clipped to [-1, 1]")
    conf = read.number(obj.get("confidence"), "confidence")
    read.record(co)
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
    _count_line(co, missing, "missing signals -> hold")
    _count_line(co, bad, "invalid signals -> hold")
    strengths = np.full(n, 0.5)
    st_d = obj.get("strengths")
    read = _Readings()
    if isinstance(st_d, dict):
        sg, _ = _lookup(st_d, tickers)
        nclip = 0
        for i, v in sg.items():
            f = read.number(v, "strengths", tickers[i])
            if f is None:
                continue
            nclip += not 0 <= f <= 1
            strengths[i] = min(1.0, max(0.0, f))
        if nclip:
            co.append(f"{nclip} strengths clipped to [0, 1]")
    read.record(co)
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
    read = _Readings()
    for i, v in got.items():
        f = read.number(v, "weights", tickers[i])
        if f is None:
            bad.append(tickers[i])
        elif f < 0:
            neg.append(tickers[i])
        elif not avail[i]:
            if f > 0:
                unav.append(tickers[i])
        else:
            w[i] = f
    read.record(co)
    if unknown:
        co.append(f"unknown asset keys ignored: {_summ(unknown)}")
    _count_line(co, bad, "invalid weights -> 0")
    _count_line(co, neg, "negative weights -> 0")
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


__all__ = ["Coerced", "read_number", "coerce_s1", "coerce_s2", "coerce_s3", "COERCERS", "stage_json_schema",
           "STAGE_NAMES", "REGIME_CHOICES", "SIGNAL_CODES"]
