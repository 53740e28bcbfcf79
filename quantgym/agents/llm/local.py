"""Start a local llama.cpp server for tests and benchmarks: llama-cpp-python's or llama.cpp's own.

- ``kind="python"`` (default): ``python -m llama_cpp.server``, extra ``llm-server`` (``pip install -e
  '.[llm-server]'``: llama-cpp-python, built from source, about 5-10 minutes on 2 cores). The
  real-model tests use it.
- ``kind="native"``: llama.cpp's ``llama-server`` binary (``binary=`` or ``$QUANTGYM_LLAMA_SERVER`` or
  ``llama-server`` on the PATH), e.g. built from the llama.cpp source that the llama-cpp-python sdist
  vendors (``docs/llm-agents.md``). Its grammar-constrained sampling checks the sampled token first
  and falls back to the full grammar only on a miss, where llama-cpp-python 0.3 applies the grammar
  to the whole vocabulary at every token (several times slower with a JSON schema of 80 keys).

Both with SmolLM2-135M-Instruct (:func:`quantgym.agents.llm.tokens.find_test_model`)::

    from quantgym.agents.llm.local import LlamaCppServer
    with LlamaCppServer("SmolLM2-135M-Instruct.Q4_1.gguf", n_ctx=8192) as srv:
        print(srv.base_url)   # http://127.0.0.1:<port>/v1, model name "smollm2"

The server listens on 127.0.0.1 only, on a free port, and is stopped on ``stop()`` / leaving the block.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaCppServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 with one GGUF model.

    Parameters
    ----------
    model : path of the GGUF file.
    n_ctx : context window in tokens (llama-cpp-python's default is 2,048).
    n_threads : CPU threads for generation.
    alias : the model name clients send (``openai:<alias>``).
    log : file for the server's output (default: discarded).
    startup_timeout : seconds to wait until ``GET /v1/models`` answers.
    kind : ``"python"`` (llama-cpp-python) or ``"native"`` (llama.cpp's ``llama-server``, one slot).
    binary : the ``llama-server`` executable for ``kind="native"``.
    chat_format : llama-cpp-python's ``--chat_format`` (``kind="python"``; default: the GGUF's own template).
        ``"chatml-function-calling"`` gives native ``tools`` / ``tool_calls`` (docs/llm-agents.md, "Tool-using
        agents"); the GGUF template takes ``tools`` but never answers with ``tool_calls``.
    jinja : ``kind="native"``: start ``llama-server --jinja`` (the model's template parses tool calls).

    Raises
    ------
    RuntimeError
        If the server exits or does not answer within ``startup_timeout``.
    """

    def __init__(self, model: str | os.PathLike, n_ctx: int = 4096, n_threads: int = 2, alias: str = "smollm2",
                 log: str | os.PathLike | None = None, startup_timeout: float = 120.0, kind: str = "python",
                 binary: str | os.PathLike | None = None, chat_format: str | None = None, jinja: bool = False):
        self.model = Path(model)
        self.n_ctx, self.n_threads, self.alias = int(n_ctx), int(n_threads), alias
        self.port = free_port()
        self.log = Path(log) if log is not None else None
        out = self.log.open("wb") if self.log is not None else subprocess.DEVNULL
        if kind == "python":
            cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--host", "127.0.0.1",
                   "--port", str(self.port), "--model_alias", alias, "--n_ctx", str(self.n_ctx),
                   "--n_threads", str(self.n_threads), "--verbose", "False"]
            if chat_format:
                cmd += ["--chat_format", chat_format]
        elif kind == "native":
            import shutil

            exe = str(binary or os.environ.get("QUANTGYM_LLAMA_SERVER") or shutil.which("llama-server") or "")
            if not exe or not Path(exe).is_file():
                raise RuntimeError("llama-server not found: pass binary= or set $QUANTGYM_LLAMA_SERVER")
            cmd = [exe, "-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port), "-c", str(self.n_ctx),
                   "-t", str(self.n_threads), "--alias", alias, "--parallel", "1"] + (["--jinja"] if jinja else [])
        else:
            raise ValueError(f"kind must be 'python' or 'native', got {kind!r}")
        self.kind = kind
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:] if self.log is not None else ""
                raise RuntimeError(f"llama.cpp server exited with code {self.proc.returncode}: {tail}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                    if json.loads(r.read())["data"][0]["id"] == alias:
                        return
            except (OSError, ValueError, KeyError, IndexError):
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama.cpp server did not answer within {startup_timeout:g} s")

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible endpoint (``--base-url``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        """Terminate the server (kill after 10 s) and reap it."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self) -> "LlamaCppServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


__all__ = ["LlamaCppServer", "free_port"]
