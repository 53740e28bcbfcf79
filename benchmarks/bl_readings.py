"""Paper-mode Black–Litterman, 2024, under each reading of the repo's §8.6 code, against the page (§10.2).

    python benchmarks/bl_readings.py                 # print the table
    python benchmarks/bl_readings.py --json OUT      # also write the rows (used by docs_tables.py --measure)

Every other paper flag as in ``PaperFidelity.paper()`` (universe ``89_no_crypto``), direct runner, like
the paper column of ``quantgym reproduce portbench``; one row per ``PaperFidelity.bl_reading``. The
``slsqp`` row depends on the machine's floating-point kernels (SLSQP's line search reports failure or not
on the last bits), so docs/fidelity.md renders the committed result file benchmarks/results/bl-readings.json
and CI never re-measures it.

Because of that dependence, the script also asks which *sets of decisions* at which the repo's SLSQP
reported failure (equal weight there, §8.6) and reached the optimum elsewhere would give the page's row:
all 2^11 sets are ranked by splicing the daily returns of the two extreme runs (exact everywhere, equal
weight everywhere; the trading cost at a switch is not that of a real run), and a local search of exact
runs (one decision flipped at a time) starts from the best three.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from quantgym.envs.portbench.baselines import BlackLitterman, _equal, _finish
from quantgym.envs.portbench.paper.config import PaperFidelity
from quantgym.envs.portbench.paper.reproduce import METRICS, PUBLISHED_2024
from quantgym.envs.portbench.paper.simulator import run_direct

PAGE = dict(zip(METRICS, PUBLISHED_2024["black_litterman"]))


class FallbackAt(BlackLitterman):
    """§8.6 solved exactly, but equal weight over its assets (as after a reported solver failure) at the
    decisions numbered in ``at`` (0 = the first decision)."""

    def __init__(self, at) -> None:
        super().__init__()
        self.at, self.k = set(at), 0

    def allocate(self, r, avail):
        k, self.k = self.k, self.k + 1
        return _finish(_equal(avail.size, np.flatnonzero(avail))) if k in self.at else super().allocate(r, avail)


def _distance(m: dict) -> float:
    """Distance to the page's row: |ΔRet| + |ΔVol| + |ΔMaxDD| in percentage points."""
    return sum(abs(m[k] - PAGE[k]) for k in ("ret_pct", "vol_pct", "maxdd_pct"))


def _summary(r: np.ndarray) -> dict:
    nav = np.cumprod(1.0 + r)
    return {"ret_pct": 100 * (nav[-1] - 1), "vol_pct": 100 * r.std(ddof=1) * np.sqrt(252),
            "maxdd_pct": 100 * float((nav / np.maximum.accumulate(nav) - 1).min())}


def fallback_patterns(top: int = 5, starts: int = 3, period: str = "normal_2024") -> dict:
    """The sets of equal-weight decisions nearest the page: ranked by splicing, then a local search of
    exact runs (flip one decision at a time while the distance falls) from the ``starts`` best."""
    flags = PaperFidelity.paper()
    exact = run_direct(FallbackAt(()), period, flags, keep_weights=True)
    n = exact.n_decisions
    ew = run_direct(FallbackAt(range(n)), period, flags)
    ra, rb = exact.nav.pct_change().to_numpy()[1:], ew.nav.pct_change().to_numpy()[1:]
    dates = [d for d, _ in exact.weights]
    start = list(exact.nav.index[1:].searchsorted(np.array(dates, dtype="datetime64[ns]"))) + [ra.size]
    ranked = []
    for mask in range(2 ** n):
        r = ra.copy()
        for k in range(n):
            if mask >> k & 1:
                r[start[k]:start[k + 1]] = rb[start[k]:start[k + 1]]
        ranked.append((_distance(_summary(r)), mask))
    ranked.sort()
    runs: dict[int, dict] = {}

    def run(mask: int) -> float:
        if mask not in runs:
            m = run_direct(FallbackAt([k for k in range(n) if mask >> k & 1]), period, flags).metrics
            runs[mask] = {k: m[k] for k in METRICS}
        return _distance(runs[mask])

    for _, mask in ranked[:starts]:
        best = run(mask)
        while True:
            d, flip = min((run(mask ^ (1 << k)), k) for k in range(n))
            if d >= best:
                break
            best, mask = d, mask ^ (1 << flip)
    rows = sorted(({"fallback_dates": [dates[k] for k in range(n) if mask >> k & 1], **m, "distance_pp": _distance(m)}
                   for mask, m in runs.items()), key=lambda x: x["distance_pp"])
    return {"n_decisions": n, "n_sets": 2 ** n, "n_exact_runs": len(runs), "nearest": rows[:top]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, default=None, help="write the rows to this file")
    a = ap.parse_args()
    import scipy

    from quantgym.envs.portbench.paper import reproduce as rp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rows = rp.black_litterman_readings()
        patterns = fallback_patterns()
    print(rp._md(*rp.table_bl_readings(rows)))
    print(json.dumps(patterns, indent=1))
    if a.json is not None:
        a.json.write_text(json.dumps({"scipy": scipy.__version__, "rows": rows, "patterns": patterns}, indent=1)
                          + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
