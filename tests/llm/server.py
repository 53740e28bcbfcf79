"""A real OpenAI-compatible HTTP server for the LLM-agent tests (stdlib ``http.server`` in a thread).

It answers ``POST /v1/chat/completions`` from a script: a FIFO of reply specs, then an optional
``responder(request) -> spec`` for everything else. A spec is a string (the answer) or a dict:

- ``{"content": str}`` — a normal completion (usage = characters / 4, deterministic);
- ``{"status": 429 | 500 | ..., "message": str}`` — an error response (429 carries ``Retry-After: 0``);
- ``{"delay": seconds, ...}`` — sleep first (a client with a shorter timeout gives up);
- ``{"drop": True}`` — close the connection without any response (a server that went away mid-run);
- a callable ``f(request_json) -> spec``.

Server options: ``api_key`` (401 otherwise), ``models`` (404 ``model_not_found`` otherwise),
``supports_response_format`` (False: a request with ``response_format`` gets a 400 naming it),
``accept_rf`` (the ``response_format`` rungs accepted: ``json_schema``, ``json_object_schema``,
``json_object``; others get ``rf_status`` with a body naming ``response_format``: 400, or 500 like
llama-cpp-python), ``context_window`` (prompt characters / 4 + ``max_tokens`` over it: HTTP 400 in
llama-cpp-python's words), ``models_meta`` (extra fields of the ``GET /v1/models`` entry),
``reject_params`` (param -> 400 message for requests carrying it).
Every received request body is kept in ``requests``. :meth:`ScriptedServer.kill` ends the server as a crash
does: the listening socket and every open connection close at once (clients then see refused connections).
"""

from __future__ import annotations

import collections
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


class ScriptedServer:
    def __init__(self, api_key: str = "test-key", models=("test-model",), supports_response_format: bool = True,
                 reject_params: dict | None = None, accept_rf=("json_schema", "json_object_schema", "json_object"),
                 rf_status: int = 400, context_window: int | None = None, models_meta: dict | None = None,
                 context_message: str | None = None):
        self.api_key = api_key
        self.accept_rf = set(accept_rf) if supports_response_format else set()
        self.rf_status = int(rf_status)
        self.context_window = context_window
        self.context_message = context_message  # another wording of the context-length error (no numbers)
        self.models_meta = dict(models_meta or {})
        self.reject_params = dict(reject_params or {})
        self.models = set(models)
        self.supports_response_format = supports_response_format
        self.queue: collections.deque = collections.deque()
        self.responder: Callable[[dict], Any] | None = None
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set = set()  # open client connections (closed by kill)

    # ------------------------------------------------------------------ control
    def script(self, *specs: Any) -> "ScriptedServer":
        self.queue.extend(specs)
        return self

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "ScriptedServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # one small response = one segment (no 40 ms delayed-ACK stall)

            def log_message(self, *args):  # quiet
                pass

            def setup(self):
                super().setup()
                with server._lock:
                    server._conns.add(self.connection)

            def _send(self, status: int, doc: dict, headers: dict | None = None) -> None:
                body = json.dumps(doc).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):  # noqa: N802
                if self.path.rstrip("/").endswith("/v1/models"):
                    return self._send(200, {"object": "list", "data": [
                        {"id": m, "object": "model", **server.models_meta} for m in sorted(server.models)]})
                return self._send(404, {"detail": "Not Found"})

            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                if self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    return self._send(401, {"error": {"message": "Incorrect API key provided",
                                                      "type": "invalid_request_error", "code": "invalid_api_key"}})
                if req.get("model") not in server.models:
                    return self._send(404, {"error": {"message": f"The model `{req.get('model')}` does not exist",
                                                      "type": "invalid_request_error", "code": "model_not_found"}})
                with server._lock:
                    server.requests.append(req)
                rf = req.get("response_format")
                if rf is not None:
                    rung = rf.get("type")
                    rung = "json_object_schema" if rung == "json_object" and "schema" in rf else rung
                    if rung not in server.accept_rf:
                        return self._send(server.rf_status, {"error": {
                            "message": f"response_format type {rung} is not supported by this server "
                                       "('loc': ('body', 'response_format', 'type'))",
                            "type": "invalid_request_error" if server.rf_status < 500 else "internal_server_error"}})
                if server.context_window is not None:
                    ptoks = sum(len(str(m.get("content", ""))) for m in req.get("messages", [])) // 4
                    need = ptoks + int(req.get("max_tokens") or 0)
                    if need > server.context_window and server.context_message:
                        return self._send(400, {"error": {"message": server.context_message,
                                                          "type": "exceed_context_size_error"}})
                    if need > server.context_window:
                        return self._send(400, {"error": {
                            "message": f"This model's maximum context length is {server.context_window} tokens. "
                                       f"However, you requested {need} tokens ({ptoks} in the messages, "
                                       f"{int(req.get('max_tokens') or 0)} in the completion). Please reduce the "
                                       "length of the messages or completion.",
                            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
                for param, message in server.reject_params.items():
                    if param in req:
                        return self._send(400, {"error": {"message": message, "type": "invalid_request_error",
                                                          "param": param}})
                with server._lock:
                    spec = server.queue.popleft() if server.queue else None
                if spec is None and server.responder is not None:
                    spec = server.responder
                if spec is None:
                    return self._send(500, {"error": {"message": "script exhausted", "type": "server_error"}})
                if callable(spec):
                    spec = spec(req)
                if isinstance(spec, str):
                    spec = {"content": spec}
                if spec.get("delay"):
                    time.sleep(float(spec["delay"]))
                if spec.get("drop"):
                    self.close_connection = True  # no response at all: the client sees a dropped connection
                    return None
                if spec.get("status"):
                    hdr = {"Retry-After": "0"} if spec["status"] == 429 else {}
                    return self._send(int(spec["status"]), {"error": {"message": spec.get("message", "error"),
                                                                      "type": "server_error"}}, hdr)
                content = spec.get("content", "")
                ptoks = spec.get("prompt_tokens", sum(len(str(m.get("content", ""))) for m in req.get("messages", [])) // 4)
                ctoks = len(content) // 4
                choices = [{"index": 0, "finish_reason": spec.get("finish_reason", "stop"),
                            "message": {"role": "assistant", "content": content}}]
                self._send(200, {
                    "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion", "created": 1700000000,
                    "model": req["model"],
                    "choices": spec["choices"] if "choices" in spec else choices,
                    "usage": {"prompt_tokens": ptoks, "completion_tokens": ctoks, "total_tokens": ptoks + ctoks},
                })

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def kill(self) -> None:
        """End the server as a crash does: stop listening and close every open connection."""
        import socket

        self.stop()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None


def fast_options(srv, tmp_path, name="run", **kw):
    """Agent options for tests: the local server, tiny backoff, short timeout, a transcript in tmp_path."""
    opts = dict(base_url=srv.base_url, api_key="test-key", timeout=5.0, retries=3, backoff_base=0.01,
                backoff_max=0.05, transcript=tmp_path / f"{name}.jsonl")
    opts.update(kw)
    return opts


def closed_port_url() -> str:
    """A ``/v1`` URL on a local port with nothing listening (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"

