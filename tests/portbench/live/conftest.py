"""Shared fixtures of the live tests: a local HTTP server standing in for FRED and Yahoo Finance.

Offline only: the server listens on 127.0.0.1 and serves the recorded responses of
``tests/portbench/data/fixtures`` (real values; see its README). ``yfinance`` is replaced by a tiny module
whose ``download`` fetches the closes from that server over HTTP, so the whole refresh path down to
the socket is exercised, including truncated bodies and refused connections.
"""

from __future__ import annotations

import io
import sys
import threading
import types
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

FIX = Path(__file__).resolve().parents[1] / "data" / "fixtures"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, status: int, body: bytes, declared: int | None = None, ctype: str = "text/csv") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if declared is None else declared))
        if declared is not None:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if declared is not None:
            self.close_connection = True

    def do_HEAD(self):
        self.server.calls.append(("HEAD", self.path))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query)
        st = self.server.state
        self.server.calls.append(("GET", url.path, q))
        if url.path == "/fredgraph.csv":
            sid = q["id"][0]
            f = FIX / f"fredgraph_{sid}.csv"
            if not f.exists():
                return self._send(404, b"Not Found", ctype="text/plain")
            body = f.read_bytes()
            mode = st["fred_mode"].get(sid)
            if mode == "truncated":  # connection dropped mid-body
                return self._send(200, body[: len(body) // 2], declared=len(body))
            if mode == "cut_line":  # complete HTTP body whose last CSV line is cut
                body = body[: body.rindex(b"\n", 0, len(body) - 1) + 8]
            return self._send(200, body)
        if url.path == "/yahoo.csv":
            close = st["close"]
            tick = q["tickers"][0].split(",")
            c = close.loc[q["start"][0]: pd.Timestamp(q["end"][0]) - pd.Timedelta(days=1)]
            c = c[[t for t in tick if t in c.columns]]
            body = c.to_csv(index_label="date").encode()
            if st["yahoo_mode"] == "truncated":
                return self._send(200, body[: len(body) // 2], declared=len(body))
            return self._send(200, body)
        return self._send(404, b"Not Found", ctype="text/plain")


@pytest.fixture
def http_sources(monkeypatch):
    """Start the local server, point the refresh code at it, install the HTTP-backed fake yfinance.

    Yields a dict: ``base`` (URL), ``state`` (``close`` DataFrame served as Yahoo closes,
    ``fred_mode`` {id: "truncated" | "cut_line"}, ``yahoo_mode``), ``calls`` (requests seen),
    ``stop()`` (shut the server down: later requests get "connection refused").
    """
    requests = pytest.importorskip("requests")
    import quantgym.envs.portbench.live.refresh as refresh_mod

    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    close = pd.read_csv(FIX / "yahoo_close_2025-12.csv", index_col="date", parse_dates=True)
    server.state = {"close": close, "fred_mode": {}, "yahoo_mode": None}
    server.calls = []
    th = threading.Thread(target=server.serve_forever, daemon=True)
    th.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def download(tickers, start=None, end=None, timeout=10, **kw):
        """yfinance.download stand-in: closes over HTTP, returned in yfinance's (Price, Ticker) layout."""
        resp = requests.get(f"{base}/yahoo.csv", params={"tickers": ",".join(tickers), "start": start, "end": end},
                            timeout=timeout)
        resp.raise_for_status()
        c = pd.read_csv(io.StringIO(resp.text), index_col="date", parse_dates=True)
        parts = {f: c for f in ("Close", "High", "Low", "Open")}
        parts["Volume"] = c * 0 + 1e6
        out = pd.concat(parts, axis=1, names=["Price", "Ticker"])
        out.index.name = "Date"
        return out

    fake_yf = types.ModuleType("yfinance")
    fake_yf.download = download
    fake_yf.__version__ = "0.0-local-server"
    monkeypatch.setitem(sys.modules, "yfinance", fake_yf)
    monkeypatch.setattr(refresh_mod, "FRED_CSV_URL", f"{base}/fredgraph.csv")
    monkeypatch.setattr(refresh_mod, "_PROBE_URLS", (f"{base}/",))
    stopped = {"done": False}

    def stop():
        if not stopped["done"]:
            server.shutdown()
            server.server_close()
            stopped["done"] = True

    yield {"base": base, "state": server.state, "calls": server.calls, "stop": stop}
    stop()
