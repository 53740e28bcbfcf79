"""Shared pytest configuration. Tests never touch the network."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")


import pytest  # noqa: E402


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the marks to group the tests
def pytest_collection_modifyitems(config, items):
    """With pytest-xdist (``-n``, pyproject's addopts): the real-server tests of tests/llm_server share one
    session-scoped llama.cpp server, so they run on one worker (``--dist loadgroup``) while the other
    workers take the rest of the suite."""
    for item in items:
        if "llm_server" in item.nodeid.split("::")[0].split("/"):
            item.add_marker(pytest.mark.xdist_group("llm_server"))
