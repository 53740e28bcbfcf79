"""Every terminal table is readable at 80 columns and complete at 120 (issue #18 item 1): no `…` in a
number or a name, no line wider than the terminal."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

from quantgym.cli import app
from quantgym.tables import Col, layout, print_table


def _render(width: int, *args, **kw) -> tuple[str, int]:
    buf = io.StringIO()
    con = Console(file=buf, width=width, force_terminal=False, color_system=None)
    n = print_table(con, *args, **kw)
    return buf.getvalue(), n


def assert_fits(text: str, width: int) -> None:
    assert "…" not in text, text
    assert all(len(ln) <= width for ln in text.splitlines()), max(text.splitlines(), key=len)


def test_layout_keeps_every_cell_whole_and_repeats_the_keys():
    cols = [Col("period", "left"), Col("agent", "left"), *[Col(f"metric {i}", short=f"m{i}") for i in range(12)]]
    rows = [["covid_2020", "Black-Litterman", *[f"{-1234.5678 * i:.4f}" for i in range(12)]],
            ["normal_2024", "Cov. Risk Parity", *[f"{0.5 * i:.4f}" for i in range(12)]]]
    for width in (80, 120, 200):
        text, n = _render(width, "T", cols, rows, keys=2)
        assert_fits(text, width)
        for r in rows:
            for cell in r:
                assert cell in text
        assert text.count("Black-Litterman") == n and (n == 1) == (width >= 200)
    short, groups = layout(cols, rows, 120, keys=2)
    assert short and all(g[:2] == [0, 1] for g in groups) and sorted({i for g in groups for i in g}) == list(range(14))


def test_full_headers_when_they_fit_short_ones_before_splitting():
    cols = [Col("agent", "left"), Col("Sharpe ratio", short="Sharpe")]
    assert layout(cols, [["a", "1.0"]], 80) == (False, [[0, 1]])
    cols = [Col("agent", "left"), *[Col(f"long header {i}", short=f"h{i}") for i in range(6)]]
    short, groups = layout(cols, [["a", *["1.0"] * 6]], 80)
    assert short and len(groups) == 1


@pytest.mark.parametrize("width", [80, 120])
def test_qa_table_fits(width, tmp_path):
    r = CliRunner().invoke(app, ["qa", "--agent", "oracle", "--agent", "naive", "--n", "2", "--out",
                                 str(tmp_path / "q"), "-q"], env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    assert_fits(r.output, width)
    for col in ("T1", "T7", "Mean", "T4_r", "Side."):
        assert col in r.output
