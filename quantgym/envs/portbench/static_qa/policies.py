"""Reference policies of the QA layer: an oracle (ground truth, must score 1.0) and a naive floor.

A QA policy is any callable ``f(observation, info) -> str`` (or an object with ``act(observation,
info)``); ``info`` is the ``reset`` info of :class:`~.env.PortBenchQAEnv` (id, template, assets, …).
"""

from __future__ import annotations

from typing import Any

from quantgym.envs.portbench.universe import ASSET_CLASSES
from quantgym.envs.portbench.static_qa.base import fmt_weights
from quantgym.envs.portbench.static_qa.config import QAConfig
from quantgym.envs.portbench.static_qa.generator import get_generator

#: naive constant answers per template (an uninformed agent; shows each template's floor)
NAIVE_ANSWERS: dict[str, str] = {
    "T1": "flat",
    "T2": "-0.0200",
    "T3": "1.0",
    "T6": "no",
    "T7": "Regime: sideways; Allocations: " + ", ".join(f"{c}: neutral" for c in ASSET_CLASSES),
}


class OraclePolicy:
    """Answers every item with its ground truth (looked up by ``info["id"]``).

    T2/T3 answer the unrounded numeric truth (``repr``); the other templates answer the §9.2 answer
    string. Scores 1.0 on every template, restricted variants included (tested).

    Parameters
    ----------
    data : PortBenchData, optional
        Must be the data the env was built on (default: the bundled data).
    fidelity : {"clean", "paper"}
    config : QAConfig, optional
    """

    name = "oracle"
    #: evaluator-side: answers with the real tickers (:func:`~.runner.run_qa` writes them as aliases blind)
    answers_real_tickers = True

    def __init__(self, data=None, fidelity: str = "clean", config: QAConfig | None = None):
        self._gen = get_generator(data, config, fidelity)

    def answer(self, pair_id: str) -> str:
        pair = self._gen.by_id(pair_id)
        if pair.template in ("T2", "T3") and pair.answer_numeric is not None:
            return repr(float(pair.answer_numeric))
        return pair.answer

    def act(self, observation: Any, info: dict) -> str:
        return self.answer(info["id"])

    __call__ = act


class NaivePolicy:
    """Always the same uninformed answer per template: flat, VaR -2 %, full position, equal weight,
    no rebalance, sideways with every class neutral (:data:`NAIVE_ANSWERS`)."""

    name = "naive"
    #: the equal weight is written over the real tickers of ``info["assets"]`` (aliases when blind, run_qa)
    answers_real_tickers = True

    def act(self, observation: Any, info: dict) -> str:
        t = info["template"].split("_")[0]
        if t in ("T4", "T5"):
            assets = list(info["assets"])
            return fmt_weights(assets, [1.0 / len(assets)] * len(assets))
        return NAIVE_ANSWERS[t]

    __call__ = act


def make_reference_policy(spec: str, data=None, fidelity: str = "clean", config: QAConfig | None = None):
    """``"oracle"`` or ``"naive"`` -> the policy; ValueError otherwise."""
    if spec == "oracle":
        return OraclePolicy(data, fidelity, config)
    if spec == "naive":
        return NaivePolicy()
    raise ValueError(f"unknown reference policy {spec!r}; expected 'oracle' or 'naive'")
