"""A submission that prints more than ``ArenaSandboxLimits.max_output_bytes``: one clear status
(``violation``, error type ``output_limit``), never a doubled one such as ``forbidden: violation: ...``."""

from __future__ import annotations

import pytest

from quantgym.envs.quant_arena.config import ArenaConfig, ArenaSandboxLimits
from quantgym.envs.quant_arena.executor import evaluate_submission
from quantgym.envs.quant_arena.prompts import feedback_text, research_feedback
from quantgym.spaces import PROMPT_STYLES

SRC = """
import numpy as np
FEATURES = ['x']
def compute_features(view):
    print('x' * 5000)
    return {'x': view.history('close', 1).iloc[-1]}
def score(features, view):
    return features['x']
"""


@pytest.fixture(scope="module")
def result(small_real):
    cfg = ArenaConfig(sandbox=ArenaSandboxLimits(day_seconds=2.0, eval_seconds=30.0, cpu_seconds=30.0,
                                                 max_output_bytes=10_000))
    return evaluate_submission(SRC, small_real.truncate("2024-02-29"), "2024-01-01", "2024-02-29", cfg)


def test_printing_past_the_cap_is_one_violation_status(result):
    assert result.status == "violation"
    assert result.message.startswith("output_limit: the submission printed more than 10,000 bytes")
    assert result.n_errors == 1
    err = result.errors[0]
    assert err["type"] == "output_limit"
    assert err["message"].startswith("the submission printed more than 10,000 bytes")
    assert result.sandbox["output_truncated"] is True


@pytest.mark.parametrize("style", PROMPT_STYLES)
def test_the_feedback_names_the_output_rule_once(result, style):
    text = feedback_text(research_feedback(result, 1, 4), style)
    assert "forbidden" not in text and "violation: " not in text
    assert text.count("printed more than 10,000 bytes") == 1
    if style == "minimal":
        assert "evaluation output_limit: the submission printed more than 10,000 bytes" in text
