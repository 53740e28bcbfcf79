"""Build the bundled PortBench data from the maintainers' raw PortBench snapshot (not shipped).

Usage::

    python -m quantgym.envs.portbench.build_data --source RAW/portbench   # RAW: $QUANTGYM_SHARED_DATA
    # optional: --dest quantgym/data/bundled/portbench

Writes (zstd parquet, float64, values exactly as in the source; no fill):

* ``prices.parquet`` -- raw daily prices of the 80 clean-mode tickers (§1.2) and
  ``^VIX`` on the source's mixed calendar (US trading days + crypto days),
  2014-01-01..2025-12-31, index ``date``;
* ``assets.csv`` -- those 81 rows of the source's assets table (ticker, name,
  asset_class, sub_class, price_kind, source repo/path/commit, first/last date);
* ``macro.parquet`` -- the raw FRED series of §1.4 that exist (TEDRATE does not),
  index ``date`` = FRED observation date, FRED native units;
* ``macro_series.csv`` -- their rows of the source's macro table;
* ``PROVENANCE.md`` -- verbatim copy of the source's provenance notes (licence/terms);
* ``provenance.json`` -- build vintage: source path, sha256 of each source file,
  build time, package version, per-file shapes.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import shutil
import sys
from pathlib import Path

import pandas as pd

from quantgym._util import sha256_file, shared_data_dir
from quantgym.envs.portbench.universe import CANONICAL_TICKERS, FRED_IDS, VIX_TICKER

DEFAULT_SOURCE = shared_data_dir() / "portbench"
DEFAULT_DEST = Path(__file__).resolve().parents[2] / "data" / "bundled" / "portbench"
START, END = "2014-01-01", "2025-12-31"
ASSET_COLUMNS = [
    "ticker", "name", "asset_class", "sub_class", "price_kind",
    "source_repo", "source_path", "source_commit", "first_date", "last_date",
]


def build(source: Path = DEFAULT_SOURCE, dest: Path = DEFAULT_DEST) -> dict:
    """Write the bundle from ``source`` into ``dest``; return the provenance dict.

    Raises
    ------
    FileNotFoundError
        If a source file is missing.
    ValueError
        If a clean-mode ticker or ^VIX is missing from the source.
    """
    source, dest = Path(source), Path(dest)
    for f in ("prices.parquet", "assets.csv", "macro.parquet", "macro_series.csv", "PROVENANCE.md"):
        if not (source / f).is_file():
            raise FileNotFoundError(f"{source / f} not found")
    dest.mkdir(parents=True, exist_ok=True)

    prices = pd.read_parquet(source / "prices.parquet")
    keep = list(CANONICAL_TICKERS) + [VIX_TICKER]
    missing = [t for t in keep if t not in prices.columns]
    if missing:
        raise ValueError(f"source lacks clean-mode columns: {missing}")
    px = prices.loc[START:END, keep].astype("float64")
    px = px[px.notna().any(axis=1)]
    px.index = pd.DatetimeIndex(px.index, name="date")
    if px.index.has_duplicates or not px.index.is_monotonic_increasing:
        raise ValueError("source price index has duplicates or is not ascending")
    px.to_parquet(dest / "prices.parquet", compression="zstd", compression_level=19)

    assets = pd.read_csv(source / "assets.csv", dtype=str).set_index("ticker").loc[keep].reset_index()
    assets[ASSET_COLUMNS].to_csv(dest / "assets.csv", index=False)

    macro = pd.read_parquet(source / "macro.parquet")
    ids = [i for i in FRED_IDS if i in macro.columns]
    absent = [i for i in FRED_IDS if i not in macro.columns]
    mac = macro.loc[START:END, ids].astype("float64")
    mac = mac[mac.notna().any(axis=1)]
    mac.index = pd.DatetimeIndex(mac.index, name="date")
    mac.to_parquet(dest / "macro.parquet", compression="zstd", compression_level=19)

    ms = pd.read_csv(source / "macro_series.csv", dtype=str)
    ms[ms["series_id"].isin(ids)].to_csv(dest / "macro_series.csv", index=False)
    shutil.copyfile(source / "PROVENANCE.md", dest / "PROVENANCE.md")

    try:
        from importlib.metadata import version

        qg_version = version("quantgym")
    except Exception:  # pragma: no cover - not installed
        qg_version = "unknown"
    prov = {
        "dataset": "PortBench clean-mode market data (real Yahoo Finance / FRED; see PROVENANCE.md)",
        "source_dir": str(source),
        "source_sha256": {
            f: sha256_file(source / f) for f in ("prices.parquet", "assets.csv", "macro.parquet", "macro_series.csv", "PROVENANCE.md")
        },
        "source_snapshot": "2026-11-29 (PROVENANCE.md: 'Snapshot assembled')",
        "adjustment_vintage": "Yahoo adjusted closes as of 2026-08-03 (source snapshot)",
        "built_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "builder": "python -m quantgym.envs.portbench.build_data",
        "quantgym_version": qg_version,
        "window": [START, END],
        "prices": {"rows": int(px.shape[0]), "columns": list(px.columns), "first": str(px.index[0].date()), "last": str(px.index[-1].date())},
        "macro": {"rows": int(mac.shape[0]), "series": ids, "absent": absent},
        "notes": [
            "Values copied as read from the source (float64); no fill, no interpolation.",
            "Crypto: UTC-day closes on a 7-day calendar; UNI/AAVE are not in the clean universe.",
            "BNB-USD ends 2025-02-19 and MATIC-USD ends 2025-03-18 in the source.",
            "TEDRATE (discontinued 2022) is not available: the ted_spread macro key is NaN.",
            "Prices are Yahoo data: research/benchmark use only, see PROVENANCE.md 'Licence / terms'.",
        ],
    }
    (dest / "provenance.json").write_text(json.dumps(prov, indent=2) + "\n", encoding="utf-8")
    return prov


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Build quantgym's bundled PortBench data from the raw PortBench snapshot.")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="source directory (PROVENANCE.md schema)")
    ap.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="output directory (package data)")
    args = ap.parse_args(argv)
    prov = build(args.source, args.dest)
    sizes = {p.name: p.stat().st_size for p in sorted(Path(args.dest).iterdir()) if p.is_file()}
    for name, size in sizes.items():
        print(f"{name:22s} {size / 1024:9.1f} KiB")
    print(f"total {sum(sizes.values()) / 1024 / 1024:.2f} MiB; prices {prov['prices']['rows']} rows, macro {prov['macro']['series']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
