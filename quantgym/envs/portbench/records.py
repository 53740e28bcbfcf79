"""The PortBench decision records: one record per traded decision of an episode, and their score summary.

:class:`DecisionRecords` keeps each decision as a row of a preallocated array (weights, sums, turnover, cost, NAV)
plus references to shared or untracked objects, and builds its dict when read
(:attr:`PortBenchEnv.records <quantgym.envs.portbench.env.PortBenchEnv.records>`): an episode of records never
triggers the garbage collector's full collections, a ``reset`` frees a few arrays and lists instead of objects
per decision, and an agent that never reads the records does not build, keep and free a record dict and a
weights dict per decision (speed only). The per-step DataFrames of a wrapped env are
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


#: the decoded log of an allocation step whose three answers passed the compiled checks (no fallback, no message)
LEAN_STATUS = ("S1", 0, "S2", 0, "S3", 0)


def coerce_message(dropped: float, tot: float, tolerance: float) -> str | None:
    """The recorded S3 coercion note (:meth:`~quantgym.envs.portbench.actions.DecisionLog.coerce_note`), None when
    nothing was coerced."""
    summed = abs(tot - 1.0) > tolerance
    if dropped > 0:
        msg = f"weight {dropped:.6g} on unavailable assets dropped (§11.4)"
        return msg + f"; weights on the available assets summed to {tot:.6g}; normalised to 1 (§4.3)" if summed else msg
    return f"weights on the available assets summed to {tot:.6g}; normalised to 1 (§4.3)" if summed else None


class DecisionRecords:
    """The traded decisions of one episode, their dicts built when read.

    ``tickers``: the universe as an object array (the weights dicts' keys); ``capacity``: the number of
    decisions of the episode (more grow the block).

    Storage (speed only: an episode keeps no object per decision that is not shared, so ``reset`` frees a few
    arrays and lists instead of tens of thousands of objects): :attr:`block` holds one row per decision, the S3
    weights ``w_hat`` (:N), then Σ of the answer's weights on ``A_d``, Σ on unavailable assets, turnover, cost and
    NAV after the trade; :attr:`infos` the decision row's cached info dict (date, n_available, available tickers,
    regime); :attr:`logs` None for a step whose answers passed the compiled checks (status ok, nothing invalid,
    the coercion note derived from the two sums) or its ``(invalid, coerced, status)`` as :func:`flat` items;
    :attr:`scored` the scored fields (:data:`COL` from ``"scores"`` on) or None.
    """

    def __init__(self, tickers: np.ndarray, capacity: int = 0, tolerance: float = 0.0):
        self.tickers = tickers
        self.n_assets = n = len(tickers)
        self.block = np.empty((max(int(capacity), 1), n + 5))
        self.infos: list[dict] = []
        self.logs: list[tuple | None] = []
        self.scored: list[tuple | None] = []
        self.tolerance = tolerance
        self._dicts: list[dict] = []

    def __len__(self) -> int:
        return len(self.infos)

    def row(self) -> int:
        """The block row of the next decision (the block grown when full)."""
        k = len(self.infos)
        if k >= self.block.shape[0]:
            self.block = np.concatenate([self.block, np.empty_like(self.block)])
        return k

    def append(self, info: dict, w_hat: np.ndarray, tau: float, cost: float, nav_after: float,
               invalid: tuple, coerced: tuple, status: tuple, scored: tuple | None = None) -> None:
        """Record a decision decoded in Python (fallbacks, messages, scoring)."""
        k, n = self.row(), self.n_assets
        b = self.block[k]
        b[:n] = w_hat
        b[n + 2], b[n + 3], b[n + 4] = tau, cost, nav_after
        self.infos.append(info)
        self.logs.append((invalid, coerced, status))
        self.scored.append(scored)

    def _log(self, i: int) -> tuple:
        log = self.logs[i]
        if log is not None:
            return log
        n = self.n_assets
        msg = coerce_message(self.block[i, n + 1], self.block[i, n], self.tolerance)
        return (), (("S3", msg) if msg is not None else ()), LEAN_STATUS

    def dicts(self) -> list[dict]:
        """One dict per decision, oldest first (see ``PortBenchEnv.records``): the same list object for the
        episode, brought up to date on each call."""
        recs, n = self._dicts, self.n_assets
        for i in range(len(recs), len(self.infos)):
            info, b = self.infos[i], self.block[i]
            invalid, coerced, status = self._log(i)
            rec: dict[str, Any] = {"date": info["date"], "regime": info["regime"], "n_available": info["n_available"]}
            row = self.scored[i]
            if row is not None:  # scoring on
                c = _SC
                scores, ceps_val, pas, s3_vals, tau_hat, tau_star = row[: c["risk"]]
                rec.update({"stage_scores": unflat(scores), "ceps": ceps_val, "pas": pas,
                            "s3_parts": dict(zip(S3_PARTS, s3_vals)), "tau_hat": tau_hat, "tau_star": tau_star,
                            "risk": RiskReport(*row[c["risk"] : c["risk_truth"]]).as_dict(),
                            "risk_truth": RiskReport(*row[c["risk_truth"] : c["oracle_fallback"]]).as_dict()})
                if row[c["oracle_fallback"]] is not None:
                    rec["oracle_fallback"] = row[c["oracle_fallback"]]
            w = b[:n]
            rec.update({"turnover": float(b[n + 2]), "cost": b[n + 3], "nav_after_trade": b[n + 4],
                        "invalid": unflat(invalid), "coerced": unflat(coerced), "status": unflat(status),
                        "weights": by_ticker(w, self.tickers)})
            recs.append(rec)
        return recs

    def score_summary(self, refused_status: int) -> dict[str, Any]:
        """The episode's score metrics (§7) from the scored decisions: ``stage_means``, ``ceps``, ``ceps_tier``,
        ``pas``, ``turnover_ratio``, ``refused_steps`` / ``refused_rate`` (a stage with status
        ``refused_status``), ``invalid_steps``, and ``oracle_fallbacks`` (decisions whose S3 oracle fell back to
        equal weight on a solver failure, spec §4.3) when there was one; the scores None without scored rows."""
        idx = [i for i, r in enumerate(self.scored) if r is not None]
        if not idx:
            return {"stage_means": None, "ceps": None, "ceps_tier": None, "pas": None}
        c = _SC
        rows = [self.scored[i] for i in idx]
        logs = [self._log(i) for i in idx]
        scores = [unflat(r[c["scores"]]) for r in rows]
        ceps_mean = float(np.mean([r[c["ceps"]] for r in rows]))
        ratios = [r[c["tau_hat"]] / r[c["tau_star"]] for r in rows if r[c["tau_star"]] > 0]
        refused = sum(1 for lg in logs if refused_status in lg[2][1::2])
        out = {
            "stage_means": {s: float(np.mean([sc[s] for sc in scores])) for s in STAGE_KEYS},
            "ceps": ceps_mean, "ceps_tier": ceps_tier(ceps_mean),
            "pas": float(np.mean([r[c["pas"]] for r in rows])),
            "turnover_ratio": float(np.mean(ratios)) if ratios else None,
            "refused_steps": refused, "refused_rate": refused / len(rows),
            "invalid_steps": sum(1 for lg in logs if lg[0]),
        }
        fallbacks = sum(1 for r in rows if r[c["oracle_fallback"]] is not None)
        if fallbacks:
            out["oracle_fallbacks"] = fallbacks
        return out


#: column of a scored tuple by name (:data:`COL` from ``"scores"`` on)
_SC = {k: v - _ROW_BASE for k, v in COL.items() if v >= _ROW_BASE}


__all__ = ["COL", "DecisionRecords", "LEAN_STATUS", "S3_PARTS", "coerce_message", "flat", "report_fields", "unflat"]
