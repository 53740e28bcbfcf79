"""Prompt styles (quantgym.spaces.PROMPT_STYLES) of every prompt-producing env.

``full`` is the reference rendering (the observation of a default env), ``render_prompt(style)`` reads
the state only, the short styles keep what an answer needs (every available ticker, the rules, the
parameters and keys) and fit the token budgets: with the estimate always, with the SmolLM2 tokenizer
when llama-cpp-python and the test model are at hand (``$QUANTGYM_LLM_TEST_MODEL``).
"""

from __future__ import annotations

import json
import re

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import quantgym  # noqa: F401 - registers the ids
from quantgym.agents.llm.tokens import estimate_tokens, find_test_model
from quantgym.envs.market_bench.config import ALLOWED_IMPORTS, METRIC_KEYS
from quantgym.envs.portbench.config import PortBenchConfig
from quantgym.spaces import PROMPT_STYLES, check_prompt_style

SHORT = ("compact", "minimal")
#: SmolLM2-token budgets per family and style (docs: "Prompt styles")
BUDGET = {
    ("portbench", "compact"): 5000, ("portbench", "minimal"): 2000,
    ("market_bench", "compact"): 3500, ("market_bench", "minimal"): 1800,
    ("qa", "minimal"): 600, ("arena_brief", "minimal"): 1200, ("arena_feedback", "minimal"): 400,
}
#: The estimate over-counts prose: on the Market-Bench prompts and the Quant-Arena brief estimate / SmolLM2 tokens >= 1.38
#: (benchmarks/prompt_tokens.py), so the always-available check of their minimal budget allows
#: this factor (1.3 x 1,800 estimated = at most ~1,700 real tokens); the real budget is checked exactly below.
PROSE_SLACK = 1.3


@pytest.fixture(scope="module", autouse=True)
def _free_tokenizer():
    """Drop the cached GGUF vocabulary after this module (freed while the interpreter is fully alive)."""
    yield
    from quantgym.agents.llm.tokens import gguf_token_counter

    gguf_token_counter.cache_clear()
    import gc

    gc.collect()


def _counter():
    """The SmolLM2 token counter, or None (then the real-tokenizer checks skip)."""
    path = find_test_model()
    if path is None:
        return None
    try:
        from quantgym.agents.llm.tokens import gguf_token_counter

        return gguf_token_counter(str(path))
    except (ImportError, OSError, ValueError, RuntimeError):
        return None


def _real_counter():
    c = _counter()
    if c is None:
        pytest.skip("no real tokenizer: needs llama-cpp-python and the SmolLM2 GGUF ($QUANTGYM_LLM_TEST_MODEL)")
    return c


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_-]){re.escape(word)}(?![A-Za-z0-9_-])", text) is not None


# ------------------------------------------------------------------------------ the contract
def test_check_prompt_style():
    assert PROMPT_STYLES == ("full", "compact", "minimal")
    for s in PROMPT_STYLES:
        assert check_prompt_style(s) == s
    for bad in ("Full", "short", "", None, 1):
        with pytest.raises(ValueError) as ei:
            check_prompt_style(bad)
        msg = str(ei.value)
        assert "\n" not in msg and all(repr(s) in msg for s in PROMPT_STYLES)


# ------------------------------------------------------------------------------ PortBench
def _pb_action(env, obs) -> dict:
    """A valid dict action of the current sub-step (views from the trailing returns, ±0.2 signals, EW buys)."""
    n, st = env.n_assets, int(obs["stage"])
    views = np.clip(np.asarray(obs["trailing_return"]) / 0.10, -1, 1)
    pv = np.asarray(obs["prev_views"])
    signals = np.where(pv > 0.2, 2, np.where(pv < -0.2, 0, 1))
    av = np.asarray(obs["available"], bool)
    buys = av & (np.asarray(obs["prev_signals"]) == 2)
    w = (buys if buys.any() else av).astype(float)
    return {"views": views if st == 0 else np.zeros(n), "signals": signals if st == 1 else np.ones(n),
            "weights": w / w.sum() if st == 2 else np.zeros(n), "status": 0}


def _pb_walk(env, n_dates: int):
    """Yield (obs, info) at every sub-step of the first ``n_dates`` decisions, stepping with _pb_action."""
    obs, info = env.reset(seed=0)
    for _ in range(3 * n_dates):
        yield obs, info
        obs, _, term, trunc, info = env.step(_pb_action(env, obs))
        if term or trunc:
            return


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    return a == b


