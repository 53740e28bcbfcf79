"""Every rule an agent is told is rendered from the config it is scored with (all three tasks).

For each told value: change it as a user would (the env's config or keyword), render the prompt in
every style, and find the new value and not the old one; switched-off models say so and quote no
numbers. The defaults render the reference text (the shipped transcripts replay by prompt hash), which
tests/portbench/test_pb_prompt_speed_exact.py and the floor replay check.
"""

from __future__ import annotations

import dataclasses
import re

import gymnasium as gym
import pytest

import quantgym  # noqa: F401  (registers the env ids)
from quantgym.envs.market_bench.config import MarketBenchSandboxLimits
from quantgym.envs.market_bench.env import MarketBenchEnv
from quantgym.envs.portbench.config import PortBenchConfig, PortBenchCostModel, PortBenchScoringConfig
from quantgym.envs.portbench.profiles import PROFILES, InvestorProfile
from quantgym.envs.quant_arena.config import (ArenaCostModel, ArenaSandboxLimits, ArenaScoringConfig,
                                              ExecutionModel, ImpactModel, Windows)
from quantgym.envs.quant_arena.env import QuantArenaEnv
from quantgym.spaces import PROMPT_STYLES


# ------------------------------------------------------------------------------ Quant-Arena
@pytest.fixture(scope="module")
def qa_dataset():
    from quantgym.envs.quant_arena.data import load_dataset

    return load_dataset(None)


def _reset_then_styles(ds, mode: str = "iterative", **kw) -> dict[str, str]:
    env = QuantArenaEnv(mode, ds, record_dir=False, executor="inprocess", **kw)
    env.reset()
    return {style: env.render_prompt(style) for style in PROMPT_STYLES}


QA_CASES = [  # (env kwargs, texts every style states, texts no style states)
    (dict(execution=ExecutionModel(top_n=40)), ["top 40", "1/40"], ["top 75", "1/75"]),
    (dict(execution=ExecutionModel(lot=200)), ["lots of 200"], ["lots of 100"]),
    (dict(cost=ArenaCostModel(commission_rate=0.0003, commission_min=7.0)), ["commission", "3 bp", "7 CNY"],
     ["2.5 bp", "5 CNY"]),
    (dict(cost=ArenaCostModel(commission_min=0.0)), ["2.5 bp"], ["min 5", "5 CNY", "CNY)"]),
    (dict(cost=ArenaCostModel(stamp_rate_before=0.0, stamp_rate_after=0.0)), ["commission", "transfer fee"],
     ["stamp duty"]),
    (dict(cost=ArenaCostModel.off()), ["no fees"], ["commission", "2.5 bp", "5 CNY", "transfer fee", "stamp duty"]),
    (dict(impact=ImpactModel.off()), ["in full at the open"], ["order book", "order-book impact"]),
    (dict(cost=ArenaCostModel.off(), impact=ImpactModel.off()), ["no fees"],
     ["commission", "2.5 bp", "stamp duty", "order book", "order-book impact"]),
    (dict(execution=ExecutionModel(limits=False)), ["no ", "price limits"], ["up-limit", "down-limit"]),
    (dict(sandbox=ArenaSandboxLimits(day_seconds=25.0, memory_mb=1024)), ["25 s", "1024 MiB"],
     ["10 s", "4096 MiB"]),
    (dict(scoring=ArenaScoringConfig(max_features=50)), ["50 unique"], ["300 unique"]),
    (dict(max_lookback=120), ["1..120"], ["1..242"]),
    (dict(windows=Windows(research_start="2022-03-01", research_end="2023-06-30", sealed_start="2023-09-01")),
     ["2022-03-01", "2023-06-30", "2023-09-01"], ["2022-01-01", "2023-12-31", "2024-01-01"]),
    (dict(max_candidates=3), ["3 candidate"], ["5 candidate"]),
    (dict(scoring=ArenaScoringConfig(w_in=0.3, w_out=0.7)), ["0.3*S_in", "0.7*S_out"], ["0.5*S_in", "0.5*S_out"]),
]


@pytest.mark.parametrize("kw, told, gone", QA_CASES, ids=[", ".join(c[0]) + f"-{i}" for i, c in enumerate(QA_CASES)])
def test_quant_arena_brief_states_the_config(qa_dataset, kw, told, gone):
    for style, text in _reset_then_styles(qa_dataset, **kw).items():
        for t in told:
            assert t in text, (style, t)
        for t in gone:
            assert t not in text, (style, t)


