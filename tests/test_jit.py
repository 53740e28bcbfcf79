"""quantgym.jit: the lazily compiled kernels and their interpreted twin (QUANTGYM_JIT=0)."""

import subprocess
import sys

import numpy as np
import pytest

from quantgym.jit import jit_enabled, njit


@njit
def _cumulate(x):
    out = np.empty_like(x)
    acc = 0.0
    for i in range(x.shape[0]):
        acc = acc * 0.5 + x[i] / 3.0
        out[i] = acc
    return out


def test_compiled_equals_interpreted_bit_for_bit():
    x = np.random.default_rng(0).normal(size=1000)
    assert np.array_equal(_cumulate(x), _cumulate.py_func(x))


def test_switch_off(monkeypatch):
    monkeypatch.setenv("QUANTGYM_JIT", "0")
    assert not jit_enabled()

    @njit
    def f(a):
        return a + 1

    assert f(1) == 2 and f.py_func(1) == 2


def test_fastmath_refused():
    with pytest.raises(ValueError, match="fastmath"):
        njit(fastmath=True)


def test_import_quantgym_does_not_load_numba():
    code = "import sys, quantgym, quantgym.jit; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@njit
def _half(a):
    return a * 0.5 + 1.0 / 3.0


@njit
def _sum_halves(x):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += _half(x[i])
    return acc


def test_kernel_calling_a_kernel_compiles_as_one_and_equals_interpreted():
    x = np.random.default_rng(1).normal(size=500)
    want = 0.0
    for v in x.tolist():
        want += v * 0.5 + 1.0 / 3.0
    assert _sum_halves(x) == _sum_halves.py_func(x) == want
    assert type(_sum_halves._quantgym_dispatcher()).__name__ == "CPUDispatcher"
