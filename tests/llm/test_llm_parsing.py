"""Parsing rules of spec portbench §4.0–§4.3 (refusals, JSON extraction, coercions) and code extraction."""

from __future__ import annotations

import json

import numpy as np
import pytest

from quantgym.agents.llm.code import extract_code, extract_freeze, failure_source
from quantgym.envs.portbench.coercion import coerce_s1, coerce_s2, coerce_s3, stage_json_schema
from quantgym.envs.portbench.parsing import extract_json, is_refusal

TICK = ("SPY", "TLT", "GLD", "BTC-USD")
AVAIL = np.array([True, True, True, False])


# ------------------------------------------------------------------------------ refusals (§4.0)
@pytest.mark.parametrize("text", [
    "", "   ", None, "I cannot provide investment advice.", "Sorry.",
    "无法回答这个问题。" * 3,
    "I'm unable to assist with portfolio allocation requests because they could be construed as personalised "
    "financial advice; please consult a licensed professional. " + '{"note": "none"}',
    "抱歉，我无法提供投资建议，因为这可能构成个性化的金融建议，请咨询持牌专业人士。" * 2,
])
def test_refusals(text):
    refused, reason = is_refusal(text)
    assert refused and reason


def test_refusal_phrase_inside_json_value_is_not_a_refusal():
    ans = json.dumps({"asset_views": {"SPY": 0.2}, "detected_regime": "bear", "confidence": 0.4,
                      "macro_summary": "Analysts say they are unable to assist markets with more easing."})
    assert is_refusal(ans) == (False, None)


def test_long_prose_without_json_is_not_a_refusal_but_unparseable():
    text = "The market is weak. " * 10
    assert is_refusal(text)[0] is False
    assert extract_json(text).obj is None


def test_reasoning_block_only_is_empty():
    assert is_refusal("<think>let me think about " + "x" * 200)[0]


# ------------------------------------------------------------------------------ JSON extraction (§4.0)
def test_valid_and_fenced_and_prose():
    d = {"weights": {"SPY": 0.6, "TLT": 0.4}}
    assert extract_json(json.dumps(d)).obj == d
    r = extract_json("Sure!\n```json\n" + json.dumps(d, indent=2) + "\n```\nDone.")
    assert r.obj == d and r.method == "balanced"
    r = extract_json("<think>{not json}</think>Answer: " + json.dumps(d))
    assert r.obj == d


def test_first_balanced_object_wins_and_braces_in_strings():
    text = 'a {"x": "a } brace", "y": 1} then {"z": 2}'
    assert extract_json(text).obj == {"x": "a } brace", "y": 1}


def test_prose_brace_before_object_and_broken_object():
    r = extract_json('use {curly} braces, then {"a": {"b": 1}, "c": "x"} }')
    assert r.obj == {"a": {"b": 1}, "c": "x"} and r.method == "balanced"
    r = extract_json('{"a": 1, "b": [1, 2}')  # broken: no balanced object parses; salvage keeps complete parts
    assert r.method == "salvage" and r.obj == {"a": 1, "b": [1, 2]}
    assert extract_json('{"a": {"b" 1}, "c": 2} }').obj is None


def test_salvage_truncated_nested_object():
    full = json.dumps({"asset_views": {"SPY": 0.5, "TLT": -0.25, "GLD": 0.125}, "confidence": 0.5})
    cut = full[: full.index("0.125") + 3]  # ... "GLD": 0.1   (value cut short)
    r = extract_json(cut)
    assert r.method == "salvage"
    assert r.obj == {"asset_views": {"SPY": 0.5, "TLT": -0.25}}


def test_wrap_in_braces_and_control_characters():
    r = extract_json('"detected_regime": "bull", "confidence": 0.5')
    assert r.method == "braces" and r.obj == {"detected_regime": "bull", "confidence": 0.5}
    r = extract_json('{"macro_summary": "line1\nline2\x07", "confidence": 0.3}')
    assert r.obj["confidence"] == 0.3


