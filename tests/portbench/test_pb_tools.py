"""PortBench tool mode (docs/tools.md): the toolbox read point in time, the brief, budgets, blind mode and the
Gymnasium protocol (tool calls and stage answers on one ``step``)."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

import quantgym  # noqa: F401  (registers the ids)
from quantgym.envs.portbench.config import PortBenchToolsConfig
from quantgym.envs.portbench.data import PortBenchData
from quantgym.envs.portbench.env import PortBenchEnv
from quantgym.envs.portbench.universe import CANONICAL_TICKERS, MACRO_KEYS
from quantgym.evaluation import evaluate
from tests.portbench.test_pb_env import _raw_bundle

TOOLS = ["list_universe", "asset_stats", "correlation", "macro_series", "portfolio", "investor_profile"]
BIG = dict(calls=10_000, chars=10_000_000)


def _env(**kw):
    kw = {"profile": "balanced", "period": "covid_2020", "stagewise": True, "tools": True, **kw}
    return PortBenchEnv(**kw)


def _answer(env, stage: int, seed: int = 0) -> dict:
    """A fixed array answer of ``stage`` (the same for the env with and without tools)."""
    rng = np.random.default_rng(seed + 100 * env.decision_k + stage)
    n = env.n_assets
    return {"views": rng.uniform(-1, 1, n), "signals": rng.integers(0, 3, n),
            "weights": rng.dirichlet(np.ones(n)), "status": 0}


def test_check_env_passes_with_tools():
    env = gym.make("PortBench-Balanced-v0", period="covid_2020", stagewise=True, tools=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []
    base = env.unwrapped
    assert base.toolbox.names == TOOLS and base.tool_budget.calls == PortBenchToolsConfig().calls
    _, info = env.reset(seed=0)
    assert [t["function"]["name"] for t in info["tools"]] == TOOLS
    assert info["tool_budget"] == {"calls": 8, "chars": 12_000, "calls_used": 0, "chars_used": 0,
                                   "calls_left": 8, "chars_left": 12_000}


def test_the_answer_that_opens_the_next_decision_carries_its_fresh_budget():
    """docs/tools.md: each answer that opens the next stage carries that stage's schemas and budget, the S3
    answer (which opens the next decision's S1) included."""
    env = _env(period=dict(start="2020-03-01", end="2020-05-31", freq="monthly"))
    env.reset(seed=0)
    for stage in range(3):
        env.step({"tool": "list_universe"})
        _, _, _, _, info = env.step(_answer(env, stage))
        assert info["tool_budget"]["calls_used"] == 0 and info["tool_budget"]["calls_left"] == 8, stage
        assert [t["function"]["name"] for t in info["tools"]] == TOOLS


def test_tool_mode_is_refused_where_it_cannot_run():
    with pytest.raises(ValueError, match="stagewise=True"):
        PortBenchEnv(period="covid_2020", tools=True)
    with pytest.raises(ValueError, match="clean mode only"):
        PortBenchEnv(period="covid_2020", stagewise=True, tools=True, fidelity="paper")
    with pytest.raises(ValueError, match="max_window"):
        PortBenchToolsConfig(max_window=1)
    with pytest.raises(ValueError, match="calls"):
        PortBenchToolsConfig(calls=-1)
    assert PortBenchToolsConfig.from_dict(PortBenchToolsConfig(calls=3).to_dict()).budget.calls == 3


def test_the_brief_has_no_data_tables_and_is_much_shorter():
    """S1 and S3 in tool mode: no asset table, macro block or correlation triangle; the size drop measured
    (docs/tools.md states it)."""
    named, tooled = _env(tools=False), _env()
    named.reset(seed=0)
    _, info = tooled.reset(seed=0)
    sizes = {}
    for stage in (0, 2):
        full, brief = named.render_prompt(stage), tooled.render_prompt(stage)
        sizes[stage] = (len(full), len(brief))
        for table in ("[CORRELATIONS]", "[MACRO", "adj. close", "[NAV]", "[INVESTOR PROFILE]", "[CURRENT WEIGHTS]"):
            assert table not in brief
        assert "[TOOLS]" in brief and "list_universe" in brief and "8 tool calls" in brief
        assert brief.endswith(named.render_prompt(stage).splitlines()[-1])  # the same format contract
    assert "[ASSETS] 75 available assets" in tooled.render_prompt(0)
    assert sizes[0][0] > 15_000 and sizes[0][1] < 1_600  # S1: ~19k characters → ~1.4k
    assert sizes[2][1] < sizes[2][0] / 4
    s2 = tooled.render_prompt(1)
    assert "[TOOLS]" in s2 and "[YOUR S1 VIEWS]" in s2 and s2.index("[TOOLS]") < s2.index("[RULES]")
    for style in ("compact", "minimal"):  # every style's brief carries the note and no data table
        for stage in range(3):
            brief = tooled.render_prompt(stage, style=style)
            assert "[TOOLS]" in brief and "[CORRELATIONS]" not in brief and "[MACRO" not in brief


def test_scripted_policy_two_tool_calls_then_answers_scores_as_without_tools():
    plain, tooled = _env(tools=False), _env()
    plain.reset(seed=0)
    tooled.reset(seed=0)
    done = False
    while not done:
        for stage in range(3):
            date = tooled._row_info["date"]
            for call in ({"tool": "asset_stats", "arguments": {"assets": ["SPY", "TLT"], "window": 20}},
                         '{"tool": "portfolio"}'):
                obs, r, term, trunc, info = tooled.step(call)
                assert (r, term, trunc) == (0.0, False, False) and info["tool"]["ok"]
                assert obs["prompt"] == info["tool"]["content"] and obs["stage"] == stage
                assert tooled.stage == stage and tooled._row_info["date"] == date
            a = _answer(plain, stage)
            o1, r1, t1, _, i1 = plain.step(a)
            o2, r2, t2, _, i2 = tooled.step(a)
            assert (r1, t1, i1["stage_scores"], i1["nav"]) == (r2, t2, i2["stage_scores"], i2["nav"])
            done = t1
            if done:
                break
    m1, m2 = plain.episode_metrics(), tooled.episode_metrics()
    assert m1["ceps"] == m2["ceps"] and m1["final_nav"] == m2["final_nav"]
    assert m2["tool_calls"] == 2 * 3 * len(plain.records) and m2["tool_errors"] == 0
    assert "tool_calls" not in m1


class _Scripted:
    """Three bad calls, then one call past the budget, then the answers (an evaluate() policy)."""

    def __init__(self):
        self.k = 0

    def act(self, obs, info):
        env = self.env
        self.k += 1
        if env.decision_k == 0 and env.stage == 0 and self.k <= 4:
            return [{"tool": "prices_tomorrow"}, {"tool": "asset_stats", "arguments": {"assets": "SPY"}},
                    {"tool": "correlation", "arguments": {"assets": ["SPY"]}}, {"tool": "portfolio"}][self.k - 1]
        return _answer(env, env.stage)

    def reset(self, env):
        self.env = env.unwrapped


def test_errors_are_recorded_results_in_info_and_the_step_records():
    env = _env(tool_config=PortBenchToolsConfig(calls=3, chars=5000), period="normal_2024")
    res = evaluate(env, _Scripted(), seed=0)
    tools = [s["tool"] for s in res.steps if "tool" in s]
    assert [(t["tool"], t["error"]) for t in tools] == [
        ("prices_tomorrow", "unknown_tool"), ("asset_stats", "bad_arguments"), ("correlation", "bad_arguments"),
        ("portfolio", "budget_exhausted")]
    assert all(not t["ok"] and t["content"].startswith("error: ") and "\n" not in t["content"] for t in tools)
    assert "'SPY' is not of type 'array'" in tools[1]["content"]
    assert "at least two available asset ids" in tools[2]["content"]
    assert tools[3]["calls_left"] == 0 and "3 calls per stage" in tools[3]["content"]
    m = res.metrics
    assert m["tool_calls"] == 4 and m["tool_errors"] == 4
    assert m["tool_error_kinds"] == {"unknown_tool": 1, "bad_arguments": 2, "budget_exhausted": 1}
    assert [c["stage"] for c in env.tool_calls] == ["S1"] * 4
    assert len(res.steps) == 4 + 3 * 12  # the calls and the 12 monthly decisions' three stages


def test_budget_resets_per_stage_and_a_long_result_is_cut_with_the_marker():
    env = _env(tool_config=PortBenchToolsConfig(calls=2, chars=300))
    env.reset(seed=0)
    _, _, _, _, info = env.step({"tool": "list_universe"})
    t = info["tool"]
    assert t["ok"] and t["truncated"] > 0 and t["content"].endswith(f"\n[truncated: {t['truncated']} chars]")
    assert t["chars_left"] == 0 and info["tool_budget"]["chars_used"] == 300
    assert env.step({"tool": "portfolio"})[4]["tool"]["error"] == "budget_exhausted"
    _, _, _, _, info = env.step(_answer(env, 0))  # S2 starts: a fresh budget
    assert info["tool_budget"]["calls_left"] == 2 and info["tools"]
    assert env.step({"tool": "investor_profile"})[4]["tool"]["ok"]
    assert env.tool_calls[0]["truncated"] == t["truncated"]


def test_asset_stats_at_the_snapshot_window_are_the_prompt_values():
    env = _env(period="normal_2024")
    env.reset(seed=0)
    snap = env.snapshot
    lo, hi = env.view.row_cache(int(snap.t))["window"]
    out = env.step({"tool": "asset_stats", "arguments": {"assets": [], "window": hi - lo}})[0]["prompt"]
    rows = {ln.split(" | ")[0]: ln.split(" | ") for ln in out.splitlines()[2:]}
    for i in snap.avail_idx:
        tk = snap.tickers[i]
        assert rows[tk][1] == f"{100 * snap.trailing_return[i]:+.2f}%"
        assert rows[tk][2] == f"{100 * snap.ann_vol[i]:.1f}%"
    assert len(rows) == int(snap.available.sum())


def test_correlation_at_the_snapshot_window_is_the_prompt_correlation():
    env = _env(period="covid_2020")
    env.reset(seed=0)
    snap = env.snapshot
    lo, hi = env.view.row_cache(int(snap.t))["window"]
    pick = [int(i) for i in snap.avail_idx[::9]]
    out = env.step({"tool": "correlation", "arguments": {"assets": [snap.tickers[i] for i in pick],
                                                         "window": hi - lo}})[0]["prompt"]
    got = np.array([[float(v) for v in ln.split(" | ")[1].split()] for ln in out.splitlines()[2:]])
    np.testing.assert_allclose(got, snap.corr[np.ix_(pick, pick)], atol=0.005 + 1e-9)


def test_text_wrapper_passes_tool_calls_through():
    from quantgym.envs.portbench.text_protocol import TextStageAction

    env = TextStageAction(_env())
    obs, _ = env.reset(seed=0)
    brief = obs["prompt"]
    o, r, *_, info = env.step('{"tool": "correlation", "arguments": {"assets": ["SPY", "GLD"], "window": 30}}')
    assert info["tool"]["ok"] and o["prompt"].startswith("window: 30 trading days") and env.attempt == 1
    o, *_ = env.step("not json at all, but long enough " * 5)  # a parse failure re-asks the stage prompt
    assert o["prompt"].startswith(brief)


def test_env_pickles_mid_episode_in_tool_mode():
    env = _env()
    env.reset(seed=0)
    env.step({"tool": "portfolio"})
    clone = pickle.loads(pickle.dumps(env))
    a = env.step({"tool": "asset_stats", "arguments": {"assets": ["SPY"]}})
    b = clone.step({"tool": "asset_stats", "arguments": {"assets": ["SPY"]}})
    assert a[0]["prompt"] == b[0]["prompt"] and a[4]["tool"] == b[4]["tool"]
    assert len(clone.tool_calls) == 2


# ---------------------------------------------------------------------------------------- point in time
def _random_calls(rng, ids, n):
    """``n`` tool calls with seeded random arguments over every tool (asset ids of the universe, windows up
    to the bound, series subsets)."""
    out = []
    for k in range(n):
        name = TOOLS[k % len(TOOLS)]
        window = int(rng.integers(2, PortBenchToolsConfig().max_window + 1))
        assets = [str(a) for a in rng.choice(ids, size=int(rng.integers(0, 7)), replace=False)]
        if name == "asset_stats":
            args = {"assets": assets, "window": window}
        elif name == "correlation":
            args = {"assets": assets + list(ids[:2]), "window": window}
        elif name == "macro_series":
            keys = [str(x) for x in rng.choice(MACRO_KEYS, size=int(rng.integers(0, 5)), replace=False)]
            args = {"series": keys, "window": window, "every": int(rng.integers(1, 30))}
        else:
            args = {}
        out.append({"tool": name, "arguments": args})
    return out


@pytest.fixture(scope="module")
def raw():
    prices, classes, macro = _raw_bundle()
    return prices, classes, macro, PortBenchData.from_frames(prices, classes, macro=macro,
                                                             tickers=list(CANONICAL_TICKERS))


def _garbage_after(prices, macro, d, seed):
    rng = np.random.default_rng(seed)
    g_prices, g_macro = prices.copy(), macro.copy()
    after = g_prices.index > d
    g_prices.loc[after] = rng.uniform(1, 1e4, size=g_prices.loc[after].shape)
    g_prices.loc[after & (np.arange(len(g_prices)) % 7 == 0)] = np.nan
    m_after = g_macro.index > d
    g_macro.loc[m_after] = rng.uniform(-50, 50, size=g_macro.loc[m_after].shape)
    return g_prices, g_macro


@pytest.mark.parametrize("date", ["2016-03-01", "2020-04-01", "2022-06-01", "2024-03-01"])
def test_every_tool_is_point_in_time(raw, date):
    """Every tool, over a seeded sweep of arguments at every stage of the decision at ``date``, named and blind,
    answers the same on data whose rows after ``date`` are garbage (the truncated data)."""
    prices, classes, macro, clean = raw
    d = pd.Timestamp(date)
    g_prices, g_macro = _garbage_after(prices, macro, d, seed=1)
    dirty = PortBenchData.from_frames(g_prices, classes, macro=g_macro, tickers=list(CANONICAL_TICKERS))
    period = dict(start=date, end=str((d + pd.Timedelta(days=40)).date()), freq="monthly")
    rng = np.random.default_rng(int(d.year))
    for blind in (False, True):
        envs = [_env(period=period, data=x, blind=blind, tool_config=PortBenchToolsConfig(**BIG)) for x in (clean, dirty)]
        infos = [e.reset(seed=3)[1] for e in envs]
        assert infos[0]["date"] == date == infos[1]["date"]
        assert envs[0].render_prompt() == envs[1].render_prompt()
        ids = list(envs[0].prompt_tickers)
        seen = set()
        for stage in range(3):
            for call in _random_calls(rng, ids, 18):
                a, b = envs[0].step(call), envs[1].step(call)
                assert a[4]["tool"] == b[4]["tool"], (blind, stage, call)
                assert a[0]["prompt"] == b[0]["prompt"]
                seen.add(call["tool"]) if a[4]["tool"]["ok"] else None
            ans = _answer(envs[0], stage)
            envs[0].step(ans)
            envs[1].step(ans)
        assert seen == set(TOOLS)


def test_previous_close_shows_nothing_of_the_decision_day(raw):
    """With ``as_of="previous_close"`` (spec §1.7; live mode) the policy decides on data through the day before
    the decision date: the prompts, the observation arrays, info's NAV, the reward that ends the previous
    decision (``reward="log_return"``) and every tool's answer are the same on data whose rows from the decision
    date on are garbage. The book it is shown (NAV, drifted weights) is the previous close's: the decision
    day's returns are in neither. The trade itself happens at the decision day's close, on the real book. (The
    stage scores of the previous decision are ex post, spec §4.3: they read the returns up to this decision
    day; docs/portbench.md says so.)"""
    from quantgym.envs.portbench.config import PortBenchConfig

    prices, classes, macro, clean = raw
    period = dict(start="2020-03-01", end="2020-05-31", freq="monthly")
    probe = _env(period=period, data=clean)
    probe.reset(seed=0)
    probe.step(_answer(probe, 0)), probe.step(_answer(probe, 1)), probe.step(_answer(probe, 2))
    d2 = pd.Timestamp(probe.snapshot.decision_date)  # the second decision date
    g_prices, g_macro = _garbage_after(prices, macro, d2 - pd.Timedelta(days=1), seed=2)
    dirty = PortBenchData.from_frames(g_prices, classes, macro=g_macro, tickers=list(CANONICAL_TICKERS))
    config = PortBenchConfig(as_of="previous_close")
    envs = [_env(period=period, data=x, config=config, reward="log_return", tool_config=PortBenchToolsConfig(**BIG))
            for x in (clean, dirty)]
    for e in envs:
        e.reset(seed=0)
    for stage in range(3):  # the first decision, answered alike: its closing log-return reward and NAV match
        ans = _answer(envs[0], stage)
        a, b = (e.step(ans) for e in envs)
    assert a[1] == b[1] and a[4]["nav"] == b[4]["nav"]
    assert pd.Timestamp(envs[0].snapshot.decision_date) == pd.Timestamp(envs[1].snapshot.decision_date) == d2
    for stage in range(3):
        assert envs[0].render_prompt() == envs[1].render_prompt(), stage
        for call in [{"tool": t} for t in TOOLS] + [{"tool": "asset_stats", "arguments": {"window": 5}}]:
            a, b = (e.step(call) for e in envs)
            assert a[4]["tool"] == b[4]["tool"], call
            for k in a[0]:
                assert np.array_equal(np.asarray(a[0][k]), np.asarray(b[0][k])), (stage, k)
            assert a[4]["nav"] == b[4]["nav"]
        ans = _answer(envs[0], stage)
        envs[0].step(ans), envs[1].step(ans)
    # the book shown at the second decision is the previous close's; the real one holds the decision day's return
    sim = envs[0].sim
    assert envs[0].nav_seen == sim.nav_history[-2] != sim.nav_history[-1] or sim.t != envs[0].snapshot.t


# ---------------------------------------------------------------------------------------- blind
def test_blind_tool_results_name_no_asset_date_or_level():
    from quantgym.blind import bundled_vocabulary

    vocab = bundled_vocabulary(["portbench"])
    env = _env(blind=True, tool_config=PortBenchToolsConfig(**BIG), period="covid_2020")
    env.reset(seed=5)
    hi = env.view.row_cache(int(env.snapshot.t))["window"][1]
    snap = env.snapshot  # the real levels as named mode prints them: closes, the window's macro values
    levels = [f"{snap.price[i]:.2f}" for i in snap.avail_idx]
    levels += sorted({f"{v:.4g}" for v in env.view.macro[hi - 60:hi].ravel() if np.isfinite(v)})
    ids = list(env.prompt_tickers)
    texts = [env.render_prompt(s) for s in range(3)]
    for call in ([{"tool": t} for t in TOOLS if t != "correlation"]
                 + [{"tool": "asset_stats", "arguments": {"assets": [], "window": 500}},
                    {"tool": "correlation", "arguments": {"assets": ids[:8], "window": 120}},
                    {"tool": "macro_series", "arguments": {"series": [], "window": 60, "every": 1}}]):
        info = env.step(call)[4]
        assert info["tool"]["ok"], info["tool"]
        texts.append(info["tool"]["content"])
    for text in texts:
        assert vocab.scan(text, levels=levels) == []
    assert texts[3].splitlines()[1].split(" | ")[0] in ids  # list_universe lists aliases
    assert "day 0" in texts[-1] and "z-scores" in texts[-1]
    named = _env(tool_config=PortBenchToolsConfig(**BIG), period="covid_2020")  # the scanner finds named ones
    named.reset(seed=5)
    found = {lk.kind for t in ("list_universe", "macro_series")
             for lk in vocab.scan(named.step({"tool": t, "arguments": {"series": [], "window": 60}}
                                             if t == "macro_series" else {"tool": t})[0]["prompt"], levels=levels)}
    assert {"ticker", "date", "level"} <= found
    r = env.step({"tool": "asset_stats", "arguments": {"assets": ["SPY"]}})[4]["tool"]
    assert r["error"] == "bad_arguments" and "unknown asset" in r["content"]
    assert env.episode_metrics()["blind_aliases"]  # the map stays evaluator side
