"""Quant-Arena: the sealed quant research loop (spec ``quant_arena.md``, scoring ``qa-v1``).

Split the way Qlib splits a backtest: the exchange (:mod:`.exchange`: price limits, the
simulated book walk, fees), the cash account (:mod:`.account`) and the executor that runs one
candidate on one window (:mod:`.executor`). Around them: environments ``QuantArena-v0`` /
``QuantArena-OneShot-v0`` (:mod:`.env`) and their brief and feedback text (:mod:`.prompts`),
metrics and score (:mod:`.metrics`), the panel and its loaders (:mod:`.data`), the
point-in-time view (:mod:`.pit`), the sandbox hand-off (host side :mod:`.handoff`; child side
:mod:`.child`), records, plots, the bench section, the classical submissions
(:mod:`.examples`) and the bundled-data builder (:mod:`.build_data`). Kept import-light: the
sandbox child imports this package.
"""
