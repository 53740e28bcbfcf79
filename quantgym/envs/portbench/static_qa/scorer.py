"""QA scorer: partial credit, no exact-match strings (spec §9.4, clean-mode fixes §11.9 / Appendix A).

One function per template, dispatched by :func:`score_response`. Every function takes the response
text and returns ``(score in [0, 1], parsed prediction)``; unparseable output scores 0, never raises.

Clean-mode fixes (``fidelity="clean"``, default): U+2212 (minus) and U+2013 (en dash) are mapped to
``-`` before parsing; T6 checks the negative phrases before the positive ones ("no rebalance" is a
hold, not a rebalance); T7 maps ``maintain``/``hold`` to ``neutral``. ``fidelity="paper"`` keeps the
repo's behaviour.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from quantgym._util import strip_fences
from quantgym.envs.portbench.universe import ASSET_CLASSES
from quantgym.envs.portbench.static_qa.base import QAPair

#: §9.4 T1 keywords in their fixed order -> label
DIRECTION_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("positive", "positive"), ("bullish", "positive"), ("upward", "positive"), ("increase", "positive"),
    ("negative", "negative"), ("bearish", "negative"), ("downward", "negative"), ("decrease", "negative"),
    ("flat", "flat"), ("neutral", "flat"), ("sideways", "flat"),
)
#: §9.4 T7 regime keywords in their fixed order -> label
REGIME_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("bull", "bull"), ("bullish", "bull"), ("bear", "bear"), ("bearish", "bear"), ("sideways", "sideways"),
    ("flat", "sideways"), ("range-bound", "sideways"), ("crisis", "crisis"), ("crash", "crisis"),
)
ALLOC_DIRECTIONS = frozenset({"increase", "decrease", "neutral"})
#: clean-mode T7 synonyms of neutral
NEUTRAL_SYNONYMS = frozenset({"maintain", "hold"})
#: clean-mode T6 negative patterns, checked first (§9.4 "no rebalance", "hold", the word "no"); whole words
#: so that "threshold" is not a hold; "not/n't rebalance" are [project choice] additions
T6_NEGATIVE_PATTERNS: tuple[re.Pattern, ...] = tuple(
    re.compile(p) for p in (r"\bno rebalanc", r"\bnot rebalanc", r"n't rebalanc", r"\bhold\b", r"\bno\b")
)

_NUMBER = re.compile(r"[-+]?\d*\.?\d+\s*%?")
_TRADE = re.compile(r"(sell|buy)\s+([\d.]+)\s+of\s+(\S+)")
_PCT = re.compile(r"([-+]?\d*\.?\d+)\s*%")


@dataclass
class ScoreResult:
    """Outcome of scoring one response.

    Attributes
    ----------
    score : float in [0, 1]
    prediction : dict
        What the parser read (label, number, weights, decision/trade, regime/directions).
    error : str or None
        Why the response could not be used (score 0), if so.
    """

    score: float
    prediction: dict = field(default_factory=dict)
    error: str | None = None

    @property
    def correct(self) -> bool:
        """§9.4 ``n_correct`` rule: score ≥ 0.99."""
        return self.score >= 0.99


def normalize_text(text: str, fidelity: str = "clean") -> str:
    """Clean mode: map U+2212 (−) and U+2013 (–) to ``-`` (§11.9). Paper mode: unchanged."""
    if fidelity == "clean":
        return text.replace("\u2212", "-").replace("\u2013", "-")
    return text


# ------------------------------------------------------------------------------------------- parsers
def extract_direction(text: str) -> str | None:
    """§9.4 T1: the label of the first keyword (fixed order) found anywhere (case-insensitive)."""
    low = text.lower()
    for kw, lab in DIRECTION_KEYWORDS:
        if kw in low:
            return lab
    return None


def first_number(text: str) -> float | None:
    """§9.4 T2/T3: the first number in the text; a ``%`` suffix divides by 100 (``12.5%`` -> 0.125)."""
    for m in _NUMBER.findall(text):
        s = m.strip()
        try:
            return float(s[:-1].strip()) / 100.0 if s.endswith("%") else float(s)
        except ValueError:
            continue
    return None


def _weight_value(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        x = float(v)
        return x / 100.0 if x > 1.5 else x
    if isinstance(v, str):
        s = v.strip()
        pct = s.endswith("%")
        try:
            x = float(s.rstrip("%").strip())
        except ValueError:
            return None
        return x / 100.0 if (pct or x > 1.5) else x
    return None


def extract_weights(text: str, assets: Sequence[str]) -> dict[str, float] | None:
    """§9.4 T4/T5 weights: JSON, else ``w_A = x`` / ``A: x`` regex, else the first n percentages.

    JSON forms: ``{asset: x}``, ``{"weights": {...}}`` or ``{"weights": [...]}``, or a list in asset order;
    keys ``A``, ``a``, ``w_A``, ``A_weight_pct`` (and lower case). Values > 1.5 or with ``%`` are divided
    by 100. Returns None if nothing parses.
    """
    if not text or not assets:
        return None
    body = strip_fences(text, "json").strip().rstrip("`").strip()
    weights: dict[str, float] = {}
    try:
        data = json.loads(body)
    except (ValueError, TypeError, RecursionError):
        data = None
    if data is not None:
        if isinstance(data, dict) and "weights" in data:
            inner = data["weights"]
            if isinstance(inner, dict):
                data = inner
            elif isinstance(inner, list):
                data = inner
        if isinstance(data, dict):
            for a in assets:
                for key in (a, a.lower(), f"w_{a}", f"w_{a.lower()}", f"{a}_weight_pct", f"{a.lower()}_weight_pct"):
                    if key in data:
                        v = _weight_value(data[key])
                        if v is not None:
                            weights[a] = v
                            break
        elif isinstance(data, list) and len(data) >= len(assets):
            for a, v in zip(assets, data):
                x = _weight_value(v)
                if x is not None:
                    weights[a] = x
        if len(weights) == len(assets):
            return weights
    low = body.lower()
    for a in assets:
        if a in weights:
            continue
        m = re.search(rf"(?:w_)?{re.escape(a.lower())}['\"]?\s*[:\-=]\s*['\"]?([-+]?\d*\.?\d+)\s*(%?)", low)
        if m:
            x = float(m.group(1))
            weights[a] = x / 100.0 if (m.group(2) == "%" or x > 1.5) else x
    if weights:
        return weights
    pcts = _PCT.findall(body)
    if len(pcts) >= len(assets):
        return {a: float(p) / 100.0 for a, p in zip(assets, pcts)}
    return None


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity floored at 0 (0 if either norm < 1e-9)."""
    dot = sum(x * y for x, y in zip(a, b))
    na2 = sum(x * x for x in a)
    nb2 = sum(y * y for y in b)
    if na2 < 1e-18 or nb2 < 1e-18 or not math.isfinite(dot) or not math.isfinite(na2 * nb2):
        return 0.0
    # dot / sqrt(|a|²|b|²): identical vectors give exactly 1.0 (sqrt(fl(s²)) == s)
    return min(1.0, max(0.0, dot / math.sqrt(na2 * nb2)))


