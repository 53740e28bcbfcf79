"""Aggregation of QA scores (spec §9.5) and the QA–CEPS rank correlation (§10.5, §11.9).

- template accuracy = mean score over its pairs (T1..T7 full information, T4_r/T5_r restricted);
- **Mean** = mean of the 7 full-information template accuracies (equal to the pooled mean when every
  template has 50 pairs);
- **F** = mean(T4, T5) (formula-driven), **J** = mean(T1, T2, T6, T7) (judgment-driven), T3 in neither;
- regime accuracy = mean score over the full-information pairs with that §1.9 label
  ([project choice]: pooled over pairs, not averaged over templates).
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

import numpy as np

from quantgym.envs.portbench.static_qa.config import FORMULA_TEMPLATES, JUDGMENT_TEMPLATES, REGIMES, RESTRICTABLE, TEMPLATES

#: the paper's table columns (§10.4), in order
TABLE_COLUMNS: tuple[str, ...] = (
    "T1", "T2", "T3", "T4", "T5", "T6", "T7", "Mean", "T4_r", "T5_r", "F", "J", "Bull", "Bear", "Side.",
)
_REGIME_COLUMN = {"bull": "Bull", "bear": "Bear", "sideways": "Side.", "crisis": "Crisis"}


def _mean(xs: Iterable[float]) -> float:
    xs = [float(x) for x in xs]
    return float(np.mean(xs)) if xs else math.nan


def summary_from_template_means(means: Mapping[str, float]) -> dict[str, float]:
    """Mean, F and J from per-template accuracies (§9.5); NaN where a template is missing.

    Vector (§10.4 DeepSeek-V4-Flash): T1..T7 = .520 .843 .945 1.00 .932 .652 .843 ->
    Mean 0.819, F 0.966, J 0.715.
    """
    def m(keys):
        vals = [means.get(k, math.nan) for k in keys]
        return math.nan if any(not math.isfinite(v) for v in vals) else float(np.mean(vals))

    return {"Mean": m(TEMPLATES), "F": m(FORMULA_TEMPLATES), "J": m(JUDGMENT_TEMPLATES)}


def aggregate(records: Sequence[Mapping]) -> dict:
    """Aggregate per-item records (spec §9.5).

    Parameters
    ----------
    records : sequence of mappings with keys ``template`` ("T1".."T7"), ``restricted`` (bool),
        ``regime`` (§1.9 label) and ``score`` (float in [0, 1]).

    Returns
    -------
    dict
        ``table``: column -> value for :data:`TABLE_COLUMNS` (+ ``Crisis``; NaN when empty);
        ``n``/``n_correct``: per template label; ``mean_pooled``: pooled mean over full items.
    """
    by_label: dict[str, list[float]] = {}
    by_regime: dict[str, list[float]] = {r: [] for r in REGIMES}
    full = []
    for r in records:
        label = f"{r['template']}_r" if r.get("restricted") else r["template"]
        s = float(r["score"])
        by_label.setdefault(label, []).append(s)
        if not r.get("restricted"):
            full.append(s)
            by_regime.setdefault(r["regime"], []).append(s)
    means = {k: _mean(v) for k, v in by_label.items()}
    table: dict[str, float] = {t: means.get(t, math.nan) for t in TEMPLATES}
    table.update(summary_from_template_means(table))
    for t in RESTRICTABLE:
        table[f"{t}_r"] = means.get(f"{t}_r", math.nan)
    for reg, col in _REGIME_COLUMN.items():
        table[col] = _mean(by_regime.get(reg, []))
    return {
        "table": table,
        "n": {k: len(v) for k, v in by_label.items()},
        "n_correct": {k: int(sum(x >= 0.99 for x in v)) for k, v in by_label.items()},
        "n_regime": {k: len(v) for k, v in by_regime.items()},
        "mean_pooled": _mean(full),
    }


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (``scipy.stats.spearmanr``; ties get average ranks).

    Vector (§10.5/§11.9): the page's QA-rank and CEPS-rank columns give 1 - 6·242/(10·99) = -0.4667.
    """
    from scipy.stats import spearmanr

    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"spearman needs two equal-length sequences of >= 2 values, got {len(x)} and {len(y)}")
    return float(spearmanr(np.asarray(x, float), np.asarray(y, float)).statistic)


def qa_ceps_spearman(qa_mean: Mapping[str, float], ceps: Mapping[str, float]) -> dict:
    """QA Mean vs Balanced CEPS rank correlation across the agents present in both (§10.5).

    Returns
    -------
    dict with ``rho`` (NaN with fewer than 3 common agents), ``n`` and ``agents``.
    """
    agents = [a for a in qa_mean if a in ceps and math.isfinite(qa_mean[a]) and math.isfinite(ceps[a])]
    rho = spearman([qa_mean[a] for a in agents], [ceps[a] for a in agents]) if len(agents) >= 3 else math.nan
    return {"rho": rho, "n": len(agents), "agents": agents}
