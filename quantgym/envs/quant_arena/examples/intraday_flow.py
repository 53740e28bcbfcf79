"""Low volatility sharpened by Level-2 data where the view has it (example submission).

Daily (every stock, every date): vol_20d = std(ddof 1) of the last 20 daily log returns of
adj_close, as the low-volatility example (spec §10.15).

Intraday (only the stock-days ``view.intraday`` serves on the decision date; KeyError
elsewhere, then these features are NaN):
- rv_intraday: realised volatility of the mid, std of 1-minute log changes of
  (bid_px_00 + ask_px_00) / 2 in continuous trading (09:30-11:30, 13:00-14:57 local) times
  sqrt(240), i.e. on the daily scale of vol_20d even when a file covers part of the day
  (needs >= 20 one-minute returns);
- ofi: order-flow imbalance of the trades in continuous trading,
  (buyer-initiated - seller-initiated shares) / all of them, in [-1, 1].

score = -vol, with vol = vol_20d, or sqrt((vol_20d^2 + rv_intraday^2) / 2) where the
intraday estimate exists, times (1 - 0.25 * ofi) where ofi exists (buying pressure lowers
the volatility penalty by at most a quarter). On days without intraday data the score is
exactly the low-volatility score.
"""
import numpy as np
import pandas as pd

FEATURES = ["vol_20d", "rv_intraday", "ofi"]

_NS_MIN = 60 * 1_000_000_000
_LOCAL = 8 * 60 * _NS_MIN  # Asia/Shanghai = UTC+8, no DST
_SESSIONS = ((9 * 60 + 30, 11 * 60 + 30), (13 * 60, 14 * 60 + 57))  # minutes after midnight


def _continuous(view, name):
    """The date's table in continuous trading, with its local minute of the day; None if absent."""
    try:
        t = view.intraday(name)
    except KeyError:  # no such table on this date
        return None
    m = ((t["ts_event"].to_numpy(np.int64) + _LOCAL) // _NS_MIN) % (24 * 60)
    cont = np.zeros(len(m), dtype=bool)
    for a, b in _SESSIONS:
        cont |= (m >= a) & (m < b)
    t = t[cont].copy()
    t["minute"] = m[cont]
    return t


def _realised_vol(snaps, symbols):
    out = pd.Series(np.nan, index=symbols)
    if snaps is None:
        return out
    mid = (snaps["bid_px_00"].to_numpy(float) + snaps["ask_px_00"].to_numpy(float)) / 2.0
    ok = np.isfinite(mid) & (mid > 0)
    df = pd.DataFrame({"symbol": snaps["symbol"].to_numpy()[ok], "minute": snaps["minute"].to_numpy()[ok],
                       "lm": np.log(mid[ok])})
    last = df.groupby(["symbol", "minute"], sort=True)["lm"].last()
    for sym, s in last.groupby(level=0):
        r = np.diff(s.to_numpy())
        if sym in out.index and len(r) >= 20:
            out[sym] = float(np.std(r, ddof=1) * np.sqrt(240.0))
    return out


def _order_flow(trades, symbols):
    if trades is None:
        return pd.Series(np.nan, index=symbols)
    qty = trades["qty"].to_numpy(float)
    side = trades["side"].to_numpy()
    signed = np.where(side == "B", qty, np.where(side == "S", -qty, 0.0))
    g = pd.DataFrame({"symbol": trades["symbol"].to_numpy(), "signed": signed, "qty": qty}).groupby("symbol").sum()
    g = g[g["qty"] > 0]
    return (g["signed"] / g["qty"]).reindex(symbols)


def compute_features(view):
    px = view.history("adj_close", 21)
    susp = view.history("suspended", 1).iloc[-1]
    if len(px) < 21:
        vol = pd.Series(np.nan, index=view.symbols)
    else:
        vol = np.log(px).diff().iloc[1:].std(ddof=1, skipna=False)
    vol[susp == 1.0] = np.nan
    return {"vol_20d": vol,
            "rv_intraday": _realised_vol(_continuous(view, "snapshots"), view.symbols),
            "ofi": _order_flow(_continuous(view, "trades"), view.symbols)}


def score(features, view):
    vol = features["vol_20d"]
    rv = features["rv_intraday"].reindex(vol.index)
    ofi = features["ofi"].reindex(vol.index)
    blended = np.sqrt((vol ** 2 + rv ** 2) / 2.0)
    vol = vol.where(rv.isna(), blended)
    vol = vol.where(ofi.isna(), vol * (1.0 - 0.25 * ofi))
    return -vol
