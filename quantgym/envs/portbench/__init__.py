"""PortBench (spec ``portbench.md``): the whole task in one folder, read in the spec's order.

Data -> simulation -> scoring -> env:

- **data** (§1): :mod:`.universe` (§1.1/§1.2 universe, §1.4 macro keys and rules), :mod:`.raw` (the bundled
  tables and the directory schema), :mod:`.data` (the clean-mode point-in-time panel and its loader),
  :mod:`.availability` (§11.6 availability, §1.9 regime), :mod:`.market` (the point-in-time snapshot view),
  :mod:`.correlation` (§1.6 pairwise-complete correlation, its observation form, class averages),
  :mod:`.correlation_rolling` (that observation form over a pass of a wide universe), :mod:`.build_data`
  (maintainers: rebuild the bundle);
- **simulation** (§6): :mod:`.execution` (the one pure trade-and-cost function), :mod:`.simulator` (the
  day loop and NAV accounting);
- **scoring** (§4, §5, §7): :mod:`.stages` (S1–S5 truth and scores), :mod:`.optimize` (the max-Sharpe
  solver, BLAS thread control), :mod:`.ceps`, :mod:`.profiles`;
- **env** (§11): :mod:`.config`, :mod:`.prompts`, :mod:`.env` (:class:`~.env.PortBenchEnv`), :mod:`.tools` (tool
  mode: the point-in-time toolbox, docs/tools.md), :mod:`.plots`, :mod:`.bench` (the ``quantgym bench`` section);
- agents and modes: :mod:`.baselines` (the six classical baselines, §8), :mod:`.allocation` (Box spaces for
  RL), :mod:`.training` (the RL training split), :mod:`.vector` (the batched vector env), :mod:`.paper`
  (paper-fidelity mode, ``quantgym reproduce``), :mod:`.live` (live mode, ``quantgym data refresh`` /
  ``quantgym live``), :mod:`.qa` (the static question-answer layer).

Nothing is imported here, so ``import quantgym.envs.portbench.<module>`` loads only what it needs.
"""
