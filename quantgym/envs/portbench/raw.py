"""PortBench raw tables: the bundled data directory and the documented schema (``docs/data.md``).

A data directory holds ``prices.parquet`` (wide, index ``date``, one column per ticker,
crypto weekend rows allowed), ``assets.csv`` (``ticker``, ``asset_class``), optional
``macro.parquet`` (wide, FRED ids on observation dates) and optional ``provenance.json``.
:func:`load_portbench_raw` returns them before any clean-mode rule; the clean-mode
panel is built by :mod:`quantgym.envs.portbench.data`.
"""

from __future__ import annotations

import importlib.resources
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from quantgym.envs.portbench.universe import to_class_label

__all__ = ["bundled_portbench_path", "load_portbench_raw"]

_BUNDLE_PACKAGE = "quantgym.data"
_BUNDLE_SUBDIR = ("bundled", "portbench")


def bundled_portbench_path():
    """The bundled data directory as an :mod:`importlib.resources` Traversable."""
    res = importlib.resources.files(_BUNDLE_PACKAGE)
    for part in _BUNDLE_SUBDIR:
        res = res / part
    return res


def read_source(root) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None, dict]:
    """Read prices / assets / optional macro / optional provenance from a dir or Traversable."""
    prices_f = root / "prices.parquet"
    assets_f = root / "assets.csv"
    if not prices_f.is_file() or not assets_f.is_file():
        raise FileNotFoundError(
            f"{root}: expected prices.parquet and assets.csv (schema in docs/data.md)"
        )
    with prices_f.open("rb") as fh:
        prices = pd.read_parquet(fh)
    with assets_f.open("rb") as fh:
        assets = pd.read_csv(fh, dtype=str)
    for col in ("ticker", "asset_class"):
        if col not in assets.columns:
            raise ValueError(f"{assets_f}: missing required column {col!r}")
    macro = None
    macro_f = root / "macro.parquet"
    if macro_f.is_file():
        with macro_f.open("rb") as fh:
            macro = pd.read_parquet(fh)
    prov: dict = {}
    prov_f = root / "provenance.json"
    if prov_f.is_file():
        prov = json.loads(prov_f.read_text(encoding="utf-8"))
    if "date" in prices.columns:
        prices = prices.set_index("date")
    if macro is not None and "date" in macro.columns:
        macro = macro.set_index("date")
    return prices, assets, macro, prov


def load_portbench_raw(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The raw tables behind :func:`load_portbench_data`, before any clean-mode rule.

    For paper mode (own calendars per class, §1.3) and for inspection. Not cached;
    returns fresh, writable copies.

    Parameters
    ----------
    path : str or os.PathLike, optional
        None -> bundled data; else a directory in the documented schema.

    Returns
    -------
    dict
        ``prices``: wide raw price table on the mixed calendar (crypto weekend rows
        included), index ``date``; ``assets``: the assets table (str columns) with an
        extra ``class_label`` column holding the §1.1 label; ``macro``: wide raw FRED
        table on observation dates, or None; ``provenance``: dict.
    """
    if path is None:
        root = bundled_portbench_path()
    else:
        root = Path(path).expanduser().resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"PortBench data directory not found: {root}")
    prices, assets, macro, prov = read_source(root)
    assets = assets.copy()
    assets["class_label"] = [to_class_label(c) for c in assets["asset_class"]]
    return {"prices": prices, "assets": assets, "macro": macro, "provenance": prov}
