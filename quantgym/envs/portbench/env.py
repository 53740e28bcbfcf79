"""The PortBench Gymnasium environment (spec ``portbench.md`` §4–§7, §11; clean mode): the simulator glue and
the Gymnasium API. The jobs beside it: :mod:`.actions` (the action decoder), :mod:`.observation` (the
observation view), :mod:`.scorer` (ground truth and S1–S5 scores), :mod:`.records` (the decision records),
:mod:`.paper.mode` (every paper-mode rule).

Longer than 500 lines as one job, the Gymnasium API over one decision cycle (reset, the stage steps, the
trade); its parts already live in the modules named above.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
import pandas as pd

from quantgym._util import check_flag
from quantgym.envs.portbench import prompts
from quantgym.envs.portbench.actions import (
    ACTION_KEYS, STAGES, STATUS_OK, STATUS_REFUSED, STATUS_UNPARSEABLE, ActionDecoder, DecisionLog, action_space,
    allocate_and_trade,
)
from quantgym.envs.portbench.blinding import BlindView, check_blind
from quantgym.envs.portbench.ceps import clip_float
from quantgym.envs.portbench.config import (
    STRESS_PERIODS, WEIGHT_SUM_TOLERANCE, LivePeriod, PortBenchConfig, resolve_live, resolve_period,
    within_tolerance,
)
from quantgym.envs.portbench.market import MarketSnapshot
from quantgym.envs.portbench.observation import OBS_KEYS, ObservationView, check_obs_keys, observation_space
from quantgym.envs.portbench.optimize import single_thread_blas
from quantgym.envs.portbench.paper.config import PaperFidelity
from quantgym.envs.portbench.paper.mode import fidelity_mode, resolve_fidelity
from quantgym.envs.portbench.profiles import get_profile
from quantgym.envs.portbench.records import DecisionRecords, coerce_message, flat
from quantgym.envs.portbench.scorer import DecisionScorer
from quantgym.envs.portbench.simulator import Orders, PortfolioSimulator, TickerWeights
from quantgym.envs.portbench.stages import BUY, HOLD, SIGNAL_NAMES, s1_score, s12_parts, s2_score
from quantgym.envs.portbench.universe import MACRO_KEYS
from quantgym.metrics import performance_summary
from quantgym.spaces import check_prompt_style
from quantgym.tools import parse_tool_call

_F64, _I64 = np.dtype(np.float64), np.dtype(np.int64)
_ACTION_KEYSET = frozenset(ACTION_KEYS)
#: the observation entries that are (L, N) / (N, N) arrays of the per-row array cache
_ROW_ARRAYS = {"returns": "obs_returns", "returns_mask": "obs_mask", "corr": "obs_corr"}
_LEAN_KERNEL: list = []


def _lean_kernel():
    """:func:`~quantgym.envs.portbench.actions.allocate_and_trade`'s compiled dispatcher (or the interpreted
    function with ``QUANTGYM_JIT=0``), called without the wrapper's extra Python call (speed only)."""
    _LEAN_KERNEL.append(allocate_and_trade._quantgym_dispatcher())
    return _LEAN_KERNEL[0]


