"""An RL policy on PortBench's tool interface: flat ``Box`` spaces over ``tools=True`` (docs/tools.md).

:class:`ToolUsingAllocation` wraps ``gym.make("PortBench-<Profile>-v0", stagewise=True, tools=True)`` for
stable-baselines3 and friends. It drives the env only through its public ``step``: every wrapper step
sends one action a scripted policy or an LLM could send, either a tool call ``{"tool": NAME, "arguments":
{...}}`` or the stage answer (``{"views": ...}`` at S1, ``{"signals": ...}`` at S2, ``{"weights": ...}``
at S3, arrays in the answer order ``env.unwrapped.prompt_tickers``). It reads the data only from the tool
results the env returns (the observation's ``prompt``, ``info["tool"]``), parsed from their text, so what
the policy sees is point in time by construction: the toolbox's own guarantee (docs/tools.md). Of the
``Dict`` observation it reads ``available`` (the assets to answer for), nothing else.

Tool menu (:data:`MENU`, in this order, at most once per decision)
------------------------------------------------------------------
``asset_stats`` of every available asset over each window of ``windows`` (default 20, 60 and 120 trading
days), ``macro_series`` of the 17 series' latest values (``window=21, every=21``: one row, levels; z-scores
over the 21 days when blind), then ``portfolio`` (the drifted weights and the NAV). A menu entry is spent by
its call whatever the outcome, so a decision has at most ``len(menu) + 3`` steps.

Action: ``Box(−1, 1, (1 + N,))``
-------------------------------
``a[0] > 0`` calls the next unspent menu entry; ``a[0] ≤ 0``, or a spent menu, answers the current stage.
``a[1:]`` are allocation logits: the target is the softmax over the available assets of ``5·a[1:]``
(:func:`~quantgym.envs.portbench.allocation.masked_softmax`, as :class:`AllocationWrapper`); S1 answers the
views and S2 the signals derived from that target (``derived_views``, AllocationWrapper's ``s12="derived"``),
S3 the target weights. S4 and S5 the env computes from the S3 weights.

Observation: ``Box`` float32 of length ``(2·W + 2)·N + 2·17 + 2·M + 6`` (``W`` windows, ``M = W + 2`` menu entries)
--------------------------------------------------------------------------------------------------------
What this decision's tool calls returned so far (0 where not fetched): per window the return (clipped to
[−1, 10]) and annualised volatility (clipped to [0, 10]) of each asset; the macro values as
``sign(x)·log(1 + |x|)`` and their mask; the portfolio's weights and ``log`` NAV ratio since the period
start; the available assets; per menu entry ``fetched`` (its call answered) and ``spent`` (its call made);
the stage one-hot (S1, S2, S3); the stage budget left (calls and result characters, as fractions of the
budget). :func:`tool_observation_layout` gives the slices.

Reward, errors, records
-----------------------
The env's reward (0 on a tool call and on S1/S2). A call the env refuses (budget exhausted, bad arguments)
is the env's recorded ``ok=False`` result: its entry stays unfetched and ``info["tool_use"]`` counts it
(``calls``, ``errors``, ``error_kinds`` of the episode). The env records every call (``info["tool"]``,
``env.unwrapped.tool_calls``, the episode metrics). ``last_env_action`` is the dict the last step sent.
"""

from __future__ import annotations

import math
import re
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from quantgym.envs.portbench.allocation import derived_views, masked_softmax
from quantgym.envs.portbench.universe import MACRO_KEYS

#: [project choice] asset_stats windows of the menu (trading days): a month, a quarter, half a year
WINDOWS: tuple[int, ...] = (20, 60, 120)
#: macro_series arguments of the menu: the latest row of all series (a blind z-score over 21 days)
MACRO_ARGS = {"window": 21, "every": 21}
STAGE_NAMES = ("S1", "S2", "S3")
_NAV_RE = re.compile(r"\(([+-]?\d+(?:\.\d+)?)% since")