@pytest.fixture(scope="module")
def pb_samples():
    """(stage, {style: prompt}, tickers of the available assets, env) over a few dates of two periods."""
    out = []
    for prof, period, n in (("Balanced", "covid_2020", 2), ("Conservative", "normal_2024", 1)):
        env = gym.make(f"PortBench-{prof}-v0", period=period, stagewise=True).unwrapped
        for obs, info in _pb_walk(env, n):
            tick = [env.view.tickers[i] for i in np.flatnonzero(obs["available"])]
            out.append((int(obs["stage"]), {s: env.render_prompt(style=s) for s in PROMPT_STYLES}, tick,
                        env.profile))
    return out


def test_portbench_full_is_the_observation_and_styles_leave_state_alone():
    a = gym.make("PortBench-Balanced-v0", period="covid_2020", stagewise=True).unwrapped
    b = gym.make("PortBench-Balanced-v0", period="covid_2020", stagewise=True).unwrapped
    c = gym.make("PortBench-Balanced-v0", period="covid_2020", stagewise=True, prompt_style="minimal").unwrapped
    assert a.prompt_style == "full" and c.prompt_style == "minimal" and c.config.prompt_style == "minimal"
    oa, ia = a.reset(seed=0)
    ob, ib = b.reset(seed=0)
    oc, ic = c.reset(seed=0)
    assert ia["prompt_style"] == "full" and ic["prompt_style"] == "minimal"
    for _ in range(7):  # two dates and a bit: S1 S2 S3 S1 S2 S3 S1
        assert oa["prompt"] == a.render_prompt() == a.render_prompt(style="full")
        assert oc["prompt"] == c.render_prompt() == c.render_prompt(style="minimal") == a.render_prompt(style="minimal")
        assert c.render_prompt(style="full") == oa["prompt"]
        for st in (0, 1, 2):  # re-rendering other stages and styles reads the state only
            for s in PROMPT_STYLES:
                a.render_prompt(st, style=s)
                c.render_prompt(st, s)
        act = _pb_action(a, oa)
        oa, ra, ta, _, ia = a.step(act)
        ob, rb, tb, _, ib = b.step(act)
        oc, rc, tc, _, ic = c.step(act)
        assert _same(oa, ob) and ra == rb == rc and ta == tb == tc
        assert _same({k: v for k, v in oa.items() if k != "prompt"}, {k: v for k, v in oc.items() if k != "prompt"})
        ia.pop("orders", None), ib.pop("orders", None), ic.pop("orders", None)
        assert _same(ia, ib) and ic.pop("prompt_style") == "minimal" and ia.pop("prompt_style") == "full"
        assert _same(ia, ic)


def test_portbench_style_through_config_and_errors():
    env = gym.make("PortBench-Aggressive-v0", stagewise=True, config=PortBenchConfig(prompt_style="compact")).unwrapped
    assert env.prompt_style == "compact"
    env2 = gym.make("PortBench-Aggressive-v0", stagewise=True, config=PortBenchConfig(prompt_style="compact"),
                    prompt_style="full").unwrapped
    assert env2.prompt_style == "full"  # the kwarg overrides the config
    with pytest.raises(ValueError, match="'full', 'compact', 'minimal'"):
        gym.make("PortBench-Balanced-v0", prompt_style="tiny")
    with pytest.raises(ValueError, match="'full', 'compact', 'minimal'"):
        gym.make("PortBench-Balanced-v0", config=PortBenchConfig(prompt_style="tiny"))
    with pytest.raises(RuntimeError, match="reset"):
        env.render_prompt()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="'full', 'compact', 'minimal'"):
        env.render_prompt(style="short")


def test_portbench_short_prompts_keep_what_an_answer_needs(pb_samples):
    for stage, texts, tick, profile in pb_samples:
        for s in SHORT:
            p = texts[s]
            missing = [t for t in tick if not _has_word(p, t)]
            assert not missing, (stage, s, missing[:5])
            assert f"[PORTBENCH S{stage + 1}" in p and "[SCHEMA]" in p and "JSON object" in p
            assert re.search(r"\d{4}-\d{2}-\d{2}", p)
            if stage == 1:
                assert "+0.2" in p and "-0.2" in p and "[YOUR S1 VIEWS]" in p
            if stage == 2:
                assert profile.prompt_block() in p and "[CONSTRAINTS]" in p and "sum to" in p.replace("summing to", "sum to")
            assert estimate_tokens(p) < estimate_tokens(texts["full"]) or stage == 1


