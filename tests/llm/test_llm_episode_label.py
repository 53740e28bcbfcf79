"""An LLM agent's episode label names the env by values only (id, profile, period, track, blind), so the
same episode gets the same label in every run and two runs' transcripts compare line by line."""

from __future__ import annotations

import itertools
import threading
from types import SimpleNamespace

import gymnasium as gym

import quantgym  # noqa: F401  (registers the ids)
from quantgym.agents.llm.agents import LLMAgent


def _label(env) -> str:
    return LLMAgent._label(SimpleNamespace(_lock=threading.Lock(), _counter=itertools.count(1)), env)


def test_portbench_label_names_values_only():
    named = gym.make("PortBench-Balanced-v0", stagewise=True, period="covid_2020")
    blind = gym.make("PortBench-Balanced-v0", stagewise=True, period="covid_2020", blind=True)
    assert _label(named) == "PortBench-Balanced-v0/balanced/covid_2020#1"
    assert _label(blind) == "PortBench-Balanced-v0/balanced/covid_2020/blind#1"


def test_quant_arena_label_keeps_its_track():
    env = gym.make("QuantArena-OneShot-v0")
    assert _label(env).startswith("QuantArena-OneShot-v0/") and "/oneshot" in _label(env)
