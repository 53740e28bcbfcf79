"""PortBench static QA layer: every constant and **[project choice]** in one frozen config (spec §9, §11.9).

Defaults equal spec portbench §9 (docs/spec/portbench.md, clean mode). :class:`QAConfig` carries a version
string that goes into every results file; :data:`T7_DIRECTIONS` is the §9.2 T7 table.
"""

from __future__ import annotations

from dataclasses import dataclass

from quantgym.config import Config
from quantgym.envs.portbench.universe import ASSET_CLASSES

QA_VERSION = "portbench-qa-1.0"

#: template ids in order (observation ``template`` Discrete(7) index = position)
TEMPLATES: tuple[str, ...] = ("T1", "T2", "T3", "T4", "T5", "T6", "T7")
#: templates that have a restricted (covariance withheld) variant (§9.2)
RESTRICTABLE: tuple[str, ...] = ("T4", "T5")
#: §9.1 complexity levels: 1 single asset, 2 pair, 3 multi-asset, 4 full portfolio
COMPLEXITY: dict[str, int] = {"T1": 1, "T2": 1, "T3": 1, "T4": 2, "T5": 3, "T6": 3, "T7": 4}
#: §9.2 names
TEMPLATE_NAMES: dict[str, str] = {
    "T1": "Return prediction",
    "T2": "Risk assessment (VaR)",
    "T3": "Position sizing",
    "T4": "Pairwise allocation (min-variance)",
    "T5": "Multi-asset optimisation (max-Sharpe)",
    "T6": "Rebalancing decision",
    "T7": "Regime detection",
}
#: §9.5: formula-driven and judgment-driven templates (T3 in neither)
FORMULA_TEMPLATES: tuple[str, ...] = ("T4", "T5")
JUDGMENT_TEMPLATES: tuple[str, ...] = ("T1", "T2", "T6", "T7")
#: §1.9 regime labels (observation ``regime`` Discrete(4) index = position)
REGIMES: tuple[str, ...] = ("bull", "bear", "sideways", "crisis")
#: classes with text in the paper's data (§9.2 "non-text class" = the others)
TEXT_CLASSES: tuple[str, ...] = ("equities", "cryptocurrency")
NON_TEXT_CLASSES: tuple[str, ...] = ("bonds", "commodities", "real_estate", "cash")

#: §9.3 system prompt of the published runs
SYSTEM_PROMPT = "You are a professional portfolio manager. Respond with structured JSON as instructed."

#: §9.2 T7 ground-truth table: regime -> class -> direction
T7_DIRECTIONS: dict[str, dict[str, str]] = {
    "bull": {"equities": "increase", "bonds": "decrease", "commodities": "neutral",
             "real_estate": "increase", "cryptocurrency": "increase", "cash": "decrease"},
    "bear": {"equities": "decrease", "bonds": "increase", "commodities": "neutral",
             "real_estate": "decrease", "cryptocurrency": "decrease", "cash": "increase"},
    "sideways": {"equities": "neutral", "bonds": "neutral", "commodities": "neutral",
                 "real_estate": "neutral", "cryptocurrency": "decrease", "cash": "increase"},
    "crisis": {"equities": "decrease", "bonds": "increase", "commodities": "increase",
               "real_estate": "decrease", "cryptocurrency": "decrease", "cash": "increase"},
}
assert all(tuple(v) == ASSET_CLASSES for v in T7_DIRECTIONS.values())

FIDELITIES: tuple[str, ...] = ("clean", "paper")


