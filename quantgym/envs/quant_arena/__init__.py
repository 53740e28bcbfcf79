"""Quant-Arena: the sealed quant research loop (spec ``quant_arena.md``, scoring ``qa-v1``).

Environments ``QuantArena-v0`` / ``QuantArena-OneShot-v0`` (:mod:`.env`), the cash-account
evaluator (:mod:`.evaluator`), metrics and score (:mod:`.metrics`), data and the
point-in-time view (:mod:`.data`), the sandbox harness (:mod:`.harness`,
:mod:`._child_runner`), records, plots, the bench section and the classical submissions
(:mod:`.examples`). Kept import-light: the sandbox child imports this package.
"""
