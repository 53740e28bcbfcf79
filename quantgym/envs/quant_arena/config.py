"""Frozen, versioned configuration of Quant-Arena (spec quant_arena.md §10, version ``qa-v1``).

Every **[project choice]** constant of the spec lives here, in one of four frozen
dataclasses that the env accepts as kwargs:

- :class:`ArenaCostModel`     — commission, transfer fee, stamp duty by date (§10.9).
- :class:`ImpactModel`   — the simulated order book (§10.8).
- :class:`ExecutionModel`— portfolio size, slot weight, band, lots, capital (§4, §10.5, §10.7).
- :class:`ArenaScoringConfig` — metric scales, weights, diversity, N_ann (§10.11–§10.13).
- :class:`ArenaSandboxLimits` — limits of the untrusted child process (§10.4).
- :class:`Windows`       — warm-up / research / sealed windows (§2, §10.2).
- :class:`ArenaToolConfig` — budgets of tool mode (calls, result characters, exploration runs).

Each concern can be switched off (``ArenaCostModel.off()``, ``ImpactModel.off()``) for
experiments; the benchmark's defaults are the spec's, and the version string of
:class:`ArenaScoringConfig` is written into every record so a score is always tied to
the rules that produced it.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from quantgym.config import Config
from quantgym.tools import ToolConfig
from quantgym.models import ImportableModel

#: Version of the scoring/cost rules (spec §6: "version the scoring config").
ARENA_VERSION = "qa-v1"


def _date(x: Any) -> _dt.date:
    if isinstance(x, _dt.datetime):
        return x.date()
    if isinstance(x, _dt.date):
        return x
    return _dt.date.fromisoformat(str(x)[:10])


@dataclass(frozen=True)
class ArenaCostModel(Config, version=ARENA_VERSION):
    """Fees per order (one stock, one side, one day) on the walked value (spec §10.9).

    Attributes
    ----------
    commission_rate : float
        0.00025 (2.5 bp), both sides, includes exchange handling and regulatory fees.
    commission_min : float
        5.00 CNY minimum per order.
    transfer_rate_before, transfer_rate_after, transfer_change : float, float, str
        Transfer fee 0.00002 before 2022-04-29, 0.00001 from then, both sides.
    stamp_rate_before, stamp_rate_after, stamp_change : float, float, str
        Sell-side stamp duty 0.001 before 2023-08-28, 0.0005 on and after
        (date = execution day).
    enabled : bool
        ``False`` makes every fee zero (cost-free experiments).
    """

    commission_rate: float = 0.00025
    commission_min: float = 5.00
    transfer_rate_before: float = 0.00002
    transfer_rate_after: float = 0.00001
    transfer_change: str = "2022-04-29"
    stamp_rate_before: float = 0.001
    stamp_rate_after: float = 0.0005
    stamp_change: str = "2023-08-28"
    enabled: bool = True

    def __post_init__(self) -> None:
        # fee rates are fractions of the traded value: a negative one pays the agent, one of 1 or more takes
        # at least the whole trade (and drives the cash account below zero)
        for name in ("commission_rate", "transfer_rate_before", "transfer_rate_after", "stamp_rate_before",
                     "stamp_rate_after"):
            v = getattr(self, name)
            if not 0.0 <= v < 1.0:
                raise ValueError(f"ArenaCostModel.{name} must be in [0, 1), got {v!r}")
        if self.commission_min < 0:
            raise ValueError(f"ArenaCostModel.commission_min must be >= 0, got {self.commission_min!r}")

    @classmethod
    def off(cls) -> "ArenaCostModel":
        """All fees zero."""
        return cls(enabled=False)

    def transfer_rate(self, day: Any) -> float:
        """Transfer-fee rate in force on execution day ``day``."""
        return self.transfer_rate_before if _date(day) < _date(self.transfer_change) else self.transfer_rate_after

    def stamp_rate(self, day: Any) -> float:
        """Sell-side stamp-duty rate in force on execution day ``day``."""
        return self.stamp_rate_before if _date(day) < _date(self.stamp_change) else self.stamp_rate_after

    def order_fee(self, value: float, side: int, day: Any) -> tuple[float, float, float]:
        """Commission, transfer fee and stamp duty of one order (:class:`quantgym.models.FeeModel`; the
        account runs this model in its compiled kernel, :func:`~quantgym.envs.quant_arena.exchange.order_fees`)."""
        from .exchange import order_fees

        return order_fees(value, side, day, self)

    def describe(self, style: str | None = None) -> str:
        """The fee rule in one line, rendered from these rates (the brief states it, spec §9).

        ``style`` None: every rate with its change date, e.g. ``"commission 2.5 bp of traded value (min 5 CNY
        per order), transfer fee 0.2 bp before 2022-04-29 and 0.1 bp from then, sell-side stamp duty 10 bp
        before 2023-08-28 and 5 bp from then"``; a prompt style (:data:`quantgym.spaces.PROMPT_STYLES`): the
        brief's wording in that style. A fee whose rates are all zero is left out; with none left (or
        ``enabled=False``, :meth:`off`) the rule is ``"no fees (costs switched off)"`` (short styles: ``"no fees"``).
        """
        on = self.enabled
        comm = on and (self.commission_rate > 0 or self.commission_min > 0)
        transfer = on and (self.transfer_rate_before > 0 or self.transfer_rate_after > 0)
        stamp = on and (self.stamp_rate_before > 0 or self.stamp_rate_after > 0)
        if not (comm or transfer or stamp):
            return "no fees (costs switched off)" if style in (None, "full") else "no fees"
        rate, mn = _bp(self.commission_rate), f"{self.commission_min:g}"
        if style is None:
            parts = [f"commission {rate} bp of traded value" + (f" (min {mn} CNY per order)" if self.commission_min else "")
                     if comm else "",
                     "transfer fee " + _dated(self.transfer_rate_before, self.transfer_rate_after, self.transfer_change)
                     if transfer else "",
                     "sell-side stamp duty " + _dated(self.stamp_rate_before, self.stamp_rate_after, self.stamp_change)
                     if stamp else ""]
        else:
            with_min = {"full": f"commission ({rate} bp, min {mn} CNY)", "compact": f"commission {rate} bp (min {mn} CNY)",
                        "minimal": f"commission {rate} bp min {mn} CNY"}
            comm_text = with_min[style] if self.commission_min else (
                f"commission ({rate} bp)" if style == "full" else f"commission {rate} bp")
            parts = [comm_text if comm else "", "transfer fee" if transfer else "",
                     ("sell-side stamp duty" if style == "full" else "sell stamp duty") if stamp else ""]
        return ", ".join(p for p in parts if p)


def _bp(rate: float) -> str:
    """A fraction as basis points without float noise: ``0.00025`` -> ``"2.5"``."""
    return f"{round(rate * 1e4, 6):g}"


def _dated(before: float, after: float, change: str) -> str:
    """A rate that changes on ``change``: ``"10 bp before 2023-08-28 and 5 bp from then"`` (one rate if equal)."""
    return f"{_bp(after)} bp" if before == after else f"{_bp(before)} bp before {change} and {_bp(after)} bp from then"


@dataclass(frozen=True)
class ImpactModel(Config, version=ARENA_VERSION):
    """Simulated order book of spec §10.8.

    Attributes
    ----------
    levels : int
        Book levels per side, L = 10.
    k_spacing : float
        ``Δ = 0.01·max(1, floor(k_s·σ·P/0.01 + 0.5))``, ``k_s = 0.006``.
    k_depth : float
        ``q = 100·max(1, floor(k_d·ADV·Δ/(σ·P)/100))``, ``k_d = 0.02``.
    vol_window : int
        20 daily log returns of ``adj_close`` for σ; at least ``vol_min_obs`` = 10, else
        ``vol_default`` = 0.03.
    adv_window : int
        20 rows for the average daily volume (tradable days only).
    enabled : bool
        ``False``: every order fills completely at the open (no impact, no depth cap).
    """

    levels: int = 10
    k_spacing: float = 0.006
    k_depth: float = 0.02
    vol_window: int = 20
    vol_min_obs: int = 10
    vol_default: float = 0.03
    adv_window: int = 20
    tick: float = 0.01
    enabled: bool = True

    def __post_init__(self) -> None:
        for name in ("k_spacing", "k_depth", "vol_default", "tick"):
            v = getattr(self, name)
            if not v > 0:
                raise ValueError(f"ImpactModel.{name} must be > 0, got {v!r}")
        for name in ("levels", "vol_window", "vol_min_obs", "adv_window"):
            v = getattr(self, name)
            if int(v) < 1:
                raise ValueError(f"ImpactModel.{name} must be >= 1, got {v!r}")

    @classmethod
    def off(cls) -> "ImpactModel":
        """Fill everything at the open price."""
        return cls(enabled=False)

    def describe(self, style: str | None = None) -> str:
        """The impact rule in one line (the brief states it, spec §9): ``style`` None names the book's
        parameters; a prompt style gives the brief's wording. Off: orders fill in full at the open."""
        if not self.enabled:
            return ("no market impact (orders fill in full at the open)" if style in (None, "full")
                    else "no impact: fills in full at the open")
        if style is None:
            return (f"market impact from a simulated {self.levels}-level order book (tick {self.tick:g} CNY, "
                    f"k_s {self.k_spacing:g}, k_d {self.k_depth:g}, volatility over {self.vol_window} days, "
                    f"ADV over {self.adv_window} days)")
        return "market impact from a simulated order book" if style == "full" else "order-book impact"


