"""Compiled kernels: the one place where quantgym uses numba (docs/performance.md).

The evaluators' hot loops (a day loop whose days depend on the previous one, a per-event order-book
walk, a per-step trade) cannot be vectorised across their sequential axis; where a profile shows
such a loop dominating, the task module writes it once as a plain-Python function over numpy arrays
and scalars and wraps it with :func:`njit`. The same source is then

- compiled by numba (``nopython``, ``cache=True``, no ``fastmath``: IEEE arithmetic in the written
  order, so results are bit-identical to the interpreted function as long as the kernel does not
  call numpy reductions whose summation order numba changes, e.g. ``np.sum`` on more than 8 values;
  write such sums as explicit loops in the order the reference uses), or
- run as ordinary Python when ``QUANTGYM_JIT=0`` is set (debugging, coverage, the Market-Bench
  mutation suite, or a platform without numba wheels): same numbers, only slower.

numba is imported on the first call of a wrapped kernel, never at ``import quantgym`` (start-up time,
``benchmarks/bench_startup.py``), and never inside the sandbox child (agent code cannot load it,
:mod:`quantgym.sandbox`). Compiled machine code is cached on disk by numba (next to the module,
or in numba's user-wide cache directory when the package directory is read-only; ``NUMBA_CACHE_DIR``
moves it), so only the first process on a machine pays the compile time.

A kernel may call another kernel wrapped by :func:`njit` (e.g. a shared exact summation, or itself
recursively): when it is compiled, the names of such wrappers among its globals resolve to their numba
dispatchers; interpreted, the wrappers are plain calls.
"""

from __future__ import annotations

import functools
import os
import types
from typing import Any, Callable

import numpy as np

__all__ = ["jit_enabled", "njit", "np_sum", "interpreted", "prefetch", "uncompiled"]


def jit_enabled() -> bool:
    """True unless ``QUANTGYM_JIT`` is ``0``/``false``/``no``/``off`` (read at each kernel's first call)."""
    return os.environ.get("QUANTGYM_JIT", "1").strip().lower() not in ("0", "false", "no", "off")


def uncompiled(dirs: "list[str | os.PathLike[str]]") -> bool:
    """True when the package folders ``dirs`` hold kernels and none of them is in numba's disk cache yet.

    A module counts when its source wraps a kernel (``@njit``); it is cached when its folder's
    ``__pycache__`` holds a numba cache index of it (``<module>.<kernel>-<line>.py<ver>.nbi``). So this is
    True on the first run of an installation (every kernel a run calls compiles) and False once any of
    them has been compiled; a run of a task whose kernels its job never calls stays True. Without numba or
    the in-tree cache (``QUANTGYM_JIT=0``, ``NUMBA_CACHE_DIR`` set, or a read-only folder, where numba
    caches elsewhere) it is False. Reads file names and sources only; does not import numba.
    """
    if not jit_enabled() or os.environ.get("NUMBA_CACHE_DIR"):
        return False
    found = False
    for d in map(os.fspath, dirs):
        try:
            names = sorted(n for n in os.listdir(d) if n.endswith(".py"))
        except OSError:
            continue
        stems = []
        for n in names:
            try:
                with open(os.path.join(d, n), encoding="utf-8") as fh:
                    if "@njit" in fh.read():
                        stems.append(n[:-3] + ".")
            except (OSError, UnicodeDecodeError):
                continue
        if not stems:
            continue
        if not os.access(d, os.W_OK):
            return False
        found = True
        try:
            cached = os.listdir(os.path.join(d, "__pycache__"))
        except OSError:
            cached = []
        if any(c.endswith(".nbi") and c.startswith(tuple(stems)) for c in cached):
            return False
    return found


