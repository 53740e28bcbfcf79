"""Refresh PortBench market data from Yahoo Finance and FRED (online users only).

``refresh_portbench_data(dest_dir)`` downloads the adjusted closes of the 80
clean-mode tickers and ^VIX with :mod:`yfinance` and the §1.4 FRED series from
FRED's public ``fredgraph.csv`` endpoint (:mod:`requests`), and writes them in the
same schema as the bundle (``prices.parquet``, ``assets.csv``, ``macro.parquet``,
``macro_series.csv``, ``provenance.json``) so that
``load_portbench_data(dest_dir)`` reads them.

Guarantees
----------
* Needs the optional extra ``pip install "quantgym[refresh]"`` (yfinance, requests);
  without it, or offline, it raises :class:`RefreshError` at once with a one-line
  message (connectivity is checked first with a short timeout; it never hangs).
* Atomic: everything is written to a temporary sibling directory, validated
  (unique ascending dates, positive prices, |daily return| < 100 % for non-crypto,
  SPY present, the result loads) and only then swapped in; an existing directory
  is never left half-written.
* The vintage (download time, library versions, window, per-series coverage) is
  recorded in ``provenance.json``.

Yahoo's terms restrict its data to personal, non-commercial use; see docs/data.md.
"""

from __future__ import annotations

import csv
import datetime as _dt
import importlib
import io
import json
import os
import shutil
import socket
import tempfile
import threading
import urllib.parse
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from quantgym.envs.portbench.universe import CANONICAL_TICKERS, FRED_IDS, UNIVERSE, VIX_TICKER
from quantgym.envs.portbench.data import PortBenchDataWarning, load_from_root
from quantgym.envs.portbench.raw import bundled_portbench_path

__all__ = ["RefreshError", "refresh_portbench_data", "FRED_CSV_URL", "DEFAULT_START"]

#: FRED's public CSV endpoint (no API key needed).
FRED_CSV_URL = "https://fred.stlouisfed.org/graph/fredgraph.csv"
#: Hosts probed before any download (short timeout).
_PROBE_URLS = ("https://fred.stlouisfed.org/", "https://query1.finance.yahoo.com/")
#: First date of a full refresh (the bundle's window starts here).
DEFAULT_START = "2014-01-01"
#: Data class labels written to assets.csv (the shared schema's labels, §11.8).
_DATA_LABEL = {
    "equities": "equity",
    "bonds": "bond",
    "commodities": "commodity",
    "real_estate": "real_estate",
    "cryptocurrency": "crypto",
    "cash": "cash",
}
_SCHEMA_FILES = ("prices.parquet", "assets.csv", "macro.parquet", "macro_series.csv", "provenance.json")


class RefreshError(RuntimeError):
    """A refresh could not be completed; the destination was left unchanged."""


# ----------------------------------------------------------------------------------------------
# boundaries (monkeypatched in tests)
# ----------------------------------------------------------------------------------------------


def _import_deps() -> tuple[Any, Any]:
    """Import requests and yfinance or raise a one-line RefreshError."""
    missing = []
    mods = {}
    for name in ("requests", "yfinance"):
        try:
            mods[name] = importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise RefreshError(
            f"PortBench refresh needs the optional extra (missing: {', '.join(missing)}): "
            "pip install 'quantgym[refresh]'"
        )
    return mods["requests"], mods["yfinance"]


def _resolve_host(host: str, timeout: float) -> bool:
    """True if ``host`` resolves within ``timeout`` s (DNS is not covered by requests' timeout).

    The lookup runs in a daemon thread, so a stuck resolver can neither block the caller
    beyond ``timeout`` nor the interpreter's exit.
    """
    done: dict[str, bool] = {}

    def work() -> None:
        try:
            socket.getaddrinfo(host, 443)
            done["ok"] = True
        except OSError:
            done["ok"] = False

    th = threading.Thread(target=work, name=f"resolve-{host}", daemon=True)
    th.start()
    th.join(timeout)
    return bool(done.get("ok", False))


