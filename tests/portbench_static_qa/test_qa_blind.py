"""PortBench-QA blind mode (docs/blind.md): no ticker or real level in any question; the truth written
with aliases scores as the truth written with tickers; a real ticker in a blind answer selects nothing."""

import re

import gymnasium as gym
import pytest

import quantgym  # noqa: F401
from quantgym.blind import bundled_vocabulary
from quantgym.spaces import PROMPT_STYLES

VOCAB = bundled_vocabulary(["portbench"])
_NUMS = re.compile(r"(?:start|end|[a-z0-9_]+)=(-?\d+\.\d+)")


def _levels(named_prompt: str) -> list[str]:
    """The real levels the named question prints (price start/end, macro values), as printed and at 2 decimals."""
    vals = [m.group(1) for m in _NUMS.finditer(named_prompt)
            if m.group(0).split("=")[0] in ("start", "end") or "Macro" in named_prompt]
    return vals + [f"{float(v):.2f}" for v in vals]


@pytest.fixture(scope="module")
def envs():
    return gym.make("PortBench-QA-v0").unwrapped, gym.make("PortBench-QA-v0", blind=True).unwrapped


def test_blind_questions_have_no_leak_and_named_ones_do(envs):
    named, blind = envs
    kinds = set()
    templates = set()
    for i in range(named.n_items):
        named.reset(options={"index": i})
        blind.reset(seed=i, options={"index": i})
        templates.add(named._item.pair.template)
        for style in PROMPT_STYLES:
            text_named = named.render_prompt(style)
            levels = _levels(text_named)
            leaks = VOCAB.scan(blind.render_prompt(style), levels=levels)
            assert leaks == [], (i, style, [str(lk) for lk in leaks[:5]])
            kinds |= {lk.kind for lk in VOCAB.scan(text_named, levels=levels)}
    assert templates == {f"T{k}" for k in range(1, 8)}
    assert {"ticker", "level"} <= kinds  # the scanner finds the named questions' tickers and levels


def test_truth_in_aliases_scores_like_truth_in_tickers(envs):
    named, blind = envs
    for i in range(0, named.n_items, 7):
        named.reset(options={"index": i})
        blind.reset(seed=11, options={"index": i})
        truth = named._item.pair.answer
        in_aliases = blind._blinding._real.sub(lambda m: blind._blinding.aliases.alias(m.group(0)), truth)
        _, r_blind, _, _, info = blind.step(in_aliases)
        _, r_named, _, _, _ = named.step(truth)
        assert r_blind == r_named, (i, truth, in_aliases)
        assert info["blind"] is True and "blind_aliases" not in info
        assert blind.episode_result()["metrics"]["blind_aliases"]["seed"] == 11


def test_real_tickers_in_a_blind_answer_select_nothing(envs):
    named, blind = envs
    for i in range(named.n_items):
        named.reset(options={"index": i})
        if named._item.pair.template in ("T4", "T5") and "ETH-USD" not in named._item.pair.answer:
            break
    truth = named._item.pair.answer
    _, r_named, *_ = named.step(truth)
    blind.reset(seed=0, options={"index": i})
    _, r_blind, *_ = blind.step(truth)  # the real tickers, not the aliases
    assert r_named > r_blind


def test_blind_qa_refuses_paper_mode():
    with pytest.raises(ValueError, match="^blind=True runs in clean mode only"):
        gym.make("PortBench-QA-v0", blind=True, fidelity="paper")
