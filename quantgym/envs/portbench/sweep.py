"""PortBench's hooks for ``quantgym sweep`` (:mod:`quantgym.sweep.runner`): the data set is loaded once in
the driver and shared by every PortBench run; a run is one :func:`quantgym.evaluation.evaluate` episode
with its stress-window gate; ``normal_2024`` rows get the §7.2 gate of the same agent, env, kwargs and
seed over the three stress windows."""

from __future__ import annotations

import json
from typing import Any


class PortBenchSweep:
    """Sweep hooks of PortBench (the ``sweep`` entry of its record in :mod:`quantgym.tasks`)."""

    #: modules a sweep's fork server imports once
    preload = ("quantgym.envs.portbench.baselines", "quantgym.envs.portbench.env")

    def load_data(self, path: str | None) -> Any:
        """The :class:`~quantgym.envs.portbench.data.PortBenchData` of ``path`` (None: the bundled real data)."""
        from quantgym.envs.portbench.data import load_portbench_data

        return load_portbench_data(path) if path is not None else load_portbench_data()

    def validate(self, spec: Any, data: Any) -> None:
        """Refuse a run before the sweep starts: an unknown ``period`` (the message lists the valid ones)
        or shared data without the §1.9 regime ticker.

        Raises
        ------
        ValueError
            What is wrong and what is valid.
        """
        from quantgym.envs.portbench.config import PortBenchConfig, resolve_period

        if "period" in spec.env_kwargs:
            resolve_period(spec.env_kwargs["period"])
        if data is not None and hasattr(data, "tickers"):
            from quantgym.envs.portbench.market import check_regime_ticker

            check_regime_ticker(PortBenchConfig().regime_ticker, data.tickers, data.asset_class)

    def run(self, spec: Any, policy: Any, data: Any) -> tuple[dict[str, Any], Any]:
        """One episode of ``spec`` (a :class:`~quantgym.sweep.grid.RunSpec`) on ``data`` (shared data, or
        the spec's data directory when None): the result dict and its summary row (stress windows: gate)."""
        from quantgym.evaluation import evaluate

        kw = dict(spec.env_kwargs)
        kw["data"] = data if data is not None else spec.data
        res = evaluate(spec.env_id, policy, seed=spec.seed, **kw)
        m = res.metrics
        gate = bool(m["dd_within_tolerance"]) if m.get("is_stress_period") else None
        return res.to_dict(), res.summary_row(gate=gate)

    def gates(self, records: list[dict[str, Any]]) -> dict[str, bool]:
        """§7.2 gate of ``normal_2024`` rows: the same (agent, env, other kwargs, seed) passes all three
        stress windows. ``records`` are this task's ok run records; returns run id -> gate."""
        from quantgym.envs.portbench.config import STRESS_PERIODS

        groups: dict[str, dict[str, bool]] = {}
        normal: dict[str, str] = {}
        for r in records:
            s = r["spec"]
            m = r["result"]["metrics"]
            per = r["result"].get("period")
            key = json.dumps([s["agent"], s["env_id"], {k: v for k, v in s["env_kwargs"].items() if k != "period"},
                              s["seed"], s["agent_options"]], sort_keys=True)
            if per in STRESS_PERIODS:
                groups.setdefault(key, {})[per] = bool(m.get("dd_within_tolerance"))
            elif per == "normal_2024":
                normal[r["run_id"]] = key
        return {rid: all(groups[k].values()) for rid, k in normal.items()
                if k in groups and set(groups[k]) >= set(STRESS_PERIODS)}


HOOKS = PortBenchSweep()

__all__ = ["HOOKS", "PortBenchSweep"]
