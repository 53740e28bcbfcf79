"""quantgym.jit: the lazily compiled kernels and their interpreted twin (QUANTGYM_JIT=0)."""

import subprocess
import sys

import numpy as np
import pytest

from quantgym.jit import jit_enabled, njit, prefetch


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


@njit
def _sum_rows_ahead(a):
    total = 0.0
    for r in range(a.shape[0]):
        if r + 1 < a.shape[0]:
            prefetch(a, (r + 1) * a.shape[1])  # the next row's first cache line
        for c in range(a.shape[1]):
            total += a[r, c]
    return total


def test_prefetch_is_a_hint_compiled_and_a_no_op_interpreted():
    a = np.random.default_rng(1).normal(size=(64, 33))
    assert _sum_rows_ahead(a) == _sum_rows_ahead.py_func(a) == float(sum(a[r, c] for r in range(64) for c in range(33)))
    assert prefetch(a, 5) is None


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


@pytest.mark.slow
def test_editing_a_helper_in_another_file_recompiles_its_caller(tmp_path):
    # numba's disk cache checks only the kernel's own file; quantgym.jit stamps the helpers' files too
    import os
    import time

    (tmp_path / "helper_mod.py").write_text("from quantgym.jit import njit\n\n@njit\ndef h(x):\n    return x + 1.0\n")
    (tmp_path / "caller_mod.py").write_text("from quantgym.jit import njit\nfrom helper_mod import h\n\n"
                                            "@njit\ndef k(x):\n    return h(x) * 2.0\n")
    from pathlib import Path

    import quantgym

    root = str(Path(quantgym.__file__).resolve().parents[1])  # the checkout under test
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": os.pathsep.join([str(tmp_path), root])}

    def run():
        return subprocess.run([sys.executable, "-c", "import caller_mod; print(caller_mod.k(1.0))"], env=env,
                              capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()

    assert run() == "4.0" and run() == "4.0"  # compiled, then loaded from the cache
    time.sleep(1.1)
    (tmp_path / "helper_mod.py").write_text("from quantgym.jit import njit\n\n@njit\ndef h(x):\n    return x + 2.0\n")
    assert run() == "6.0"


@njit
def _signed(x, side, flag):
    return side * x if flag else x


@njit
def _three_calls(x, k):
    return _signed(x, -1, False) + _signed(x, 1, True) + _signed(x, k, True)


def test_a_helper_called_with_constants_compiles_once_per_argument_type():
    if not jit_enabled():
        pytest.skip("QUANTGYM_JIT=0")
    assert _three_calls(2.0, 3) == _three_calls.py_func(2.0, 3) == 2.0 + 2.0 + 6.0
    sigs = _signed._quantgym_dispatcher().signatures
    assert len(sigs) == 1 and "Literal" not in str(sigs[0])


@njit
def _copy_into(dst, src):
    dst[0:2] = src
    return dst


def test_slice_assignment_shape_mismatch_still_raises():
    if not jit_enabled():
        pytest.skip("QUANTGYM_JIT=0")
    assert np.array_equal(_copy_into(np.zeros(3), np.ones(2)), [1.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="cannot assign slice"):
        _copy_into(np.zeros(3), np.ones(3))


def test_uncompiled_until_a_kernel_is_cached(tmp_path, monkeypatch):
    from quantgym.jit import uncompiled

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv("QUANTGYM_JIT", raising=False)
    plain, task = tmp_path / "plain", tmp_path / "task"
    plain.mkdir()
    task.mkdir()
    (plain / "m.py").write_text("x = 1\n")
    (task / "k.py").write_text("from quantgym.jit import njit\n\n@njit\ndef f(a):\n    return a\n")
    assert not uncompiled([plain])  # no kernels: nothing to compile
    assert uncompiled([plain, task])
    (task / "__pycache__").mkdir()
    (task / "__pycache__" / "k.f-3.py311.nbi").write_bytes(b"")
    assert not uncompiled([plain, task])
    monkeypatch.setenv("QUANTGYM_JIT", "0")
    (task / "__pycache__" / "k.f-3.py311.nbi").unlink()
    assert not uncompiled([task])
