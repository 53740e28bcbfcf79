"""Rounds: determinism, shipped manifest, generators, prototype figures and prompts (spec §9.3, §9.12-§9.15)."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.signal import lfilter

from quantgym.envs.market_bench.checks import builder_checks
from quantgym.envs.market_bench.config import (METRIC_KEYS, N_ROUNDS, STRATEGIES, TASK_SETS, DeltaSeriesConfig,
                                               PairsBookConfig, stream_seed)
from quantgym.envs.market_bench.data import generate_option_delta, generate_pairs_book, synthetic_book
from quantgym.envs.market_bench.prompts import ns_words, render_prompt
from quantgym.envs.market_bench.rounds import build_round, load_round, manifest_path, round_hashes

ALL = [(ts, s, r) for ts in TASK_SETS for s in STRATEGIES for r in range(1, N_ROUNDS + 1)]


@pytest.mark.parametrize("task_set", TASK_SETS)
def test_stream_seed_formula(task_set):
    import hashlib

    text = f"market_bench|{task_set}|2|3|book"
    assert stream_seed("pairs", 3, "book", task_set) == int.from_bytes(hashlib.sha256(text.encode()).digest()[:8],
                                                                        "little")
    assert stream_seed("pairs", 3, "book", task_set) != stream_seed("pairs", 4, "book", task_set)


@pytest.mark.parametrize("task_set,strategy,rnd", ALL)
def test_rebuild_matches_shipped_manifest(task_set, strategy, rnd):
    # rebuilding from the sources reproduces every input file and the reference outputs (v2 ships no input
    # files: load_round rebuilds them and checks them against the same manifest)
    shipped = json.loads(manifest_path(version=task_set).read_text())["rounds"][f"{strategy}/round_{rnd}"]["files"]
    built = build_round(strategy, rnd, task_set=task_set)
    assert round_hashes(built) == shipped
    assert builder_checks(built)["ok"]
    loaded = load_round(strategy, rnd, task_set=task_set)
    assert loaded.metrics == built.metrics
    assert loaded.meta["task_version"] == task_set
    for name, df in built.inputs.items():
        pd.testing.assert_frame_equal(loaded.inputs[name], df)


@pytest.mark.parametrize("task_set,strategy,rnd", ALL)
def test_reference_outputs_invariants(task_set, strategy, rnd):
    # accounting identities of every shipped reference output (spec §9.7.4, §9.7.6, §9.8.3, §9.10, §9.11)
    r = load_round(strategy, rnd, task_set=task_set)
    ref, p = r.reference, r.params
    assert ref["final_equity"] - p["c0"] == pytest.approx(ref["realized_pnl"] + ref["unrealized_pnl"], abs=1e-6)
    curve = np.asarray(ref["equity_curve"])
    assert len(curve) == len(r.inputs["book.csv"]) + 1 and curve[0] == p["c0"]
    assert curve[-1] == pytest.approx(ref["final_equity"], abs=1e-6)
    assert ref["max_drawdown"] == pytest.approx(float(np.max(np.maximum.accumulate(curve) - curve)), abs=1e-9)
    assert ref["n_fills"] >= 10
    if strategy == "scheduled":
        assert ref["filled_qty"] + ref["unfilled_qty"] == r.inputs["schedule.csv"]["qty"].sum()
    elif strategy == "pairs":
        assert ref["n_entries"] >= 10 and ref["n_exits"] >= ref["n_entries"] - 1
    else:
        assert ref["n_hedges_sent"] == ref["n_hedges_filled"] + ref["n_hedges_killed"]
        assert ref["n_hedges_killed"] >= 2
        assert ref["final_net_delta"] == ref["final_option_delta"] + ref["final_position"]


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


@pytest.mark.parametrize("task_set", TASK_SETS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_prompt_states_every_parameter_and_key(strategy, task_set):
    r = load_round(strategy, 2, task_set=task_set)
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


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("rnd", range(1, N_ROUNDS + 1))
def test_v2_prompt_names_real_data_and_what_was_randomised(strategy, rnd):
    r = load_round(strategy, rnd, task_set="v2")
    files = {n: f"/tmp/{n}" for n in r.inputs}
    for style in ("full", "compact", "minimal"):
        prompt = render_prompt(strategy, r.params, r.meta, files, 120, 3, style)
        assert "REAL DATA" in prompt and "SYNTHETIC DATA" not in prompt
        assert "Randomised: every level size" in prompt and f"{r.meta['n_rows']:,} book rows" in prompt
        for seed in r.meta["seeds"].values():
            assert str(seed) in prompt
        if strategy == "pairs":  # symbols, venue, date, window, source, the equal-timestamp rule
            for must in ("300274.SZ", "300122.SZ", "SZSE", "2022-06-01", r.meta["window_local"][0],
                         r.meta["window_local"][1], "Asia/Shanghai", "vendor not stated", "FILE order"):
                assert must in prompt, must
        else:
            for must in ("MSFT", "NASDAQ", "LOBSTER", "2012-06-21", "New York time", r.meta["window_local"][0]):
                assert must in prompt, must
        if strategy == "delta_hedge":
            assert "Synthetic: option_delta.csv" in prompt


def test_v2_msft_hour_agrees_with_the_v1_excerpt():
    # the v2 book is rebuilt from LOBSTER messages; over the 2.79 s of the real excerpt it must equal v1's
    # cleaned excerpt (692 rows, spec §9.2.5), every price and raw size
    from quantgym.envs.market_bench.data import msft_hour_book, real_book

    v1 = real_book("msft")
    hour = msft_hour_book()
    ts = hour["ts_event"].to_numpy()
    part = hour[(ts >= v1["ts_event"].iloc[0]) & (ts <= v1["ts_event"].iloc[-1])].reset_index(drop=True)
    assert len(v1) == 692 and len(hour) == 105_464
    pd.testing.assert_frame_equal(part, v1, check_dtype=False)


def test_v2_pairs_without_the_a_share_folder_is_a_one_line_error(monkeypatch, tmp_path):
    from quantgym.envs.market_bench import rounds

    monkeypatch.setattr(rounds, "_VERIFIED_INPUTS", {})
    with pytest.raises(FileNotFoundError) as exc:
        load_round("pairs", 1, task_set="v2", data_dir=tmp_path / "absent")
    msg = str(exc.value)
    assert "\n" not in msg and "data_dir=" in msg and "QUANTGYM_A_SHARE_L2" in msg
    with pytest.raises(ValueError, match="unknown Market-Bench task set 'v3'"):
        load_round("pairs", 1, task_set="v3")
