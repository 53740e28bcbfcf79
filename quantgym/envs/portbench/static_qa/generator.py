"""QA set generator: candidate-date order, per-template streams, caching, serialisation (spec §9.1).

Each template walks the §9.1 candidate-date order (:func:`~.context.candidate_order`), draws its assets
with ``random.Random(d.toordinal() + k)`` (k = 0…5 for T1…T6; T7 uses SPY), builds the pair from the
point-in-time context and skips a failing date, until it has ``cap`` (1 000) pairs or the dates run out.
Pairs are produced lazily and cached per process: the published test tables need only the first 50
test pairs per template (≈ the first 150 dates of the interleaved order); :meth:`QAGenerator.all_pairs`
builds the full set (a few seconds). The same data, config and fidelity give byte-identical output
(:func:`dumps_jsonl`) in any process: no salted ``hash``, no global RNG.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import random
from dataclasses import dataclass
from typing import Iterable, Sequence

from quantgym.envs.portbench.data import PortBenchData, load_portbench_data
from quantgym.envs.portbench.static_qa import (
    t1_return, t2_var, t3_sizing, t4_pair, t5_sharpe, t6_rebalance, t7_regime,
)
from quantgym.envs.portbench.static_qa.base import QAPair
from quantgym.envs.portbench.static_qa.config import COMPLEXITY, FIDELITIES, REGIMES, RESTRICTABLE, TEMPLATES, QAConfig
from quantgym.envs.portbench.static_qa.context import SPLIT_NAMES, QAData, candidate_order, compute_splits

#: template id -> module (``select``, ``build``, ``SEED_OFFSET``; T4/T5 also ``restrict``)
TEMPLATE_MODULES = {
    "T1": t1_return, "T2": t2_var, "T3": t3_sizing, "T4": t4_pair,
    "T5": t5_sharpe, "T6": t6_rebalance, "T7": t7_regime,
}


@dataclass(frozen=True)
class QAItem:
    """One evaluation item: a pair, full or restricted (T4_r/T5_r share the pair, §9.2)."""

    pair: QAPair
    restricted: bool = False

    @property
    def label(self) -> str:
        """``"T4"`` or ``"T4_r"``."""
        return f"{self.pair.template}_r" if self.restricted else self.pair.template

    @property
    def question(self) -> str:
        """The question text, with the covariance lines removed for a restricted item."""
        if self.restricted:
            return TEMPLATE_MODULES[self.pair.template].restrict(self.pair.question)
        return self.pair.question


class _Stream:
    __slots__ = ("pos", "pairs", "done")

    def __init__(self):
        self.pos = 0
        self.pairs: list[QAPair] = []
        self.done = False


class QAGenerator:
    """Lazy, cached generator of the QA set for one data object, config and fidelity.

    Parameters
    ----------
    data : PortBenchData
        Market data (clean-mode arrays; the QA layer uses them in both fidelities).
    config : QAConfig
    fidelity : {"clean", "paper"}
        ``paper``: T4 positional alignment with ddof-0 stds, gradient-free T5 SLSQP, the repo's T7
        wording. The paper-mode prompt leak is applied by :func:`~.prompt.render_prompt`.
    """

    def __init__(self, data: PortBenchData, config: QAConfig | None = None, fidelity: str = "clean"):
        if fidelity not in FIDELITIES:
            raise ValueError(f"fidelity must be one of {FIDELITIES}, got {fidelity!r}")
        self.config = config or QAConfig()
        self.fidelity = fidelity
        self.qd = QAData(data, self.config)
        self.splits = compute_splits(data, self.config)
        self.order = candidate_order(data, self.config)
        self._streams = {t: _Stream() for t in TEMPLATES}
        self._ctx: dict[_dt.date, object] = {}
        self._ids: dict[str, QAPair] = {}

    # -- production ------------------------------------------------------------------------------
    def _context(self, d: _dt.date):
        ctx = self._ctx.get(d)
        if ctx is None:
            ctx = self.qd.context(d)
            ctx.validate_pit()
            self._ctx[d] = ctx
        return ctx

    def _next(self, template: str) -> QAPair | None:
        """Produce the template's next pair (None when the cap is reached or the dates run out)."""
        st = self._streams[template]
        mod = TEMPLATE_MODULES[template]
        config = self.config
        while not st.done:
            if len(st.pairs) >= config.cap or st.pos >= len(self.order):
                st.done = True
                break
            d, split = self.order[st.pos]
            st.pos += 1
            rng = random.Random(d.toordinal() + mod.SEED_OFFSET)
            assets = mod.select(rng, self.qd.pools, config)
            if not assets:
                continue
            ctx = self._context(d)
            seq = len(st.pairs)
            out = mod.build(ctx, list(assets), seq, config, self.fidelity)
            if out is None:
                continue
            pair = QAPair(
                id=f"{template}_all_{d:%Y%m%d}_{seq:04d}", template=template, complexity=COMPLEXITY[template],
                split=split, market_regime=ctx.regime, asset_class="all", assets=tuple(assets),
                decision_date=d.isoformat(), seq=seq, context_summary=out.context_summary,
                question=out.question, answer=out.answer, answer_numeric=out.answer_numeric,
                explanation=out.explanation, metadata=out.metadata,
            )
            st.pairs.append(pair)
            self._ids[pair.id] = pair
            return pair
        return None

    def pairs(self, template: str, split: str | None = None, n: int | None = None) -> list[QAPair]:
        """The template's pairs in file (generation) order, optionally one split, at most ``n``.

        Raises
        ------
        ValueError
            Unknown template or split.
        """
        if template not in TEMPLATES:
            raise ValueError(f"unknown template {template!r}; expected one of {TEMPLATES}")
        if split is not None and split not in SPLIT_NAMES:
            raise ValueError(f"unknown split {split!r}; expected one of {SPLIT_NAMES}")
        st = self._streams[template]

        def have() -> list[QAPair]:
            return [p for p in st.pairs if split is None or p.split == split]

        got = have()
        while (n is None or len(got) < n) and not st.done:
            p = self._next(template)
            if p is not None and (split is None or p.split == split):
                got.append(p)
        return got if n is None else got[:n]

    def all_pairs(self, templates: Sequence[str] = TEMPLATES) -> list[QAPair]:
        """The full set (every template to its cap), template by template in file order."""
        return [p for t in templates for p in self.pairs(t)]

    def counts(self) -> dict[str, dict[str, int]]:
        """Per-template pair counts by split (builds the full set)."""
        out = {}
        for t in TEMPLATES:
            ps = self.pairs(t)
            out[t] = {s: sum(p.split == s for p in ps) for s in SPLIT_NAMES}
            out[t]["total"] = len(ps)
        return out

    def by_id(self, pair_id: str) -> QAPair:
        """Look a pair up by id (generating its template up to it if needed).

        Raises
        ------
        KeyError
            If no pair has this id.
        """
        if pair_id in self._ids:
            return self._ids[pair_id]
        t = pair_id.split("_", 1)[0]
        if t in TEMPLATES:
            st = self._streams[t]
            while pair_id not in self._ids and not st.done:
                self._next(t)
        if pair_id not in self._ids:
            raise KeyError(f"no QA pair with id {pair_id!r}")
        return self._ids[pair_id]

    def items(self, split: str = "test", templates: Iterable[str] | None = None, n_per_template: int | None = 50,
              restricted: bool | str = False, complexity: int | Sequence[int] | None = None,
              regime: str | Sequence[str] | None = None) -> list[QAItem]:
        """Evaluation items (spec §9.3, §11.9).

        Parameters
        ----------
        split : {"train", "val", "test"} or "all"
        templates : iterable of "T1".."T7" (default all); ``"T4_r"``/``"T5_r"`` select restricted items.
        n_per_template : int or None
            First ``n`` pairs per template of the split in file order (after the filters); None = all.
        restricted : bool or "both"
            False: full-information items; True: only the restricted T4_r/T5_r of the selected templates;
            ``"both"``: full items then T4_r/T5_r (the paper's 9 columns).
        complexity, regime : optional filters (levels 1–4; §1.9 labels), applied before taking ``n``.

        Returns
        -------
        list of QAItem, template order T1..T7 (restricted items after the full ones).
        """
        sp = None if split == "all" else split
        wanted = list(TEMPLATES) if templates is None else [str(t) for t in templates]
        base, extra_r = [], []
        for t in wanted:
            if t.endswith("_r") and t[:-2] in RESTRICTABLE:
                extra_r.append(t[:-2])
            elif t in TEMPLATES:
                base.append(t)
            else:
                raise ValueError(f"unknown template {t!r}; expected T1..T7, T4_r or T5_r")
        if restricted not in (False, True, "both"):
            raise ValueError(f"restricted must be False, True or 'both', got {restricted!r}")
        levels = None if complexity is None else {int(c) for c in ([complexity] if isinstance(complexity, int) else complexity)}
        regs = None if regime is None else ({regime} if isinstance(regime, str) else set(regime))
        if regs is not None and not regs <= set(REGIMES):
            raise ValueError(f"unknown regime(s) {sorted(regs - set(REGIMES))}; expected {REGIMES}")

        def select(t: str) -> list[QAPair]:
            if levels is not None and COMPLEXITY[t] not in levels:
                return []
            if regs is None:
                return self.pairs(t, sp, n_per_template)
            ps = [p for p in self.pairs(t, sp) if p.market_regime in regs]
            return ps if n_per_template is None else ps[:n_per_template]

        full_ts = [] if restricted is True else base
        r_ts = [t for t in dict.fromkeys((base if restricted in (True, "both") else []) + extra_r)
                if t in RESTRICTABLE]
        items = [QAItem(p, False) for t in full_ts for p in select(t)]
        items += [QAItem(p, True) for t in r_ts for p in select(t)]
        return items


@functools.lru_cache(maxsize=8)
def _cached_generator(data: PortBenchData, config: QAConfig, fidelity: str) -> QAGenerator:
    return QAGenerator(data, config, fidelity)


def get_generator(data: PortBenchData | None = None, config: QAConfig | None = None,
                  fidelity: str = "clean") -> QAGenerator:
    """The process-wide cached :class:`QAGenerator` for (data object, config, fidelity).

    ``data=None`` -> the bundled real data (:func:`quantgym.envs.portbench.data.load_portbench_data`).
    """
    if fidelity not in FIDELITIES:
        raise ValueError(f"fidelity must be one of {FIDELITIES}, got {fidelity!r}")
    return _cached_generator(load_portbench_data() if data is None else data, config or QAConfig(), fidelity)


def dumps_jsonl(pairs: Iterable[QAPair]) -> bytes:
    """Canonical JSONL bytes of ``pairs`` (sorted keys, UTF-8): the unit of the byte-identity guarantee."""
    lines = [json.dumps(p.to_dict(), sort_keys=True, ensure_ascii=False, allow_nan=False) for p in pairs]
    return ("\n".join(lines) + "\n").encode("utf-8")
