"""Fixtures of the Quant-Arena tests: tiny hand-made panels and a small real slice."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.quant_arena.data import BUNDLED_DIR, ArenaDataset, load_dataset


def make_panel(rows: list[dict], info: dict | None = None, reference=None) -> ArenaDataset:
    """Build a dataset from a list of row dicts (defaults: volume 1e6, factor 1, not suspended).

    Each row needs ``date, symbol, open, close``; ``high``/``low`` default to max/min of open/close.
    """
    recs = []
    for r in rows:
        r = dict(r)
        r.setdefault("high", max(r["open"], r["close"]))
        r.setdefault("low", min(r["open"], r["close"]))
        r.setdefault("volume", 1_000_000)
        r.setdefault("adj_factor", 1.0)
        r.setdefault("suspended", False)
        r.setdefault("in_csi300", False)
        recs.append(r)
    df = pd.DataFrame(recs)
    inf = None
    if info is not None:
        inf = pd.DataFrame([{"symbol": s, **v} for s, v in info.items()])
    return ArenaDataset.from_frame(df, info=inf, reference=reference, name="tiny")


def flat_rows(symbols, dates, price=10.0, **kw) -> list[dict]:
    """Rows with a constant price for every (symbol, date)."""
    return [{"date": d, "symbol": s, "open": price, "close": price, **kw} for d in dates for s in symbols]


@pytest.fixture(scope="session")
def bundled():
    """The bundled default dataset (cached)."""
    return load_dataset()


@pytest.fixture(scope="session")
def small_real(bundled):
    """A small slice of the real bundled panel: 40 stocks, 2023-09-01 .. 2024-02-29.

    Windows used with it: research 2023-11-01 .. 2023-12-31, sealed 2024-01-01 .. 2024-02-29.
    """
    df = pd.read_parquet(BUNDLED_DIR / "daily_default.parquet")
    syms = sorted(df["symbol"].unique())[:: 20][:40]
    df = df[df["symbol"].isin(syms) & (df["date"] >= pd.Timestamp("2023-09-01").date())
            & (df["date"] <= pd.Timestamp("2024-02-29").date())]
    return ArenaDataset.from_frame(df.reset_index(drop=True), info=bundled.info.reset_index(), name="small-real")


SMALL_WINDOWS = dict(research_start="2023-11-01", research_end="2023-12-31", sealed_start="2024-01-01",
                     sealed_end="2024-02-29", warmup_start="2023-09-01")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
