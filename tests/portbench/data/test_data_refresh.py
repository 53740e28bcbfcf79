"""Refresh path, offline only: the yfinance / HTTP boundary is replaced by recorded responses."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

requests = pytest.importorskip("requests")

import quantgym.envs.portbench.live.refresh as refresh_mod  # noqa: E402
from quantgym.envs.portbench.data import load_portbench_data  # noqa: E402
from quantgym.envs.portbench.live.refresh import RefreshError, parse_fred_csv, refresh_portbench_data  # noqa: E402

FIX = Path(__file__).parent / "fixtures"
TICKERS = ["SPY", "TLT", "BTC-USD", "^VIX"]
FRED = ["DGS10", "CPIAUCSL", "TEDRATE"]


class _Resp:
    def __init__(self, body: bytes, status: int = 200, headers: dict | None = None):
        self.content, self.status_code = body, status
        self.text = body.decode()
        self.headers = {"Content-Length": str(len(body))} if headers is None else headers


def _yahoo_frame(close: pd.DataFrame) -> pd.DataFrame:
    """yfinance>=0.2.48 layout: columns MultiIndex (Price, Ticker)."""
    parts = {f: close for f in ("Close", "High", "Low", "Open")}
    parts["Volume"] = close * 0 + 1e6
    out = pd.concat(parts, axis=1, names=["Price", "Ticker"])
    out.index.name = "Date"
    return out


@pytest.fixture
def net(monkeypatch):
    """Fake yfinance module + patched requests.head/get serving the fixture files."""
    close = pd.read_csv(FIX / "yahoo_close_2025-12.csv", index_col="date", parse_dates=True)
    calls = {"head": 0, "get": [], "download": 0}
    state = {"close": close, "fred": {}}

    def download(tickers, start=None, end=None, **kw):
        calls["download"] += 1
        assert kw.get("auto_adjust") is True and kw.get("progress") is False
        c = state["close"].loc[start:pd.Timestamp(end) - pd.Timedelta(days=1)]
        return _yahoo_frame(c[[t for t in tickers if t in c.columns]])

    fake_yf = types.ModuleType("yfinance")
    fake_yf.download = download
    fake_yf.__version__ = "0.0-test"
    monkeypatch.setitem(sys.modules, "yfinance", fake_yf)

    def head(url, timeout=None, **kw):
        assert timeout is not None and timeout <= 5
        calls["head"] += 1
        return _Resp(b"")

    def get(url, params=None, timeout=None, **kw):
        assert timeout is not None
        sid = params["id"]
        calls["get"].append(sid)
        if sid in state["fred"]:
            return state["fred"][sid]
        f = FIX / f"fredgraph_{sid}.csv"
        if not f.exists():
            return _Resp(b"Not Found", status=404)
        return _Resp(f.read_bytes())

    monkeypatch.setattr(requests, "head", head)
    monkeypatch.setattr(requests, "get", get)
    monkeypatch.setattr(refresh_mod, "_resolve_host", lambda host, timeout: True)  # no real DNS in tests
    return calls, state


def _digest(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _refresh(dest, **kw):
    kw.setdefault("tickers", TICKERS)
    kw.setdefault("fred_ids", FRED)
    kw.setdefault("end", "2025-12-12")
    return refresh_portbench_data(dest, **kw)


def test_refresh_writes_loadable_schema(net, tmp_path):
    calls, _ = net
    dest = _refresh(tmp_path / "pb")
    names = {p.name for p in dest.iterdir()}
    assert names == {"prices.parquet", "assets.csv", "macro.parquet", "macro_series.csv", "provenance.json"}
    px = pd.read_parquet(dest / "prices.parquet")
    assert list(px.columns) == TICKERS
    assert pd.Timestamp("2025-12-06") in px.index  # crypto Saturday kept in the raw table
    assets = pd.read_csv(dest / "assets.csv")
    assert dict(zip(assets.ticker, assets.asset_class)) == {
        "SPY": "equity", "TLT": "bond", "BTC-USD": "crypto", "^VIX": "equity"
    }
    prov = json.loads((dest / "provenance.json").read_text())
    assert prov["fred_ids_not_found"] == ["TEDRATE"] and prov["yfinance_version"] == "0.0-test"
    assert prov["window"] == ["2025-12-01", "2025-12-12"] and prov["vintage_utc"]
    d = load_portbench_data(dest, universe=["SPY", "TLT", "BTC-USD"])
    assert d.tickers == ("SPY", "TLT", "BTC-USD") and d.n_dates == 10
    m = d.frame("macro")
    assert m.loc["2025-12-12", "dgs_10y"] == pytest.approx(4.14)  # DGS10 of Thu 2025-12-11 (lag 1)
    # Nov 2025 CPI yoy = 325.063/315.631 - 1 (obs 2025-11-01 + 45 = 2025-12-16: not yet on Dec 12);
    # Oct 2025 is missing, so on Dec 12 the value is Sep's: 324.245/314.732 - 1
    assert m.loc["2025-12-12", "cpi_yoy"] == pytest.approx(324.245 / 314.732 - 1, abs=1e-9)
    assert calls["head"] == 2 and calls["download"] == 1 and calls["get"] == FRED


def test_refresh_since_splices_on_existing(net, tmp_path):
    calls, state = net
    dest = _refresh(tmp_path / "pb")
    before = pd.read_parquet(dest / "prices.parquet")
    # a later vintage: every adjusted close scaled by 0.99 (a distribution paid meanwhile)
    state["close"] = state["close"] * 0.99
    _refresh(dest, since="2025-12-08")
    after = pd.read_parquet(dest / "prices.parquet")
    assert after.index.equals(before.index)
    # history before `since` is rescaled to the new vintage: returns are unchanged everywhere
    pd.testing.assert_frame_equal(after.pct_change(fill_method=None), before.pct_change(fill_method=None), rtol=1e-12)
    assert after.loc["2025-12-12", "SPY"] == pytest.approx(0.99 * before.loc["2025-12-12", "SPY"])


def test_refresh_since_without_overlap_is_refused(net, tmp_path):
    _, state = net
    full = state["close"]
    state["close"] = full.loc[:"2025-12-05"]
    dest = _refresh(tmp_path / "pb", end="2025-12-05")
    snapshot = _digest(dest)
    state["close"] = full
    with pytest.raises(RefreshError, match="does not overlap"):
        _refresh(dest, since="2025-12-09")
    assert _digest(dest) == snapshot


def test_missing_extra_fails_fast(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "yfinance", None)  # import yfinance -> ImportError
    with pytest.raises(RefreshError) as exc:
        refresh_portbench_data(tmp_path / "pb")
    msg = str(exc.value)
    assert "quantgym[refresh]" in msg and "yfinance" in msg and "\n" not in msg
    assert not (tmp_path / "pb").exists()


def test_offline_fails_fast_without_download(net, monkeypatch, tmp_path):
    calls, _ = net

    def head(url, timeout=None, **kw):
        raise requests.ConnectionError("Failed to resolve 'fred.stlouisfed.org'")

    monkeypatch.setattr(requests, "head", head)
    with pytest.raises(RefreshError, match="offline") as exc:
        _refresh(tmp_path / "pb")
    assert "\n" not in str(exc.value)
    assert calls["download"] == 0 and calls["get"] == []
    assert not (tmp_path / "pb").exists()


def test_unresolvable_host_fails_fast(net, monkeypatch, tmp_path):
    calls, _ = net
    seen = []

    def resolve(host, timeout):
        seen.append((host, timeout))
        return False  # what a stuck or missing resolver looks like after `timeout`

    monkeypatch.setattr(refresh_mod, "_resolve_host", resolve)
    with pytest.raises(RefreshError, match="cannot resolve fred.stlouisfed.org within 5s"):
        _refresh(tmp_path / "pb", timeout=30)
    assert seen == [("fred.stlouisfed.org", 5.0)] and calls["head"] == 0 and calls["download"] == 0


def test_truncated_fred_download_leaves_existing_data(net, tmp_path):
    _, state = net
    dest = _refresh(tmp_path / "pb")
    snapshot = _digest(dest)
    body = (FIX / "fredgraph_DGS10.csv").read_bytes()
    cut = body[: body.rindex(b"\n", 0, len(body) - 1) + 8]  # the last line cut to "2025-12"
    state["fred"]["DGS10"] = _Resp(cut)
    with pytest.raises(RefreshError, match="malformed or truncated"):
        _refresh(dest)
    assert _digest(dest) == snapshot
    # a body shorter than its Content-Length is caught as well
    state["fred"]["DGS10"] = _Resp(body[:-20], headers={"Content-Length": str(len(body))})
    with pytest.raises(RefreshError, match="truncated"):
        _refresh(dest)
    assert _digest(dest) == snapshot
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dirs left behind


def test_validation_rejects_bad_prices(net, tmp_path):
    _, state = net
    dest = _refresh(tmp_path / "pb")
    snapshot = _digest(dest)
    good = state["close"].copy()
    bad = good.copy()
    bad.loc["2025-12-10", "TLT"] = good.loc["2025-12-09", "TLT"] * 2.5  # +150 % bond day
    state["close"] = bad
    with pytest.raises(RefreshError, match="implausible daily return for TLT"):
        _refresh(dest)
    state["close"] = good.drop(columns="SPY")
    with pytest.raises(RefreshError, match="SPY"):
        _refresh(dest)
    assert _digest(dest) == snapshot


def test_yahoo_transport_error(net, tmp_path):
    _, state = net

    def boom(*a, **k):
        raise requests.ReadTimeout("read timed out")

    sys.modules["yfinance"].download = boom
    with pytest.raises(RefreshError, match="Yahoo download failed: ReadTimeout"):
        _refresh(tmp_path / "pb")


def test_parse_fred_csv():
    s = parse_fred_csv("observation_date,DFF\n2024-01-01,5.33\n2024-01-02,.\n2024-01-03,\n", "DFF")
    assert s.index[0] == pd.Timestamp("2024-01-01") and s.iloc[0] == 5.33 and np.isnan(s.iloc[1:]).all()
    with pytest.raises(RefreshError, match="not a fredgraph CSV"):
        parse_fred_csv("<html>rate limited</html>", "DFF")
    with pytest.raises(RefreshError, match="column"):
        parse_fred_csv("observation_date,DGS2\n2024-01-01,4.0\n", "DFF")
