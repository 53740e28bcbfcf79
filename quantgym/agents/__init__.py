"""Policies that are not a task's own: LLM agents on any OpenAI-compatible endpoint
(:mod:`quantgym.agents.llm`) and agent specs on the command line (:mod:`quantgym.agents.registry`).

The evaluation loop is :mod:`quantgym.evaluation`; a task's classical baselines, RL training and LLM
adapter live in its folder (PortBench: :mod:`quantgym.envs.portbench.baselines`,
:mod:`quantgym.envs.portbench.rl`, :mod:`quantgym.envs.portbench.llm`).
"""
