"""Build the paper-mode stock bundle from the maintainers' raw PortBench snapshot (spec §11.1).

The ``89_no_crypto`` paper universe trades 18 large-cap NASDAQ-100 / S&P-500 stocks
(AAPL … TXN) that the clean-mode bundle does not carry. This script copies their raw
adjusted closes (values exactly as in the source, no fill) and their ``assets.csv`` rows
into ``quantgym/data/bundled/portbench_paper``::

    python -m quantgym.envs.portbench.paper.build_data --source RAW/portbench   # RAW: $QUANTGYM_SHARED_DATA
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
from pathlib import Path

import pandas as pd

from quantgym._util import shared_data_dir
from quantgym.envs.portbench.paper.config import PAPER_STOCKS

DEFAULT_SOURCE = shared_data_dir() / "portbench"
DEFAULT_DEST = Path(__file__).resolve().parents[3] / "data" / "bundled" / "portbench_paper"
START, END = "2014-01-01", "2025-12-31"


def build(source: Path = DEFAULT_SOURCE, dest: Path = DEFAULT_DEST) -> dict:
    """Write ``stocks.parquet``, ``stocks_assets.csv`` and ``provenance.json`` into ``dest``.

    Raises
    ------
    FileNotFoundError
        If the source files are missing.
    KeyError
        If one of the 18 stocks has no price column in the source.
    """
    source, dest = Path(source), Path(dest)
    prices = pd.read_parquet(source / "prices.parquet")
    if "date" in prices.columns:
        prices = prices.set_index("date")
    missing = [t for t in PAPER_STOCKS if t not in prices.columns]
    if missing:
        raise KeyError(f"source has no prices for {missing}")
    px = prices.loc[START:END, list(PAPER_STOCKS)].dropna(how="all").astype("float64")
    px.index.name = "date"
    assets = pd.read_csv(source / "assets.csv", dtype=str)
    assets = assets[assets["ticker"].isin(PAPER_STOCKS)]
    dest.mkdir(parents=True, exist_ok=True)
    px.to_parquet(dest / "stocks.parquet", compression="zstd")
    assets.to_csv(dest / "stocks_assets.csv", index=False)
    h = hashlib.sha256((source / "prices.parquet").read_bytes()).hexdigest()
    prov = {"source": str(source), "prices_sha256": h, "tickers": list(PAPER_STOCKS), "shape": list(px.shape),
            "built": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "note": "raw adjusted closes of the 18 large-cap stocks of spec §11.1 (paper universe 89_no_crypto)"}
    (dest / "provenance.json").write_text(json.dumps(prov, indent=2), encoding="utf-8")
    return prov


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    a = ap.parse_args(argv)
    print(json.dumps(build(a.source, a.dest), indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
