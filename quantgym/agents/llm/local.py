"""Start a local llama.cpp server for tests and benchmarks: llama-cpp-python's or llama.cpp's own.

- ``kind="python"`` (default): ``python -m llama_cpp.server``, extra ``llm-server`` (``pip install -e
  '.[llm-server]'``: llama-cpp-python, built from source, about 5-10 minutes on 2 cores). The
  real-model tests use it.
- ``kind="native"``: llama.cpp's ``llama-server`` binary (:func:`find_llama_server`: ``binary=`` or
  ``$QUANTGYM_LLAMA_SERVER`` or ``llama-server`` on the PATH), e.g. built from the llama.cpp source that the
  llama-cpp-python sdist vendors (``docs/llm-agents.md``). Its grammar-constrained sampling checks the
  sampled token first and falls back to the full grammar only on a miss, where llama-cpp-python 0.3
  applies the grammar to the whole vocabulary at every token (several times slower with a JSON schema of
  80 keys). It serves ``parallel`` requests at once (one slot each, ``n_ctx`` split across them);
  ``server_args`` passes further options through (e.g. ``["--metrics"]``).

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
from typing import Sequence


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_llama_server(binary: str | os.PathLike | None = None) -> str:
    """The ``llama-server`` executable: ``binary``, else ``$QUANTGYM_LLAMA_SERVER``, else ``llama-server`` on the
    PATH.

    Raises
    ------
    RuntimeError
        One line naming the three ways to give it, when none names an existing file.
    """
    import shutil

    given = binary or os.environ.get("QUANTGYM_LLAMA_SERVER")
    exe = str(given) if given else shutil.which("llama-server")
    if not exe or not Path(exe).is_file():
        where = f"{exe} does not exist" if given else "no llama-server on the PATH"
        raise RuntimeError(f"llama-server not found ({where}): pass its path (binary= / --binary), set "
                           "$QUANTGYM_LLAMA_SERVER, or put llama-server on the PATH")
    return exe


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
    kind : ``"python"`` (llama-cpp-python) or ``"native"`` (llama.cpp's ``llama-server``).
    binary : the ``llama-server`` executable for ``kind="native"`` (default: :func:`find_llama_server`).
    chat_format : llama-cpp-python's ``--chat_format`` (``kind="python"``; default: the GGUF's own template).
        ``"chatml-function-calling"`` gives native ``tools`` / ``tool_calls`` (docs/llm-agents.md, "Tool-using
        agents"); the GGUF template takes ``tools`` but never answers with ``tool_calls``.
    jinja : ``kind="native"``: start ``llama-server --jinja`` (the model's template parses tool calls).
    parallel : ``kind="native"``: slots, i.e. requests decoded at once (``--parallel``; ``n_ctx`` is split
        across them). llama-cpp-python's server has one; it rejects any other value.
    server_args : further command-line options, appended as given.

    Attributes
    ----------
    command : the server's command line (list of strings).

    Raises
    ------
    RuntimeError
        If the server exits or does not answer within ``startup_timeout``.
    """

    def __init__(self, model: str | os.PathLike, n_ctx: int = 4096, n_threads: int = 2, alias: str = "smollm2",
                 log: str | os.PathLike | None = None, startup_timeout: float = 120.0, kind: str = "python",
                 binary: str | os.PathLike | None = None, chat_format: str | None = None, jinja: bool = False,
                 parallel: int = 1, server_args: Sequence[str] = ()):
        self.model = Path(model)
        self.n_ctx, self.n_threads, self.alias, self.parallel = int(n_ctx), int(n_threads), alias, int(parallel)
        if self.parallel < 1:
            raise ValueError(f"parallel must be >= 1, got {parallel}")
        if kind == "python" and self.parallel != 1:
            raise ValueError("parallel > 1 needs kind='native' (llama-cpp-python's server decodes one request at a "
                             "time)")
        self.port = free_port()
        self.log = Path(log) if log is not None else None
        if kind == "python":
            cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--host", "127.0.0.1",
                   "--port", str(self.port), "--model_alias", alias, "--n_ctx", str(self.n_ctx),
                   "--n_threads", str(self.n_threads), "--verbose", "False"]
            if chat_format:
                cmd += ["--chat_format", chat_format]
        elif kind == "native":
            cmd = [find_llama_server(binary), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port),
                   "-c", str(self.n_ctx), "-t", str(self.n_threads), "--alias", alias, "--parallel",
                   str(self.parallel)] + (["--jinja"] if jinja else [])
        else:
            raise ValueError(f"kind must be 'python' or 'native', got {kind!r}")
        cmd += [str(a) for a in server_args]
        self.kind, self.command = kind, cmd
        # the log is opened once the arguments are checked, and closed here: the server holds its own copy
        if self.log is None:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        else:
            with self.log.open("wb") as out:
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


__all__ = ["LlamaCppServer", "find_llama_server", "free_port"]
