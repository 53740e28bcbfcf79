"""PortBench blind mode (docs/blind.md): no date, year, period name, ticker or real level in any prompt;
identical scores blind and named; answers in aliases scored like answers in tickers."""

import json
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from quantgym.blind import bundled_vocabulary, scan
from quantgym.envs.portbench.config import BENCH_PERIODS
from quantgym.envs.portbench.env import PortBenchEnv
from quantgym.envs.portbench.text_protocol import TextStageAction
from quantgym.envs.portbench.universe import MACRO_KEYS
from quantgym.evaluation import evaluate
from quantgym.envs.portbench.baselines import BASELINES, make_baseline
from quantgym.spaces import PROMPT_STYLES

PB_IDS = ("PortBench-Conservative-v0", "PortBench-Balanced-v0", "PortBench-Aggressive-v0")
VOCAB = bundled_vocabulary(["portbench"])


def _levels(env: PortBenchEnv) -> list[str]:
    """The real levels of the current decision as the named prompt prints them (closes, macro values)."""
    s = env.snapshot
    prices = [f"{s.price[i]:.2f}" for i in s.avail_idx]
    macro = [f"{s.macro[i]:.4g}" for i in range(len(MACRO_KEYS)) if s.macro_mask[i]]
    return prices + macro


def _step_stage(env: PortBenchEnv, rng: np.random.Generator):
    n = env.n_assets
    stage = env.stage
    if stage == 0:
        return env.step({"views": rng.uniform(-1, 1, n)})
    if stage == 1:
        return env.step({"signals": rng.integers(0, 3, n)})
    w = rng.uniform(0, 1, n)
    return env.step({"weights": w / w.sum()})


