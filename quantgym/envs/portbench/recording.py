"""Per-step recording of PortBench episodes into pandas DataFrames."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

STAGE_KEYS = ("S1", "S2", "S3", "S4", "S5")


class RecordEpisode(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Record NAV, executed weights and stage scores of every rebalance step of a PortBench env.

    Works on the raw env, on :class:`~quantgym.envs.portbench.allocation.AllocationWrapper` and on the
    text wrapper (stagewise S1/S2 sub-steps are skipped: a row is written when a decision is
    traded). Columns: ``episode``, ``step``, ``date`` (decision date), ``nav_after_trade`` (NAV at the
    decision close after costs), ``nav`` (NAV at the end of the hold period, i.e. at the next decision
    close before trading or the period end, currency units, = ``info["nav"]``), ``reward``, ``turnover``, ``cost``, ``ceps``,
    ``pas``, ``S1``..``S5`` (NaN without scoring), ``invalid`` (stages flagged invalid), then one
    ``w_<TICKER>`` column per asset with the executed weights (after the env's normalisation).

    Parameters
    ----------
    env : a PortBench env, possibly wrapped.
    max_episodes : keep at most this many finished episodes in :attr:`episodes` (oldest dropped).

    Attributes
    ----------
    episodes : list of DataFrames, one per finished episode.
    """

    def __init__(self, env: gym.Env, max_episodes: int = 100):
        gym.utils.RecordConstructorArgs.__init__(self, max_episodes=max_episodes)
        super().__init__(env)
        base = env.unwrapped
        if not hasattr(base, "records") and not hasattr(base, "view"):
            raise ValueError("RecordEpisode needs a PortBench env (quantgym.envs.portbench.env.PortBenchEnv)")
        self.tickers = tuple(base.view.tickers)
        self.max_episodes = int(max_episodes)
        self.episodes: list[pd.DataFrame] = []
        self._rows: list[dict[str, Any]] = []
        self._episode = -1

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._flush()
        self._episode += 1
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "turnover" in info:  # a traded decision (not an S1/S2 sub-step or a retry)
            base = self.env.unwrapped
            rec = base.records[-1]
            scores = info.get("stage_scores") or {}
            row: dict[str, Any] = {
                "episode": self._episode, "step": len(self._rows), "date": pd.Timestamp(info["date"]),
                "nav_after_trade": float(rec["nav_after_trade"]), "nav": float(info["nav"]), "reward": float(reward), "turnover": float(info["turnover"]),
                "cost": float(info["cost"]), "ceps": info.get("ceps", np.nan), "pas": info.get("pas", np.nan),
            }
            for s in STAGE_KEYS:
                row[s] = scores.get(s, np.nan)
            row["invalid"] = ",".join(sorted(info.get("invalid") or {}))
            weights = rec.get("weights", {})
            for t in self.tickers:
                row[f"w_{t}"] = float(weights.get(t, 0.0))
            self._rows.append(row)
        if terminated or truncated:
            self._flush()
        return obs, reward, terminated, truncated, info

    def _flush(self) -> None:
        if self._rows:
            self.episodes.append(self._frame(self._rows))
            self.episodes = self.episodes[-self.max_episodes :]
            self._rows = []

    def _frame(self, rows: list[dict]) -> pd.DataFrame:
        df = pd.DataFrame(rows)
        for c in ("ceps", "pas", *STAGE_KEYS):
            df[c] = pd.to_numeric(df[c], errors="coerce")
        return df

    def to_dataframe(self) -> pd.DataFrame:
        """All recorded steps (finished episodes and the current one) in one DataFrame."""
        frames = list(self.episodes)
        if self._rows:
            frames.append(self._frame(self._rows))
        if not frames:
            return pd.DataFrame(columns=["episode", "step", "date", "nav_after_trade", "nav", "reward", "turnover", "cost", "ceps", "pas",
                                         *STAGE_KEYS, "invalid", *(f"w_{t}" for t in self.tickers)])
        return pd.concat(frames, ignore_index=True)


__all__ = ["RecordEpisode", "STAGE_KEYS"]