def njit(fn: Callable[..., Any] | None = None, **options: Any) -> Callable[..., Any]:
    """Wrap ``fn`` as a lazily compiled numba ``njit(cache=True)`` kernel (see module docstring).

    Usable bare (``@njit``) or with numba options (``@njit(boundscheck=False)``); ``fastmath`` is
    refused (it would change results). The wrapper compiles on its first call and then dispatches
    straight to numba; with ``QUANTGYM_JIT=0`` (at that first call) it calls ``fn`` itself.
    ``wrapper.py_func`` is always the interpreted function.

    Called from another kernel, a kernel is compiled once per argument types, not once per constant
    argument (:func:`_typed_without_literals`), which keeps a first run's compile time down. A small hot
    helper whose speed depends on a constant argument (``np_sum(x, 0, n)``: a start offset known to be 0)
    takes ``literals=True`` to keep numba's per-constant specialisation.

    A kernel may call other kernels wrapped here (helpers, by their module-level name): when it is
    compiled, those names are bound to the helpers' numba dispatchers (compiled with it), so numba
    sees one call graph; interpreted, the names call the wrappers as usual. numba's disk cache checks
    only the kernel's own source file, so the cache entry of a kernel that calls kernels of other
    files is stamped with those files too (editing a helper recompiles its callers).

    Raises
    ------
    ValueError
        ``fastmath`` among the options.
    """
    if options.get("fastmath"):
        raise ValueError("quantgym.jit.njit: fastmath changes results; kernels must stay bit-identical")
    literals = bool(options.pop("literals", False))

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        impl: list[Callable[..., Any]] = []  # what calls go to: the numba dispatcher, or f itself

        def dispatcher() -> Callable[..., Any]:
            """The numba dispatcher of ``f`` (created once; numba compiles it at its first call), or ``f``
            itself with ``QUANTGYM_JIT=0``."""
            if not impl:
                impl.append(_compile(f, call, files, options, literals) if jit_enabled() else f)
            return impl[0]

        def files() -> set[str]:
            """Source files of ``f`` and of every kernel it calls, transitively."""
            out = {f.__code__.co_filename}
            for name in f.__code__.co_names:
                dep = f.__globals__.get(name)
                if hasattr(dep, "_quantgym_files") and dep is not call:
                    out |= dep._quantgym_files()
            return out

        @functools.wraps(f)
        def call(*args: Any, **kwargs: Any) -> Any:
            return (impl[0] if impl else dispatcher())(*args, **kwargs)

        call.py_func = f  # type: ignore[attr-defined]
        call._quantgym_dispatcher = dispatcher  # type: ignore[attr-defined]
        call._quantgym_files = files  # type: ignore[attr-defined]
        return call

    return wrap(fn) if fn is not None else wrap


def interpreted(kernel: Callable[..., Any], **helpers: Callable[..., Any]) -> Callable[..., Any]:
    """The interpreted source of ``kernel`` with some of the kernels it calls replaced by Python callables.

    How a user-defined model (a plain Python object, e.g. a fee model of :mod:`quantgym.models`) runs
    inside a compiled loop: the loop runs as Python (slower), its call to the built-in model's kernel
    goes to ``helpers[name]`` instead, and every other kernel it calls stays compiled.

    Raises
    ------
    ValueError
        A name in ``helpers`` that the kernel does not call.
    """
    f = kernel.py_func  # type: ignore[attr-defined]
    unknown = sorted(set(helpers) - set(f.__code__.co_names))
    if unknown:
        raise ValueError(f"quantgym.jit.interpreted: {f.__name__} calls no {', '.join(unknown)}")
    ns = {**f.__globals__, **helpers}
    return types.FunctionType(f.__code__, ns, f.__name__, f.__defaults__, f.__closure__)


