"""The Equal-Weight reference rows of `quantgym eval` carry their own stress gate (spec portbench §7.2), as in
`quantgym bench`: the gate column is never left blank for them."""

from __future__ import annotations

import csv

from typer.testing import CliRunner

from quantgym.cli import app


def test_equal_weight_reference_row_has_its_gate(tmp_path):
    out = tmp_path / "ev"
    r = CliRunner().invoke(app, ["eval", "--agent", "min_variance", "--env", "PortBench-Balanced-v0",
                                 "--period", "covid_2020", "--out", str(out), "--no-plots", "--quiet"])
    assert r.exit_code == 0, r.output
    rows = {row["agent"]: row for row in csv.DictReader(open(out / "summary.csv"))}
    ew = rows["equal_weight"]
    # covid_2020 is a stress window: the gate is MaxDD within the balanced profile's 20 % tolerance
    assert float(ew["maxdd_pct"]) < -20 and ew["gate"] == "false"
    assert rows["min_variance"]["gate"] == "true"
