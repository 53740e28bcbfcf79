"""Numbers given as strings in a PortBench stage answer: read as numbers, a percent string as a
percentage, and every such reading recorded in the step's coercions (spec portbench §4.1–§4.3, §11.4)."""

from __future__ import annotations

import numpy as np
import pytest

from quantgym.envs.portbench.coercion import coerce_s1, coerce_s2, coerce_s3, read_number

TICK = ("SPY", "TLT", "GLD", "BTC-USD")
AVAIL = np.array([True, True, True, False])


@pytest.mark.parametrize("raw, value, reading", [
    (0.4, 0.4, None), (3, 3.0, None), ("0.4", 0.4, '"0.4" -> 0.4'), (" -0.25 ", -0.25, '" -0.25 " -> -0.25'),
    ("60%", 0.6, '"60%" -> 0.6'), ("12.5 %", 0.125, '"12.5 %" -> 0.125'), ("abc", None, None),
    ("%", None, None), ("nan", None, None), ("inf%", None, None), (True, None, None), (None, None, None),
    (float("nan"), None, None),
])
def test_read_number(raw, value, reading):
    v, r = read_number(raw)
    assert r == reading
    assert v == pytest.approx(value) if value is not None else v is None


def test_percent_weight_is_a_percentage_and_recorded():
    c = coerce_s3({"weights": {"SPY": "60%", "TLT": 0.4}}, TICK, AVAIL)
    np.testing.assert_allclose(c.values, [0.6, 0.4, 0.0, 0.0])
    assert c.coercions == ['weights: 1 string read as number: SPY "60%" -> 0.6']  # sum 1: nothing normalised


def test_every_string_conversion_is_recorded():
    c = coerce_s3({"weights": {"SPY": "0.5", "TLT": "30%", "GLD": 0.2}}, TICK, AVAIL)
    np.testing.assert_allclose(c.values, [0.5, 0.3, 0.2, 0.0])
    assert c.coercions == ['weights: 2 strings read as numbers: SPY "0.5" -> 0.5, TLT "30%" -> 0.3']
    # a universe of strings: every one named, none cut
    tick = tuple(f"A{i}" for i in range(12))
    c = coerce_s3({"weights": {t: "1" for t in tick}}, tick, np.ones(12, bool))
    line = next(s for s in c.coercions if s.startswith("weights:"))
    assert line.startswith("weights: 12 strings read as numbers") and all(f'{t} "1" -> 1' in line for t in tick)


def test_strings_in_s1_and_s2_are_recorded():
    c1 = coerce_s1({"asset_views": {"SPY": "+0.5", "TLT": "-20%", "GLD": 0.1}, "confidence": "80%"}, TICK, AVAIL)
    np.testing.assert_allclose(c1.values[:3], [0.5, -0.2, 0.1])
    assert c1.notes["confidence"] == pytest.approx(0.8)
    assert 'views: 2 strings read as numbers: SPY "+0.5" -> 0.5, TLT "-20%" -> -0.2' in c1.coercions
    assert 'confidence: 1 string read as number: "80%" -> 0.8' in c1.coercions
    c2 = coerce_s2({"signals": {"SPY": "buy", "TLT": "hold", "GLD": "sell"}, "strengths": {"SPY": "0.9"}},
                   TICK, AVAIL)
    assert c2.notes["strengths"][0] == pytest.approx(0.9)
    assert c2.coercions == ['strengths: 1 string read as number: SPY "0.9" -> 0.9']


def test_plain_numbers_record_nothing():
    assert coerce_s3({"weights": {"SPY": 0.6, "TLT": 0.4}}, TICK, AVAIL).coercions == []
    assert coerce_s1({"asset_views": {"SPY": 0.1, "TLT": 0.2, "GLD": 0.3}, "confidence": 0.5},
                     TICK, AVAIL).coercions == []


def test_text_protocol_records_the_reading_in_the_step_info():
    import gymnasium as gym

    import quantgym  # noqa: F401
    from quantgym.envs.portbench.text_protocol import TextStageAction

    env = TextStageAction(gym.make("PortBench-Balanced-v0", stagewise=True, period="covid_2020"))
    obs, _ = env.reset(seed=0)
    env.step('{"asset_views": {}, "detected_regime": "bull", "confidence": 0.5, "macro_summary": "x"}')
    env.step('{"signals": {}, "strengths": {}, "reasoning": "x"}')
    _, _, _, _, info = env.step('{"weights": {"SPY": "60%", "TLT": 0.4}}')
    assert info["text"]["status"] == "ok"
    assert 'weights: 1 string read as number: SPY "60%" -> 0.6' in info["text"]["coercions"]
    assert not any("normalised" in s for s in info["text"]["coercions"])
