"""PortBench static QA layer (spec ``portbench.md`` §9, §10.4–10.5, §11.9).

Public API::

    from quantgym.envs.portbench.static_qa import (
        QAConfig, QAPair, QAItem, QAGenerator, get_generator, dumps_jsonl,
        score_response, aggregate, qa_ceps_spearman, OraclePolicy, NaivePolicy, run_qa,
    )
    env = gymnasium.make("PortBench-QA-v0", split="test", restricted="both")

Submodules are imported lazily so ``import quantgym.envs.portbench.static_qa.cli`` stays cheap.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "QAConfig": "config", "QA_VERSION": "config", "TEMPLATES": "config", "T7_DIRECTIONS": "config",
    "SYSTEM_PROMPT": "config",
    "QAPair": "base",
    "QAItem": "generator", "QAGenerator": "generator", "get_generator": "generator", "dumps_jsonl": "generator",
    "score_response": "scorer", "ScoreResult": "scorer",
    "aggregate": "aggregate", "summary_from_template_means": "aggregate", "qa_ceps_spearman": "aggregate",
    "spearman": "aggregate", "TABLE_COLUMNS": "aggregate",
    "OraclePolicy": "policies", "NaivePolicy": "policies", "make_reference_policy": "policies",
    "render_prompt": "prompt",
    "PortBenchQAEnv": "env",
    "run_qa": "runner", "QARun": "runner",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