def rebalance_decision(text: str, fidelity: str = "clean") -> str | None:
    """§9.4 T6 decision: ``"rebalance"``, ``"hold"`` or None.

    Paper: ``rebalance`` if the text contains "rebalance" or the word "yes", else ``hold`` if it
    contains "hold", "no rebalance" or the word "no" (so "no rebalance" -> rebalance, the repo defect).
    Clean: the negative phrases (and the word "no") are checked first.
    """
    low = text.strip().lower()
    pos = "rebalance" in low or re.search(r"\byes\b", low) is not None
    if fidelity == "clean":
        if any(p.search(low) for p in T6_NEGATIVE_PATTERNS):
            return "hold"
        return "rebalance" if pos else None
    if pos:
        return "rebalance"
    if "hold" in low or "no rebalance" in low or re.search(r"\bno\b", low):
        return "hold"
    return None


def extract_regime(text: str) -> str | None:
    """§9.4 T7 part A: the label of the first regime keyword (fixed order) found anywhere."""
    low = text.lower()
    for kw, lab in REGIME_KEYWORDS:
        if kw in low:
            return lab
    return None


def extract_directions(text: str, fidelity: str = "clean") -> dict[str, str]:
    """§9.4 T7 part B: class -> increase/decrease/neutral (JSON with optional ``part_b``, else regex).

    Clean mode maps ``maintain``/``hold`` to ``neutral``; paper mode leaves them unscored.
    """
    def norm(v: Any) -> str | None:
        if not isinstance(v, str):
            return None
        s = v.strip().lower()
        if fidelity == "clean" and s in NEUTRAL_SYNONYMS:
            s = "neutral"
        return s if s in ALLOC_DIRECTIONS else None

    out: dict[str, str] = {}
    try:
        data = json.loads(strip_fences(text, "json").strip().rstrip("`"))
    except (ValueError, TypeError, RecursionError):
        data = None
    if isinstance(data, dict):
        if isinstance(data.get("part_b"), dict):
            data = data["part_b"]
        for c in ASSET_CLASSES:
            v = norm(data.get(c))
            if v is not None:
                out[c] = v
        if out:
            return out
    low = text.lower()
    for c in ASSET_CLASSES:
        m = re.search(rf"{c}['\"]?\s*[:\-=]\s*['\"]?(\w+)", low)
        if m:
            v = norm(m.group(1))
            if v is not None:
                out[c] = v
    return out