def tool_menu(windows: tuple[int, ...] = WINDOWS) -> list[dict]:
    """The wrapper's tool calls in menu order (module docstring)."""
    return ([{"tool": "asset_stats", "arguments": {"assets": [], "window": int(w)}} for w in windows]
            + [{"tool": "macro_series", "arguments": dict(MACRO_ARGS)}, {"tool": "portfolio", "arguments": {}}])


#: the default menu
MENU: tuple[dict, ...] = tuple(tool_menu())


def tool_observation_layout(n_assets: int, n_windows: int = len(WINDOWS)) -> dict[str, slice]:
    """Slices of :class:`ToolUsingAllocation`'s observation (module docstring)."""
    n, m, k = n_assets, len(MACRO_KEYS), n_windows + 2
    sizes = [(f"{what}_{i}", n) for i in range(n_windows) for what in ("return", "vol")]
    sizes += [("macro", m), ("macro_mask", m), ("weights", n), ("log_nav", 1), ("available", n),
              ("fetched", k), ("spent", k), ("stage", 3), ("budget", 2)]
    out, pos = {}, 0
    for name, size in sizes:
        out[name] = slice(pos, pos + size)
        pos += size
    return out


def _pct(cell: str) -> float:
    """``"+1.70%"`` → 0.017; anything else (``n/a``, a cut cell) → NaN."""
    cell = cell.strip()
    if not cell.endswith("%"):
        return math.nan
    try:
        return float(cell[:-1]) / 100.0
    except ValueError:
        return math.nan


def _lines(result: dict) -> list[str]:
    """The result's lines without a cut last line and the truncation marker (docs/tools.md)."""
    lines = str(result.get("content") or "").splitlines()
    if result.get("truncated"):
        lines = lines[:-2]  # the marker and the line it cut
    return lines


