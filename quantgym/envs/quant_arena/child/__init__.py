"""Code that runs inside the Quant-Arena sandbox child (spec quant_arena.md §10.4).

:mod:`.runner` is the module the sandbox launches (``RUNNER`` in
:mod:`~quantgym.envs.quant_arena.handoff`): its pre-lockdown hook forks the commit-reveal
keeper; :mod:`.harness` replays the decision dates on the agent's module. Both are
trusted code imported before lockdown; the host side of the hand-off is
:mod:`~quantgym.envs.quant_arena.handoff`.
"""
