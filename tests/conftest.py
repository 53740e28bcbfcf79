"""Shared pytest configuration. Tests never touch the network.

Markers (registered in pyproject.toml):

- ``shared_data(name, ...)``: the test reads ``<name>`` of the maintainers' raw data (not shipped, so a
  user's clone does not have it; root: :func:`quantgym._util.shared_data_dir`, ``QUANTGYM_SHARED_DATA``). Without
  it the test skips in one line naming the folder.
- ``slow``: a long end-to-end test; deselected by default (``pytest -m slow`` runs them).
"""

import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_runtest_setup(item):
    from quantgym._util import shared_data_dir

    for mark in item.iter_markers("shared_data"):
        for name in mark.args:
            if not (shared_data_dir() / name).exists():
                pytest.skip(f"needs the maintainers' raw data {shared_data_dir() / name} (not shipped with quantgym)")