def test_quant_arena_default_brief_states_the_default_rules(qa_dataset):
    """The defaults' numbers, so that a case above finding the old one gone is meaningful."""
    for style, text in _reset_then_styles(qa_dataset).items():
        for t in ("top 75", "lots of 100", "2.5 bp", "5 CNY", "stamp duty", "up-limit", "1..242", "300 unique",
                  "5 candidate", "0.5*S_in", "2022-01-01"):
            assert t in text, (style, t)
        assert ("order book" in text) if style == "full" else ("order-book impact" in text)


def test_quant_arena_config_object_is_the_scored_one(qa_dataset):
    """The brief renders the config the env is built with and scores with (env.cfg / env.config)."""
    env = QuantArenaEnv("oneshot", qa_dataset, record_dir=False, executor="inprocess",
                        cost=ArenaCostModel(commission_rate=0.0004))
    text = env.reset()[0]
    scored = getattr(env, "config", None) or env.cfg
    assert scored.cost.commission_rate == 0.0004 and "commission (4 bp, min 5 CNY)" in text


def test_describe_of_the_models():
    assert ArenaCostModel().describe() == ("commission 2.5 bp of traded value (min 5 CNY per order), transfer fee "
                                           "0.2 bp before 2022-04-29 and 0.1 bp from then, sell-side stamp duty "
                                           "10 bp before 2023-08-28 and 5 bp from then")
    assert ArenaCostModel.off().describe() == "no fees (costs switched off)"
    assert ImpactModel.off().describe() == "no market impact (orders fill in full at the open)"
    assert "10-level order book" in ImpactModel().describe()
    assert ExecutionModel(top_n=30, lot=200, limits=False).describe().startswith("top 30 names")
    assert "lots of 200 shares, no daily price limits" in ExecutionModel(lot=200, limits=False).describe()
    assert PortBenchCostModel().describe() == "trading costs 15 bps of traded notional (10 slippage + 5 commission)"
    assert PortBenchCostModel(slippage_bps=2.5, commission_bps=1).describe("full") == \
        "trading costs 3.5 bps of traded notional"
    assert PortBenchCostModel.off().describe() == PortBenchCostModel.off().describe("minimal") == "no trading costs"


# ------------------------------------------------------------------------------ PortBench
def _pb_prompts(profile="balanced", period="covid_2020", **kw) -> dict[tuple[int, str], str]:
    """S1, S2 and S3 prompts of the first decision date in every style."""
    env = gym.make(f"PortBench-{profile.capitalize() if isinstance(profile, str) else 'Balanced'}-v0",
                   stagewise=True, period=period, **({} if isinstance(profile, str) else {"profile": profile}),
                   **kw)
    env.reset(seed=0)
    base = env.unwrapped
    return {(s, st): base.render_prompt(stage=s, style=st) for s in (0, 1, 2) for st in PROMPT_STYLES}


PB_CASES = [  # (config, stages that state it, texts told, texts gone)
    (PortBenchConfig(costs=PortBenchCostModel(slippage_bps=20.0)), (2,), ["25 bps of traded notional"], ["15 bps"]),
    (PortBenchConfig(costs=PortBenchCostModel.off()), (2,), ["no trading costs"], ["bps"]),
    (PortBenchConfig(scoring=PortBenchScoringConfig(signal_threshold=0.3)), (1,), ["+0.3", "-0.3"], ["0.2"]),
    (PortBenchConfig(regime_ticker="QQQ"), (0, 1, 2), ["QQQ 126"], ["SPY 126"]),
    (PortBenchConfig(regime_days=63), (0, 1, 2), ["SPY 63"], ["126"]),
    (PortBenchConfig(initial_nav=2_000_000.0), (2,), ["[NAV] 2,0"], ["[NAV] 1,0"]),
]


@pytest.mark.parametrize("config, stages, told, gone", PB_CASES, ids=[f"pb{i}" for i in range(len(PB_CASES))])
def test_portbench_prompts_state_the_config(config, stages, told, gone):
    default = _pb_prompts()
    prompts = _pb_prompts(config=config)
    for (stage, style), text in prompts.items():
        if stage not in stages:
            continue
        for t in told:
            assert t in text, (stage, style, t)
        for t in gone:
            assert t not in text, (stage, style, t)
        assert any(t in default[stage, style] for t in gone), (stage, style)  # the default did state it


def test_portbench_profile_limits_are_rendered_from_the_profile():
    custom = InvestorProfile("custom", 0.55, 0.25, 0.15, -0.02)
    prompts = _pb_prompts(profile=custom)
    for style in PROMPT_STYLES:
        text = prompts[2, style]
        assert "at most 55% in equities and cryptocurrency" in text and "at least 25% in bonds" in text
        assert "within 15%" in text and "65%" not in text
    with pytest.raises(ValueError, match="must state max_drawdown as '30%'"):
        dataclasses.replace(PROFILES["balanced"], max_drawdown=0.30)