# ------------------------------------------------------------------------------------------- scorers
def score_t1(pair: QAPair, text: str, fidelity: str) -> ScoreResult:
    truth = extract_direction(pair.answer)
    pred = extract_direction(text)
    return ScoreResult(float(truth is not None and pred == truth), {"direction": pred},
                       None if pred else "no direction keyword")


def score_numeric(pair: QAPair, text: str, fidelity: str) -> ScoreResult:
    """T2/T3: ``max(0, 1 - |pred - truth| / |truth|)``; ``|truth| < 1e-9`` -> 1 iff ``|pred| < 1e-6``."""
    truth = pair.answer_numeric if pair.answer_numeric is not None else first_number(pair.answer)
    pred = first_number(text)
    if truth is None or pred is None or not math.isfinite(pred):
        return ScoreResult(0.0, {"value": pred}, "no number")
    if abs(truth) < 1e-9:
        return ScoreResult(float(abs(pred) < 1e-6), {"value": pred})
    return ScoreResult(max(0.0, 1.0 - abs(pred - truth) / abs(truth)), {"value": pred})


def score_weights(pair: QAPair, text: str, fidelity: str) -> ScoreResult:
    """T4/T5: cosine similarity of truth and prediction weight vectors (missing asset = 0), floored at 0."""
    assets = list(pair.assets)
    truth = pair.metadata.get("weights") or extract_weights(pair.answer, assets)
    pred = extract_weights(text, assets)
    if not truth or not pred:
        return ScoreResult(0.0, {"weights": pred}, "weights not parseable")
    t = [float(truth.get(a, 0.0)) for a in assets]
    p = [float(pred.get(a, 0.0)) for a in assets]
    return ScoreResult(cosine(t, p), {"weights": pred})


def score_t6(pair: QAPair, text: str, fidelity: str) -> ScoreResult:
    """T6: truth no -> 1[decision]; truth yes -> 0.4·1[decision] + 0.6·(0.5·1[side] + 0.5·1[asset])."""
    truth_dec = rebalance_decision(pair.answer, fidelity)
    dec = rebalance_decision(text, fidelity)
    d_ok = float(truth_dec is not None and dec == truth_dec)
    pred: dict[str, Any] = {"decision": dec}
    tm = _TRADE.search(pair.answer.strip().lower())
    rm = _TRADE.search(text.strip().lower())
    if rm:
        pred.update(side=rm.group(1), asset=rm.group(3).upper())
    if truth_dec != "rebalance":
        return ScoreResult(d_ok, pred, None if dec else "no decision")
    if not tm or not rm:
        return ScoreResult(0.4 * d_ok, pred, None if dec else "no decision")
    part_b = 0.5 * float(rm.group(1) == tm.group(1)) + 0.5 * float(rm.group(3).upper() == tm.group(3).upper())
    return ScoreResult(0.4 * d_ok + 0.6 * part_b, pred)


def score_t7(pair: QAPair, text: str, fidelity: str) -> ScoreResult:
    """T7: ``0.5·1[regime] + 0.5·(matching classes)/6``."""
    truth_reg = extract_regime(pair.answer)
    truth_dir = extract_directions(pair.answer, fidelity)
    reg = extract_regime(text)
    dirs = extract_directions(text, fidelity)
    part_a = 0.5 if (truth_reg is not None and reg == truth_reg) else 0.0
    part_b = 0.5 * sum(dirs.get(c) == v for c, v in truth_dir.items()) / len(truth_dir) if truth_dir else 0.0
    return ScoreResult(part_a + part_b, {"regime": reg, "directions": dirs})


SCORERS = {"T1": score_t1, "T2": score_numeric, "T3": score_numeric, "T4": score_weights,
           "T5": score_weights, "T6": score_t6, "T7": score_t7}


def score_response(pair: QAPair, response: Any, fidelity: str = "clean") -> ScoreResult:
    """Score one response to ``pair`` (spec §9.4; restricted variants score like their template).

    Parameters
    ----------
    pair : QAPair
    response : str
        The agent's answer text. Anything else (None, bytes that are not UTF-8, objects) is an
        invalid answer: score 0 with ``error`` set, never an exception.
    fidelity : {"clean", "paper"}

    Returns
    -------
    ScoreResult
    """
    if isinstance(response, bytes):
        try:
            response = response.decode("utf-8")
        except UnicodeDecodeError:
            return ScoreResult(0.0, {}, "answer bytes are not UTF-8")
    if not isinstance(response, str):
        return ScoreResult(0.0, {}, f"answer must be a str, got {type(response).__name__}")
    text = normalize_text(response, fidelity)
    try:
        res = SCORERS[pair.template](pair, text, fidelity)
    except Exception as exc:  # untrusted text must never crash the scorer
        return ScoreResult(0.0, {}, f"scorer error: {type(exc).__name__}: {exc}")
    res.score = float(min(1.0, max(0.0, res.score))) if math.isfinite(res.score) else 0.0
    return res
