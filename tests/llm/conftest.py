"""Fixtures of the LLM-agent tests: a real local OpenAI-compatible server (see server.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("openai")

from .server import ScriptedServer  # noqa: E402


@pytest.fixture
def server():
    srv = ScriptedServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def server_no_rf():
    """A server that rejects ``response_format`` with a 400."""
    srv = ScriptedServer(supports_response_format=False).start()
    yield srv
    srv.stop()


@pytest.fixture
def sleeps(monkeypatch):
    """Record the engine's sleeps instead of sleeping (no timing in the assertions)."""
    from quantgym.agents.llm import client as client_mod

    calls: list[float] = []
    monkeypatch.setattr(client_mod.time, "sleep", lambda s: calls.append(float(s)))
    return calls
