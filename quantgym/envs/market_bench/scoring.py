"""Market-Bench scoring (spec §6, exactly as the paper; §9.11 output contract).

Per attempt: SUCCESS (ran, produced every required metric as a finite number) or FAILED;
``MAE = (1/d)·Σ|y_i − ŷ_i|`` over the strategy's d metrics. Per round: ``best_mae`` (min over
successful attempts), ``solved``, ``first_attempt``. Per strategy: ``pass@K`` = mean(solved)
over the rounds, ``pass@1`` = fraction solved on attempt 1, ``mean_mae_solved`` and
``avg_attempt`` over solved rounds. Overall = mean over strategies (MAE and attempts over the
strategies with at least one solved round). Ranking: higher pass@K, higher pass@1, lower
mean_mae_solved, lower avg_attempt. Beside (never replacing) these: per-metric relative error
and the correlation of the agent's equity path with the reference path.

Anti-stub metrics (beyond the paper; :class:`MarketBenchScoringConfig` ``correct_atol`` / ``correct_rtol``):
the paper's ``solved`` only asks that an attempt *ran* and returned every metric, so a stub
returning zeros is "solved". An attempt is **correct** when every metric is within
``max(atol, rtol·|y|)`` of the reference; ``correct@1`` (fraction of rounds correct on attempt
1) and ``correct@k`` (any correct attempt among the first k) are reported beside ``pass@k``.
They never enter the paper's ranking.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from quantgym.envs.market_bench.config import METRIC_KEYS, MarketBenchScoringConfig
from quantgym.tables import fmt as table_fmt

SUCCESS, FAILED = "SUCCESS", "FAILED"


def validate_metrics(value: Any, strategy: str) -> tuple[dict[str, float] | None, str]:
    """Host-side validation of an attempt's returned object (spec §9.11).

    Returns ``(metrics, "")`` with every required key as a finite float, or ``(None, reason)``
    (not a dict; missing key; non-numeric, boolean or non-finite value). Extra keys are ignored.
    """
    keys = METRIC_KEYS[strategy]
    if not isinstance(value, Mapping):
        return None, f"output is not a JSON object of metrics (got {type(value).__name__})"
    missing = [k for k in keys if k not in value]
    if missing:
        return None, f"missing metric(s): {', '.join(missing)}"
    out: dict[str, float] = {}
    for k in keys:
        v = value[k]
        if isinstance(v, str) and v.startswith("<non-finite"):
            return None, f"metric {k!r} is not finite ({v[12:-1]})"
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            return None, f"metric {k!r} is not a number (got {type(v).__name__}: {str(v)[:40]!r})"
        f = float(v)
        if not math.isfinite(f):
            return None, f"metric {k!r} is not finite ({f})"
        out[k] = f
    return out, ""


def mae(pred: Mapping[str, float], ref: Mapping[str, float], strategy: str) -> float:
    """``(1/d)·Σ|y_i − ŷ_i|`` over the d metric keys of the strategy (spec §6)."""
    keys = METRIC_KEYS[strategy]
    return float(np.mean([abs(float(ref[k]) - float(pred[k])) for k in keys]))


def metric_errors(pred: Mapping[str, float], ref: Mapping[str, float], strategy: str,
                  rel_floor: float = MarketBenchScoringConfig().rel_floor) -> dict[str, dict[str, float]]:
    """Per-metric absolute and relative error ``|y − ŷ| / max(|y|, rel_floor)`` (beyond the paper, §6)."""
    out = {}
    for k in METRIC_KEYS[strategy]:
        y, yh = float(ref[k]), float(pred[k])
        out[k] = {"reference": y, "agent": yh, "abs_error": abs(y - yh), "rel_error": abs(y - yh) / max(abs(y), rel_floor)}
    return out


def path_correlation(agent_path: Any, ref_path: Any) -> float | None:
    """Pearson correlation of the agent's equity path with the reference path (beyond the paper).

    ``None`` when the agent wrote no path, the lengths differ, a value is non-finite or a path
    is constant. Both paths: C0 then one point per book row (spec §9.7.5).
    """
    if agent_path is None or ref_path is None:
        return None
    try:
        a = np.asarray(agent_path, dtype=float).ravel()
        r = np.asarray(ref_path, dtype=float).ravel()
    except (TypeError, ValueError):
        return None
    if a.shape != r.shape or len(a) < 2 or not (np.isfinite(a).all() and np.isfinite(r).all()):
        return None
    if np.std(a) == 0 or np.std(r) == 0:
        return 1.0 if np.array_equal(a, r) else None
    return float(np.corrcoef(a, r)[0, 1])


def is_correct(pred: Mapping[str, float], ref: Mapping[str, float], strategy: str,
               config: MarketBenchScoringConfig = MarketBenchScoringConfig()) -> bool:
    """Tolerance-based correctness of a SUCCESS attempt (anti-stub, beyond the paper).

    True iff for every metric key ``|y − ŷ| <= max(config.correct_atol, config.correct_rtol·|y|)``
    (y = reference value). Defaults: 1e-6 absolute, 1e-6 relative.
    """
    for k in METRIC_KEYS[strategy]:
        y, yh = float(ref[k]), float(pred[k])
        if not abs(y - yh) <= max(config.correct_atol, config.correct_rtol * abs(y)):
            return False
    return True


def mean_clipped_rel_error(errors: Mapping[str, Mapping[str, float]]) -> float:
    """Mean over the metrics of ``min(rel_error, 1)`` (``errors`` from :func:`metric_errors`); in [0, 1]."""
    return float(np.mean([min(float(e["rel_error"]), 1.0) for e in errors.values()]))


def attempt_reward(status: str, correct: bool | None, errors: Mapping[str, Mapping[str, float]] | None,
                   config: MarketBenchScoringConfig = MarketBenchScoringConfig()) -> float:
    """Env reward of one attempt ([project choice]; spec §7 defines none).

    1.0 if the attempt is correct; 0.0 if it FAILED; else (ran, but wrong)
    ``config.reward_incorrect_max · exp(−mean_clipped_rel_error / config.reward_rel_scale)``, which
    is in [0, 0.5) and decreases with the mean (clipped) relative error. A stub answer gets ≈ 0.
    """
    if status != SUCCESS:
        return 0.0
    if correct:
        return 1.0
    m = mean_clipped_rel_error(errors or {})
    return float(config.reward_incorrect_max * math.exp(-m / config.reward_rel_scale))


@dataclass
class AttemptRecord:
    """One attempt of an agent on a (strategy, round): the row of the attempt table."""

    agent: str
    strategy: str
    round: int
    attempt: int  # 1-based
    status: str  # SUCCESS | FAILED
    mae: float | None = None
    reason: str = ""
    sandbox_status: str = ""
    path_corr: float | None = None
    max_rel_error: float | None = None
    correct: bool | None = None  # SUCCESS and every metric within tolerance (None: not scored / FAILED)


def round_table(attempts: Iterable[AttemptRecord | Mapping[str, Any]]) -> pd.DataFrame:
    """Per (agent, strategy, round): ``best_mae``, ``solved``, ``first_attempt``, ``n_attempts`` (spec §6),
    plus ``correct`` (any correct attempt) and ``first_correct`` (index of the first one; NaN if none).

    An attempt counts as correct only if its ``correct`` field is true (a missing field = not correct).
    """
    cols = ["agent", "strategy", "round", "best_mae", "solved", "first_attempt", "n_attempts", "correct",
            "first_correct"]
    df = pd.DataFrame([asdict(a) if isinstance(a, AttemptRecord) else dict(a) for a in attempts])
    if df.empty:
        return pd.DataFrame(columns=cols)
    if "correct" not in df:
        df["correct"] = False
    df["correct"] = (df["status"] == SUCCESS) & (df["correct"].map(lambda v: v is True or v == 1))
    rows = []
    for (agent, strategy, rnd), g in df.groupby(["agent", "strategy", "round"], sort=True):
        ok = g[g["status"] == SUCCESS]
        good = g[g["correct"]]
        rows.append({
            "agent": agent, "strategy": strategy, "round": int(rnd),
            "best_mae": float(ok["mae"].min()) if len(ok) else np.nan,
            "solved": int(len(ok) > 0),
            "first_attempt": int(ok["attempt"].min()) if len(ok) else np.nan,
            "n_attempts": int(len(g)),
            "correct": int(len(good) > 0),
            "first_correct": int(good["attempt"].min()) if len(good) else np.nan,
        })
    return pd.DataFrame(rows, columns=cols)


def strategy_scores(attempts: Iterable[AttemptRecord | Mapping[str, Any]], k: int = 3) -> pd.DataFrame:
    """Per (agent, strategy): ``pass@k``, ``pass@1``, ``mean_mae_solved``, ``avg_attempt``, ``n_rounds``,
    and beside them ``correct@k`` / ``correct@1`` (fraction of rounds with a correct attempt among
    the first k / on attempt 1; anti-stub, beyond the paper).

    Rounds are those present in the attempt table. Only attempts with index <= k count for
    ``pass@k`` and ``correct@k``. ``mean_mae_solved`` / ``avg_attempt`` are NaN when no round is solved.
    """
    att = [a if isinstance(a, AttemptRecord) else AttemptRecord(**{f: a[f] for f in a if f in AttemptRecord.__dataclass_fields__})
           for a in attempts]
    all_rounds = round_table(att)[["agent", "strategy", "round"]]
    rt = round_table([a for a in att if a.attempt <= k])
    rt = all_rounds.merge(rt, on=["agent", "strategy", "round"], how="left")
    rt["solved"] = rt["solved"].fillna(0)
    rt["correct"] = rt["correct"].fillna(0)
    rows = []
    for (agent, strategy), g in rt.groupby(["agent", "strategy"], sort=False):
        solved = g[g["solved"] == 1]
        rows.append({
            "agent": agent, "strategy": strategy, "n_rounds": len(g),
            f"pass@{k}": float(g["solved"].mean()),
            "pass@1": float((g["first_attempt"] == 1).mean()),
            "mean_mae_solved": float(solved["best_mae"].mean()) if len(solved) else np.nan,
            "avg_attempt": float(solved["first_attempt"].mean()) if len(solved) else np.nan,
            f"correct@{k}": float(g["correct"].mean()),
            "correct@1": float((g["first_correct"] == 1).mean()),
        })
    return pd.DataFrame(rows)


def overall_scores(per_strategy: pd.DataFrame, k: int = 3) -> pd.DataFrame:
    """Overall per agent = mean over strategies (MAE/attempts over strategies with a solved round);
    ``correct@k`` / ``correct@1`` = mean over strategies."""
    rows = []
    for agent, g in per_strategy.groupby("agent", sort=False):
        rows.append({
            "agent": agent, "strategy": "overall", "n_rounds": int(g["n_rounds"].sum()),
            f"pass@{k}": float(g[f"pass@{k}"].mean()), "pass@1": float(g["pass@1"].mean()),
            "mean_mae_solved": float(g["mean_mae_solved"].mean()) if g["mean_mae_solved"].notna().any() else np.nan,
            "avg_attempt": float(g["avg_attempt"].mean()) if g["avg_attempt"].notna().any() else np.nan,
            f"correct@{k}": float(g[f"correct@{k}"].mean()), "correct@1": float(g["correct@1"].mean()),
        })
    return pd.DataFrame(rows)


def rank(scores: pd.DataFrame, k: int = 3) -> pd.DataFrame:
    """Sort by higher pass@k, higher pass@1, lower mean_mae_solved, lower avg_attempt (spec §6); adds ``rank``."""
    s = scores.copy()
    key = pd.DataFrame({
        "a": -s[f"pass@{k}"], "b": -s["pass@1"],
        "c": s["mean_mae_solved"].fillna(np.inf), "d": s["avg_attempt"].fillna(np.inf),
    })
    order = np.lexsort((key["d"].to_numpy(), key["c"].to_numpy(), key["b"].to_numpy(), key["a"].to_numpy()))
    s = s.iloc[order].reset_index(drop=True)
    s.insert(0, "rank", np.arange(1, len(s) + 1))
    return s


def score_table(attempts: Iterable[AttemptRecord | Mapping[str, Any]], config: MarketBenchScoringConfig = MarketBenchScoringConfig()) -> pd.DataFrame:
    """Per-strategy and overall scores of every agent, ranked within each strategy (spec §6)."""
    att = list(attempts)
    per = strategy_scores(att, k=config.attempts)
    if per.empty:
        return per
    both = pd.concat([per, overall_scores(per, k=config.attempts)], ignore_index=True)
    return pd.concat([rank(g, k=config.attempts) for _, g in both.groupby("strategy", sort=False)], ignore_index=True)


def first_success_prefix(attempts: Iterable[AttemptRecord]) -> list[AttemptRecord]:
    """Each round's attempts up to and including its first SUCCESS (all of them when none succeeded).

    What the paper's protocol (the episode ends at the first success) would have run of independent
    attempts: the sequential pass@k, MAE and average attempt of a run that kept all n attempts are
    computed from this prefix, so they equal the stop-at-first-success numbers.
    """
    att = list(attempts)
    first: dict[tuple, int] = {}
    for a in att:
        if a.status == SUCCESS:
            key = (a.agent, a.strategy, a.round)
            first[key] = min(first.get(key, a.attempt), a.attempt)
    return [a for a in att if a.attempt <= first.get((a.agent, a.strategy, a.round), a.attempt)]


#: k of the unbiased estimates reported beside the paper's sequential pass@k (Chen et al. 2021, the Codex paper's estimator)
UNBIASED_KS: tuple[int, ...] = (1, 3)


def unbiased_table(attempts: Iterable[AttemptRecord | Mapping[str, Any]], ks: Iterable[int] = UNBIASED_KS,
                   level: float = 0.95, not_samples: str | None = None) -> pd.DataFrame:
    """Unbiased pass@k and correct@k (Chen et al. 2021) per (agent, strategy) and overall, with intervals.

    Each round's ``n`` attempts and its ``c`` SUCCESS / correct attempts give
    ``1 − C(n − c, k)/C(n, k)`` (:func:`quantgym.stats.passk.pass_at_k`); the table holds their mean over
    the rounds and a Student-t interval over the rounds (:func:`quantgym.stats.passk.estimate_over_rounds`).
    ``overall`` pools every round of the agent (equal to the mean over strategies when each strategy has
    the same number of rounds). Beside, never instead of, the paper's sequential pass@k
    (:func:`strategy_scores`).

    Parameters
    ----------
    attempts : the attempt table (every attempt of every round).
    ks : the k values (a k above a round's n gives None with the reason).
    level : confidence level of the interval.
    not_samples : when the attempts are not n independent samples fixed in advance (episodes ended at
        the first success, repair mode), the reason: every estimate is None and ``reason`` says why.

    Returns
    -------
    DataFrame
        ``agent, strategy, n_rounds, n_min`` (fewest attempts in a round), then per k
        ``pass@k_unbiased, pass@k_lo, pass@k_hi, correct@k_unbiased, correct@k_lo, correct@k_hi``, and
        ``reason`` (None when every estimate is defined).
    """
    from quantgym.stats.passk import estimate_over_rounds

    ks = tuple(int(k) for k in ks)
    df = pd.DataFrame([asdict(a) if isinstance(a, AttemptRecord) else dict(a) for a in attempts])
    cols = ["agent", "strategy", "n_rounds", "n_min"] + [f"{m}@{k}_{x}" for k in ks for m in ("pass", "correct")
                                                        for x in ("unbiased", "lo", "hi")] + ["reason"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    if "correct" not in df:
        df["correct"] = False
    df["ok"] = df["status"] == SUCCESS
    df["good"] = df["ok"] & df["correct"].map(lambda v: v is True or v == 1)
    per_round = df.groupby(["agent", "strategy", "round"], sort=False).agg(n=("attempt", "size"), c=("ok", "sum"),
                                                                           cc=("good", "sum")).reset_index()
    groups = [((a, s), g) for (a, s), g in per_round.groupby(["agent", "strategy"], sort=False)]
    groups += [((a, "overall"), g) for a, g in per_round.groupby("agent", sort=False)]
    rows = []
    for (agent, strategy), g in groups:
        row: dict[str, Any] = {"agent": agent, "strategy": strategy, "n_rounds": int(len(g)), "n_min": int(g["n"].min())}
        reasons = []
        for k in ks:
            for m, col in (("pass", "c"), ("correct", "cc")):
                if not_samples is not None:
                    est = {"estimate": None, "lo": None, "hi": None, "reason": not_samples}
                else:
                    est = estimate_over_rounds(g["n"], g[col], k, level)
                row.update({f"{m}@{k}_unbiased": est["estimate"], f"{m}@{k}_lo": est["lo"], f"{m}@{k}_hi": est["hi"]})
                if est["reason"] and est["reason"] not in reasons:
                    reasons.append(est["reason"])
        row["reason"] = "; ".join(reasons) or None
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def summary_extra(attempts: Iterable[AttemptRecord | Mapping[str, Any]], unbiased: pd.DataFrame,
                  agent: str) -> dict[str, Any]:
    """The summary.csv columns of one Market-Bench agent (its ``overall`` scores).

    ``pass@1``, ``pass@3``, ``correct@1``, ``correct@3``, ``mae`` (mean MAE over solved rounds) are the
    paper's sequential metrics at its K = 3 (the first 3 attempts of each round; ``pass@3`` / ``correct@3``
    empty when a round ended unsolved with fewer than 3 attempts, i.e. K < 3); ``n_attempts`` is the fewest attempts of a round; then the
    unbiased estimates with their interval (:func:`unbiased_table`): ``pass@k_unbiased``, ``pass@k_lo``,
    ``pass@k_hi`` and the same for ``correct@k``, k in :data:`UNBIASED_KS`.
    """
    att = [a if isinstance(a, AttemptRecord) else AttemptRecord(**{f: a[f] for f in a if f in AttemptRecord.__dataclass_fields__})
           for a in attempts]
    att = [a for a in att if a.agent == agent]
    out: dict[str, Any] = {}
    seq = overall_scores(strategy_scores(att, k=3), k=3) if att else pd.DataFrame()
    # pass@3 is defined when every round had 3 attempts or was solved before running out (K >= 3)
    rt = round_table(att)
    full = bool(att) and bool(((rt["n_attempts"] >= 3) | (rt["solved"] == 1)).all())
    row = seq.iloc[0].to_dict() if len(seq) else {}

    def num(v: Any) -> float | None:
        return None if v is None or not math.isfinite(float(v)) else float(v)

    out.update({"pass@1": num(row.get("pass@1")), "pass@3": num(row.get("pass@3")) if full else None,
                "correct@1": num(row.get("correct@1")), "correct@3": num(row.get("correct@3")) if full else None,
                "mae": num(row.get("mean_mae_solved"))})
    u = unbiased[(unbiased["agent"] == agent) & (unbiased["strategy"] == "overall")] if len(unbiased) else unbiased
    urow = u.iloc[0].to_dict() if len(u) else {}
    out["n_attempts"] = None if urow.get("n_min") is None else int(urow["n_min"])
    for k in UNBIASED_KS:
        for m in ("pass", "correct"):
            for x in ("unbiased", "lo", "hi"):
                v = urow.get(f"{m}@{k}_{x}")
                out[f"{m}@{k}_{x}"] = None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v
    return out


def fmt(x: Any, decimals: int = 2) -> str:
    """Market-Bench's table cell (spec §6: 2 decimals): :func:`quantgym.tables.fmt` with ``-`` for None or NaN;
    an integer (a rank, a count) as is."""
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, float) and not math.isfinite(x):
        x = None
    return table_fmt(x, decimals, missing="-")


__all__ = ["SUCCESS", "FAILED", "validate_metrics", "mae", "metric_errors", "path_correlation", "is_correct",
           "mean_clipped_rel_error", "attempt_reward", "AttemptRecord",
           "round_table", "strategy_scores", "overall_scores", "rank", "score_table", "fmt", "UNBIASED_KS",
           "unbiased_table", "summary_extra", "first_success_prefix"]
