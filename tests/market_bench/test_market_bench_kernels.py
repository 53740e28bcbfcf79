"""The compiled pairs loop equals the readable pairs reference bit for bit.

``backtest_pairs_compiled`` (BACKTESTERS["pairs"], which computes the stored reference outputs)
must return exactly ``backtest_pairs``'s dict (every metric and every equity-curve point, compared
with ``==``) on the shipped rounds, on seeded books over a grid of parameters, compiled and with
the kernels' own source interpreted (``QUANTGYM_JIT=0``'s path), with dense and compact level keys.
"""

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.market_bench import kernels as K
from quantgym.envs.market_bench.book import BookData
from quantgym.envs.market_bench.config import METRIC_KEYS, PairsBookConfig
from quantgym.envs.market_bench.data import generate_pairs_book, synthetic_book
from quantgym.envs.market_bench.references import BACKTESTERS, backtest_pairs, backtest_pairs_compiled
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
