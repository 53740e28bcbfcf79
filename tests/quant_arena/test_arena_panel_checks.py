"""A Quant-Arena panel with a bar that cannot be (high below low) or a negative volume is refused in one line that
counts the rows and names the first ones (date, symbol, the values)."""

from __future__ import annotations

import pandas as pd
import pytest

from quantgym.envs.quant_arena.data import load_dataset
from tests.quant_arena.conftest import flat_rows, make_panel

DATES = ["2024-01-02", "2024-01-03", "2024-01-04"]
SYMBOLS = ["600000.SH", "000001.SZ"]


def test_a_clean_panel_loads():
    assert make_panel(flat_rows(SYMBOLS, DATES)).N == 2


def test_high_below_low_is_refused_naming_the_rows():
    rows = flat_rows(SYMBOLS, DATES)
    for r in rows[:4]:
        r.update(high=9.5, low=10.5)
    with pytest.raises(ValueError) as e:
        make_panel(rows)
    msg = str(e.value)
    assert msg == ("panel has 4 row(s) with high < low: 2024-01-02 600000.SH high 9.5 low 10.5; "
                   "2024-01-02 000001.SZ high 9.5 low 10.5; 2024-01-03 600000.SH high 9.5 low 10.5; ...")
    assert "\n" not in msg


def test_a_negative_volume_is_refused_naming_the_row(tmp_path):
    rows = flat_rows(SYMBOLS, DATES)
    rows[5]["volume"] = -100
    with pytest.raises(ValueError, match=r"^panel has 1 row\(s\) with a negative volume: 2024-01-04 000001.SZ "
                                         r"volume -100$"):
        make_panel(rows)
    df = pd.DataFrame(rows).assign(high=10.0, low=10.0, adj_factor=1.0, volume=lambda x: x["volume"].fillna(1e6))
    df.to_parquet(tmp_path / "panel.parquet")
    with pytest.raises(ValueError, match="negative volume: 2024-01-04 000001.SZ"):  # a user file: the same line
        load_dataset(tmp_path / "panel.parquet")
