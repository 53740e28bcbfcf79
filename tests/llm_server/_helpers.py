"""Shared by the real-server test modules: the decision window they run and readers of ``quantgym eval``'s
results.json."""

from __future__ import annotations

import json

from quantgym.results import to_jsonable

#: one weekly PortBench decision date (2020-03-02): S1-S3 once, daily returns to the week's end
PERIOD_1_CLI = "2020-03-02:2020-03-06:weekly"
PERIOD_1 = {"start": "2020-03-02", "end": "2020-03-06", "freq": "weekly"}


def canon(x) -> str:
    """A result as canonical JSON (sorted keys), for bit-for-bit comparisons of a run and its replay."""
    return json.dumps(to_jsonable(x), sort_keys=True)


def tasks(out) -> dict:
    """``results.json["tasks"]`` of the run written to the folder ``out``."""
    return json.loads((out / "results.json").read_text())["tasks"]


def runs(out) -> list[dict]:
    """The PortBench runs of the run written to the folder ``out``."""
    return tasks(out)["portbench"]["runs"]
