"""The committed build script regenerates the bundle (skips without the maintainers' raw data)."""

from __future__ import annotations


import pandas as pd
import pytest

from quantgym._util import shared_data_dir
from quantgym.envs.portbench.build_data import build
from quantgym.envs.portbench.raw import bundled_portbench_path

SOURCE = shared_data_dir() / "portbench"


@pytest.mark.shared_data("portbench")
def test_build_reproduces_bundle(tmp_path):
    prov = build(SOURCE, tmp_path)
    root = bundled_portbench_path()
    for name in ("prices.parquet", "macro.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / name), pd.read_parquet(root / name))
    for name in ("assets.csv", "macro_series.csv", "PROVENANCE.md"):
        assert (tmp_path / name).read_bytes() == (root / name).read_bytes()
    assert prov["macro"]["absent"] == ["TEDRATE"]
    assert len(prov["prices"]["columns"]) == 81  # 80 tradable + ^VIX
