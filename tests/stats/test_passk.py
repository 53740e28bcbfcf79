"""Unbiased pass@k (Chen et al. 2021): brute-force enumeration of every k-subset, stability, intervals."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from quantgym.stats.passk import estimate_over_rounds, pass_at_k


def _brute_force(n: int, c: int, k: int) -> float:
    """Share of the k-subsets of n attempts (the first c pass) that hold at least one pass."""
    subsets = list(combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_matches_enumeration_of_all_k_subsets(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(_brute_force(n, c, k), abs=1e-12), (n, c, k)


def test_closed_forms_and_vectorised_calls():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3, abs=1e-15)  # pass@1 = c / n
    assert pass_at_k(10, 0, 5) == 0.0 and pass_at_k(10, 6, 5) == 1.0  # n - c < k: every subset passes
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - math.comb(3, 3) / math.comb(5, 3), abs=1e-15)
    out = pass_at_k([5, 5, 6], [0, 2, 6], 3)
    assert out.shape == (3,) and np.allclose(out, [0.0, 0.9, 1.0])


def test_stable_for_large_n_where_binomials_overflow_floats():
    # C(2000, 1000) ~ 2e600 overflows float64; the product form does not need it
    n, c, k = 2000, 3, 1000
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)  # exact integers (Python big ints)
    assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-12)
    with pytest.raises(OverflowError):
        float(math.comb(n, k))


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="n >= k"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 0)


def test_interval_over_rounds_is_a_clipped_t_interval():
    n, c = [5, 5, 5, 5, 5], [0, 1, 3, 5, 2]
    est = estimate_over_rounds(n, c, 3)
    per = [_brute_force(5, ci, 3) for ci in c]
    assert est["per_round"] == pytest.approx(per) and est["estimate"] == pytest.approx(np.mean(per))
    half = stats.t.ppf(0.975, 4) * np.std(per, ddof=1) / math.sqrt(5)
    assert est["lo"] == pytest.approx(max(0.0, np.mean(per) - half))
    assert est["hi"] == pytest.approx(min(1.0, np.mean(per) + half))
    assert est["reason"] is None and est["n_rounds"] == 5
    one = estimate_over_rounds([4], [2], 1)
    assert one["estimate"] == pytest.approx(0.5) and one["lo"] is None
    short = estimate_over_rounds([5, 2], [1, 1], 3)
    assert short["estimate"] is None and "n >= 3" in short["reason"]
    assert estimate_over_rounds([], [], 1)["reason"] == "no round"
