"""Market timing + low volatility (Quant-Arena classical submission, spec §10.15).

The low-volatility score when the medians (over the finite values in view.symbols)
of the 5-day and the 20-day log returns of adj_close are both > 0; else all NaN
(hold cash).
"""
import numpy as np
import pandas as pd

FEATURES = ["vol_20d", "ret_5d", "ret_20d"]


def compute_features(view):
    px = view.history("adj_close", 21)
    susp = view.history("suspended", 1).iloc[-1]
    nan = pd.Series(np.nan, index=view.symbols)
    if len(px) < 21:
        return {"vol_20d": nan, "ret_5d": nan, "ret_20d": nan}
    lr = np.log(px).diff().iloc[1:]
    vol = lr.std(ddof=1, skipna=False)
    vol[susp == 1.0] = np.nan
    ret5 = np.log(px.iloc[-1] / px.iloc[-6])
    ret20 = np.log(px.iloc[-1] / px.iloc[0])
    return {"vol_20d": vol, "ret_5d": ret5, "ret_20d": ret20}


def score(features, view):
    up5 = features["ret_5d"].median(skipna=True) > 0
    up20 = features["ret_20d"].median(skipna=True) > 0
    if up5 and up20:
        return -features["vol_20d"]
    return pd.Series(np.nan, index=view.symbols)