@dataclass(frozen=True)
class ExecutionModel(Config, version=ARENA_VERSION):
    """Portfolio construction and account rules (spec §4, §10.5–§10.7).

    Attributes
    ----------
    top_n : int
        75 selected names; each slot targets ``V* = NAV_open/75`` whatever the count.
    rebalance_band : float
        b = 0.25: trim above ``(1+b)V*``, top up below ``(1−b)V*``.
    lot : int
        100 shares (buys and trims).
    initial_capital : float
        10,000,000 CNY.
    limits : bool
        Apply daily price limits (§10.6).
    """

    top_n: int = 75
    rebalance_band: float = 0.25
    lot: int = 100
    initial_capital: float = 10_000_000.0
    limits: bool = True

    def describe(self) -> str:
        """The execution rules in one line (top-N slots, band, lot, price limits, capital; spec §10.5–§10.7).
        The brief states ``top_n``, ``lot`` and ``limits`` in its own sentences."""
        return (f"top {self.top_n} names bought at the next open, each slot 1/{self.top_n} of NAV, rebalance band "
                f"{self.rebalance_band:g}, lots of {self.lot} shares, "
                + ("daily price limits" if self.limits else "no daily price limits")
                + f", initial capital {self.initial_capital:,.0f} CNY")


@dataclass(frozen=True)
class ArenaScoringConfig(Config):
    """Metrics and the 0–100 score (spec §6, §10.11–§10.13).

    Attributes
    ----------
    version : str
        ``qa-v1``; written in every record.
    n_ann : int
        242 trading days per year (§10.11 overrides §5's 252).
    scale_r, scale_sr, scale_ic, scale_a, scale_ls, scale_to : float
        Logistic scales ``c`` of ``g(x) = 1/(1+exp(−x/c))``: 0.20, 1.0, 0.03, 2.0, 1.5, 0.15.
    turnover_pivot : float
        s_TO uses ``x = 0.25 − TO``.
    w_r, w_l, w_sig : float
        Q = 0.60·s_R + 0.20·s_L + 0.05·(s_IC + s_A + s_LS + s_TO).
    ic_min_pairs : int
        5 pairs for a valid RankIC day.
    quantiles : int
        5 (long-short quintiles).
    cluster_threshold, qualify_threshold, diversity_scale : float, float, int
        |ρ̄| ≥ 0.7 links features; |ρ̄(f, score)| ≥ 0.05 qualifies a cluster; D = min(K/32, 1).
    diversity_base, diversity_weight : float
        S = 100·Q·(0.9 + 0.1·D).
    sample_every : int
        Diversity sample dates: decision dates D_j with j ≡ 0 (mod 5).
    w_in, w_out : float
        S = 0.5·S_in + 0.5·S_out.
    max_features : int
        300 declared features at most.
    failed_day_fraction : float
        More than 10 % of decision dates with a day error ⇒ status ``failed``.
    inf_score_is_day_error : bool
        **[project choice]** True (default): a ``score`` Series holding ±inf on a decision
        date is a **day error** on that date (recorded with a message naming the symbols;
        the date's scores are all NaN and it counts towards ``failed_day_fraction``), so an
        all-inf submission ends ``failed`` instead of silently holding cash. This refines
        §10.4's "±inf → NaN", which stays the rule for features (and for scores when False).
        The host re-check of the child's scores already counted ±inf as a day error.
    pbo_blocks : int
        **[project choice]** 16 CSCV blocks for the research loop's Probability of Backtest Overfitting
        (the paper's S = 16: C(16, 8) = 12,870 splits of the research window; Bailey, Borwein, López de
        Prado & Zhu 2017). A diagnostic beside S, never part of it.
    zero_coverage_status : {"ok", "no_signal"}
        What an evaluation with **coverage 0** (no finite score on any decision date: the
        account never trades) is. ``"ok"`` (default, **spec-defined, not a project
        choice**): §10.5 "all NaN ⇒ all cash" and §10.12 "an all-cash submission is a legal
        strategy: S_out ≈ 43.6", so it is scored like any strategy (≈ 45 total on the
        default windows) — but the result's ``message`` says ``ok (no signal: …)`` and a
        ``NoSignal`` note (not counted as a day error) heads the feedback's ``errors``.
        ``"no_signal"`` ([project choice], opt-in): a failure status with that message;
        like every status ≠ ``ok`` the window's S = 0 and its metrics are null (§10.4).
    """

    version: str = ARENA_VERSION
    n_ann: int = 242
    scale_r: float = 0.20
    scale_sr: float = 1.0
    scale_ic: float = 0.03
    scale_a: float = 2.0
    scale_ls: float = 1.5
    scale_to: float = 0.15
    turnover_pivot: float = 0.25
    w_r: float = 0.60
    w_l: float = 0.20
    w_sig: float = 0.05
    ic_min_pairs: int = 5
    quantiles: int = 5
    cluster_threshold: float = 0.7
    qualify_threshold: float = 0.05
    diversity_scale: int = 32
    diversity_base: float = 0.9
    diversity_weight: float = 0.1
    sample_every: int = 5
    w_in: float = 0.5
    w_out: float = 0.5
    max_features: int = 300
    failed_day_fraction: float = 0.10
    inf_score_is_day_error: bool = True
    zero_coverage_status: str = "ok"
    pbo_blocks: int = 16

    def __post_init__(self) -> None:
        if self.zero_coverage_status not in ("ok", "no_signal"):
            raise ValueError(f"zero_coverage_status must be 'ok' or 'no_signal', got {self.zero_coverage_status!r}")


