"""Frozen, versioned configuration of Market-Bench: every **[project choice]** in one place.

Spec: ``docs/spec/market_bench.md`` (§9 "Implementation decisions" wins). Everything a
round needs -- data window, parameters, generator settings, seeds -- is fixed here for the
task-set version :data:`TASK_VERSION`; changing any value makes a new version.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from quantgym.config import Config
from quantgym.tools import ToolConfig

#: Task-set version (spec §9). Part of every seed and of the bench's ``period`` column.
TASK_VERSION = "v1"
#: Strategy ids in spec order (strategy 1, 2, 3).
STRATEGIES: tuple[str, ...] = ("scheduled", "pairs", "delta_hedge")
STRATEGY_NUMBER = {"scheduled": 1, "pairs": 2, "delta_hedge": 3}
N_ROUNDS = 5
#: Price tick (spec §9.1.3): every price is a multiple; prices are keyed by integer ticks.
TICK = 0.01
#: Book levels kept in every v1 round (the paper's "top 3 levels", §9.1.1).
LEVELS = 3
#: Allowed imports of an attempt (spec §5).
ALLOWED_IMPORTS: tuple[str, ...] = (
    "pandas", "numpy", "pathlib", "datetime", "collections", "typing", "statistics", "math", "sys", "os",
    "dataclasses",
)

#: Output contract (spec §9.11): the exact metric keys per strategy, in order.
METRIC_KEYS: dict[str, tuple[str, ...]] = {
    "scheduled": (
        "final_cash", "final_position", "realized_pnl", "unrealized_pnl", "final_equity", "max_drawdown",
        "n_fills", "filled_qty", "unfilled_qty", "syn_bid_size", "syn_ask_size", "syn_bid_vwap", "syn_ask_vwap",
    ),
    "pairs": (
        "final_cash", "final_position_a", "final_position_b", "realized_pnl", "unrealized_pnl", "final_equity",
        "max_drawdown", "n_entries", "n_exits", "n_orders", "n_fills", "filled_qty_a", "filled_qty_b",
        "fill_vwap_a", "fill_vwap_b", "final_z",
    ),
    "delta_hedge": (
        "final_cash", "final_position", "final_option_delta", "final_net_delta", "realized_pnl", "unrealized_pnl",
        "final_equity", "max_drawdown", "n_hedges_sent", "n_hedges_filled", "n_hedges_killed", "n_fills",
        "filled_qty",
    ),
}
#: Optional extra key an attempt may return: its equity curve (C0 then one point per book row).
PATH_KEY = "equity_curve"


def stream_seed(strategy: str | int, round_: int, stream: str, version: str = TASK_VERSION) -> int:
    """Seed of a random stream (spec §9.3.1).

    ``int.from_bytes(sha256(f"market_bench|{version}|{s}|{round}|{stream}").digest()[:8], "little")``
    with ``s`` the strategy number 1..3. Streams: ``sizes``, ``book``, ``delta``.
    """
    s = STRATEGY_NUMBER[strategy] if isinstance(strategy, str) else int(strategy)
    text = f"market_bench|{version}|{s}|{int(round_)}|{stream}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


# ---------------------------------------------------------------- data windows (§9.13)
#: Real-book datasets of v1: name -> (source, local window). Windows of the 600519 day are
#: Asia/Shanghai local times, end inclusive for the morning (11:30:00) and exclusive at 14:57:00.
DATASETS: dict[str, dict] = {
    "msft": {"source": "lobster_msft", "instrument": "MSFT (NASDAQ, LOBSTER sample, 2012-06-21)",
             "currency": "USD", "real": True},
    "sse_morning": {"source": "sse_600519", "instrument": "600519.SH Kweichow Moutai (SSE Level-2, 2023-02-07)",
                    "currency": "CNY", "real": True, "window": ("09:30:00", "11:30:00")},
    "sse_afternoon": {"source": "sse_600519", "instrument": "600519.SH Kweichow Moutai (SSE Level-2, 2023-02-07)",
                      "currency": "CNY", "real": True, "window": ("13:00:00", "14:57:00")},
    "sse_day": {"source": "sse_600519", "instrument": "600519.SH Kweichow Moutai (SSE Level-2, 2023-02-07)",
                "currency": "CNY", "real": True, "window": ("09:30:00", "14:57:00")},
}


# ---------------------------------------------------------------- strategy 1
@dataclass(frozen=True)
class ScheduledRound(Config, version=TASK_VERSION):
    """Strategy 1 round (spec §9.13): data, starting cash and the order schedule.

    ``schedule``: ``(offset, side, qty)`` with offset in ``offset_unit`` ("ms" or "s") from the
    round's first ``ts_event``; side ``"BUY"``/``"SELL"``.
    """

    round: int
    data: str
    c0: float
    offset_unit: str
    schedule: tuple[tuple[int, str, int], ...]


def _sched(text: str) -> tuple[tuple[int, str, int], ...]:
    out = []
    for tok in text.split(","):
        off, so = tok.split()
        out.append((int(off), {"B": "BUY", "S": "SELL"}[so[0]], int(so[1:])))
    return tuple(out)


SCHEDULED_ROUNDS: tuple[ScheduledRound, ...] = (
    ScheduledRound(1, "msft", 100_000.0, "ms", _sched(
        "100 B1500, 400 B2500, 900 S1000, 1300 B800, 1700 S2500, 2100 S1500, 2500 B1000, 3000 B500")),
    ScheduledRound(2, "msft", 50_000.0, "ms", _sched(
        "50 B600, 50 B900, 350 S2000, 800 B1200, 800 S300, 1200 B1800, 1600 S700, 2000 B1500, 2400 S1100, "
        "2700 S900")),
    ScheduledRound(3, "sse_morning", 5_000_000.0, "s", _sched(
        "600 B800, 603 B600, 1200 B1500, 1800 S500, 2400 B2000, 3600 S3000, 4800 S2500, 6000 B1200, 7000 B1000")),
    ScheduledRound(4, "sse_afternoon", 2_000_000.0, "s", _sched(
        "300 S600, 300 S400, 306 S800, 1500 B1500, 2700 B1800, 3900 S2000, 5100 B700, 6300 S900, 7000 B300")),
    ScheduledRound(5, "sse_day", 3_000_000.0, "s", _sched(
        "0 B500, 900 B1000, 1800 S700, 2700 B1500, 3600 S2500, 4500 S600, 5400 B800, 6300 B1200, 9000 S900, "
        "9000 B300, 12600 B400, 14400 S1500, 16200 B2000, 18000 S1800, 19200 B600, 19800 S400")),
)


# ---------------------------------------------------------------- strategy 2
@dataclass(frozen=True)
class PairsBookConfig(Config, version=TASK_VERSION):
    """Synthetic pairs-book generator (spec §9.12.1). Symbols KO (leg A) and PEP (leg B) are labels."""

    n_rows: int = 6000
    p_a: float = 0.5
    phi: float = 0.995
    sigma_s: float = 0.004
    sigma_b: float = 0.01
    beta_star: float = 0.375
    mid_b0: float = 170.0
    mid_a0: float = 60.0
    dt_lo_ms: int = 50
    dt_hi_ms: int = 450
    t0_ns: int = 1_709_305_200_000_000_000  # 2024-03-01 10:00:00 America/New_York
    levels: int = LEVELS
    symbol_a: str = "KO"
    symbol_b: str = "PEP"


@dataclass(frozen=True)
class PairsRound(Config, version=TASK_VERSION):
    """Strategy 2 round (spec §9.13); times in ns, money in USD."""

    round: int
    book: PairsBookConfig
    beta: float
    window: int
    z_in: float
    z_out: float
    cooldown_ns: int
    k: float
    delay_ns: int
    alloc: float
    c0: float


_MS, _S = 1_000_000, 1_000_000_000
PAIRS_ROUNDS: tuple[PairsRound, ...] = (
    PairsRound(1, PairsBookConfig(6000, 0.5, 0.995, 0.004), 0.375, 200, 2.0, 0.5, 30 * _S, 1.0, 120 * _MS, 0.10, 1e6),
    PairsRound(2, PairsBookConfig(6000, 0.5, 0.995, 0.004), 0.375, 100, 1.5, 0.25, 10 * _S, 1.5, 80 * _MS, 0.20, 1e6),
    PairsRound(3, PairsBookConfig(6000, 0.5, 0.995, 0.004), 0.3125, 300, 2.0, 0.5, 60 * _S, 1.0, 100 * _MS, 0.10, 1e6),
    PairsRound(4, PairsBookConfig(8000, 0.3, 0.995, 0.004), 0.375, 150, 1.75, 0.5, 20 * _S, 1.25, 250 * _MS, 0.15, 5e5),
    PairsRound(5, PairsBookConfig(10000, 0.5, 0.99, 0.006), 0.4375, 250, 2.25, 0.75, 45 * _S, 2.0, 75 * _MS, 0.25, 2e6),
)


# ---------------------------------------------------------------- strategy 3
@dataclass(frozen=True)
class DeltaSeriesConfig(Config, version=TASK_VERSION):
    """Seeded random-walk option-delta series (spec §9.12.2): step (ns), start D0, increment sd."""

    step_ns: int
    d0: int
    sigma: float


@dataclass(frozen=True)
class DeltaHedgeRound(Config, version=TASK_VERSION):
    """Strategy 3 round (spec §9.13); times in ns, deltas in shares-equivalent."""

    round: int
    data: str
    delta: DeltaSeriesConfig
    c0: float
    interval_ns: int
    delay_ns: int
    fraction: float
    min_gap_ns: int
    k: float
    lot: int = 100


DELTA_HEDGE_ROUNDS: tuple[DeltaHedgeRound, ...] = (
    DeltaHedgeRound(1, "msft", DeltaSeriesConfig(50 * _MS, -1500, 300), 1e6, 100 * _MS, 20 * _MS, 0.5, 200 * _MS, 1.0),
    DeltaHedgeRound(2, "msft", DeltaSeriesConfig(25 * _MS, -3000, 400), 1e6, 50 * _MS, 10 * _MS, 1.0, 100 * _MS, 0.75),
    DeltaHedgeRound(3, "sse_morning", DeltaSeriesConfig(10 * _S, 2000, 100), 1e7, 60 * _S, 2 * _S, 0.5, 180 * _S, 1.0),
    DeltaHedgeRound(4, "sse_afternoon", DeltaSeriesConfig(5 * _S, -1500, 80), 2e7, 30 * _S, 4 * _S, 0.75, 60 * _S, 0.75),
    DeltaHedgeRound(5, "sse_day", DeltaSeriesConfig(15 * _S, 0, 150), 2e7, 120 * _S, 5 * _S, 1.0, 300 * _S, 1.5),
)

ROUNDS: dict[str, tuple] = {"scheduled": SCHEDULED_ROUNDS, "pairs": PAIRS_ROUNDS, "delta_hedge": DELTA_HEDGE_ROUNDS}


# ================================================================ task set v2 (docs/market_bench.md, "Task set v2")
#: Task sets: ``v1`` (spec §9.13; the default) and ``v2`` (real MSFT hour, real A-share pair). The one place
#: where a task set is chosen: every path (env ``task_set=``, bench, eval, build) passes it to
#: :func:`round_config` / :func:`task_set_rounds`.
TASK_SETS: tuple[str, ...] = ("v1", "v2")
DEFAULT_TASK_SET = TASK_VERSION
#: Whether a task set ships its round input files as package data [project choice]. v1: yes (small). v2: no:
#: its books are rebuilt at load time from the bundled LOBSTER hour and from the A-share Level-2 pair (the
#: folder when found, else the shipped two-stock extract, :data:`quantgym.data.a_share_l2.BUNDLED_SNAPSHOTS`),
#: then checked byte for byte against the shipped sha256 manifest; params, meta and reference outputs are shipped.
SHIPS_INPUTS: dict[str, bool] = {"v1": True, "v2": False}
#: v2 MSFT windows: America/New_York local [start, end) on 2012-06-21 of the book rebuilt from the full
#: LOBSTER hour (quantgym.data.lobster); end exclusive ("10:30:00" = the whole rest of the hour).
_MSFT_HOUR = "MSFT (NASDAQ, LOBSTER, 2012-06-21), book rebuilt from LOBSTER's message stream"
DATASETS.update({
    key: {"source": "lobster_msft_hour", "instrument": f"{_MSFT_HOUR}, {a}-{b} New York time", "currency": "USD",
          "real": True, "window": (a, b), "tz": "America/New_York"}
    for key, (a, b) in {"msft_0930_0935": ("09:30:00", "09:35:00"), "msft_0930_0940": ("09:30:00", "09:40:00"),
                        "msft_0945_1000": ("09:45:00", "10:00:00"), "msft_0950_1000": ("09:50:00", "10:00:00"),
                        "msft_1000_1005": ("10:00:00", "10:05:00"), "msft_1000_1010": ("10:00:00", "10:10:00"),
                        "msft_1015_1030": ("10:15:00", "10:30:00"), "msft_1020_1030": ("10:20:00", "10:30:00"),
                        "msft_hour": ("09:30:00", "10:30:00")}.items()
})


@dataclass(frozen=True)
class RealPairsBook(Config, version="v2"):
    """A real two-symbol book for strategy 2 (task set v2): two stocks of one snapshot file of
    :mod:`quantgym.data.a_share_l2`, same day, continuous trading within ``window`` (local
    Asia/Shanghai, [start, end]; the lunch break is never in it). ``symbol_a`` is leg A."""

    file: str = "szse_20220601"
    symbol_a: str = "300274.SZ"
    symbol_b: str = "300122.SZ"
    window: tuple[str, str] = ("09:30:00", "14:57:00")
    levels: int = LEVELS


_DAY, _AM, _PM = ("09:30:00", "14:57:00"), ("09:30:00", "11:30:00"), ("13:00:00", "14:57:00")
#: v2 schedules: (MSFT window, C0 USD, orders as "offset-in-seconds side+qty"); every offset is from the
#: window's first row; an offset past the window's last row expires (rounds 1, 4, 5)
_SCHEDULES_V2 = (
    ("msft_0930_0935", 100_000.0, "0 B1500, 15 B2500, 30 S1000, 60 B3000, 90 S4000, 120 S2500, 150 B1200, "
                                  "180 B2000, 240 S800, 299 B1000, 301 B500"),
    ("msft_0950_1000", 50_000.0, "0 B600, 0 B900, 120 S2000, 240 B1200, 240 S300, 300 B1800, 420 S700, "
                                 "480 B1500, 540 S1100, 590 S900"),
    ("msft_1000_1010", 200_000.0, "5 B6000, 6 B6000, 60 S9000, 180 S3000, 300 B8000, 420 B2000, 480 S4000, "
                                  "560 S2500, 599 B1000"),
    ("msft_1020_1030", 60_000.0, "10 B800, 70 B900, 130 S1000, 190 B1500, 250 S1500, 310 S600, 370 B700, "
                                 "430 S1200, 490 B2000, 550 S1500, 620 B300"),
    ("msft_hour", 150_000.0, "0 B2000, 180 B3000, 360 S1500, 540 B2500, 720 S4000, 900 S2000, 1080 B1000, "
                             "1260 B6000, 1440 S3500, 1620 S1500, 1800 B800, 1800 S800, 1980 B2200, 2160 S5000, "
                             "2340 B1500, 2520 B3000, 2700 S2500, 2880 B1200, 3060 S900, 3240 B4000, 3420 S1000, "
                             "3700 B500"),
)
SCHEDULED_ROUNDS_V2: tuple[ScheduledRound, ...] = tuple(
    ScheduledRound(r, data, c0, "s", _sched(text)) for r, (data, c0, text) in enumerate(_SCHEDULES_V2, 1))
PAIRS_ROUNDS_V2: tuple[PairsRound, ...] = (
    PairsRound(1, RealPairsBook(window=_DAY), 0.9375, 200, 2.0, 0.5, 60 * _S, 1.0, 4 * _S, 0.10, 1e6),
    PairsRound(2, RealPairsBook(window=_AM), 0.875, 100, 1.5, 0.25, 30 * _S, 1.5, 4 * _S, 0.20, 1e6),
    PairsRound(3, RealPairsBook(window=_PM), 1.0, 300, 2.0, 0.5, 120 * _S, 1.0, 5 * _S, 0.10, 2e6),
    PairsRound(4, RealPairsBook(window=_DAY), 0.9375, 150, 1.75, 0.5, 45 * _S, 1.25, 7 * _S, 0.15, 5e5),
    PairsRound(5, RealPairsBook(window=_DAY), 0.875, 400, 2.25, 0.75, 90 * _S, 2.0, 6 * _S, 0.25, 3e6),
)
DELTA_HEDGE_ROUNDS_V2: tuple[DeltaHedgeRound, ...] = (
    DeltaHedgeRound(1, "msft_0930_0940", DeltaSeriesConfig(1 * _S, -2000, 200), 1e6, 1 * _S, 50 * _MS, 0.5,
                    3 * _S, 0.5),
    DeltaHedgeRound(2, "msft_0945_1000", DeltaSeriesConfig(500 * _MS, 3000, 300), 1e6, 2 * _S, 100 * _MS, 0.5,
                    5 * _S, 1.0),
    DeltaHedgeRound(3, "msft_1000_1005", DeltaSeriesConfig(250 * _MS, -1000, 150), 1e6, 500 * _MS, 20 * _MS, 0.75,
                    1 * _S, 0.5),
    DeltaHedgeRound(4, "msft_1015_1030", DeltaSeriesConfig(2 * _S, 500, 400), 2e6, 5 * _S, 200 * _MS, 0.5,
                    15 * _S, 0.75),
    DeltaHedgeRound(5, "msft_hour", DeltaSeriesConfig(5 * _S, 0, 500), 2e6, 10 * _S, 250 * _MS, 1.0, 30 * _S, 1.5),
)
ROUNDS_BY_SET: dict[str, dict[str, tuple]] = {
    "v1": ROUNDS,
    "v2": {"scheduled": SCHEDULED_ROUNDS_V2, "pairs": PAIRS_ROUNDS_V2, "delta_hedge": DELTA_HEDGE_ROUNDS_V2},
}


def check_task_set(task_set: str | None) -> str:
    """``task_set`` validated (None: :data:`DEFAULT_TASK_SET`); raises a one-line ``ValueError``."""
    ts = DEFAULT_TASK_SET if task_set is None else task_set
    if ts not in TASK_SETS:
        raise ValueError(f"unknown Market-Bench task set {task_set!r}; choose from {TASK_SETS}")
    return ts


def round_config(strategy: str, round_: int, task_set: str | None = None):
    """The frozen round config of (strategy, round) of a task set (default ``v1``), round in 1..5."""
    rounds = ROUNDS_BY_SET[check_task_set(task_set)]
    if strategy not in rounds:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {STRATEGIES}")
    if not 1 <= int(round_) <= N_ROUNDS:
        raise ValueError(f"round must be in 1..{N_ROUNDS}, got {round_!r}")
    return rounds[strategy][int(round_) - 1]


# ---------------------------------------------------------------- sandbox and scoring
@dataclass(frozen=True)
class MarketBenchSandboxLimits(Config, version=TASK_VERSION):
    """Limits of one attempt (spec §5: execution time limit [project choice] 120 s)."""

    cpu_seconds: float = 120.0
    wall_seconds: float = 150.0
    memory_mb: int = 2048


@dataclass(frozen=True)
class MarketBenchScoringConfig(Config):
    """Scoring of spec §6 (paper): K attempts, 2-decimal tables; plus the beyond-paper extras.

    The paper's ``pass@k`` (solved = an attempt that ran and returned every metric) is kept
    exactly; it is gameable by a stub that returns constants. Beside it, the tolerance-based
    ``correct`` flag per attempt and ``correct@1`` / ``correct@k`` (``correct_atol``,
    ``correct_rtol``) are the anti-stub metrics, and the env reward follows correctness.
    """

    version: str = f"market_bench-scoring-{TASK_VERSION}.1"
    #: K attempts per episode (3, spec §6): the episode's length and the k of pass@k, in this one place
    #: (``MarketBenchEnv(attempts=...)`` sets it)
    attempts: int = 3
    decimals: int = 2
    #: relative error denominator floor: |y - y_hat| / max(|y|, rel_floor) (beyond the paper, §6)
    rel_floor: float = 1e-9
    #: names of the paper's aggregate metrics (in ranking order, §6)
    ranking: tuple[str, ...] = field(default=("pass@3", "pass@1", "mean_mae_solved", "avg_attempt"))
    # ---- correctness beside the paper's pass@k (anti-stub; [project choice], beyond spec §6) ----
    #: a SUCCESS attempt is **correct** iff every metric has |y - y_hat| <= max(correct_atol,
    #: correct_rtol * |y|) (y = reference). Correct implementations differ from the reference in
    #: the last bits only (spec §9.14: < 2e-7 in z, far below one share or one cent), so any
    #: rule error, stub or rounding of the output fails it.
    correct_atol: float = 1e-6
    correct_rtol: float = 1e-6
    #: env reward of a SUCCESS attempt that is not correct (spec §7 defines no reward):
    #: ``reward_incorrect_max * exp(-mean_clipped_rel_error / reward_rel_scale)`` in [0, 0.5),
    #: where mean_clipped_rel_error = mean over the d metrics of min(rel_error, 1). A correct
    #: attempt gets 1.0, a FAILED one 0.0. A stub returning zeros has mean clipped relative
    #: error ~0.9 -> reward ~6e-5.
    reward_incorrect_max: float = 0.5
    reward_rel_scale: float = 0.1



@dataclass(frozen=True)
class MarketBenchToolConfig(ToolConfig, Config, version=TASK_VERSION):
    """Budgets of tool mode (``tools=True``, docs/tools.md); each an integer >= 0, ``budget`` is the per-stage
    :class:`~quantgym.tools.ToolBudget`.

    Attributes
    ----------
    calls : int
        12 tool calls per stage (a stage ends at each attempt; ``submit`` itself uses none).
    chars : int
        20,000 characters of tool results per stage; a longer result is cut and ends with
        ``[truncated: N chars]``.
    draft_runs : int
        5 runs of ``run_draft`` per episode, whatever their outcome (each is one sandboxed run under the
        attempt's limits).
    draft_rows : int
        300: the sample slice a draft runs on is the first 300 rows of ``book.csv`` (the other input files
        whole).
    peek_rows : int
        50: the most rows one ``peek`` shows.
    """

    calls: int = 12
    chars: int = 20_000
    draft_runs: int = 5
    draft_rows: int = 300
    peek_rows: int = 50


@dataclass(frozen=True)
class MarketBenchConfig(Config, version=TASK_VERSION):
    """Everything that defines a Market-Bench episode besides the task (strategy, round or ``data``).

    Attributes
    ----------
    sandbox : MarketBenchSandboxLimits
        Limits of one attempt (CPU 120 s, wall 150 s, 2 GiB).
    scoring : MarketBenchScoringConfig
        K attempts per episode (``scoring.attempts``, 3, spec §6), correctness tolerances, reward, table
        rounding (spec §6).
    feedback : bool
        False (the paper's independent one-shot attempts); True: repair mode, the observation carries
        the failure reason and trace, or the per-metric errors.
    end_on_success : bool
        End the episode at the first correct attempt (True).
    prompt_style : {"full", "compact", "minimal"}
        Rendering of the task prompt (:data:`quantgym.spaces.PROMPT_STYLES`).
    task_set : {"v1", "v2"}
        The rounds (:data:`TASK_SETS`; default ``v1``): the one place where env, bench and eval take it from.
    """

    sandbox: MarketBenchSandboxLimits = field(default_factory=MarketBenchSandboxLimits)
    scoring: MarketBenchScoringConfig = field(default_factory=MarketBenchScoringConfig)
    feedback: bool = False
    end_on_success: bool = True
    prompt_style: str = "full"
    task_set: str = DEFAULT_TASK_SET


__all__ = [n for n in dir() if not n.startswith("_")]