def _check_online(requests: Any, timeout: float) -> None:
    """Probe FRED and Yahoo with a short timeout; raise RefreshError if unreachable."""
    t = min(float(timeout), 5.0)
    for url in _PROBE_URLS:
        host = urllib.parse.urlsplit(url).hostname or url
        if not _resolve_host(host, t):
            raise RefreshError(f"PortBench refresh is offline: cannot resolve {host} within {t:g}s")
        try:
            requests.head(url, timeout=t, allow_redirects=True)
        except Exception as exc:  # any transport error means offline for our purpose
            raise RefreshError(
                f"PortBench refresh is offline: cannot reach {url} within {t:g}s ({type(exc).__name__})"
            ) from None


def _fetch_fred(requests: Any, series_id: str, start: str, timeout: float) -> pd.Series | None:
    """Download one FRED series; None if FRED does not know the id (HTTP 404/400)."""
    try:
        resp = requests.get(FRED_CSV_URL, params={"id": series_id, "cosd": start}, timeout=timeout)
    except Exception as exc:
        raise RefreshError(f"FRED download of {series_id} failed: {type(exc).__name__}: {exc}") from None
    status = int(getattr(resp, "status_code", 200))
    if status in (400, 404):
        return None
    if status != 200:
        raise RefreshError(f"FRED download of {series_id} failed: HTTP {status}")
    body = resp.content if isinstance(getattr(resp, "content", None), bytes) else str(resp.text).encode()
    declared = (getattr(resp, "headers", None) or {}).get("Content-Length")
    if declared is not None and "gzip" not in str((resp.headers or {}).get("Content-Encoding", "")):
        if int(declared) != len(body):
            raise RefreshError(f"FRED download of {series_id} truncated: {len(body)} of {declared} bytes")
    return parse_fred_csv(body.decode("utf-8-sig"), series_id)


def parse_fred_csv(text: str, series_id: str) -> pd.Series:
    """Strictly parse a ``fredgraph.csv`` body (``observation_date,<ID>`` rows).

    Missing values (``.`` or empty) become NaN. Any malformed line (wrong number of
    fields, unparseable date or number -- e.g. a download cut mid-line) raises
    :class:`RefreshError`.
    """
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or len(rows[0]) != 2 or rows[0][0].strip().lower() not in ("observation_date", "date"):
        raise RefreshError(f"FRED response for {series_id} is not a fredgraph CSV (header {rows[:1]})")
    if rows[0][1].strip() != series_id:
        raise RefreshError(f"FRED response for {series_id} has column {rows[0][1]!r}")
    dates, vals = [], []
    for n, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != 2:
            raise RefreshError(f"FRED CSV for {series_id} malformed or truncated at line {n}: {row}")
        d, v = row[0].strip(), row[1].strip()
        try:
            ts = pd.Timestamp(_dt.date.fromisoformat(d))
            x = np.nan if v in (".", "") else float(v)
        except ValueError:
            raise RefreshError(f"FRED CSV for {series_id} malformed or truncated at line {n}: {row}") from None
        dates.append(ts)
        vals.append(x)
    if not dates:
        raise RefreshError(f"FRED CSV for {series_id} has no rows")
    return pd.Series(vals, index=pd.DatetimeIndex(dates, name="date"), name=series_id, dtype=float)