class ToolUsingAllocation(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Flat ``Box`` spaces over a PortBench env in tool mode (module docstring).

    Parameters
    ----------
    env : ``gym.make("PortBench-<Profile>-v0", stagewise=True, tools=True, ...)``.
    windows : the ``asset_stats`` windows of the menu (trading days; a window the toolbox refuses is the env's
        ``bad_arguments`` result, counted in ``info["tool_use"]``).

    Raises
    ------
    ValueError
        An env not in tool mode, or without ``available`` in its observation.
    """

    def __init__(self, env: gym.Env, windows: tuple[int, ...] = WINDOWS):
        gym.utils.RecordConstructorArgs.__init__(self, windows=tuple(windows))
        super().__init__(env)
        base = env.unwrapped
        if getattr(base, "toolbox", None) is None:
            raise ValueError("ToolUsingAllocation needs a PortBench env in tool mode: "
                             "gym.make('PortBench-Balanced-v0', stagewise=True, tools=True)")
        if not {"available", "stage"} <= set(getattr(env.observation_space, "spaces", {})):
            raise ValueError("ToolUsingAllocation reads obs['available'] and obs['stage']: keep them in obs_keys")
        self.windows = tuple(int(w) for w in windows)
        if not self.windows:
            raise ValueError("windows must name at least one asset_stats window")
        self.menu = tool_menu(self.windows)
        self.n_assets = n = int(base.n_assets)
        self.layout = lay = tool_observation_layout(n, len(self.windows))
        size = lay["budget"].stop
        lo, hi = np.zeros(size, np.float32), np.ones(size, np.float32)
        for i in range(len(self.windows)):
            lo[lay[f"return_{i}"]], hi[lay[f"return_{i}"]] = -1.0, 10.0
            hi[lay[f"vol_{i}"]] = 10.0
        lo[lay["macro"]], hi[lay["macro"]] = -10.0, 10.0
        lo[lay["log_nav"]], hi[lay["log_nav"]] = -10.0, 10.0
        self.observation_space = spaces.Box(lo, hi, dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1 + n,), np.float32)
        self._index: dict[str, int] = {}
        self._vec = np.zeros(size, np.float64)
        self._next = 0
        self._available = np.zeros(n, bool)
        self._stage = 0
        self._left = (1.0, 1.0)
        self._use: dict[str, Any] = {}
        self.last_env_action: dict | None = None

    # ------------------------------------------------------------------------------ observation
    def _new_decision(self) -> None:
        self._next = 0
        self._vec[:] = 0.0

    def _read(self, obs: dict, info: dict, answered: int | None = None) -> np.ndarray:
        """Update the state from a step's observation and info; the flat observation. ``answered``: the stage
        the step answered (None for reset and a tool call)."""
        if answered is None and info.get("tool") is None or answered == 2:  # reset, or a new decision
            self._new_decision()
        self._available = np.asarray(obs["available"], bool)
        self._stage = int(np.asarray(obs["stage"]).reshape(-1)[0])
        b = info.get("tool_budget") or {}
        calls, chars = max(int(b.get("calls", 0)), 1), max(int(b.get("chars", 0)), 1)
        if answered is None:  # reset (a fresh budget) or a tool call: the budget left as the env states it
            left = info.get("tool") or b
            self._left = (left.get("calls_left", calls) / calls, left.get("chars_left", chars) / chars)
        else:  # an answer opens the next stage, whose budget is fresh (docs/tools.md)
            self._left = (1.0, 1.0)
        lay, v = self.layout, self._vec
        v[lay["available"]] = self._available
        v[lay["spent"]] = np.arange(len(self.menu)) < self._next
        v[lay["stage"]] = np.arange(3) == self._stage
        v[lay["budget"]] = self._left
        return np.clip(v, self.observation_space.low, self.observation_space.high).astype(np.float32)

    def _parse(self, entry: int, result: dict) -> bool:
        """Write the tool result of menu entry ``entry`` into the state; False when it holds no data."""
        lay, v = self.layout, self._vec
        lines = _lines(result)
        if entry < len(self.windows):  # asset_stats: "id | return | ann. volatility | daily returns"
            r, s = lay[f"return_{entry}"], lay[f"vol_{entry}"]
            for line in lines[2:]:
                cells = line.split(" | ")
                i = self._index.get(cells[0])
                if i is None or len(cells) != 4:
                    continue
                ret, vol = _pct(cells[1]), _pct(cells[2])
                v[r.start + i] = np.clip(ret, -1.0, 10.0) if ret == ret else 0.0
                v[s.start + i] = np.clip(vol, 0.0, 10.0) if vol == vol else 0.0
            return len(lines) > 2
        if entry == len(self.windows):  # macro_series: "day | key key ...", then one row per day
            if len(lines) < 3:
                return False
            keys = lines[1].split(" | ", 1)[1].split()
            cells = lines[-1].split(" | ", 1)[1].split()
            for key, cell in zip(keys, cells):
                try:
                    x = float(cell)
                except ValueError:  # n/a: no value known yet
                    continue
                j = MACRO_KEYS.index(key)
                v[lay["macro"].start + j] = np.clip(np.sign(x) * np.log1p(abs(x)), -10.0, 10.0)
                v[lay["macro_mask"].start + j] = 1.0
            return True
        # portfolio: "NAV ... (+2.16% since the start of the period)", "holdings (k assets): ID w, ID w"
        m = _NAV_RE.search(lines[0]) if lines else None
        if m is None:
            return False
        v[lay["log_nav"]] = np.clip(math.log1p(float(m.group(1)) / 100.0), -10.0, 10.0)
        w = lay["weights"]
        v[w] = 0.0
        held = lines[1].split(": ", 1)[1] if len(lines) > 1 and ": " in lines[1] else ""
        for item in filter(None, held.split(", ")):
            name, _, weight = item.rpartition(" ")
            i = self._index.get(name)
            if i is not None:
                try:
                    v[w.start + i] = float(weight)
                except ValueError:
                    continue
        return True

    # ------------------------------------------------------------------------------ actions
    def answer(self, logits: np.ndarray) -> dict:
        """The stage answer of allocation logits ``logits`` (N,) at the current stage (module docstring)."""
        w = masked_softmax(np.asarray(logits, np.float64), self._available)
        if self._stage == 0:
            return {"views": derived_views(w, self._available)[0], "status": 0}
        if self._stage == 1:
            return {"signals": derived_views(w, self._available)[1], "status": 0}
        return {"weights": w, "status": 0}

    def env_action(self, action: np.ndarray) -> tuple[dict, int | None]:
        """(the env action of a Box action, the menu entry it calls or None for an answer)."""
        a = np.asarray(action, dtype=np.float64).reshape(-1)
        if a.shape != (1 + self.n_assets,) or not np.all(np.isfinite(a)):
            raise ValueError(f"action must be {1 + self.n_assets} finite numbers, got shape {np.shape(action)}")
        if a[0] > 0 and self._next < len(self.menu):
            call = self.menu[self._next]
            return {"tool": call["tool"], "arguments": dict(call["arguments"])}, self._next
        return self.answer(a[1:]), None

    # ------------------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._index = {t: i for i, t in enumerate(self.env.unwrapped.prompt_tickers)}  # the answer ids
        self._use = {"calls": 0, "errors": 0, "error_kinds": {}}
        self.last_env_action = None
        info = dict(info)
        info["tool_use"] = self._tool_use()
        return self._read(obs, info), info

    def _tool_use(self) -> dict:
        return {**self._use, "error_kinds": dict(self._use["error_kinds"])}

    def step(self, action):
        act, entry = self.env_action(action)
        self.last_env_action = act
        obs, reward, terminated, truncated, info = self.env.step(act)
        info = dict(info)
        if entry is not None:
            self._next = entry + 1  # spent, whatever the outcome
            result = info["tool"]
            self._use["calls"] += 1
            fetched = bool(result.get("ok")) and self._parse(entry, result)
            if not result.get("ok"):
                self._use["errors"] += 1
                kinds = self._use["error_kinds"]
                kinds[result.get("error")] = kinds.get(result.get("error"), 0) + 1
            self._vec[self.layout["fetched"].start + entry] = float(fetched)
        info["tool_use"] = self._tool_use()
        return self._read(obs, info, None if entry is not None else self._stage), float(reward), terminated, \
            truncated, info


class ToolPolicy:
    """A model's action on :class:`ToolUsingAllocation` as a :class:`~quantgym.evaluation.Policy`:
    ``evaluate(env_id, ToolPolicy(model), period=...)`` builds the tool-mode env, wraps it and records every
    step (tool calls included) as for any policy.

    ``model``: anything with SB3's ``predict(obs, deterministic=...)``. ``deterministic=False`` samples the
    policy's actions; ``seed`` (an int) then reseeds the model at each episode start (SB3's
    ``set_random_seed``), so a sampled evaluation is reproducible.
    """

    def __init__(self, model: Any, name: str = "SB3-tools", windows: tuple[int, ...] = WINDOWS,
                 deterministic: bool = True, seed: int | None = None):
        self.model, self.name, self.windows = model, name, tuple(windows)
        self.deterministic, self.seed = bool(deterministic), seed
        self.env_kwargs = {"stagewise": True, "tools": True}

    def wrap_env(self, env: gym.Env) -> gym.Env:
        return ToolUsingAllocation(env, windows=self.windows)

    def reset(self, env: gym.Env) -> None:
        if self.seed is not None and callable(getattr(self.model, "set_random_seed", None)):
            self.model.set_random_seed(int(self.seed))

    def act(self, observation: np.ndarray, info: dict) -> np.ndarray:
        action, _ = self.model.predict(observation, deterministic=self.deterministic)
        return action


__all__ = ["ToolUsingAllocation", "ToolPolicy", "tool_menu", "tool_observation_layout", "MENU", "WINDOWS"]