def test_portbench_regime_look_back_is_the_scored_one():
    """``regime_days`` is what labels the regime (§1.9), not only what the prompt says."""
    from quantgym.envs.portbench.availability import market_regime
    from quantgym.envs.portbench.data import load_portbench_data

    data = load_portbench_data()
    regimes = {}
    for days in (20, 126):
        env = gym.make("PortBench-Balanced-v0", stagewise=True, period="2020-04-13:2020-04-30:weekly",
                       config=PortBenchConfig(regime_days=days))
        env.reset(seed=0)
        snap = env.unwrapped.snapshot
        regimes[days] = snap.regime
        assert snap.regime == market_regime(data, int(snap.t), "SPY", days)
        assert f"SPY {days}-day rule" in env.unwrapped.render_prompt(stage=0)
    assert regimes == {20: "sideways", 126: "bear"}  # SPY in April 2020: off the March low, below its level of 126 days before


def test_portbench_period_is_the_one_given():
    for (stage, style), text in _pb_prompts(period="2021-03-01:2021-04-30:weekly").items():
        assert "2021-03-0" in text.split("\n", 1)[0] and "2020-02-07" not in text, (stage, style)


def test_portbench_universe_is_the_data_given():
    from quantgym.envs.portbench.data import load_portbench_data

    data = load_portbench_data(universe=("SPY", "TLT", "GLD", "QQQ", "IEF", "XLK"))
    prompts = _pb_prompts(data=data)
    for style in PROMPT_STYLES:
        s1 = prompts[0, style]
        assert "TLT" in s1 and "XLK" in s1 and "EEM" not in s1 and "BTC-USD" not in s1


# ------------------------------------------------------------------------------ Market-Bench
def _mb_prompts(**kw) -> dict[str, str]:
    env = MarketBenchEnv(**kw)
    try:
        env.reset()
        return {st: env.render_prompt(st) for st in PROMPT_STYLES}
    finally:
        env.close()


def test_market_bench_prompt_states_the_sandbox_limits():
    default = _mb_prompts(strategy="scheduled", round=1)
    changed = _mb_prompts(strategy="scheduled", round=1,
                          sandbox=MarketBenchSandboxLimits(cpu_seconds=45.0, wall_seconds=70.0))
    for st in PROMPT_STYLES:
        assert "120 s" in default[st] and "150 s" in default[st]
        assert "45 s" in changed[st] and "70 s" in changed[st]
        assert "120 s" not in changed[st] and "150 s" not in changed[st]


def test_market_bench_prompt_states_the_round_parameters():
    """A user round's parameters (the ones the reference is run with) are the prompt's."""
    from quantgym.envs.market_bench.rounds import load_round

    rnd = load_round("delta_hedge", 1)
    params = dict(rnd.params, lot=300, fraction=0.75)
    data = {"book": rnd.inputs["book.csv"], "option_delta": rnd.inputs["option_delta.csv"], "params": params}
    env_default = _mb_prompts(strategy="delta_hedge", round=1)
    changed = _mb_prompts(strategy="delta_hedge", data=data)
    def stated(name: str, value: str, text: str) -> bool:  # "- lot = 300 shares" (full), "lot=300 shares" (short)
        return re.search(rf"\b{name}\b[^\n;=]*= ?{re.escape(value)}\b", text) is not None

    for st in PROMPT_STYLES:
        assert stated("lot", "300", changed[st]) and stated("fraction", "0.75", changed[st])
        assert stated("lot", str(rnd.params["lot"]), env_default[st])
        assert stated("fraction", str(rnd.params["fraction"]), env_default[st])
        assert not stated("lot", str(rnd.params["lot"]), changed[st])
        assert not stated("fraction", str(rnd.params["fraction"]), changed[st])


def test_a_user_fee_model_states_its_own_rule(qa_dataset):
    """A user fee model (quantgym.models.ImportableModel) states its rule through its describe(): the Quant-Arena
    brief and the PortBench S3 prompt quote it, and none of the built-in model's numbers."""
    from quantgym.models import ImportableModel

    flat = ImportableModel("quantgym.models:FlatFee", {"per_order": 7.0, "currency": "CNY"})
    for style, text in _reset_then_styles(qa_dataset, cost=flat).items():
        assert "a flat fee of 7 CNY per order" in text and "2.5 bp" not in text and "stamp duty" not in text, style
    usd = ImportableModel("quantgym.models:FlatFee", {"per_order": 3.0, "currency": "USD"})
    for (stage, style), text in _pb_prompts(config=PortBenchConfig(costs=usd)).items():
        if stage == 2:
            assert "a flat fee of 3 USD per order" in text and "bps" not in text, style