def _fetch_yahoo(yf: Any, tickers: Sequence[str], start: str, end: str, timeout: float) -> pd.DataFrame:
    """Download adjusted closes (``auto_adjust=True``) for ``tickers``, wide by ticker."""
    try:
        raw = yf.download(
            list(tickers), start=start, end=end, auto_adjust=True, progress=False,
            group_by="column", threads=True, timeout=timeout,
        )
    except Exception as exc:
        raise RefreshError(f"Yahoo download failed: {type(exc).__name__}: {exc}") from None
    if raw is None or len(raw) == 0:
        raise RefreshError("Yahoo download returned no data")
    if isinstance(raw.columns, pd.MultiIndex):
        lvl0 = raw.columns.get_level_values(0)
        if "Close" in lvl0:
            close = raw["Close"]
        else:  # group_by="ticker" layout
            close = raw.xs("Close", axis=1, level=1)
    else:
        if "Close" not in raw.columns or len(tickers) != 1:
            raise RefreshError("Yahoo download has an unexpected layout (no 'Close' column)")
        close = raw[["Close"]].rename(columns={"Close": tickers[0]})
    close = close.copy()
    close.columns = [str(c) for c in close.columns]
    idx = pd.DatetimeIndex(pd.to_datetime(close.index))
    if idx.tz is not None:
        idx = idx.tz_localize(None)
    close.index = idx.normalize().as_unit("ns")
    close.index.name = "date"
    return close.astype(float)


# ----------------------------------------------------------------------------------------------
# validation and splicing
# ----------------------------------------------------------------------------------------------


def _validate_prices(px: pd.DataFrame, crypto: set[str]) -> None:
    if px.index.has_duplicates:
        raise RefreshError("downloaded prices have duplicate dates")
    if not px.index.is_monotonic_increasing:
        raise RefreshError("downloaded prices are not in ascending date order")
    if "SPY" not in px.columns or not px["SPY"].notna().any():
        raise RefreshError("downloaded prices lack SPY, which defines the trading calendar")
    vals = px.to_numpy(dtype=float)
    if np.any(vals[np.isfinite(vals)] <= 0):
        bad = [c for c in px.columns if (px[c] <= 0).any()]
        raise RefreshError(f"non-positive prices for {bad}")
    for c in px.columns:
        if c in crypto or c == VIX_TICKER:
            continue
        s = px[c].dropna()
        r = s.pct_change().dropna()
        if (r.abs() >= 1.0).any():
            d = r.index[int(np.argmax(r.abs().to_numpy()))]
            raise RefreshError(f"implausible daily return for {c} on {d.date()}: {r.loc[d]:+.1%} (|r| >= 100%)")


