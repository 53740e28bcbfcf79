"""Policies: the evaluation loop, classical baselines (and, in later modules, LLM and RL agents)."""

from quantgym.agents.base import EvalResult, Policy, evaluate
from quantgym.envs.portbench.baselines import BASELINES, make_baseline

__all__ = ["EvalResult", "Policy", "evaluate", "BASELINES", "make_baseline"]
