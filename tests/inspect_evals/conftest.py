"""Inspect's ``mockllm/model`` counts prompt tokens with tiktoken's o200k_base encoding, which tiktoken downloads
on first use; the tests run without network, so the count is characters / 4 here (the scores never read it)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _offline_token_count(monkeypatch):
    model = pytest.importorskip("inspect_ai.model._model")
    monkeypatch.setattr(model, "count_text_tokens", lambda text: max(1, len(text) // 4))