@dataclass(frozen=True)
class QAConfig(Config):
    """Construction and scoring parameters of the QA layer (spec §9.1–§9.4; defaults = spec).

    Attributes
    ----------
    version : str
        Written into results (``QA_VERSION``).
    data_start : str or None
        Start of the split computation and of the train split (§1.5/§9.1: 2015-01-01; the bundle's
        2014 rows serve as look-back only). ``None`` -> the data's first date. The effective start is
        ``max(data_start, first data date)``.
    splits : tuple of (name, start, end) or None
        Explicit split windows; ``None`` -> §9.1's rule (70/15/15 % of calendar time, snapped to
        year ends), which gives train 2015-01-01..2022-12-31, val 2023..2024, test 2025 on the bundle.
    train_frac, val_frac : float
        §9.1 split fractions.
    shuffle_seed : int
        §9.1: each split's candidate dates are shuffled with ``shuffle_seed + split index``
        (``random.Random``; train 42, val 43, test 44).
    cap : int
        §9.1 pairs per template (1 000).
    n_test : int
        §9.3 pairs per template in the published test tables (first 50 in file order).
    window_days, lookback, min_prices : int
        §9.1 context: rows dated in ``[d - 1 - window_days, d - 1]``, last ``lookback`` rows, at least
        ``min_prices`` prices per question asset.
    horizon_rows, horizon_days, flat_band : §9.2 T1 (21 trading rows, 31 calendar days, ±1 %).
    var_level, min_var_returns : §9.2 T2 (5 % quantile, ≥ 20 returns).
    t3_dd_limit, t3_var_level, t3_min_returns : §9.2 T3 (10 % limit, 1 % quantile); the minimum number
        of returns is **[project choice]** (20, as T2).
    t4_min_common : int
        **[project choice]** clean T4: at least this many dates where both returns exist (paper mode:
        equal lengths, §9.2).
    t4_degenerate : float
        §9.2: denominator below this -> 0.5/0.5.
    t5_rf, t5_min_common : §9.2 T5 (rf 4 %, ≥ 30 common dates).
    t5_nonpositive_ew : bool
        **[project choice]** clean mode: if every annualised excess mean is ≤ 0 the max-Sharpe problem
        has no positive-Sharpe portfolio and SLSQP from 1/n returns an arbitrary corner; the truth is
        then equal weight (§11.9's solver rule "max μ ≤ 0 -> EW"). Paper mode always runs SLSQP.
    t6_threshold, t6_cost : §9.2 T6 (5 %, 0.10 % round trip).
    t6_drift_sd, t6_scale, t6_max_scale, t6_uniform : §9.2 T6 weight generator (N(0, 0.18), x1.5 up to
        10 times, U(-0.0325, 0.0325)).
    class_major_prob : float
        §9.2 T1–T3: probability of drawing the class from equities/crypto (0.8).
    t4_other_prob : float
        §9.2 T4: probability that the second class is any other class (else a non-text class) (0.5).
    regime_ticker : str
        §1.9/§9.2 T7: the ticker whose 126-calendar-day return labels the regime (SPY). A universe
        without it is refused (set it to one of the universe's equities), never replaced silently.
    """

    version: str = QA_VERSION
    data_start: str | None = "2015-01-01"
    splits: tuple[tuple[str, str, str], ...] | None = None
    train_frac: float = 0.70
    val_frac: float = 0.15
    shuffle_seed: int = 42
    cap: int = 1000
    n_test: int = 50
    window_days: int = 90
    lookback: int = 60
    min_prices: int = 30
    horizon_rows: int = 21
    horizon_days: int = 31
    flat_band: float = 0.01
    var_level: float = 0.05
    min_var_returns: int = 20
    t3_dd_limit: float = 0.10
    t3_var_level: float = 0.01
    t3_min_returns: int = 20
    t4_min_common: int = 20
    t4_degenerate: float = 1e-12
    t5_rf: float = 0.04
    t5_min_common: int = 30
    t5_nonpositive_ew: bool = True
    t6_threshold: float = 0.05
    t6_cost: float = 0.001
    t6_drift_sd: float = 0.18
    t6_scale: float = 1.5
    t6_max_scale: int = 10
    t6_uniform: float = 0.0325
    class_major_prob: float = 0.8
    t4_other_prob: float = 0.5
    regime_ticker: str = "SPY"
