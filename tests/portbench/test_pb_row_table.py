"""The per-dataset row table (market.row_table) holds, row for row, the bits of the per-row snapshot rules
(spec §1.6 window, §11.6 availability, §1.9 regime): a cold step reads its row instead of computing it."""

from __future__ import annotations

import numpy as np
import pytest

from quantgym.envs.portbench.config import PortBenchConfig
from quantgym.envs.portbench.data import load_portbench_data
from quantgym.envs.portbench.market import MarketView


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if hasattr(a, "equals"):
        return a.equals(b)
    return a == b


@pytest.mark.parametrize("as_of", ["close", "previous_close"])
def test_row_table_parts_equal_the_per_row_rules(as_of):
    view = MarketView(load_portbench_data(), PortBenchConfig(as_of=as_of))
    per_row = MarketView(load_portbench_data(), PortBenchConfig(as_of=as_of))
    per_row._table = lambda: None  # the per-row rules
    assert view.table() is not None
    rows = range(1, view.returns.shape[0], 7)
    for t in rows:
        a, b = view._compute_row_parts(t), per_row._compute_row_parts(t)
        assert a.keys() == b.keys()
        for k in a:
            assert _same(a[k], b[k]), (t, k)
        assert not a["available"].flags.writeable and not a["ann_vol"].flags.writeable
    regimes = set(view.table()["regime"].tolist())
    assert {"bull", "sideways"} <= regimes  # the labels are exercised, not all one value
