"""PortBench configuration: every constant and **[project choice]** of the PortBench spec (docs/spec/portbench.md) in one place.

Frozen, serialisable dataclasses (as nautilus_trader's configs): defaults equal the spec's clean
mode; :class:`PortBenchConfig` carries a version string that is written into every result.
``fidelity="paper"`` switches on every paper-mode item of spec Appendix A; each item is a flag of
:class:`~quantgym.envs.portbench.paper.config.PaperFidelity` (``PortBenchConfig.paper``), so single
items can be switched on top of clean mode.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Literal

from quantgym.config import Config
from quantgym.models import ImportableModel
from quantgym.envs.portbench.paper.config import PaperFidelity
from quantgym.tools import ToolConfig

SCORING_VERSION = "portbench-clean-1.0"

#: S3 weights on the available assets that sum to 1 within this are normalised without recording a coercion
#: [project choice]: a 6-decimal answer rounded per asset over up to 200 assets is off by at most 1e-4, which
#: is rounding, not a repair (spec §4.3 normalises every sum; only a sum off by more is a recorded coercion)
WEIGHT_SUM_TOLERANCE = 1e-4


@dataclass(frozen=True)
class PortBenchCostModel(Config, version=SCORING_VERSION):
    """Proportional trading costs on traded notional (spec §4.4, §6.3).

    ``slippage_bps`` 10 and ``commission_bps`` 5 give 15 bps of ``τ·NAV``.
    Set both to 0 (or use :meth:`off`) to switch costs off.
    """

    slippage_bps: float = 10.0
    commission_bps: float = 5.0
    min_trade: float = 1e-6  # |Δw| below this is not traded (§4.4)

    def __post_init__(self) -> None:
        # a negative cost would pay the agent for trading; 10,000 bps is the whole notional
        for name in ("slippage_bps", "commission_bps"):
            v = getattr(self, name)
            if not 0.0 <= v < 1e4:
                raise ValueError(f"PortBenchCostModel.{name} must be in [0, 10000) bps, got {v!r}")
        if not 0.0 <= self.min_trade < 1.0:
            raise ValueError(f"PortBenchCostModel.min_trade must be in [0, 1), got {self.min_trade!r}")

    @property
    def rate(self) -> float:
        """Total cost as a fraction of traded notional."""
        return (self.slippage_bps + self.commission_bps) / 1e4

    @classmethod
    def off(cls) -> "PortBenchCostModel":
        return cls(slippage_bps=0.0, commission_bps=0.0)

    def order_fee(self, value: float, side: int, day: str) -> float:
        """Cost of one order of traded notional ``value`` (:class:`quantgym.models.FeeModel`): ``rate·value``.
        The simulator charges this model as ``rate·τ·NAV`` in its compiled trade (the same rule summed)."""
        return self.rate * float(value)

    def describe(self, style: str | None = None) -> str:
        """The cost rule in one line, rendered from these rates (the S3 prompt states it, spec §4.3, §4.4).

        ``style`` None: ``"trading costs 15 bps of traded notional (10 slippage + 5 commission)"``; a prompt
        style (:data:`quantgym.spaces.PROMPT_STYLES`): the S3 prompt's wording (``minimal``: ``"costs 15 bps
        of traded notional"``). Both rates zero (:meth:`off`): ``"no trading costs"``.
        """
        total = round(self.slippage_bps + self.commission_bps, 6)
        if total == 0:
            return "no trading costs"
        text = f"{'costs' if style == 'minimal' else 'trading costs'} {total:g} bps of traded notional"
        if style is None:
            text += f" ({self.slippage_bps:g} slippage + {self.commission_bps:g} commission)"
        return text


@dataclass(frozen=True)
class Period(Config, version=SCORING_VERSION):
    """An evaluation window: ``start``/``end`` (inclusive ISO dates) and the rebalance frequency."""

    name: str
    start: str
    end: str
    freq: Literal["monthly", "weekly", "daily"]
    label: str = ""


#: spec §2.2, §2.3 (clean-mode names, §11.9)
PERIODS: dict[str, Period] = {
    "normal_2024": Period("normal_2024", "2024-01-01", "2024-12-31", "monthly", "Normal 2024 (bull)"),
    "china_2015": Period("china_2015", "2015-08-01", "2016-02-29", "weekly", "China Shock, liquidity-driven"),
    "covid_2020": Period("covid_2020", "2020-02-01", "2020-05-31", "weekly", "COVID Crash, pandemic-driven"),
    "crypto_2022": Period("crypto_2022", "2022-05-01", "2022-12-31", "weekly",
                          "Crypto Collapse, monetary-tightening-driven"),
    # calendar 2025, rebalanced like normal_2024: a window after the training cutoff of models trained on
    # data up to 2024 (not a bench period: BENCH_PERIODS stays the four of spec §2.2)
    "recent_2025": Period("recent_2025", "2025-01-01", "2025-12-31", "monthly", "Recent 2025"),
}
STRESS_PERIODS: tuple[str, ...] = ("china_2015", "covid_2020", "crypto_2022")
#: the calm year whose §7.2 gate is the stress windows' (spec §2.2, §7.2)
NORMAL_PERIOD = "normal_2024"
#: the four bench periods in table order (spec §2.2, §2.3): ``quantgym bench``'s default, the report's order
BENCH_PERIODS: tuple[str, ...] = (NORMAL_PERIOD, *STRESS_PERIODS)
#: repo ids accepted as aliases (§11.9)
PERIOD_ALIASES: dict[str, str] = {
    "bull_2024": "normal_2024",
    "2015_china_shock": "china_2015",
    "2020_covid_flash_crash": "covid_2020",
    "2022_crypto_collapse": "crypto_2022",
}


def within_tolerance(mdd: float, tolerance: float) -> bool:
    """§7.2 gate of one stress window: ``|MDD| ≤ tolerance`` (both decimals; 1e-12 slack for rounding)."""
    return bool(abs(mdd) <= tolerance + 1e-12)


def stress_verdict(passed: dict[str, bool]) -> bool | None:
    """§7.2 over the stress windows' verdicts (``passed[window]``: ``|MDD| ≤ tolerance`` there): False as
    soon as one window failed (the others cannot make it pass), True when all three passed, None while a
    window is missing and none failed. :func:`stress_gate` from drawdowns, the report from recorded gates."""
    given = [bool(passed[p]) for p in STRESS_PERIODS if p in passed]
    if not all(given):
        return False
    return True if len(given) == len(STRESS_PERIODS) else None


def stress_gate(mdd_by_period: dict[str, float], tolerance: float) -> bool | None:
    """§7.2: pass iff ``|MDD_s| ≤ tolerance`` in each of the three stress windows (:func:`stress_verdict`
    of the windows in ``mdd_by_period``)."""
    return stress_verdict({p: within_tolerance(m, tolerance) for p, m in mdd_by_period.items()
                           if p in STRESS_PERIODS})


def period_gate(period: str, mdd_by_period: dict[str, float], tolerance: float) -> bool | None:
    """§7.2 ``gate`` of a result row (bench, eval and sweep rows; the report combines these recorded gates by
    the same rule, :func:`stress_verdict`): a stress window's own :func:`within_tolerance`; ``normal_2024``'s :func:`stress_gate` over ``mdd_by_period`` (max drawdowns
    by period name, decimals); None for any other period."""
    if period in STRESS_PERIODS:
        return within_tolerance(mdd_by_period[period], tolerance)
    return stress_gate(mdd_by_period, tolerance) if period == NORMAL_PERIOD else None


@dataclass(frozen=True)
class LivePeriod(Config, version=SCORING_VERSION):
    """Real-time protocol (spec §2.5): the last ``days`` trading days up to ``as_of`` (default: the last
    date of the data), daily decisions, each on data through the previous close."""

    days: int = 12
    as_of: str | None = None
    name: str = "live"


def resolve_live(period: LivePeriod, dates) -> Period:
    """Turn a :class:`LivePeriod` into a concrete daily :class:`Period` on the data's calendar.

    Raises
    ------
    ValueError
        If ``as_of`` precedes the data or fewer than ``days + 1`` trading days exist before it.
    """
    import pandas as pd

    d = pd.DatetimeIndex(dates)
    end = d[-1] if period.as_of is None else pd.Timestamp(period.as_of)
    idx = int(d.searchsorted(end, side="right")) - 1
    if idx < 0:
        raise ValueError(f"live as_of={period.as_of} is before the first date of the data ({d[0].date()})")
    if period.days < 1 or idx - period.days + 1 < 1:
        raise ValueError(f"live mode needs days >= 1 and at least days + 1 trading days up to {end.date()}")
    start = d[idx - period.days + 1]
    return Period(period.name, str(start.date()), str(d[idx].date()), "daily", f"live, {period.days} trading days")


def resolve_period(period: str | dict | Period | LivePeriod) -> Period | LivePeriod:
    """Turn a period name, alias, ``"live"``, ``START:END[:FREQ]`` (``2020-03-01:2020-03-31:weekly``; FREQ
    defaults to monthly), ``dict(start=…, end=…, freq=…)`` or :class:`Period` into a Period (PortBench's one
    period grammar; a :class:`Period` / :class:`LivePeriod` is returned as it is).

    Raises
    ------
    ValueError
        Unknown name or a dict without ``start``/``end`` or with an unknown ``freq``.
    """
    if isinstance(period, (Period, LivePeriod)):
        return period
    if isinstance(period, str):
        period = period.strip()
    if period == "live":
        return LivePeriod()
    if isinstance(period, dict) and period.get("name") == "live":
        return LivePeriod(int(period.get("days", 12)), period.get("as_of"))
    if isinstance(period, str) and ":" in period:  # "START:END[:FREQ]", e.g. "2020-03-01:2020-03-31:weekly"
        parts = period.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"period {period!r}: expected START:END or START:END:FREQ (dates YYYY-MM-DD)")
        for d in parts[:2]:
            try:
                _dt.date.fromisoformat(d)
            except ValueError:
                raise ValueError(f"period {period!r}: {d!r} is not a YYYY-MM-DD date") from None
        period = {"start": parts[0], "end": parts[1], "freq": parts[2] if len(parts) == 3 else "monthly"}
    if isinstance(period, str):
        key = PERIOD_ALIASES.get(period, period)
        if key not in PERIODS:
            raise ValueError(
                f"unknown period {period!r}; choose one of {sorted(PERIODS)} (aliases {sorted(PERIOD_ALIASES)}), "
                "'live' or START:END[:FREQ] (dates YYYY-MM-DD, FREQ monthly|weekly|daily; in Python also "
                "dict(start=..., end=..., freq=...))"
            )
        return PERIODS[key]
    if isinstance(period, dict):
        missing = {"start", "end"} - set(period)
        if missing:
            raise ValueError(f"custom period needs keys 'start' and 'end' (missing {sorted(missing)})")
        unknown = sorted(map(str, set(period) - {"start", "end", "freq", "name", "label"}))
        if unknown:
            raise ValueError(f"custom period: unknown key(s) {unknown}; valid: start, end, freq, name, label")
        freq = period.get("freq", "monthly")
        if freq not in ("monthly", "weekly", "daily"):
            raise ValueError(f"period freq must be 'monthly', 'weekly' or 'daily', got {freq!r}")
        start, end = (_iso_date(period[k], k) for k in ("start", "end"))
        if end < start:  # ISO dates compare as text
            raise ValueError(f"period {start}:{end}: the end is before the start")
        name = period.get("name") or f"{start}_{end}_{freq}"
        return Period(name, start, end, freq, period.get("label", ""))
    raise ValueError(f"period must be a name, a dict or a Period, got {type(period).__name__}")


def _iso_date(value: Any, key: str) -> str:
    """A custom period's ``start`` / ``end`` as ``YYYY-MM-DD``: a date (or datetime, Timestamp) or such a string;
    anything else raises a one-line ValueError."""
    if isinstance(value, _dt.datetime):
        value = value.date()
    if isinstance(value, _dt.date):
        return value.isoformat()
    try:
        return _dt.date.fromisoformat(str(value)).isoformat()
    except ValueError:
        raise ValueError(f"custom period: {key} {value!r} is not a YYYY-MM-DD date") from None


@dataclass(frozen=True)
class PortBenchScoringConfig(Config):
    """Stage scores, CEPS and thresholds (spec §4, §5). Defaults = spec."""

    alpha: float = 0.5  # S3 mix of weight accuracy and correlation score (§4.3)
    lam: float = 0.1  # CEPS drop penalty λ (§5)
    oracle: Literal["lookback", "ex_post", "equal_weight"] = "lookback"
    view_scale: float = 0.10  # S1 truth: clip(R/0.10, -1, 1) (§4.1)
    signal_threshold: float = 0.2  # S2 truth: buy if v* > 0.2, sell if < -0.2 (§4.2)
    drift_limit: float = 0.05  # S5 weight-drift alert (§4.5)
    s5_min_obs: int = 10  # S5 VaR/DD need more than this many observations (§4.5)
    ex_post_max_obs: dict = field(default_factory=lambda: {"monthly": 21, "weekly": 5, "daily": 1})
    version: str = SCORING_VERSION


@dataclass(frozen=True)
class PortBenchConfig(Config):
    """Everything that defines a PortBench run besides the agent (spec §1–§7, §11).

    Attributes
    ----------
    fidelity : "clean" (default) or "paper" (Appendix A; the env sets ``paper = PaperFidelity.paper()``).
    paper : PaperFidelity, the paper-mode switches (default: all off = clean mode).
    lookback : number of return rows in a snapshot window (L = 60, §1.6).
    window_days : calendar-day bound of the window, ``[d − 90 days, d]`` (§1.6).
    min_obs : a ticker is available at ``d`` with ≥ this many valid returns in the window (§11.6).
    initial_nav : starting NAV (§2.2), reported in currency units; the observation shows NAV/initial.
    regime_ticker, regime_days : the ticker whose ``regime_days``-calendar-day return (126) labels the regime
        (§1.9); the prompts state both.
    corr_table : "upper" | "full" | "none": the pairwise table in prompts (§11.9).
    prompt_style : "full" | "compact" | "minimal" (:data:`quantgym.spaces.PROMPT_STYLES`): the rendering
        of the stage prompts (``full`` = the reference prompt; ``compact`` ≤ 5,000 and ``minimal`` ≤ 2,000
        SmolLM2 tokens on the bundled data; :mod:`quantgym.envs.portbench.prompts`). Rendering only:
        scores, truth and simulation do not depend on it.
    as_of : "close" (snapshot includes close of d, default) or "previous_close" (§1.7).
    rf : annual risk-free rate of the Sharpe ratio, the same constant in every period (spec §7.1 fixes 4 %,
        the paper's convention; tables state it with :func:`sharpe_note`).
    """

    fidelity: Literal["clean", "paper"] = "clean"
    lookback: int = 60
    window_days: int = 90
    min_obs: int = 20
    initial_nav: float = 1_000_000.0
    regime_ticker: str = "SPY"
    regime_days: int = 126
    corr_table: Literal["upper", "full", "none"] = "upper"
    as_of: Literal["close", "previous_close"] = "close"
    #: the fee model: the spec's proportional :class:`PortBenchCostModel` (compiled), or an
    #: :class:`~quantgym.models.ImportableModel` naming a :class:`quantgym.models.FeeModel` class (charged per
    #: traded asset on ``|Δw|·NAV``; clean mode; docs/portbench.md, "Your own cost model")
    costs: PortBenchCostModel | ImportableModel = field(default_factory=PortBenchCostModel)
    scoring: PortBenchScoringConfig = field(default_factory=PortBenchScoringConfig)
    rf: float = 0.04  # Sharpe risk-free rate (§7.1)
    paper: PaperFidelity = field(default_factory=PaperFidelity)  # Appendix A switches (all off = clean)
    version: str = SCORING_VERSION
    prompt_style: Literal["full", "compact", "minimal"] = "full"  # last: positional calls keep their meaning

    def __post_init__(self) -> None:
        if (self.fidelity == "paper" or self.paper.any) and not isinstance(self.costs, PortBenchCostModel):
            raise ValueError("paper mode charges the paper's proportional costs (spec Appendix A): a user fee "
                             "model (config.costs) runs in clean mode only")


@dataclass(frozen=True)
class PortBenchToolsConfig(ToolConfig, Config, version=SCORING_VERSION):
    """Tool mode (``tools=True``, docs/tools.md): the per-stage tool budget and the bounds of the data tools.

    Rendering only, like ``prompt_style``: scores, truth and simulation do not depend on it.

    Attributes
    ----------
    calls : tool calls per stage (S1, S2 and S3 each; default 8: the six tools once and two more).
    chars : result characters per stage (default 12,000, about two thirds of the full-style S1 prompt on the
        bundled data); a result beyond what is left is cut with the marker ``[truncated: N chars]``.
    max_window : the longest window a tool reads, in trading days back from the decision date (default 756,
        three years of 252 days).
    """

    calls: int = 8
    chars: int = 12_000
    max_window: int = 756

    def __post_init__(self) -> None:
        super().__post_init__()  # every field an integer >= 0 (quantgym.tools.ToolConfig)
        if self.max_window < 2:
            raise ValueError(f"PortBenchToolsConfig.max_window must be an integer >= 2, got {self.max_window!r}")


def proportional_costs(costs: PortBenchCostModel | ImportableModel) -> PortBenchCostModel:
    """The proportional rule behind ``costs`` (spec §4.4): the model itself, or, for a user fee model
    (whose fees the simulator charges per order), zero rates with the spec's ``min_trade``."""
    return costs if isinstance(costs, PortBenchCostModel) else PortBenchCostModel.off()


def sharpe_note(rf: float | None = None) -> str:
    """PortBench's Sharpe convention in one line, for the footer of every table that shows a PortBench
    Sharpe (spec §7.1): ``(mean(r)·252 − rf) / (std(r)·√252)`` of daily returns with a constant annual
    ``rf`` (default :attr:`PortBenchConfig.rf`, 4 %) in every period, whatever T-bills paid then."""
    rf = PortBenchConfig.rf if rf is None else float(rf)
    return (f"Sharpe = (252·mean − rf)/(√252·std) of daily returns, rf = {100 * rf:g} % a year in every period "
            "(spec portbench §7.1)")


#: :func:`sharpe_note` of the default config (the task record's ``sharpe_note``)
SHARPE_NOTE = sharpe_note()
