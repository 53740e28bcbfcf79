"""The one place where the bootstrap's settings live (a [project choice]; docs/uncertainty.md).

Every interval and Sharpe-difference test in quantgym (:mod:`quantgym.stats.bootstrap`) takes a
:class:`BootstrapConfig`; the default instance :data:`DEFAULT_BOOTSTRAP` is what the benches use.

- ``seed = 16``: fixed, so every interval is reproducible bit for bit (the seed is the issue number).
- ``n_boot = 2000`` resamples: the Monte Carlo error of a 2.5 % percentile with B = 2000 is about
  ``sqrt(0.025·0.975/2000) ≈ 0.35`` percentage points of probability, small beside the sampling
  uncertainty being measured; the smallest bootstrap p-value is ``1/(B+1) ≈ 0.0005``.
- ``confidence = 0.95``: two-sided intervals from the 2.5 % and 97.5 % points.
- block length: ``block_length=None`` uses the automatic choice of Politis & White (2004) (with the
  correction of Patton, Politis & White 2009) through ``arch.bootstrap.optimal_block_length`` -- its
  ``stationary`` estimate for the stationary bootstrap (Politis & Romano 1994), its ``circular``
  estimate for the circular block bootstrap of the Sharpe-difference test -- rounded up to an integer,
  at least 1 and at most ``n // 2``; an integer ``block_length`` fixes it for every series instead
  (``1`` gives the iid bootstrap).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BootstrapConfig:
    """Settings of every bootstrap in quantgym (see the module docstring for why these values).

    Attributes
    ----------
    seed : seed of the resampler (``arch.bootstrap``'s ``seed``; one fresh generator per call).
    n_boot : number of bootstrap resamples ``B``.
    confidence : two-sided confidence level of the intervals, in (0, 1).
    block_length : None = Politis–White (2004) automatic choice per series; an int ≥ 1 = fixed mean
        block length (stationary bootstrap) / block length (circular block bootstrap).
    min_obs : fewer observations than this give no interval (None bounds), not a meaningless one.
    """

    seed: int = 16
    n_boot: int = 2000
    confidence: float = 0.95
    block_length: int | None = None
    min_obs: int = 10

    def __post_init__(self) -> None:
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence!r}")
        if self.n_boot < 1:
            raise ValueError(f"n_boot must be >= 1, got {self.n_boot!r}")
        if self.block_length is not None and int(self.block_length) < 1:
            raise ValueError(f"block_length must be None or >= 1, got {self.block_length!r}")

    @property
    def block_rule(self) -> str:
        """How the block length is chosen, as written into results."""
        return "politis-white-2004" if self.block_length is None else f"fixed-{int(self.block_length)}"

    def to_dict(self) -> dict:
        return {"seed": self.seed, "n_boot": self.n_boot, "confidence": self.confidence,
                "block_rule": self.block_rule}


#: the settings the benches use
DEFAULT_BOOTSTRAP = BootstrapConfig()

__all__ = ["BootstrapConfig", "DEFAULT_BOOTSTRAP"]
