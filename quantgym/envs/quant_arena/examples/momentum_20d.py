"""20-day momentum (Quant-Arena classical submission, spec §10.15).

score = adj_close_t / adj_close_{t-20} - 1; NaN where suspended on t or without history.
"""
import numpy as np
import pandas as pd

FEATURES = ["mom_20d"]


def compute_features(view):
    px = view.history("adj_close", 21)
    susp = view.history("suspended", 1).iloc[-1]
    if len(px) < 21:
        return {"mom_20d": pd.Series(np.nan, index=view.symbols)}
    mom = px.iloc[-1] / px.iloc[0] - 1.0
    mom[susp == 1.0] = np.nan
    return {"mom_20d": mom}


def score(features, view):
    return features["mom_20d"]
