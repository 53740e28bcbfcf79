"""quantgym: Gymnasium environments that benchmark LLM agents and RL policies on finance work.

Importing the package registers every environment id with Gymnasium
(``PortBench-*-v0``, ``QuantArena-*-v0``, ``MarketBench-*-v0``), so
``gym.make("PortBench-Conservative-v0")`` works after ``import quantgym``
(and, through the ``gymnasium.envs`` entry point, even without it).
"""

from quantgym.envs import register_envs

__version__ = "0.1.0"

register_envs()

__all__ = ["__version__", "register_envs"]
