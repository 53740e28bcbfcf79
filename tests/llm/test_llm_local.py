"""quantgym.agents.llm.local: finding llama.cpp's ``llama-server`` and the command line it is started with.

A stand-in executable plays ``llama-server``: it records its argv and answers ``GET /v1/models`` with the
alias it was given, so the real start-and-poll path runs without llama.cpp installed.
"""

from __future__ import annotations

import json
import sys

import pytest

from quantgym.agents.llm.local import LlamaCppServer, find_llama_server

FAKE = '''#!{python}
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
argv = sys.argv[1:]
open({record!r}, "w").write(json.dumps(argv))
port, alias = int(argv[argv.index("--port") + 1]), argv[argv.index("--alias") + 1]
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({{"data": [{{"id": alias}}]}}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", port), H).serve_forever()
'''


@pytest.fixture
def fake_server(tmp_path):
    exe, record = tmp_path / "llama-server", tmp_path / "argv.json"
    exe.write_text(FAKE.format(python=sys.executable, record=str(record)))
    exe.chmod(0o755)
    return exe, record


def test_native_server_gets_parallel_and_passed_through_options(fake_server, tmp_path):
    exe, record = fake_server
    with LlamaCppServer(tmp_path / "m.gguf", n_ctx=8192, n_threads=1, kind="native", binary=exe, parallel=4,
                        server_args=["--metrics", "--slot-prompt-similarity", 0]) as srv:
        argv = json.loads(record.read_text())
        assert srv.command == [str(exe), *argv]
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
    assert argv[argv.index("--parallel") + 1] == "4" and argv[argv.index("-c") + 1] == "8192"
    assert argv[argv.index("-t") + 1] == "1" and argv[argv.index("--alias") + 1] == "smollm2"
    assert argv[-3:] == ["--metrics", "--slot-prompt-similarity", "0"]
    assert srv.proc.poll() is not None  # stopped on leaving the block


def test_native_server_one_slot_by_default(fake_server, tmp_path):
    exe, record = fake_server
    srv = LlamaCppServer(tmp_path / "m.gguf", kind="native", binary=exe)
    srv.stop()
    argv = json.loads(record.read_text())
    assert argv[argv.index("--parallel") + 1] == "1" and "--jinja" not in argv


def test_parallel_is_native_only_and_positive(tmp_path):
    with pytest.raises(ValueError, match="kind='native'"):
        LlamaCppServer(tmp_path / "m.gguf", parallel=2)
    with pytest.raises(ValueError, match=">= 1"):
        LlamaCppServer(tmp_path / "m.gguf", kind="native", parallel=0)


def test_find_llama_server_order_and_one_line_error(fake_server, tmp_path, monkeypatch):
    exe, _ = fake_server
    other = tmp_path / "bin" / "llama-server"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    monkeypatch.setenv("PATH", str(other.parent))
    monkeypatch.delenv("QUANTGYM_LLAMA_SERVER", raising=False)
    assert find_llama_server() == str(other)  # the PATH, last
    monkeypatch.setenv("QUANTGYM_LLAMA_SERVER", str(exe))
    assert find_llama_server() == str(exe)  # the environment variable before the PATH
    assert find_llama_server(other) == str(other)  # the argument before both
    with pytest.raises(RuntimeError) as e:
        find_llama_server(tmp_path / "nowhere")
    assert "nowhere does not exist" in str(e.value) and "\n" not in str(e.value)
    monkeypatch.delenv("QUANTGYM_LLAMA_SERVER")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RuntimeError, match="no llama-server on the PATH.*QUANTGYM_LLAMA_SERVER"):
        find_llama_server()
    with pytest.raises(RuntimeError, match="llama-server not found"):
        LlamaCppServer(tmp_path / "m.gguf", kind="native")


def _open_paths() -> set[str]:
    """The files this process holds open (Linux: the links of /proc/self/fd)."""
    import os

    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the descriptor listdir itself used, closed since
            pass
    return out


def test_bad_arguments_open_no_log_and_a_start_keeps_no_handle(fake_server, tmp_path):
    """The arguments are checked before the log file is opened (a bad binary or kind creates no log and leaks
    no handle), and a started server's log is held by the server only, not by this process."""
    import os

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd (Linux) to list this process's open files")
    log = tmp_path / "server.log"
    with pytest.raises(RuntimeError, match="nowhere does not exist"):
        LlamaCppServer(tmp_path / "m.gguf", kind="native", binary=tmp_path / "nowhere", log=log)
    with pytest.raises(ValueError, match="kind must be"):
        LlamaCppServer(tmp_path / "m.gguf", kind="cpp", log=log)
    assert not log.exists()
    exe, _ = fake_server
    with LlamaCppServer(tmp_path / "m.gguf", kind="native", binary=exe, log=log):
        assert log.exists() and str(log) not in _open_paths()
