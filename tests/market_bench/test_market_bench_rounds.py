"""Rounds: determinism, shipped manifest, generators, prototype figures and prompts (spec §9.3, §9.12-§9.15)."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.signal import lfilter

from quantgym.envs.market_bench.checks import builder_checks
from quantgym.envs.market_bench.config import (METRIC_KEYS, N_ROUNDS, STRATEGIES, DeltaSeriesConfig, PairsBookConfig,
                                               stream_seed)
from quantgym.envs.market_bench.data import generate_option_delta, generate_pairs_book, synthetic_book
from quantgym.envs.market_bench.prompts import ns_words, render_prompt
from quantgym.envs.market_bench.rounds import build_round, load_round, manifest_path, round_hashes

ALL = [(s, r) for s in STRATEGIES for r in range(1, N_ROUNDS + 1)]


def test_stream_seed_formula():
    import hashlib

    text = "market_bench|v1|2|3|book"
    assert stream_seed("pairs", 3, "book") == int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    assert stream_seed("pairs", 3, "book") != stream_seed("pairs", 4, "book")


@pytest.mark.parametrize("strategy,rnd", ALL)
def test_rebuild_matches_shipped_manifest(strategy, rnd):
    # rebuilding from the shipped sources reproduces every input file and the reference outputs
    shipped = json.loads(manifest_path().read_text())["rounds"][f"{strategy}/round_{rnd}"]["files"]
    built = build_round(strategy, rnd)
    assert round_hashes(built) == shipped
    assert builder_checks(built)["ok"]
    loaded = load_round(strategy, rnd)
    assert loaded.metrics == built.metrics


# §9.13 informative figures of the prototype (independent implementation): the reference reproduces them
S1 = {1: (14, 2100, 99_789.00, 215.00), 2: (14, 1381, 49_931.03, 70.875), 3: (14, 1609, 5_037_360.59, 23_559.24),
      4: (14, 1283, 2_008_774.60, 7_264.06), 5: (24, 3228, 3_007_095.84, 16_973.50)}
S2 = {1: (32, 111, 98, 999_594.07), 2: (76, 283, 312, 996_720.10), 3: (19, 65, 59, 999_720.74),
      4: (71, 250, 219, 499_240.655), 5: (39, 153, 250, 1_998_269.90)}
S3 = {1: (13, 10, 3, 999_949.00), 2: (24, 11, 13, 999_830.00), 3: (36, 33, 3, 9_987_061.00),
      4: (91, 80, 11, 19_993_219.00), 5: (45, 37, 8, 19_985_254.00)}


@pytest.mark.parametrize("rnd", range(1, 6))
def test_prototype_figures(rnd):
    m = load_round("scheduled", rnd).metrics
    assert (m["n_fills"], m["unfilled_qty"]) == S1[rnd][:2]
    assert m["final_equity"] == pytest.approx(S1[rnd][2], abs=5e-3)
    assert m["max_drawdown"] == pytest.approx(S1[rnd][3], abs=5e-3)
    m = load_round("pairs", rnd).metrics
    assert (m["n_entries"], m["n_orders"], m["n_fills"]) == S2[rnd][:3]
    assert m["final_equity"] == pytest.approx(S2[rnd][3], abs=5e-3)
    m = load_round("delta_hedge", rnd).metrics
    assert (m["n_hedges_sent"], m["n_hedges_filled"], m["n_hedges_killed"]) == S3[rnd][:3]
    assert m["final_equity"] == pytest.approx(S3[rnd][3], abs=5e-3)


def test_pairs_generator_spec_recurrence_and_labels():
    cfg = PairsBookConfig(n_rows=500)
    a = generate_pairs_book(cfg, np.random.default_rng(11))
    b = generate_pairs_book(cfg, np.random.default_rng(11))
    pd.testing.assert_frame_equal(a, b)  # seeded: identical
    assert set(a["symbol"]) == {"KO", "PEP"}
    assert (np.diff(a["ts_event"]) >= 50_000_000).all() and (np.diff(a["ts_event"]) <= 450_000_000).all()
    assert a["ts_event"].iloc[0] == 1_709_305_200_000_000_000
    spread_ticks = np.rint((a["ask_px_00"] - a["bid_px_00"]) * 100)
    assert spread_ticks.between(1, 3).all()
    # the AR(1) filter equals the explicit recurrence s_j = φ s_{j−1} + σ e_j bit for bit
    e = np.random.default_rng(0).standard_normal(1000)
    s, prev = np.empty(1000), 0.0
    for j in range(1000):
        prev = 0.995 * prev + 0.004 * e[j]
        s[j] = prev
    assert np.array_equal(lfilter([1.0], [1.0, -0.995], 0.004 * e), s)


def test_pairs_round_is_labelled_synthetic():
    r = load_round("pairs", 1)
    assert r.meta["synthetic"] is True and "SYNTHETIC" in r.meta["instrument"]
    prompt = render_prompt("pairs", r.params, r.meta, {"book.csv": "/x/book.csv"}, 120, 3)
    assert "SYNTHETIC DATA" in prompt and "KO" in prompt and "PEP" in prompt


def test_option_delta_random_walk():
    d = generate_option_delta(DeltaSeriesConfig(10, -1500, 300), 1000, 1095, np.random.default_rng(3))
    assert d["ts_event"].tolist() == list(range(1000, 1091, 10))  # t_j <= 1095
    assert d["option_delta"].iloc[0] == -1500  # inc_0 = 0
    assert d["option_delta"].dtype.kind == "i"


def test_generic_synthetic_book_levels_symbols_correlation():
    b = synthetic_book(20_000, levels=10, n_symbols=2, seed=4, rho=0.8, top=3)
    assert [c for c in b.columns if c.startswith("bid_px")] == ["bid_px_00", "bid_px_01", "bid_px_02"]
    assert set(b["symbol"]) == {"SYN0", "SYN1"} and (b["bid_px_00"] < b["ask_px_00"]).all()
    sz = b[[c for c in b.columns if "_sz_" in c]].to_numpy()
    assert sz.min() >= 100 and sz.max() <= 2000 and not (sz % 100).any()
    mids = [(g["bid_px_00"] + g["ask_px_00"]).to_numpy() / 2 for _, g in b.groupby("symbol")]
    # correlated random walks: compare the mids on a common grid (every 200 rows)
    grid = [pd.Series(m) for m in mids]
    x = np.diff(grid[0].iloc[::200].to_numpy()[:40])
    y = np.diff(grid[1].iloc[::200].to_numpy()[:40])
    assert np.corrcoef(x, y)[0, 1] > 0.4


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_prompt_states_every_parameter_and_key(strategy):
    r = load_round(strategy, 2)
    files = {n: f"/tmp/{n}" for n in r.inputs}
    prompt = render_prompt(strategy, r.params, r.meta, files, 120, 3)
    for k in METRIC_KEYS[strategy]:
        assert k in prompt
    for name, v in r.params.items():
        text = ns_words(v) if name.endswith("_ns") else str(v)
        assert text in prompt, (name, text)
    for must in ("key them by integer ticks", "Short selling allowed", "No fees", "run_backtest", "120 s",
                 "pandas, numpy, pathlib, datetime, collections, typing, statistics, math, sys, os, dataclasses"):
        assert must in prompt
    if strategy == "pairs":
        assert "ddof = 0" in prompt
