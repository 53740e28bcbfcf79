"""The PortBench observation view (spec §11.2): the observation space and the observation of a decision.

:class:`ObservationView` builds the row-dependent entries of a decision row once (clean mode: cached per dataset
and row in the :class:`~quantgym.envs.portbench.market.RowCache`) and each observation from them plus the
portfolio state. Every value is clipped to its ``Box`` bound; :meth:`ObservationView.observe` returns how many
values of each entry were clipped (the env's ``info["clipped"]``). A missing value set to 0 (a price or return
of an unavailable asset, a NaN correlation off the diagonal) is masking, not clipping, and is not counted.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium import spaces

from quantgym.envs.portbench.correlation import obs_corr
from quantgym.envs.portbench.market import ASSET_CLASSES, REGIMES, obs_window
from quantgym.jit import njit
from quantgym.spaces import AnyText

#: observation keys in the order of the observation dict
OBS_KEYS = ("returns", "returns_mask", "price", "trailing_return", "ann_vol", "corr", "class_id", "available",
            "weights", "nav", "macro", "macro_mask", "regime", "stage", "prev_views", "prev_signals")
#: the Box bounds of the clipped float entries (spec §11.2)
BOUNDS = {"returns": (-1.0, 10.0), "price": (0.0, 1e7), "trailing_return": (-1.0, 1e3), "ann_vol": (0.0, 1e3),
          "corr": (-1.0, 1.0), "weights": (0.0, 1.0), "nav": (0.0, 1e3), "macro": (-1e3, 1e3),
          "prev_views": (-1.0, 1.0)}
#: the O(N) row entries clipped to their bounds (the window returns are counted apart)
_ROW_CLIPPED = ("price", "trailing_return", "ann_vol", "macro")


def check_obs_keys(obs_keys: Sequence[str] | str | None, text_obs: bool = False) -> tuple[str, ...]:
    """The observation's entries for ``obs_keys`` (None: all), in :data:`OBS_KEYS` order.

    Raises ValueError on an unknown key, and on an empty ``obs_keys`` without ``text_obs`` (the
    observation would hold nothing).
    """
    keys = OBS_KEYS if obs_keys is None else ((obs_keys,) if isinstance(obs_keys, str) else tuple(obs_keys))
    unknown = [k for k in keys if k not in OBS_KEYS]
    if unknown:
        raise ValueError(f"obs_keys: unknown {unknown} (the prompt follows text_obs); valid: {', '.join(OBS_KEYS)}")
    if not keys and not text_obs:
        raise ValueError("obs_keys is empty and text_obs is False: the observation would hold nothing")
    return tuple(k for k in OBS_KEYS if k in keys)


def observation_space(n: int, lookback: int, n_macro: int, obs_keys: Sequence[str], text_obs: bool) -> spaces.Dict:
    """The observation space over ``n`` assets (see :class:`~quantgym.envs.portbench.env.PortBenchEnv`)."""
    f64 = np.float64

    def box(key, shape):
        return spaces.Box(*BOUNDS[key], shape, f64)

    obs = {
        "returns": box("returns", (lookback, n)),
        "returns_mask": spaces.MultiBinary((lookback, n)),
        "price": box("price", (n,)),
        "trailing_return": box("trailing_return", (n,)),
        "ann_vol": box("ann_vol", (n,)),
        "corr": box("corr", (n, n)),
        "class_id": spaces.MultiDiscrete([len(ASSET_CLASSES)] * n),
        "available": spaces.MultiBinary(n),
        "weights": box("weights", (n,)),
        "nav": box("nav", (1,)),
        "macro": box("macro", (n_macro,)),
        "macro_mask": spaces.MultiBinary(n_macro),
        "regime": spaces.Discrete(len(REGIMES)),
        "stage": spaces.Discrete(3),
        "prev_views": box("prev_views", (n,)),
        "prev_signals": spaces.MultiDiscrete([3] * n),
    }
    obs = {k: v for k, v in obs.items() if k in obs_keys}
    if text_obs:
        obs["prompt"] = AnyText(max_length=262144)
    return spaces.Dict(obs)


@njit
def clip_count(x, lo, hi, out):
    """``out[:] = np.clip(x, lo, hi)`` for 1-D float64 arrays: numpy's result (NaN kept, then ``lo if v < lo``,
    then ``hi if v > hi``; signed zeros as numpy's, :func:`~quantgym.envs.portbench.ceps.clip_float`). Returns
    the number of values moved to a bound."""
    moved = 0
    for i in range(x.shape[0]):
        v = x[i]
        if not np.isnan(v):
            if v < lo:
                v = lo
                moved += 1
            if v > hi:
                v = hi
                moved += 1
        out[i] = v
    return moved


def _outside(x: np.ndarray, key: str) -> int:
    """The number of values of ``x`` outside the bounds of ``key`` (NaN is not counted)."""
    lo, hi = BOUNDS[key]
    return int(np.count_nonzero((x < lo) | (x > hi)))


#: the O(N) observation entries :func:`_small_rows` holds for every row
_SMALL_ROWS = ("price", "trailing_return", "ann_vol", "available", "macro", "macro_mask")


def _small_rows(view) -> dict | None:
    """The O(N) observation entries of every data row at once (speed only: the values of
    :meth:`ObservationView._small` on the row's snapshot, vectorised over the dates), from the per-dataset
    table (:func:`~.market.row_table`); computed once per dataset and window config. None without the table.

    ``{entry: (T, N) read-only array, "clipped": {entry: (T,) counts outside the bounds}, "shift": decision row
    − data row}``. An entry with nothing to clip or replace is the table's own array."""
    table = view.table()
    if table is None:
        return None

    def compute() -> dict:
        out = {"clipped": {}, "shift": 1 if view.config.as_of == "previous_close" else 0}
        for k in _ROW_CLIPPED:
            x = table[k]
            counts = np.count_nonzero((x < BOUNDS[k][0]) | (x > BOUNDS[k][1]), axis=1)
            if k == "price":
                x = np.nan_to_num(x, nan=0.0)
            out[k] = np.clip(x, *BOUNDS[k]) if counts.any() else x
            out["clipped"][k] = counts
        out["available"] = table["available"].astype(np.int8)
        out["macro_mask"] = table["macro_mask"].astype(np.int8)
        for k in _SMALL_ROWS:
            out[k].flags.writeable = False
        return out

    return view.shared("obs_small", compute, per_config=True)


def _returns_outside(view) -> bool:
    """Whether any return of ``view``'s dataset lies outside the observation's bounds (else no window has a
    clipped value); computed once per dataset."""
    return view.shared(("returns_outside", BOUNDS["returns"]),
                       lambda: bool(_outside(view.returns, "returns") > 0))


def _read_only_views(out: dict[str, Any]) -> dict[str, Any]:
    for k, v in out.items():
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
            out[k] = v.view()  # handed out in observations: a view of a read-only array stays read-only
    return out


class ObservationView:
    """The observations of a PortBench env over ``view`` (a :class:`~quantgym.envs.portbench.market.MarketView`).

    ``obs_keys``: the entries kept (:func:`check_obs_keys`); ``cached``: the row entries are cached per dataset
    and row (clean mode); ``corr_with_snapshot``: the snapshot's correlation is read too (scoring, prompts), so
    both forms are computed in one pass.
    """

    def __init__(self, view, obs_keys: tuple[str, ...], cached: bool, corr_with_snapshot: bool):
        self.view = view
        self.lookback = view.config.lookback
        self.obs_keys = obs_keys
        self.dropped = tuple(k for k in OBS_KEYS if k not in obs_keys)
        self.cached = cached
        self.corr_with_snapshot = corr_with_snapshot
        self._clipped_key = ("obs_clipped", "returns" in obs_keys)  # the row cache's key of the clip counts

    def row(self, snap, parts=None) -> tuple[dict[str, Any], dict[str, int]]:
        """The row-dependent entries of the decision of ``snap`` (read-only arrays) in the order of the
        observation dict (the portfolio entries are placeholders filled by :meth:`observe`), and the counts of
        their clipped values. ``parts``: the row's cache (:meth:`MarketView.row_cache`), if at hand."""
        if not self.cached:
            return self._row_static(snap)
        view, t = self.view, int(snap.t)
        parts = view.row_cache(t) if parts is None else parts
        template = parts.get("obs_template")
        if template is None:  # the O(N) entries in observation order, the large ones to fill in
            small = self._small(snap, _small_rows(view))
            template = parts.put("obs_template", {k: small.get(k) for k in OBS_KEYS})
        row = template.copy()
        keys = self.obs_keys
        # views of the cached read-only arrays: an observation cannot make them writeable; an entry
        # left out by obs_keys stays None here (dropped by observe) and is never computed
        observe_returns = "returns" in keys
        if observe_returns or "returns_mask" in keys:
            row["returns"] = view.row_array(t, "obs_returns").view()
            row["returns_mask"] = view.row_array(t, "obs_mask").view()
        if "corr" in keys:  # the O(N²) entry: computed only when it is observed
            if self.corr_with_snapshot:  # the snapshot's corr is read too: both at once
                view.row_array(t, "corr")
            row["corr"] = view.row_array(t, "obs_corr").view()
        clipped = parts.get(self._clipped_key)
        if clipped is None:  # the window is read only if some return of the dataset lies outside the bounds
            clipped = parts.put(self._clipped_key, self._row_clipped(
                snap, view.row_array(t, "returns") if observe_returns and _returns_outside(view) else None,
                _small_rows(view)))
        return row, clipped

    def _row_clipped(self, snap, returns: np.ndarray | None, rows: dict | None = None) -> dict[str, int]:
        """Counts of the row entries' values clipped to their bounds (entries without any left out); ``rows``:
        :func:`_small_rows` of the view, whose counts are read instead."""
        if rows is not None:
            d = snap.t - rows["shift"]
            counts = {k: int(rows["clipped"][k][d]) for k in _ROW_CLIPPED if k in self.obs_keys}
        else:
            raw = {"price": snap.price, "trailing_return": snap.trailing_return, "ann_vol": snap.ann_vol,
                   "macro": snap.macro}
            counts = {k: _outside(v, k) for k, v in raw.items() if k in self.obs_keys}
        if returns is not None and "returns" in self.obs_keys:
            counts["returns"] = _outside(returns[-self.lookback:], "returns")
        return {k: c for k, c in counts.items() if c}

    def _small(self, snap, rows: dict | None = None) -> dict[str, Any]:
        """The O(N) row-dependent observation entries (read-only arrays); ``rows``: :func:`_small_rows` of the
        view, whose rows are read instead (the same values)."""
        if rows is not None:
            d = snap.t - rows["shift"]
            class_id = snap.class_id.copy()  # a row's own (consecutive observations share no array)
            class_id.flags.writeable = False
            return {**{k: rows[k][d] for k in _SMALL_ROWS}, "class_id": class_id.view(),
                    "regime": int(REGIMES.index(snap.regime))}
        return _read_only_views({
            "price": np.clip(np.nan_to_num(snap.price, nan=0.0), *BOUNDS["price"]),
            "trailing_return": np.clip(snap.trailing_return, *BOUNDS["trailing_return"]),
            "ann_vol": np.clip(snap.ann_vol, *BOUNDS["ann_vol"]),
            "class_id": snap.class_id.copy(),
            "available": snap.available.astype(np.int8),
            "macro": np.clip(snap.macro, *BOUNDS["macro"]),
            "macro_mask": snap.macro_mask.astype(np.int8),
            "regime": int(REGIMES.index(snap.regime)),
        })

    def _row_static(self, snap) -> tuple[dict[str, Any], dict[str, int]]:
        """The row entries computed for one observation (paper views: windows on their own calendars)."""
        ret, mask = obs_window(snap.returns, self.lookback)
        out = {"returns": ret, "returns_mask": mask, **self._small(snap)}
        if "corr" in self.obs_keys:
            out["corr"] = obs_corr(snap.corr)
        out = _read_only_views(out)
        clipped = self._row_clipped(snap, snap.returns if "returns" in self.obs_keys else None)
        return {k: out.get(k) for k in OBS_KEYS}, clipped

    def observe(self, row: dict[str, Any], row_clipped: dict[str, int], as_views: bool, snap, stage: int,
                prev_views: np.ndarray, prev_signals: np.ndarray) -> tuple[dict[str, Any], dict[str, int] | None]:
        """The observation (without ``prompt``) and the counts of its clipped values (None: none clipped).

        No two consecutive calls share an array (Gymnasium's check_env): ``as_views`` hands out the row's arrays
        as read-only views of the per-row cache (writing raises; they cannot be made writeable; the first
        observation of a decision reached by ``step``); otherwise they are copied. The portfolio entries are new
        arrays every call."""
        if as_views:
            obs = dict(row)
        else:
            obs = {k: v.copy() if v is not None and type(v) is not int else v for k, v in row.items()}
        w = snap.current_weights
        obs["weights"] = weights = np.empty(w.shape[0])
        n_weights = clip_count(w, 0.0, 1.0, weights)
        nav = snap.nav
        obs["nav"] = np.array([min(max(nav, 0.0), 1e3)])
        obs["stage"] = int(stage)
        obs["prev_views"] = prev_views.copy()
        obs["prev_signals"] = prev_signals.copy()
        for k in self.dropped:  # obs_keys: a subset chosen (the row entries are left out already)
            obs.pop(k, None)
        clipped = None
        if row_clipped or n_weights or nav < 0.0 or nav > 1e3:
            clipped = dict(row_clipped)
            if n_weights and "weights" in self.obs_keys:
                clipped["weights"] = n_weights
            if (nav < 0.0 or nav > 1e3) and "nav" in self.obs_keys:
                clipped["nav"] = 1
            clipped = clipped or None
        return obs, clipped


__all__ = ["BOUNDS", "OBS_KEYS", "ObservationView", "check_obs_keys", "clip_count", "observation_space"]