class PortBenchEnv(gym.Env):
    """
    ## Description
    PortBench (Zhao, Chen, Su; arXiv 2605.27887): a five-stage allocation pipeline run at every
    rebalance date of a historical period over a real 80-asset multi-asset universe (25 equity ETFs,
    15 bond ETFs, 16 commodity ETFs, 10 real-estate ETFs, 10 cryptocurrencies, 4 cash ETFs). At each
    decision date ``d`` the agent answers S1 market interpretation (a view in [-1, 1] per asset),
    S2 signal generation (buy/hold/sell per asset) and S3 weight optimisation (long-only weights);
    S4 execution and S5 risk monitoring are computed from the S3 weights. Every stage is scored
    against rule-based ground truth from the snapshot; CEPS combines the stage scores; the
    weights are traded in a NAV sandbox with costs. Spec: ``docs/spec/portbench.md`` (clean mode).

    ## Action Space
    ``Dict(views: Box(-1, 1, (N,)), signals: MultiDiscrete([3]*N) (0 sell, 1 hold, 2 buy),
    weights: Box(0, 1, (N,)), status: Discrete(3) (0 ok, 1 refused, 2 unparseable))``, float64,
    ``N`` = universe size in canonical order (80). With ``stagewise=True`` the S1 sub-step reads
    ``views``, S2 ``signals``, S3 ``weights`` (other keys are ignored); with ``stagewise=False`` one
    step reads all three. Entries of unavailable assets are ignored (weights on them are dropped).

    ## Observation Space
    ``Dict`` (spec §11.2) of float64 arrays, but for the masks and ``available`` (int8 0/1), ``class_id``
    and ``prev_signals`` (int64), ``regime`` and ``stage`` (int): ``returns`` (L, N) window oldest first
    (missing → 0), ``returns_mask`` (L, N), ``price``, ``trailing_return``, ``ann_vol`` (N,), ``corr`` (N, N)
    (NaN/unavailable → 0 off-diagonal), ``class_id`` (N,), ``available`` (N,), ``weights`` (N,) drifted
    current weights, ``nav`` (1,) = NAV / initial NAV, ``macro`` (17,) and ``macro_mask``, ``regime``
    (0 bull, 1 bear, 2 sideways, 3 crisis), ``stage`` (0 S1, 1 S2, 2 S3), ``prev_views``,
    ``prev_signals`` (the agent's previous sub-step answer), and ``prompt`` (the rendered stage
    prompt for LLM agents) when ``text_obs=True`` (default: ``text_obs = stagewise``).
    ``obs_keys`` (default: all of the above but ``prompt``) keeps only the named entries; an entry
    left out is never computed. ``corr`` is the one O(N²) entry: a pairwise-complete correlation
    (four (N×L)·(L×N) products), about 30 ms of CPU per decision date seen first at N = 1000, so an agent
    that does not read it runs a cold step about 10× faster without it (docs/performance.md). Scoring
    (the S3 correlation score) and the prompt still compute the correlations they need.

    ## Rewards
    ``reward="ceps"``: the decision date's CEPS on the S3 (or only) step, 0 on S1/S2 sub-steps.
    ``reward="log_return"``: ``ln(NAV_pre(d_{k+1}) / NAV_pre(d_k))`` (NAV after marking to market, before
    trading), so a step pays its own trading costs; the last step runs to the period's last day.

    ## Starting State
    NAV 1,000,000 at the close of the last trading day before the period start, held in equal weight
    over the assets available then (§6.1); ``reset`` simulates to the close of the first decision date.

    ## Episode End
    ``terminated=True`` on the step whose simulation reaches the period's last trading day;
    ``truncated`` is False (a time limit is the caller's choice), except for the paper-mode abort on an
    unparseable answer (``abort_on_parse_failure``: ``truncated=True``, ``info["aborted"]``).

    ## Arguments
    ``gym.make("PortBench-Balanced-v0", period="covid_2020", stagewise=True)``.

    - ``profile``: "conservative" | "balanced" | "aggressive" (set by the id).
    - ``period``: "normal_2024" (monthly), "china_2015", "covid_2020", "crypto_2022" (weekly), a repo alias,
      ``dict(start=..., end=..., freq="monthly"|"weekly"|"daily")``, or "live" /
      ``dict(name="live", days=12, as_of="YYYY-MM-DD")`` (§2.5: the last ``days`` trading days up to
      ``as_of``, daily, each decision on data through the previous close).
    - ``stagewise``: True = S1 → S2 → S3 sub-steps (the LLM protocol); False = one step per date.
    - ``config``: a :class:`PortBenchConfig`, everything below that is not the episode's choice (costs,
      scoring, paper switches, lookback, prompt style, ...). ``oracle``, ``fidelity``, ``alpha``, ``lam``,
      ``paper`` and ``prompt_style`` are shortcuts into it: None (default) keeps the config's value, a
      value replaces it, so ``PortBenchEnv(alpha=0.3)`` and
      ``PortBenchEnv(config=PortBenchConfig(scoring=PortBenchScoringConfig(alpha=0.3)))`` are the same env.
    - ``oracle``: "lookback" (default) | "ex_post" (diagnostic; uses future data, flagged in ``info``) |
      "equal_weight".
    - ``fidelity``: "clean" (default) | "paper" (spec Appendix A: every item of
      :class:`~quantgym.envs.portbench.paper.config.PaperFidelity` on, universe ``89_no_crypto``).
    - ``paper``: a :class:`PaperFidelity` (or dict of its flags) to switch single paper items on top of
      clean mode (overrides ``config.paper``); ``fidelity="paper"`` with ``paper`` given uses those flags.
    - ``alpha`` (0.5), ``lam`` (0.1): S3 mix and CEPS penalty. ``reward``: "ceps" | "log_return" (default:
      "ceps" with scoring on, "log_return" with ``scoring=False``; "ceps" without scoring is refused).
    - ``data``: None (bundled real data), a :class:`~quantgym.envs.portbench.data.PortBenchData` or a directory in the
      documented schema (docs/data.md). ``config``: a :class:`PortBenchConfig` (costs, lookback, ...), or its
      ``to_dict()`` form (a sweep file).
    - ``scoring``: False skips S1–S5 scoring (direct allocation, as the classical baselines of §8 run).
    - ``text_provider``: optional callable ``(decision_date) -> str`` returning news strictly before ``d``.
    - ``prompt_style``: "full" | "compact" | "minimal" (:data:`quantgym.spaces.PROMPT_STYLES`; default: the
      config's, "full"): the rendering of the ``prompt`` field (stored as ``config.prompt_style``;
      ``info["prompt_style"]``). ``render_prompt(style=...)`` re-renders the current prompt in any style.
    - ``obs_keys``: None (default: every entry of :data:`OBS_KEYS`) or a subset of :data:`OBS_KEYS`; the
      observation (and ``observation_space``) holds these entries in :data:`OBS_KEYS` order (``prompt``
      follows ``text_obs``). E.g. ``obs_keys=[k for k in OBS_KEYS if k != "corr"]`` for an agent that
      does not read the (N, N) correlation matrix. An unknown key raises ``ValueError``.
    - ``blind``: True renders every prompt blind (docs/blind.md): assets by alias of their class
      (``EQ07``, drawn from the reset seed, answered with the aliases), the decision's number and relative
      trading days instead of dates, closes rebased to 100 at the window start and macro series as z-scores
      over the window; the observation's ``price`` and ``macro`` entries are blinded the same way. Scores,
      truth and simulation are those of named mode. ``info["blind"]`` is True; the alias map is in
      :meth:`episode_metrics` (``blind_aliases``, evaluator side). Refused with ``text_provider`` (free
      news text cannot be blinded).
    - ``tools``: True (stagewise, clean mode) plays the stages through point-in-time tools (docs/tools.md):
      the stage prompt is a short brief without data tables, and ``step`` takes either a stage answer or a
      tool call ``{"tool": name, "arguments": {...}}`` (:mod:`quantgym.envs.portbench.tools`: universe,
      asset returns and volatility, correlation, macro series, portfolio and NAV, investor profile). A call
      returns its result as the observation's ``prompt`` with reward 0 and no advance, ``info["tool"]`` its
      record; ``info["tools"]`` and ``info["tool_budget"]`` give the schemas and the stage's budget left.
      ``tool_config``: a :class:`~quantgym.envs.portbench.config.PortBenchToolsConfig` (or its dict): the
      per-stage budget (calls, result characters) and the longest window.

    ## Costs & Execution
    Trades execute at the close of the decision date. Cost ``K = 0.0015·τ·NAV`` (10 bps slippage +
    5 bps commission on traded notional, ``τ = Σ|w^T − w^0|`` over ``|Δw| ≥ 1e-6``), charged to NAV once;
    executed weights = S3 weights (§4.4, §6.3). No leverage, no shorting, no lots. ``PortBenchCostModel.off()``
    switches costs off. Between decisions the weights drift with the daily returns (§6.2).

    ## Data & Point-in-time
    Real daily data 2014–2025 (Yahoo adjusted closes, FRED), NYSE calendar; crypto weekend returns are
    compounded into the next trading day, the crypto price of NYSE day t is the UTC close of t−1 (§11.7);
    macro series carry publication lags (§1.4). The observation at ``d`` is built from rows ≤ ``d`` only
    (a test replaces every later row with garbage). The ex-post oracle reads forward returns inside
    the scorer only and sets ``info["uses_future_data"]``.

    ## Scoring
    S1 = 1 − mean|v̂ − v*|/2 with v* = clip(R/10%, ±1); S2 = share of correct signals (±0.2 on v*);
    S3 = α·A + (1−α)·C (weight accuracy vs the 60-day max-Sharpe oracle on the truth buys, and the
    two-layer correlation score); S4 = turnover agreement with the truth's turnover; S5 = trigger
    agreement and VaR/drawdown errors; CEPS = clip(mean − λ·Σ drops); PAS per step. Invalid values
    (NaN, out-of-range views/weights, all-zero weights) and refusals get the §4.0 fallback and score 0,
    flagged in ``info["invalid"]``; the episode continues.

    ## Version History
    - v0: clean mode of spec portbench.md with §11 implementation decisions.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    task_name = "portbench"

    def __init__(
        self,
        profile: str = "balanced",
        period: str | dict = "normal_2024",
        stagewise: bool = False,
        oracle: str | None = None,
        fidelity: str | None = None,
        alpha: float | None = None,
        lam: float | None = None,
        reward: str | None = None,
        data: Any = None,
        config: PortBenchConfig | None = None,
        text_obs: bool | None = None,
        scoring: bool = True,
        text_provider: Callable[[pd.Timestamp], str] | None = None,
        render_mode: str | None = None,
        paper: PaperFidelity | dict | None = None,
        prompt_style: str | None = None,
        obs_keys: Sequence[str] | None = None,
        blind: bool = False,
        tools: bool = False,
        tool_config: Any = None,
    ):
        # a sweep file or --env-kwargs gives the config as a dict (PortBenchConfig.to_dict's form)
        config = PortBenchConfig.from_dict(config) if isinstance(config, dict) else (config or PortBenchConfig())
        # shortcuts into ``config`` (None: the config's value)
        fidelity = config.fidelity if fidelity is None else fidelity
        oracle = config.scoring.oracle if oracle is None else oracle
        alpha = config.scoring.alpha if alpha is None else alpha
        lam = config.scoring.lam if lam is None else lam
        if reward is None:  # CEPS needs the scores: without scoring the default is the NAV's log return
            reward = "ceps" if scoring else "log_return"
        if reward not in ("ceps", "log_return"):
            raise ValueError(f"reward must be 'ceps' or 'log_return', got {reward!r}")
        if reward == "ceps" and not scoring:
            raise ValueError("reward='ceps' needs scoring=True (CEPS is the stage scores' summary; without them "
                             "every reward would be 0); use reward='log_return'")
        if oracle not in ("lookback", "ex_post", "equal_weight"):
            raise ValueError(f"oracle must be 'lookback', 'ex_post' or 'equal_weight', got {oracle!r}")
        if not (0.0 <= float(alpha) <= 1.0):
            raise ValueError(f"alpha (S3 mix of weight accuracy and correlation score) must be in [0, 1], got {alpha}")
        if not (float(lam) >= 0.0):
            raise ValueError(f"lam (CEPS drop penalty) must be >= 0, got {lam}")
        #: the observation's entries (``obs_keys``, in OBS_KEYS order)
        self.obs_keys: tuple[str, ...] = check_obs_keys(
            obs_keys, text_obs=bool(stagewise) if text_obs is None else bool(text_obs))
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if prompt_style is not None:
            config = config.replace(prompt_style=check_prompt_style(prompt_style))
        check_prompt_style(config.prompt_style)
        period = resolve_period(period)
        config = resolve_fidelity(config, fidelity, paper)
        config = config.replace(scoring=dataclasses.replace(config.scoring, alpha=alpha, lam=lam, oracle=oracle))
        self.profile = get_profile(profile)
        #: clean or paper rules (:mod:`quantgym.envs.portbench.paper.mode`)
        self.mode = mode = fidelity_mode(config)
        self.data = mode.data(data)
        if isinstance(period, LivePeriod):  # §2.5: daily decisions on data through the previous close
            period = resolve_live(period, self.data.dates)
            config = config.replace(as_of="previous_close")
        self.config = config
        self._as_of_previous = config.as_of == "previous_close"
        self.period = period
        self.stagewise = bool(stagewise)
        self.reward_kind = reward
        self.scoring = bool(scoring)
        self.text_obs = self.stagewise if text_obs is None else bool(text_obs)
        self.text_provider = text_provider
        self.render_mode = render_mode
        self.view = mode.view(self.data, config)
        #: blind mode (docs/blind.md); the episode's :class:`~quantgym.envs.portbench.blinding.BlindView` after reset
        self.blind = check_flag("blind", blind)
        self._blind = None
        if self.blind:
            check_blind(self.data, text_provider)
        n, m = self.view.n_assets, len(MACRO_KEYS)
        self.n_assets = n
        if self.data.macro.shape[1] != m:
            raise ValueError(f"data.macro must have {m} columns (MACRO_KEYS), got {self.data.macro.shape[1]}")
        # validate the period against the data once (clear error at construction)
        self._new_simulator()
        self.observation_space = observation_space(n, config.lookback, m, self.obs_keys, self.text_obs)
        self.action_space = action_space(n)
        self._observer = ObservationView(self.view, self.obs_keys, mode.cached_observation,
                                         self.scoring or self.text_obs or self.stagewise)
        self._decoder = ActionDecoder(self.view.tickers, mode.all_zero_weights)
        self._scorer = DecisionScorer(self.view, self.profile, config, mode)
        self._profile_block = self.profile.prompt_block()
        self._ticker_array = np.array(self.view.tickers, dtype=object)
        #: tool mode (docs/tools.md): the toolbox, its budget and call log (None when off)
        self._tools = self._tool_mode(tools, tool_config)
        self._uses_future_data = config.scoring.oracle == "ex_post" or mode.s45_ex_post
        # the echoes shown before an answer (read-only: observations hand them out without copying)
        self._zero_views = np.zeros(n)
        self._hold_signals = np.full(n, HOLD, dtype=np.int64)
        self._zero_views.flags.writeable = self._hold_signals.flags.writeable = False
        #: free-text notes a text wrapper may attach to the current stage (e.g. S1 regime, macro summary)
        self.stage_notes: dict[str, Any] = {}
        self.sim: PortfolioSimulator | None = None
        self.snapshot: MarketSnapshot | None = None
        self._obs_views = False  # the next observation may hand out the row arrays as views (see _obs)
        self._w_positive: np.ndarray | None = None  # the positive S3 weights of this step, when the kernel made them
        self._clipped: dict[str, int] | None = None  # the clipped values of the last observation
        #: the lean allocation step (:meth:`_lean_step`) applies to this episode
        self._lean = False
        self._lazy_snap = False
        self._book_snap: MarketSnapshot | None = None
        self._log: DecisionLog | None = None
        self._obs_row: dict[str, Any] | None = None
        self._obs_row_clipped: dict[str, int] = {}
        # what the lean step needs of the universe and the observation (fixed for the env)
        self._shape_n = (n,)
        self._lean_keys = tuple((k, _ROW_ARRAYS[k]) for k in self.obs_keys if k in _ROW_ARRAYS)
        self._lean_key = ("lean_row", self.obs_keys)
        self._lean_rows: dict[int, tuple] = {}  # row -> the lean step's (row info, A_d, template, clip counts)

    # ------------------------------------------------------------------------------ lazy state
    # the lean step leaves the snapshot, its book and the decision log to be built when first read (speed only:
    # an agent that reads only the observation does not pay for them); they are those of _begin_decision
    @property
    def snapshot(self) -> MarketSnapshot | None:
        """The current decision's :class:`MarketSnapshot` (None before ``reset``)."""
        if self._lazy_snap:
            self._build_snapshot()
        return self._snapshot

    @snapshot.setter
    def snapshot(self, snap: MarketSnapshot | None) -> None:
        self._snapshot, self._lazy_snap = snap, False

    @property
    def _book(self) -> MarketSnapshot | None:
        if self._lazy_snap:
            self._build_snapshot()
        return self._book_snap

    @_book.setter
    def _book(self, snap: MarketSnapshot | None) -> None:
        self._book_snap = snap

    def _build_snapshot(self) -> None:
        sim = self.sim
        snap = self.view.snapshot(sim.t, sim.weights, self.nav_pre / sim.initial_nav, self._profile_block)
        self._snapshot = self._book_snap = snap
        self._lazy_snap = False

    @property
    def log(self) -> DecisionLog:
        """What the current decision's answers left (scores, fallbacks, coercions, status)."""
        if self._log is None:
            self._log = DecisionLog()
        return self._log

    @log.setter
    def log(self, log: DecisionLog) -> None:
        self._log = log

    def _lean_applies(self) -> bool:
        """Whether the lean allocation step can run this episode: one step per date, scoring off, the log-return
        reward, no tools, blinding, text or news, the clean per-row observation, the compiled simulator."""
        return (not self.stagewise and not self.scoring and self._tools is None and self._blind is None
                and not self.text_obs and self.text_provider is None and self.reward_kind == "log_return"
                and not self._as_of_previous and self.mode.cached_observation and self.sim.lean_ready()
                and type(self).step is PortBenchEnv.step)

    # ------------------------------------------------------------------------------ helpers
    def _tool_mode(self, tools: Any, tool_config: Any):
        if not check_flag("tools", tools):
            return None
        from quantgym.envs.portbench.tools import PortBenchTools

        if not (self.stagewise and self.text_obs):
            raise ValueError("tools=True needs stagewise=True with text observations (a tool result is the prompt)")
        if self.config.paper.any:
            raise ValueError("tools=True runs in clean mode only (paper mode is the paper's one-prompt protocol)")
        return PortBenchTools(self, tool_config)

    @property
    def toolbox(self):
        """The :class:`quantgym.tools.Toolbox` of the current stage (tool mode), else None."""
        return self._tools.toolbox if self._tools is not None else None

    @property
    def tool_budget(self):
        """The per-stage :class:`quantgym.tools.ToolBudget` (tool mode), else None."""
        return self._tools.budget if self._tools is not None else None

    @property
    def tool_calls(self) -> list[dict]:
        """Every tool call of the episode with its result (tool mode; [] when off)."""
        return self._tools.log if self._tools is not None else []

    def _new_simulator(self) -> PortfolioSimulator:
        sim = self.mode.simulator(self.view, self.period, self.config)
        if sim.decision_rows.size == 0:
            raise ValueError(f"period {self.period.name} has no {self.period.freq} rebalance date in the data")
        return sim

    def _news(self, d: pd.Timestamp) -> str:
        text = self._profile_block
        if self.text_provider is not None:
            extra = self.text_provider(d) or ""
            if extra:
                text += "\n\n" + prompts.sanitize_news(extra)
        return text

    def _begin_decision(self) -> None:
        """Build the snapshot of the current decision row and its ground truth."""
        sim = self.sim
        t = sim.t
        # the last decision's row entries are let go before this row's are computed: past the row cache's
        # budget, the memory under them is then free for this row's (unless the caller still holds them)
        self._obs_row = None
        self.nav_pre = sim.nav
        # what the policy sees of its own book is as of the snapshot's close (spec §1.7): with
        # as_of="previous_close", the NAV and drifted weights of the day before, not the decision day's
        # (those already hold the decision day's returns); the trade, the scores and the truth use the
        # book as it stands at the decision day's close (self._book)
        seen = self._as_of_previous and len(sim.nav_history) >= 2
        w_seen, nav_seen = (sim.weight_history[-2], sim.nav_history[-2]) if seen else (sim.weights, sim.nav)
        self.nav_seen = float(nav_seen)
        self.snapshot = snap = self.view.snapshot(t, w_seen, nav_seen / sim.initial_nav,
                                                  self._news(self.view.dates[t]) if self.text_provider is not None
                                                  else self._profile_block)
        self._book = snap if not seen else dataclasses.replace(
            snap, current_weights=np.array(sim.weights, dtype=np.float64), nav=sim.nav / sim.initial_nav)
        parts = self.view.row_cache(int(t))
        info = parts.get("row_info")
        if info is None:  # per-row constants of the info dict and the decision record
            info = parts.put("row_info", {"date": str(snap.decision_date.date()),
                                          "n_available": int(snap.available.sum()),
                                          "available_tickers": tuple(self._ticker_array[snap.available].tolist()),
                                          "regime": snap.regime})
        self._row_info = info
        self._lean_avail = snap.available
        self._obs_row, self._obs_row_clipped = self._observer.row(snap, parts)
        if self._lean and self._lean_key not in parts:  # the lean step's observation template of this row
            keys = self.obs_keys
            tmpl = {k: (None if k in _ROW_ARRAYS else v) for k, v in self._obs_row.items() if k in keys}
            parts[self._lean_key] = (info, snap.available, tmpl, self._obs_row_clipped)
        self._obs_views = False  # set by a step that reaches this decision (see _obs)
        self.stage = 0
        self.prev_views = self._zero_views
        self.prev_signals = self._hold_signals
        self.log = DecisionLog()
        self.stage_notes = {}
        #: the decision's ground truth (scoring on; :class:`~quantgym.envs.portbench.scorer.DecisionTruth`)
        self.truth = self._scorer.truth(self._book, parts, self._forward_returns) if self.scoring else None

    def _forward_returns(self) -> np.ndarray:
        """Ex-post oracle data: returns after ``d`` up to the next decision, at most 21/5/1 rows (§11.7)."""
        sim, k = self.sim, self.decision_k
        nxt = sim.decision_rows[k + 1] if k + 1 < sim.decision_rows.size else sim.last_row
        lo, hi = self.mode.forward_rows(sim.t, nxt, self.config.scoring.ex_post_max_obs[self.period.freq])
        return self.view.returns[lo:hi]

    # ------------------------------------------------------------------------------ observation
    def _obs(self, prompt: str | None = None) -> dict[str, Any]:
        # the first observation of a decision reached by step() hands out the row's arrays as read-only views of
        # the per-row cache, every other call (reset, stagewise sub-steps, the final observation) copies them
        views, self._obs_views = self._obs_views, False
        if self._obs_row is None:  # left by the lean step
            self._obs_row, self._obs_row_clipped = self._observer.row(self.snapshot)
        obs, self._clipped = self._observer.observe(self._obs_row, self._obs_row_clipped, views, self.snapshot,
                                                    self.stage, self.prev_views, self.prev_signals)
        if self._blind is not None:  # rebased closes and macro z-scores instead of the levels
            for key, value in self._blind.observation(self.snapshot, self.decision_k).items():
                if key in obs:
                    obs[key] = np.nan_to_num(value, nan=0.0)
        if self.text_obs:
            obs["prompt"] = self.render_prompt() if prompt is None else prompt
        return obs

    @property
    def prompt_style(self) -> str:
        """The env's own prompt style (``config.prompt_style``): the rendering of ``obs["prompt"]``."""
        return self.config.prompt_style

    @property
    def prompt_tickers(self) -> tuple[str, ...]:
        """The asset names the prompts show and the answers use: the aliases in blind mode, else the tickers
        (universe order either way)."""
        return self._blind.tickers if self._blind is not None else self.view.tickers

    def render_prompt(self, stage: int | None = None, style: str | None = None) -> str:
        """The text view of the current state for ``stage`` in ``style``.

        Parameters
        ----------
        stage : 0 (S1), 1 (S2), 2 (S3) or None (the current sub-step). A stage other than the current
            one renders with the current echoes (``prev_views``, ``prev_signals``, notes).
        style : one of :data:`quantgym.spaces.PROMPT_STYLES`, or None (the env's ``prompt_style``).

        Reads the state only: no env state, RNG or score changes. Raises ``RuntimeError`` before
        ``reset()`` and ``ValueError`` for an unknown style.
        """
        style = self.config.prompt_style if style is None else check_prompt_style(style)
        if self.snapshot is None:
            raise RuntimeError("call reset() before render_prompt()")
        stage = self.stage if stage is None else stage
        snap, config, mode = self.snapshot, self.config, self.mode
        views, signals, strengths = self.prev_views, self.prev_signals, self.stage_notes.get("strengths")
        if self._blind is not None:  # the same renderers over the blinded snapshot (alias order), own cache
            b = self._blind
            snap, cache = b.snapshot(snap, self.decision_k), b.cache(int(snap.t))
            views, signals, strengths = b.permute(views), b.permute(signals), b.permute(strengths)
        else:
            # the row's blocks (header, assets, macro, correlations) are rendered once per dataset and decision
            # row and shared by S1/S3, the styles and every env over the same data (speed only; prompts.py docstring)
            cache = self.view.row_cache(int(snap.t))
        if self._tools is not None:  # the brief without data tables (docs/tools.md)
            news = snap.news_text[len(self._profile_block):].strip() if self.text_provider is not None else ""
            return prompts.render_tool_brief(stage, snap, self._tools.note(), config, style, views, self.stage_notes,
                                             signals, strengths, news)
        if stage == 0 or not self.stagewise:
            return mode.render_s1(snap, config, style, cache)
        if stage == 1:
            return mode.render_s2(snap, views, self.stage_notes, style, config)
        return prompts.render_s3(snap, signals, mode.s3_profile_block(self.profile), config.initial_nav,
                                 strengths, config.corr_table, style=style, cache=cache, config=config)

    def _base_info(self) -> dict[str, Any]:
        log = self.log
        status = log.status.values()
        info = {
            "date": self._row_info["date"],
            "decision_index": self.decision_k,
            "n_decisions": int(self.sim.decision_rows.size),
            "stage": STAGES[self.stage] if self.stagewise else "all",
            "stage_scores": dict(log.scores),
            "invalid": dict(log.invalid),
            "coerced": dict(log.coerced),
            "refused": STATUS_REFUSED in status,
            "unparseable": STATUS_UNPARSEABLE in status,
            "nav": self.nav_seen,
            "uses_future_data": self._uses_future_data,
            "n_available": self._row_info["n_available"],
            "prompt_style": self.config.prompt_style,
        }
        if self.blind:
            info["blind"] = True
        if self._tools is not None:
            info.update(self._tools.info())
        if self._clipped:
            info["clipped"] = dict(self._clipped)
        return info

    def _note_clipped(self, info: dict[str, Any]) -> dict[str, Any]:
        """``info["clipped"]``: per observation entry, the number of values of the observation returned with
        ``info`` that were clipped to their ``Box`` bounds (left out when none was)."""
        info.pop("clipped", None)
        if self._clipped:
            info["clipped"] = dict(self._clipped)
        return info

    # ------------------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        with single_thread_blas():
            return self._reset(seed=seed, options=options)

    def _reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.sim = self._new_simulator()
        if self.blind:  # aliases drawn from the episode seed (a fresh draw per episode without one)
            alias_seed = seed if seed is not None else int(self.np_random.integers(2**31))
            self._blind = BlindView(self.view, alias_seed, self.sim.decision_rows.size, self.config.regime_ticker)
        self._aborted = self._terminated = False
        self.decision_k = 0
        # the traded decisions, in preallocated storage
        self._records = DecisionRecords(self._ticker_array, int(self.sim.decision_rows.size), WEIGHT_SUM_TOLERANCE)
        self._lean = self._lean_applies()
        self._n_dec = int(self.sim.decision_rows.size)
        if self._tools is not None:
            self._tools.reset()
        self.sim.advance_to(int(self.sim.decision_rows[0]))
        self._begin_decision()
        return self._obs(), self._base_info()

    def step(self, action: Any):
        # the oracle's many tiny BLAS calls run single-threaded (optimize.single_thread_blas, in
        # _begin_decision; the row arrays in MarketView): speed only, the same numbers
        if self._lean and type(action) is dict:
            out = self._lean_step(action)
            if out is not None:
                return out
        return self._step(action)

    def _lean_step(self, action: dict):
        """An allocation step without scoring whose answers pass the compiled checks and which does not end the
        episode, in one compiled call (:func:`~quantgym.envs.portbench.actions.allocate_and_trade`; speed only):
        the observation, reward, ``info``, records and simulator state of :meth:`_step`. None: take
        :meth:`_step` (another action form, an answer that needs a fallback or a message, the last decision)."""
        k = self.decision_k
        if k + 1 >= self._n_dec:
            return None
        v, sg, w = action.get("views"), action.get("signals"), action.get("weights")
        st = action.get("status", 0)
        shape = self._shape_n
        if not (type(v) is np.ndarray and type(sg) is np.ndarray and type(w) is np.ndarray and type(st) is int
                and st == 0 and v.dtype is _F64 and w.dtype is _F64 and sg.dtype is _I64 and v.shape == shape
                and w.shape == shape and sg.shape == shape and _ACTION_KEYSET.issuperset(action)):
            return None
        sim, recs = self.sim, self._records
        t0 = sim.t
        row = int(sim.decision_rows[k + 1])
        if row > sim.last_row:
            row = sim.last_row
        m = row - t0 if row > t0 else 0
        h, n = sim._h, self.n_assets
        j, rk = sim._n_tr, len(recs.infos)
        if h + m >= sim._hist.shape[0] or j >= sim._tr.shape[0] or rk >= recs.block.shape[0]:
            return None  # (a block is full: the full step grows it)
        blk = np.empty(2 * n + 1)
        kernel = _LEAN_KERNEL[0] if _LEAN_KERNEL else _lean_kernel()
        code = kernel(v, sg, w, self._lean_avail, sim._hist, h, sim.returns0, t0, m, sim._rate, sim._min_trade,
                      sim._tr, j, recs.block, rk, blk, sim.initial_nav)
        if code < 0:
            return None
        r = recs.block[rk]
        tot, dropped, tau = r[n : n + 3].tolist()
        cost = sim._tr[j, n + 1]  # (numpy float, as the numpy trade left it)
        sim._n_tr = j + 1  # PortfolioSimulator._advanced, inline
        sim._total_cost += cost
        sim._n_costs += 1
        if m:
            sim._h = h + m
            sim.nav_dates.extend(sim._stamps[t0 + 1 : row + 1])
            sim.t = row
        if dropped > 0 or abs(tot - 1.0) > WEIGHT_SUM_TOLERANCE:
            coerced = {"S3": coerce_message(dropped, tot, WEIGHT_SUM_TOLERANCE)}
        else:
            coerced = {}
        row_info = self._row_info
        recs.infos.append(row_info)
        recs.logs.append(None)
        recs.scored.append(None)
        nav_pre, nav_end = self.nav_seen, sim._hist[h + m - 1, n]
        reward = float(math.log(nav_end / nav_pre)) if nav_pre > 0 and nav_end > 0 else 0.0
        nav_f = float(nav_end)
        info = {
            "date": row_info["date"], "decision_index": k, "n_decisions": self._n_dec, "stage": "all",
            "stage_scores": {}, "invalid": {}, "coerced": coerced, "refused": False,
            "unparseable": False, "nav": nav_f, "uses_future_data": self._uses_future_data,
            "n_available": row_info["n_available"], "prompt_style": self.config.prompt_style, "turnover": tau,
            "cost": cost, "weights": TickerWeights(r[:n], self._ticker_array),
            "orders": Orders(sim._tr[j, :n], None, self.nav_pre, sim.costs, self.view.tickers),
        }
        self.decision_k = k + 1
        # the next decision (_begin_decision without the snapshot, built when read)
        lean = self._lean_rows.get(row)
        if lean is None:
            lean = self.view.row_cache(row).get(self._lean_key)
            if lean is not None:
                self._lean_rows[row] = lean
        if lean is None:  # first visit of the row: the full path, which stores the row's template
            self._begin_decision()
            self._obs_views = True
            obs = self._obs()
            if self._clipped:
                info["clipped"] = dict(self._clipped)
            return obs, reward, False, False, info
        self._row_info, self._lean_avail, tmpl, row_clipped = lean
        self.nav_pre, self.nav_seen = nav_end, nav_f
        self._snapshot = self._book_snap = None
        self._lazy_snap = True
        self._log = self._obs_row = self.truth = None
        self._obs_views = False
        self.stage = 0
        self.prev_views, self.prev_signals = self._zero_views, self._hold_signals
        self.stage_notes = {}
        obs = tmpl.copy()
        if self._lean_keys:
            arrays = self.view._arrays.get(row)
            for key, name in self._lean_keys:
                a = arrays.get(name) if arrays is not None else None
                obs[key] = (a if a is not None else self.view.row_array(row, name)).view()
        obs["weights"] = blk[:n]
        obs["nav"] = blk[2 * n :]
        obs["stage"] = 0
        obs["prev_views"] = blk[n : 2 * n]
        obs["prev_signals"] = self._hold_signals.copy()
        for key in self._observer.dropped:  # obs_keys: a subset chosen (the row entries are left out already)
            obs.pop(key, None)
        clipped = None
        if row_clipped or code:
            clipped = dict(row_clipped)
            if code & 0xFFFFF and "weights" in self.obs_keys:
                clipped["weights"] = code & 0xFFFFF
            if code >> 20 and "nav" in self.obs_keys:
                clipped["nav"] = 1
            clipped = clipped or None
            if clipped:
                info["clipped"] = dict(clipped)
        self._clipped = clipped
        return obs, reward, False, False, info

    def _step(self, action: Any):
        if self.sim is None:
            raise RuntimeError("call reset() before step()")
        if getattr(self, "_aborted", False):
            raise RuntimeError("episode was aborted (paper mode, unparseable answer); call reset()")
        if self.sim.done and self.stage == 0 and getattr(self, "_terminated", False):
            raise RuntimeError("episode has terminated; call reset()")
        if self._tools is not None:
            call = parse_tool_call(action)
            if call is not None:  # a tool call: its result as the observation, reward 0, the date unchanged
                return self._tools.step(*call)
        if self.stagewise:
            needed = (("views",), ("signals",), ("weights",))[self.stage]
        else:
            needed = ("views", "signals", "weights")
        act = self._decoder.check(action, needed, STAGES[self.stage] if self.stagewise else "S1-S3")
        status = int(act["status"])
        if status == STATUS_UNPARSEABLE and self.mode.abort_on_parse_failure:
            return self._abort()
        snap, log, decoder = self.snapshot, self.log, self._decoder
        if not self.stagewise and status == STATUS_OK and act["signals"].dtype == np.int64:
            # the processed views/signals are only read by S1/S2 scoring and the final observation's echoes
            echo = self.scoring or self.decision_k + 1 >= self.sim.decision_rows.size
            fast = decoder.fast(act, snap.available, log, echo)
            if fast is not None:
                w_hat, self._w_positive, views, signals = fast
                if self.scoring:  # s1_score and s2_score, their means in one kernel
                    k, mae, share = s12_parts(views, self.truth.v_star, signals, self.truth.s_star, snap.available)
                    log.scores["S1"] = clip_float(1.0 - mae / 2.0, 0.0, 1.0) if k else 1.0
                    log.scores["S2"] = share if k else 1.0
                if echo:  # handed out as obs["prev_views"/"prev_signals"]
                    views.flags.writeable = signals.flags.writeable = False
                    self.prev_views, self.prev_signals = views, signals
                return self._finish_decision(w_hat, True)
        if "views" in needed:
            views = decoder.views(act["views"], status, snap.available, log)
            if self.scoring:
                log.scores["S1"] = 0.0 if "S1" in log.invalid else s1_score(views, self.truth.v_star, snap.available)
            views.flags.writeable = False  # handed out as obs["prev_views"]
            self.prev_views = views
            if self.stagewise:
                self.stage = 1
                return self._obs(), 0.0, False, False, self._base_info()
        if "signals" in needed:
            signals = decoder.signals(act["signals"], status, snap.available, log)
            if self.scoring:
                log.scores["S2"] = 0.0 if "S2" in log.invalid else s2_score(signals, self.truth.s_star, snap.available)
            signals.flags.writeable = False  # handed out as obs["prev_signals"]
            self.prev_signals = signals
            if self.stagewise:
                self.stage = 2
                return self._obs(), 0.0, False, False, self._base_info()
        weights, valid = decoder.weights(act["weights"], status, snap.available, self._book.current_weights, log)
        return self._finish_decision(weights, valid)

    def _abort(self):
        """Paper mode (§4.0, §11.3): an unparseable answer aborts the run (truncated, no trade)."""
        stage = STAGES[self.stage] if self.stagewise else "all"
        self.log.flag(stage if stage != "all" else "S1", STATUS_UNPARSEABLE,
                      "unparseable answer: run aborted (paper mode)")
        self._terminated = self._aborted = True
        info = self._base_info()
        info.update({"aborted": True, "episode_metrics": self.episode_metrics()})
        self.stage = 0
        obs = self._obs()
        return obs, 0.0, False, True, self._note_clipped(info)

    def _finish_decision(self, w_hat: np.ndarray, valid: bool):
        snap, sim, log = self._book, self.sim, self.log
        if self.scoring:
            w_exec, scored, scores_info = self._scorer.score(w_hat, valid, snap, self.truth, log)
        else:  # direct allocation: executed weights = S3 weights (§4.6), no S4 turnover needed
            w_exec, scored, scores_info = w_hat, None, None
        # trade at d's close, then mark to market up to the next decision date (or the period end)
        terminated = self.decision_k + 1 >= sim.decision_rows.size
        trade = sim.trade_and_advance(w_exec, sim.last_row if terminated else int(sim.decision_rows[self.decision_k + 1]))
        w_pos, self._w_positive = self._w_positive, None
        row_info = self._row_info
        # the decision's record as a flat row (records.COL), its dict built when the records are read
        self._records.append(row_info, w_hat, trade.turnover, trade.cost, trade.nav_after, flat(log.invalid),
                             flat(log.coerced), flat(log.status), scored)
        info = self._base_info()
        info["turnover"], info["cost"] = trade.turnover, trade.cost
        # the executed target weights of this decision (non-zero entries, by ticker): evaluate() keeps them
        # in each step record of results.json beside turnover and cost
        # (a TickerWeights mapping: the dict is built when read)
        info["weights"] = (TickerWeights(w_hat, self._ticker_array, w_pos, row_info["available_tickers"])
                           if w_exec is w_hat else TickerWeights(w_exec, self._ticker_array))
        info["orders"] = trade.orders  # an Orders sequence (arrays; order dicts built when read)
        if scores_info is not None:
            info.update(scores_info)
        # the NAV change the policy may know of: to the next snapshot's close (the period end when terminated)
        nav_pre = self.nav_seen
        nav_end = sim.nav_history[-2] if self._as_of_previous and not terminated else sim.nav
        self.decision_k += 1
        if self.reward_kind == "ceps":
            reward = float(scores_info["ceps"]) if scores_info is not None else 0.0
        else:
            reward = float(math.log(nav_end / nav_pre)) if nav_pre > 0 and nav_end > 0 else 0.0
        info["nav"] = float(nav_end)
        if terminated:
            self._terminated = True
            info["episode_metrics"] = self.episode_metrics()
            info.update({k: info["episode_metrics"][k] for k in ("dd_within_tolerance",)})
            self.stage = 0
            obs = self._obs()  # final observation: the last snapshot (no new decision)
        else:
            self._terminated = False
            self._begin_decision()
            self._obs_views = True  # a new decision row: its arrays as read-only views (see _obs)
            obs = self._obs()
            if self._tools is not None:  # the next decision's S1 starts: its schemas and fresh budget
                info.update(self._tools.info())
        if self._clipped or "clipped" in info:
            self._note_clipped(info)
        return obs, reward, terminated, False, info

    @property
    def records(self) -> list[dict]:
        """One dict per traded decision of the current episode, oldest first: ``date``, ``regime``,
        ``n_available``, the scores (scoring on: ``stage_scores``, ``ceps``, ``pas``, ``s3_parts``, ``tau_hat``,
        ``tau_star``, ``risk``, ``risk_truth``, and ``oracle_fallback`` when the S3 oracle fell back to equal
        weight, spec §4.3), ``turnover``, ``cost``, ``nav_after_trade``, ``invalid``, ``coerced``, ``status`` and
        ``weights`` (``{ticker: S3 weight}`` of the positive weights). The same list object for the whole
        episode (a new one after ``reset``), brought up to date on each read."""
        return self._records.dicts()

    # ------------------------------------------------------------------------------ results
    def episode_metrics(self) -> dict[str, Any]:
        """§6.6/§7 metrics of the episode so far (financial metrics, mean scores, gate diagnostics)."""
        sim = self.sim
        r = sim.daily_returns()
        perf = performance_summary(r, include_start=self.mode.include_start, rf=self.config.rf)
        out: dict[str, Any] = dict(perf)
        mdd = perf["max_drawdown"]
        tol = self.profile.max_drawdown
        out.update({
            "ret_pct": 100 * perf["total_return"], "maxdd_pct": 100 * mdd, "vol_pct": 100 * perf["volatility"],
            "total_cost": sim.total_cost, "n_rebalances": sim.n_trades,
            "final_nav": sim.nav, "dd_within_tolerance": within_tolerance(mdd, tol),
            "dd_score": max(0.0, 1.0 - abs(mdd) / tol), "is_stress_period": self.period.name in STRESS_PERIODS,
            "profile": self.profile.name, "period": self.period.name,
        })
        if self._blind is not None:  # evaluator side: the alias map of the episode (docs/blind.md)
            out["blind"] = True
            out["blind_aliases"] = self._blind.record()
        if self._tools is not None:
            out.update(self._tools.metrics())
        if self.scoring:
            out.update(self._records.score_summary(STATUS_REFUSED))
        else:
            out.update({"stage_means": None, "ceps": None, "ceps_tier": None, "pas": None})
        return out

    def nav_series(self) -> pd.Series:
        """NAV curve (currency units) of the current episode."""
        return self.sim.nav_series()

    def episode_result(self) -> dict[str, Any]:
        """The episode for :func:`quantgym.evaluation.evaluate` (protocol ``Evaluable``): :meth:`episode_metrics`,
        per-stage means, CEPS, the NAV curve, profile and period."""
        m = self.episode_metrics()
        return {"metrics": m, "stage_scores": m.get("stage_means"), "ceps": m.get("ceps"), "nav": self.nav_series(),
                "profile": self.profile.name, "period": self.period.name}

    def render(self):
        if self.render_mode != "ansi" or self.snapshot is None:
            return None
        s = self.snapshot
        top = np.argsort(-s.current_weights)[:5]
        hold = ", ".join(f"{s.tickers[i]} {s.current_weights[i]:.1%}" for i in top)
        return (f"{s.decision_date.date()} stage={STAGES[self.stage]} regime={s.regime} "
                f"NAV={self.nav_seen:,.0f} top weights: {hold}")


__all__ = ["PortBenchEnv", "ACTION_KEYS", "OBS_KEYS", "STATUS_OK", "STATUS_REFUSED", "STATUS_UNPARSEABLE",
           "SIGNAL_NAMES", "BUY"]
