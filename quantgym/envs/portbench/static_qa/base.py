"""QA pair record and helpers shared by the template modules (spec §9.1–§9.2)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from quantgym.envs.portbench.static_qa.config import NON_TEXT_CLASSES, TEXT_CLASSES, QAConfig

SQRT252 = float(np.sqrt(252.0))


@dataclass(frozen=True)
class QAPair:
    """One question–answer pair (spec §9.1 record).

    Attributes
    ----------
    id : str
        ``"<T>_all_<YYYYMMDD>_<seq:04d>"``.
    template : str
        ``"T1"`` … ``"T7"``.
    complexity : int
        §9.1 level 1–4.
    split : str
        ``train``, ``val`` or ``test``.
    market_regime : str
        §1.9 label at ``d - 1`` (bull/bear/sideways/crisis).
    asset_class : str
        Always ``"all"`` (§9.1).
    assets : tuple of str
        Question assets in question order.
    decision_date : str
        ISO date ``d``.
    seq : int
        Position of the pair in its template's generation order (0-based).
    context_summary : str
        The repo's short summary; leaks the answer for T3–T7 (§9.3). Shown only with
        ``fidelity="paper"``.
    question : str
        Question text (inputs + task).
    answer : str
        Ground-truth answer string in the §9.2 format.
    answer_numeric : float or None
        Numeric truth where one exists (T1 forward return, T2 VaR, T3 fraction, T5 optimal Sharpe,
        T4 first weight, T6 1/0).
    explanation : str
        Derivation of the ground truth.
    metadata : dict
        Raw numbers of the computation (structured truth: ``weights``, ``decision``, ``regime``...).
    """

    id: str
    template: str
    complexity: int
    split: str
    market_regime: str
    asset_class: str
    assets: tuple[str, ...]
    decision_date: str
    seq: int
    context_summary: str
    question: str
    answer: str
    answer_numeric: float | None
    explanation: str
    metadata: dict = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict in the §9.1 record layout."""
        return {
            "id": self.id,
            "template": self.template,
            "complexity": self.complexity,
            "split": self.split,
            "market_regime": self.market_regime,
            "asset_class": self.asset_class,
            "assets": list(self.assets),
            "decision_date": self.decision_date,
            "seq": self.seq,
            "context_summary": self.context_summary,
            "question": self.question,
            "answer": self.answer,
            "answer_numeric": self.answer_numeric,
            "explanation": self.explanation,
            "metadata": self.metadata,
        }


@dataclass(frozen=True)
class TemplateOutput:
    """What a template's ``build`` returns (the date-independent part of :class:`QAPair`)."""

    question: str
    answer: str
    answer_numeric: float | None
    context_summary: str
    explanation: str
    metadata: dict


def pick_single(rng: random.Random, pools: dict[str, tuple[str, ...]], config: QAConfig) -> list[str] | None:
    """§9.2 T1–T3 asset choice: class from equities/crypto with prob. 0.8, else a non-text class; one ticker."""
    if rng.random() < config.class_major_prob:
        cls = rng.choice(TEXT_CLASSES)
    else:
        cls = rng.choice(NON_TEXT_CLASSES)
    pool = pools.get(cls, ())
    return [rng.choice(pool)] if pool else None


def pick_four(rng: random.Random, pools: dict[str, tuple[str, ...]]) -> list[str] | None:
    """§9.2 T5/T6 asset choice: one ticker each from equities, crypto and two random non-text classes."""
    others = rng.sample(NON_TEXT_CLASSES, 2)
    out = []
    for cls in ("equities", "cryptocurrency", *others):
        pool = pools.get(cls, ())
        if not pool:
            return None
        out.append(rng.choice(pool))
    return out


def fmt_weights(assets: Sequence[str], w: Sequence[float]) -> str:
    """``"w_A=0.1234, w_B=0.8766"`` (4 decimals, §9.2 answer format)."""
    return ", ".join(f"w_{a}={float(x):.4f}" for a, x in zip(assets, w))


def fmt_macro(macro: dict[str, float]) -> str:
    """Macro dict as ``key=value`` pairs (4 decimals); keys missing in the data are omitted (§11.8)."""
    return ", ".join(f"{k}={v:.4f}" for k, v in macro.items()) if macro else "(none available)"


def ann_vol(r: np.ndarray) -> float:
    """``std(r, ddof=1)·√252`` (0 with fewer than 2 returns)."""
    return float(np.std(r, ddof=1) * SQRT252) if r.size > 1 else 0.0


def rnd(x: float, k: int = 6) -> float:
    """``round(float(x), k)`` (half to even, §0) for metadata."""
    return round(float(x), k)