def test_portbench_budgets_estimate(pb_samples):
    for stage, texts, _, _ in pb_samples:
        for s in SHORT:
            assert estimate_tokens(texts[s]) <= BUDGET[("portbench", s)], (stage, s)


def test_portbench_budgets_real_tokenizer(pb_samples):
    count = _real_counter()
    for stage, texts, _, _ in pb_samples:
        for s in SHORT:
            assert count(texts[s]) <= BUDGET[("portbench", s)], (stage, s)


# ------------------------------------------------------------------------------ PortBench-QA
_NUM = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def test_qa_styles():
    full = gym.make("PortBench-QA-v0", restricted="both").unwrapped
    mini = gym.make("PortBench-QA-v0", restricted="both", prompt_style="minimal").unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        mini.render_prompt()
    count = _counter()
    for i in range(0, full.n_items, 3):
        of, inf = full.reset(options={"index": i})
        om, inm = mini.reset(options={"index": i})
        assert inf["prompt_style"] == "full" and inm["prompt_style"] == "minimal"
        assert of["prompt"] == full.render_prompt() == mini.render_prompt("full")
        assert om["prompt"] == mini.render_prompt() == full.render_prompt("minimal")
        compact = full.render_prompt("compact")
        # compact drops trailing zeros only: the same numbers
        assert [float(x) for x in _NUM.findall(compact)] == [float(x) for x in _NUM.findall(of["prompt"])]
        assert estimate_tokens(om["prompt"]) <= BUDGET[("qa", "minimal")]
        if count is not None:
            assert count(om["prompt"]) <= BUDGET[("qa", "minimal")]
        for t in inf["assets"]:
            assert all(t in full.render_prompt(s) for s in SHORT)
        answer = inf["id"]  # any text: same score with or without re-rendering
        rf = full.step(answer)[1]
        rm = mini.step(answer)[1]
        assert rf == rm
    with pytest.raises(ValueError, match="'full', 'compact', 'minimal'"):
        full.render_prompt("x")
    with pytest.raises(ValueError, match="'full', 'compact', 'minimal'"):
        gym.make("PortBench-QA-v0", prompt_style="x")


# ------------------------------------------------------------------------------ Quant-Arena
@pytest.fixture(scope="module")
def arena_data():
    from quantgym.envs.quant_arena.data import BUNDLED_DIR, ArenaDataset, load_dataset

    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
    syms = sorted(df["symbol"].unique())[::40][:20]
    df = df[df["symbol"].isin(syms) & (df["date"] >= pd.Timestamp("2023-09-01").date())
            & (df["date"] <= pd.Timestamp("2024-02-29").date())]
    return ArenaDataset.from_frame(df.reset_index(drop=True), info=load_dataset().info.reset_index(), name="tiny-real")


_WINDOWS = dict(research_start="2023-11-01", research_end="2023-12-31", sealed_start="2024-01-01",
                sealed_end="2024-02-29", warmup_start="2023-09-01")
_FAIL = ('FEATURES = ["x"]\n\ndef compute_features(view):\n    return {"x": view.history("close", 1).iloc[-1]}\n\n'
         'def score(features, view):\n    return features["no such feature"]\n')


