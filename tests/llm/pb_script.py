"""Scripted PortBench answers computed from the stage prompt (what a sensible model would answer)."""

from __future__ import annotations

import json
import re


def _user(req: dict) -> str:
    return next(m["content"] for m in reversed(req["messages"]) if m["role"] == "user")


def s1_answer(prompt: str) -> dict:
    views = {}
    for t, r in re.findall(r"^(\S+) \([a-z_ ]+\): adj\. close [\d.]+, return ([+-][\d.]+)%", prompt, re.M):
        views[t] = max(-1.0, min(1.0, float(r) / 10.0))
    return {"asset_views": views, "detected_regime": "high-volatility", "confidence": 0.7,
            "macro_summary": "Risk-off: equities fall, long bonds rally."}


def s2_answer(prompt: str) -> dict:
    sig, st = {}, {}
    for t, v in re.findall(r"^(\S+): view=([+-][\d.]+)$", prompt, re.M):
        v = float(v)
        sig[t] = "buy" if v > 0.2 else "sell" if v < -0.2 else "hold"
        st[t] = min(1.0, abs(v))
    return {"signals": sig, "strengths": st, "reasoning": "thresholds at +/-0.2"}


def s3_answer(prompt: str) -> dict:
    rows = re.findall(r"^(\S+): (buy|hold|sell) \(([\d.]+)\)$", prompt, re.M)
    buys = [t for t, s, _ in rows if s == "buy"] or [t for t, _, _ in rows]
    return {"weights": {t: round(1 / len(buys), 6) for t in buys}, "expected_return": 0.05, "expected_vol": 0.1,
            "sharpe_estimate": 0.5}


def answer(req: dict) -> dict:
    """The stage's valid JSON answer for the prompt in ``req``."""
    p = _user(req)
    if "[PORTBENCH S1" in p:
        return s1_answer(p)
    if "[PORTBENCH S2" in p:
        return s2_answer(p)
    return s3_answer(p)


def valid(req: dict) -> str:
    return json.dumps(answer(req))


def fenced(req: dict) -> str:
    return "Here is my analysis.\n```json\n" + json.dumps(answer(req), indent=1) + "\n```\nHope this helps."


def truncated(req: dict) -> str:
    s = json.dumps(answer(req))
    return s[: int(len(s) * 0.6)]


REFUSAL = "I cannot provide investment advice."
GARBAGE = ("Markets are uncertain and I would rather describe the situation in words: equities are weak, bonds "
           "are strong, and commodities are mixed. No structured answer today, sorry.")
