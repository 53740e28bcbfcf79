"""``PortBench-QA-v0``: the static QA layer as a one-step Gymnasium environment (spec §9, §11.9)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from quantgym._util import check_flag
from quantgym.envs.portbench.data import as_portbench_data
from quantgym.envs.portbench.static_qa.config import COMPLEXITY, FIDELITIES, REGIMES, SYSTEM_PROMPT, TEMPLATES, QAConfig
from quantgym.envs.portbench.static_qa.generator import QAItem, get_generator
from quantgym.envs.portbench.static_qa.prompt import render_prompt
from quantgym.envs.portbench.static_qa.scorer import score_response
from quantgym.spaces import AnyText, check_prompt_style

PROMPT_MAX_LENGTH = 262144
ACTION_MAX_LENGTH = 65536


class PortBenchQAEnv(gym.Env):
    """
    ## Description
    The PortBench static QA layer (spec ``portbench.md`` §9): seven question templates generated
    from the bundled real market data — T1 return direction, T2 95 % VaR, T3 position sizing, T4
    pairwise minimum-variance weights, T5 max-Sharpe weights, T6 rebalancing decision, T7 regime and
    allocation directions — plus the restricted variants T4_r/T5_r that withhold the covariance.
    One episode = one question: the agent reads the prompt and answers with free text, which is
    scored with the §9.4 partial-credit rules.

    ## Action Space
    ``AnyText(max_length=65536)``: the answer text. A non-``str`` action is an invalid answer
    (reward 0, ``info["error"]``), never an exception.

    ## Observation Space
    ``Dict(prompt=AnyText(262144), template=Discrete(7) [T1..T7], complexity=Discrete(4, start=1),
    regime=Discrete(4) [bull, bear, sideways, crisis], restricted=Discrete(2))``.

    ## Rewards
    The §9.4 score in [0, 1].

    ## Starting State
    ``reset(seed, options={"index": i})`` selects item ``i``; without an index, ``seed mod n_items``;
    without either, the next item in file order (cycling).

    ## Episode End
    ``terminated=True`` after the single step; ``truncated`` is always False.

    ## Arguments
    - ``split``: ``"test"`` (default; 2025), ``"val"``, ``"train"`` or ``"all"``.
    - ``templates``: iterable of ``"T1"``..``"T7"`` (``"T4_r"``/``"T5_r"`` add restricted items); default all.
    - ``n_per_template``: first ``n`` pairs per template in file order (default 50, the paper's tables);
      ``None`` = all.
    - ``restricted``: ``False`` (full information), ``True`` (only T4_r/T5_r) or ``"both"``.
    - ``fidelity``: ``"clean"`` (default; no answer leak, parsing fixes) or ``"paper"`` (the repo's prompt
      with the leaking ``context_summary`` and its parsing; QA layer only).
    - ``data``: None (bundled data), a :class:`~quantgym.envs.portbench.data.PortBenchData` or a data directory.
    - ``complexity``, ``regime``: optional filters (applied before ``n_per_template``).
    - ``config``: :class:`~.config.QAConfig`.
    - ``prompt_style``: "full" (default) | "compact" | "minimal" (:data:`quantgym.spaces.PROMPT_STYLES`): the
      rendering of ``prompt`` (:mod:`~.prompt`; ``info["prompt_style"]``). A rendering choice like
      ``fidelity``, so a constructor argument beside it: :class:`~.config.QAConfig` defines the questions
      and keys the cached generator. :meth:`render_prompt` re-renders the current question in any style.

    ## Data & Point-in-time
    Contexts use rows dated ``<= d - 1`` only (§9.1); T1's truth reads the 21 trading days after ``d``
    inside the generator, never in the prompt.

    ## Scoring
    ``info`` after the step: ``score``, ``correct`` (score ≥ 0.99), ``truth`` (answer string),
    ``truth_numeric``, ``prediction`` (parsed), ``error``; plus the reset fields (id, template,
    complexity, regime, restricted, assets, decision_date, split).

    ## Version History
    - v0: spec §9 / §11.9, ``QA_VERSION`` = portbench-qa-1.0.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}
    task_name = "portbench_qa"

    def __init__(self, split: str = "test", templates=None, n_per_template: int | None = 50,
                 restricted: bool | str = False, fidelity: str = "clean", data: Any = None,
                 complexity=None, regime=None, config: QAConfig | None = None, render_mode: str | None = None,
                 prompt_style: str = "full", blind: bool = False):
        if fidelity not in FIDELITIES:
            raise ValueError(f"fidelity must be one of {FIDELITIES}, got {fidelity!r}")
        if split not in ("train", "val", "test", "all"):
            raise ValueError(f"split must be 'train', 'val', 'test' or 'all', got {split!r}")
        if n_per_template is not None and int(n_per_template) < 1:
            raise ValueError(f"n_per_template must be >= 1 or None, got {n_per_template}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if isinstance(templates, str):
            templates = [t.strip() for t in templates.split(",") if t.strip()]
        self.config = config or QAConfig()
        self.fidelity = fidelity
        self.prompt_style = check_prompt_style(prompt_style)
        self.split = split
        self.render_mode = render_mode
        gen = get_generator(as_portbench_data(data), self.config, fidelity)
        #: blind mode (docs/blind.md): aliases, rebased prices, macro z-scores; the question's QABlinding
        self.blind = check_flag("blind", blind)
        if self.blind and fidelity == "paper":
            raise ValueError("blind=True runs in clean mode only: the paper-mode context summary is not blinded")
        self._qd = gen.qd if self.blind else None
        self._blinding = None
        self.items: list[QAItem] = gen.items(split, templates, None if n_per_template is None else int(n_per_template),
                                             restricted, complexity, regime)
        if not self.items:
            raise ValueError(f"no QA items for split={split!r}, templates={templates}, restricted={restricted!r}, "
                             f"complexity={complexity}, regime={regime}")
        self.observation_space = spaces.Dict({
            "prompt": AnyText(max_length=PROMPT_MAX_LENGTH),
            "template": spaces.Discrete(len(TEMPLATES)),
            "complexity": spaces.Discrete(4, start=1),
            "regime": spaces.Discrete(len(REGIMES)),
            "restricted": spaces.Discrete(2),
        })
        self.action_space = AnyText(max_length=ACTION_MAX_LENGTH)
        self._cursor = 0
        self._item: QAItem | None = None
        self._index = -1
        self._done = True
        self._last_info: dict | None = None

    @property
    def n_items(self) -> int:
        """Number of items (questions) in this env."""
        return len(self.items)

    def _obs(self, item: QAItem) -> dict:
        p = item.pair
        return {
            "prompt": self._render(item, self.prompt_style),
            "template": TEMPLATES.index(p.template),
            "complexity": COMPLEXITY[p.template],
            "regime": REGIMES.index(p.market_regime),
            "restricted": int(item.restricted),
        }

    def _base_info(self, item: QAItem) -> dict:
        p = item.pair
        return {
            "id": p.id, "index": self._index, "template": item.label, "complexity": p.complexity,
            "regime": p.market_regime, "restricted": item.restricted, "assets": list(p.assets),
            "decision_date": p.decision_date, "split": p.split, "fidelity": self.fidelity,
            "system_prompt": SYSTEM_PROMPT, "n_items": self.n_items, "prompt_style": self.prompt_style,
        } | ({"blind": True} if self.blind else {})

    def _render(self, item: QAItem, style: str) -> str:
        text = render_prompt(item, self.fidelity, style)
        return text if self._blinding is None else self._blinding.prompt(text)

    def render_prompt(self, style: str | None = None) -> str:
        """The prompt of the current question in ``style`` (None: the env's ``prompt_style``).

        Reads the state only (no item, cursor or score changes). Raises ``RuntimeError`` before
        ``reset()`` and ``ValueError`` for an unknown style.
        """
        style = self.prompt_style if style is None else check_prompt_style(style)
        if self._item is None:
            raise RuntimeError("call reset() before render_prompt()")
        return self._render(self._item, style)

    @property
    def blinding(self):
        """The current question's :class:`~.blinding.QABlinding` (evaluator side: its alias map), ``None``
        in named mode."""
        return self._blinding

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        if "index" in options and options["index"] is not None:
            idx = options["index"]
            if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)):
                raise ValueError(f"options['index'] must be an int, got {type(idx).__name__}")
            idx = int(idx)
            if not 0 <= idx < self.n_items:
                raise ValueError(f"options['index']={idx} out of range [0, {self.n_items})")
        elif seed is not None:
            idx = int(seed) % self.n_items
        else:
            idx = self._cursor
        self._cursor = (idx + 1) % self.n_items
        self._index = idx
        self._item = self.items[idx]
        if self.blind:  # aliases drawn from the episode seed (a fresh draw without one)
            from quantgym.envs.portbench.static_qa.blinding import QABlinding

            alias_seed = seed if seed is not None else int(self.np_random.integers(2**31))
            self._blinding = QABlinding(self._qd, self._item.pair.decision_date, alias_seed)
        self._done = False
        self._last_info = None
        return self._obs(self._item), self._base_info(self._item)

    def step(self, action: Any):
        if self._item is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("the episode is over (one question per episode); call reset()")
        item = self._item
        answer = action if self._blinding is None else self._blinding.answer(action)  # aliases -> tickers
        res = score_response(item.pair, answer, self.fidelity)
        self._done = True
        info = self._base_info(item)
        info.update(score=res.score, correct=res.correct, truth=item.pair.answer,
                    truth_numeric=item.pair.answer_numeric, prediction=res.prediction, error=res.error)
        self._last_info = info
        return self._obs(item), float(res.score), True, False, info

    def episode_result(self) -> dict[str, Any]:
        """The answered question for :func:`quantgym.evaluation.evaluate` (protocol ``Evaluable``): its score
        (0..1), correctness and template."""
        info = self._last_info or {}
        metrics = {k: info.get(k) for k in ("score", "correct", "template", "id", "complexity", "regime")}
        if self._blinding is not None:  # evaluator side: the question's alias map (docs/blind.md)
            metrics.update(blind=True, blind_aliases=self._blinding.record())
        return {"metrics": metrics, "period": info.get("split")}

    def render(self):
        if self.render_mode == "ansi" and self._item is not None:
            return self._render(self._item, self.prompt_style)
        return None