def test_quant_arena_styles(arena_data):
    from quantgym.envs.quant_arena.env import QuantArenaEnv
    from quantgym.envs.quant_arena.prompts import task_brief
    from quantgym.envs.quant_arena.examples import example_source

    a = QuantArenaEnv(data=arena_data, executor="inprocess", record_dir=False, **_WINDOWS)
    m = QuantArenaEnv(data=arena_data, executor="inprocess", record_dir=False, prompt_style="minimal", **_WINDOWS)
    with pytest.raises(RuntimeError, match="reset"):
        a.render_prompt()
    ba, ia = a.reset(seed=0)
    bm, im = m.reset(seed=0)
    assert ba == a.render_prompt() == m.render_prompt("full") == task_brief(a.config, "iterative", 5, arena_data)[0]
    assert bm == m.render_prompt() == a.render_prompt("minimal") and im["prompt_style"] == "minimal"
    assert ia["brief"] == im["brief"]
    for text in (a.render_prompt("compact"), bm):  # interface, windows, budget, imports, limits, view API
        for must in ("FEATURES", "compute_features(view)", "score(features, view)", "2023-11-01", "2024-02-29",
                     "5 candidate", "numpy, pandas, scipy", "10 s", "4096 MiB", "view.history(field, lookback)",
                     "view.symbols", "view.info", "view.intraday", "LookAheadError", '{"freeze": k}'):
            assert must in text, must
    for src in (example_source("momentum_20d"), _FAIL):
        for s in PROMPT_STYLES:
            a.render_prompt(s)
        oa, ra, _, _, fa = a.step(src)
        om, rm, _, _, fm = m.step(src)
        assert ra == rm and fa["feedback"] == fm["feedback"] and fm["prompt_style"] == "minimal"
        assert oa == json.dumps(fa["feedback"], ensure_ascii=False) == a.render_prompt() == m.render_prompt("full")
        assert om == m.render_prompt() == a.render_prompt("minimal")
        fb = fa["feedback"]
        compact = json.loads(a.render_prompt("compact"))
        assert {k: v for k, v in compact.items() if k != "errors"} == {k: v for k, v in fb.items() if k != "errors"}
        for v in (fb["window"] or {}).values():
            assert str(v) in om
        assert f"n_errors {fb['n_errors']}" in om
        if src == _FAIL:
            assert fb["status"] != "ok" and fb["errors"] and fb["errors"][0]["traceback"]
            assert fb["errors"][0]["traceback"].rstrip().splitlines()[-1] in om  # the traceback's last line
            assert len(compact["errors"]) == min(10, len(fb["errors"]))
        assert estimate_tokens(om) <= BUDGET[("arena_feedback", "minimal")]
    oa, sa, ta, _, fa = a.step({"freeze": 1})
    om, sm, tm, _, fm = m.step({"freeze": 1})
    assert ta and tm and sa == sm and oa == om == a.render_prompt("minimal")  # final scores: one rendering
    with pytest.raises(ValueError, match="'full', 'compact', 'minimal'"):
        a.render_prompt("big")
    with pytest.raises(ValueError, match="'full', 'compact', 'minimal'"):
        QuantArenaEnv(data=arena_data, prompt_style="big", **_WINDOWS)


def test_quant_arena_brief_budgets():
    count = _counter()
    for env_id in ("QuantArena-v0", "QuantArena-OneShot-v0"):
        env = gym.make(env_id, record_dir=False, prompt_style="minimal")
        brief, _ = env.reset(seed=0)
        assert estimate_tokens(brief) <= BUDGET[("arena_brief", "minimal")] * PROSE_SLACK
        if count is not None:
            assert count(brief) <= BUDGET[("arena_brief", "minimal")]
        assert estimate_tokens(env.unwrapped.render_prompt("compact")) <= estimate_tokens(env.unwrapped.render_prompt("full"))


def test_quant_arena_feedback_worst_case():
    from quantgym.envs.quant_arena.executor import WindowResult
    from quantgym.envs.quant_arena.prompts import FEEDBACK_WINDOW_KEYS, feedback_text, research_feedback

    tb = "Traceback (most recent call last):\n" + '  File "<submission>", line 9, in f\n    return f(n - 1)\n' * 60
    tb += "RecursionError: too deep"
    errs = [{"date": f"2022-03-{i + 1:02d}", "phase": "score", "type": "RecursionError", "message": "too deep " * 80,
             "traceback": tb} for i in range(30)]
    res = WindowResult("research", "2022-01-01", "2023-12-31", "ok", "ok", 40.0,
                       metrics={k: 0.1 * (i + 1) for i, k in enumerate(FEEDBACK_WINDOW_KEYS)},
                       years={"2022": {"return": 0.05, "reference_return": 0.01, "excess": 0.04}},
                       errors=errs, n_errors=300)
    fb = research_feedback(res, 3, 2)
    full, compact, minimal = (feedback_text(fb, s) for s in PROMPT_STYLES)
    assert json.loads(full) == fb and len(minimal) < len(compact) < len(full)
    assert "RecursionError: too deep" in minimal and minimal.count("  File") <= 6
    assert estimate_tokens(minimal) <= BUDGET[("arena_feedback", "minimal")]
    count = _counter()
    if count is not None:
        assert count(minimal) <= BUDGET[("arena_feedback", "minimal")]


