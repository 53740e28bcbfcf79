"""5-day reversal (Quant-Arena classical submission, spec §10.15).

score = -(adj_close_t / adj_close_{t-5} - 1); NaN where suspended on t or without history.
"""
import numpy as np
import pandas as pd

FEATURES = ["rev_5d"]


def compute_features(view):
    px = view.history("adj_close", 6)
    susp = view.history("suspended", 1).iloc[-1]
    if len(px) < 6:
        return {"rev_5d": pd.Series(np.nan, index=view.symbols)}
    rev = -(px.iloc[-1] / px.iloc[0] - 1.0)
    rev[susp == 1.0] = np.nan
    return {"rev_5d": rev}


def score(features, view):
    return features["rev_5d"]
