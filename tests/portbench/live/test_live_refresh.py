"""`quantgym data refresh` / refresh_live_data against a local HTTP server (offline)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from quantgym.envs.portbench.data import load_portbench_data
from quantgym.envs.portbench.live.cli import register
from quantgym.envs.portbench.live.data import RefreshError, check_data_dir, package_dir, refresh_live_data

TICKERS = ["SPY", "TLT", "BTC-USD", "^VIX"]
FRED = ["DGS10", "CPIAUCSL", "TEDRATE"]


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    register(app)
    return app


def _digest(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _refresh(dest, **kw):
    kw.setdefault("tickers", TICKERS)
    kw.setdefault("fred_ids", FRED)
    kw.setdefault("end", "2025-12-12")
    return refresh_live_data(dest, **kw)


def test_full_then_incremental_refresh_records_vintages(http_sources, tmp_path):
    dest = tmp_path / "pb"
    rec = _refresh(dest, end="2025-12-05")
    assert rec["full"] and rec["since"] is None and rec["last_date"] == "2025-12-05"
    assert rec["prices_last_date"]["SPY"] == "2025-12-05" and rec["prices_last_date"]["^VIX"] == "2025-12-05"
    assert rec["macro_last_date"]["DGS10"] <= "2025-12-05" and rec["fred_ids_not_found"] == ["TEDRATE"]
    assert rec["prices_sha256"] == hashlib.sha256((dest / "prices.parquet").read_bytes()).hexdigest()
    # the same values went over the wire: the loaded data equal the fixture closes
    d = load_portbench_data(dest, universe=["SPY", "TLT", "BTC-USD"])
    fix = http_sources["state"]["close"]
    assert d.frame("prices").loc["2025-12-05", "SPY"] == pytest.approx(fix.loc["2025-12-05", "SPY"])
    # second call without --since: incremental from the last date minus 14 days, spliced
    rec2 = _refresh(dest)
    assert not rec2["full"] and rec2["since"] == "2025-11-21" and rec2["previous_last_date"] == "2025-12-05"
    assert rec2["last_date"] == "2025-12-12"
    starts = [q["start"][0] for (m, p, *rest) in http_sources["calls"] if m == "GET" and p == "/yahoo.csv"
              for q in rest]
    assert starts == ["2014-01-01", "2025-11-21"]
    lines = (dest / "vintages.jsonl").read_text().splitlines()
    assert [json.loads(x)["last_date"] for x in lines] == ["2025-12-05", "2025-12-12"]
    assert json.loads((dest / "vintage.json").read_text())["last_date"] == "2025-12-12"
    px = pd.read_parquet(dest / "prices.parquet")
    assert not px.index.has_duplicates and px.index.is_monotonic_increasing
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging dirs left


@pytest.mark.parametrize("mode, match", [("truncated", "FRED download of DGS10 failed"),
                                         ("cut_line", "malformed or truncated")])
def test_truncated_fred_download_keeps_existing_data(http_sources, tmp_path, mode, match):
    dest = tmp_path / "pb"
    _refresh(dest, end="2025-12-05")
    before = _digest(dest)
    http_sources["state"]["fred_mode"]["DGS10"] = mode
    with pytest.raises(RefreshError, match=match) as exc:
        _refresh(dest)
    assert "\n" not in str(exc.value)
    assert _digest(dest) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_truncated_yahoo_download_keeps_existing_data(http_sources, tmp_path):
    dest = tmp_path / "pb"
    _refresh(dest, end="2025-12-05")
    before = _digest(dest)
    http_sources["state"]["yahoo_mode"] = "truncated"
    with pytest.raises(RefreshError, match="Yahoo download failed"):
        _refresh(dest)
    assert _digest(dest) == before


def test_network_error_fails_at_once_and_changes_nothing(http_sources, tmp_path):
    dest = tmp_path / "pb"
    _refresh(dest, end="2025-12-05")
    before = _digest(dest)
    n_calls = len(http_sources["calls"])
    http_sources["stop"]()  # connection refused from now on
    with pytest.raises(RefreshError, match="offline") as exc:
        _refresh(dest)
    assert "\n" not in str(exc.value)
    assert _digest(dest) == before and len(http_sources["calls"]) == n_calls


def test_missing_calendar_day_is_rejected(http_sources, tmp_path):
    dest = tmp_path / "pb"
    _refresh(dest, end="2025-12-05")
    before = _digest(dest)
    close = http_sources["state"]["close"].copy()
    close.loc["2025-12-09", "SPY"] = np.nan  # TLT trades that Tuesday, SPY (the calendar) does not
    http_sources["state"]["close"] = close
    with pytest.raises(RefreshError, match=r"SPY has no price on 1 weekday.*2025-12-09"):
        _refresh(dest)
    assert _digest(dest) == before


def test_check_data_dir_on_bundle_and_stale_series(tmp_path):
    from quantgym.envs.portbench.raw import bundled_portbench_path

    rep = check_data_dir(str(bundled_portbench_path()), since="2025-01-01")
    assert rep["errors"] == [] and rep["last_date"] == "2025-12-31"
    # MATIC-USD stopped trading under that ticker: §11.6 makes it unavailable, reported as stale
    assert "MATIC-USD" in rep["stale"] and "SPY" not in rep["stale"]
    assert rep["macro_last_date"]["DGS10"] == "2025-12-31"


def test_refuses_the_installed_package(tmp_path):
    with pytest.raises(RefreshError, match="installed package"):
        refresh_live_data(package_dir() / "data" / "bundled" / "portbench")


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_refresh_default_dest_and_incremental(http_sources, tmp_path, monkeypatch):
    monkeypatch.setenv("QUANTGYM_DATA", str(tmp_path / "qg"))
    runner = CliRunner()
    r = runner.invoke(_app(), ["data", "refresh", "--end", "2025-12-05"])
    assert r.exit_code == 0, r.output
    dest = tmp_path / "qg" / "portbench"
    assert "data through 2025-12-05" in r.output and "full history" in r.output
    # default universe: tickers the source does not serve are reported, not fatal
    assert "warning:" in r.output and "no Yahoo data for" in r.output
    r2 = runner.invoke(_app(), ["data", "refresh", "--since", "2025-12-01"])
    assert r2.exit_code == 0, r2.output
    assert "data through 2025-12-12 (from 2025-12-01" in r2.output
    assert len((dest / "vintages.jsonl").read_text().splitlines()) == 2


def test_cli_refresh_offline_one_line_nonzero(http_sources, tmp_path):
    http_sources["stop"]()
    r = CliRunner().invoke(_app(), ["data", "refresh", str(tmp_path / "pb")])
    assert r.exit_code == 2
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: PortBench refresh is offline")
    assert not (tmp_path / "pb").exists()


def test_cli_refresh_without_extra(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "yfinance", None)
    r = CliRunner().invoke(_app(), ["data", "refresh", str(tmp_path / "pb")])
    assert r.exit_code == 2 and "quantgym[refresh]" in r.output and len(r.output.strip().splitlines()) == 1
    assert r.output.startswith("error: PortBench refresh needs the optional extra")