# ------------------------------------------------------------------------------ Market-Bench
MB_IDS = {"scheduled": "MarketBench-Scheduled-v0", "pairs": "MarketBench-Pairs-v0",
          "delta_hedge": "MarketBench-DeltaHedge-v0"}


@pytest.mark.parametrize("strategy", list(MB_IDS))
def test_market_bench_styles_keep_every_rule_input(strategy, tmp_path):
    from quantgym.envs.market_bench.prompts import ns_words

    full = gym.make(MB_IDS[strategy], round=2, workdir=tmp_path).unwrapped
    mini = gym.make(MB_IDS[strategy], round=2, workdir=tmp_path, prompt_style="minimal").unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        full.render_prompt()
    of, inf = full.reset(seed=0)
    om, inm = mini.reset(seed=0)
    assert inf["prompt_style"] == "full" and inm["prompt_style"] == "minimal"
    assert of["prompt"] == full.render_prompt() == mini.render_prompt("full")
    assert om["prompt"] == mini.render_prompt() == full.render_prompt("minimal")
    count = _counter()
    for s in SHORT:
        p = full.render_prompt(s)
        for k in METRIC_KEYS[strategy]:
            assert k in p, k
        for name, v in full.round.params.items():
            if name.endswith("_ns"):
                text = ns_words(v) if s == "compact" else ns_words(v).split(" (")[1].rstrip(")")
            else:
                text = str(v)
            assert text in p, (s, name, text)
        for must in ("key them by integer ticks", "Short selling allowed", "No fees", "run_backtest(inputs: dict[str, str])",
                     "120 s", ", ".join(ALLOWED_IMPORTS), "first_at_or_after", "as_of", "FIFO", "max_drawdown",
                     "book.csv", "bid_px_i, bid_sz_i, ask_px_i, ask_sz_i", "00..02"):
            assert must in p, (s, must)
        for name in inf["inputs"]:
            assert name in p
        if s == "compact":
            assert all(path in p for path in inf["inputs"].values())
        if strategy == "pairs":
            assert "ddof = 0" in p and "SYNTHETIC DATA" in p
        budget = BUDGET[("market_bench", s)]
        assert estimate_tokens(p) <= budget * (1 if s == "compact" else PROSE_SLACK)
        assert estimate_tokens(p) < estimate_tokens(of["prompt"])
        if count is not None:
            assert count(p) <= budget
    with pytest.raises(ValueError, match="'full', 'compact', 'minimal'"):
        full.render_prompt("x")
    full.close()
    mini.close()


def test_market_bench_budgets_real_tokenizer(tmp_path):
    count = _real_counter()
    for strategy, env_id in MB_IDS.items():
        for rnd in (1, 5):
            env = gym.make(env_id, round=rnd, workdir=tmp_path).unwrapped
            env.reset(seed=0)
            for s in SHORT:
                assert count(env.render_prompt(s)) <= BUDGET[("market_bench", s)], (strategy, rnd, s)
            env.close()


def test_market_bench_render_prompt_leaves_the_episode_alone(tmp_path):
    a = gym.make("MarketBench-Scheduled-v0", round=1, workdir=tmp_path / "a").unwrapped
    b = gym.make("MarketBench-Scheduled-v0", round=1, workdir=tmp_path / "b").unwrapped
    a.reset(seed=0)
    b.reset(seed=0)
    for s in PROMPT_STYLES:
        a.render_prompt(s)
    oa, ra, ta, _, ia = a.step("x = 1\n")  # no run_backtest: a FAILED attempt
    ob, rb, tb, _, ib = b.step("x = 1\n")
    assert (ra, ta, ia["status"], oa["attempt"], oa["last_status"]) == (rb, tb, ib["status"], ob["attempt"], ob["last_status"])
    assert a.render_prompt() == oa["prompt"] and ia["prompt_style"] == "full"
    with pytest.raises(ValueError, match="'full', 'compact', 'minimal'"):
        gym.make("MarketBench-Pairs-v0", prompt_style="x")
    a.close()
    b.close()
