"""The prompt block cache is speed only: every prompt and every number stays identical.

- the table look-up formatting of the correlation block gives the scalar formatter's text;
- the block cache (prompts.py docstring): prompts with and without it are the same in every style, on
  several dates, for two profiles and in paper mode; a block is rendered once per dataset and decision
  row (S1, S3 and every profile share it); two datasets on the same date never share a block;
- ``quantile_linear`` is ``np.quantile``; the BLAS thread limit restores the thread counts;
- the answer parser's brace scan and control-character filter equal the character loops they replaced.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.portbench import prompts
from quantgym.envs.portbench.prompts import _num, _nums, correlation_block
from quantgym.spaces import PROMPT_STYLES


def _reference_block_rows(snap, table="upper", max_assets=None):
    """The pairwise rows as the scalar code wrote them before the change."""
    idx = snap.avail_idx
    pidx = idx[:max_assets]
    rows = []
    for a, i in enumerate(pidx):
        cols = pidx[a + 1:] if table == "upper" else pidx
        vals = " ".join("nan" if not np.isfinite(snap.corr[i, j]) else _num(snap.corr[i, j]) for j in cols)
        rows.append(f"{snap.tickers[i]}: {vals}")
    return rows


def test_nums_equals_num_on_ties_signed_zeros_and_random_values():
    rng = np.random.default_rng(0)
    special = [0.125, -0.125, 0.135, -0.135, 0.005, -0.005, 0.0049999, -0.0049999, -0.0, 0.0, 1.0, -1.0, 0.995,
               -0.995, 0.015, 0.025, 1.0000001, -1.2, np.nan, np.inf, -np.inf, 1e-300, -1e-300]
    grid = np.round(np.arange(-1.0, 1.0001, 0.0005), 4)  # every half-cent tie and its neighbours
    x = np.concatenate([special, grid, rng.uniform(-1, 1, 20000)])
    got = _nums(x)
    want = ["nan" if not np.isfinite(v) else _num(float(v)) for v in x]
    assert list(got) == want


@pytest.mark.parametrize("period", ["covid_2020", "normal_2024"])
def test_correlation_block_unchanged_on_the_bench_dates(period):
    from quantgym.envs.portbench.env import PortBenchEnv

    env = PortBenchEnv(period=period, scoring=False)
    env.reset(seed=0)
    n = 0
    while True:
        snap = env.snapshot
        for table, mx in (("upper", None), ("full", None), ("upper", 6)):
            text = correlation_block(snap, table, mx).split("\n")
            rows = _reference_block_rows(snap, table, mx)
            assert text[2:2 + len(rows)] == rows
        n += 1
        nn = env.n_assets
        _, _, term, _, _ = env.step({"views": np.zeros(nn), "signals": np.ones(nn, dtype=np.int64),
                                     "weights": np.full(nn, 1.0 / nn), "status": 0})
        if term:
            break
    assert n >= 10


# ------------------------------------------------------------------------------ block cache
def _uncached(monkeypatch, fn):
    """``fn()`` with the block cache switched off (every block rendered)."""
    with monkeypatch.context() as m:
        m.setattr(prompts, "_block", lambda cache, snap, key, build: build())
        return fn()


def _all_prompts(env, monkeypatch) -> int:
    """Compare every stage × style of the current state, cached (twice: miss, then hit) and uncached."""
    n = 0
    for stage in (0, 1, 2):
        for style in PROMPT_STYLES:
            first = env.render_prompt(stage=stage, style=style)
            again = env.render_prompt(stage=stage, style=style)
            plain = _uncached(monkeypatch, lambda: env.render_prompt(stage=stage, style=style))
            assert first == again == plain, (stage, style, env.snapshot.decision_date)
            n += 1
    return n


@pytest.mark.parametrize("kw", [
    dict(profile="conservative", period="covid_2020"),
    dict(profile="aggressive", period="crypto_2022"),
    dict(profile="balanced", period="china_2015", fidelity="paper"),
], ids=["conservative-covid", "aggressive-crypto", "paper-china"])
def test_prompts_identical_with_and_without_the_cache(kw, monkeypatch):
    from quantgym.envs.portbench.env import PortBenchEnv

    env = PortBenchEnv(stagewise=True, **kw)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    n_assets, dates, checked = env.n_assets, set(), 0
    for _ in range(4 * 3):  # four decision dates, three sub-steps each
        dates.add(str(env.snapshot.decision_date.date()))
        assert obs["prompt"] == _uncached(monkeypatch, env.render_prompt)
        if env.stage == 1:  # S3 with the agent's strengths, not only the default 0.5
            env.stage_notes["strengths"] = rng.uniform(0, 1, n_assets)
        checked += _all_prompts(env, monkeypatch)
        obs, *_ = env.step({"views": rng.uniform(-1, 1, n_assets), "signals": rng.integers(0, 3, n_assets),
                            "weights": rng.uniform(0, 1, n_assets), "status": 0})
    assert len(dates) == 4 and checked == 4 * 3 * 9
    parts = env.view.row_cache(int(env.snapshot.t))
    assert any(isinstance(k, tuple) and k[0] == "prompt" for k in parts), "the env did not use the block cache"


def test_block_rendered_once_per_date_across_stages_and_profiles(monkeypatch):
    from quantgym.envs.portbench.env import PortBenchEnv

    calls = []
    real = prompts.correlation_block
    monkeypatch.setattr(prompts, "correlation_block", lambda *a, **k: calls.append(1) or real(*a, **k))
    data = _fresh_bundled()  # its own row cache: no block rendered before
    period = dict(start="2023-03-01", end="2023-04-30", freq="monthly")
    envs = [PortBenchEnv(profile=p, period=period, data=data, stagewise=True)
            for p in ("conservative", "balanced", "aggressive")]
    texts = []
    for env in envs:
        env.reset(seed=0)
        texts.append(env.render_prompt(stage=0))
        texts.append(env.render_prompt(stage=2))
    block = real(envs[0].snapshot)
    assert all(block in t for t in texts)
    assert len(calls) == 1  # one date, S1 and S3, three profiles: rendered once


def _bundle_frames():
    from quantgym.envs.portbench.raw import bundled_portbench_path

    root = bundled_portbench_path()
    prices = pd.read_parquet(root / "prices.parquet")
    assets = pd.read_csv(root / "assets.csv", dtype=str)
    macro = pd.read_parquet(root / "macro.parquet")
    prices = prices.set_index("date") if "date" in prices.columns else prices
    macro = macro.set_index("date") if "date" in macro.columns else macro
    return prices, dict(zip(assets["ticker"], assets["asset_class"])), macro


def _fresh_bundled(prices=None):
    """A new data object over the bundled frames (``prices`` replaced if given)."""
    from quantgym.envs.portbench.data import PortBenchData
    from quantgym.envs.portbench.universe import CANONICAL_TICKERS

    px, classes, macro = _bundle_frames()
    return PortBenchData.from_frames(px if prices is None else prices, classes, macro=macro,
                                     tickers=list(CANONICAL_TICKERS))


def test_two_datasets_on_the_same_date_never_share_a_block(monkeypatch):
    from quantgym.envs.portbench.env import PortBenchEnv

    other = _bundle_frames()[0].copy()
    other.iloc[:, ::2] *= np.exp(np.random.default_rng(1).normal(0, 0.01, other.iloc[:, ::2].shape)).cumprod(axis=0)
    datasets = [_fresh_bundled(), _fresh_bundled(other)]
    period = dict(start="2024-03-01", end="2024-04-30", freq="monthly")
    envs = [PortBenchEnv(profile="balanced", period=period, data=d, stagewise=True) for d in datasets]
    for env in envs:
        env.reset(seed=0)
    assert envs[0].snapshot.decision_date == envs[1].snapshot.decision_date
    for stage in (0, 2):
        for style in PROMPT_STYLES:
            got = [env.render_prompt(stage=stage, style=style) for env in envs]
            want = [_uncached(monkeypatch, lambda: env.render_prompt(stage=stage, style=style)) for env in envs]
            assert got == want
            if style == "full":
                assert got[0] != got[1]  # different returns and correlations: different text
    # each dataset keeps its own blocks (the row cache is per dataset object)
    parts = [env.view.row_cache(int(env.snapshot.t)) for env in envs]
    assert parts[0] is not parts[1]
    key = ("prompt", "corr", "upper", None)
    assert parts[0][key].text != parts[1][key].text


def test_env_with_cached_blocks_pickles_and_its_clone_renders_the_same(monkeypatch):
    import pickle

    from quantgym.envs.portbench.env import PortBenchEnv

    env = PortBenchEnv(profile="balanced", period="covid_2020", stagewise=True)
    obs, _ = env.reset(seed=0)
    clone = pickle.loads(pickle.dumps(env))
    for style in PROMPT_STYLES:
        for stage in (0, 2):
            want = _uncached(monkeypatch, lambda: env.render_prompt(stage=stage, style=style))
            assert clone.render_prompt(stage=stage, style=style) == env.render_prompt(stage=stage, style=style) == want


def test_a_cache_shared_by_mistake_never_changes_a_prompt():
    from quantgym.envs.portbench.env import PortBenchEnv
    from quantgym.envs.portbench.universe import MACRO_KEYS

    env = PortBenchEnv(profile="balanced", period="normal_2024", stagewise=True, scoring=False)
    env.reset(seed=0)
    shared: dict = {}
    n = env.n_assets
    for _ in range(3):
        snap = env.snapshot
        for style in PROMPT_STYLES:
            assert (prompts.render_s1(snap, MACRO_KEYS, style=style, cache=shared)
                    == prompts.render_s1(snap, MACRO_KEYS, style=style))
        for _ in range(3):
            env.step({"views": np.zeros(n), "signals": np.ones(n, dtype=np.int64), "weights": np.full(n, 1 / n),
                      "status": 0})
    # a hand-built snapshot with plain sequences renders without caching
    snap = env.snapshot
    import dataclasses

    plain = dataclasses.replace(snap, price=snap.price.tolist())
    assert prompts.render_s1(plain, MACRO_KEYS, cache={}) == prompts.render_s1(snap, MACRO_KEYS)


# ------------------------------------------------------------------------------ scorers
def test_quantile_linear_is_numpys():
    from quantgym.metrics import quantile_linear

    rng = np.random.default_rng(3)
    for k in range(20000):
        n = int(rng.integers(1, 130))
        kind = k % 4
        a = (rng.normal(0, 0.01, n), np.round(rng.normal(0, 0.01, n), 3),
             rng.choice([0.0, -0.0, 0.01, -0.01], n), rng.integers(-3, 3, n) * 1e-3)[kind]
        q = (0.05, 0.5, 0.95, 0.0, 1.0, 0.01, float(rng.uniform()))[k % 7]
        got, want = quantile_linear(a, q), float(np.quantile(a, q))
        assert got == want and np.signbit(got) == np.signbit(want), (a, q)
    for a in (np.array([np.nan, 0.1, 0.2]), np.array([np.inf, -1.0, 0.0])):
        np.testing.assert_equal(quantile_linear(a, 0.05), float(np.quantile(a, 0.05)))


def test_blas_limit_sets_and_restores_thread_counts():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from quantgym.envs.portbench.optimize import _blas_limit, single_thread_blas

    def counts():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]

    before = counts()
    with single_thread_blas():
        assert set(counts()) <= {1}
        with _blas_limit(None):
            assert counts() == [max(before or [1])] * len(before)
        assert set(counts()) <= {1}
    assert counts() == before


# ------------------------------------------------------------------------------ answer parsing
def _balanced_end_reference(s: str, i: int):
    """The character loop the regular-expression scan replaced."""
    depth, in_str, esc = 0, False, False
    for j in range(i, len(s)):
        c = s[j]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return None


def test_balanced_scan_equals_the_character_loop():
    import random

    from quantgym.envs.portbench.parsing import _balanced_end

    rng = random.Random(0)
    for _ in range(8000):
        s = "".join(rng.choice('{}"\\a :') for _ in range(rng.randint(0, 24)))
        for i in range(len(s)):
            assert _balanced_end(s, i) == _balanced_end_reference(s, i), (s, i)


def test_clean_text_drops_exactly_the_control_characters():
    import unicodedata

    from quantgym.envs.portbench.parsing import clean_text

    text = "".join(chr(c) for c in range(0x3000)) + "\U0001F600\x85\x9f\x7f"
    assert clean_text(text) == "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) != "Cc")


def test_blocks_over_the_size_bound_are_not_kept(monkeypatch):
    from quantgym.envs.portbench.env import PortBenchEnv

    env = PortBenchEnv(profile="balanced", period="crypto_2022", stagewise=True, scoring=False)
    env.reset(seed=0)
    want = _uncached(monkeypatch, lambda: env.render_prompt(stage=2))
    cache: dict = {}
    monkeypatch.setattr(prompts, "BLOCK_CACHE_MAX_CHARS", 1000)  # the correlation block has ~15k characters
    from quantgym.envs.portbench.universe import MACRO_KEYS

    text = prompts.render_s1(env.snapshot, MACRO_KEYS, cache=cache)
    assert text == _uncached(monkeypatch, lambda: prompts.render_s1(env.snapshot, MACRO_KEYS))
    assert ("prompt", "corr", "upper", None) not in cache and ("prompt", "s1_head", tuple(MACRO_KEYS), None) not in cache
    assert env.render_prompt(stage=2) == want