def _splice_prices(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Prepend ``old`` history to ``new``, rescaled so each series' returns are continuous.

    Adjusted closes of a newer vintage differ from an older one by a factor
    (later distributions); the old segment of each ticker is multiplied by
    ``new / old`` on the first date both have, so no return is changed.
    """
    out = new.copy()
    cols = list(dict.fromkeys(list(new.columns) + [c for c in old.columns if c not in new.columns]))
    out = out.reindex(columns=cols)
    first_new = new.index[0]
    head_parts = []
    for c in cols:
        o = old[c].dropna() if c in old.columns else pd.Series(dtype=float)
        n = new[c].dropna() if c in new.columns else pd.Series(dtype=float)
        if o.empty:
            continue
        common = o.index.intersection(n.index)
        if n.empty:
            factor = 1.0  # not downloaded this time: old history kept as it was
        elif len(common):
            factor = float(n.loc[common[0]] / o.loc[common[0]])
        else:
            raise RefreshError(
                f"cannot splice {c}: the new download (from {n.index[0].date()}) does not overlap the existing "
                f"data (to {o.index[-1].date()}); choose an earlier `since`"
            )
        head_parts.append((o[o.index < first_new] * factor).rename(c))
    head = pd.concat(head_parts, axis=1) if head_parts else pd.DataFrame()
    res = pd.concat([head.reindex(columns=cols), out]).sort_index()
    res = res[~res.index.duplicated(keep="last")]
    res.index.name = "date"
    return res


def _asset_rows(px: pd.DataFrame, source: str) -> pd.DataFrame:
    """assets.csv rows for the downloaded tickers (names/sub-classes from the bundle)."""
    cls_of = {t: c for c, ts in UNIVERSE.items() for t in ts}
    cls_of[VIX_TICKER] = "equities"
    try:
        with (bundled_portbench_path() / "assets.csv").open("rb") as fh:
            ref = pd.read_csv(fh, dtype=str).set_index("ticker")
    except Exception:  # pragma: no cover - bundle always shipped
        ref = pd.DataFrame(columns=["name", "sub_class"])
    rows = []
    for t in px.columns:
        s = px[t].dropna()
        rows.append(
            {
                "ticker": t,
                "name": ref["name"].get(t, "") if "name" in ref else "",
                "asset_class": _DATA_LABEL[cls_of.get(t, "equities")],
                "sub_class": ref["sub_class"].get(t, "") if "sub_class" in ref else "",
                "price_kind": "index" if t == VIX_TICKER else ("close" if cls_of.get(t) == "cryptocurrency" else "adj_close"),
                "source_repo": source,
                "source_path": "",
                "source_commit": "",
                "first_date": "" if s.empty else str(s.index[0].date()),
                "last_date": "" if s.empty else str(s.index[-1].date()),
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# main entry point
# ----------------------------------------------------------------------------------------------


def swap_directory(new: Path, dest: Path) -> None:
    """Replace directory ``dest`` by the complete directory ``new`` (same filesystem), never leaving a
    half-written ``dest``: the old one is moved aside, restored if the swap fails, removed after."""
    backup = None
    if dest.exists():
        backup = dest.parent / f".{dest.name}.old-{os.getpid()}"
        if backup.exists():
            shutil.rmtree(backup)
        os.replace(dest, backup)
    try:
        os.replace(new, dest)
    except Exception:
        if backup is not None:
            os.replace(backup, dest)
        raise
    if backup is not None:
        shutil.rmtree(backup, ignore_errors=True)


def refresh_portbench_data(
    dest_dir: str | os.PathLike,
    since: str | _dt.date | None = None,
    timeout: float = 10,
    *,
    tickers: Sequence[str] | None = None,
    fred_ids: Sequence[str] | None = None,
    end: str | _dt.date | None = None,
) -> Path:
    """Download fresh PortBench data into ``dest_dir`` (same schema as the bundle).

    Parameters
    ----------
    dest_dir : path
        Target directory (created if missing). Load it afterwards with
        ``load_portbench_data(dest_dir)``.
    since : str or date, optional
        None: full history from 2014-01-01. A date: download only from ``since`` and
        splice onto the data already in ``dest_dir`` (older history rescaled to the
        new adjustment vintage, FRED values from ``since`` replaced).
    timeout : float
        Seconds per HTTP request (the connectivity probe uses at most 5 s).
    tickers : sequence of str, optional
        Yahoo tickers (default: the 80 clean-mode tickers + ^VIX).
    fred_ids : sequence of str, optional
        FRED ids (default: the §1.4 series, TEDRATE included).
    end : str or date, optional
        Last day to download (default: yesterday UTC, so that no partial UTC day is kept).

    Returns
    -------
    pathlib.Path
        The destination directory.

    Raises
    ------
    RefreshError
        Missing extra, offline, a failed/truncated/malformed download, or failed
        validation. The destination is unchanged in every such case.
    """
    requests, yf = _import_deps()
    _check_online(requests, timeout)

    dest = Path(dest_dir).expanduser().resolve()
    today = _dt.datetime.now(_dt.timezone.utc).date()
    last_day = pd.Timestamp(end).date() if end is not None else today - _dt.timedelta(days=1)
    start = str(pd.Timestamp(since).date()) if since is not None else DEFAULT_START
    tick = list(tickers) if tickers is not None else list(CANONICAL_TICKERS) + [VIX_TICKER]
    fids = list(fred_ids) if fred_ids is not None else list(FRED_IDS)
    crypto = set(UNIVERSE["cryptocurrency"]) | {t for t in tick if t.endswith("-USD")}

    # -- download ---------------------------------------------------------------------------
    px = _fetch_yahoo(yf, tick, start, str(last_day + _dt.timedelta(days=1)), timeout)
    px = px.loc[:pd.Timestamp(last_day)]
    px = px[px.notna().any(axis=1)]
    no_data = [t for t in tick if t not in px.columns or not px[t].notna().any()]
    px = px[[t for t in tick if t not in no_data]]
    fred: dict[str, pd.Series] = {}
    fred_missing = []
    for fid in fids:
        s = _fetch_fred(requests, fid, start, timeout)
        if s is None:
            fred_missing.append(fid)
        else:
            fred[fid] = s.loc[:pd.Timestamp(last_day)]
    macro = pd.DataFrame(fred) if fred else pd.DataFrame(index=pd.DatetimeIndex([], name="date"))
    macro.index.name = "date"

    # -- splice onto existing data ----------------------------------------------------------
    if since is not None and (dest / "prices.parquet").is_file():
        old_px = pd.read_parquet(dest / "prices.parquet")
        px = _splice_prices(old_px, px)
        if (dest / "macro.parquet").is_file():
            old_m = pd.read_parquet(dest / "macro.parquet")
            old_m = old_m[old_m.index < pd.Timestamp(start)]
            macro = pd.concat([old_m, macro]).sort_index()
            macro = macro[~macro.index.duplicated(keep="last")]
            macro = macro[macro.notna().any(axis=1)]

    _validate_prices(px, crypto)
    if no_data:
        warnings.warn(f"PortBench refresh: no Yahoo data for {', '.join(no_data)}", PortBenchDataWarning, stacklevel=2)

    # -- write to a temporary sibling, validate by loading, then swap -----------------------
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.refresh-", dir=dest.parent))
    try:
        px.to_parquet(tmp / "prices.parquet", compression="zstd")
        _asset_rows(px, "Yahoo Finance via yfinance (auto_adjust=True)").to_csv(tmp / "assets.csv", index=False)
        macro.astype(float).to_parquet(tmp / "macro.parquet", compression="zstd")
        pd.DataFrame(
            [
                {
                    "series_id": c,
                    "source_url": f"{FRED_CSV_URL}?id={c}",
                    "first_date": str(macro[c].dropna().index[0].date()) if macro[c].notna().any() else "",
                    "last_date": str(macro[c].dropna().index[-1].date()) if macro[c].notna().any() else "",
                    "n_obs": int(macro[c].notna().sum()),
                }
                for c in macro.columns
            ],
            columns=["series_id", "source_url", "first_date", "last_date", "n_obs"],
        ).to_csv(tmp / "macro_series.csv", index=False)
        prov = {
            "dataset": "PortBench market data refreshed from Yahoo Finance (yfinance) and FRED (fredgraph.csv)",
            "vintage_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
            "window": [str(px.index[0].date()), str(last_day)],
            "since": None if since is None else start,
            "yfinance_version": str(getattr(yf, "__version__", "unknown")),
            "requests_version": str(getattr(requests, "__version__", "unknown")),
            "tickers_without_data": no_data,
            "fred_ids_not_found": fred_missing,
            "price_kind": "Yahoo adjusted close (auto_adjust=True) as of the vintage; crypto = UTC-day close",
            "terms": "Yahoo Finance data: personal, non-commercial use; FRED: cite the source, respect series copyrights",
        }
        (tmp / "provenance.json").write_text(json.dumps(prov, indent=2) + "\n", encoding="utf-8")
        # integrity check: the new directory must load with every clean-mode rule
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PortBenchDataWarning)
            load_from_root(tmp, str(tmp), tuple(t for t in px.columns if t != VIX_TICKER), "prior_day")
        # keep user files that are not part of the schema
        if dest.is_dir():
            for f in dest.iterdir():
                if f.name not in _SCHEMA_FILES and not (tmp / f.name).exists():
                    (shutil.copytree if f.is_dir() else shutil.copy2)(f, tmp / f.name)
        swap_directory(tmp, dest)
    except RefreshError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RefreshError(f"PortBench refresh failed while writing {dest}: {type(exc).__name__}: {exc}") from exc
    return dest
