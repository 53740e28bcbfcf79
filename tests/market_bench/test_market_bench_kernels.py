"""The compiled pairs and delta-hedge loops equal the readable references bit for bit.

``backtest_pairs_compiled`` and ``backtest_delta_hedge_compiled`` (BACKTESTERS["pairs"] and
BACKTESTERS["delta_hedge"], which compute the stored reference outputs) must return exactly the
readable ``backtest_pairs``'s and ``backtest_delta_hedge``'s dicts (every metric and every
equity-curve point, compared with ``==``) on the shipped rounds, on seeded books over a grid of
parameters, compiled and with the kernels' own source interpreted (``QUANTGYM_JIT=0``'s path), with
dense and compact level keys; the compiled rolling mean and std equal pandas' bit for bit.
"""

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.market_bench import kernels as K
from quantgym.envs.market_bench.book import BookData
from quantgym.envs.market_bench.config import METRIC_KEYS, PairsBookConfig
from quantgym.envs.market_bench.data import generate_option_delta, generate_pairs_book, synthetic_book
from quantgym.envs.market_bench.references import (BACKTESTERS, backtest_delta_hedge, backtest_delta_hedge_compiled,
                                                   backtest_pairs, backtest_pairs_compiled)
from quantgym.envs.market_bench.rounds import load_round

from .market_bench_vectors import V2_BOOK, V2_PARAMS, V4_BOOK, V4_PARAMS

ROUND1 = dict(beta=0.375, window=200, z_in=2.0, z_out=0.5, cooldown_ns=30_000_000_000, k=1.0,
              delay_ns=120_000_000, alloc=0.1, c0=1e6)


def _same(book, params):
    """Both implementations on ``book``; asserts identical dicts and entry-size traces; returns the result."""
    t1, t2 = [], []
    ref = backtest_pairs(book, **params, trace=t1)
    got = backtest_pairs_compiled(book, **params, trace=t2)
    assert list(got) == list(ref)
    diff = [k for k in ref if got[k] != ref[k] or type(got[k]) is not type(ref[k])]
    assert not diff, {k: (ref[k], got[k]) for k in diff if k != "equity_curve"} or diff
    assert t2 == t1
    return got


@pytest.fixture(scope="module")
def pairs_book():
    return BookData(generate_pairs_book(PairsBookConfig(n_rows=60_000), np.random.default_rng(2)))


def test_backtesters_use_the_compiled_pairs_loop():
    assert BACKTESTERS["pairs"] is backtest_pairs_compiled


def test_hand_worked_vectors():
    _same(V2_BOOK, V2_PARAMS)
    _same(V4_BOOK, V4_PARAMS)


@pytest.mark.parametrize("round_", range(1, 6))
@pytest.mark.parametrize("task_set", ["v1", "v2"])
def test_shipped_rounds(task_set, round_):
    # v2 rebuilds its pairs inputs from the A-share extract the package ships: every round loads
    rnd = load_round("pairs", round_, task_set=task_set)
    got = _same(BookData(rnd.inputs["book.csv"]), rnd.params)
    assert {k: got[k] for k in METRIC_KEYS["pairs"]} == {k: rnd.reference[k] for k in METRIC_KEYS["pairs"]}


@pytest.mark.parametrize("over", [
    {},
    {"delay_ns": 0},  # matching can land on the decision row's timestamp
    {"delay_ns": 10**15},  # orders never match: pending to the end
    {"cooldown_ns": 0, "z_in": 1.0, "z_out": 0.8},
    {"window": 2, "z_in": 0.5, "z_out": 0.4, "k": -0.5},
    {"k": 3.0, "alloc": 0.9, "beta": 1.3},
    {"alloc": 1e-9},  # entry size 0: the decision is skipped
    {"c0": 1e9, "alloc": 1.0, "k": 5.0},  # large orders exhaust levels (consumption never decays)
])
def test_parameter_grid(pairs_book, over):
    r = _same(pairs_book, {**ROUND1, **over})
    if not over:
        assert r["n_fills"] > 100 and r["n_exits"] > 10


def test_equal_timestamps_and_other_symbols():
    """Rows of both legs on one timestamp, and a third symbol between them (its rows are no leg's)."""
    df = synthetic_book(20_000, levels=3, n_symbols=3, seed=5, dt_ms=(0, 2))
    assert (np.diff(df["ts_event"].to_numpy()) == 0).any()
    syms = list(pd.unique(df["symbol"]))
    params = {**ROUND1, "window": 50, "beta": 1.0, "z_in": 1.5, "cooldown_ns": 0, "delay_ns": 1,
              "symbol_a": syms[0], "symbol_b": syms[2]}
    assert _same(BookData(df), params)["n_orders"] > 0


def test_interpreted_kernels_and_compact_keys(pairs_book, monkeypatch):
    """The kernels' source run as Python (the QUANTGYM_JIT=0 path) and the compact level codes give the same bits."""
    small = BookData(generate_pairs_book(PairsBookConfig(n_rows=8_000), np.random.default_rng(4)))
    params = {**ROUND1, "window": 50, "z_in": 1.5, "cooldown_ns": 1_000_000_000}
    monkeypatch.setattr(K, "_pairs_events", K._pairs_events.py_func)
    monkeypatch.setattr(K, "_book_scan", K._book_scan.py_func)
    for name in ("_widen_tick_range", "_spread_zscore", "_rolling_mean_std", "_var_add"):
        monkeypatch.setattr(K, name, getattr(K, name).py_func)
    assert _same(small, params)["n_fills"] > 0
    monkeypatch.setattr(K, "DENSE_LEVELS_MAX", 0)
    _same(small, params)


