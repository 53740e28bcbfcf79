"""Low volatility (Quant-Arena classical submission, spec §10.15).

score = -std(ddof 1) of the last 20 daily log returns of adj_close; NaN where
suspended on t or without 20 returns.
"""
import numpy as np
import pandas as pd

FEATURES = ["vol_20d"]


def compute_features(view):
    px = view.history("adj_close", 21)
    susp = view.history("suspended", 1).iloc[-1]
    if len(px) < 21:
        return {"vol_20d": pd.Series(np.nan, index=view.symbols)}
    lr = np.log(px).diff().iloc[1:]
    vol = lr.std(ddof=1, skipna=False)
    vol[susp == 1.0] = np.nan
    return {"vol_20d": vol}


def score(features, view):
    return -features["vol_20d"]
