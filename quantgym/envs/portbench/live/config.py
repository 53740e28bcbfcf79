"""Configuration of the PortBench real-time (live) protocol (spec ``portbench.md`` §2.5, §1.7, §11.6).

Every **[project choice]** of the live runner and of the data-refresh checks lives here, in frozen
dataclasses with a version string (as nautilus_trader's configs). The protocol itself (daily decisions
over the last ``days`` trading days, each on data through the previous close) is implemented by the
PortBench env (:class:`quantgym.envs.portbench.config.LivePeriod`); this module only fixes how runs
are persisted, resumed and checked.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIVE_VERSION = "portbench-live-1.0"

#: environment variable naming the quantgym user-data root (PortBench data live in ``<root>/portbench``)
DATA_ENV_VAR = "QUANTGYM_DATA"


@dataclass(frozen=True)
class DataChecks:
    """Validation of a refreshed PortBench data directory, on top of :mod:`quantgym.envs.portbench.live.refresh`'s own
    checks (unique ascending dates, positive prices, |daily return| < 100 % outside crypto, SPY present).

    Attributes
    ----------
    max_calendar_gap_days : int
        **[project choice]** Largest allowed distance in calendar days between two consecutive trading
        days of the refreshed window (regular NYSE maximum since 2014: 4, e.g. Thu → Mon over Good
        Friday; 5 admits a two-day closure such as 2012's hurricane Sandy). A longer gap is an error.
    calendar_quorum : float
        **[project choice]** A weekday on which at least this share of the non-crypto tickers has a
        real price while SPY (the calendar, §1.3) has none is a missing calendar day: an error.
    ffill_limit : int
        §11.6: prices are carried forward at most 3 trading days. A ticker whose last real price is
        older than this at the data's last date is *stale* (it leaves ``A_d``); an interior gap longer
        than this is a *gap*. Both are reported as warnings in the vintage record, not errors: the
        env's §11.6 rules handle them point-in-time.
    warn_abs_return : float
        **[project choice]** Non-crypto daily moves with ``|r|`` at least this large are listed as
        warnings (refresh rejects ``|r| >= 100 %`` outright).
    since_overlap_days : int
        **[project choice]** An incremental refresh without ``--since`` restarts this many calendar
        days before the existing data's last date (the splice of §refresh needs an overlap, and late
        revisions of the last days are picked up).
    version : str
    """

    max_calendar_gap_days: int = 5
    calendar_quorum: float = 0.5
    ffill_limit: int = 3
    warn_abs_return: float = 0.25
    since_overlap_days: int = 14
    version: str = LIVE_VERSION


@dataclass(frozen=True)
class LiveConfig:
    """How a live run folder is built and resumed.

    Attributes
    ----------
    profile : str
        Investor profile (§3.1); the paper's live run uses ``"balanced"``.
    days : int
        Length of the first live window in trading days (§2.5: 12). It fixes the run's first decision
        date on the first call; later calls append every trading day after the last recorded one.
    seed : int
        Seed passed to ``env.reset`` (the env is deterministic; kept for the record).
    replay_nav_rtol : float
        **[project choice]** Relative tolerance when the replayed NAV after each recorded decision is
        compared with the recorded one (float round-trips through JSON are exact, so any difference
        means different data or code).
    replay_score_atol : float
        **[project choice]** Absolute tolerance for replayed CEPS / stage scores.
    no_answer : {"retry", "score"}
        **[project choice]** A stage whose every attempt got *no answer* (the agent's API call failed:
        ``None`` through :class:`~quantgym.envs.portbench.text_protocol.TextStageAction`) is an outage, not a model
        decision. ``"retry"`` (default): the decision is not recorded, the call stops with
        :class:`~quantgym.envs.portbench.live.runner.LiveAgentError` and the next call retries the same date (the data
        seen are the same, so no leak). ``"score"``: record it as the §4.0 unparseable failure
        (score 0), as ``evaluate`` does for historical periods.
    journal : str
        File name of the append-only decision journal (JSON Lines).
    header : str
        File name of the run header (written once, atomically).
    version : str
    """

    profile: str = "balanced"
    days: int = 12
    seed: int = 0
    replay_nav_rtol: float = 1e-9
    replay_score_atol: float = 1e-9
    no_answer: str = "retry"
    journal: str = "decisions.jsonl"
    header: str = "run.json"
    checks: DataChecks = field(default_factory=DataChecks)
    version: str = LIVE_VERSION

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def default_data_root() -> Path:
    """The quantgym user-data root: ``$QUANTGYM_DATA``, else ``$XDG_DATA_HOME/quantgym``, else
    ``~/.local/share/quantgym`` (never inside the installed package)."""
    env = os.environ.get(DATA_ENV_VAR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "quantgym"


def default_portbench_dir() -> Path:
    """Default destination of ``quantgym data refresh`` and source of ``quantgym live``:
    ``<default_data_root()>/portbench``."""
    return default_data_root() / "portbench"


__all__ = ["LIVE_VERSION", "DATA_ENV_VAR", "DataChecks", "LiveConfig", "default_data_root", "default_portbench_dir"]