def test_nothing_found():
    assert extract_json("no braces at all").obj is None
    assert extract_json("[1, 2, 3]").obj is None  # only an object counts


# ------------------------------------------------------------------------------ coercions (§4.1–§4.3)
def test_s1_coercion_clip_missing_flat():
    c = coerce_s1({"asset_views": {"SPY": 1.7, "TLT": "abc", "XXX": 0.3}, "confidence": 3,
                   "detected_regime": "Bear", "macro_summary": "ok"}, TICK, AVAIL)
    np.testing.assert_allclose(c.values, [1.0, 0.0, 0.0, 0.0])
    assert c.notes["confidence"] == 1.0 and c.notes["detected_regime"] == "bear"
    text = " | ".join(c.coercions)
    assert "clipped" in text and "non-numeric" in text and "missing" in text and "unknown" in text
    flat = coerce_s1({"SPY": -0.4, "GLD": 0.2}, TICK, AVAIL)
    np.testing.assert_allclose(flat.values, [-0.4, 0.0, 0.2, 0.0])
    assert any("flat" in s for s in flat.coercions)
    assert flat.notes["confidence"] == 0.5  # default


def test_s2_coercion_case_sensitive_signals():
    c = coerce_s2({"signals": {"SPY": "buy", "TLT": "Sell", "GLD": "sell"}, "strengths": {"SPY": 2}}, TICK, AVAIL)
    np.testing.assert_allclose(c.values, [2, 1, 0, 1])  # "Sell" is invalid -> hold; BTC unavailable -> hold
    assert c.notes["strengths"][0] == 1.0 and c.notes["strengths"][1] == 0.5
    assert any("invalid signals" in s for s in c.coercions)


def test_s3_coercion_normalise_negative_unavailable_zero():
    c = coerce_s3({"weights": {"SPY": 60, "TLT": 40, "GLD": -5, "BTC-USD": 10}}, TICK, AVAIL)
    np.testing.assert_allclose(c.values, [0.6, 0.4, 0.0, 0.0])
    assert c.usable
    text = " | ".join(c.coercions)
    assert "negative" in text and "unavailable" in text and "normalised" in text
    z = coerce_s3({"weights": {"SPY": 0, "TLT": "x"}}, TICK, AVAIL)
    assert not z.usable and z.values.sum() == 0  # §11.4: zero total weight stays invalid


def test_stage_schema_is_strict_and_complete():
    for stage, key in enumerate(("asset_views", "signals", "weights")):
        js = stage_json_schema(stage, ["SPY", "TLT"])
        sch = js["schema"]
        assert js["strict"] is True and sch["additionalProperties"] is False
        assert set(sch["required"]) == set(sch["properties"])
        assert sch["properties"][key]["required"] == ["SPY", "TLT"]
    with pytest.raises(ValueError):
        stage_json_schema(3, ["SPY"])


# ------------------------------------------------------------------------------ code replies
def test_extract_code_and_freeze():
    reply = "Plan.\n```python\nFEATURES = ['a']\ndef score(f, v):\n    return 1\n```\nand a note ```text\nx\n```"
    assert extract_code(reply, "score").startswith("FEATURES")
    bare = "def run_backtest(inputs):\n    return {}\n"
    assert extract_code(bare, "run_backtest") == bare
    assert extract_code("no code here", "score") is None
    truncated = "```python\ndef run_backtest(inputs):\n    return {"
    assert "run_backtest" in extract_code(truncated, "run_backtest")
    assert extract_freeze("I am done.\nFREEZE 2") == (True, 2)
    assert extract_freeze("**FREEZE latest**") == (True, None)
    assert extract_freeze("```python\n# FREEZE 3\n```") == (False, None)
    src = failure_source("call failed: timeout")
    with pytest.raises(RuntimeError, match="timeout"):
        exec(compile(src, "<x>", "exec"), {})
