"""Registration of every quantgym environment id with Gymnasium.

One table, one place: each task adds its ids here with a lazy string entry
point, so importing :mod:`quantgym` stays cheap.
"""

from __future__ import annotations

#: env id -> (entry point, default kwargs)
ENV_SPECS: dict[str, tuple[str, dict]] = {
    "PortBench-Conservative-v0": ("quantgym.envs.portbench.env:PortBenchEnv", {"profile": "conservative"}),
    "PortBench-Balanced-v0": ("quantgym.envs.portbench.env:PortBenchEnv", {"profile": "balanced"}),
    "PortBench-Aggressive-v0": ("quantgym.envs.portbench.env:PortBenchEnv", {"profile": "aggressive"}),
    "PortBench-QA-v0": ("quantgym.envs.portbench.static_qa.env:PortBenchQAEnv", {}),
    # Quant-Arena (spec quant_arena.md)
    "QuantArena-v0": ("quantgym.envs.quant_arena.env:QuantArenaEnv", {"mode": "iterative"}),
    "QuantArena-OneShot-v0": ("quantgym.envs.quant_arena.env:QuantArenaEnv", {"mode": "oneshot"}),
    # Market-Bench (spec market_bench.md)
    "MarketBench-Scheduled-v0": ("quantgym.envs.market_bench.env:MarketBenchEnv", {"strategy": "scheduled"}),
    "MarketBench-Pairs-v0": ("quantgym.envs.market_bench.env:MarketBenchEnv", {"strategy": "pairs"}),
    "MarketBench-DeltaHedge-v0": ("quantgym.envs.market_bench.env:MarketBenchEnv", {"strategy": "delta_hedge"}),
}


#: env id -> batched vector entry point (``gym.make_vec(id, num_envs, vectorization_mode="vector_entry_point")``)
VECTOR_ENTRY_POINTS: dict[str, str] = {
    "PortBench-Conservative-v0": "quantgym.wrappers.allocation:make_portbench_vector_env",
    "PortBench-Balanced-v0": "quantgym.wrappers.allocation:make_portbench_vector_env",
    "PortBench-Aggressive-v0": "quantgym.wrappers.allocation:make_portbench_vector_env",
}


def register_envs() -> None:
    """Register every id of :data:`ENV_SPECS` (idempotent)."""
    import gymnasium as gym

    for env_id, (entry_point, kwargs) in ENV_SPECS.items():
        if env_id in gym.registry:
            continue
        gym.register(id=env_id, entry_point=entry_point, kwargs=dict(kwargs), disable_env_checker=False,
                     vector_entry_point=VECTOR_ENTRY_POINTS.get(env_id))