@dataclass(frozen=True)
class ArenaSandboxLimits(Config, version=ARENA_VERSION):
    """Limits of the child process that runs agent code (spec §10.4).

    Attributes
    ----------
    import_seconds : float
        30 s to import (exec) the submission module.
    day_seconds : float
        10 s wall per decision date.
    eval_seconds : float
        1,800 s wall per evaluation (one window).
    memory_mb : int
        4 GiB address-space limit.
    cpu_seconds : float
        CPU-time limit of the child (the evaluation wall limit by default).
    max_output_bytes : int
        1 MiB: what the submission may print (stdout and stderr of one evaluation together); the rest is
        dropped and the evaluation is a ``violation`` (error type ``output_limit``).
    frame_introspection : bool
        False (default): the sandbox refuses frame introspection by agent code (``sys._getframe``,
        ``tb_frame``…, docs/security.md) on top of the look-ahead keeper; True: the keeper alone.
    """

    import_seconds: float = 30.0
    day_seconds: float = 10.0
    eval_seconds: float = 1800.0
    memory_mb: int = 4096
    cpu_seconds: float = 1800.0
    max_output_bytes: int = 1 << 20
    frame_introspection: bool = False


@dataclass(frozen=True)
class Windows(Config, version=ARENA_VERSION):
    """Evaluation windows (spec §2, §10.2). Dates are ISO strings, inclusive.

    Default: warm-up 2021, research 2022-01-01..2023-12-31, sealed 2024-01-01..2024-12-31.
    ``max_lookback`` (L_max = 242) is the longest history the view serves.
    """

    warmup_start: str = "2021-01-01"
    research_start: str = "2022-01-01"
    research_end: str = "2023-12-31"
    sealed_start: str = "2024-01-01"
    sealed_end: str = "2024-12-31"
    max_lookback: int = 242

    def __post_init__(self) -> None:
        r0, r1, s0, s1 = (_date(x) for x in (self.research_start, self.research_end, self.sealed_start, self.sealed_end))
        if not (r0 <= r1 < s0 <= s1):
            raise ValueError(f"windows must satisfy research_start <= research_end < sealed_start <= sealed_end; got {self}")
        if not (1 <= int(self.max_lookback)):
            raise ValueError("max_lookback must be >= 1")

    @property
    def period_label(self) -> str:
        """The ``period`` of a Quant-Arena result, whichever path wrote it (``evaluate``, ``quantgym eval``,
        ``bench``, ``sweep``): ``sealed_<year>`` for a sealed window inside one calendar year (the default
        ``sealed_2024``), else ``sealed_<start>_<end>``."""
        s0, s1 = self.sealed_start, self.sealed_end
        return f"sealed_{s0[:4]}" if s0[:4] == s1[:4] else f"sealed_{s0}_{s1}"


