"""The table look-up formatting of the correlation block gives the same prompt text as the scalar
formatter (issue #19 item 4 is a speed-only change: every prompt must stay identical)."""

from __future__ import annotations

import numpy as np
import pytest

from quantgym.envs.portbench.prompts import _num, _nums, correlation_block


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
