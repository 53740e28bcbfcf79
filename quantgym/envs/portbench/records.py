"""The PortBench decision records: one record per traded decision of an episode, and their score summary.

:class:`DecisionRecords` keeps each decision as one flat row and builds its dict when read
(:attr:`PortBenchEnv.records <quantgym.envs.portbench.env.PortBenchEnv.records>`). A row holds numbers, strings,
arrays and tuples of numbers and strings only, at most one tuple deep: the garbage collector untracks such a
row before it reaches its oldest generation, so an episode of records never triggers its full collections, and
an agent that never reads the records does not build, keep and free a record dict and a weights dict per
decision (speed only; measured in docs/performance.md). The per-step DataFrames of a wrapped env are
:class:`~quantgym.envs.portbench.recording.RecordEpisode`'s job.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from quantgym.envs.portbench.ceps import ceps_tier
from quantgym.envs.portbench.simulator import by_ticker
from quantgym.envs.portbench.stages import RiskReport

STAGE_KEYS = ("S1", "S2", "S3", "S4", "S5")
#: the parts of the S3 score kept in a record (``s3_parts``)
S3_PARTS = ("accuracy", "mae", "intra", "inter", "corr")
#: the columns of a row (invalid, coerced, status: dicts as :func:`flat` items); scoring on appends SCORED_FIELDS,
#: then var, drawdown, drift, alerts (tuple), trigger of the risk report and of the truth's report
#: (:func:`report_fields`), then the S3 oracle's fallback note (None when the oracle solved)
ROW_FIELDS = ("date", "regime", "n_available", "available", "turnover", "cost", "nav_after", "invalid", "coerced",
              "status", "w_hat", "w_pos")
SCORED_FIELDS = ("scores", "ceps", "pas", "s3_values", "tau_hat", "tau_star")
_ROW_BASE = len(ROW_FIELDS)
#: column of a row by name (ROW_FIELDS, then SCORED_FIELDS, then "risk" and "risk_truth": 5 columns each,
#: then "oracle_fallback")
COL = {name: i for i, name in enumerate(ROW_FIELDS + SCORED_FIELDS)}
COL["risk"] = len(COL)
COL["risk_truth"] = COL["risk"] + 5
COL["oracle_fallback"] = COL["risk_truth"] + 5


def flat(d: dict) -> tuple:
    """``{k1: v1, k2: v2}`` → ``(k1, v1, k2, v2)`` (one tuple, no inner tuple)."""
    return tuple([x for kv in d.items() for x in kv]) if d else ()


def unflat(t: tuple) -> dict:
    """The dict of a :func:`flat` tuple."""
    return dict(zip(t[::2], t[1::2]))


def report_fields(rep: RiskReport) -> tuple:
    """A :class:`RiskReport`'s fields (var, drawdown, drift, alerts as a tuple, trigger)."""
    return (rep.var, rep.drawdown, rep.drift, tuple(rep.alerts), rep.trigger)


class DecisionRecords:
    """The rows of one episode's traded decisions and their dicts, built when read.

    ``tickers``: the universe as an object array (the weights dicts' keys).
    """

    def __init__(self, tickers: np.ndarray):
        self.tickers = tickers
        #: one flat row per traded decision (columns: :data:`COL`)
        self.rows: list[tuple] = []
        self._dicts: list[dict] = []

    def append(self, row: tuple) -> None:
        self.rows.append(row)

    def dicts(self) -> list[dict]:
        """One dict per row, oldest first (see ``PortBenchEnv.records``): the same list object for the
        episode, brought up to date on each call."""
        recs, rows = self._dicts, self.rows
        for i in range(len(recs), len(rows)):
            row = rows[i]
            date, regime, n_avail, avail, tau, cost, nav, invalid, coerced, status, w, w_pos = row[:_ROW_BASE]
            rec: dict[str, Any] = {"date": date, "regime": regime, "n_available": n_avail}
            if len(row) > _ROW_BASE:  # scoring on
                scores, ceps_val, pas, s3_vals, tau_hat, tau_star = row[_ROW_BASE : COL["risk"]]
                rec.update({"stage_scores": unflat(scores), "ceps": ceps_val, "pas": pas,
                            "s3_parts": dict(zip(S3_PARTS, s3_vals)), "tau_hat": tau_hat, "tau_star": tau_star,
                            "risk": RiskReport(*row[COL["risk"] : COL["risk_truth"]]).as_dict(),
                            "risk_truth": RiskReport(*row[COL["risk_truth"] : COL["oracle_fallback"]]).as_dict()})
                if row[COL["oracle_fallback"]] is not None:
                    rec["oracle_fallback"] = row[COL["oracle_fallback"]]
            rec.update({"turnover": tau, "cost": cost, "nav_after_trade": nav, "invalid": unflat(invalid),
                        "coerced": unflat(coerced), "status": unflat(status),
                        "weights": by_ticker(w, self.tickers, w_pos, avail)})
            recs.append(rec)
        return recs

    def score_summary(self, refused_status: int) -> dict[str, Any]:
        """The episode's score metrics (§7) from the scored rows: ``stage_means``, ``ceps``, ``ceps_tier``,
        ``pas``, ``turnover_ratio``, ``refused_steps`` / ``refused_rate`` (a stage with status
        ``refused_status``), ``invalid_steps``, and ``oracle_fallbacks`` (decisions whose S3 oracle fell back to
        equal weight on a solver failure, spec §4.3) when there was one; the scores None without scored rows."""
        rows = [r for r in self.rows if len(r) > _ROW_BASE]
        if not rows:
            return {"stage_means": None, "ceps": None, "ceps_tier": None, "pas": None}
        c = COL
        scores = [unflat(r[c["scores"]]) for r in rows]
        ceps_mean = float(np.mean([r[c["ceps"]] for r in rows]))
        ratios = [r[c["tau_hat"]] / r[c["tau_star"]] for r in rows if r[c["tau_star"]] > 0]
        refused = sum(1 for r in rows if refused_status in r[c["status"]][1::2])
        out = {
            "stage_means": {s: float(np.mean([sc[s] for sc in scores])) for s in STAGE_KEYS},
            "ceps": ceps_mean, "ceps_tier": ceps_tier(ceps_mean),
            "pas": float(np.mean([r[c["pas"]] for r in rows])),
            "turnover_ratio": float(np.mean(ratios)) if ratios else None,
            "refused_steps": refused, "refused_rate": refused / len(rows),
            "invalid_steps": sum(1 for r in rows if r[c["invalid"]]),
        }
        fallbacks = sum(1 for r in rows if r[c["oracle_fallback"]] is not None)
        if fallbacks:
            out["oracle_fallbacks"] = fallbacks
        return out


__all__ = ["COL", "DecisionRecords", "S3_PARTS", "flat", "report_fields", "unflat"]
