"""PortBench paper-fidelity mode (spec ``portbench.md`` Appendix A, §10, §11.1).

Every repo behaviour that shaped the published numbers is a named flag of
:class:`~quantgym.envs.portbench.paper.config.PaperFidelity`; ``fidelity="paper"`` switches
all of them on, and single flags can be switched on top of clean mode. Modules:
``config`` (the flags), ``data`` (paper data transformation), ``market`` (own-calendar
snapshots), ``simulator`` (the paper day loop and a direct-allocation backtest runner),
``reproduce`` (the §10 reproduction and the ablation), ``cli`` (``quantgym reproduce``).
"""

from quantgym.envs.portbench.paper.config import PAPER_FLAGS, PAPER_STOCKS, PaperFidelity

__all__ = ["PaperFidelity", "PAPER_FLAGS", "PAPER_STOCKS"]
