"""Live data: refresh the user's PortBench data directory with extra checks and a vintage journal.

:func:`refresh_live_data` wraps :func:`.refresh.refresh_portbench_data` (Yahoo Finance via yfinance, FRED
``fredgraph.csv``; extra ``quantgym[refresh]``):

* the destination defaults to the user data directory (:func:`~.config.default_portbench_dir`), never the
  installed package;
* an existing directory is refreshed incrementally (from ``since``, default: its last date minus
  :attr:`DataChecks.since_overlap_days`), a missing one in full;
* the work happens in a staging copy next to the destination; the §11.6 / calendar checks of
  :func:`check_data_dir` run on the staged result, and only a clean result is swapped in (the old
  directory survives any failure: offline, truncated or malformed download, failed check);
* every successful refresh appends its vintage (download time, per-series last dates, warnings,
  content hash) to ``vintages.jsonl`` and writes it to ``vintage.json``.

:func:`data_vintage` summarises the vintage of a loaded :class:`~quantgym.envs.portbench.data.PortBenchData` for the
live decision journal.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from quantgym._util import sha256_file
from quantgym.envs.portbench.universe import CLASS_LABEL_MAP, VIX_TICKER
from quantgym.envs.portbench.data import PortBenchData, PortBenchDataWarning, load_portbench_data
from quantgym.envs.portbench.live.refresh import RefreshError, refresh_portbench_data, swap_directory
from quantgym.envs.portbench.live.config import DataChecks, default_portbench_dir

__all__ = [
    "RefreshError",
    "refresh_live_data",
    "check_data_dir",
    "data_vintage",
    "resolve_data_source",
    "package_dir",
]


def package_dir() -> Path:
    """Directory of the installed ``quantgym`` package (refresh never writes there)."""
    import quantgym

    return Path(quantgym.__file__).resolve().parent


def _is_within(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _raw_last_date(dest: Path) -> pd.Timestamp | None:
    """Last SPY date of an existing data directory (None if there is none)."""
    f = dest / "prices.parquet"
    if not f.is_file():
        return None
    px = pd.read_parquet(f, columns=None)
    if "date" in px.columns:
        px = px.set_index("date")
    if "SPY" not in px.columns or not px["SPY"].notna().any():
        return None
    return pd.Timestamp(px["SPY"].dropna().index.max()).normalize()


# ----------------------------------------------------------------------------------------------
# checks
# ----------------------------------------------------------------------------------------------


def check_data_dir(
    path: str | os.PathLike,
    checks: DataChecks = DataChecks(),
    since: str | None = None,
    previous_last: str | pd.Timestamp | None = None,
) -> dict[str, Any]:
    """Validate a PortBench data directory for live use (calendar and §11.6 availability rules).

    Parameters
    ----------
    path : directory in the documented schema (``prices.parquet``, ``assets.csv``, ...).
    checks : thresholds (:class:`~quantgym.envs.portbench.live.config.DataChecks`).
    since : first date of the refreshed window (None: the whole file for the calendar checks and the
        last 252 trading days for the warnings).
    previous_last : last trading day of the data this directory replaces; the new data must not end
        earlier.

    Returns
    -------
    dict
        ``errors`` (list of str; non-empty = reject), ``warnings`` (list of str), ``last_date`` (str),
        ``prices_last_date`` {ticker: date}, ``macro_last_date`` {FRED id: date}, ``stale`` [tickers],
        ``gaps`` {ticker: [first missing date, days]}.
    """
    root = Path(path)
    errors: list[str] = []
    warns: list[str] = []
    raw = pd.read_parquet(root / "prices.parquet")
    if "date" in raw.columns:
        raw = raw.set_index("date")
    raw.index = pd.DatetimeIndex(pd.to_datetime(raw.index)).normalize()
    assets = pd.read_csv(root / "assets.csv", dtype=str)
    cls = {t: CLASS_LABEL_MAP.get(str(c).lower(), str(c)) for t, c in zip(assets["ticker"], assets["asset_class"])}
    crypto = {t for t in raw.columns if cls.get(t) == "cryptocurrency" or str(t).endswith("-USD")}
    noncrypto = [t for t in raw.columns if t not in crypto and t != VIX_TICKER]
    if "SPY" not in raw.columns or not raw["SPY"].notna().any():
        return {"errors": ["no SPY prices: the trading calendar (§1.3) cannot be built"], "warnings": [],
                "last_date": None, "prices_last_date": {}, "macro_last_date": {}, "stale": [], "gaps": {}}
    spy_dates = raw.index[raw["SPY"].notna().to_numpy()]
    lo = pd.Timestamp(since) if since is not None else spy_dates[0]
    # -- calendar: no long gaps between consecutive trading days ------------------------------
    cal = spy_dates[spy_dates >= lo - pd.Timedelta(days=10)]
    if len(cal) > 1:
        gap = np.diff(cal.values).astype("timedelta64[D]").astype(int)
        bad = np.flatnonzero(gap > checks.max_calendar_gap_days)
        if bad.size:
            i = int(bad[0])
            errors.append(f"calendar gap of {gap[i]} days between {cal[i].date()} and {cal[i + 1].date()} "
                          f"(> {checks.max_calendar_gap_days}; {bad.size} such gap(s))")
    # -- calendar: a weekday most non-crypto tickers trade but SPY lacks ------------------------
    if noncrypto:
        sub = raw.loc[raw.index >= lo, noncrypto]
        share = sub.notna().mean(axis=1)
        wk = sub.index.day_of_week < 5
        miss = sub.index[wk & (share >= checks.calendar_quorum) & raw.loc[sub.index, "SPY"].isna().to_numpy()]
        if len(miss):
            errors.append(f"SPY has no price on {len(miss)} weekday(s) on which other tickers trade, first "
                          f"{miss[0].date()}: the calendar would lose them")
    last = spy_dates[-1]
    if previous_last is not None and last < pd.Timestamp(previous_last):
        errors.append(f"the new data end on {last.date()}, before the existing data ({pd.Timestamp(previous_last).date()})")
    # -- §11.6 availability: stale series and interior gaps (warnings) -------------------------
    uni = [t for t in raw.columns if t != VIX_TICKER and t in cls]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PortBenchDataWarning)
        data = load_portbench_data(root, universe=uni)
    real = np.asarray(data.real_price)
    T = data.n_dates
    w0 = int(data.dates.searchsorted(lo, side="left")) if since is not None else max(0, T - 252)
    stale, gaps = [], {}
    for j, t in enumerate(data.tickers):
        pos = np.flatnonzero(real[:, j])
        if pos.size == 0:
            continue
        if T - 1 - pos[-1] > checks.ffill_limit:
            stale.append(t)
        p = pos[pos >= max(0, w0 - 1)]
        if p.size > 1:
            d = np.diff(p)
            k = np.flatnonzero(d > checks.ffill_limit + 1)
            if k.size:
                gaps[t] = [str(data.dates[p[k[0]] + 1].date()), int(d[k[0]] - 1)]
    if stale:
        warns.append(f"{len(stale)} ticker(s) without a price in the last {checks.ffill_limit} trading days "
                     f"(unavailable in live decisions, §11.6): {', '.join(stale[:12])}")
    if gaps:
        warns.append(f"{len(gaps)} ticker(s) with a gap longer than {checks.ffill_limit} trading days in the "
                     f"refreshed window: " + ", ".join(f"{t} from {g[0]} ({g[1]}d)" for t, g in list(gaps.items())[:8]))
    ret = np.asarray(data.returns)[w0:]
    big = []
    for j, t in enumerate(data.tickers):
        if data.asset_class[j] == "cryptocurrency":
            continue
        r = ret[:, j]
        k = np.flatnonzero(np.isfinite(r) & (np.abs(r) >= checks.warn_abs_return))
        big += [(t, str(data.dates[w0 + i].date()), float(r[i])) for i in k]
    if big:
        warns.append(f"{len(big)} non-crypto daily move(s) with |r| >= {checks.warn_abs_return:.0%}: "
                     + ", ".join(f"{t} {d} {r:+.1%}" for t, d, r in big[:8]))
    px_last = {t: v["last_date"] for t, v in data.meta.get("ticker_coverage", {}).items()}
    if VIX_TICKER in raw.columns and raw[VIX_TICKER].notna().any():
        px_last[VIX_TICKER] = str(raw[VIX_TICKER].dropna().index.max().date())
    macro_last: dict[str, Any] = {}
    mf = root / "macro.parquet"
    if mf.is_file():
        m = pd.read_parquet(mf)
        if "date" in m.columns:
            m = m.set_index("date")
        macro_last = {c: (str(pd.Timestamp(m[c].dropna().index.max()).date()) if m[c].notna().any() else None)
                      for c in m.columns}
    return {"errors": errors, "warnings": warns, "last_date": str(last.date()), "prices_last_date": px_last,
            "macro_last_date": macro_last, "stale": stale, "gaps": gaps}


# ----------------------------------------------------------------------------------------------
# refresh
# ----------------------------------------------------------------------------------------------


def refresh_live_data(
    dest: str | os.PathLike | None = None,
    since: str | _dt.date | None = None,
    *,
    full: bool = False,
    timeout: float = 10,
    tickers: Sequence[str] | None = None,
    fred_ids: Sequence[str] | None = None,
    end: str | _dt.date | None = None,
    checks: DataChecks = DataChecks(),
) -> dict[str, Any]:
    """Refresh a user PortBench data directory atomically, validate it and record the vintage.

    Parameters
    ----------
    dest : directory (default :func:`~quantgym.envs.portbench.live.config.default_portbench_dir`). Must not lie inside
        the installed package.
    since : first day to download; the older history of ``dest`` is kept and spliced (see
        :func:`quantgym.envs.portbench.live.refresh.refresh_portbench_data`). Default: incremental from the existing
        last date minus ``checks.since_overlap_days``, or the full history if ``dest`` has no data.
    full : force a full download (ignores ``since``).
    timeout : seconds per HTTP request (the connectivity probe uses at most 5 s).
    tickers, fred_ids, end : passed to :func:`~quantgym.envs.portbench.live.refresh.refresh_portbench_data`.
    checks : validation thresholds.

    Returns
    -------
    dict
        The vintage record written to ``vintages.jsonl`` (``vintage_utc``, ``since``, ``last_date``,
        ``prices_last_date``, ``macro_last_date``, ``warnings``, ``prices_sha256``, ...) plus ``dest``.

    Raises
    ------
    RefreshError
        Refresh extra missing, offline, failed/truncated/malformed download, or failed validation
        (one-line message). ``dest`` is unchanged in every such case.
    """
    dest_p = Path(dest).expanduser() if dest is not None else default_portbench_dir()
    dest_p = dest_p.resolve()
    if _is_within(dest_p, package_dir()):
        raise RefreshError(f"refusing to write into the installed package ({dest_p}); choose a user directory "
                           f"(default {default_portbench_dir()})")
    if dest_p.exists() and not dest_p.is_dir():
        raise RefreshError(f"{dest_p} exists and is not a directory")
    previous_last = _raw_last_date(dest_p)
    if full or previous_last is None:
        since_eff = None
    elif since is not None:
        since_eff = str(pd.Timestamp(since).date())
    else:
        since_eff = str((previous_last - pd.Timedelta(days=checks.since_overlap_days)).date())
    dest_p.parent.mkdir(parents=True, exist_ok=True)
    stage_root = Path(tempfile.mkdtemp(prefix=f".{dest_p.name}.live-", dir=dest_p.parent))
    stage = stage_root / dest_p.name
    try:
        if previous_last is not None:
            shutil.copytree(dest_p, stage)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PortBenchDataWarning)
            refresh_portbench_data(stage, since=since_eff, timeout=timeout, tickers=tickers, fred_ids=fred_ids, end=end)
        report = check_data_dir(stage, checks, since=since_eff,
                                previous_last=previous_last if since_eff is not None else None)
        if report["errors"]:
            raise RefreshError("refreshed data rejected: " + "; ".join(report["errors"]))
        prov = json.loads((stage / "provenance.json").read_text(encoding="utf-8"))
        record = {
            "schema": "quantgym-portbench-vintage-v1",
            "vintage_utc": prov.get("vintage_utc"),
            "recorded_utc": _utc_now(),
            "since": since_eff,
            "full": since_eff is None,
            "window": prov.get("window"),
            "previous_last_date": None if previous_last is None else str(previous_last.date()),
            "last_date": report["last_date"],
            "prices_last_date": report["prices_last_date"],
            "macro_last_date": report["macro_last_date"],
            "tickers_without_data": prov.get("tickers_without_data", []),
            "fred_ids_not_found": prov.get("fred_ids_not_found", []),
            "stale": report["stale"],
            "warnings": report["warnings"] + [str(w.message) for w in caught
                                              if issubclass(w.category, PortBenchDataWarning)],
            "prices_sha256": sha256_file(stage / "prices.parquet"),
            "yfinance_version": prov.get("yfinance_version"),
            "checks": {k: v for k, v in vars(checks).items()},
        }
        line = json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
        with (stage / "vintages.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        (stage / "vintage.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        swap_directory(stage, dest_p)
    except RefreshError:
        raise
    except Exception as exc:
        raise RefreshError(f"PortBench live refresh failed: {type(exc).__name__}: {exc}") from exc
    finally:
        shutil.rmtree(stage_root, ignore_errors=True)
    record["dest"] = str(dest_p)
    return record


# ----------------------------------------------------------------------------------------------
# vintage of loaded data, data source resolution
# ----------------------------------------------------------------------------------------------


def data_vintage(data: PortBenchData) -> dict[str, Any]:
    """Identity of the data a live decision was made on.

    Returns
    -------
    dict
        ``source`` (directory or bundle), ``vintage_utc`` (download time of a refreshed directory; the
        bundle's build time otherwise), ``last_date``, ``fingerprint`` (first 16 hex digits of the SHA-256
        of the price matrix: identical data ⇔ identical fingerprint).
    """
    prov = dict(data.meta.get("provenance") or {})
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(data.prices).tobytes())
    h.update("|".join(data.tickers).encode())
    h.update(np.asarray(data.dates.asi8).tobytes())
    return {
        "source": str(data.meta.get("source")),
        "vintage_utc": prov.get("vintage_utc") or prov.get("built_utc"),
        "adjustment_vintage": prov.get("adjustment_vintage"),
        "last_date": str(data.dates[-1].date()),
        "fingerprint": h.hexdigest()[:16],
    }


def resolve_data_source(arg: str | os.PathLike | None) -> tuple[Path | None, str]:
    """Which data ``quantgym live`` uses.

    Parameters
    ----------
    arg : ``None`` (the user data directory if it holds data, else the bundle), ``"bundled"``, or a path.

    Returns
    -------
    (path or None for the bundle, a one-line description)

    Raises
    ------
    FileNotFoundError
        If an explicit path holds no ``prices.parquet``.
    """
    if arg is not None and str(arg) == "bundled":
        return None, "bundled data (quantgym/data/bundled/portbench)"
    if arg is not None:
        p = Path(arg).expanduser().resolve()
        if not (p / "prices.parquet").is_file():
            raise FileNotFoundError(f"no PortBench data in {p} (expected prices.parquet); run `quantgym data refresh {p}`")
        return p, str(p)
    p = default_portbench_dir()
    if (p / "prices.parquet").is_file():
        return p.resolve(), str(p)
    return None, (f"bundled data (no refreshed data in {p}; run `quantgym data refresh` to get the latest closes)")
