"""Row arrays computed in batches (market.MarketView._fill_rows, correlation.obs_corr_rows) hold the bits of the
per-row path, and the byte-bounded cache (market.RowArrays) keeps the first rows of a pass longer than its
budget, counts a block shared by the rows of a batch once, and never lets a view of its arrays be written."""

from __future__ import annotations

import copy

import sys
from pathlib import Path

import numpy as np
import pytest

from quantgym.envs.portbench import market
from quantgym.envs.portbench.config import PortBenchConfig
from quantgym.envs.portbench.correlation import corr_and_obs, obs_corr_rows
from quantgym.envs.portbench.data import load_portbench_data
from quantgym.envs.portbench.market import MarketView, RowArrays
from quantgym.envs.portbench.optimize import single_thread_blas

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_portbench_scaling import synthetic_data  # noqa: E402
from test_pb_cold_cost import _window  # noqa: E402

NAMES = ("returns", "obs_returns", "obs_mask", "obs_corr")


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("cells", [False, True], ids=["patterns", "cells"])
@pytest.mark.parametrize("shape", [(60, 8), (60, 80), (25, 48), (60, 201), (37, 256)], ids=lambda s: f"L{s[0]}xN{s[1]}")
def test_batched_observation_form_is_the_per_window_one(shape, cells):
    """Windows of different lengths in one batch; with scattered missing cells (more patterns than the
    pattern sums take) a window is left to corr_and_obs (todo)."""
    xs = [_window(shape[0] - j, shape[1], 7 * j, cells) for j in range(3)]
    n_rows = np.array([x.shape[0] for x in xs], np.int64)
    win = np.full((3, shape[0], shape[1]), np.nan)
    for j, x in enumerate(xs):
        win[j, : x.shape[0]] = x
    z = np.where(np.isfinite(win), win, 0.0)
    with single_thread_blas():
        obs, todo = obs_corr_rows(win, z, n_rows)
        for j, x in enumerate(xs):
            if not todo[j]:
                assert _same(obs[j], corr_and_obs(x, corr=False)[1]), j
    assert todo.all() == (cells and shape[1] > 16)


@pytest.mark.parametrize("as_of", ["close", "previous_close"])
@pytest.mark.parametrize("source", ["bundled", "synthetic"])
def test_batched_row_arrays_are_the_per_row_bits(as_of, source):
    """A pass over consecutive rows (batches) and row by row (the per-row path) give the same arrays."""
    config = PortBenchConfig(as_of=as_of)
    # a new data object per view: the bundled loader returns one cached object, and the per-dataset caches are
    # keyed on the object, so two views over it would share (and compare) the same row arrays
    data = (lambda: copy.copy(load_portbench_data())) if source == "bundled" else lambda: synthetic_data(40, seed=5)
    batched, per_row = MarketView(data(), config), MarketView(data(), config)
    per_row._fill_rows = lambda t, with_corr: False
    n_dates = batched.returns.shape[0]
    rows = [*range(1, 40), *range(n_dates - 30, n_dates), *range(500, 520)]
    for t in rows:
        for name in NAMES:
            got, want = batched.row_array(t, name), per_row.row_array(t, name)
            assert _same(got, want), (t, name)
            assert not got.flags.writeable
    assert len(batched._arrays._owners) < len(rows)  # the rows of a batch share a block


def test_views_of_cached_rows_cannot_be_made_writeable():
    view = MarketView(synthetic_data(24, seed=1), PortBenchConfig())
    for t in range(1, 12):
        for name in NAMES:
            v = view.row_array(t, name).view()
            with pytest.raises(ValueError):
                v[...] = 0
            with pytest.raises(ValueError):
                v.flags.writeable = True


def test_a_pass_longer_than_the_budget_keeps_its_first_rows():
    """Least-recently-used order would replace every row in turn, and a second pass would find none."""
    row = np.zeros(1000)
    cache = RowArrays(10 * row.nbytes)
    for _ in range(2):  # two passes: the first ten rows are kept, each other row until the next one comes
        for t in range(100):
            if cache.get(t) is None:
                cache.put(t, "a", row.copy())
            assert cache.get(t) is not None and cache.nbytes <= cache.max_bytes
        assert list(cache.rows) == list(range(10)) and list(cache.transient) == [99]


def test_rows_of_a_block_count_once_and_past_the_budget_a_batch_is_transient(monkeypatch):
    monkeypatch.setattr(market, "ROW_BLOCK_BYTES", 4 * 1600)
    cache = RowArrays(8 * 6400)
    (fill, ro), = cache.carve([((2, 100), np.float64)])
    fill[...] = 1.0
    cache.put_rows({0: {"x": ro[0]}, 1: {"x": ro[1]}})
    assert cache.nbytes == cache._block.nbytes == 6400  # two rows, one block
    cache.max_bytes = 6400
    (fill, ro), = cache.carve([((2, 400), np.float64)])  # no room left in the block, none for another: alone
    assert not np.shares_memory(fill, cache._block)
    cache.put_rows({2: {"x": ro[0]}, 3: {"x": ro[1]}})
    assert list(cache.rows) == [0, 1] and list(cache.transient) == [2, 3] and cache.nbytes == 6400
    for t in range(4):
        v = cache.get(t)["x"].view()
        with pytest.raises(ValueError):
            v.flags.writeable = True
