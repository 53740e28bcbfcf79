"""Build the bundled Quant-Arena data from the maintainers' raw ``quant_arena`` panel (``$QUANTGYM_SHARED_DATA``; not shipped).

Writes into ``quantgym/data/bundled/quant_arena/`` (spec quant_arena.md §10.1, §10.10):

- ``daily_default.parquet``: the default 800-stock universe, long format, the
  columns of the source panel minus ``industry`` (moved to ``symbols.csv``).
  Universe chosen with **warm-up (2021) data only**: the stocks flagged
  ``in_csi300`` on any 2021 day, then the others ranked by mean
  ``close*volume`` over their 2021 rows with ``volume > 0`` (at least 120 such
  rows; ties by symbol) until 800 stocks.
- ``symbols.csv``: ``symbol, industry, board, list_date`` for those stocks
  (agent-visible static fields; names are deliberately not copied).
- ``market_reference.csv``: ``date, ret, n`` the equal-weight market reference of
  §10.10 computed from the **full** 5,086-stock panel.

Run: ``python -m quantgym.envs.quant_arena.build_data [--src DIR] [--out DIR]``.
Deterministic: re-running on the same source gives byte-identical CSVs and an
identical parquet table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from quantgym._util import shared_data_dir
from quantgym.envs.quant_arena.data import BUNDLED_DIR, board_of

DEFAULT_SRC = shared_data_dir() / "quant_arena"
DEFAULT_OUT = BUNDLED_DIR
N_UNIVERSE = 800
MIN_WARMUP_ROWS = 120
WARMUP_END = pd.Timestamp("2021-12-31")
PANEL_COLUMNS = ["date", "symbol", "open", "high", "low", "close", "volume", "adj_factor", "suspended", "in_csi300"]


def select_universe(panel: pd.DataFrame, n: int = N_UNIVERSE) -> list[str]:
    """The default universe of §10.1, from 2021 rows only."""
    warm = panel[panel["date"] <= WARMUP_END]
    csi = sorted(warm.loc[warm["in_csi300"], "symbol"].unique())
    traded = warm[warm["volume"] > 0]
    liq = (traded["close"] * traded["volume"]).groupby(traded["symbol"]).agg(["mean", "size"])
    liq = liq[liq["size"] >= MIN_WARMUP_ROWS]
    liq = liq.drop(index=[s for s in csi if s in liq.index])
    liq = liq.reset_index().sort_values(["mean", "symbol"], ascending=[False, True])
    rest = liq["symbol"].tolist()[: max(0, n - len(csi))]
    return sorted(csi + rest)


def market_reference(panel: pd.DataFrame) -> pd.DataFrame:
    """Daily equal-weight reference of §10.10 over every stock of ``panel``.

    ``ret_k`` = mean over stocks tradable on day k (row, volume > 0, not suspended)
    with a row on the previous panel day of ``adj_close_k / adj_close_{k-1} - 1``.
    """
    adj = (panel["close"] * panel["adj_factor"].astype(np.float64)).to_numpy()
    wide = pd.DataFrame({"date": panel["date"], "symbol": panel["symbol"], "adj": adj,
                         "trad": (~panel["suspended"]) & (panel["volume"] > 0)})
    a = wide.pivot(index="date", columns="symbol", values="adj").sort_index()
    tr = wide.pivot(index="date", columns="symbol", values="trad").reindex(a.index).fillna(False).astype(bool)
    r = a / a.shift(1) - 1.0
    ok = tr.to_numpy() & np.isfinite(r.to_numpy())
    rv = np.where(ok, r.to_numpy(), 0.0)
    n = ok.sum(axis=1)
    ret = np.where(n > 0, rv.sum(axis=1) / np.maximum(n, 1), 0.0)
    out = pd.DataFrame({"date": pd.to_datetime(a.index).strftime("%Y-%m-%d"), "ret": ret, "n": n})
    return out.iloc[1:].reset_index(drop=True)  # no return on the panel's first day


def build(src: Path = DEFAULT_SRC, out: Path = DEFAULT_OUT) -> dict:
    """Build the three bundled files; return a small summary dict."""
    src, out = Path(src), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    panel = pq.read_table(src / "daily.parquet", columns=PANEL_COLUMNS).to_pandas()
    panel["date"] = pd.to_datetime(panel["date"])
    ref = market_reference(panel)
    ref.to_csv(out / "market_reference.csv", index=False, float_format="%.10g")
    uni = select_universe(panel)
    sub = panel[panel["symbol"].isin(uni)].sort_values(["symbol", "date"]).reset_index(drop=True)
    sub["date"] = sub["date"].dt.date
    table = pa.Table.from_pandas(sub[PANEL_COLUMNS], preserve_index=False)
    pq.write_table(table, out / "daily_default.parquet", compression="zstd", compression_level=19)
    sym = pd.read_csv(src / "symbols.csv", dtype={"list_date": str, "code": str})
    sym = sym[sym["symbol"].isin(uni)].sort_values("symbol")
    info = pd.DataFrame({
        "symbol": sym["symbol"],
        "industry": sym["industry"],
        "board": [board_of(s) for s in sym["symbol"]],
        "list_date": pd.to_datetime(sym["list_date"], format="%Y%m%d", errors="coerce").dt.strftime("%Y-%m-%d"),
    })
    info.to_csv(out / "symbols.csv", index=False)
    # provenance and terms ship with the data (verbatim), so a user of the wheel has them
    import shutil

    shutil.copyfile(src / "PROVENANCE.md", out / "PROVENANCE.md")
    return {"n_symbols": len(uni), "n_rows": len(sub), "n_csi300_2021": int(
        panel.loc[(panel["date"] <= WARMUP_END) & panel["in_csi300"], "symbol"].nunique()),
        "parquet_bytes": (out / "daily_default.parquet").stat().st_size}


def main() -> None:  # pragma: no cover - CLI
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    print(build(args.src, args.out))


if __name__ == "__main__":  # pragma: no cover
    main()