@functools.lru_cache(maxsize=None)
def _prefetch_intrinsic() -> Any:
    """numba intrinsic ``(a, j) -> None``: LLVM's ``llvm.prefetch`` (read, high locality, data) of the cache line
    of ``a.flat[j]``, ``a`` a C-contiguous array; built at the first compile (numba is imported lazily)."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def prefetch(typingctx, a, j):
        if not isinstance(a, types.Array) or not isinstance(j, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            ptr = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
            i32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]), "llvm.prefetch.p0i8")
            builder.call(fn, [ptr, i32(0), i32(3), i32(1)])
            return context.get_dummy_value()

        return types.void(a, j), codegen

    return prefetch


class _Prefetch:
    """``prefetch(a, j)`` in a kernel: a hint that the kernel reads the cache line of ``a.flat[j]`` soon (no value
    changes; an address outside ``a`` is not read; ``a`` C-contiguous). Compiled, :func:`njit` binds the name to
    LLVM's ``llvm.prefetch`` as it binds other kernels (the ``_quantgym_dispatcher`` protocol); interpreted
    (``QUANTGYM_JIT=0``) the call does nothing. For a loop whose next iteration reads a row it can name
    before it needs it (e.g. the next env's row in a batched step)."""

    def __call__(self, a: np.ndarray, j: int) -> None:
        return None

    @staticmethod
    def _quantgym_dispatcher() -> Any:
        return _prefetch_intrinsic()

    @staticmethod
    def _quantgym_files() -> set[str]:
        return {__file__}


prefetch = _Prefetch()


def _stamp(path: str) -> tuple[float, int]:
    """(mtime, size) of a source file, numba's own cache stamp."""
    st = os.stat(path)
    return st.st_mtime, st.st_size


def _compile(f: Callable[..., Any], wrapper: Callable[..., Any], files: Callable[[], set[str]],
             options: dict, literals: bool = False) -> Callable[..., Any]:
    """numba dispatcher of ``f``. Global names of other :func:`njit` wrappers (or of ``f``'s own wrapper,
    for recursion) are bound to their dispatchers in a copy of ``f``'s globals; the disk-cache entry is
    stamped with the source files of those kernels too (else: no disk cache rather than a stale one)."""
    import numba  # lazy: import quantgym must not load numba

    g = f.__globals__
    deps = [name for name in f.__code__.co_names if hasattr(g.get(name), "_quantgym_dispatcher")]

    def make(cache: bool) -> Any:
        if not deps:
            return numba.njit(cache=cache, **options)(f)
        ns = dict(g)
        target = types.FunctionType(f.__code__, ns, f.__name__, f.__defaults__, f.__closure__)
        target.__qualname__, target.__module__, target.__doc__ = f.__qualname__, f.__module__, f.__doc__
        disp = numba.njit(cache=cache, **options)(target)
        for name in deps:  # numba resolves globals when it compiles (first call), so self-reference works
            ns[name] = disp if g[name] is wrapper else g[name]._quantgym_dispatcher()
        return disp

    _lean_numba(numba)
    disp = make(True)
    others = sorted(files() - {f.__code__.co_filename})
    if others:
        cache_file = getattr(getattr(disp, "_cache", None), "_cache_file", None)
        if cache_file is not None and hasattr(cache_file, "_source_stamp"):
            cache_file._source_stamp = (cache_file._source_stamp, *[(p, *_stamp(p)) for p in others])
        else:  # a numba without that attribute: no disk cache rather than a stale one
            disp = make(False)
    if not literals:
        _typed_without_literals(disp)
    return disp


def _typed_without_literals(disp: Any) -> None:
    """Make a kernel called from another kernel compile once per argument *type*, not once per constant.

    numba types a constant argument of a call between compiled functions as a literal (``Literal[int](-1)``,
    ``Literal[bool](False)``) and compiles the callee once per distinct constant (numba's
    ``Dispatcher.get_call_template`` passes the caller's argument types as they are). A helper called as
    ``f(x, -1)`` and ``f(x, 1)`` and ``f(x, i)`` was thus compiled three times, with all its own callees,
    on a first run. Here the callee is typed and compiled for the non-literal types only (one
    specialisation, the one an interpreted call would also get); LLVM still inlines and constant-folds
    small helpers into their callers. Calls from Python are unaffected (they never carry literals).
    """
    orig = getattr(disp, "get_call_template", None)
    if orig is None:  # pragma: no cover - a numba without that method: literal specialisation kept
        return
    from numba.core import types as nbtypes

    def get_call_template(args: tuple, kws: dict) -> Any:
        return orig(tuple(nbtypes.unliteral(a) for a in args), {k: nbtypes.unliteral(v) for k, v in kws.items()})

    disp.get_call_template = get_call_template


_LEAN: list[bool] = []


def _lean_numba(numba: Any) -> None:
    """Slice assignment (``a[i:j] = b``) in a kernel raises a fixed message on a shape mismatch.

    numba's CPU lowering of an array slice assignment formats a message with both shapes
    (``numba.np.arrayobj.raise_with_shape_context``), which compiles numba's ``str(int)``, ``repr``,
    ``str.join`` and f-string machinery into every process that compiles such a kernel: measured on a
    first ``quantgym bench``, several seconds of compile time for an error path a correct kernel never
    takes. Its generic-target variant, used here, raises the same ``ValueError`` with a constant message
    (``cannot assign slice from input of different size``). Applied once per process, before the first
    kernel compiles; a numba without that hook is left as it is.
    """
    if _LEAN:
        return
    _LEAN.append(True)
    try:
        from numba.np import arrayobj
        from numba.extending import overload
    except ImportError:  # pragma: no cover - numba layout changed: keep its own message
        return
    if not callable(getattr(arrayobj, "raise_with_shape_context", None)):  # pragma: no cover
        return

    def raise_with_shape_context(src_shapes, index_shape):
        raise ValueError("cannot assign slice from input of different size")

    @overload(raise_with_shape_context)
    def _ol(src_shapes, index_shape):
        def impl(src_shapes, index_shape):
            raise ValueError("cannot assign slice from input of different size")
        return impl

    arrayobj.raise_with_shape_context = raise_with_shape_context


@njit(literals=True)  # called as np_sum(x, 0, n) in hot loops: the constant offset is worth its copy
def np_sum(a, lo, n):
    """``float(a[lo:lo + n].sum())`` of a 1-D float64 array, in numpy's summation order (a kernel).

    numpy adds a contiguous float64 vector pairwise (``pairwise_sum`` of its ``add`` loop) onto the
    reduction's initial 0.0: fewer than 8 values one by one; up to 128 in eight interleaved partial sums
    combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the rest one by one; a longer
    block is the sum of its halves split at ``n/2`` rounded down to a multiple of 8. This is that order
    (the halving done with an explicit stack: numba's on-disk cache does not handle recursive kernels), so
    a kernel that needs a numpy sum bit for bit calls it instead of a sequential loop (tested against
    ``numpy.sum`` on random lengths 0 to 3,000).
    """
    if n <= 128:
        return 0.0 + _np_sum_block(a, lo, n)
    # post-order walk of the halving tree: frame = (start, length, children done)
    f_lo = np.empty(64, dtype=np.int64)
    f_n = np.empty(64, dtype=np.int64)
    f_done = np.zeros(64, dtype=np.int64)
    vals = np.empty(64)
    sp, nv = 0, 0
    f_lo[0], f_n[0], f_done[0] = lo, n, 0
    while sp >= 0:
        m = f_n[sp]
        if m <= 128:
            vals[nv] = _np_sum_block(a, f_lo[sp], m)
            nv += 1
            sp -= 1
            continue
        half = m // 2
        half -= half % 8
        if f_done[sp] == 2:  # both halves summed: left + right
            nv -= 1
            vals[nv - 1] = vals[nv - 1] + vals[nv]
            sp -= 1
            continue
        f_done[sp] += 1
        start = f_lo[sp] if f_done[sp] == 1 else f_lo[sp] + half
        size = half if f_done[sp] == 1 else m - half
        sp += 1
        f_lo[sp], f_n[sp], f_done[sp] = start, size, 0
    return 0.0 + vals[0]


@njit(literals=True)  # np_sum's block: specialised with it
def _np_sum_block(a, lo, n):
    """numpy's ``pairwise_sum`` of ``a[lo:lo + n]`` for ``n <= 128`` (no halving; :func:`np_sum`)."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    m = n - n % 8
    i = 8
    while i < m:
        j = lo + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res
