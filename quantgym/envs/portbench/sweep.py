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
        from quantgym.envs.portbench.config import period_gate
        from quantgym.envs.portbench.profiles import PROFILES
        from quantgym.evaluation import evaluate

        kw = dict(spec.env_kwargs)
        kw["data"] = data if data is not None else spec.data
        res = evaluate(spec.env_id, policy, seed=spec.seed, **kw)
        # a stress window's own gate; normal_2024's needs the other runs (:meth:`gates`)
        gate = period_gate(res.period, {res.period: res.metrics["max_drawdown"]}, PROFILES[res.profile].max_drawdown)
        return res.to_dict(), res.summary_row(gate=gate)

    def gates(self, records: list[dict[str, Any]]) -> dict[str, bool]:
        """§7.2 gate of ``normal_2024`` rows (:func:`~quantgym.envs.portbench.config.period_gate`): the same
        (agent, env, other kwargs, seed) passes all three stress windows (False as soon as one of its windows
        fails). ``records`` are this task's ok run records; returns run id -> gate (none while unknown)."""
        from quantgym.envs.portbench.config import NORMAL_PERIOD, period_gate
        from quantgym.envs.portbench.profiles import PROFILES

        mdds: dict[str, dict[str, float]] = {}  # group -> period -> max drawdown
        normal: dict[str, tuple[str, float]] = {}  # run id -> (group, drawdown tolerance of its profile)
        for r in records:
            s = r["spec"]
            res = r["result"]
            key = json.dumps([s["agent"], s["env_id"], {k: v for k, v in s["env_kwargs"].items() if k != "period"},
                              s["seed"], s["agent_options"]], sort_keys=True)
            mdds.setdefault(key, {})[res.get("period")] = res["metrics"]["max_drawdown"]
            if res.get("period") == NORMAL_PERIOD:
                normal[r["run_id"]] = (key, PROFILES[res["profile"]].max_drawdown)
        gates = {rid: period_gate(NORMAL_PERIOD, mdds[key], tol) for rid, (key, tol) in normal.items()}
        return {rid: g for rid, g in gates.items() if g is not None}


HOOKS = PortBenchSweep()

__all__ = ["HOOKS", "PortBenchSweep"]
