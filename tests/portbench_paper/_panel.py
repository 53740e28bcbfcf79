"""Tiny hand-made SYNTHETIC raw panel (deterministic, no randomness) for the paper-mode data tests."""

import numpy as np
import pandas as pd

TICKERS = ["SPY", "TLT", "BTC-USD", "BIL"]


def _panel() -> dict:
    """Mon 2024-01-08 .. Sun 2024-01-21. SPY/TLT/BIL trade on weekdays except Mon 2024-01-15 (holiday);
    BTC trades every day and jumps +10 % on Saturday 13th and +10 % on Sunday 14th."""
    days = pd.date_range("2024-01-08", "2024-01-21", freq="D")
    wk = [d for d in days if d.day_of_week < 5 and d != pd.Timestamp("2024-01-15")]
    spy = pd.Series(100.0 + np.arange(len(wk)), index=wk)  # 100, 101, ..., 108
    tlt = pd.Series(50.0 * 1.002 ** np.arange(len(wk)), index=wk)
    bil = pd.Series(90.0 + 0.01 * np.arange(len(wk)), index=wk)
    btc = pd.Series(100.0, index=days)
    btc[pd.Timestamp("2024-01-13")] = 110.0
    btc[pd.Timestamp("2024-01-14"):] = 121.0
    prices = pd.DataFrame({"SPY": spy, "TLT": tlt, "BIL": bil, "BTC-USD": btc}).reindex(days)
    prices.index.name = "date"
    assets = pd.DataFrame({"ticker": TICKERS, "asset_class": ["equity", "bond", "crypto", "cash"]})
    return {"prices": prices, "assets": assets, "macro": None, "provenance": {}}