def test_compact_keys_compiled(pairs_book, monkeypatch):
    monkeypatch.setattr(K, "DENSE_LEVELS_MAX", 0)
    _same(pairs_book, ROUND1)


def test_unsorted_book_uses_the_readable_reference():
    df = V2_BOOK.iloc[[1, 0, *range(2, len(V2_BOOK))]].reset_index(drop=True)
    assert (np.diff(df["ts_event"].to_numpy()) < 0).any()
    _same(df, V2_PARAMS)


# ---------------------------------------------------------------------- the rolling z-score
def _bits(a):
    return np.asarray(a, dtype=np.float64).view(np.uint64)


@pytest.mark.parametrize("seed", range(6))
def test_rolling_mean_std_equal_pandas(seed):
    """Random walks, repeated values (pandas' all-equal corrections), NaN/inf gaps and spikes that make
    pandas recompute a window: the same bits as ``Series.rolling(w, min_periods=w)`` mean and std(ddof=0)."""
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n, w = int(rng.integers(1, 300)), int(rng.integers(1, 40))
        v = np.cumsum(rng.standard_normal(n)) * 10.0 ** int(rng.integers(-3, 4))
        kind = int(rng.integers(0, 4))
        if kind == 1:
            v = np.repeat(rng.integers(-2, 3, n // 4 + 1).astype(float), 4)[:n]
        elif kind == 2:
            v[rng.random(n) < 0.1] = rng.choice([np.nan, np.inf, -np.inf])
        elif kind == 3:
            v[rng.random(n) < 0.05] = 1e12
        roll = pd.Series(v).rolling(w, min_periods=w)
        mu, sd = K._rolling_mean_std(v, w)
        assert (_bits(mu) == _bits(roll.mean().to_numpy())).all()
        assert (_bits(sd) == _bits(roll.std(ddof=0).to_numpy())).all()


# ---------------------------------------------------------------------- delta hedge
DH = dict(c0=1e7, fraction=0.5, lot=100, k=1.0)


def _same_dh(book, od, params):
    ref = backtest_delta_hedge(book, od, **params)
    got = backtest_delta_hedge_compiled(book, od, **params)
    assert list(got) == list(ref)
    diff = [k for k in ref if got[k] != ref[k] or type(got[k]) is not type(ref[k])]
    assert not diff, {k: (ref[k], got[k]) for k in diff if k != "equity_curve"} or diff
    return got


def _dh_case(n, seed, levels=3, grid=100, d0=-1500, sigma=300.0):
    bk = BookData(synthetic_book(n, levels=levels, seed=seed))
    step = int((bk.ts[-1] - bk.ts[0]) // max(n // grid, 1))
    od = generate_option_delta(type("C", (), {"step_ns": step, "d0": d0, "sigma": sigma})(), int(bk.ts[0]),
                               int(bk.ts[-1]), np.random.default_rng(seed))
    return bk, od, step


def test_backtesters_use_the_compiled_delta_hedge_loop():
    assert BACKTESTERS["delta_hedge"] is backtest_delta_hedge_compiled


@pytest.mark.parametrize("round_", range(1, 6))
@pytest.mark.parametrize("task_set", ["v1", "v2"])
def test_shipped_delta_hedge_rounds(task_set, round_):
    rnd = load_round("delta_hedge", round_, task_set=task_set)
    od = rnd.inputs["option_delta.csv"]
    got = _same_dh(BookData(rnd.inputs["book.csv"]), od if isinstance(od, pd.DataFrame) else pd.read_csv(od),
                   rnd.params)
    assert {k: got[k] for k in METRIC_KEYS["delta_hedge"]} == {k: rnd.reference[k] for k in METRIC_KEYS["delta_hedge"]}


@pytest.mark.parametrize("over", [
    {},
    {"delay_ns": 0, "min_gap_ns": 0},
    {"delay_ns": 10**15},  # the first hedge never matches: in flight to the end
    {"fraction": 1.0, "lot": 1, "k": 0.0},  # tight limits: FOK kills
    {"fraction": 0.1, "lot": 10, "k": 3.0, "c0": 1e4},
    {"k": -0.5},
])
@pytest.mark.parametrize("seed", [1, 2])
def test_delta_hedge_parameter_grid(over, seed):
    bk, od, step = _dh_case(30_000, seed)
    p = dict(DH, interval_ns=step, delay_ns=max(step // 5, 1), min_gap_ns=2 * step)
    r = _same_dh(bk, od, {**p, **over})
    if not over:
        assert r["n_hedges_filled"] > 10 and r["n_hedges_killed"] >= 0


def test_delta_hedge_interpreted_and_compact_keys(monkeypatch):
    bk, od, step = _dh_case(6_000, 3, levels=2, grid=50)
    p = dict(DH, interval_ns=step, delay_ns=step // 3, min_gap_ns=step)
    monkeypatch.setattr(K, "_delta_hedge_events", K._delta_hedge_events.py_func)
    monkeypatch.setattr(K, "_tick_range", K._tick_range.py_func)
    monkeypatch.setattr(K, "_widen_tick_range", K._widen_tick_range.py_func)
    assert _same_dh(bk, od, p)["n_fills"] > 0
    monkeypatch.setattr(K, "DENSE_LEVELS_MAX", 0)
    _same_dh(bk, od, p)


def test_delta_hedge_other_parameter_types_use_the_readable_reference():
    bk, od, step = _dh_case(5_000, 4)
    p = dict(DH, interval_ns=step, delay_ns=step // 2, min_gap_ns=step)
    _same_dh(bk, od, {**p, "lot": 100.0})
    _same_dh(bk, od, {**p, "fraction": 1})