@dataclass(frozen=True)
class ArenaToolConfig(ToolConfig, Config, version=ARENA_VERSION):
    """Budgets of tool mode (``tools=True``, docs/tools.md): what a tool-using agent may spend (each an
    integer >= 0; ``budget`` is the per-stage :class:`~quantgym.tools.ToolBudget`).

    Attributes
    ----------
    calls : int
        20 tool calls per stage (a stage ends at each candidate submitted or at the freeze; ``submit`` and
        ``freeze`` themselves use none).
    chars : int
        20,000 characters of tool results per stage; a longer result is cut and ends with
        ``[truncated: N chars]``.
    explore_runs : int
        10 runs of the ``explore`` tool per episode (the exploration budget, separate from the candidate
        budget): each run is one sandboxed snippet on research-window data, whatever its outcome.
    """

    calls: int = 20
    chars: int = 20_000
    explore_runs: int = 10


@dataclass(frozen=True)
class ArenaConfig(Config, version=ARENA_VERSION):
    """Everything that defines a Quant-Arena evaluation; serialised into every record."""

    #: the fee model: the spec's :class:`ArenaCostModel` (compiled), or an :class:`~quantgym.models.ImportableModel`
    #: naming a class that implements :class:`quantgym.models.FeeModel` (docs/quant_arena.md, "Your own cost model")
    cost: ArenaCostModel | ImportableModel = field(default_factory=ArenaCostModel)
    #: the impact (fill) model: the spec's simulated book :class:`ImpactModel` (compiled), or an
    #: :class:`~quantgym.models.ImportableModel` naming a :class:`quantgym.models.MarketImpactModel` class
    impact: ImpactModel | ImportableModel = field(default_factory=ImpactModel)
    execution: ExecutionModel = field(default_factory=ExecutionModel)
    scoring: ArenaScoringConfig = field(default_factory=ArenaScoringConfig)
    sandbox: ArenaSandboxLimits = field(default_factory=ArenaSandboxLimits)
    windows: Windows = field(default_factory=Windows)


#: Quant-Arena's Sharpe convention in one line, for the footer of every table that shows a Quant-Arena Sharpe
#: (the task record's ``sharpe_note``): spec §10.11 takes no risk-free rate
SHARPE_NOTE = (f"Sharpe = √{ArenaScoringConfig.n_ann}·mean/std of daily returns, no risk-free rate "
               "(spec quant_arena §10.11)")


__all__ = ["ARENA_VERSION", "ArenaCostModel", "ImpactModel", "ExecutionModel", "ArenaScoringConfig", "ArenaSandboxLimits",
           "Windows", "ArenaToolConfig", "ArenaConfig", "SHARPE_NOTE"]
