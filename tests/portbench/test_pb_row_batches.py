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


def test_past_the_budget_a_batch_reuses_a_buffer_nothing_references_any_more(monkeypatch):
    """A transient batch is carved from the buffer of an earlier one once no array over that buffer is left (the
    cache dropped it, and no observation holds a view of it): no fresh pages per batch, and never memory that a
    view handed out still shows; a stored batch's views cannot be made writeable."""
    import weakref

    monkeypatch.setattr(market, "ROW_BLOCK_BYTES", 4 * 1600)
    cache = RowArrays(6400)
    cache.put_rows({0: {"x": np.zeros(800)}})  # the budget is full: every batch below is transient
    held, buffers = [], []
    for t in range(1, 9):
        (fill, ro), = cache.carve([((2, 100), np.float64)])
        assert not any(np.shares_memory(fill, v) for v in held)
        fill[...] = t
        buffers.append(weakref.ref(fill.base))  # the buffer, not kept alive here
        cache.put_rows({t: {"x": ro[0]}})
        if t <= 3:
            held.append(cache.get(t)["x"].view())  # a caller keeps these three (each a view of its batch)
        del fill, ro
    with pytest.raises(ValueError):
        held[0].flags.writeable = True
    assert len(cache._spares) <= market.ROW_SPARES
    alive = [b() for b in buffers]
    assert len({id(b) for b in alive[:3]}) == 3  # held: never reused
    assert any(alive[k] is alive[j] for k in range(3, 8) for j in range(k + 1, 8))  # the others are
    assert [float(v[0]) for v in held] == [1.0, 2.0, 3.0]


def test_observations_kept_through_a_wide_pass_past_the_budget_keep_their_values(monkeypatch):
    """A wide universe (rolled correlation) whose rows do not fit the budget: every batch is transient and carved
    from a reused buffer; a caller who keeps every observation still has each one's own values."""
    from quantgym.envs.portbench.correlation_rolling import ROLLING_MIN_N

    monkeypatch.setattr(market, "ROW_CACHE_BYTES", 2**20)
    data = synthetic_data(ROLLING_MIN_N, seed=5)
    view = MarketView(data, PortBenchConfig())
    rows = list(range(700, 730))
    kept = {t: view.row_array(t, "obs_corr").view() for t in rows}  # views, as an observation holds them
    dropped = [view.row_array(t, "obs_corr").copy() for t in range(730, 740)]  # values only: buffers reused
    assert view._arrays._spares and len(view._arrays._spares) <= market.ROW_SPARES
    fresh = MarketView(synthetic_data(ROLLING_MIN_N, seed=5), PortBenchConfig())
    for t in rows:
        assert _same(kept[t], fresh.row_array(t, "obs_corr")), t
    assert all(_same(v, fresh.row_array(t, "obs_corr")) for t, v in zip(range(730, 740), dropped))


@pytest.mark.parametrize("keep_last", [False, True], ids=["drops", "keeps-last"])
def test_a_pass_past_the_budget_writes_its_observations_into_one_or_two_buffers(monkeypatch, keep_last):
    """Past the row cache's budget nothing but the caller holds a date's arrays once the next date is computed
    (the cache drops its transient batch, the env its last row entries first): a caller who drops each
    observation before the next step gets every date's correlation in one buffer (the one still in cache), a
    caller who keeps the last one through the step in two; the first pass and the next alike."""
    from quantgym.envs.portbench.correlation_rolling import ROLLING_MIN_N
    from quantgym.envs.portbench.env import PortBenchEnv

    monkeypatch.setattr(market, "ROW_CACHE_BYTES", 2**20)
    n = ROLLING_MIN_N
    env = PortBenchEnv(period={"start": "2019-01-01", "end": "2019-12-31", "freq": "daily"}, scoring=False,
                       data=synthetic_data(n, seed=6))
    action = {"views": np.zeros(n), "signals": np.ones(n, np.int64), "weights": np.full(n, 1.0 / n), "status": 0}
    for _ in range(2):
        env.reset(seed=0)
        buffers, last = [], None
        for _ in range(60):
            obs = env.step(action)[0]
            buffers.append(obs["corr"].__array_interface__["data"][0])
            last = obs if keep_last else None
            del obs
        assert len(set(buffers[5:])) == (2 if keep_last else 1), buffers
        del last