def _all_prompts(period: str, blind: bool, seed: int = 0, **kwargs):
    """Every stage prompt in every style at the first, a middle and the last decision of ``period``."""
    env = PortBenchEnv(profile="balanced", period=period, stagewise=True, blind=blind, **kwargs)
    env.reset(seed=seed)
    rng = np.random.default_rng(1)
    n_dec = int(env.sim.decision_rows.size)
    chosen = {0, n_dec // 2, n_dec - 1}
    term = False
    while not term:
        if env.decision_k in chosen:
            for style in PROMPT_STYLES:
                yield env, env.render_prompt(style=style)
        _, _, term, _, _ = _step_stage(env, rng)


@pytest.mark.parametrize("period", BENCH_PERIODS)
def test_blind_prompts_have_no_leak(period):
    n = 0
    for env, text in _all_prompts(period, blind=True):
        leaks = VOCAB.scan(text, levels=_levels(env))
        assert leaks == [], (period, env.decision_k, env.stage, [str(lk) for lk in leaks[:5]])
        n += 1
    assert n == 3 * 3 * len(PROMPT_STYLES)


def test_blind_paper_mode_prompts_have_no_leak():
    """Paper mode: its own universe (18 large-cap stocks, the VIX as an asset), short prompts."""
    n = 0
    for env, text in _all_prompts("covid_2020", blind=True, fidelity="paper"):
        assert "AAPL" in env.view.tickers
        leaks = VOCAB.scan(text, levels=_levels(env))
        assert leaks == [], (env.decision_k, env.stage, [str(lk) for lk in leaks[:5]])
        n += 1
    assert n == 3 * 3 * len(PROMPT_STYLES)


@pytest.mark.parametrize("period", BENCH_PERIODS)
def test_named_prompts_do_show_leaks(period):
    """The scanner works: the same prompts named name tickers, dates, the year and real levels."""
    kinds = set()
    for env, text in _all_prompts(period, blind=False):
        found = {lk.kind for lk in VOCAB.scan(text, levels=_levels(env))}
        assert {"ticker", "date"} <= found, (period, env.stage)
        kinds |= found
    assert {"ticker", "date", "level"} <= kinds


def test_blind_keeps_the_class_and_the_rules():
    env = PortBenchEnv(profile="balanced", period="covid_2020", stagewise=True, blind=True)
    obs, info = env.reset(seed=3)
    p = obs["prompt"]
    assert "Decision 1 of 17, day 0" in p and "(equities): rebased " in p and "z-scores over the window" in p
    alias_of_spy = env._blind.aliases.alias("SPY")
    assert alias_of_spy.startswith("EQ") and f"({alias_of_spy} 126-day rule)" in p
    assert info["blind"] is True and "blind_aliases" not in info
    # listed in alias order, not the universe's
    rows = [ln.split(" ")[0] for ln in p.splitlines() if "): rebased " in ln]
    assert rows[:3] == ["EQ01", "EQ02", "EQ03"]
    # the observation's levels are blinded, too: rebased closes, macro z-scores
    s = env.snapshot
    i = int(s.avail_idx[0])
    assert obs["price"][i] == pytest.approx(100 * (1 + s.trailing_return[i]))
    assert np.all(np.abs(obs["macro"]) <= np.sqrt(env.config.lookback))


def test_aliases_are_drawn_from_the_seed_and_recorded():
    env = PortBenchEnv(profile="balanced", period="covid_2020", stagewise=True, blind=True)
    env.reset(seed=1)
    a = env._blind.aliases.aliases
    env.reset(seed=1)
    assert env._blind.aliases.aliases == a
    env.reset(seed=2)
    assert env._blind.aliases.aliases != a
    m = env.episode_metrics()
    assert m["blind"] is True and m["blind_aliases"]["aliases"]["SPY"] == env._blind.aliases.alias("SPY")
    assert m["blind_aliases"]["seed"] == 2


@pytest.mark.parametrize("env_id", PB_IDS)
def test_classical_baselines_score_the_same_blind_and_named(env_id):
    for key in BASELINES:
        named = evaluate(env_id, make_baseline(key), seed=0, period="covid_2020")
        blind = evaluate(env_id, make_baseline(key), seed=0, period="covid_2020", blind=True)
        mb = dict(blind.metrics)
        assert mb.pop("blind") is True and "SPY" in mb.pop("blind_aliases")["aliases"]
        assert json.dumps(mb, sort_keys=True, default=str) == json.dumps(named.metrics, sort_keys=True, default=str)
        assert blind.ceps == named.ceps and blind.stage_scores == named.stage_scores
        assert blind.nav.equals(named.nav)


def test_blind_stagewise_env_passes_check_env():
    env = gym.make("PortBench-Balanced-v0", stagewise=True, blind=True, period="covid_2020")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []


def _answers(tickers, avail, real_tickers):
    """An LLM-style answer per stage over ``tickers`` (the values keyed by the real ticker)."""
    vals = {t: (hash(r) % 200 - 100) / 100 for t, r in zip(tickers, real_tickers)}
    live = [t for t, a in zip(tickers, avail) if a]
    w = {t: 1.0 / len(live) for t in live}
    s1 = {"asset_views": {t: vals[t] for t in live}, "detected_regime": "bull", "confidence": 0.5,
          "macro_summary": "Rates steady."}
    s2 = {"signals": {t: ("buy" if vals[t] > 0.2 else "sell" if vals[t] < -0.2 else "hold") for t in live},
          "strengths": {t: 0.5 for t in live}, "reasoning": "views"}
    s3 = {"weights": w, "expected_return": 0.05, "expected_vol": 0.1, "sharpe_estimate": 0.5}
    return [json.dumps(x) for x in (s1, s2, s3)]


def _run_text(blind: bool, n_decisions: int = 4):
    env = TextStageAction(gym.make("PortBench-Balanced-v0", stagewise=True, blind=blind, period="covid_2020"))
    obs, info = env.reset(seed=5)
    base = env.unwrapped
    scores, coercions = [], []
    for _ in range(n_decisions):
        answers = _answers(base.prompt_tickers, obs["available"], base.view.tickers)
        for a in answers:
            obs, r, term, trunc, info = env.step(a)
            coercions.append(info["text"]["coercions"])
        scores.append((r, info["stage_scores"], info["nav"]))
    return scores, coercions


def test_alias_answers_score_like_ticker_answers():
    named, co_named = _run_text(blind=False)
    blind, co_blind = _run_text(blind=True)
    assert blind == named and named[0][1]["S1"] > 0
    assert co_blind == co_named


def test_real_tickers_in_a_blind_answer_are_unknown_and_recorded():
    env = TextStageAction(gym.make("PortBench-Balanced-v0", stagewise=True, blind=True, period="covid_2020"))
    obs, _ = env.reset(seed=5)
    base = env.unwrapped
    s1 = _answers(base.view.tickers, obs["available"], base.view.tickers)[0]  # real tickers, not aliases
    obs, r, term, trunc, info = env.step(s1)
    co = info["text"]["coercions"]
    assert co[0].startswith("unknown asset keys ignored: SPY") and "missing views -> 0" in co[1], co


def test_blind_needs_asset_classes(tmp_path):
    from quantgym.envs.portbench.blinding import check_blind

    class NoClass:
        tickers = ("SPY", "TLT")
        asset_class = ("equities", "")

    with pytest.raises(ValueError, match="^blind=True needs the asset class of every ticker: the data lacks the "
                                         "'asset_class' column") as e:
        check_blind(NoClass(), None)
    assert "\n" not in str(e.value)
    # a data directory whose assets.csv has no asset_class column
    import pandas as pd

    idx = pd.bdate_range("2023-01-02", periods=300)
    pd.DataFrame({"SPY": np.linspace(100, 130, 300)}, index=idx).to_parquet(tmp_path / "prices.parquet")
    pd.DataFrame({"ticker": ["SPY"]}).to_csv(tmp_path / "assets.csv", index=False)
    with pytest.raises(ValueError, match="asset_class") as e:
        PortBenchEnv(data=str(tmp_path), period="2023-06-01:2023-12-31", blind=True)
    assert "\n" not in str(e.value)


def test_blind_refuses_free_news_text():
    with pytest.raises(ValueError, match="^blind=True does not take a text_provider"):
        PortBenchEnv(period="covid_2020", blind=True, text_provider=lambda d: "news")


def test_blind_env_pickles_mid_episode():
    import pickle

    env = PortBenchEnv(profile="balanced", period="covid_2020", stagewise=True, blind=True)
    env.reset(seed=4)
    env.step({"views": np.zeros(env.n_assets)})
    clone = pickle.loads(pickle.dumps(env))
    assert clone.render_prompt() == env.render_prompt() and "EQ" in clone.render_prompt()
    for style in PROMPT_STYLES:
        assert clone.render_prompt(stage=0, style=style) == env.render_prompt(stage=0, style=style)


def test_blind_macro_lists_every_series_it_has_a_z_score_for():
    """A z-score of 0 (a series at its window mean, e.g. unchanged) is shown in both macro lines of S1."""
    import re

    env = gym.make("PortBench-Balanced-v0", stagewise=True, blind=True, period="normal_2024")
    prompt = env.reset(seed=0)[0]["prompt"]
    head = prompt[prompt.index("[MACRO]"):].splitlines()
    first5 = dict(re.findall(r"(\w+)=([+-]\d+\.\d)", head[0]))
    listed = dict(re.findall(r"^  (\w+): ([+-]\d+\.\d)$", "\n".join(head[2:19]), re.M))
    assert first5 and all(listed.get(k) == v for k, v in first5.items())
    assert "+0.0" in first5.values()  # normal_2024's first decision: the fed funds rate unchanged over the window
